"""The facts a relaxed problem rests on are re-checked, and the prover's refusals say where they stopped (issue 35).

- a sign fact (an absolute value replaced by its argument's sign on the whole box) is accepted only when interval
  arithmetic shows that sign on the whole root box: positive facts need the lower end >= 0, negative ones the upper
  end <= 0 (a fact read the wrong way round would let a replay accept a wrong core);
- a box too narrow to split that stays undecided is reported with its coordinates (the prover says where it
  stopped, rather than failing).
"""

from __future__ import annotations

from typing import Any

import math

import pytest
import sympy as sp

from attnbounds.theory.deciding.prover import _check_core
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

x = sp.Symbol("x", real=True)


def _problem(lo: float, hi: float, signs: list[tuple[sp.Expr, int]]) -> Problem:
    return Problem("test", 0, "test", [Coordinate(x, lo, hi, "parameter", "x")], x + 2, [], False, x + 2, [], {}, 0, 0,
                   {}, "test", signs)


@pytest.mark.parametrize("lo, hi, sign, holds", [
    (0.0, 1.0, 1, True), (0.5, 2.0, 1, True), (-1.0, 1.0, 1, False), (-1.0, -0.5, 1, False),
    (-1.0, 0.0, -1, True), (-2.0, -0.5, -1, True), (-1.0, 1.0, -1, False), (0.5, 1.0, -1, False),
    (0.0, 0.0, 1, True), (0.0, 0.0, -1, True), (-math.inf, -1.0, -1, True), (1.0, math.inf, 1, True),
])
def test_a_sign_fact_holds_only_when_certain_on_the_whole_box(lo: float, hi: float, sign: int, holds: bool) -> None:
    why = _check_core(_problem(lo, hi, [(x, sign)]))
    assert (why is None) == holds, why


def test_a_sign_fact_over_a_symbol_outside_the_coordinates_is_refused() -> None:
    why = _check_core(_problem(0.0, 1.0, [(sp.Symbol("y", real=True), 1)]))
    assert why is not None and "outside the coordinates" in why


def test_bounds_far_below_the_doubles_are_decided_by_the_prover() -> None:
    """softmax with |l| <= 800 and T = 1: L alpha_min >= exp(-1600) is true (L alpha_min = L e^-1600 / (L - 1 +
    e^-1600) at the worst logits, > e^-1600, approached as L grows) and L alpha_min >= exp(-1599) is false already at
    L = 2 (2 e^-1600 / (1 + e^-1600) < e^-1599); both sides lie far below the doubles, where the float tier sees 0:
    the prover reads those boxes in rigorous arithmetic, proves the first (the certificate replays) and realises a
    counterexample of the second that certification confirms."""
    import json

    from attnbounds.theory.deciding import prover
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.running import api

    def statement(rhs: str) -> Any:
        return api.statement(f"alpha_min*L >= {rhs}", hypotheses=["softmax", "logits-bounded"],
                             fixed={"a": 800.0, "T": 1.0}, id="tiny").statements[0]

    true = statement("exp(-1600)")
    proved = prover.prove(true, work=prover.work_for(1.0))
    assert proved.status == "proved", proved.reason
    assert prover.replay(true, json.loads(json.dumps(proved.to_json())))[0]
    false = statement("exp(-1599)")
    refuted = prover.prove(false, work=prover.work_for(1.0))
    assert refuted.status == "refuted" and refuted.counterexample is not None, refuted.reason
    assert certify(false, refuted.counterexample).status == "violated"
