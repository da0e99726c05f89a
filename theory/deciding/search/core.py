"""``search(statement, budget_s=..., seed=...)``: every search method under one budget, one result."""

from __future__ import annotations

import contextlib
import functools
import math
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

import numpy as np

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.deciding import boundary
from attnbounds.theory.deciding.search import budget as budget_mod
from attnbounds.theory.deciding.search.budget import DEFAULT_BUDGET_S
from attnbounds.theory.deciding.search import gradient, random_search, refine, shrink, targeted
from attnbounds.theory.deciding.parallel import Runner
from attnbounds.theory.deciding.search.tracker import MethodSummary, Tracker
from attnbounds.theory.mathematics.statement import Statement



@dataclass(frozen=True)
class SearchResult:
    """What a search found for one statement (see :func:`search`).

    ``violations``: single instances (B = 1) whose float ``margin_hi < 0``, deduplicated, most
    negative relative margin first (at most 20; certification decides which are real).
    ``best``: the tightest applicable instance (smallest relative margin, see
    :mod:`attnbounds.theory.deciding.margins`); ``best_margin`` is that relative margin and ``best_ratio`` its
    ``lhs / rhs``. ``minimal``: the shrunk, rounded counterexample (also among ``violations``),
    or None. ``by_method``: per method what it did (:class:`~attnbounds.theory.deciding.search.tracker.MethodSummary`:
    ``tried``, ``applicable``, ``violations``, ``best_margin``, ``best_ratio``, ``seconds``, ...). ``plan``: the work
    the budget bought (:mod:`attnbounds.theory.deciding.search.budget`). ``tight``: the tightest instances
    kept (the gradient phase's starting points). ``shortest``: the float violation at the shortest context.
    ``extreme_tie``: the instance whose float margin is exactly 0 (its sides not both 0) at the largest |l| / T,
    where a counterexample below float64's resolution would be (certified beside the tightest).
    """

    statement_id: str
    violations: list[Instance]
    best: Instance | None
    best_margin: float
    best_ratio: float
    tried: int
    by_method: dict[str, MethodSummary]
    wall_s: float
    seed: int
    budget_s: float
    minimal: Instance | None = None
    violation_margins: list[float] = field(default_factory=list)
    plan: dict[str, Any] = field(default_factory=dict)
    tight: list[Instance] = field(default_factory=list)
    shortest: Instance | None = None
    extreme_tie: Instance | None = None

    @property
    def violated(self) -> bool:
        """True when some candidate has a negative float margin (not yet certified)."""
        return bool(self.violations)


class Search(Protocol):
    """The search :func:`attnbounds.theory.running.verify.verify` runs: :func:`search`, or a replacement (a test's
    stand-in) that takes the same keywords and returns a :class:`SearchResult`. ``interior``: only violations on no
    boundary of the hypotheses count; ``runner`` runs its pieces; ``deadline`` (a ``time.time()`` value): planned
    work not started by then is skipped."""

    def __call__(self, statement: Statement, *, budget_s: float, seed: int, progress: bool = False,
                 interior: bool = False, runner: Runner | None = None,
                 deadline: float | None = None) -> SearchResult: ...


#: a violation whose normalised gap is below minus this is not a rounding: the gradient phase then runs
#: 1 / VIOLATED_SHARE of its pieces (it looks for a worse counterexample, not for a first one)
CLEAR_VIOLATION = 1e-3
VIOLATED_SHARE = 4


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """torch and numpy's BLAS on one thread while searching (reproducible reductions, no oversubscription), with
    subnormal numbers flushed to zero (they make gradient steps on extreme instances 100x slower)."""
    from attnbounds.theory.mathematics.memory import blas_threads

    try:
        import torch
    except ImportError:
        with blas_threads(1):
            yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    flushed = torch.set_flush_denormal(True)
    try:
        with blas_threads(1):
            yield
    finally:
        torch.set_num_threads(before)
        if flushed:
            torch.set_flush_denormal(False)


def _interior(st: Statement) -> Callable[[Instance], np.ndarray]:
    """Which instances of a batch lie inside the statement's hypotheses (:func:`boundary.interior`)."""
    return functools.partial(boundary.interior, selection=st.reads_selection)


def _statement(statement: Statement | str) -> Statement:
    from attnbounds.theory.mathematics.registry import resolve  # the registry imports every statement module: keep it lazy

    return resolve(statement)


#: a piece of the random phase is about this much planned work (seconds at the calibrated rates), between
#: :data:`MIN_ROUNDS` and :data:`MAX_ROUNDS` rounds: a task's round trip is about 4 ms, and the last pieces of a
#: phase decide how long the other workers wait; gradient starts (0.05 to 0.5 s each) likewise, one to MAX_STARTS
PIECE_S = 0.15
MIN_ROUNDS, MAX_ROUNDS = 4, 32
MAX_STARTS = 4


