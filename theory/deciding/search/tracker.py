"""What the search keeps while it runs: candidate violations, the tightest instance, per-method counts."""

from __future__ import annotations

import contextlib
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, TypedDict

import numpy as np

from attnbounds.theory.mathematics.errors import CallableFailed, NotApplicable
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.deciding.margins import relative_margins
from attnbounds.theory.mathematics.statement import Evaluation, Statement

#: candidate violations kept (best first)
KEEP = 20
#: tight instances kept as starting points for the gradient and refine phases
POOL = 16
#: ranking key of instances with lhs = rhs = 0 (relative margins lie in [-1, 1])
DEGENERATE = 2.0


@dataclass(order=True)
class Candidate:
    """One instance (B = 1) with its relative margin, ratio and the method that found it."""

    rel: float
    order: tuple[int, int]  # (shard, discovery order): ties in ``rel`` keep the earlier candidate first
    inst: Instance = field(compare=False)
    ratio: float = field(compare=False)
    margin_hi: float = field(compare=False)
    method: str = field(compare=False)
    digest: bytes | None = field(default=None, compare=False)  # :func:`instance_key`, once: it travels with the candidate

    def key(self) -> bytes:
        if self.digest is None:
            self.digest = instance_key(self.inst)
        return self.digest


def instance_key(inst: Instance, b: int = 0) -> bytes:
    """A digest of instance ``b``'s inputs (12 significant digits; class counts exactly): equal for duplicates."""
    h = hashlib.sha1()
    h.update(repr((inst.L, inst.N, repr(inst.normaliser.take(np.array([b])) if inst.normaliser else None))).encode())
    arrays = [inst.alpha, inst.logits, inst.x, inst.q, inst.k, inst.selection, inst.counts,
              *(inst.params[k] for k in sorted(inst.params)), *(inst.arrays[k] for k in sorted(inst.arrays))]
    for a in arrays:
        if a is not None:
            v = np.asarray(a[b], dtype=np.float64)
            h.update(np.array([float(f"{x:.12g}") for x in v.ravel()]).tobytes())
    return h.digest()


#: distinct error messages kept per method
MESSAGES = 5


class MethodSummary(TypedDict, total=False):
    """What one search method did, as a record's ``search.by_method[m]`` holds it (:meth:`MethodStats.to_dict`);
    :data:`TIMING_KEYS` go to the record's ``timing`` instead (a replacement search reports the same keys)."""

    tried: int
    applicable: int
    violations: int
    best_margin: float
    best_ratio: float
    seconds: float
    first_violation_s: float
    skipped: int
    errors: int
    error_messages: list[str]
    callable_failures: int
    callable_failure_messages: list[str]
    stopped: str
    cut: int
    L_range: list[int]
    violation_L_min: int
    by_L: list[list[float]]


#: the entries of a :class:`MethodSummary` that depend on the clock (a record keeps them apart, under ``timing``)
TIMING_KEYS = ("seconds", "first_violation_s")


