"""Counterexample search: random batches, gradient ascent, hypothesis targeting and shrinking, one budget.

``search(statement, budget_s=..., seed=...) -> SearchResult`` (see :func:`attnbounds.theory.search.core.search`).
The budget buys a fixed amount of work (:mod:`attnbounds.theory.search.budget`), so results are reproducible
from ``(statement, budget_s, seed)``; candidates are ranked by relative margin
(:mod:`attnbounds.theory.margins`) and certified elsewhere (:mod:`attnbounds.theory.certify`).
"""

from attnbounds.theory.search.core import DEFAULT_BUDGET_S, SearchResult, search

__all__ = ["DEFAULT_BUDGET_S", "SearchResult", "search"]
