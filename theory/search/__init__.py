"""Counterexample search: random batches, gradient ascent, hypothesis targeting and shrinking, one budget.

``search(statement, budget_s=..., seed=...) -> SearchResult`` (see :func:`theory.search.core.search`).
The budget buys a fixed amount of work (:mod:`theory.search.budget`), so results are reproducible
from ``(statement, budget_s, seed)``; candidates are ranked by relative margin
(:mod:`theory.search.score`) and certified elsewhere (:mod:`theory.certify`).
"""

from theory.search.core import DEFAULT_BUDGET_S, SearchResult, search
from theory.search.mutants import scaled

__all__ = ["DEFAULT_BUDGET_S", "SearchResult", "scaled", "search"]
