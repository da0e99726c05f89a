"""How the relaxation prover turns a point into an instance, and how its replay compares a recorded problem (issue 35).

- ``_counts`` splits a whole number of tokens over classes in proportion to their (not all zero) masses: the counts
  are whole, non-negative, sum to the total (0 included: an empty rest when N = L) and follow the masses to within one
  token; whatever the masses (all zero, subnormal, infinite, undefined), the counts are whole and sum to the total;
- the points ``realise`` tries for a box lie in the box, unbounded sides included (a point outside would be an
  instance of another box, and a counterexample inside could be missed);
- before certification, a point is realised as a counterexample exactly when its relaxed float margin and the float
  margin of the instance it realises are both negative (either alone says nothing of the other: the instance's
  length and counts are whole numbers near the point's);
- the replay reads a recorded problem as JSON: 1 and 1.0 alike, but a boolean is never a number, so a certificate
  whose ``strict`` or ``conjunct`` was rewritten as the other type is not the rebuilt problem; a recorded problem with
  any field edited (a list's element, a value wrapped in a list) is refused, and the reason names that field.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import numpy as np
import pytest
import sympy as sp
from hypothesis import example, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.prover import _candidates, _counts, _instance, _same, _violating
from attnbounds.theory.deciding.prover.bnb import Node
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem, t_sym
from attnbounds.theory.deciding.prover.program import compile_program
from attnbounds.theory.deciding.prover.relax import relax
from attnbounds.theory.running import api


@pytest.mark.parametrize("seed", range(4))
def test_token_counts_are_whole_sum_to_the_total_and_follow_the_masses(seed: int) -> None:
    rng = np.random.default_rng(seed)
    cases: list[tuple[list[float], int]] = [([1.0], 0), ([0.3, 0.7], 0), ([], 5), ([], 0), ([1.0, 0.0, 2.0], 1),
                                            ([1e-300, 1.0], 7), ([2.0, 0.0, 0.0, 1.0], 50)]
    cases += [(rng.exponential(size=int(rng.integers(1, 6))).tolist(), int(rng.integers(0, 40))) for _ in range(30)]
    for masses, total in cases:
        counts = _counts(masses, total)
        assert len(counts) == len(masses) and all(isinstance(c, int) and c >= 0 for c in counts), (masses, total, counts)
        if not masses or total <= 0:
            assert counts == [0] * len(masses)
            continue
        assert sum(counts) == total, (masses, total, counts)
        share = np.array(masses) / sum(masses) * total
        assert np.all(np.abs(np.array(counts) - share) < 1.0 + 1e-9), (masses, total, counts)


@settings(max_examples=150, deadline=None)
@given(hs.lists(hs.one_of(hs.floats(min_value=0.0, allow_nan=False), hs.just(math.inf), hs.just(math.nan),
                          hs.sampled_from([0.0, 5e-324, 1e-310, 1e308])), max_size=6),
       hs.integers(0, 60))
@example([math.inf, 1.0], 5)
@example([1e308, 1e308], 4)
@example([1e-320, 0.0], 3)
@example([0.0, 0.0], 5)
def test_token_counts_are_whole_and_sum_to_the_total_for_any_masses(masses: list[float], total: int) -> None:
    """Zero, subnormal, overflowing, infinite and undefined masses too (a mass read at a far point of a box): the
    instance realised has its statement's length; masses past the doubles outweigh every finite one."""
    counts = _counts(masses, total)
    assert len(counts) == len(masses) and all(isinstance(c, int) and c >= 0 for c in counts), (masses, total, counts)
    assert sum(counts) == (total if masses else 0), (masses, total, counts)
    if any(m == math.inf for m in masses):
        assert all(c == 0 for m, c in zip(masses, counts) if m != math.inf), (masses, total, counts)


def _problem(lo: float, hi: float) -> Problem:
    x = sp.Symbol("x", real=True)
    return Problem("test", 0, "test", [Coordinate(x, lo, hi, "parameter", "x")], x, [], False, x, [], {}, 0, 0, {},
                   "test", [])


@pytest.mark.parametrize("c_lo, c_hi, b_lo, b_hi", [
    (-math.inf, 5.0, -math.inf, 2.0), (-math.inf, math.inf, -math.inf, -3.0), (-math.inf, math.inf, 4.0, math.inf),
    (-math.inf, math.inf, -math.inf, math.inf), (-10.0, 10.0, -2.0, 3.0), (0.0, math.inf, 1.0, math.inf),
    (-math.inf, 0.0, -math.inf, -1e-3),
])
def test_the_points_tried_for_a_box_lie_in_the_box(c_lo: float, c_hi: float, b_lo: float, b_hi: float) -> None:
    lo, hi = np.array([b_lo]), np.array([b_hi])
    node = Node(lo, hi, lo.copy(), hi.copy())
    points = _candidates(_problem(c_lo, c_hi), node)
    assert points
    for p in points:
        assert b_lo <= p[0] <= b_hi and math.isfinite(p[0]), (c_lo, c_hi, b_lo, b_hi, p)
    assert b_lo < points[0][0] < b_hi  # the first one inside


@pytest.mark.parametrize("a, b, same", [
    (1, 1.0, True), (0, -0.0, True), (2.5, 2.5, True), (True, True, True), (False, False, True),
    (True, 1, False), (1, True, False), (False, 0, False), (0, False, False), (0.0, False, False), (True, 1.0, False),
    ([1, False], [1.0, False], True), ([1, False], [1.0, 0], False), ({"a": 0}, {"a": False}, False),
    ({"a": True}, {"a": 1}, False), ("1", 1, False), (None, 0, False), (None, False, False),
])
def test_json_equality_keeps_booleans_apart_from_numbers(a: Any, b: Any, same: bool) -> None:
    assert _same(a, b) is same and _same(b, a) is same


