"""One instance in interval arithmetic: what every quantity's ``ball`` form reads (certification's reference).

:func:`ball_instance` turns one float instance into balls: the inputs (logits, ``x``, ``q``,
``k``, parameters) are exact doubles and the counts exact integers; the weights are recomputed
from their definition by the normaliser's ball form (``F(l_k) / sum_j m_j F(l_j)`` from a ratio normaliser's sympy
``log F``, ``m_j`` the counts; :mod:`attnbounds.theory.mathematics.normalisers`), or taken as given from a map that
lacks one and says why; each quantity's ``ball`` form (registered on its specification, :mod:`attnbounds.theory.mathematics.quantities`)
then recomputes it from its definition, with straightforward loops over columns (object arrays of
balls), independently of the vectorised float kernels. A dense instance is the case of counts 1.

Also here: the extrema of ``log F`` on balls (Lemma 1), and a rigorous spectral norm of a ball matrix.
"""

from __future__ import annotations

import math

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import Ball, MpmathOps, Ops, PrecisionLoss, Unsupported, backend
from attnbounds.theory.mathematics.normalisers import RatioNormaliser
from attnbounds.theory.mathematics.normalisers.ratio import log_F
from attnbounds.theory.mathematics.normalisers.spec import first_value

#: pieces allowed when bracketing min F and max F on [-a, a] (Lemma 1 constants)
F_RANGE_PIECES = 4000


@dataclass
class BallInstance:
    """One instance in balls (see module docstring). Arrays are numpy object arrays of balls over columns.

    ``counts`` are the exact integer token counts per column (1 for a dense instance), ``m`` the same
    as exact balls; ``sel`` / ``out`` index the selected / non-selected columns that hold tokens.
    """

    ops: Ops
    inst: Instance
    L: int
    N: int | None
    counts: list[int]
    alpha: np.ndarray
    logits: np.ndarray | None
    x: np.ndarray | None
    q: np.ndarray | None
    k: np.ndarray | None
    mask: np.ndarray | None
    params: dict[str, Any]
    arrays: dict[str, np.ndarray]
    weights: str
    logit_source: str | None
    notes: list[str] = field(default_factory=list)
    methods: set[str] = field(default_factory=set)
    level: float | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def K(self) -> int:
        return len(self.counts)

    @property
    def m(self) -> np.ndarray:
        """The counts as exact balls, an object array over columns."""
        if "m" not in self.cache:
            self.cache["m"] = np.array([self.ops.num(c) for c in self.counts], dtype=object)
        return self.cache["m"]

    @property
    def present(self) -> np.ndarray:
        return np.array([c > 0 for c in self.counts], dtype=bool)

    @property
    def sel(self) -> np.ndarray:
        """Selected columns holding tokens, increasing."""
        return np.flatnonzero(self._need_mask() & self.present)

    @property
    def out(self) -> np.ndarray:
        """Non-selected columns holding tokens, increasing."""
        return np.flatnonzero(~self._need_mask() & self.present)

    def _need_mask(self) -> np.ndarray:
        if self.mask is None:
            raise InvalidArgument("this quantity needs a selection size N; pass N=... when building the instance")
        return self.mask

    def num(self, value: float | int) -> Ball:
        return self.ops.num(value)

    @property
    def length(self) -> Ball:
        """L as a ball (what arithmetic reads; ``L`` itself is the integer the structure is built from).
        A growth of instances with a parameter (:mod:`attnbounds.theory.deciding.limits`) sets it to an expression."""
        return self.cache["length"] if "length" in self.cache else self.num(self.L)

    @property
    def size_N(self) -> Ball:
        """N as a ball (see :attr:`length`)."""
        if "size_N" in self.cache:
            return self.cache["size_N"]
        if self.N is None:
            raise InvalidArgument("this statement needs N; pass N=... when building the instance")
        return self.num(self.N)

    def param(self, name: str) -> Ball:
        if name == "L":
            return self.length
        if name == "N":
            return self.size_N
        if name not in self.params:
            raise InvalidArgument(f"this statement needs parameter {name!r}; the instance has: "
                                  f"{', '.join(sorted(self.params)) or 'none'}")
        return self.params[name]

    def float_param(self, name: str, default: float) -> float:
        return float(self.inst.params[name][0]) if name in self.inst.params else default

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def need_x(self) -> np.ndarray:
        if self.x is None:
            raise InvalidArgument("this quantity needs token vectors x of shape (B, L, d); pass x=... to the instance")
        return self.x

    def need_logits(self) -> np.ndarray:
        if self.logits is None:
            raise InvalidArgument("this quantity needs logits; build the instance with from_logits or from_qk")
        return self.logits

    def share(self, v: np.ndarray, total: Any) -> np.ndarray:
        """``v / total``; with symbolic counts (:mod:`attnbounds.theory.deciding.limits`) through one reciprocal (sympy
        compares the terms of every quotient it builds: quadratic in the columns)."""
        return v / total if self.ops.name in ("arb", "mpmath") else v * (self.ops.num(1) / total)

    def weighted_total(self, values: np.ndarray, columns: np.ndarray | None = None) -> Any:
        """``sum_k m_k values_k`` over ``columns`` (default: every column), exactly in balls: a ball for values over
        the columns, an object array for vectors over the columns (``values`` of two dimensions)."""
        idx = np.arange(self.K) if columns is None else columns
        if len(idx) == 0:
            return self.ops.zero()
        return self.ops.total(self.m[idx] * values[idx]) if values.ndim == 1 else \
            (self.m[idx][:, None] * values[idx]).sum(axis=0)


