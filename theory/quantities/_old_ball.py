"""The paper's quantities at definition level, in interval arithmetic: the reference certification trusts.

:func:`exact_instance` turns one float instance into balls: the inputs (logits, ``x``, ``q``,
``k``, parameters) are exact doubles; the weights are recomputed from their definition
(``F(l_i) / sum_j F(l_j)`` from the normaliser's sympy ``log F``); every quantity of
:data:`theory.quantities.QUANTITIES` is then recomputed from its definition in
:data:`EXACT`, with straightforward loops over tokens (object arrays of balls), independently of
the vectorised float kernels. Expectations over random subsets are enumerated exactly when there
are few subsets, else estimated with a Hoeffding interval at a stated level (a statistical
statement, recorded as such); expectations over random sphere embeddings are bounded for every
configuration when the geometry allows it, else estimated the same way.
"""

from __future__ import annotations

import functools
import itertools
import math
from fractions import Fraction
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import sympy as sp
from scipy.special import comb

from theory.errors import AttnBoundsError
from theory.instance import Instance
from theory.intervals import BallEvaluator, Ops, PrecisionLoss, Unsupported, backend
from theory.normalisers import (Entmax15, RatioNormaliser, ReluNormalised, SigmoidAttention, Sparsemax, l_sym)

#: subsets are enumerated up to this many (like :data:`theory.quantities.ENUMERATION_LIMIT`)
ENUMERATION_LIMIT = 4096
#: pieces allowed when bracketing min F and max F on [-a, a] (Lemma 1 constants)
F_RANGE_PIECES = 4000


@dataclass
class ExactInstance:
    """One instance in balls (see module docstring). Arrays are numpy object arrays of balls."""

    ops: Ops
    inst: Instance
    L: int
    N: int | None
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
    enumeration_limit: int = ENUMERATION_LIMIT
    notes: list[str] = field(default_factory=list)
    methods: set[str] = field(default_factory=set)
    level: float | None = None
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def sel(self) -> np.ndarray:
        """Indices of the selected tokens, increasing."""
        return np.flatnonzero(self._need_mask())

    @property
    def out(self) -> np.ndarray:
        return np.flatnonzero(~self._need_mask())

    def _need_mask(self) -> np.ndarray:
        if self.mask is None:
            raise AttnBoundsError("this quantity needs a selection size N; pass N=... when building the instance")
        return self.mask

    def num(self, value: float | int) -> Any:
        return self.ops.num(value)

    def param(self, name: str) -> Any:
        if name == "L":
            return self.num(self.L)
        if name == "N":
            if self.N is None:
                raise AttnBoundsError("this statement needs N; pass N=... when building the instance")
            return self.num(self.N)
        if name not in self.params:
            raise AttnBoundsError(f"this statement needs parameter {name!r}; the instance has: "
                                  f"{', '.join(sorted(self.params)) or 'none'}")
        return self.params[name]

    def float_param(self, name: str, default: float) -> float:
        return float(self.inst.params[name][0]) if name in self.inst.params else default

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _first(value: Any) -> float:
    return float(np.ravel(np.asarray(value, dtype=np.float64))[0])


def _log_F_symbol(expr: sp.Expr) -> sp.Symbol:
    return next((s for s in expr.free_symbols if s.name == "l"), l_sym)


def ratio_env(ops: Ops, normaliser: RatioNormaliser, L: int) -> dict[str, Any]:
    """Parameter values of a ratio normaliser as exact balls (plus ``L``)."""
    return {"L": ops.num(L), **{name: ops.num(_first(v)) for name, v in normaliser.values.items()}}


def _complement_sigmoid(expr: sp.Expr) -> sp.Expr:
    """Rewrite ``c - c sigmoid(u)`` as ``c sigmoid(-u)``: the same number, without the cancellation that
    makes ``1 - sigmoid(u)`` lose every digit for large ``u``."""
    def fix(add: sp.Add) -> sp.Expr:
        terms = list(add.args)
        for t in list(terms):
            coeff, rest = t.as_coeff_Mul()
            if type(rest).__name__ == "sigmoid" and -coeff in terms:
                terms.remove(t)
                terms.remove(-coeff)
                terms.append(-coeff * type(rest)(-rest.args[0]))
        return sp.Add(*terms, evaluate=False)

    return expr.replace(lambda e: isinstance(e, sp.Add), fix)


@functools.lru_cache(maxsize=64)
def _log_F_expr(log_F_expr: sp.Expr, derivative: bool) -> sp.Expr:
    expr = sp.diff(log_F_expr, _log_F_symbol(log_F_expr)) if derivative else log_F_expr
    return _complement_sigmoid(expr)