@pytest.mark.parametrize("hypotheses, fixed", [(["softmax"], {}),
                                               (["softmax", "logits-bounded"], {"a": 2.0, "T": 1.0})])
def test_a_point_is_realised_before_certification_exactly_when_both_float_margins_are_negative(
        hypotheses: list[str], fixed: dict[str, float]) -> None:
    st = api.statement("alpha_max <= 1/2", hypotheses=hypotheses, fixed=fixed, id="realise.float").statements[0]
    rel = relax(st)
    rng = np.random.default_rng(0)
    seen: set[tuple[bool, bool]] = set()
    for problem in rel.problems:
        program = compile_program([problem.core], problem.symbols)
        for _ in range(40):
            p = np.array([rng.uniform(max(c.lo, -30.0), min(c.hi, 30.0)) for c in problem.coordinates])
            values = {s: float(v) for s, v in zip(problem.symbols, p)}
            relaxed = float(problem.core.xreplace({s: sp.Float(v, 30) for s, v in values.items()}))
            if abs(relaxed) < 1e-9:  # the float margin's sign is not the exact one's
                continue
            inst = _instance(problem, rel, values)
            ev = st.evaluate(inst) if inst is not None else None
            negative = relaxed < 0 and ev is not None and bool(ev.applicable[0]) and bool(ev.margin_hi[0] < 0)
            got = _violating(problem, rel, program, p, False)
            assert (got is not None) == negative, (problem.pattern, values, relaxed, ev and float(ev.margin_hi[0]))
            if got is not None and inst is not None:
                assert got.L == inst.L and np.array_equal(got.alpha, inst.alpha), (problem.pattern, values)
            seen.add((relaxed < 0, negative))
    assert {(True, True), (False, False)} <= seen, seen  # points of both kinds were tried


@pytest.mark.parametrize("expr, fixed", [("alpha_max <= 1/2", {"a": 2.0, "T": 1.0}),
                                         ("alpha_max*L <= 3", {"a": 1.0, "T": 1.0}),
                                         ("alpha_i*L >= exp(-2)", {"a": 1.0, "T": 1.0})])
def test_a_point_at_the_shortest_length_is_realised_with_its_distinguished_tokens_alone(
        expr: str, fixed: dict[str, float]) -> None:
    """At ``t = 1/k``, k the distinguished tokens of a problem, the instance is those k tokens and no other (no token
    is left for the other tokens' distribution, whatever its masses): L = k, the roles' logits. A realisation that
    gave up there could not hand over a counterexample that exists only at the shortest length."""
    st = api.statement(expr, hypotheses=["softmax", "logits-bounded"], fixed=fixed, id="realise.short").statements[0]
    rel = relax(st)
    rng = np.random.default_rng(1)
    tried = 0
    for problem in rel.problems:
        info = problem.realisation
        k = len(info["roles"])
        if info.get("reference") is not None or info["weights_model"] or info["N"] is not None or k == 0:
            continue
        for _ in range(5):
            values = {s: float(rng.uniform(max(c.lo, -3.0), min(c.hi, 3.0)))
                      for s, c in zip(problem.symbols, problem.coordinates)}
            values[t_sym] = 1.0 / k
            inst = _instance(problem, rel, values)
            assert inst is not None and inst.L == k, (problem.pattern, values)
            tried += 1
    assert tried, "no problem of this statement realises its roles alone"


@pytest.fixture(scope="module")
def proved() -> tuple[Any, dict[str, Any]]:
    st = api.statement("alpha_max*(1 - alpha_max) + alpha_min*(1 - alpha_min) <= 1", hypotheses=["softmax"],
                       id="realise.same").statements[0]
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status == "proved", result.reason
    return st, json.loads(json.dumps(result.to_json()))


def test_the_untampered_certificate_replays(proved: tuple[Any, dict[str, Any]]) -> None:
    st, cert = proved
    ok, why = prover.replay(st, cert)
    assert ok, why


@pytest.mark.parametrize("field, to_other_type", [("strict", lambda v: int(v)), ("conjunct", lambda v: bool(v))])
def test_a_field_rewritten_as_the_other_json_type_is_refused(proved: tuple[Any, dict[str, Any]], field: str,
                                                             to_other_type: Any) -> None:
    st, cert = proved
    for k in range(len(cert["problems"])):
        forged = copy.deepcopy(cert)
        value = forged["problems"][k][field]
        assert isinstance(value, bool) == (field == "strict")
        forged["problems"][k][field] = to_other_type(value)
        ok, why = prover.replay(st, forged)
        assert not ok, f"problem {k} with {field} = {forged['problems'][k][field]!r} replayed: {why}"


@pytest.mark.parametrize("field, edit", [
    ("constraints", lambda v: ["Integer(0)"] + v[1:]), ("constraints", lambda v: v[:-1] + ["Integer(0)"]),
    ("atoms", lambda v: [v]), ("margin", lambda v: [v]), ("core", lambda v: [v]),
])
def test_a_problem_field_edited_is_refused_naming_the_field(proved: tuple[Any, dict[str, Any]], field: str,
                                                            edit: Any) -> None:
    st, cert = proved
    for k in range(len(cert["problems"])):
        forged = copy.deepcopy(cert)
        forged["problems"][k][field] = edit(forged["problems"][k][field])
        ok, why = prover.replay(st, forged)
        assert not ok and f"its {field} is " in why, (k, field, why)
