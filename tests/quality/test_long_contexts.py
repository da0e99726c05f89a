"""Search power in L: planted statements false only from about 20, 10^3 and 10^5 tokens on, and true statements
tight only as L grows (``attnbounds.theory.deciding.search.planted``), searched at the default budget.

Asserted for every planted false statement: a certified counterexample (the kill), never below the statement's
computed threshold (below it the statement is true: a certificate there would be a bug). For every true one: no
certified violation. The short half runs by default; the long half (10^4 to 2 10^5 tokens) under ``-m slow``.
``bench/long_contexts.py`` reports the kill rate and the time to the first certified counterexample per range.
"""

from __future__ import annotations

import pytest

from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.deciding.search import DEFAULT_BUDGET_S, search
from tests._marks import slow_where
from tests.planted import Planted, long_context_set

pytest.importorskip("torch")


def _first_certified(planted: Planted) -> tuple[int | None, int]:
    """``(L of the first certified counterexample or None, instances searched)`` at the default budget, seed 0."""
    res = search(planted.statement, budget_s=DEFAULT_BUDGET_S, seed=0)
    candidates = ([res.minimal] if res.minimal is not None else []) + list(res.violations)[:16]
    for cand in candidates:
        if certify(planted.statement, cand, 0).status == "violated":
            return cand.L, res.tried
    return None, res.tried


def _check(planted: Planted) -> None:
    L, tried = _first_certified(planted)
    if planted.false:
        assert L is not None, f"{planted.statement.id} (false from L = {planted.threshold}) survived {tried} instances"
        assert L >= planted.threshold, f"{planted.statement.id}: certified at L = {L}, below its threshold {planted.threshold}"
    else:
        assert L is None, f"{planted.statement.id} is true but was refuted at L = {L}"


#: of the planted Jacobian bounds (10-24 s each) one runs by default, the others with -m slow
@pytest.mark.parametrize("planted", slow_where(long_context_set("short"), lambda p: p.statement.id, {
    "planted.jacobian[delta=0.05,a=1]", "planted.jacobian[delta=0.05,a=2]"}))
def test_short_range(planted: Planted) -> None:
    _check(planted)


@pytest.mark.slow
@pytest.mark.parametrize("planted", long_context_set("long"), ids=lambda p: p.statement.id)
def test_long_range(planted: Planted) -> None:
    _check(planted)
