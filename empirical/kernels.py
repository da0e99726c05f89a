"""Attention rows of one length, batched over the (window, head) pairs of a layer: the experiments' quantities.

A :class:`Batch` is ``R`` attention instances of common length ``l``: the rows of one query position in
every (window, head) pair of a layer record (weights ``alpha`` ``(R, l)``, token vectors ``x`` ``(R, l, d)``).
One stable sort per row (ties to the lower index, as :func:`attnbounds.theory.mathematics.instance.top_n_mask`) serves
every N: the context vectors ``s_N`` of all N are prefix sums in weight order, and their inner products with
every token one batched matrix product. What the rows of a record share is computed once per record
(:class:`Record`): the tokens' squared norms, prefix sums (the mean of the first ``l`` tokens) and transposed
vectors, the largest distance from each token to the tokens before it (``d_1``) and the closest pair among
the first ``l`` tokens (``delta``), for every ``l`` at once.

Elementwise work over (rows x N x tokens) is what a row costs (the four readings of J alone take a square
root per (row, N, token)), so the kernels avoid passes over those arrays: a rounding cancellation is looked
for only in the (row, N) whose minimum is small, a square root that rounds to NaN only in the sums that are
NaN, softmax maxima before the temperature axis exists; and the passes that remain run on chunks of rows that
fit the cache (:data:`CHUNK_ELEMENTS`). Each of these keeps every number bit-identical (the same operations in
the same order on each row; ``tests/empirical`` and the benchmark's comparison check it). The batched products
are numpy's (OpenBLAS), which round differently from torch's MKL at the last bits (see :func:`one_thread`).

The float forms of :mod:`attnbounds.theory.mathematics.quantities` define these numbers; the kernels agree with them to
rounding (``tests/empirical``; every run re-checks sampled rows against them, ``empirical.checks``). As in the
float forms, a distance whose Gram-form square cancels is recomputed from the vectors.
"""

from __future__ import annotations

import contextlib
from functools import cached_property
from typing import Iterator

import numpy as np

from attnbounds.theory.mathematics import memory

#: a Gram-form squared distance below this fraction of ``||u||^2 + ||v||^2`` is recomputed from the vectors
CANCELLATION = 1e-3
#: the readings of the Theorem 1 expectation term J (theory quantities ``J_<coefficient>_<xbar>``)
J_NAMES = ("J_scaled_weighted", "J_scaled_mean", "J_printed_weighted", "J_printed_mean")
#: what :func:`scan` returns
SCAN_NAMES = ("dtilde_R1", "dtilde_R2", *J_NAMES, "abar_N", "max_norm")


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch and numpy's BLAS on one thread inside the block (restored after). The kernels' products are row-sized
    (about a millisecond): on the shared 2-core machine a second BLAS thread waiting for a core made each
    product take 12 ms instead of 1.3 ms (same results: the threads split the output, not the sums).
    Parallelism comes from windows in worker processes (``--scheduler processes:N``).

    The batched products are numpy's (``np.matmul``, OpenBLAS, one BLAS call per row): on this AMD machine
    torch's MKL took 1.5x to 2.2x as long for the same shapes (``bench/bench_empirical.py --products``)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with memory.blas_threads(1):
            yield
    finally:
        torch.set_num_threads(before)


#: below this sum of squares a norm is recomputed scaled by the largest entry (the squares may have underflowed)
_TINY_SQUARES = 1e-280


