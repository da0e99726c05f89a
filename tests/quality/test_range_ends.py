"""The relaxation prover at the ends of a statement's ranges (issue 35): bounds false only at (or next to) one end of
the range of L or of T are never PROVED, and are refuted with a certified counterexample; the same bounds made true
there are proved. A relaxation whose range of ``t = 1/L`` (or of T) missed an end would prove the false ones: these
tests are what catches it, and the replay refuses a certificate whose coordinate ranges were narrowed
(:mod:`tests.acceptance.test_forged_records`)."""

from __future__ import annotations

from typing import Any

import pytest

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics.normalisers import constructors_added
from attnbounds.theory.running import api

#: F = 2 + sigmoid(l / T) in (2, 3): alpha_max < 3 / (2 L + 1), approached as one logit grows and the others fall
BSIG = {"name": "bsig", "log_F": "log(2 + sigmoid(l/T))"}
#: softmax with |l| <= a: alpha_max <= e^(2a/T) / (e^(2a/T) + L - 1), attained (one logit at a, the others at -a)
SOFTMAX = {"hypotheses": ["softmax", "logits-bounded"]}
EXACT = "exp(2*a/T)/(exp(2*a/T) + L - 1)"

FALSE_AT_AN_END: dict[str, dict[str, Any]] = {
    "L_min": dict(relation="alpha_max <= 3/(2*L + 1) - 1/1000 + (L - 5)/500", normaliser=BSIG, ranges={"L": [5, 10**6]}),
    "L_max": dict(relation="alpha_max <= 3/(2*L + 1) - 1/100000 + (50 - L)/500", normaliser=BSIG, ranges={"L": [2, 50]}),
    "T_min": dict(relation=f"alpha_max <= {EXACT} - 1/10000 + (T - 1/2)/100", fixed={"a": 1.0},
                  ranges={"T": [0.5, 2.0]}, **SOFTMAX),
    "T_max": dict(relation=f"alpha_max <= {EXACT} - 1/10000 + (2 - T)/100", fixed={"a": 1.0},
                  ranges={"T": [0.5, 2.0]}, **SOFTMAX),
}
TRUE: dict[str, dict[str, Any]] = {
    "T_range": dict(relation=f"alpha_max <= {EXACT}", fixed={"a": 1.0}, ranges={"T": [0.5, 2.0]}, **SOFTMAX),
    "L_range": dict(relation="alpha_max <= 3/(2*L + 1) + 1/100000", normaliser=BSIG, ranges={"L": [5, 50]}),
}


def _prove(name: str, spec: dict[str, Any]) -> tuple[Any, Any, str | None]:
    spec = dict(spec)
    user = api.statement(spec.pop("relation"), id=f"ends.{name}", **spec)
    with constructors_added(user.normalisers):
        statement = user.statements[0]
        result = prover.prove(statement, work=prover.work_for(2.0))
        status = None if result.counterexample is None else certify(statement, result.counterexample).status
    return statement, result, status


@pytest.mark.parametrize("name", sorted(FALSE_AT_AN_END))
def test_a_bound_false_only_at_an_end_of_its_range_is_refuted(name: str) -> None:
    statement, result, status = _prove(name, FALSE_AT_AN_END[name])
    assert result.status != "proved", f"{name}: a bound false at the end of its range was PROVED"
    assert result.status == "refuted" and status == "violated", (result.status, result.reason)
    inst = result.counterexample
    if name.startswith("L_"):
        lo, hi = FALSE_AT_AN_END[name]["ranges"]["L"]
        assert lo <= inst.L <= hi  # realised inside the range: at the end where it is false
        assert inst.L == (lo if name == "L_min" else hi) or abs(inst.L - (lo if name == "L_min" else hi)) <= 1


@pytest.mark.parametrize("name", sorted(TRUE))
def test_the_same_bound_true_over_the_whole_range_is_proved(name: str) -> None:
    _, result, _ = _prove(name, TRUE[name])
    assert result.status == "proved", result.reason


