"""Counterexample search: random batches, gradient ascent, hypothesis targeting and shrinking, one budget.

``search(statement, budget_s=..., seed=...) -> SearchResult`` (see :func:`attnbounds.theory.deciding.search.core.search`);
:class:`Search` is the protocol it follows, and any replacement ``verify`` is given (a test's stand-in) too.
The budget buys a fixed amount of work (:mod:`attnbounds.theory.deciding.search.budget`), so results are reproducible
from ``(statement, budget_s, seed)``; candidates are ranked by relative margin
(:mod:`attnbounds.theory.deciding.margins`) and certified elsewhere (:mod:`attnbounds.theory.deciding.certify`).
"""

from attnbounds.theory.deciding.search.budget import DEFAULT_BUDGET_S
from attnbounds.theory.deciding.search.core import Search, SearchResult, search

__all__ = ["DEFAULT_BUDGET_S", "Search", "SearchResult", "search"]