def log_F(ops: Ops, normaliser: RatioNormaliser, L: int, l: Any, derivative: bool = False) -> Any:
    """``log F(l)`` (or ``(log F)'(l)``) on balls, evaluated from the normaliser's sympy expression."""
    expr = _log_F_expr(normaliser.log_F, derivative)
    env = ratio_env(ops, normaliser, L)
    env["l"] = l
    value = BallEvaluator(ops, env)(expr)
    if not isinstance(value, np.ndarray) and isinstance(l, np.ndarray):
        value = np.array([value] * len(l), dtype=object)  # expression constant in l
    return value


def weights_from_logits(ex: ExactInstance, logits: np.ndarray) -> np.ndarray:
    """The normaliser's weights at the given logits (balls), from the definition of each map."""
    ops, n = ex.ops, ex.inst.normaliser
    one = ops.num(1)
    if isinstance(n, RatioNormaliser):
        F = ops.map(ops.exp, log_F(ops, n, ex.L, logits))
        return F / ops.total(F)
    if isinstance(n, ReluNormalised):
        T = ops.num(_first(n.T))
        F = ops.map(lambda v: ops.max2(v / T, ops.zero()), logits)
        S = ops.total(F)
        if not ops.positive(S):
            raise Unsupported("relu normaliser: the sum of relu(l / T) is not certainly positive")
        return F / S
    if isinstance(n, SigmoidAttention):
        T = ops.num(_first(n.T))
        return ops.map(lambda v: one / (one + ops.exp(-v / T)), logits)
    raise Unsupported(f"no certified weights for normaliser {n!r} at shifted logits")


def exact_instance(inst: Instance, ops: Ops, *, enumeration_limit: int = ENUMERATION_LIMIT) -> ExactInstance:
    """Balls for the single instance ``inst`` (``B == 1``), weights recomputed from their definition."""
    if inst.B != 1:
        raise AttnBoundsError(f"exact_instance needs a single instance (B=1), got B={inst.B}; use inst.take(i)")
    L = inst.L
    x = None if inst.x is None else ops.array(inst.x[0])
    q = None if inst.q is None else ops.array(inst.q[0])
    k = None if inst.k is None else ops.array(inst.k[0])
    logits, source = None, None
    if inst.logits is not None:
        logits, source = ops.array(inst.logits[0]), "given"
        if q is not None and k is not None and np.array_equal(np.einsum("d,ld->l", inst.q[0], inst.k[0]), inst.logits[0]):
            logits, source = (k * q[None, :]).sum(axis=-1), "q.k"
    params = {name: ops.num(float(v[0])) for name, v in inst.params.items()}
    arrays = {name: ops.array(v[0]) for name, v in inst.arrays.items()}
    mask = None if inst.N is None else inst.mask[0]
    ex = ExactInstance(ops, inst, L, inst.N, np.empty(0, dtype=object), logits, x, q, k, mask, params, arrays,
                       "", source, enumeration_limit)
    n = inst.normaliser
    if logits is not None and isinstance(n, (RatioNormaliser, ReluNormalised, SigmoidAttention)):
        ex.alpha = weights_from_logits(ex, logits)
        ex.weights = f"recomputed from the logits ({source}) by {type(n).__name__} {getattr(n, 'name', '')}".rstrip()
    else:
        given = ops.array(inst.alpha[0])
        if n is None or n.normalising:
            ex.alpha = given / ops.total(given)
            ex.weights = "given weights, renormalised exactly onto the simplex"
            if isinstance(n, (Sparsemax, Entmax15)):
                ex.note(f"{type(n).__name__} weights are taken as given (renormalised), not recomputed: the "
                        "certificate is about these weights, whatever map produced them")
        else:
            ex.alpha = given
            ex.weights = "given weights, as they are"
    return ex


# -- registry ------------------------------------------------------------------------------------------
EXACT: dict[str, Callable[[ExactInstance], Any]] = {}


def exact_quantity(name: str) -> Callable[[Callable[[ExactInstance], Any]], Callable[[ExactInstance], Any]]:
    def register(fn: Callable[[ExactInstance], Any]) -> Callable[[ExactInstance], Any]:
        EXACT[name] = fn
        return fn

    return register


