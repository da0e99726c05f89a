"""Stand-ins for ``theory.search.search`` in the verdict tests: scripted candidates, or a tiny random search.

Both follow the search's protocol (:class:`attnbounds.theory.deciding.search.Search`: the same keywords, a
:class:`~attnbounds.theory.deciding.search.SearchResult`; ``tests/unit/test_search_protocol.py`` checks it), so the
verdict logic is tested independently of how well the real search searches.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from attnbounds.theory.deciding import boundary
from attnbounds.theory.deciding.parallel import Runner
from attnbounds.theory.deciding.search import Search, SearchResult
from attnbounds.theory.mathematics import families
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.statement import Statement


def random_search(statement: Statement, *, budget_s: float, seed: int, progress: bool = False, interior: bool = False,
                  runner: Runner | None = None, deadline: float | None = None, rounds: int = 4,
                  B: int = 32) -> SearchResult:
    """A small seeded random search over the adversarial families (deterministic for a seed); ``interior``: only
    violations on no boundary of the hypotheses count."""
    rng = np.random.default_rng(seed)
    violations: list[tuple[float, Instance]] = []
    best, best_ratio, best_margin, tried, applicable = None, -np.inf, np.nan, 0, 0
    for _ in range(rounds):
        spec = families.random_spec(rng, statement, B=B, max_L=6).with_(mc_draws=200)
        inst = families.build(statement, spec)
        ev = statement.evaluate(inst)
        inside = boundary.interior(inst, statement.reads_selection) if interior else np.ones(inst.B, dtype=bool)
        tried += inst.B
        applicable += int(ev.applicable.sum())
        for b in np.flatnonzero(ev.applicable):
            if ev.margin_hi[b] < 0 and inside[b]:
                violations.append((float(ev.margin[b]), inst.take(int(b))))
            if ev.ratio[b] > best_ratio:
                best_ratio, best_margin, best = float(ev.ratio[b]), float(ev.margin[b]), inst.take(int(b))
    violations.sort(key=lambda t: t[0])
    return SearchResult(statement.id, [v for _, v in violations], best, best_margin, best_ratio, tried,
                        {"random": {"tried": tried, "applicable": applicable, "seconds": 0.01 * seed + 0.1}},
                        wall_s=0.1, seed=seed, budget_s=budget_s)


def scripted(violations: Instance | Iterable[Instance] = (), best: Instance | None = None, tried: int = 1000,
             applicable: int | None = None, ratio: float = 1.0, margin: float = 0.0,
             shortest: Instance | None = None) -> Search:
    """A search that returns exactly these candidates (for verdict edge cases; a batch is split into its
    instances, and an interior search keeps the interior ones); ``shortest``: its float violation at the shortest
    context."""
    cands = [violations.take(i) for i in range(violations.B)] if isinstance(violations, Instance) else list(violations)

    def search(statement: Statement, *, budget_s: float, seed: int, progress: bool = False, interior: bool = False,
               runner: Runner | None = None, deadline: float | None = None) -> SearchResult:
        info: Any = {"tried": tried} if applicable is None else {"tried": tried, "applicable": applicable}
        kept = [c for c in cands if bool(boundary.interior(c, statement.reads_selection)[0])] if interior else cands
        return SearchResult(statement.id, kept, best, margin, ratio, tried, {"scripted": info}, wall_s=0.0,
                            seed=seed, budget_s=budget_s, shortest=shortest)

    return search


def no_proof(statement_id: str) -> None:
    return None