def weights_from_logits(ex: BallInstance, logits: np.ndarray) -> np.ndarray:
    """The normaliser's per-token weights at the given logits (balls): its ball form
    (:meth:`~attnbounds.theory.mathematics.normalisers.Normaliser.ball_weights`)."""
    n = ex.inst.normaliser
    if n is None or "ball" in n.lacks:
        raise Unsupported(f"no certified weights for normaliser {n!r} at shifted logits")
    return n.ball_weights(ex, logits)


def ball_instance(inst: Instance, ops: Ops) -> BallInstance:
    """Balls for the single instance ``inst`` (``B == 1``), weights recomputed from their definition."""
    if inst.B != 1:
        raise InvalidArgument(f"ball_instance needs a single instance (B=1), got B={inst.B}; use inst.take(i)")
    counts = [1] * inst.K if inst.counts is None else [int(c) for c in inst.counts[0]]
    x = None if inst.x is None else ops.array(inst.x[0])
    q = None if inst.q is None else ops.array(inst.q[0])
    k = None if inst.k is None else ops.array(inst.k[0])
    logits, source = None, None
    if inst.exact_logits is not None:
        logits, source = np.array([ops.rational(v.numerator, v.denominator) for v in inst.exact_logits[0]],
                                  dtype=object), "given exactly"
    elif inst.logits is not None:
        logits, source = ops.array(inst.logits[0]), "given"
        if q is not None and k is not None and np.array_equal(np.einsum("d,ld->l", cast(np.ndarray, inst.q)[0], cast(np.ndarray, inst.k)[0]), inst.logits[0]):
            logits, source = (k * q[None, :]).sum(axis=-1), "q.k"
    params = {name: ops.decimal(float(v[0])) for name, v in inst.params.items()}
    arrays = {name: ops.array(v[0]) for name, v in inst.arrays.items()}
    mask = None if inst.N is None else inst.mask[0]
    ex = BallInstance(ops, inst, inst.L, inst.N, counts, np.empty(0, dtype=object), logits, x, q, k, mask, params,
                       arrays, "", source)
    n = inst.normaliser
    if logits is not None and n is not None and "ball" not in n.lacks:  # its ball form (one it lacks says why)
        ex.alpha = weights_from_logits(ex, logits)
        ex.alpha[~ex.present] = ops.zero()  # padding columns hold no token: weight 0, as in the float forms
        ex.weights = f"recomputed from the logits ({source}) by {type(n).__name__} {getattr(n, 'name', '')}".rstrip()
    else:
        given = ops.array(inst.alpha[0])
        if n is None or n.normalising:
            ex.alpha = ex.share(given, ex.weighted_total(given))
            ex.weights = "given weights, renormalised exactly onto the simplex"
            if n is not None and "ball" in n.lacks:
                ex.note(f"{type(n).__name__} weights are taken as given (renormalised), not recomputed: the "
                        "certificate is about these weights, whatever map produced them")
        else:
            ex.alpha = given
            ex.weights = "given weights, as they are"
    if inst.counts is not None:
        ex.note(f"token classes: {inst.K} columns standing for L = {inst.L} tokens (exact integer counts)")
    return ex