def _pieces(n: int, size: int) -> list[range]:
    return [range(k, min(n, k + size)) for k in range(0, n, size)]


def starts_per_piece(pl: budget_mod.Plan) -> int:
    """Gradient starts per piece: about :data:`PIECE_S` of planned work, at least one (each start has its own
    generator: the cut does not change the result)."""
    rate = pl.cost.gradient_per_s
    return int(min(MAX_STARTS, max(1, math.ceil(PIECE_S * rate)))) if rate > 0 else 1


def rounds_per_piece(pl: budget_mod.Plan) -> int:
    """Random rounds per piece: :data:`PIECE_S` of planned work (how the rounds are cut does not change the result:
    pieces are contiguous and merged in order)."""
    rates = pl.cost
    n = pl.random_batches + pl.class_batches
    planned = pl.random_batches / rates.random_per_s + (pl.class_batches / rates.class_per_s if pl.class_batches else 0.0)
    return int(min(MAX_ROUNDS, max(MIN_ROUNDS, round(PIECE_S * n / planned)))) if planned > 0 else MAX_ROUNDS


def _root(seed: int, statement: Statement, phase: int) -> tuple[int, ...]:
    """The seed of a phase of a reading's search: every piece derives its generator from (seed, reading, phase, index)."""
    return (int(seed), zlib.crc32(statement.id.encode()), phase)


Shared = tuple[Statement, budget_mod.Plan, bool, float]  # the statement, its plan, interior only, the deadline


def _random_piece(shared: Shared, piece: tuple[tuple[int, ...], range, int]) -> Tracker:
    (st, pl, interior, deadline), (root, indices, shard) = shared, piece
    tracker = Tracker(st, accept=_interior(st) if interior else None, shard=shard, deadline=deadline)
    with _one_thread():
        random_search.run(st, pl, root, tracker, indices)  # times each round under its method
    return tracker


def _gradient_piece(shared: tuple[Statement, budget_mod.Plan, bool, float, list[Instance]],
                    piece: tuple[tuple[int, ...], range, int]) -> Tracker:
    (st, pl, interior, deadline, pool), (root, indices, shard) = shared, piece
    tracker = Tracker(st, accept=_interior(st) if interior else None, shard=shard, deadline=deadline)
    t = time.perf_counter()
    with _one_thread():
        gradient.run(st, pl, root, tracker, pool, indices)
    tracker.add_seconds("gradient", time.perf_counter() - t)
    return tracker


def _targeted_piece(shared: Shared, piece: tuple[int, int, int, bool]) -> Tracker:
    (st, pl, interior, deadline), (piece_seed, examples, shard, first) = shared, piece
    tracker = Tracker(st, accept=_interior(st) if interior else None, shard=shard, deadline=deadline)
    t = time.perf_counter()
    with _one_thread():
        if first:  # the logit box's corners, once
            targeted.corners(st, tracker)
        targeted.run(st, pl, piece_seed, tracker, examples=examples)
    tracker.add_seconds("targeted", time.perf_counter() - t)
    return tracker