@dataclass
class MethodStats:
    """What one search method did. ``skipped``: draws outside a hypothesis or requirement
    (:class:`~attnbounds.theory.mathematics.errors.NotApplicable`); ``failures``: batches a user's callable normaliser failed on
    (:class:`~attnbounds.theory.mathematics.errors.CallableFailed`: part of the range not checked, the verdict cannot be
    VERIFIED); ``errors``: any other exception (an internal error of the search, never swallowed silently: the
    verdict becomes UNDECIDED naming it)."""

    tried: int = 0
    applicable: int = 0
    violations: int = 0
    best_margin: float = float("inf")
    best_ratio: float = float("nan")
    best_key: float = float("inf")
    seconds: float = 0.0
    first_violation_s: float | None = None
    errors: int = 0
    skipped: int = 0
    messages: list[str] = field(default_factory=list)
    failures: int = 0
    failure_messages: list[str] = field(default_factory=list)
    stopped: str = ""  # why a method stopped before using its budget
    cut: int = 0  # units of planned work (rounds, starts, examples, evaluations) the wall-clock ceiling skipped
    L_min: int | None = None  # the shortest and longest context this method evaluated
    L_max: int | None = None
    violation_L_min: int | None = None  # the shortest context of a float violation it found
    #: the tightest instance per range of context lengths: ``floor(log2 L) -> (key, L, ratio, relative margin)``
    by_L: dict[int, tuple[float, int, float, float]] = field(default_factory=dict)

    def to_dict(self) -> MethodSummary:
        out: MethodSummary = {"tried": self.tried, "applicable": self.applicable, "violations": self.violations,
               "best_margin": self.best_margin, "best_ratio": self.best_ratio, "seconds": round(self.seconds, 4)}
        if self.first_violation_s is not None:
            out["first_violation_s"] = round(self.first_violation_s, 4)
        if self.skipped:
            out["skipped"] = self.skipped
        if self.errors:
            out["errors"] = self.errors
            out["error_messages"] = list(self.messages)
        if self.failures:
            out["callable_failures"] = self.failures
            out["callable_failure_messages"] = list(self.failure_messages)
        if self.stopped:
            out["stopped"] = self.stopped
        if self.cut:
            out["cut"] = self.cut
        if self.L_min is not None and self.L_max is not None:  # set together
            out["L_range"] = [self.L_min, self.L_max]
        if self.violation_L_min is not None:
            out["violation_L_min"] = self.violation_L_min
        if self.by_L:  # rows [L, best lhs/rhs, best relative margin], one per octave of L, shortest first
            out["by_L"] = [[L, ratio, rel] for _, (_, L, ratio, rel) in sorted(self.by_L.items())]
        return out

    def note_L(self, L: int, key: float, ratio: float, rel: float) -> None:
        """Keep the tightest instance of its octave of context lengths (ties keep the earlier one)."""
        octave = int(L).bit_length() - 1
        kept = self.by_L.get(octave)
        if kept is None or key < kept[0]:
            self.by_L[octave] = (key, int(L), ratio, rel)

    def merge(self, other: "MethodStats") -> None:
        """Add another piece's counts (sums, minima, the earliest messages)."""
        self.tried += other.tried
        self.applicable += other.applicable
        self.violations += other.violations
        self.errors += other.errors
        self.skipped += other.skipped
        self.failures += other.failures
        self.cut += other.cut
        self.seconds += other.seconds
        if other.best_key < self.best_key:
            self.best_key, self.best_margin, self.best_ratio = other.best_key, other.best_margin, other.best_ratio
        if other.first_violation_s is not None:
            self.first_violation_s = other.first_violation_s if self.first_violation_s is None else \
                min(self.first_violation_s, other.first_violation_s)
        for mine, theirs in ((self.messages, other.messages), (self.failure_messages, other.failure_messages)):
            for text in theirs:
                if text not in mine and len(mine) < MESSAGES:
                    mine.append(text)
        self.stopped = self.stopped or other.stopped
        for octave, (key, L, ratio, rel) in sorted(other.by_L.items()):
            self.note_L(L, key, ratio, rel)
        for attr, pick in (("L_min", min), ("L_max", max), ("violation_L_min", min)):
            mine, theirs = getattr(self, attr), getattr(other, attr)
            setattr(self, attr, theirs if mine is None else mine if theirs is None else pick(mine, theirs))

    def error(self, exc: BaseException | str) -> None:
        """Count an internal error (an exception, or its ``Type: message`` text)."""
        self.errors += 1
        text = (exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}")[:300]
        if text not in self.messages and len(self.messages) < MESSAGES:
            self.messages.append(text)

    def failure(self, exc: BaseException | str) -> None:
        """Count a failure of a user's callable normaliser (its message, or the exception)."""
        self.failures += 1
        text = str(exc)[:300]
        if text not in self.failure_messages and len(self.failure_messages) < MESSAGES:
            self.failure_messages.append(text)


#: what evaluating a batch gave: ``("ok", evaluation, relative margins, degenerate)``, ``("skipped",)`` (outside a
#: hypothesis or requirement), ``("failed", message)`` (a user's callable failed) or ``("error", "Type: message")``;
#: plain data, so a worker can send it back
Outcome = tuple[Any, ...]


def measure(statement: Statement, inst: Instance) -> Outcome:
    """Evaluate a batch (defaults filled in once, so both evaluations share the quantities computed)."""
    try:
        with np.errstate(all="ignore"):
            prepared = statement.prepare(inst)
            ev = statement.evaluate(prepared)
            rel, degenerate = relative_margins(statement, prepared, ev, with_degenerate=True)
    except CallableFailed as exc:
        return ("failed", str(exc))
    except NotApplicable:
        return ("skipped",)
    except Exception as exc:  # noqa: BLE001 - counted and reported, see MethodStats
        return ("error", f"{type(exc).__name__}: {exc}")
    return ("ok", ev, rel, degenerate)


