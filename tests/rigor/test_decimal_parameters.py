"""A parameter's value is the decimal it prints as: ``T = 0.1`` is ``1/10`` in certification and in the prover, as a
decimal literal in a relation is (issue 33).

Read as the double nearest it (0.1000000000000000055...), ``J_entry < 2.5`` at ``T = 0.1`` holds on every instance
(the largest entry ``1/(4T)`` stays 1.4e-17 below 2.5), so the prover proved it, while under the reading a theorist
means (and a 60-digit check uses) it is an equality at two equal logits: false. These tests fix that reading for
fixed values, range ends, normaliser values and the arithmetic tiers, and hold both halves of a tight statement:
the strict one never PROVED (refuted with the exact equality), the non-strict one never refuted.
"""

from __future__ import annotations

import json
import math
import decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.exact import ExactOps
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import backend, decimal_value
from attnbounds.theory.running import api

TIERS = ["arb", "mpmath"]


@given(hs.integers(-10**15 + 1, 10**15 - 1), hs.integers(-30, 30))
def test_a_short_decimal_is_read_back_exactly(digits: int, exponent: int) -> None:
    """Every decimal of at most 15 significant digits is the value its double stands for."""
    exact = Fraction(digits) * Fraction(10) ** exponent
    assert decimal_value(float(exact)) == exact


@given(hs.floats(allow_nan=False, allow_infinity=False), hs.floats(allow_nan=False, allow_infinity=False))
def test_the_reading_is_monotone_in_the_double(x: float, y: float) -> None:
    """So a float comparison with a fixed value or a range's end decides the comparison of the decimals."""
    if x < y:
        assert decimal_value(x) < decimal_value(y)
    elif x == y:
        assert decimal_value(x) == decimal_value(y)


@given(hs.floats(allow_nan=False, allow_infinity=False))
def test_a_computed_double_is_itself(x: float) -> None:
    """A double whose shortest decimal needs 16 or 17 digits (``sqrt(1000)``, a search's draw) is read as the double:
    an exact ball, so a structural tie of two parameters holding the same computed value stays decidable."""
    digits = len(decimal.Decimal(repr(x)).normalize().as_tuple().digits)
    assert decimal_value(x) == (Fraction(repr(x)) if digits <= 15 else Fraction(x))
    assert abs(decimal_value(x) - Fraction(x)) <= Fraction(math.ulp(x)) / 2  # in the double's rounding interval


@given(hs.fractions(max_denominator=10**30), hs.sampled_from([-1, 1]))
def test_outward_rounds_to_the_double_on_the_side_asked(x: Fraction, side: int) -> None:
    """The end of a root box computed from an exact end (a range's decimal end, ``1/L``) holds it: at most ``x``
    for side -1, at least it for +1, and the nearest such double (the next one over is on the other side)."""
    from attnbounds.theory.mathematics.intervals import outward

    if abs(x) > 2**1000:
        return
    f = outward(x, side)
    assert (Fraction(f) <= x) if side < 0 else (Fraction(f) >= x)
    beyond = math.nextafter(f, math.inf if side < 0 else -math.inf)
    assert (Fraction(beyond) > x) if side < 0 else (Fraction(beyond) < x)


def test_integers_are_themselves_and_non_finite_values_are_refused() -> None:
    assert decimal_value(3) == 3 and decimal_value(np.int64(7)) == 7 and decimal_value(2.5) == Fraction(5, 2)
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(InvalidArgument, match="finite"):
            decimal_value(bad)


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("value", [0.1, 0.3, 2.5, 1e-7, 1.0, -0.7, 123456.789])
def test_every_tier_holds_the_decimal_and_not_the_double(tier: str, value: float) -> None:
    ops = backend(tier)
    exact = decimal_value(value)
    with ops.precision(128):
        ball = ops.decimal(value)
        lo, hi = Fraction(ops.lower_float(ball)), Fraction(ops.upper_float(ball))
        assert lo <= exact <= hi
        if exact != Fraction(value):  # a ball around 1/10 that leaves the double 0.1000000000000000055... out
            assert not lo <= Fraction(value) <= hi or hi - lo > abs(Fraction(value) - exact)
            assert ops.negative(ball - ops.num(value)) or ops.positive(ball - ops.num(value))
        else:
            assert ops.exact(ball) if hasattr(ops, "exact") else hi == lo
    assert ExactOps().to_fraction(ExactOps().decimal(value)) == exact


def _equal_logits(T: float) -> Instance:
    return Instance.from_logits(np.zeros((1, 2)), nm.softmax(T), T=np.array([T]))


@pytest.mark.parametrize("strict", [False, True])
def test_certification_reads_T_as_its_decimal(strict: bool) -> None:
    """Two equal logits at T = 0.1: the largest entry of the Jacobian is 1/(4T) = 5/2 exactly."""
    user = api.statement(f"J_entry {'<' if strict else '<='} 5/2", id=f"decimal.T.{strict}", hypotheses=["softmax"],
                         fixed={"T": 0.1})
    cert = certify(user.statements[0], _equal_logits(0.1))
    assert cert.status == ("violated" if strict else "holds"), cert
    assert cert.backend == "exact"


