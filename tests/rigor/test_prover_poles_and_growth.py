"""Margins with a pole, and strict margins that vanish only at open ends to higher order (issue 33).

- a relaxed margin that divides by an expression of uncertain sign on the relaxed space has a pole there, across
  which no monotone projection or mean-value bound holds: ``alpha_min <= 1/(L - 1.5)`` grows on both sides of its
  pole at L = 3/2 and is false at L = 1; no box of such a problem is closed (a replay refuses any tree for it), the
  lengths beside the pole are realised instead, and the same bound over a range of L that keeps the pole out is
  proved;
- a strict bound whose residual ``core - lam * constraint`` is 0 only at open ends (no instance there) closes when the
  residual grows off an open end to some order: ``b t / pi`` (``alpha_min < 1/(L - 1/pi)``, where the multiplier pi
  has no simple fraction and the core is divided by it first), ``sqrt(2) t^3`` (``L alpha_max > 1 - sqrt(2)/L^2``);
  the twins just beyond each equality are never proved.

Truths (softmax, unbounded logits; t = 1/L): alpha_min <= 1/L <= alpha_max, with equality at equal logits. So
1/(L - 1/pi) > 1/L >= alpha_min (L >= 1 > 1/pi), and L alpha_max >= 1 > 1 - c/L^2 for c > 0: true, never attained;
1/(L + 1/pi) < 1/L = alpha_min and L alpha_max = 1 < 1 + c/L^2 at equal logits: false at every L. At L = 1,
alpha_min = 1 > 1/(1 - 1.5) = -2 and 1 > 1/(1 - sqrt(2)): false; for L >= 2, 1/(L - 1.5) > 1/L: true.
"""

from __future__ import annotations

import json

import pytest
import sympy as sp

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.deciding.prover.problem import Coordinate, t_sym
from attnbounds.theory.deciding.prover.relax import _expand_polynomial, poles, unit_multiplier
from attnbounds.theory.running import api

B = sp.Symbol("b_r0", real=True)
BOX = [Coordinate(t_sym, 0.0, 1.0, "length", "t = 1/L"), Coordinate(B, 0.0, 1.0, "role", "share")]


def _prove(relation: str, **kw: object) -> tuple[prover.ProverResult, object]:
    st = api.statement(relation, hypotheses=["softmax"], id="p", **kw).statements[0]  # type: ignore[arg-type]
    return prover.prove(st, work=prover.work_for(2.0)), st


@pytest.mark.parametrize("relation, length", [
    ("alpha_min <= 1/(L - 1.5)", 1),                                    # pole at L = 3/2, false at L = 1
    ("alpha_min <= 1/(L - sqrt(2)/L**2)", 1),                           # pole at L = 2^(1/6), false at L = 1
    ("alpha_max <= 1/((L - 3.5)**3 + 1)", 1),                           # pole at L = 5/2, false at L = 1 and 2
    ("alpha_max <= 1 + 0.000001/((L - 1000.5)*(L - 999.5))", 1000),     # false at L = 1000 only, between its poles
    # three divisors: the square at 2000.5 (listed first) keeps its sign, the other two bracket L = 1000, the one
    # length where it fails
    ("alpha_max <= 1 + 0.000001/((L - 2000.5)**2*(L - 999.5)*(L - 1000.5))", 1000),
])
def test_a_margin_with_a_pole_closes_no_box_and_is_refuted_beside_the_pole(relation: str, length: int) -> None:
    """No box is closed across the pole (before, the first two were "proved": the core grows on both sides of it);
    the lengths next to its zero are realised, and a violating instance there is the prover's counterexample."""
    result, st = _prove(relation)
    assert result.status == "refuted", result.reason
    assert "divide by 0" in result.reason
    inst = result.counterexample
    assert inst is not None and int(inst.counts.sum()) == length  # the length next to the pole
    assert certify(st, inst, 0).status == "violated"


def test_a_true_bound_with_poles_between_lengths_is_left_open_never_refuted_nor_proved() -> None:
    """``(L - 1.5)^2 - 0.1`` changes sign at L = 1.5 -+ 0.32, between lengths, and is >= 0.15 at every length, where
    the right side is then >= 2 > alpha_max: true. Nothing beside the poles violates it, so the prover says open."""
    result, _ = _prove("alpha_max <= 2 + 1/((L - 1.5)**2 - 0.1)")
    assert result.status == "open", result.reason
    assert "divide by 0" in result.reason and result.counterexample is None


def test_a_tree_for_a_problem_with_a_pole_is_refused_by_the_replay() -> None:
    """A forged certificate cannot prove a margin across its pole: the rebuilt problem refuses any tree."""
    from attnbounds.theory.deciding.prover import _check_core

    _, st = _prove("alpha_min <= 1/(L - 1.5)")
    rel = prover.relax(st)
    assert rel.problems and all(p.poles for p in rel.problems)
    assert all("divide by 0" in (_check_core(p) or "") for p in rel.problems)


def test_the_same_bound_is_proved_where_the_range_of_L_keeps_the_pole_out() -> None:
    result, st = _prove("alpha_min <= 1/(L - 1.5)", ranges={"L": (2, 10**12)})
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


