"""Re-evaluating the tightest Monte Carlo instances with many more draws.

A sphere expectation (Theorem 2) is estimated with a Hoeffding interval whose half-width
shrinks like ``1/sqrt(draws)``; the random search uses a few hundred or thousand draws. The
tightest instances found are evaluated again with :data:`~attnbounds.theory.deciding.search.budget.REFINE_DRAWS`
draws, so a violation (or near-equality) smaller than the coarse interval can still show.
"""

from __future__ import annotations

from attnbounds.theory.deciding.parallel import Runner
from attnbounds.theory.deciding.search.budget import REFINE_DRAWS, Plan
from attnbounds.theory.deciding.search.tracker import Tracker, measure
from attnbounds.theory.mathematics.statement import Statement


def run(statement: Statement, plan: Plan, tracker: Tracker, *, progress: bool = False,
        runner: Runner | None = None) -> None:
    """The ``plan.refine_evaluations`` tightest pool instances again, with more draws (method ``refine``): each
    evaluation is a piece of work for ``runner``, recorded here in pool order."""
    todo = [cand.inst.with_params(mc_draws=float(REFINE_DRAWS)) for cand in list(tracker.pool)[: plan.refine_evaluations]]
    if todo and tracker.expired("refine"):  # past the wall-clock ceiling: every evaluation is cut
        tracker.method("refine").cut += len(todo) - 1
        return
    if len(todo) < plan.refine_evaluations:
        tracker.method("refine").stopped = f"only {len(todo)} tight instances to refine"
    outcomes = (runner or Runner()).map(measure, todo, shared=statement, label=f"search {statement.id}: refine",
                                        progress=progress)
    for inst, outcome in zip(todo, outcomes):
        tracker.record_outcome(inst, outcome, "refine")
