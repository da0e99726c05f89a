"""``search(statement, budget_s=..., seed=...)``: every search method under one budget, one result."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from attnbounds.theory.errors import InvalidArgument
from attnbounds.theory.instance import Instance
from attnbounds.theory import boundary
from attnbounds.theory.search import budget as budget_mod
from attnbounds.theory.search.budget import DEFAULT_BUDGET_S
from attnbounds.theory.search import gradient, random_search, refine, shrink, targeted
from attnbounds.theory.search.tracker import Tracker
from attnbounds.theory.statement import Statement



@dataclass(frozen=True)
class SearchResult:
    """What a search found for one statement (see :func:`search`).

    ``violations``: single instances (B = 1) whose float ``margin_hi < 0``, deduplicated, most
    negative relative margin first (at most 20; certification decides which are real).
    ``best``: the tightest applicable instance (smallest relative margin, see
    :mod:`attnbounds.theory.search.score`); ``best_margin`` is that relative margin and ``best_ratio`` its
    ``lhs / rhs``. ``minimal``: the shrunk, rounded counterexample (also among ``violations``),
    or None. ``by_method``: per method ``tried``, ``applicable``, ``violations``,
    ``best_margin``, ``best_ratio``, ``seconds`` (and ``first_violation_s``). ``plan``: the work
    the budget bought (:mod:`attnbounds.theory.search.budget`).
    """

    statement_id: str
    violations: list[Instance]
    best: Instance | None
    best_margin: float
    best_ratio: float
    tried: int
    by_method: dict[str, dict]
    wall_s: float
    seed: int
    budget_s: float
    minimal: Instance | None = None
    violation_margins: list[float] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)

    @property
    def violated(self) -> bool:
        """True when some candidate has a negative float margin (not yet certified)."""
        return bool(self.violations)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """torch on one thread while searching (reproducible reductions, no oversubscription), with
    subnormal numbers flushed to zero (they make gradient steps on extreme instances 100x slower)."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    flushed = torch.set_flush_denormal(True)
    try:
        yield
    finally:
        torch.set_num_threads(before)
        if flushed:
            torch.set_flush_denormal(False)


def _statement(statement: Statement | str) -> Statement:
    from attnbounds.theory.registry import resolve  # the registry imports every statement module: keep it lazy

    return resolve(statement)


def search(statement: Statement | str, *, budget_s: float = DEFAULT_BUDGET_S, seed: int = 0,
           progress: bool = False, interior: bool = False) -> SearchResult:
    """Look for counterexamples to ``statement`` and for its tightest instance, under one budget.

    Methods, in order, each recorded in ``by_method``: ``random`` (batched random search over
    the adversarial families), ``gradient`` (Adam on the normalised gap (lhs - rhs)/(|lhs| +
    |rhs|) through a torch evaluator, from the tightest instances found and from fresh draws,
    with the hypotheses kept by construction), ``targeted`` (hypothesis with ``target()`` over
    small readable instances), ``refine`` (Monte Carlo statements: the tightest instances again
    with many more draws) and ``shrink`` (minimise L, N, d of the best violation and round its
    numbers while it still violates). With ``interior``, only violations on no boundary of the hypotheses
    count (:mod:`attnbounds.theory.boundary`: not L = 1, N = L, exact ties, zero vectors), and shrinking keeps
    them there. The budget is converted into a fixed amount of work
    (:func:`attnbounds.theory.search.budget.plan`), so the same ``(statement, budget_s, seed)`` gives the
    same result on any machine; ``wall_s`` is what it took here.
    """
    st = _statement(statement)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgument(f"seed must be a non-negative integer, got {seed!r}")
    supports_gradient = gradient.supports(st)
    pl = budget_mod.plan(st, budget_s, gradient=supports_gradient)
    seeds = np.random.SeedSequence([int(seed), 0x5EA2C4]).spawn(3)
    tracker = Tracker(st, accept=boundary.interior if interior else None)
    start = time.perf_counter()
    bar = _bar(progress, st, pl)
    with _one_thread():
        phases = [
            ("random", lambda: random_search.run(st, pl, np.random.default_rng(seeds[0]), tracker, bar)),
            ("gradient", lambda: gradient.run(st, pl, np.random.default_rng(seeds[1]), tracker, bar)),
            ("targeted", lambda: targeted.run(st, pl, int(seeds[2].generate_state(1)[0]), tracker, bar)),
            ("refine", lambda: refine.run(st, pl, tracker, bar)),
        ]
        for name, phase in phases:
            if name == "refine" and pl.refine_evaluations == 0:
                continue
            t = time.perf_counter()
            phase()
            tracker.add_seconds(name, time.perf_counter() - t)
        t = time.perf_counter()
        minimal = shrink.run(st, pl, tracker, bar)
        tracker.add_seconds("shrink", time.perf_counter() - t)
    if bar is not None:
        bar.close()
    best = tracker.best
    return SearchResult(
        statement_id=st.id,
        violations=[c.inst for c in tracker.violations],
        best=None if best is None else best.inst,
        best_margin=float("nan") if best is None else best.rel,
        best_ratio=float("nan") if best is None else best.ratio,
        tried=tracker.tried,
        by_method={name: s.to_dict() for name, s in tracker.stats.items()},
        wall_s=time.perf_counter() - start,
        seed=int(seed),
        budget_s=float(budget_s),
        minimal=minimal,
        violation_margins=[c.rel for c in tracker.violations],
        plan=pl.to_dict(),
    )


def _bar(progress: bool, st: Statement, pl: budget_mod.Plan):
    if not progress:
        return None
    from tqdm import tqdm

    total = (pl.random_batches + pl.gradient_starts + pl.targeted_examples + pl.shrink_evaluations
             + pl.refine_evaluations)
    return tqdm(total=total, desc=f"search {st.id}", unit="step", leave=False)