def value(name: str, ex: ExactInstance) -> Any:
    """Quantity ``name`` on the exact instance (cached): a ball, or an object array over tokens."""
    if name not in EXACT:
        raise Unsupported(f"quantity {name!r} has no definition-level interval implementation")
    key = "q:" + name
    if key not in ex.cache:
        ex.cache[key] = EXACT[name](ex)
    return ex.cache[key]


def _x(ex: ExactInstance) -> np.ndarray:
    if ex.x is None:
        raise AttnBoundsError("this quantity needs token vectors x of shape (B, L, d); pass x=... to the instance")
    return ex.x


def _logits(ex: ExactInstance) -> np.ndarray:
    if ex.logits is None:
        raise AttnBoundsError("this quantity needs logits; build the instance with from_logits or from_qk")
    return ex.logits


# -- weights -------------------------------------------------------------------------------------------
exact_quantity("alpha_i")(lambda ex: ex.alpha)
exact_quantity("alpha_min")(lambda ex: ex.ops.minimum(ex.alpha))
exact_quantity("alpha_max")(lambda ex: ex.ops.maximum(ex.alpha))
exact_quantity("abar_N")(lambda ex: ex.ops.total(ex.alpha[ex.sel]))
exact_quantity("logit_absmax")(lambda ex: ex.ops.maximum(ex.ops.map(ex.ops.abs, _logits(ex))))


# -- Lemma 1: extrema of F on [-a, a] --------------------------------------------------------------------
def _log_F_extrema_on(normaliser: RatioNormaliser, L: int, A: Fraction, bits: int) -> tuple[Any, Any]:
    """``(min log F, max log F)`` over ``[-A, A]`` as ``mpmath.iv`` intervals (see :func:`F_extrema`)."""
    values = tuple(sorted((k, _first(v)) for k, v in normaliser.values.items()))
    return _log_F_extrema_cached(normaliser.name, normaliser.log_F, values, L, A, bits)


@functools.lru_cache(maxsize=1024)
def _log_F_extrema_cached(name: str, log_F_expr: sp.Expr, values: tuple[tuple[str, float], ...], L: int, A: Fraction,
                          bits: int) -> tuple[Any, Any]:
    normaliser = RatioNormaliser(name, log_F_expr, dict(values))
    iv = backend("mpmath")
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
    iv = backend("mpmath")
    ends = {ops.to_fraction(ops.lower(a)), ops.to_fraction(ops.upper(a))}
    if min(ends) < 0:
        raise AttnBoundsError(f"a must be >= 0, got {ops.text(a)}")
    lows, highs = [], []
    for A in sorted(ends):
        lo, hi = _log_F_extrema_on(normaliser, L, A, ops.bits)
        lows.append(lo)
        highs.append(hi)

    def convert(b: Any) -> Any:
        lo, hi = iv._ends(b)
        return ops.hull(ops.dyadic(*iv.signed_man_exp(lo)), ops.dyadic(*iv.signed_man_exp(hi)))

    return (ops.hull(convert(lows[0]), convert(lows[-1])), ops.hull(convert(highs[0]), convert(highs[-1])))


def _log_F_range(ex: ExactInstance) -> tuple[Any, Any]:
    if "F_range" not in ex.cache:
        n = ex.inst.normaliser
        if not isinstance(n, RatioNormaliser):
            raise Unsupported("Lemma 1's constants need a normaliser of the form F / sum F")
        ex.cache["F_range"] = F_extrema(ex.ops, n, ex.L, ex.param("a"))
    return ex.cache["F_range"]


@exact_quantity("C_1")
def _c1(ex: ExactInstance) -> Any:
    lo, hi = _log_F_range(ex)
    return ex.ops.exp(lo - hi)


@exact_quantity("C_2")
def _c2(ex: ExactInstance) -> Any:
    lo, hi = _log_F_range(ex)
    return ex.ops.exp(hi - lo)


# -- Corollary 1 ---------------------------------------------------------------------------------------
@exact_quantity("Delta_own")
def _delta_own(ex: ExactInstance) -> np.ndarray:
    if ex.q is None or ex.k is None:
        raise AttnBoundsError("Corollary 1 needs the query and keys; build the instance with from_qk")
    return ex.ops.norm(ex.q) * ex.ops.norm(ex.k, axis=-1)


exact_quantity("Delta_max")(lambda ex: ex.ops.maximum(value("Delta_own", ex)))


# -- Theorem 1, fixed top-N set --------------------------------------------------------------------------
def _context(ex: ExactInstance) -> np.ndarray:
    """``s = sum_{j in I_N} alpha_j x_j``."""
    if "s" not in ex.cache:
        sel = ex.sel
        ex.cache["s"] = (ex.alpha[sel, None] * _x(ex)[sel]).sum(axis=0)
    return ex.cache["s"]


