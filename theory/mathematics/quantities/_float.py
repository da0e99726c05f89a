"""Shared float64 building blocks of the quantities' ``float`` forms (cached on the instance).

Every helper reads columns with their multiplicities (:attr:`Instance.multiplicity`: token
counts, or ones for a dense instance) and ignores columns with count 0, so one kernel serves
dense instances and token classes. Norms and inner products are batched ``einsum`` over the
leading batch axis; Gram-form distances fall back to direct differences where they cancel.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.instance import Instance

#: a Gram-form squared distance below this fraction of its terms is recomputed directly
CANCELLATION = 1e-3
#: elements a chunked (B, K, S) temporary may hold at once
CHUNK_ELEMENTS = 1 << 22
#: token-vector elements (8 bytes each: 4 MiB) a chunk of :func:`token_pass` reads at once, so that everything computed
#: from a chunk finds it in the processor's cache instead of reading the batch from memory once per product (2^17 to
#: 2^20 measured on the kernel benchmark: 2^19 was fastest)
CACHE_ELEMENTS = 1 << 19


def cached(inst: Instance, key: str, fn: Callable[[], Any]) -> Any:
    if key not in inst._cache:
        inst._cache[key] = fn()
    return inst._cache[key]


def need_x(inst: Instance) -> np.ndarray:
    if inst.x is None:
        raise InvalidArgument("this quantity needs token vectors x of shape (B, L, d); pass x=... to the instance")
    return inst.x


def need_logits(inst: Instance) -> np.ndarray:
    if inst.logits is None:
        raise InvalidArgument("this quantity needs logits; build the instance with from_logits or from_qk")
    return inst.logits


def selected_weight(inst: Instance) -> np.ndarray:
    """``m_k alpha_k`` on selected columns, 0 elsewhere ``(B, K)``: the coefficients of ``s``."""
    return cached(inst, "wsel", lambda: np.where(inst.mask, inst.multiplicity * inst.alpha, 0.0))


def norms_sq(inst: Instance) -> np.ndarray:
    """``||x_k||^2`` ``(B, K)``."""
    return cached(inst, "x2", lambda: np.einsum("bkd,bkd->bk", need_x(inst), need_x(inst)))


def y_norms(inst: Instance) -> np.ndarray:
    """``||alpha_k x_k||`` ``(B, K)``."""
    return cached(inst, "ynorm", lambda: inst.alpha * np.sqrt(norms_sq(inst)))


def context(inst: Instance) -> np.ndarray:
    """``s = sum_{i in I_N} alpha_i x_i`` ``(B, d)`` (each selected column counted with its tokens)."""
    return cached(inst, "s", lambda: np.einsum("bk,bkd->bd", selected_weight(inst), need_x(inst)))


def output(inst: Instance) -> np.ndarray:
    """``m = sum_i alpha_i x_i`` ``(B, d)``, the attention output."""
    return cached(inst, "m", lambda: np.einsum("bk,bkd->bd", inst.multiplicity * inst.alpha, need_x(inst)))


def distances(aa: np.ndarray, bb: np.ndarray, ab: np.ndarray, direct: Callable[..., np.ndarray]) -> np.ndarray:
    """``||u - v||`` from ``aa = ||u||^2``, ``bb = ||v||^2``, ``ab = <u, v>`` (broadcast together).

    The Gram form costs one matrix product but loses relative accuracy when ``u ~ v``; entries
    whose squared distance is below :data:`CANCELLATION` times ``aa + bb`` (or not a number: squares that
    overflow) are recomputed
    from the vectors by ``direct(*index)`` (``index`` as from ``np.nonzero``), so every entry
    is accurate to a few ulps of ``||u|| + ||v||`` relative to itself.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        scale = aa + bb
        d2 = scale - 2.0 * ab
        out = np.sqrt(np.maximum(d2, 0.0))
        bad = np.nonzero(~(d2 > CANCELLATION * scale))  # NaN too: squares that overflow
    if bad[0].size:
        out[bad] = direct(*bad)
    return out


def context_dots(inst: Instance) -> np.ndarray:
    """``<x_k, s>`` for every column ``(B, K)``."""
    return cached(inst, "xs", lambda: np.einsum("bkd,bd->bk", need_x(inst), context(inst)))