def search(statement: Statement | str, *, budget_s: float = DEFAULT_BUDGET_S, seed: int = 0,
           progress: bool = False, interior: bool = False, runner: Runner | None = None,
           deadline: float | None = None) -> SearchResult:
    """Look for counterexamples to ``statement`` and for its tightest instance, under one budget.

    Methods, in order, each recorded in ``by_method``: ``random`` and ``classes`` (batched random search
    over the adversarial families, dense and token classes), ``gradient`` (Adam on the normalised gap
    through a torch evaluator, from the tightest instances found and from fresh draws, with the hypotheses
    kept by construction), ``targeted`` (hypothesis with ``target()`` over small readable instances),
    ``refine`` (Monte Carlo statements: the tightest instances again with many more draws) and ``shrink``
    (minimise L, N, d of the best violation and round its numbers while it still violates). With
    ``interior``, only violations on no boundary of the hypotheses count (:mod:`attnbounds.theory.deciding.boundary`:
    not L = 1, N = L, exact ties, zero vectors), and shrinking keeps them there.

    The budget is converted into a fixed amount of work (:func:`attnbounds.theory.deciding.search.budget.plan`),
    cut into pieces (random rounds by :func:`rounds_per_piece`, gradient starts by :func:`starts_per_piece`, targeted examples by
    runs of hypothesis) whose generators derive from (seed, reading, phase, index); ``runner``
    (:mod:`attnbounds.theory.deciding.parallel`, in-process by default) runs the pieces of a phase, and they are
    merged in index order. So the same ``(statement, budget_s, seed)`` gives the same result on any machine
    and any cluster; ``wall_s`` is what it took here. A wall-clock ceiling
    (:func:`~attnbounds.theory.deciding.search.budget.deadline_s`) bounds a search on a slow or loaded machine:
    planned work not started by then (or by ``deadline``, a ``time.time()`` value) is skipped and counted
    (``by_method[m]["cut"]``; nothing is written when the ceiling does not bite, so records stay deterministic).
    """
    st = _statement(statement)
    from attnbounds.theory.deciding.closed_claims import is_closed

    if is_closed(st):
        raise InvalidArgument(f"{st.id} is a closed claim ({st.formula}: no quantity, no free parameter): there is "
                              f"nothing to search; `attnbounds verify` (or attnbounds.check) decides it exactly")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InvalidArgument(f"seed must be a non-negative integer, got {seed!r}")
    run = runner if runner is not None else Runner()
    supports_gradient = gradient.supports(st)
    pl = budget_mod.plan(st, budget_s, gradient=supports_gradient)
    start = time.perf_counter()
    if deadline is None:  # the wall-clock ceiling (a reading's searches share the one verify sets)
        deadline = time.time() + budget_mod.deadline_s(budget_s)
    tracker = Tracker(st, accept=_interior(st) if interior else None, shard=-1, deadline=deadline)
    shared = (st, pl, interior, deadline)
    # the random and targeted phases are independent: both start now, the targeted runs in the background, where
    # they fill the wait for the last random rounds and the gradient phase that starts from the random phase's
    # pool. Merged in the same order as in-process (random, gradient, targeted), whatever finished first.
    random_pieces = _pieces(pl.random_batches + pl.class_batches, rounds_per_piece(pl))
    random_phase = run.start(_random_piece, [(_root(seed, st, 0), r, k) for k, r in enumerate(random_pieces)],
                             shared=shared, label=f"search {st.id}: random", last_first=True)  # longer L later
    shard = len(random_pieces)
    gradient_pieces = _pieces(pl.gradient_starts, starts_per_piece(pl)) if supports_gradient else []
    n_gradient = len(gradient_pieces)
    seeds = np.random.SeedSequence(list(_root(seed, st, 2))).spawn(len(targeted.pieces(pl)))
    targeted_phase = run.start(_targeted_piece, [(int(child.generate_state(1)[0]), n, shard + n_gradient + k, k == 0)
                                                 for k, (child, n) in enumerate(zip(seeds, targeted.pieces(pl)))],
                               shared=shared, label=f"search {st.id}: targeted", background=True)
    for t in random_phase.results(progress=progress):
        tracker.merge(t)
    if n_gradient:
        pool = [c.inst for c in tracker.pool]
        if any(c.rel < -CLEAR_VIOLATION for c in tracker.violations):
            # a clear counterexample is in hand: the ascent only looks for a worse one, on a quarter of its starts
            kept = -(-n_gradient // VIOLATED_SHARE)  # rounded up: at least one piece
            tracker.method("gradient").stopped = (f"{kept} of {n_gradient} pieces of starts: the random phase had "
                                                  f"found a violation by more than {CLEAR_VIOLATION:g}")
            gradient_pieces = gradient_pieces[:kept]
        gradient_phase = run.start(_gradient_piece, [(_root(seed, st, 1), r, shard + k) for k, r in
                                                     enumerate(gradient_pieces)],
                                   shared=(st, pl, interior, deadline, pool), label=f"search {st.id}: gradient")
        for t in gradient_phase.results(progress=progress):
            tracker.merge(t)
    elif pl.gradient_starts:
        tracker.method("gradient").stopped = gradient.unsupported_reason(st) or "not supported"
    for t in targeted_phase.results(progress=progress):
        tracker.merge(t)
    with _one_thread():
        if pl.refine_evaluations:
            t0 = time.perf_counter()
            refine.run(st, pl, tracker, runner=run)
            tracker.add_seconds("refine", time.perf_counter() - t0)
        t0 = time.perf_counter()
        minimal = shrink.run(st, pl, tracker)
        tracker.add_seconds("shrink", time.perf_counter() - t0)
    best = tracker.best
    return SearchResult(
        statement_id=st.id,
        violations=[c.inst for c in tracker.violations],
        best=None if best is None else best.inst,
        best_margin=float("nan") if best is None else best.rel,
        best_ratio=float("nan") if best is None else best.ratio,
        tried=tracker.tried,
        by_method={name: s.to_dict() for name, s in sorted(tracker.stats.items(), key=lambda kv: _ORDER.get(kv[0], 9))},
        wall_s=time.perf_counter() - start,
        seed=int(seed),
        budget_s=float(budget_s),
        minimal=minimal,
        violation_margins=[c.rel for c in tracker.violations],
        plan=pl.to_dict(),
        tight=[c.inst for c in tracker.pool],
        shortest=None if tracker.shortest is None else tracker.shortest.inst,
        extreme_tie=None if tracker.extreme_tie is None else tracker.extreme_tie.inst,
    )


#: the methods in the order they run (records list them so)
_ORDER = {"random": 0, "classes": 1, "gradient": 2, "targeted": 3, "refine": 4, "shrink": 5}