exact_quantity("max_norm")(lambda ex: ex.ops.maximum(ex.ops.norm(_x(ex)[ex.sel], axis=-1)))


@exact_quantity("d_1")
def _d1(ex: ExactInstance) -> Any:
    """``max_{i not in I_N, j in I_N} ||x_i - x_j||``.

    Only pairs whose float distance (direct differences, relative error below ``(d + 4) u``) is
    within a relative 1e-6 of the float maximum can attain the maximum; those are recomputed in
    balls. Any non-finite, huge or tiny float value disables the screen (every pair in balls).
    """
    if ex.N == ex.L:
        return ex.num(0)
    sel, out = ex.sel, ex.out
    xf = ex.inst.x[0]
    df = np.sqrt(((xf[out][:, None, :] - xf[sel][None, :, :]) ** 2).sum(-1))
    top = df.max()
    safe = np.isfinite(df).all() and top < 1e150 and (top == 0 or df[df > 0].min() > 1e-150)
    pairs = np.argwhere(df >= top * (1 - 1e-6)) if safe else np.argwhere(np.ones_like(df, dtype=bool))
    x = _x(ex)
    diffs = x[out[pairs[:, 0]]] - x[sel[pairs[:, 1]]]
    return ex.ops.maximum(ex.ops.norm(diffs, axis=-1))


@exact_quantity("dtilde_R1")
def _dtilde_r1(ex: ExactInstance) -> Any:
    out = ex.out
    if len(out) == 0:
        return ex.num(0)
    rows = ex.alpha[out, None] * _x(ex)[out] - _context(ex)[None, :]
    return ex.ops.total(ex.ops.norm(rows, axis=-1))


@exact_quantity("dtilde_R2")
def _dtilde_r2(ex: ExactInstance) -> Any:
    out = ex.out
    outside = (ex.alpha[out, None] * _x(ex)[out]).sum(axis=0) if len(out) else np.array([ex.num(0)] * _x(ex).shape[1], dtype=object)
    return ex.ops.norm(outside - _context(ex))


# -- Theorem 1, random subset; Corollary 2 -----------------------------------------------------------------
def _y(ex: ExactInstance) -> np.ndarray:
    if "y" not in ex.cache:
        ex.cache["y"] = ex.alpha[:, None] * _x(ex)
    return ex.cache["y"]


exact_quantity("A_norm")(lambda ex: ex.ops.total(ex.alpha * ex.ops.norm(_x(ex), axis=-1)))
exact_quantity("m_norm")(lambda ex: ex.ops.norm(_y(ex).sum(axis=0)))


def _jensen(ex: ExactInstance, coefficient: str, xbar: str) -> Any:
    L, N, ops = ex.L, ex.N, ex.ops
    if L < 2:
        raise AttnBoundsError(f"Theorem 1 (random subset) needs L >= 2, got L={L}")
    rho = ops.rational(N, L - 1)
    x = _x(ex)
    c = ex.alpha * (ops.num(1) + rho) if coefficient == "scaled" else ex.alpha + rho
    xb = _y(ex).sum(axis=0) * rho if xbar == "weighted" else x.sum(axis=0) / ops.num(L)
    terms = ops.norm(c[:, None] * x - xb[None, :], axis=-1)
    return ops.rational(L - N, L) * ops.total(terms)


for _c in ("scaled", "printed"):
    for _xb in ("weighted", "mean"):
        exact_quantity(f"J_{_c}_{_xb}")(lambda ex, c=_c, xb=_xb: _jensen(ex, c, xb))


@exact_quantity("jensen_gap_bound")
def _gap(ex: ExactInstance) -> Any:
    """``(L-N)/L sum_i sqrt(N (L-1-N)/(L-2) sigma_i^2)``, sigma_i^2 the population variance of ``{y_j : j != i}``."""
    L, N, ops = ex.L, ex.N, ex.ops
    if L <= 2 or N >= L - 1:
        return ops.num(0)
    y = _y(ex)
    fpc = ops.rational(N * (L - 1 - N), L - 2)
    terms = []
    for i in range(L):
        others = np.delete(y, i, axis=0)
        mean = others.sum(axis=0) / ops.num(L - 1)
        dev = others - mean[None, :]
        var = (dev * dev).sum() / ops.num(L - 1)
        terms.append(ops.sqrt(fpc * var))
    return ops.rational(L - N, L) * ops.total(np.array(terms, dtype=object))


