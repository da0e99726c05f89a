"""Shrinking a violation into a small, readable counterexample.

Greedy and deterministic: from the most negative candidate, try in order to shrink the context (token
classes: every count scaled down, which walks towards the smallest L that still violates; short ones
written out token by token), drop blocks of tokens or classes (halves, quarters, ... single ones), lower N, drop embedding dimensions, switch the normaliser
to softmax and the temperature to 1, then round every number to 1, 2 or 3 significant digits
(all at once, then array by array); keep a change whenever the float evaluator still finds a
clear violation (relative margin below ``-min(1e-6, |start| / 2)``), and start over from it, trying the
kinds of move that failed in the last round after the others (they mostly fail again).
Each try is one evaluation out of ``plan.shrink_evaluations``. The result is recorded (method
``shrink``) among the violations; certification decides whether it is a counterexample.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, cast

import numpy as np

from attnbounds.theory.mathematics.errors import AttnBoundsError, CallableFailed, InvalidArgument, NotApplicable
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import make
from attnbounds.theory.deciding.search.budget import Plan
from attnbounds.theory.deciding.margins import relative_margins
from attnbounds.theory.deciding.search.tracker import Tracker
from attnbounds.theory.mathematics.statement import Statement

#: relative margin a shrunk instance must stay below (or half the start's, if that is smaller)
CLEAR = 1e-6
#: instance parameters that shrink like integers towards their minimum
_INTEGER_PARAMS = {"dim": 2, "H": 1}
#: parameters never rounded (seeds, Monte Carlo knobs)
_FIXED_PARAMS = {"seed", "mc_draws", "mc_level", "dim", "H"}


@dataclass
class Parts:
    """One instance (B = 1) as plain arrays without the batch axis, ready to be edited and rebuilt."""

    N: int | None
    normaliser: tuple[str, dict[str, float]] | None
    logits: np.ndarray | None = None
    alpha: np.ndarray | None = None
    x: np.ndarray | None = None
    q: np.ndarray | None = None
    k: np.ndarray | None = None
    selection: np.ndarray | None = None
    params: dict[str, float] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    counts: np.ndarray | None = None

    @classmethod
    def of(cls, inst: Instance) -> "Parts":
        n = inst.normaliser
        norm = None if n is None else (n.name, {k: float(np.ravel(v)[0]) for k, v in n.params.items()})
        own = set(norm[1]) if norm else set()
        first = lambda a: None if a is None else np.array(a[0])  # noqa: E731
        return cls(N=inst.N, normaliser=norm, logits=first(inst.logits) if inst.q is None else None,
                   alpha=first(inst.alpha) if n is None else None, x=first(inst.x), q=first(inst.q), k=first(inst.k),
                   selection=first(inst.selection) if inst.counts is None else None,
                   params={k: float(v[0]) for k, v in inst.params.items() if k not in own},
                   arrays={k: np.array(v[0]) for k, v in inst.arrays.items()}, counts=first(inst.counts))

    @property
    def L(self) -> int:
        """Columns (tokens, or token classes)."""
        for a in (self.logits, self.alpha, self.k):
            if a is not None:
                return int(a.shape[0])
        raise InvalidArgument("an instance without logits, weights or keys")

    @property
    def d(self) -> int:
        for a in (self.x, self.q):
            if a is not None:
                return int(a.shape[-1])
        return 0

    def build(self) -> Instance:
        kw: dict[str, Any] = {"N": self.N, "arrays": {k: v[None] for k, v in self.arrays.items()}, **self.params}
        if self.counts is not None:
            kw["counts"] = self.counts[None]
        if self.x is not None:
            kw["x"] = self.x[None]
        if self.selection is not None:
            kw["selection"] = self.selection[None]
        if self.normaliser is None:
            return Instance.from_weights(cast(np.ndarray, self.alpha)[None], **kw)
        normaliser = make(self.normaliser[0], **self.normaliser[1])
        if self.q is not None:
            return Instance.from_qk(self.q[None], cast(np.ndarray, self.k)[None], normaliser, **kw)
        return Instance.from_logits(cast(np.ndarray, self.logits)[None], normaliser, **kw)


def _unit(v: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray | None:
    """``v`` scaled to unit length over tokens (columns counted with their tokens)."""
    n = np.linalg.norm(v) if counts is None else float(np.sqrt((counts * v * v).sum()))
    return v / n if n > 0 else None


def _drop_tokens(p: Parts, drop: np.ndarray, selected: np.ndarray) -> Parts | None:
    keep = ~drop
    mult = np.ones(drop.shape, dtype=np.int64) if p.counts is None else p.counts
    L = int(mult[keep].sum())
    if L < 1:
        return None
    lost = int(mult[drop & selected].sum())
    N = None if p.N is None else max(1, min(p.N - lost, L))
    arrays = {}
    for name, a in p.arrays.items():
        arrays[name] = a[keep]
        if name == "v":
            u = _unit(arrays[name], None if p.counts is None else p.counts[keep])
            if u is None:
                return None
            arrays[name] = u
    sel = None if p.selection is None else p.selection[keep]
    if sel is not None and not sel.any():
        return None
    pick = lambda a: None if a is None else a[keep]  # noqa: E731
    if p.alpha is not None:
        alpha = p.alpha[keep]
        if alpha.sum() <= 0:
            return None
        total = alpha.sum() if p.counts is None else (alpha * p.counts[keep]).sum()
        return replace(p, N=N, alpha=alpha / total, x=pick(p.x), selection=sel, arrays=arrays, counts=pick(p.counts))
    return replace(p, N=N, logits=pick(p.logits), x=pick(p.x), k=pick(p.k), selection=sel, arrays=arrays,
                   counts=pick(p.counts))


def _halving_blocks(n: int) -> Iterator[np.ndarray]:
    """Boolean masks of the blocks of ``range(n)``: halves, quarters, ..., single entries (never all of it)."""
    size = n // 2
    while size >= 1:
        for start in range(0, n, size):
            block = np.zeros(n, dtype=bool)
            block[start:start + size] = True
            if not block.all():
                yield block
        size //= 2


Move = tuple[tuple[Any, ...], Parts]  # (a label naming the kind of move, the simplified instance)


def _token_moves(p: Parts, selected: np.ndarray) -> Iterator[Move]:
    """Drop blocks of tokens (halves, quarters, ..., single ones)."""
    for drop in _halving_blocks(p.L):
        out = _drop_tokens(p, drop, selected)
        if out is not None:
            yield ("drop", int(drop.sum()), int(np.argmax(drop))), out


def _dimension_moves(p: Parts) -> Iterator[Move]:
    """Drop blocks of embedding coordinates (halves, quarters, ..., single ones)."""
    for drop in _halving_blocks(p.d):
        keep = ~drop
        params = dict(p.params)
        if "dim" in params:  # sphere expectations draw in R^dim: it shrinks with x, never below 2
            params["dim"] = float(keep.sum())
            if params["dim"] < 2:
                continue
        yield ("dims", int(drop.sum()), int(np.argmax(drop))), replace(
            p, x=None if p.x is None else p.x[:, keep], q=None if p.q is None else p.q[keep],
            k=None if p.k is None else p.k[:, keep], params=params)


def round_sig(a: Any, digits: int) -> Any:
    """``a`` rounded to ``digits`` significant digits (elementwise; 0 stays 0)."""
    arr = np.asarray(a, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        exp = np.floor(np.log10(np.abs(arr)))
        scale = 10.0 ** (digits - 1 - np.where(arr == 0, 0, exp))
        out = np.where(arr == 0, 0.0, np.round(arr * scale) / scale)
    return out if out.ndim else float(out)


def _rounded(p: Parts, digits: int, only: str | None = None) -> Parts | None:
    def r(name: str, a: Any) -> Any:
        return a if a is None or (only is not None and name != only) else round_sig(a, digits)

    params = {k: (v if k in _FIXED_PARAMS else r(f"param:{k}", v)) for k, v in p.params.items()}
    norm = None if p.normaliser is None else (p.normaliser[0], {k: r(f"normaliser:{k}", v)
                                                               for k, v in p.normaliser[1].items()})
    if norm is not None and any(v <= 0 for k, v in norm[1].items() if k in ("T", "c", "b", "s")):
        return None
    arrays = {k: r(f"array:{k}", v) for k, v in p.arrays.items()}
    if "v" in arrays:
        arrays["v"] = _unit(arrays["v"], p.counts)
        if arrays["v"] is None:
            return None
    alpha = r("alpha", p.alpha)
    if alpha is not None:
        total = alpha.sum() if p.counts is None else (alpha * p.counts).sum()
        if total <= 0 or np.any(alpha < 0):
            return None
        alpha = alpha / total
    out = replace(p, normaliser=norm, logits=r("logits", p.logits), alpha=alpha, x=r("x", p.x), q=r("q", p.q),
                  k=r("k", p.k), params=params, arrays=arrays)
    return None if _same(out, p) else out


def _names(p: Parts) -> list[str]:
    names = [n for n in ("logits", "alpha", "x", "q", "k") if getattr(p, n) is not None]
    names += [f"normaliser:{k}" for k in (p.normaliser[1] if p.normaliser else {})]
    names += [f"param:{k}" for k in p.params if k not in _FIXED_PARAMS] + [f"array:{k}" for k in p.arrays]
    return names


def _same(a: Parts, b: Parts) -> bool:
    for name in ("logits", "alpha", "x", "q", "k"):
        u, v = getattr(a, name), getattr(b, name)
        if (u is None) != (v is None) or (u is not None and not np.array_equal(u, v)):
            return False
    return a.params == b.params and a.normaliser == b.normaliser and all(
        np.array_equal(a.arrays[k], b.arrays[k]) for k in a.arrays)


def _simplify_moves(p: Parts) -> Iterator[Move]:
    if p.N is not None and p.N > 1 and p.selection is None:
        yield ("N",), replace(p, N=p.N - 1)
    for name, lo in _INTEGER_PARAMS.items():
        if name in p.params and p.params[name] > lo and name != "dim":
            yield ("param", name), replace(p, params={**p.params, name: p.params[name] - 1})
    if p.normaliser is not None:
        name, values = p.normaliser
        if name != "softmax":
            yield ("softmax",), replace(p, normaliser=("softmax", {"T": values.get("T", 1.0)}))
        if values.get("T", 1.0) != 1.0:
            yield ("T=1",), replace(p, normaliser=(name, {**values, "T": 1.0}))
    if p.logits is not None and p.logits.size and np.any(p.logits != 0):
        yield ("logits=0",), replace(p, logits=np.zeros_like(p.logits))
        if p.logits.max() != 0:
            yield ("logits-max",), replace(p, logits=p.logits - p.logits.max())
    for name in ("logits", "x", "q", "k"):
        a = getattr(p, name)
        if a is not None and a.size:
            tiny = (np.abs(a) < 1e-3 * np.abs(a).max()) & (a != 0)
            if tiny.any():
                yield ("tiny", name), replace(p, **{name: np.where(tiny, 0.0, a)})  # type: ignore[arg-type]  # one array field, by name


def _round_moves(p: Parts) -> Iterator[Move]:
    for digits in (1, 2, 3):
        out = _rounded(p, digits)
        if out is not None:
            yield ("round", digits), out
    for name in _names(p):
        for digits in (1, 2, 3):
            out = _rounded(p, digits, only=name)
            if out is not None:
                yield ("round", digits, name), out


def _count_moves(p: Parts, selected: np.ndarray) -> Iterator[Move]:
    """Token classes: scale every count down (to 1/1000, 1/100, 1/10, 1/4, 1/2, 3/4, ..., keeping each class
    and N at least 1); then the same with every count kept at least the smallest one (so small special
    classes, such as a few tied maxima, keep their size while the bulk shrinks); then write a short context
    out token by token (a dense instance reads best)."""
    if p.counts is None:
        return
    L = int(p.counts.sum())
    smallest = int(p.counts[p.counts > 0].min()) if (p.counts > 0).any() else 1
    seen = set()
    for floor in (1, smallest):
        for factor in (1e-3, 1e-2, 0.1, 0.25, 0.5, 0.75, 0.9, 0.97, 0.99):
            scaled = np.maximum(np.round(p.counts * factor), np.minimum(p.counts, floor))
            counts = np.where(p.counts > 0, np.maximum(1, scaled), 0).astype(np.int64)
            key = counts.tobytes()
            if counts.sum() >= L or key in seen:
                continue
            seen.add(key)
            N = None if p.N is None else int(min(counts.sum(), max(1, round(p.N * factor)) if p.N > 8 else p.N))
            yield ("counts", floor > 1, factor), replace(p, counts=counts, N=N)
    if L <= 64:
        reps = np.repeat(np.arange(p.counts.size), p.counts)
        pick = lambda a: None if a is None else a[reps]  # noqa: E731
        arrays = {k: v[reps] for k, v in p.arrays.items()}
        yield ("dense",), replace(p, counts=None, logits=pick(p.logits), alpha=pick(p.alpha), x=pick(p.x),
                                  k=pick(p.k), arrays=arrays, selection=None)


def moves(p: Parts, selected: np.ndarray) -> Iterator[Move]:
    """Candidate simplifications of ``p`` with their labels, in the order they are tried (module docstring)."""
    yield from _count_moves(p, selected)
    yield from _token_moves(p, selected)
    yield from _simplify_moves(p)
    yield from _dimension_moves(p)
    yield from _round_moves(p)


def _failed(tracker: Tracker | None, exc: CallableFailed) -> None:
    if tracker is None:
        raise exc
    tracker.method("shrink").failure(exc)


def shrink(statement: Statement, inst: Instance, evaluations: int, threshold: float,
           tracker: Tracker | None = None) -> tuple[Instance, int]:
    """The smallest, roundest instance reachable from ``inst`` (B = 1) that keeps a relative margin
    below ``-threshold``; returns it and the number of evaluations used."""
    current, used = inst, 0
    failed: set[tuple[Any, ...]] = set()  # labels of the moves that failed in the last round: tried last
    improved = True
    while improved and used < evaluations:
        improved = False
        parts = Parts.of(current)
        selected = current.mask[0] if current.N is not None else np.zeros(current.K, dtype=bool)
        fresh = ((label, cand) for label, cand in moves(parts, selected) if label not in failed)
        again = ((label, cand) for label, cand in moves(parts, selected) if label in failed)
        failed_now: set[tuple[Any, ...]] = set()
        for label, cand in itertools.chain(fresh, again):
            if used >= evaluations or (tracker is not None and tracker.expired("shrink")):
                break
            try:
                built = cand.build()
            except CallableFailed as exc:  # the user's callable failed on the move: counted, never silent
                _failed(tracker, exc)
                failed_now.add(label)
                continue
            except AttnBoundsError:  # the move leaves the domain (bad input or not applicable): skip it
                failed_now.add(label)
                continue
            used += 1
            try:
                with np.errstate(all="ignore"):
                    ev = statement.evaluate(built)
                    rel = relative_margins(statement, built, ev)
            except CallableFailed as exc:
                _failed(tracker, exc)
                failed_now.add(label)
                continue
            except NotApplicable:
                failed_now.add(label)
                continue
            except Exception as exc:  # noqa: BLE001 - an internal error: reported, never silent
                if tracker is None:
                    raise
                tracker.method("shrink").error(exc)
                continue
            if ev.violated[0] and rel[0] < -threshold and (tracker is None or tracker.accept is None
                                                           or bool(tracker.accept(built)[0])):
                current, improved = built, True
                break
            failed_now.add(label)
        failed = failed_now
    return current, used


def run(statement: Statement, plan: Plan, tracker: Tracker, progress: Any = None) -> Instance | None:
    """Shrink the most negative clear violation; record the result under method ``shrink``."""
    clear = [c for c in tracker.violations if c.rel < -1e-9]
    if not clear or plan.shrink_evaluations == 0:
        if plan.shrink_evaluations:
            tracker.method("shrink").stopped = "no clear violation to shrink"
        return None
    start = clear[0]
    threshold = min(CLEAR, abs(start.rel) / 2)
    small, used = shrink(statement, start.inst, plan.shrink_evaluations, threshold, tracker)
    tracker.method("shrink").tried += used
    if used < plan.shrink_evaluations:
        tracker.method("shrink").stopped = f"no simpler violation after {used} of {plan.shrink_evaluations} evaluations"
    if progress is not None:
        progress.update(used)
    result = tracker.evaluate(small, "shrink")
    return small if result is not None and result[0].violated[0] else None
