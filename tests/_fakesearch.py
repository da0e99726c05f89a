"""A stand-in for ``theory.search.search`` in the verdict tests: scripted candidates, or a tiny random search.

It has the interface of the real search (``search(statement, *, budget_s, seed, progress)`` returning
an object with ``statement_id, violations, best, best_margin, best_ratio, tried, by_method, wall_s,
seed, budget_s``), so the verdict logic is tested independently of how well the real search searches.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from attnbounds.theory.mathematics import families
from attnbounds.theory.mathematics.instance import Instance


@dataclass
class SearchResult:
    statement_id: str
    violations: list
    best: Any
    best_margin: float
    best_ratio: float
    tried: int
    by_method: dict = field(default_factory=dict)
    wall_s: float = 0.0
    seed: int = 0
    budget_s: float = 0.0
    shortest: Any = None


def random_search(statement, *, budget_s: float, seed: int, progress: bool = False, rounds: int = 4, B: int = 32):
    """A small seeded random search over the adversarial families (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    violations, best, best_ratio, best_margin, tried, applicable = [], None, -np.inf, np.nan, 0, 0
    for _ in range(rounds):
        spec = families.random_spec(rng, statement, B=B, max_L=6).with_(mc_draws=200)
        inst = families.build(statement, spec)
        ev = statement.evaluate(inst)
        tried += inst.B
        applicable += int(ev.applicable.sum())
        for b in np.flatnonzero(ev.applicable):
            if ev.margin_hi[b] < 0:
                violations.append((float(ev.margin[b]), inst.take(int(b))))
            if ev.ratio[b] > best_ratio:
                best_ratio, best_margin, best = float(ev.ratio[b]), float(ev.margin[b]), inst.take(int(b))
    violations.sort(key=lambda t: t[0])
    return SearchResult(statement.id, [v for _, v in violations], best, best_margin, best_ratio, tried,
                        {"random": {"tried": tried, "applicable": applicable, "seconds": 0.01 * seed + 0.1}},
                        wall_s=0.1, seed=seed, budget_s=budget_s)


def scripted(violations=(), best=None, tried=1000, applicable=None, ratio=1.0, margin=0.0, shortest=None):
    """A search that returns exactly these candidates (for verdict edge cases); ``shortest``: its float violation
    at the shortest context."""
    def search(statement, *, budget_s: float, seed: int, progress: bool = False):
        info = {"tried": tried} if applicable is None else {"tried": tried, "applicable": applicable}
        cands = violations if isinstance(violations, Instance) else list(violations)  # a batch is allowed too
        return SearchResult(statement.id, cands, best, margin, ratio, tried, {"scripted": info},
                            seed=seed, budget_s=budget_s, shortest=shortest)

    return search


def no_proof(statement_id: str):
    return None