def _dtilde_of(ex: ExactInstance, reading: str, subset: tuple[int, ...]) -> Any:
    y, ops = _y(ex), ex.ops
    chosen = np.zeros(ex.L, dtype=bool)
    chosen[list(subset)] = True
    s = y[chosen].sum(axis=0)
    if reading == "R1":
        rest = y[~chosen]
        return ops.total(ops.norm(rest - s[None, :], axis=-1)) if len(rest) else ops.num(0)
    return ops.norm(y.sum(axis=0) - 2 * s)


def _mc_level(ex: ExactInstance) -> float:
    return ex.float_param("mc_level", 1e-6)


def _expected_dtilde(ex: ExactInstance, reading: str) -> Any:
    """``E_S[dtilde]`` over the uniform N-subsets S: exact enumeration, else Hoeffding (statistical)."""
    L, N, ops = ex.L, ex.N, ex.ops
    count = comb(L, N, exact=True)
    if count <= ex.enumeration_limit:
        ex.methods.add("enumeration")
        total = ops.total(np.array([_dtilde_of(ex, reading, S) for S in itertools.combinations(range(L), N)],
                                   dtype=object))
        return total / ops.num(count)
    # Monte Carlo in float64 with an explicit allowance for rounding, then a Hoeffding interval
    draws = int(ex.float_param("mc_draws", 2000))
    seed = int(ex.float_param("seed", 0))
    beta = _mc_level(ex)
    rng = np.random.default_rng(seed)
    order = np.argsort(rng.random((draws, L)), axis=-1)[:, :N]
    masks = np.zeros((draws, L), dtype=bool)
    np.put_along_axis(masks, order, True, axis=-1)
    y = ex.inst.alpha[0][:, None] * ex.inst.x[0]
    s = masks.astype(np.float64) @ y
    if reading == "R1":
        vals = np.where(masks, 0.0, np.linalg.norm(y[None, :, :] - s[:, None, :], axis=-1)).sum(-1)
    else:
        vals = np.linalg.norm(y.sum(0)[None, :] - 2 * s, axis=-1)
    norms = ops.norm(_y(ex), axis=-1)
    top = ops.total(np.array(sorted(norms, key=ops.upper_float, reverse=True)[:N], dtype=object))
    upper = ops.total(norms) + ops.num(L - N if reading == "R1" else 2) * top  # dtilde <= upper for every S
    U = ops.upper_float(upper)
    half = ops.num(U) * ops.sqrt(ops.log(ops.num(2) / ops.num(beta)) / ops.num(2 * draws))
    slack = ops.num(1e-9) * ops.num(U)  # float64 error of each draw is below (L + d + 4) u U
    mean = ops.num(float(np.mean(vals)))
    ex.methods.add("hoeffding")
    ex.level = 1.0 - beta
    ex.note(f"E over subsets estimated from {draws} uniform draws (seed {seed}), Hoeffding interval at level "
            f"1 - {beta:g}: a statistical statement")
    return ops.hull(mean - slack - half, mean + slack + half)


exact_quantity("E_dtilde_R1")(lambda ex: _expected_dtilde(ex, "R1"))
exact_quantity("E_dtilde_R2")(lambda ex: _expected_dtilde(ex, "R2"))


# -- Theorem 2 -----------------------------------------------------------------------------------------
@exact_quantity("xi")
def _xi(ex: ExactInstance) -> np.ndarray:
    M, delta, ops = ex.param("M"), ex.param("delta"), ex.ops
    a = ex.alpha[ex.sel]
    P = -a + ops.total(a)  # arrays on the left of mixed operations (mpmath scalars refuse arrays)
    Q = -(a * a) + ops.total(a * a)
    return ops.map(ops.sqrt, P * P * (M * M) - (P * P - Q) * (delta * delta / ops.num(2)))


def _others(ex: ExactInstance) -> list[np.ndarray]:
    a = ex.alpha[ex.sel]
    return [np.delete(a, i) for i in range(len(a))]


exact_quantity("P_other")(lambda ex: np.array([ex.ops.total(o) for o in _others(ex)], dtype=object))


@exact_quantity("C_other")
def _c_other(ex: ExactInstance) -> np.ndarray:
    """``sum_{j != k}`` over ordered pairs of the other selected weights, by the definition."""
    ops = ex.ops
    return np.array([ops.total(np.array([o[j] * o[k] for j in range(len(o)) for k in range(len(o)) if j != k],
                                        dtype=object)) for o in _others(ex)], dtype=object)