def _prove(relation: str, **spec: Any) -> tuple[str, str | None, str]:
    user = api.statement(relation, id="decimal.prove", **spec)
    statement = user.statements[0]
    result = prover.prove(statement, work=prover.work_for(2.0))
    status = None if result.counterexample is None else certify(statement, result.counterexample).status
    return result.status, status, result.reason


SOFTMAX = {"hypotheses": ["softmax"]}
BOUNDED = {"hypotheses": ["softmax", "logits-bounded"]}
#: softmax with |l| <= a = 0.1 at T = 1: alpha_max = 1 / (1 + (L - 1) e^-0.2) exactly, at one logit a, the others -a
EQUALITIES: dict[str, tuple[str, dict[str, Any]]] = {
    "T fixed": ("J_entry {} 2.5", dict(fixed={"T": 0.1}, **SOFTMAX)),
    "T range": ("J_entry {} 2.5", dict(ranges={"T": [0.1, 0.5]}, **SOFTMAX)),
    "a fixed": ("alpha_max {} 1/(1 + (L - 1)*exp(-0.2))", dict(fixed={"a": 0.1, "T": 1.0}, **BOUNDED)),
    "T one-value range": ("J_entry {} 2.5", dict(ranges={"T": [0.1, 0.1]}, **SOFTMAX)),
}


@pytest.mark.parametrize("name", sorted(EQUALITIES))
def test_the_prover_never_proves_a_strict_bound_false_at_a_decimal_value(name: str) -> None:
    relation, spec = EQUALITIES[name]
    status, cert, reason = _prove(relation.format("<"), **spec)
    assert status != "proved", f"{name}: a strict bound whose margin is exactly 0 at the decimal value was PROVED"
    # at two equal logits (0), an instance doubles hold; at logits exactly +-1/10, which no double is, an instance
    # with exact logits
    assert status == "refuted" and cert == "violated", (status, cert, reason)


@pytest.mark.parametrize("name", sorted(EQUALITIES))
def test_the_prover_proves_the_same_bound_non_strict(name: str) -> None:
    relation, spec = EQUALITIES[name]
    status, _, _ = _prove(relation.format("<="), **spec)
    assert status == "proved"


def test_verify_refutes_the_strict_bound_at_a_range_end_with_its_exact_equality() -> None:
    relation, spec = EQUALITIES["T range"]
    record = api.check(relation.format("<"), budget=3.0, seed=0, **spec)
    assert record.verdict == "REFUTED", record


def test_the_exact_tier_refuses_an_exp_sympy_would_rewrite_without_end() -> None:
    """A scalable softmax's ``s log(L) l / T`` with ``s = 2/5`` and a tiny T: sympy rewrites ``exp(r log n)`` as
    ``n**r`` and factors ``n**(p/q)`` for a ``p`` and ``q`` of hundreds of bits, which never ends; the exact tier
    refuses it (certification stays with the interval tiers) and keeps every small one."""
    import sympy as sp

    from attnbounds.theory.mathematics.exact import EXP_REWRITE_LIMIT
    from attnbounds.theory.mathematics.intervals import Unsupported

    ops = ExactOps()
    big = sp.Rational(2, 5) * sp.Rational(*23.82885545.as_integer_ratio()) / sp.Rational(*0.0005580909350662344.as_integer_ratio())
    with pytest.raises(Unsupported, match="logarithm"):
        ops.exp(big * sp.log(637))
    assert ops.exp(sp.log(2)) == 2 and ops.exp(sp.Rational(3, 7) * sp.log(8)) == sp.Integer(8) ** sp.Rational(3, 7)
    edge = sp.Rational(EXP_REWRITE_LIMIT, 3)
    assert ops.exp(edge * sp.log(2)) == sp.Integer(2) ** edge  # at the limit: built
    with pytest.raises(Unsupported):
        ops.exp(sp.Rational(EXP_REWRITE_LIMIT + 1, 3) * sp.log(2))
    with pytest.raises(Unsupported):
        ops.exp(sp.Rational(1, EXP_REWRITE_LIMIT + 1) * sp.log(2))
    assert ops.exp(big) == sp.exp(big)  # no logarithm: kept whatever its size