class Tracker:
    """Evaluates batches for one statement and keeps what the search reports (see :mod:`attnbounds.theory.deciding.search`)."""

    def __init__(self, statement: Statement, accept: Callable[[Instance], np.ndarray] | None = None, shard: int = 0,
                 deadline: float | None = None):
        """``accept(inst) -> (B,) bool``: only accepted instances count as violations (e.g. interior ones);
        ``shard``: the index of the piece of work this tracker records (candidates order by it first);
        ``deadline``: the wall-clock time (``time.time()``) after which planned work is skipped (:meth:`expired`)."""
        self.statement = statement
        self.accept = accept
        self.shard = shard
        self.deadline = deadline
        self.violations: list[Candidate] = []
        #: the float violation at the shortest context seen (the most negative margin at that L)
        self.shortest: Candidate | None = None
        self.best: Candidate | None = None
        self.best_key = float("inf")
        self.pool: list[Candidate] = []
        #: the tie (a float margin of exactly 0, sides not both 0) at the largest logit magnitude |l| / T: where float
        #: arithmetic saturates (a weight rounded to 1, exp under- or overflowing) its 0 hides the real sign, and
        #: the most extreme tie is where a counterexample below float64's resolution lies if any does; its rel is
        #: minus that magnitude (the smallest first, like the pool's)
        self.extreme_tie: Candidate | None = None
        self.stats: dict[str, MethodStats] = {}
        self._keys: set[bytes] = set()
        self._order = 0
        self._start = time.perf_counter()

    def __getstate__(self) -> dict[str, Any]:
        """What a piece of work sends back: its records, not the statement it evaluated (the tracker it is
        merged into has that)."""
        return {**self.__dict__, "statement": None}

    def expired(self, method: str) -> bool:
        """Whether the wall-clock ceiling has passed; if so the unit of ``method``'s work about to start is counted
        as cut (and skipped by the caller)."""
        if self.deadline is None or time.time() <= self.deadline:
            return False
        self.method(method).cut += 1
        return True

    @property
    def tried(self) -> int:
        return sum(s.tried for s in self.stats.values())

    def method(self, name: str) -> MethodStats:
        return self.stats.setdefault(name, MethodStats())

    @contextlib.contextmanager
    def guard(self, method: str) -> Iterator[None]:
        """Run a step of ``method``: a :class:`NotApplicable` is a skipped draw, a :class:`CallableFailed` a failure
        of the user's callable, any other exception an error (counted with its message); none stops the search.
        Interrupts pass through."""
        try:
            with np.errstate(all="ignore"):
                yield
        except CallableFailed as exc:
            self.method(method).failure(exc)
        except NotApplicable:
            self.method(method).skipped += 1
        except Exception as exc:  # noqa: BLE001 - counted and reported, see MethodStats
            self.method(method).error(exc)

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self.stats.values())

    def evaluate(self, inst: Instance, method: str) -> tuple[Evaluation, np.ndarray] | None:
        """Evaluate a batch, record it, and return ``(evaluation, relative margins)``; None if it cannot be evaluated."""
        return self.record_outcome(inst, measure(self.statement, inst), method)

    def record_outcome(self, inst: Instance, outcome: Outcome, method: str) -> tuple[Evaluation, np.ndarray] | None:
        """Record what :func:`measure` gave for ``inst`` (wherever it ran); as :meth:`evaluate`.
        (Candidates keep the instance as given: a default like a = max|l| must follow later edits.)"""
        if outcome[0] == "skipped":
            self.method(method).skipped += 1
            return None
        if outcome[0] == "failed":
            self.method(method).failure(outcome[1])
            return None
        if outcome[0] == "error":
            self.method(method).error(outcome[1])
            return None
        _, ev, rel, degenerate = outcome
        self.record(inst, ev, rel, degenerate, method)
        return ev, rel

    def record(self, inst: Instance, ev: Evaluation, rel: np.ndarray, degenerate: np.ndarray, method: str) -> None:
        st = self.method(method)
        st.tried += inst.B
        st.applicable += int(ev.applicable.sum())
        if not self.statement.ranges or ev.applicable.any():  # with ranges: the lengths searched inside them
            st.L_min = inst.L if st.L_min is None else min(st.L_min, inst.L)
            st.L_max = inst.L if st.L_max is None else max(st.L_max, inst.L)
        if not ev.applicable.any():
            return
        ratio = ev.ratio
        violated = ev.violated if self.accept is None else ev.violated & self.accept(inst)
        viol = np.flatnonzero(violated)
        if viol.size:
            st.violations += int(viol.size)
            st.violation_L_min = inst.L if st.violation_L_min is None else min(st.violation_L_min, inst.L)
            if st.first_violation_s is None:
                st.first_violation_s = time.perf_counter() - self._start
            b = int(viol[np.argmin(rel[viol])])
            if self.shortest is None or (inst.L, rel[b]) < (self.shortest.inst.L, self.shortest.rel):
                self.shortest = self._candidate(inst, b, float(rel[b]), float(ratio[b]), float(ev.margin_hi[b]), method)
            worst_kept = self.violations[-1].rel if len(self.violations) >= KEEP else np.inf
            for b in viol[np.argsort(rel[viol], kind="stable")][:KEEP]:
                if rel[b] >= worst_kept and len(self.violations) >= KEEP:
                    break
                self._add_violation(inst, int(b), float(rel[b]), float(ratio[b]), float(ev.margin_hi[b]), method)
        # "0 <= 0" (up to rounding) says nothing about how tight a bound is: such instances rank last
        key = np.where(degenerate, DEGENERATE, rel)
        b = int(np.argmin(key))
        if key[b] < st.best_key:
            st.best_key, st.best_margin, st.best_ratio = float(key[b]), float(rel[b]), float(ratio[b])
        st.note_L(inst.L, float(key[b]), float(ratio[b]), float(rel[b]))
        if self.best is None or key[b] < self.best_key:
            self.best_key = float(key[b])
            self.best = self._candidate(inst, b, float(rel[b]), float(ratio[b]), float(ev.margin_hi[b]), method)
        self._add_to_pool(inst, key, ratio, ev.margin_hi, method)
        self._note_tie(inst, rel, degenerate, ev, method)

    def _note_tie(self, inst: Instance, rel: np.ndarray, degenerate: np.ndarray, ev: Evaluation, method: str) -> None:
        """Keep the tie at the largest |l| / T (:attr:`extreme_tie`)."""
        if inst.logits is None:
            return
        ties = (rel == 0) & ~degenerate & ev.applicable
        if not ties.any():
            return
        T = inst.params["T"] if "T" in inst.params else np.ones(inst.B)
        with np.errstate(divide="ignore", invalid="ignore"):
            size = np.where(ties, np.abs(inst.logits).max(-1) / np.abs(np.asarray(T, dtype=float)), -np.inf)
        size = np.where(np.isfinite(size) | ~ties, size, np.inf)
        b = int(np.argmax(size))
        if self.extreme_tie is None or -size[b] < self.extreme_tie.rel:
            self.extreme_tie = self._candidate(inst, b, float(-size[b]), float(ev.ratio[b]), float(ev.margin_hi[b]),
                                               method)

    def _candidate(self, inst: Instance, b: int, rel: float, ratio: float, margin_hi: float, method: str) -> Candidate:
        self._order += 1
        return Candidate(rel, (self.shard, self._order), inst.take(b), ratio, margin_hi, method)

    def merge(self, other: "Tracker") -> None:
        """Add what another tracker recorded (a piece of the same search): merging the pieces in their index
        order gives the same result whichever process ran them."""
        for cand in other.violations:
            self._keep_violation(cand)
        if other.shortest is not None and (self.shortest is None or (other.shortest.inst.L, other.shortest.rel,
                                                                     other.shortest.order) <
                                           (self.shortest.inst.L, self.shortest.rel, self.shortest.order)):
            self.shortest = other.shortest
        self.pool = sorted(self.pool + other.pool)[:POOL]
        if other.extreme_tie is not None and (self.extreme_tie is None or other.extreme_tie < self.extreme_tie):
            self.extreme_tie = other.extreme_tie
        if other.best is not None and (self.best is None or (other.best_key, other.best.order) < (self.best_key, self.best.order)):
            self.best, self.best_key = other.best, other.best_key
        for name, theirs in other.stats.items():
            self.method(name).merge(theirs)

    def _add_violation(self, inst: Instance, b: int, rel: float, ratio: float, margin_hi: float, method: str) -> None:
        key = instance_key(inst, b)
        if key in self._keys:
            return
        cand = self._candidate(inst, b, rel, ratio, margin_hi, method)
        cand.digest = key
        self._keep_violation(cand)

    def _keep_violation(self, cand: Candidate) -> None:
        key = cand.key()
        if key in self._keys:
            return
        self._keys.add(key)
        self.violations.append(cand)
        self.violations.sort()
        for dropped in self.violations[KEEP:]:
            self._keys.discard(dropped.key())
        del self.violations[KEEP:]

    def _add_to_pool(self, inst: Instance, rel: np.ndarray, ratio: np.ndarray, margin_hi: np.ndarray, method: str) -> None:
        bound = self.pool[-1].rel if len(self.pool) >= POOL else DEGENERATE
        order = np.argsort(rel, kind="stable")[:POOL]
        for b in order:
            if not rel[b] < bound:
                break
            self.pool.append(self._candidate(inst, int(b), float(rel[b]), float(ratio[b]), float(margin_hi[b]), method))
        self.pool.sort()
        del self.pool[POOL:]

    def add_seconds(self, method: str, seconds: float) -> None:
        self.method(method).seconds += seconds