def _count_interval(ops: Ops, lo: int, hi: int) -> Any:
    return ops.hull(ops.num(lo), ops.num(hi))


def _classify(ops: Ops, dist: np.ndarray, r: Any) -> tuple[np.ndarray, np.ndarray]:
    """(certainly inside the closed ball, certainly outside) for an object array of distances."""
    inside = np.array([ops.nonnegative(r - d) for d in dist], dtype=bool)
    outside = np.array([ops.positive(d - r) for d in dist], dtype=bool)
    return inside, outside


def _counts(ex: ExactInstance) -> tuple[tuple[int, int], tuple[int, int]]:
    """Bounds (lo, hi) on the relaxed and the full count N_s for the instance's own x."""
    ops = ex.ops
    x, r, mask = _x(ex), ex.param("r"), ex._need_mask()
    dist = ops.norm(ex.alpha[:, None] * x - _context(ex)[None, :], axis=-1)
    inside, outside = _classify(ops, dist, r)
    rel = (int((inside & mask).sum()), int(mask.sum() - (outside & mask).sum()))
    if (inside & ~mask).any():
        full = (0, 0)
    elif (outside | mask).all():
        full = rel
    else:
        full = (0, rel[1])
    return rel, full


exact_quantity("Ns_relaxed")(lambda ex: _count_interval(ex.ops, *_counts(ex)[0]))
exact_quantity("Ns_full")(lambda ex: _count_interval(ex.ops, *_counts(ex)[1]))


def _sphere_dim(ex: ExactInstance) -> int:
    default = float(ex.inst.x.shape[-1]) if ex.inst.x is not None else 16.0
    return int(ex.float_param("dim", default))


def _feasible(ex: ExactInstance) -> None:
    """Exhibit a configuration with all pairwise distances > delta (so the conditioned law exists)."""
    if "feasible" in ex.cache:
        return
    ops, L = ex.ops, ex.L
    if not ops.positive(ex.param("delta")) or L < 2:
        ex.cache["feasible"] = True
        return
    from theory.quantities import sphere_embeddings

    M = ex.float_param("M", 1.0)
    rng = np.random.default_rng(int(ex.float_param("seed", 0)))
    try:
        pts = sphere_embeddings(rng, (1,), L, _sphere_dim(ex), np.array([M]), np.array([ex.float_param("delta", 0.0)]))[0]
    except AttnBoundsError as exc:
        raise Unsupported(f"Assumption 2 may be infeasible: {exc}") from None
    p = ops.array(pts)
    p = p / ops.norm(p, axis=-1)[:, None] * ex.param("M")  # exactly on the sphere
    for i in range(L):
        gaps = ops.norm(p[i + 1:] - p[i][None, :], axis=-1) - ex.param("delta")
        if not all(ops.positive(g) for g in gaps):
            raise Unsupported("could not certify a delta-separated configuration (Assumption 2 may be infeasible)")
    ex.cache["feasible"] = True


def _sphere_bounds(ex: ExactInstance, which: int) -> tuple[int, int]:
    """Bounds on N_s valid for EVERY configuration on the sphere with separation delta."""
    ops = ex.ops
    M, r = ex.param("M"), ex.param("r")
    mask, sel = ex._need_mask(), ex.sel
    a = ex.alpha
    xi = value("xi", ex)  # ||s - alpha_i x_i|| <= xi_i (Theorem 2's expansion)
    hi_in, lo_out = 0, 0
    lower = []
    for pos, i in enumerate(sel):
        others = np.delete(a[sel], pos)
        if len(others):
            big = ops.maximum(others)
            lower.append(ops.max2(ops.zero(), (big - (ops.total(others) - big)) * M))
        else:
            lower.append(ops.zero())
    inside_sel, _ = _classify(ops, xi, r)
    _, outside_sel = _classify(ops, np.array(lower, dtype=object), r)
    hi_in = int(inside_sel.sum())
    lo_out = int(outside_sel.sum())
    relaxed = (hi_in, len(sel) - lo_out)
    if which == 0:
        return relaxed
    # non-selected: ||alpha_j x_j - s|| lies in [alpha_j M - ||s||, alpha_j M + ||s||], ||s|| <= xi_all
    abar = ops.total(a[sel])
    delta = ex.param("delta")
    s_hi = ops.sqrt(M * M * abar * abar - delta * delta / ops.num(2) * (abar * abar - ops.total(a[sel] * a[sel])))
    out = np.flatnonzero(~mask)
    ups = np.array([a[j] * M + s_hi for j in out], dtype=object)
    lows = np.array([ops.max2(ops.zero(), a[j] * M - s_hi) for j in out], dtype=object)
    sure_in, _ = _classify(ops, ups, r) if len(out) else (np.zeros(0, bool), None)
    _, sure_out = _classify(ops, lows, r) if len(out) else (None, np.zeros(0, bool))
    if sure_in.any():
        return (0, 0)
    if sure_out.all():
        return relaxed
    return (0, relaxed[1])