# -- Lemma 1: extrema of F on [-a, a] --------------------------------------------------------------------
def _log_F_extrema_on(normaliser: RatioNormaliser, L: int, A: Fraction, bits: int) -> tuple[Any, Any]:
    """``(min log F, max log F)`` over ``[-A, A]`` as ``mpmath.iv`` intervals (see :func:`F_extrema`)."""
    values = tuple(sorted((k, first_value(v)) for k, v in normaliser.values.items()))
    return _log_F_extrema_cached(normaliser.name, normaliser.log_F, values, L, A, bits)


@functools.lru_cache(maxsize=1024)
def _log_F_extrema_cached(name: str, log_F_expr: sp.Expr, values: tuple[tuple[str, float], ...], L: int, A: Fraction,
                          bits: int) -> tuple[Any, Any]:
    normaliser = RatioNormaliser(name, log_F_expr, dict(values))
    iv = cast(MpmathOps, backend("mpmath"))  # backend("mpmath") is always MpmathOps
    with iv.precision(bits):
        point = lambda f: iv.from_fraction(f)  # noqa: E731
        lf = lambda x: log_F(iv, normaliser, L, x)  # noqa: E731
        dlf = lambda x: log_F(iv, normaliser, L, x, derivative=True)  # noqa: E731
        tol = (A + 1) / 2**40
        candidates, stack, pieces = [], [(-A, A)], 0
        while stack:
            lo, hi = stack.pop()
            pieces += 1
            if pieces > F_RANGE_PIECES:
                raise Unsupported(f"could not bracket the extrema of F on [-a, a] within {F_RANGE_PIECES} pieces")
            if lo == hi:
                candidates.append(lf(point(lo)))
                continue
            piece = iv.hull(point(lo), point(hi))
            d = dlf(piece)
            if iv.is_finite(d) and (iv.positive(d) or iv.negative(d)):
                candidates += [lf(point(lo)), lf(point(hi))]
            elif hi - lo < tol:
                mid = point((lo + hi) / 2)  # mean-value form: width ~ |(log F)''| w^2 near a critical point
                candidates.append(lf(mid) + d * (piece - mid))
            else:
                stack += [(lo, (lo + hi) / 2), ((lo + hi) / 2, hi)]
        if not all(iv.is_finite(c) for c in candidates):
            raise Unsupported("log F is not finite on [-a, a]")
        arr = np.array(candidates, dtype=object)
        return iv.minimum(arr), iv.maximum(arr)


def F_extrema(ops: Ops, normaliser: RatioNormaliser, L: int, a: Any) -> tuple[Any, Any]:
    """Balls enclosing ``min log F`` and ``max log F`` over ``[-a, a]``.

    Branch and bound in endpoint interval arithmetic (``mpmath.iv``: midpoint-radius balls are
    useless on wide pieces, where ``exp`` spans many orders of magnitude): a piece on which the
    enclosure of ``(log F)'`` excludes 0 is monotone, so its extrema are at its endpoints
    (evaluated at points); a piece that may hold a critical point is bisected until it is tiny,
    and then its mean-value enclosure is a candidate. The minimum over candidates of the lower
    ends (upper ends) brackets the true minimum; likewise the maximum. When ``a`` itself is only
    known to lie in a ball, the ranges at both ends of that ball are joined (they are monotone in a).
    """
    iv = cast(MpmathOps, backend("mpmath"))  # backend("mpmath") is always MpmathOps
    ends = {ops.to_fraction(ops.lower(a)), ops.to_fraction(ops.upper(a))}
    if min(ends) < 0:
        raise InvalidArgument(f"a must be >= 0, got {ops.text(a)}")
    lows, highs = [], []
    for A in sorted(ends):
        lo, hi = _log_F_extrema_on(normaliser, L, A, ops.bits)
        lows.append(lo)
        highs.append(hi)

    def convert(b: Any) -> Any:
        lo, hi = iv._ends(b)
        return ops.hull(ops.dyadic(*iv.signed_man_exp(lo)), ops.dyadic(*iv.signed_man_exp(hi)))

    return (ops.hull(convert(lows[0]), convert(lows[-1])), ops.hull(convert(highs[0]), convert(highs[-1])))