def test_poles_names_the_divisors_of_uncertain_sign_and_passes_those_of_certain_sign() -> None:
    assert poles(-B + 1 / (1 / t_sym - sp.Rational(3, 2)), BOX) == [1 / t_sym - sp.Rational(3, 2)]
    assert poles(-B + 1 / (1 / t_sym - 1 / sp.pi), BOX) == []  # 1/t - 1/pi >= 1 - 1/pi > 0
    assert poles(B / t_sym, BOX) == []  # t > 0 at every instance: 0 only in the limit L -> oo
    assert poles(1 / (t_sym + (1 - t_sym) * sp.exp(B)), BOX) == []
    assert poles(1 / (1 - B * (1 - t_sym) - t_sym), BOX) == []  # (1 - B)(1 - t) >= 0: seen once factored
    assert poles(1 / (B - sp.Rational(1, 2)), BOX) == [B - sp.Rational(1, 2)]
    cubic = (1 / t_sym - sp.Rational(7, 2)) ** 3 + 1  # 0 at L = 5/2: an odd power of a base of no sign, plus 1
    assert poles(1 / cubic, BOX) == [cubic]
    assert poles(1 / ((1 / t_sym - sp.Rational(7, 2)) ** 2 + 1), BOX) == []  # an even power plus 1 > 0
    # an odd power of a base <= 0 (known only from its structure: b (1 - t) + t - 1 = -(1 - b)(1 - t), whose cube's
    # enclosure straddles 0) is <= 0: plus 1/2 it changes sign (a pole), minus 1/2 it does not
    negative = B * (1 - t_sym) + t_sym - 1
    assert poles(1 / (negative**3 + sp.Rational(1, 2)), BOX) == [negative**3 + sp.Rational(1, 2)]
    assert poles(1 / (negative**3 - sp.Rational(1, 2)), BOX) == []
    two = poles(1 / ((1 / t_sym - 3) * (1 / t_sym - 7)), BOX)  # a product: each factor a power of its own
    assert set(two) == {1 / t_sym - 3, 1 / t_sym - 7}


def test_unit_multiplier_divides_the_core_by_an_irrational_positive_multiple_of_a_constraint() -> None:
    con = t_sym - B
    core = sp.pi * t_sym - sp.pi * B + B * t_sym
    out, stripped = unit_multiplier(core, [con])
    assert sp.simplify(out - core / sp.pi) == 0 and stripped == ["pi (> 0)"]
    assert unit_multiplier(2 * t_sym - 2 * B + B * t_sym, [con]) == (2 * t_sym - 2 * B + B * t_sym, [])  # rational
    assert unit_multiplier(-sp.pi * t_sym + sp.pi * B + B * t_sym, [con])[1] == []  # a negative multiple


@pytest.mark.parametrize("relation, true", [
    ("alpha_min < 1/(L - 1/pi)", True), ("alpha_min < 1/(L + 1/pi)", False),
    ("L*alpha_min < pi/(pi - 1/L)", True), ("alpha_min < 1/L", False),
    ("L*alpha_max > 1 - sqrt(2)/L**2", True), ("L*alpha_max > 1 + sqrt(2)/L**2", False),
    ("L*alpha_max >= 1 - sqrt(2)/L**2", True), ("L*alpha_max > 1", False),
    ("L*alpha_max > 1 - exp(-1)/L**3", True), ("L*alpha_max > 1 + exp(-1)/L**3", False),
])
def test_strict_gaps_that_close_only_at_open_ends_are_proved_and_replay_their_twins_never(relation: str,
                                                                                          true: bool) -> None:
    """The true gaps (to fourth order at t = 0, or mixed, ``b t``) are proved and their certificates replay; the
    twins just beyond each equality are never proved."""
    result, st = _prove(relation)
    if not true:
        assert result.status != "proved", result.reason
        return
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("length", [1, 2, 7, 1000])
def test_a_point_whose_margin_reads_only_the_others_total_is_realised_at_its_own_length(length: int) -> None:
    """The instance of a point ``t = 1/L`` has L tokens (the distinguished one and L - 1 others sharing their total),
    so a bound that reads L is judged at the length the prover found it violated at (it once had 1 + 1000 whatever
    t said)."""
    from attnbounds.theory.deciding.prover import _instance

    _, st = _prove("alpha_max <= 1 + 0.000001/((L - 1000.5)*(L - 999.5))")
    rel = prover.relax(st)
    problem = rel.problems[0]
    inst = _instance(problem, rel, {s: (1.0 / length if s == t_sym else 0.75) for s in problem.symbols})
    assert inst is not None and int(inst.counts.sum()) == length  # the length next to the pole
    assert float(inst.alpha[0, 0]) == pytest.approx(0.75 if length > 1 else 1.0)


def test_unit_multiplier_expands_only_the_polynomial_part_of_a_core() -> None:
    """Products and integer powers of sums are multiplied out; arguments of roots and exponentials stay as they are
    (their deep expansion, in a Jacobian norm's core, ran for minutes). Without constraints the core is returned."""
    inner = (t_sym + B) ** 2
    core = sp.pi * (t_sym - B) * sp.sqrt(inner) + sp.exp(inner) * (1 + t_sym)
    expanded = _expand_polynomial(core)
    assert sp.simplify(expanded - core) == 0
    assert set(sp.Add.make_args(expanded)) == {sp.pi * t_sym * sp.sqrt(inner), -sp.pi * B * sp.sqrt(inner),
                                               sp.exp(inner), t_sym * sp.exp(inner)}
    assert unit_multiplier(core, []) == (core, [])
    con = t_sym - B
    out, stripped = unit_multiplier(sp.pi * (t_sym - B) * sp.exp(inner) + B * sp.exp(inner), [con * sp.exp(inner)])
    assert stripped == ["pi (> 0)"] and sp.simplify(out - ((t_sym - B) * sp.exp(inner) + B * sp.exp(inner) / sp.pi)) == 0