def _expected_ns(ex: ExactInstance, which: int) -> Any:
    """``E[N_s]/N`` over x uniform on the M-sphere given delta-separation (weights fixed)."""
    ops, N = ex.ops, ex.N
    _feasible(ex)
    lo, hi = _sphere_bounds(ex, which)
    det = ops.hull(ops.rational(lo, N), ops.rational(hi, N))
    if lo == hi:
        ex.note("N_s takes the same value for every configuration on the sphere (Assumptions 1-2): "
                "the expectation is exact")
        return det
    ex.cache.setdefault("sphere_det", {})[which] = det
    return det


def _expected_ns_mc(ex: ExactInstance, which: int) -> Any:
    """Monte Carlo refinement of :func:`_expected_ns` (statistical, Hoeffding at level 1 - mc_level)."""
    from theory.quantities import sphere_embeddings

    ops, N, L = ex.ops, ex.N, ex.L
    draws = int(ex.float_param("mc_draws", 2000))
    seed = int(ex.float_param("seed", 0))
    beta = _mc_level(ex)
    M, delta, r = ex.float_param("M", 1.0), ex.float_param("delta", 0.0), ex.float_param("r", 1.0)
    rng = np.random.default_rng(seed)
    x = sphere_embeddings(rng, (draws,), L, _sphere_dim(ex), np.array(M), np.array(delta))
    a = ex.inst.alpha[0]
    mask = ex._need_mask()
    s = np.einsum("l,nld->nd", np.where(mask, a, 0.0), x)
    dist = np.linalg.norm(a[None, :, None] * x - s[:, None, :], axis=-1)
    tol = 1e-9 * (r + (a + a[mask].sum()) * M)[None, :]  # rounding of the float draw and weights
    sure, maybe = dist <= r - tol, dist <= r + tol
    rel_lo, rel_hi = (sure & mask).sum(-1), (maybe & mask).sum(-1)
    if which == 0:
        lo, hi = rel_lo, rel_hi
    else:
        lo = rel_lo * ~(maybe & ~mask).any(-1)
        hi = rel_hi * ~(sure & ~mask).any(-1)
    half = math.sqrt(math.log(2 / beta) / (2 * draws))
    ex.methods.add("hoeffding")
    ex.level = 1.0 - beta
    ex.note(f"E[N_s]/N estimated from {draws} sphere draws (seed {seed}, dim {_sphere_dim(ex)}), Hoeffding "
            f"interval at level 1 - {beta:g}: a statistical statement")
    mc = ops.hull(ops.num(float(lo.mean()) / N) - ops.num(half), ops.num(float(hi.mean()) / N) + ops.num(half))
    det = ex.cache["sphere_det"][which]
    return ops.hull(ops.max2(ops.lower(mc), ops.lower(det)), ops.min2(ops.upper(mc), ops.upper(det)))


def refine_sphere(ex: ExactInstance) -> bool:
    """Replace undetermined sphere expectations by their Monte Carlo intervals; True if any changed."""
    changed = False
    for which, name in ((0, "E_Ns_relaxed"), (1, "E_Ns_full")):
        if which in ex.cache.get("sphere_det", {}) and "q:" + name in ex.cache:
            ex.cache["q:" + name] = _expected_ns_mc(ex, which)
            changed = True
    return changed


exact_quantity("E_Ns_relaxed")(lambda ex: _expected_ns(ex, 0))
exact_quantity("E_Ns_full")(lambda ex: _expected_ns(ex, 1))


# -- Lemma 2 / Corollary 3 -----------------------------------------------------------------------------
def _ratio(ex: ExactInstance) -> RatioNormaliser:
    n = ex.inst.normaliser
    if not isinstance(n, RatioNormaliser):
        raise Unsupported(f"Jacobian quantities are certified for normalisers F / sum F only, not {n!r}")
    return n