# -- matrices ------------------------------------------------------------------------------------------
def matmul(ops: Ops, A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A @ B`` for object arrays of balls (through ``arb_mat`` when the backend is arb)."""
    if ops.name == "arb":
        from flint import arb_mat

        C = arb_mat(A.tolist()) * arb_mat(B.tolist())
        return np.array(C.tolist(), dtype=object).reshape(A.shape[0], B.shape[1])
    return A.dot(B)


def _disc_bound(ops: Ops, M: np.ndarray, shift: float = 0.0) -> float:
    """A double >= ``max_i (|M_ii - shift| ... )``: ``max_i (M_ii - shift + sum_{j != i} |M_ij|)`` when
    ``shift`` is 0, else ``max_i (|M_ii - shift| + sum_{j != i} |M_ij|)``; from (mid, rad) doubles, rounded up."""
    n = M.shape[0]
    mid = np.empty((n, n))
    rad = np.empty((n, n))
    for idx, v in np.ndenumerate(M):
        mid[idx], rad[idx] = ops.mid_rad(v)
    off = np.abs(mid) + rad
    np.fill_diagonal(off, 0.0)
    diag = np.abs(np.diag(mid) - shift) if shift else np.diag(mid)
    rest = np.diag(rad) + off.sum(1)
    size = np.abs(diag) + rest  # the float sums err relative to this (a diagonal below 0 cancels)
    return float(np.max(diag + rest + size * ((n + 4) * 2.0**-52))) + 5e-324  # float sums rounded up


def spectral_norm(ops: Ops, J: np.ndarray) -> Ball:
    """A ball enclosing ``||J||_2``.

    Lower end: the Rayleigh quotient ``||J w|| / ||w||`` at the float top eigenvector ``w`` of
    ``J^T J``. Upper end: with ``W`` the float eigenvector matrix (exact as given),
    ``lambda_max(J^T J) = lambda_max(W^T J^T J W) / theta``, ``theta`` in the spectrum of ``W^T W``
    (Ostrowski); both are bounded by Gershgorin discs (the disc sums of the ball matrices are taken
    from their midpoints and radii in doubles, rounded up).
    """
    mid = np.array([[ops._to_float(v) for v in row] for row in J])
    if not np.all(np.isfinite(mid)):
        raise PrecisionLoss("the Jacobian is not finite at this precision")
    top = float(np.abs(mid).max()) if mid.size else 0.0
    shift = -math.frexp(top)[1] if top > 0 else 0  # J scaled by 2^shift to O(1), exactly: J^T J and the disc
    if shift:                                      # sums in doubles under- or overflow beyond 1e+-154
        # in two exact powers of two: 2^shift alone overflows for a subnormal top entry (shift > 1023)
        halves = (shift // 2, shift - shift // 2)
        mid = np.ldexp(mid, shift)
        for h in halves:
            J = J * ops.num(2.0**h)
        out = spectral_norm(ops, J)
        for h in halves:
            out = out * ops.num(2.0**-h)
        return out
    try:
        _, V = np.linalg.eigh(mid.T @ mid)
    except np.linalg.LinAlgError as exc:
        raise PrecisionLoss(f"the float eigenvectors of the Jacobian did not converge: {exc}") from None
    W = ops.array(V)
    JW = matmul(ops, J, W)
    lower = ops.norm(JW[:, -1]) / ops.norm(W[:, -1])
    B = matmul(ops, JW.T.copy(), JW)
    G = matmul(ops, W.T.copy(), W)
    theta = 1.0 - _disc_bound(ops, G, shift=1.0)
    if theta <= 0:
        raise PrecisionLoss("the float eigenvectors are too far from orthogonal to bound the spectral norm")
    upper = ops.sqrt(ops.num(max(_disc_bound(ops, B), 0.0)) / ops.num(theta))
    return ops.hull(ops.lower(lower), ops.upper(upper))