#: bounds attained with equality at one end of L's range, an end whose 1/L no float holds (1/3, 1/50): softmax with
#: |l| <= 1, where L alpha_min = L / (1 + (L - 1) e^2) falls with L and alpha_max = 1 / (1 + (L - 1) e^-2) too, both
#: attained at the extreme logits
EQUAL_AT_AN_END: dict[str, tuple[str, tuple[str, str], list[int]]] = {
    "L_max": ("L*alpha_min {} 50/(1 + 49*exp(2))", (">=", ">"), [2, 50]),
    "L_min": ("alpha_max {} 1/(1 + 2*exp(-2))", ("<=", "<"), [3, 10**6]),
}


@pytest.mark.parametrize("name", sorted(EQUAL_AT_AN_END))
@pytest.mark.parametrize("strict", [False, True])
def test_an_equality_at_an_end_no_float_holds_is_decided_at_that_length(name: str, strict: bool) -> None:
    """The box of ``t = 1/L`` is rounded outward (the float nearest 1/50 lies above it: a box ending there would leave
    L = 50 out, and prove the strict bound, false at L = 50 only by its equality), and that end is a problem of its own
    with ``t = 1/50`` exact: the strict bound is refuted by its exact equality there, the non-strict one proved."""
    relation, ops, lengths = EQUAL_AT_AN_END[name]
    spec = dict(relation=relation.format(ops[strict]), ranges={"L": lengths}, fixed={"a": 1.0, "T": 1.0}, **SOFTMAX)
    _, result, status = _prove(f"{name}.{'strict' if strict else 'equal'}", spec)
    if strict:
        assert result.status == "refuted" and status == "violated", (result.status, result.reason)
        assert result.counterexample.L == lengths[1 if name == "L_max" else 0]
    else:
        assert result.status == "proved", result.reason


@pytest.mark.parametrize("L_lo, L_hi", [(1, 50), (3, 10**9), (7, 7), (2, 3), (1, float("inf")), (10**15 - 1, 10**15)])
def test_the_root_box_of_t_holds_every_length_of_the_range(L_lo: float, L_hi: float) -> None:
    from fractions import Fraction

    from attnbounds.theory.deciding.prover.problem import length_range

    t_lo, t_hi = length_range(float(L_lo), float(L_hi))
    assert Fraction(t_hi) >= Fraction(1, L_lo)
    assert (t_lo == 0.0) if L_hi == float("inf") else Fraction(t_lo) <= Fraction(1, int(L_hi))
    assert t_hi - 1 / L_lo <= 2 * 2**-52 / L_lo  # outward by an ulp at most


@pytest.mark.parametrize("name, lo, hi", [("T", 0.3, 2.0), ("eps", 1e-6, 0.1), ("M", 0.5, 4.0), ("p", 0.5, 0.9)])
def test_the_search_draws_each_end_of_a_parameters_range_itself(name: str, lo: float, hi: float) -> None:
    """A bound tight at an end of a range (``alpha_max <= e^6.66 alpha_min`` for T in [0.3, 2], false only for T
    below 0.3003) is false in a band uniform draws miss: the search takes each end itself in a share of its draws,
    and every draw lies in the range."""
    import numpy as np

    from attnbounds.theory.mathematics import families

    st = api.statement("alpha_max >= 0", hypotheses=[], id="ends", ranges={name: [lo, hi]}).statements[0]
    rng = np.random.default_rng(0)
    drawn = [getattr(families.within_ranges(rng, st, families.random_spec(rng, st, B=1, max_L=4)), name)
             for _ in range(200)]
    assert all(lo <= v <= hi for v in drawn), drawn
    assert drawn.count(lo) >= 20 and drawn.count(hi) >= 20, (drawn.count(lo), drawn.count(hi))
    assert len({v for v in drawn if lo < v < hi}) >= 50  # and the inside too


def test_a_bound_false_only_in_a_thin_band_at_the_end_of_T_is_refuted() -> None:
    """``alpha_max <= e^6.66 alpha_min`` with |l| <= 1: the ratio is e^(2/T) at two logits +-1, above e^6.66 only for
    T < 2/6.66 = 0.3003, a band of 1e-3 at the lower end of [0.3, 2] (derived by hand; it was VERIFIED)."""
    result = api.check("alpha_max <= exp(6.66)*alpha_min", hypotheses=["softmax", "logits-bounded"],
                       fixed={"a": 1.0}, ranges={"T": [0.3, 2.0]}, budget=2)
    assert result.verdict == "REFUTED", result