def norm(v: np.ndarray) -> np.ndarray:
    """Euclidean norm over the last axis; vectors whose squares may underflow are scaled by their largest entry."""
    ss = np.einsum("...i,...i->...", v, v)
    out = np.sqrt(ss)
    small = np.nonzero(ss < _TINY_SQUARES)
    if small[0].size:
        w = v[small]
        m = np.abs(w).max(-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(m > 0, w / m, 0.0)
        out[small] = m[..., 0] * np.sqrt((u * u).sum(-1))
    return out


#: the passes over (rows x N x tokens) arrays (distances, J's squares, g_fd's softmaxes) run on chunks of rows
#: whose array holds about this many float64 numbers (2 MiB): a pass then reads what the previous pass wrote from
#: the cache instead of from memory (48 rows of 1024 tokens at 32 N and 4 readings of J are 50 MiB)
CHUNK_ELEMENTS = 1 << 18


def row_chunks(R: int, per_row: int) -> list[slice]:
    """Slices of ``R`` rows, each of at most :data:`CHUNK_ELEMENTS` numbers at ``per_row`` numbers a row (and at
    least one row). A kernel that chunks computes each row alone, so a chunk's numbers are the whole batch's."""
    step = memory.rows_per_chunk(8.0 * per_row, 8 * CHUNK_ELEMENTS)
    return [slice(a, min(a + step, R)) for a in range(0, R, step)]


def take_rows(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``x[r, idx[r, j]]`` ``(R, m, d)``: the token vectors ``x`` ``(R, l, d)`` at the indices ``idx`` ``(R, m)``, by
    one flat ``np.take`` (indexing two axes at once is twice as slow). ``x`` may be the first ``l`` tokens of a
    contiguous ``(R, T, d)`` array (a layer record's): its rows are then read in place."""
    R, _, d = x.shape
    step = x.strides[1]
    if x.strides[2] != x.itemsize or step != d * x.itemsize or x.strides[0] % step:
        x = np.ascontiguousarray(x)
        step = x.strides[1]
    per_row = x.strides[0] // step  # tokens between the starts of two rows (T of the record)
    flat = np.lib.stride_tricks.as_strided(x, ((R - 1) * per_row + x.shape[1], d), (step, x.itemsize), writeable=False)
    return np.take(flat, idx + per_row * np.arange(R)[:, None], axis=0)


class Batch:
    """``R`` attention rows of common length ``l``: weights ``alpha`` ``(R, l)`` (renormalised to sum 1) and
    token vectors ``x`` ``(R, l, d)``, float64; sort order and the other per-row quantities on first use.

    ``record``: the :class:`Record` whose first ``l`` tokens ``x`` are; its per-token numbers (squared norms,
    prefix sums, the transposed vectors) then serve the batch instead of being recomputed per row. ``order``:
    the sort of weights equal to these (another batch of the same rows).
    """

    def __init__(self, alpha: np.ndarray, x: np.ndarray | None, record: Record | None = None,
                 order: np.ndarray | None = None):
        self.alpha = alpha / alpha.sum(-1, keepdims=True)
        self.x = x
        self.record = record
        if order is not None:
            self.__dict__["order"] = order

    @property
    def xT(self) -> np.ndarray:
        assert self.x is not None
        return self.record.xT[:, :, : self.ell] if self.record is not None else self.x.transpose(0, 2, 1)

    @property
    def R(self) -> int:
        return int(self.alpha.shape[0])

    @property
    def ell(self) -> int:
        return int(self.alpha.shape[1])

    @cached_property
    def order(self) -> np.ndarray:
        return np.argsort(-self.alpha, axis=1, kind="stable")

    @cached_property
    def rank(self) -> np.ndarray:
        rank = np.empty_like(self.order)
        np.put_along_axis(rank, self.order, np.broadcast_to(np.arange(self.ell), self.order.shape), axis=1)
        return rank

    @cached_property
    def a_sorted(self) -> np.ndarray:
        return np.take_along_axis(self.alpha, self.order, axis=1)

    @cached_property
    def xx(self) -> np.ndarray:
        assert self.x is not None
        return self.record.xx[:, : self.ell] if self.record is not None else np.einsum("rid,rid->ri", self.x, self.x)

    @cached_property
    def mean(self) -> np.ndarray:
        """The mean of the tokens ``(R, d)``: their sum in token order (a left fold, as the record's prefix sums
        hold it) over ``l``."""
        assert self.x is not None
        total = self.record.sums[:, self.ell - 1] if self.record is not None else np.cumsum(self.x, axis=1)[:, -1]
        return total / self.ell

    @cached_property
    def output(self) -> np.ndarray:
        """``m = sum_i alpha_i x_i`` ``(R, d)``."""
        assert self.x is not None
        return np.einsum("ri,rid->rd", self.alpha, self.x)

    def context(self, Ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``s_N`` ``(R, n, d)`` and ``abar_N`` ``(R, n)`` for every N of ``Ns`` (each ``< l``)."""
        assert self.x is not None
        top = int(Ns.max())
        starts = np.concatenate([[0], Ns[:-1]])  # Ns ascending: the sums are of the segments between them
        ys = take_rows(self.x, self.order[:, :top])
        ys *= self.a_sorted[:, :top, None]
        S = np.cumsum(np.add.reduceat(ys, starts, axis=1), axis=1)
        return S, np.cumsum(np.add.reduceat(self.a_sorted[:, :top], starts, axis=1), axis=1)

    def distances(self, S: np.ndarray) -> np.ndarray:
        """``||alpha_i x_i - s||`` ``(R, n, l)`` for every context vector ``s`` of ``S`` ``(R, n, d)``."""
        assert self.x is not None
        a = self.alpha
        yy = a * a * self.xx
        ss = np.einsum("rmd,rmd->rm", S, S)
        # a superset of the entries the float forms recompute (d2 <= CANCELLATION (yy_i + ss)): yy_i <= max yy;
        # it holds every d2 <= 0, so the square roots of negative ones (NaN) are all overwritten below
        small = CANCELLATION * (yy.max(-1)[:, None] + ss)
        dist = np.empty((self.R, S.shape[1], self.ell))
        xT = self.xT
        for rows in row_chunks(self.R, dist[0].size):
            d2 = np.matmul(S[rows], xT[rows], out=dist[rows])
            d2 *= -2.0 * a[rows, None, :]
            d2 += yy[rows, None, :]
            d2 += ss[rows, :, None]
            r, m, i = _at_most(d2, small[rows])
            with np.errstate(invalid="ignore"):
                np.sqrt(d2, out=d2)
            if r.size:
                r += rows.start
                dist[r, m, i] = norm(a[r, i, None] * self.x[r, i] - S[r, m])
        return dist

    def selected_sum(self, values: np.ndarray, Ns: np.ndarray) -> np.ndarray:
        """``sum_{i in I_N} values[:, k, i]`` ``(R, n)`` for N = ``Ns[k]``, each sum over the selected values in
        weight order. One flat gather of every (k, selected i), then one sum per N over its contiguous part."""
        n, ell = values.shape[1:]
        Ns = np.asarray(Ns)
        ends = np.cumsum(Ns)
        k = np.repeat(np.arange(n), Ns)
        j = np.arange(int(ends[-1])) - np.repeat(ends - Ns, Ns)  # position in weight order within each N's part
        flat = (np.arange(self.R)[:, None] * n + k) * ell + self.order[:, j]
        picked = np.take(values.reshape(-1), flat)
        return np.stack([picked[:, e - N: e].sum(-1) for e, N in zip(ends, Ns)], axis=1)


def _at_most(values: np.ndarray, bound: np.ndarray) -> tuple[np.ndarray, ...]:
    """The indices ``(r, m, i)`` of ``values`` ``(R, n, l)`` with ``values[r, m, i] <= bound[r, m]``, in index
    order (``np.nonzero(values <= bound[..., None])``): only the (r, m) whose minimum passes (or is NaN) are
    compared entry by entry."""
    rows = np.nonzero(~(values.min(-1) > bound))
    hit = np.nonzero(values[rows] <= bound[rows][:, None])
    return rows[0][hit[0]], rows[1][hit[0]], hit[1]


def live(Ns: np.ndarray, ell: int) -> np.ndarray:
    """Which N of ``Ns`` a row of length ``ell`` has (``N < ell``)."""
    return np.asarray(Ns) < ell


def scan(batch: Batch, Ns: np.ndarray, wanted: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """:data:`SCAN_NAMES` -> ``(R, len(Ns))`` at every N of ``Ns`` (NaN where ``N >= l``): dtilde in both
    readings, the four readings of J, ``abar_N`` and ``max_norm``. ``wanted``: a mask over ``Ns`` of the N
    to report (default all; the others are NaN). The context vectors and their products with the tokens are
    taken at every N of ``Ns`` all the same (their summation order depends on the N around), the readings of
    J only at the wanted N: a number does not depend on which others were asked for."""
    assert batch.x is not None
    ok = live(Ns, batch.ell)
    keep = ok if wanted is None else ok & wanted
    out = {k: np.full((batch.R, len(Ns)), np.nan) for k in SCAN_NAMES}
    if not keep.any():
        return out
    N = np.asarray(Ns)[ok]
    S, abar = batch.context(N)
    dist = batch.distances(S)
    # dtilde R1: every token's distance minus the selected ones'
    r1 = dist.sum(-1) - batch.selected_sum(dist, N)
    r2 = norm(batch.output[:, None, :] - 2.0 * S)
    norms = np.sqrt(batch.xx)
    max_norm = np.maximum.accumulate(np.take_along_axis(norms, batch.order[:, : int(N.max())], axis=1), axis=1)[:, N - 1]
    pick = keep[ok]
    part = {"dtilde_R1": r1, "dtilde_R2": r2, "abar_N": abar, "max_norm": max_norm}
    for k, v in part.items():
        out[k][:, keep] = v[:, pick]
    for k, v in jensen(batch, N[pick]).items():
        out[k][:, keep] = v
    return out


def jensen(batch: Batch, Ns: np.ndarray) -> dict[str, np.ndarray]:
    """The four readings of ``J = (l-N)/l sum_i ||c_i x_i - xbar||`` ``(R, n)`` (theory quantities ``J_*``).

    Each squared norm is a polynomial in per-(row, N) numbers with per-token coefficients, so all N come
    from one batched product with an inner dimension of 3: ``c = alpha_i (1 + rho)`` (scaled) or
    ``alpha_i + rho`` (printed), ``rho = N/(l-1)``, ``xbar = rho m`` (weighted) or the mean of x.
    """
    assert batch.x is not None
    a, ell, xx = batch.alpha, batch.ell, batch.xx
    R = batch.R
    rho = np.broadcast_to(np.asarray(Ns, float) / (ell - 1.0), (R, len(Ns)))
    front = (ell - np.asarray(Ns, float)) / ell
    m = batch.output
    xbar = batch.mean
    xm, xb = np.einsum("rid,rkd->rki", batch.x, np.stack([m, xbar], axis=1)).transpose(1, 0, 2)
    mm = np.einsum("rd,rd->r", m, m)[:, None]
    bb = np.einsum("rd,rd->r", xbar, xbar)[:, None]
    one = np.ones_like(a)
    k = 1.0 + rho
    # (per-(row, N) factors, per-token coefficients): the squared norm is their product summed over 3 terms
    polys = {
        "J_scaled_weighted": ((k * k, -2.0 * k * rho, rho * rho * mm), (a * a * xx, a * xm, one)),
        "J_scaled_mean": ((k * k, -2.0 * k, bb * np.ones_like(k)), (a * a * xx, a * xb, one)),
        "J_printed_weighted": ((np.ones_like(k), rho, rho * rho), (a * a * xx, 2.0 * a * (xx - xm), xx - 2.0 * xm + mm)),
        "J_printed_mean": ((np.ones_like(k), rho, rho * rho), (a * a * xx - 2.0 * a * xb + bb, 2.0 * (a * xx - xb), xx)),
    }
    # every reading at once: (R, 4, n, 3) @ (R, 4, 3, l), one (n, 3) @ (3, l) product per row and reading
    factors = np.stack([np.stack(f, axis=-1) for f, _ in polys.values()], axis=1)
    coefficients = np.stack([np.stack(c, axis=1) for _, c in polys.values()], axis=1)
    sums = np.empty(factors.shape[:3])  # (R, 4, n)
    for rows in row_chunks(R, factors[0, :, :, 0].size * ell):
        q = np.matmul(factors[rows], coefficients[rows])
        with np.errstate(invalid="ignore"):
            sums[rows] = np.sqrt(q, out=q).sum(-1)
    # a square that rounded below 0 is a norm of 0: its sqrt was NaN, so its sum is redone (rare)
    for r, k in zip(*np.nonzero(np.isnan(sums).any(-1))):
        redo = np.matmul(factors[r, k], coefficients[r, k])
        sums[r, k] = np.sqrt(np.maximum(redo, 0.0, out=redo), out=redo).sum(-1)
    J = front * sums
    return {name: J[:, k] for k, name in enumerate(polys)}


class Record:
    """Per-record structures over the first ``l`` tokens for every ``l``, from token vectors ``x`` ``(R, T, d)``.
    ``transposed_copy``: the products with the tokens read a contiguous transposed copy (default) or ``x``
    itself, transposed in place (no copy; BLAS then rounds a product differently)."""

    def __init__(self, x: np.ndarray, transposed_copy: bool = True):
        self.x = x
        self.R, self.T = int(x.shape[0]), int(x.shape[1])
        self.transposed_copy = transposed_copy

    @cached_property
    def xx(self) -> np.ndarray:
        return np.einsum("rid,rid->ri", self.x, self.x)

    @cached_property
    def xT(self) -> np.ndarray:
        """The token vectors transposed ``(R, d, T)``: contiguous (every prefix a cheap BLAS operand), or a view."""
        view = self.x.transpose(0, 2, 1)
        return np.ascontiguousarray(view) if self.transposed_copy else view

    @cached_property
    def sums(self) -> np.ndarray:
        """``(R, T, d)``: entry ``l - 1`` is the sum of the first ``l`` tokens."""
        return np.cumsum(self.x, axis=1)

    def _d2(self) -> np.ndarray:
        memory.check(3 * 8.0 * self.R * self.T * self.T, f"pairwise distances of {self.R} x {self.T} tokens")
        d2 = np.matmul(self.x, self.xT)
        d2 *= -2.0
        d2 += self.xx[:, :, None]
        d2 += self.xx[:, None, :]
        return d2

    def pair_distance(self, r: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        return norm(self.x[r, i] - self.x[r, j])

    def gram_to(self, rows: np.ndarray, tokens: np.ndarray, xj: np.ndarray, j: np.ndarray) -> np.ndarray:
        """Gram-form ``||x_i - x_j||^2`` ``(u, m)`` from token ``j[u]`` to the tokens ``tokens[u]`` of record rows ``rows``."""
        xs = self.x[rows[:, None], tokens]
        return self.xx[rows[:, None], tokens] + self.xx[rows, j][:, None] - 2.0 * np.einsum("umd,ud->um", xs, xj)

    @cached_property
    def farthest_before(self) -> np.ndarray:
        """``D`` ``(R, T, T)``: ``D[r, j, c] = max_{i <= c} ||x_i - x_j||^2`` (Gram form)."""
        d2 = self._d2()
        return np.maximum.accumulate(d2, axis=2, out=d2)

    @cached_property
    def closest_pairs(self) -> np.ndarray:
        """``delta`` ``(R, T)``: entry ``l - 1`` is ``min_{i < j < l} ||x_i - x_j||`` (inf for ``l = 1``); the
        closest pair located in Gram form, its distance recomputed from the difference."""
        d2 = self._d2()  # symmetric: row j, column i
        d2 += np.where(np.tril(np.ones((self.T, self.T), dtype=bool), -1), 0.0, np.inf)[None]  # pairs i < j only
        col = d2.argmin(2)  # (R, T): the closest earlier token of each j
        best = np.take_along_axis(d2, col[:, :, None], axis=2)[:, :, 0]
        run = np.minimum.accumulate(best, axis=1)
        j = np.maximum.accumulate(np.where(best <= run, np.arange(self.T)[None, :], 0), axis=1)
        r = np.arange(self.R)[:, None]
        out = np.where(np.isfinite(run), self.pair_distance(r, np.take_along_axis(col, j, axis=1), j), np.inf)
        out[:, 0] = np.inf
        return out


def d_1(batch: Batch, record: Record, Ns: np.ndarray) -> np.ndarray:
    """``d_1 = max_{i not in I_N, j in I_N} ||x_i - x_j||`` ``(R, len(Ns))`` (NaN where ``N >= l``); the batch's
    tokens are the record's first ``l``.

    Selected tokens ``j`` are taken in decreasing order of their farthest distance to any of the first ``l``
    tokens (:attr:`Record.farthest_before`): when that farthest token is not selected it is ``j``'s term of
    ``d_1`` exactly; otherwise ``j``'s term is computed over the non-selected tokens. A row is done when no
    remaining ``j`` can exceed the largest term found. Squared distances are in Gram form (as the float form
    ranks them); a largest one that cancels is recomputed from the differences.
    """
    D = record.farthest_before
    c = batch.ell - 1
    out = np.full((batch.R, len(Ns)), np.nan)
    for k, N in enumerate(np.asarray(Ns)):
        if N >= batch.ell:
            continue
        sel = batch.order[:, :N]
        cand = D[np.arange(batch.R)[:, None], sel, c]
        value = np.full(batch.R, -np.inf)
        open_ = np.ones(batch.R, dtype=bool)
        taken = np.zeros((batch.R, N), dtype=bool)
        while open_.any():
            rows = np.nonzero(open_)[0]
            pm = np.where(taken[rows], -np.inf, cand[rows])
            best = pm.argmax(1)
            top = pm[np.arange(rows.size), best]
            going = value[rows] < top
            open_[rows[~going]] = False
            rows, best, top = rows[going], best[going], top[going]
            if not rows.size:
                break
            j = sel[rows, best]
            xj = record.x[rows, j]
            to_selected = record.gram_to(rows, sel[rows], xj, j)
            exact = top.copy()
            # j's farthest token may be selected (the two Gram forms differ by rounding): the others, in full
            hard = np.nonzero(top <= to_selected.max(1) * (1 + 1e-9))[0]
            if hard.size:
                h = rows[hard]
                exact[hard] = record.gram_to(h, batch.order[h, N:], xj[hard], j[hard]).max(1)
            value[rows] = np.maximum(value[rows], exact)
            taken[rows, best] = True
        out[:, k] = np.sqrt(np.maximum(value, 0.0))
        for b in np.nonzero(value <= CANCELLATION * 2.0 * record.xx[:, :batch.ell].max(1))[0]:
            outside, inside = batch.order[b, N:], sel[b]
            out[b, k] = norm(record.x[b, outside][:, None, :] - record.x[b, inside][None, :, :]).max()
    return out


def separation(batch: Batch, Ns: np.ndarray, M: float) -> dict[str, np.ndarray]:
    """Theorem 2's per-row numbers at every N of ``Ns`` (NaN where ``N >= l``) for sphere token vectors of
    norm ``M``: the paper's radius ``r = min_{i not in I_N} ||s - alpha_i x_i||``, ``Ns_relaxed`` (selected
    tokens with ``||alpha_i x_i - s|| <= r``), ``Ns_full`` (zero when a non-selected token is in the ball,
    as the paper's ``r`` makes it); ``inside`` ``(R, n, l)``: which tokens are selected and in the ball.
    """
    ok = live(Ns, batch.ell)
    n = len(Ns)
    out = {k: np.full((batch.R, n), np.nan) for k in ("r", "Ns_relaxed", "Ns_full")}
    out["inside"] = np.zeros((batch.R, n, batch.ell), dtype=bool)
    if not ok.any():
        return out
    N = np.asarray(Ns)[ok]
    S, _ = batch.context(N)
    dist = batch.distances(S)  # (R, n, l), tokens in their own order
    selected = batch.rank[:, None, :] < N[None, :, None]
    r = np.where(selected, np.inf, dist).min(-1)
    ball = dist <= r[:, :, None]
    inside = ball & selected
    relaxed = inside.sum(-1).astype(float)
    out["r"][:, ok] = r
    out["Ns_relaxed"][:, ok] = relaxed
    out["Ns_full"][:, ok] = np.where((ball & ~selected).any(-1), 0.0, relaxed)
    out["inside"][:, ok] = inside
    return out


def xi(a_top: np.ndarray, M: float, delta: np.ndarray) -> np.ndarray:
    """``xi_i = sqrt(M^2 P_i^2 - delta^2/2 (P_i^2 - Q_i))`` for the selected weights ``a_top`` ``(R, N)``
    (theory quantity ``xi``): ``P_i``, ``Q_i`` the sum and sum of squares of the other selected weights."""
    P = a_top.sum(-1, keepdims=True) - a_top
    Q = (a_top * a_top).sum(-1, keepdims=True) - a_top * a_top
    d = delta[:, None]
    return np.sqrt(np.maximum(M**2 * P**2 - d**2 / 2 * (P**2 - Q), 0.0))


#: numpy's float64 exp is fast on exponents down to about -708; below, where its results are subnormal or 0, it takes
#: a slow path (7 to 50 times slower). Below -750 the result is 0 (e^-750 is 1/150 of the smallest subnormal; numpy's
#: exp returns 0 from -745.14 down)
_EXP_FAST, _EXP_ZERO = -700.0, -750.0


def _exp(z: np.ndarray, low: np.ndarray) -> None:
    """``np.exp(z, out=z)`` for exponents ``z`` ``(R, nT, ...)``, the same numbers. ``low[k]``: some exponent at
    temperature ``k`` may be below :data:`_EXP_FAST` (at a low T most are); those temperatures' exponents below
    :data:`_EXP_ZERO` are set to 0 without passing through exp, the others go through it packed together."""
    cuts = [0, *(np.flatnonzero(low[1:] != low[:-1]) + 1), low.size]  # runs of temperatures alike (T sorted: 2)
    for a, b in zip(cuts[:-1], cuts[1:]):
        block = z[:, a:b]
        if not low[a]:
            np.exp(block, out=block)
            continue
        packed = np.ascontiguousarray(block).reshape(-1)
        kept = np.flatnonzero(~(packed < _EXP_ZERO))
        values = np.exp(packed[kept])
        packed[:] = 0.0
        packed[kept] = values
        block[...] = packed.reshape(block.shape)


def g_fd(logits: np.ndarray, v: np.ndarray, T: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """``g(T, eps) = ||softmax((l + eps v)/T) - softmax(l/T)||_2 / eps`` ``(R, nT, nE)`` (theory quantity
    ``g_fd`` with the softmax normaliser) for logit rows ``(R, l)``, unit directions ``v`` ``(R, l)`` and
    temperatures ``T > 0``. Each row's largest ``(l + eps v)/T`` is its largest ``l + eps v`` divided by ``T``
    (division by ``T > 0`` rounds monotonically), so the maximum is taken before the ``T`` axis exists."""
    out = np.empty((logits.shape[0], T.size, eps.size))
    for rows in row_chunks(logits.shape[0], T.size * (eps.size + 1) * logits.shape[1]):
        out[rows] = _g_fd(logits[rows], v[rows], T, eps)
    return out


def _g_fd(logits: np.ndarray, v: np.ndarray, T: np.ndarray, eps: np.ndarray) -> np.ndarray:
    """:func:`g_fd` on rows that fit the cache."""
    shifts = np.concatenate([[0.0], eps])
    shifted = logits[:, None, :] + shifts[None, :, None] * v[:, None, :]  # (R, shifts, l)
    top = shifted.max(-1)
    z = shifted[:, None] / T[None, :, None, None]
    z -= (top[:, None] / T[None, :, None])[..., None]
    _exp(z, ((shifted.min(-1) - top)[:, None, :] / T[None, :, None] < _EXP_FAST).any(axis=(0, 2)))
    z /= z.sum(-1, keepdims=True)
    diff = z[:, :, 1:] - z[:, :, :1]
    return norm(diff) / eps[None, None, :]