def _F_parts(ex: ExactInstance) -> tuple[np.ndarray, np.ndarray, Any]:
    """``F(l_j)``, ``F'(l_j) = F (log F)'``, ``S = sum F`` at the instance's logits."""
    if "F" not in ex.cache:
        n, ops = _ratio(ex), ex.ops
        lg = _logits(ex)
        F = ops.map(ops.exp, log_F(ops, n, ex.L, lg))
        dF = F * log_F(ops, n, ex.L, lg, derivative=True)
        ex.cache["F"] = (F, dF, ops.total(F))
    return ex.cache["F"]


def jacobian(ex: ExactInstance) -> np.ndarray:
    """``d alpha_i / d l_j = delta_ij F'_i / S - F_i F'_j / S^2`` (quotient rule on eq. 3)."""
    if "J" not in ex.cache:
        F, dF, S = _F_parts(ex)
        J = -(F[:, None] * dF[None, :]) / (S * S)
        for i in range(ex.L):
            J[i, i] = J[i, i] + dF[i] / S
        ex.cache["J"] = J
    return ex.cache["J"]


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
    total = diag + np.diag(rad) + off.sum(1)
    return float(np.max(total)) * (1 + (n + 4) * 2.0**-52) + 5e-324  # float sums rounded up


def spectral_norm(ops: Ops, J: np.ndarray) -> Any:
    """A ball enclosing ``||J||_2``.

    Lower end: the Rayleigh quotient ``||J w|| / ||w||`` at the float top eigenvector ``w`` of
    ``J^T J``. Upper end: with ``W`` the float eigenvector matrix (exact as given),
    ``lambda_max(J^T J) = lambda_max(W^T J^T J W) / theta``, ``theta`` in the spectrum of ``W^T W``
    (Ostrowski); both are bounded by Gershgorin discs (the disc sums of the ball matrices are taken
    from their midpoints and radii in doubles, rounded up).
    """
    mid = np.array([[ops._to_float(v) for v in row] for row in J])
    _, V = np.linalg.eigh(mid.T @ mid)
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


exact_quantity("J_spectral")(lambda ex: spectral_norm(ex.ops, jacobian(ex)))
exact_quantity("J_frobenius")(lambda ex: ex.ops.sqrt((jacobian(ex) * jacobian(ex)).sum()))
exact_quantity("J_row")(lambda ex: ex.ops.maximum(ex.ops.norm(jacobian(ex), axis=1)))
exact_quantity("J_entry")(lambda ex: ex.ops.maximum(ex.ops.map(ex.ops.abs, jacobian(ex))))


@exact_quantity("g_fd")
def _g_fd(ex: ExactInstance) -> Any:
    """``||alpha(l + eps v) - alpha(l)|| / eps`` with ``v`` normalised exactly to unit length."""
    if "v" not in ex.arrays:
        raise AttnBoundsError("the finite-difference quantity needs a direction: arrays={'v': (B, L) unit vectors}")
    ops = ex.ops
    v = ex.arrays["v"]
    v = v / ops.norm(v)
    ex.note("the direction v is normalised exactly to unit length (the reading's 'unit vector v')")
    eps = ex.param("eps")
    shifted = weights_from_logits(ex, _logits(ex) + v * eps)
    return ops.norm(shifted - ex.alpha) / eps


exact_quantity("dF_max")(lambda ex: ex.ops.maximum(ex.ops.map(ex.ops.abs, _F_parts(ex)[1])) / _F_parts(ex)[2])
exact_quantity("F_l2")(lambda ex: ex.ops.norm(_F_parts(ex)[0]) / _F_parts(ex)[2])
exact_quantity("dF_l2")(lambda ex: ex.ops.norm(_F_parts(ex)[1]) / _F_parts(ex)[2])
exact_quantity("g_absmax")(lambda ex: ex.ops.maximum(ex.ops.map(
    ex.ops.abs, log_F(ex.ops, _ratio(ex), ex.L, _logits(ex), derivative=True))))


# -- multi-head remark -----------------------------------------------------------------------------------
@exact_quantity("coverage_enum")
def _coverage(ex: ExactInstance) -> Any:
    """P(at least one of H independent heads covers) = sum_{k>=1} P(exactly k heads cover)."""
    ops = ex.ops
    p = ex.param("p")
    Hf = ex.float_param("H", 1.0)
    if not Hf.is_integer() or Hf < 0 or Hf > 10_000:
        raise Unsupported(f"H must be a whole number of heads, got H={Hf}")
    H = int(Hf)
    q = ops.num(1) - p
    return ops.total(np.array([ops.num(comb(H, k, exact=True)) * ops.ipow(p, k) * ops.ipow(q, H - k) for k in range(1, H + 1)],
                              dtype=object))