def test_the_prover_realises_logits_at_a_decimal_bound_inside_it() -> None:
    """A bound false at the extreme logits +-a with a = 0.1 (by 1e-6): the prover's point has them at +-1/10, whose
    nearest double exceeds 1/10 (the instance would fail |l| <= a, not applicable); realised at the double below,
    the certificate says violated. Exact logits are for an equality no double holds: here the doubles do, and the
    counterexample is plain doubles, each at most 1/10."""
    statement = api.statement("alpha_max <= 1/(1 + (L - 1)*exp(-0.2)) - 1/1000000", id="decimal.prove",
                              fixed={"a": 0.1, "T": 1.0}, ranges={"L": [2, 10**6]}, **BOUNDED).statements[0]
    result = prover.prove(statement, work=prover.work_for(2.0))
    inst = result.counterexample
    assert result.status == "refuted" and inst is not None, result.reason
    assert certify(statement, inst).status == "violated"
    assert inst.exact_logits is None and all(Fraction(v) <= Fraction(1, 10) for v in np.abs(inst.logits).ravel())


@pytest.mark.parametrize("T", [0.1, 0.37, 2.5, 10.0])
def test_an_instance_is_a_point_of_the_relaxation_on_whole_ends_of_T(T: float) -> None:
    """Over T in [0.1, 10] the prover's coordinate is 10 T on [1, 100]; the image of an instance (what the
    relaxation-image tests check everywhere else) divides T by 1/10 there, and its margin is the instance's."""
    from attnbounds.theory.deciding.prover.image import relaxed_margins

    statement = api.statement("J_entry <= 1/(4*T) + T", id="decimal.image", ranges={"T": [0.1, 10.0]},
                              **SOFTMAX).statements[0]
    for logits in ([0.0, 0.0], [0.3, -1.2, 0.5], [2.0, 0.0, 0.0, -1.0]):
        inst = statement.prepare(Instance.from_logits(np.array([logits]), nm.softmax(T), T=np.array([T])))
        ev = statement.evaluate(inst)
        margins = [p.value for p in relaxed_margins(statement, inst) if p.ok and p.exact]
        assert margins and abs(min(margins) - float(ev.margin[0])) <= 1e-9 * (1 + abs(float(ev.rhs[0]))), \
            (logits, T, margins, float(ev.margin[0]))


#: softmax with |l| <= a = 0.3 at T = 0.7: alpha_min = 1 / (1 + (L - 1) e^(2 a / T)) exactly, at one logit -a and the
#: others +a; neither 3/10 nor its double is the other, so the equality case is a point no float64 instance reaches
LOWEST = ("alpha_min {} 1/(1 + (L - 1)*exp(6/7))", dict(fixed={"a": 0.3, "T": 0.7}, ranges={"L": [2, 50]}, **BOUNDED))


@pytest.mark.parametrize("relation, spec", [EQUALITIES["a fixed"], LOWEST], ids=["alpha_max", "alpha_min"])
def test_the_prover_refutes_a_strict_bound_at_a_decimal_logit_bound_with_exact_logits(relation: str,
                                                                                        spec: dict[str, Any]) -> None:
    """The strict bound is false only at logits exactly +-a: at the doubles below a the margin is > 0 (the float
    instance holds), so the counterexample carries its logits exactly, certified exactly violated (an exact 0) and
    read back from its JSON as it was written."""
    from attnbounds.theory.io.serialize import instance_from_json, instance_to_json

    user = api.statement(relation.format(">" if "alpha_min" in relation else "<"), id="decimal.exact", **spec)
    statement = user.statements[0]
    result = prover.prove(statement, work=prover.work_for(3.0))
    inst = result.counterexample
    assert result.status == "refuted" and inst is not None and inst.exact_logits is not None, result.reason
    a = Fraction(str(spec["fixed"]["a"]))
    assert set(np.abs(inst.exact_logits[0][inst.present[0]]).tolist()) == {a}
    cert = certify(statement, inst)
    assert cert.status == "violated" and cert.backend == "exact" and cert.margin_lo == cert.margin_hi == 0.0
    again = instance_from_json(json.loads(json.dumps(instance_to_json(inst))))
    assert (again.exact_logits == inst.exact_logits).all() and certify(statement, again).status == "violated"
    bound = float(a) if Fraction(float(a)) <= a else math.nextafter(float(a), 0.0)  # the double below a
    at_doubles = statement.prepare(Instance.from_logits(np.clip(inst.logits, -bound, bound), inst.normaliser,
                                                        counts=inst.counts, **inst.params))
    assert certify(statement, at_doubles).status == "holds"  # no double is the equality case


def test_the_non_strict_twin_holds_exactly_at_the_exact_logits() -> None:
    relation, spec = LOWEST
    statement = api.statement(relation.format(">="), id="decimal.exact", **spec).statements[0]
    a = Fraction(3, 10)
    inst = statement.prepare(Instance.from_logits(np.array([[-0.3, 0.3]]), nm.softmax(0.7), counts=np.array([[1, 6]]),
                                                  a=0.3, T=0.7).with_exact_logits([[-a, a]]))
    cert = certify(statement, inst)
    assert cert.status == "holds" and cert.backend == "exact" and cert.margin_lo == 0.0
    assert prover.prove(statement, work=prover.work_for(3.0)).status == "proved"