def token_pass(inst: Instance, rows_at_most: int | None = None,
               more: Callable[[slice, np.ndarray, np.ndarray], None] | None = None) -> None:
    """:func:`norms_sq`, :func:`context` and :func:`context_dots` (those not cached yet; the last two with a
    selection) in one pass over the token vectors, in chunks of rows of about :data:`CACHE_ELEMENTS` elements (at
    most ``rows_at_most`` rows): each chunk is read from memory once and the products are made from it while it is in
    cache, instead of one pass over the whole batch per product. Each product is the same numpy operation on the
    chunk's rows as on the whole batch, so the values are the same. ``more(rows, x_chunk, norms_sq)`` runs on every
    chunk too (:data:`~attnbounds.theory.mathematics.quantities.theorem1.d_1`'s products with the selected columns),
    after the chunk's squared norms are in ``norms_sq``."""
    x = need_x(inst)
    B, K, d = x.shape
    cache = inst._cache
    todo = [k for k in ("x2", *(("s", "xs") if inst.N is not None else ())) if k not in cache]
    out = {"x2": np.empty((B, K)), "s": np.empty((B, d)), "xs": np.empty((B, K))}
    out.update({k: cache[k] for k in ("x2", "s") if k in cache})
    if not todo and more is None:
        return
    weights = selected_weight(inst) if "s" in todo else None
    step = max(1, min(CACHE_ELEMENTS // max(K * d, 1), rows_at_most or B))
    for start in range(0, B, step):
        rows = slice(start, min(start + step, B))
        xc = x[rows]
        if "x2" in todo:
            out["x2"][rows] = np.einsum("bkd,bkd->bk", xc, xc)
        if weights is not None:
            out["s"][rows] = np.einsum("bk,bkd->bd", weights[rows], xc)
        if "xs" in todo:
            out["xs"][rows] = np.einsum("bkd,bd->bk", xc, out["s"][rows])
        if more is not None:
            more(rows, xc, out["x2"])
    cache.update({k: out[k] for k in todo})


def dist_to_context(inst: Instance) -> np.ndarray:
    """``||alpha_k x_k - s||`` for every column ``(B, K)``."""
    def compute() -> np.ndarray:
        if "xs" not in inst._cache:
            token_pass(inst)
        x, s, a = need_x(inst), context(inst), inst.alpha
        ss = np.einsum("bd,bd->b", s, s)[:, None]
        return distances(a * a * norms_sq(inst), ss, a * context_dots(inst),
                         lambda b, k: norm(a[b, k, None] * x[b, k] - s[b]))

    return cached(inst, "rs", compute)


def column_sets(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The columns where ``mask`` holds, gathered per row ``(B, S)`` (S the most in any row) with a
    validity mask; invalid entries repeat a valid column (never used)."""
    count = mask.sum(-1)
    S = max(int(count.max()), 1)
    order = np.zeros((mask.shape[0], S), dtype=np.intp)  # row by row, the columns where mask holds, in order
    rows, cols = np.nonzero(mask)
    order[rows, (np.cumsum(mask, axis=-1) - 1)[rows, cols]] = cols
    valid = np.arange(S)[None, :] < count[:, None]
    return np.where(valid, order, order[:, :1]), valid


def norm(v: np.ndarray, axis: int = -1) -> np.ndarray:
    """Euclidean norm along ``axis``, scaled by the largest entry: no underflow of the squares of tiny
    vectors (``alpha_i x_i`` with ``alpha_i ~ 1e-260``) and no overflow of huge ones."""
    m = np.max(np.abs(v), axis=axis, keepdims=True) if v.shape[axis] else np.zeros(v.shape[:axis] + (1,))
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(m > 0, v / m, 0.0)
    return np.squeeze(m, axis=axis) * np.sqrt((u * u).sum(axis=axis))


def scaled_norm(v: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``sqrt(sum_k w_k v_k^2)`` over the last axis, scaled by the largest ``|v_k|`` (no underflow of squares)."""
    w = np.ones(v.shape) if weights is None else weights
    m = np.where(w > 0, np.abs(v), 0.0).max(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.where(m > 0, v / m, 0.0)
    return m[..., 0] * np.sqrt((w * u * u).sum(-1))


def _without_largest(v: np.ndarray, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What :func:`norm_others` and :func:`sum_others` read: the rows' indices, ``v`` on the columns that hold tokens
    (0 elsewhere), each row's column of the largest entry, and the counts with one token of that column taken out."""
    b = np.arange(v.shape[0])
    vv = np.where(mult > 0, v, 0.0)
    k = vv.argmax(-1)
    rest_mult = mult.copy()
    rest_mult[b, k] -= 1
    return b, vv, k, rest_mult


def norm_others(v: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """``||v_{-i}||_2`` (every token but one token of column i) for each column of the non-negative ``v``.

    With ``mult`` the tokens per column: ``sqrt(sum_k m_k v_k^2 - v_i^2)``. Scaled by the largest
    remaining entry, and the column of the largest entry summed without it, so neither the
    subtraction nor the squares lose it when one entry dominates or the entries are tiny.
    """
    b, vv, k, rest_mult = _without_largest(v, mult)
    m = vv[b, k]
    rest = np.where(rest_mult > 0, vv, 0.0)
    m2 = rest.max(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = vv / m[:, None]
        out = m[:, None] * np.sqrt(np.maximum((mult * w * w).sum(-1, keepdims=True) - w * w, 0.0))
        w2 = rest / m2[:, None]
        out[b, k] = m2 * np.sqrt((rest_mult * w2 * w2).sum(-1))
    return np.nan_to_num(out, nan=0.0)


def sum_others(v: np.ndarray, mult: np.ndarray) -> np.ndarray:
    """``sum_k m_k v_k - v_i`` (every token but one token of column i) for each column of the non-negative ``v``, with
    ``mult`` the tokens per column. The column of the largest entry is summed without it, so that the subtraction
    does not lose the others when one entry dominates (elsewhere what is left holds the largest entry: a relative
    error of a few ulps times the tokens)."""
    b, vv, k, rest_mult = _without_largest(v, mult)
    out = np.maximum((mult * vv).sum(-1, keepdims=True) - vv, 0.0)
    out[b, k] = (np.maximum(rest_mult, 0) * vv).sum(-1)
    return out


def one_minus_alpha(inst: Instance) -> np.ndarray:
    """``1 - alpha_k`` ``(B, K)``, summed from the other tokens' weights at the largest column (no cancellation)."""
    def compute() -> np.ndarray:
        a, mult = inst.alpha, inst.multiplicity
        b = np.arange(inst.B)
        k = np.where(inst.present, a, -np.inf).argmax(-1)
        r = 1.0 - a
        others = mult * a
        others[b, k] = (mult[b, k] - 1) * a[b, k]
        r[b, k] = others.sum(-1)
        return r

    return cached(inst, "one_minus_alpha", compute)


def masked_max(v: np.ndarray, mask: np.ndarray, empty: float = -np.inf) -> np.ndarray:
    return np.where(mask, v, -np.inf).max(-1, initial=empty) if v.size else np.full(v.shape[:-1], empty)


def masked_min(v: np.ndarray, mask: np.ndarray, empty: float = np.inf) -> np.ndarray:
    return np.where(mask, v, np.inf).min(-1, initial=empty) if v.size else np.full(v.shape[:-1], empty)


def top_n_sum(values: np.ndarray, mult: np.ndarray, n: int) -> np.ndarray:
    """The sum of the ``n`` largest token values per row (columns counted with their tokens)."""
    order = np.argsort(-np.where(mult > 0, values, -np.inf), axis=-1, kind="stable")
    v = np.take_along_axis(values, order, -1)
    m = np.take_along_axis(mult, order, -1)
    before = np.cumsum(m, -1) - m
    take = np.clip(n - before, 0, m)
    return (np.where(take > 0, v, 0.0) * take).sum(-1)


def exponent_size(inst: Instance) -> np.ndarray:
    """The size of the numbers each column's weight is ``exp`` of, ``(B, K)``: ``|log F_k| + max_j |log F_j|`` for
    a ratio normaliser (``alpha_k = exp(log F_k - max_j log F_j) / ...``: the difference, and the rounding of the
    logits it comes from, carry an absolute error of about ``eps`` times this), ``(|l_k| + max_j |l_j|) / T``
    for the other maps, 0 without logits. The weights' relative rounding error is about ``eps`` times it."""
    def compute() -> np.ndarray:
        from attnbounds.theory.mathematics.normalisers import RatioNormaliser

        n, lg = inst.normaliser, inst.logits
        if lg is None or n is None:
            return np.zeros(inst.alpha.shape)
        with np.errstate(all="ignore"):
            if isinstance(n, RatioNormaliser):
                lf = n.log_F_values(lg, inst.L)
            else:
                T = np.asarray(n.params.get("T", 1.0), dtype=np.float64)
                lf = lg / (T[:, None] if T.ndim else T)
            top = masked_max(np.abs(lf), inst.present & np.isfinite(lf), 0.0)[:, None]
            return np.where(inst.present & np.isfinite(lf), np.abs(lf) + top, 0.0)

    return cached(inst, "spread", compute)
