"""Attention rows of one length, batched over the (window, head) pairs of a layer: the experiments' quantities.

A :class:`Batch` is ``R`` attention instances of common length ``l``: the rows of one query position in
every (window, head) pair of a layer record (weights ``alpha`` ``(R, l)``, token vectors ``x`` ``(R, l, d)``).
One stable sort per row (ties to the lower index, as :func:`attnbounds.theory.mathematics.instance.top_n_mask`) serves
every N: the context vectors ``s_N`` of all N are running sums in weight order, and their inner products with
every token one batched matrix product (BLAS). What the rows of a record share is computed once per record
(:class:`Record`): the tokens' squared norms, prefix sums (the mean of the first ``l`` tokens) and transposed
vectors, the largest distance from each token to the tokens before it (``d_1``) and the closest pair among
the first ``l`` tokens (``delta``), for every ``l`` at once.

Elementwise work over (rows x N x tokens) is what a row costs (the four readings of J alone take a square
root per (row, N, token)); it runs in compiled loops (:mod:`attnbounds.empirical.compiled`, numba) that do the
work of every numpy pass on a token at once, vectorised, reading the products from the cache (they are made on
chunks of rows that fit it, :data:`CHUNK_ELEMENTS`). A chunk's numbers are the whole batch's, bit for bit (each
row is computed alone). The loops sum in their own order, so numbers agree with the numpy formulas to rounding
(relative differences of a few 1e-16), except where rounding is magnified: the softmax probabilities of
``g_fd`` are numpy's divisions by numpy's sums, as theory's float form makes them.

The float forms of :mod:`attnbounds.theory.mathematics.quantities` define these numbers; the kernels agree with them to
rounding (``tests/empirical``; every run re-checks sampled rows against them, ``empirical.checks``). As in the
float forms, a distance whose Gram-form square cancels is recomputed from the vectors.
"""

from __future__ import annotations

import contextlib
from functools import cached_property
from typing import Iterator

import numpy as np

from attnbounds.empirical import compiled
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


#: the (rows x N x tokens) arrays (the context vectors' products with the tokens, g_fd's exponentials) are made on
#: chunks of rows holding about this many float64 numbers (2 MiB): the compiled pass reading one then finds it in
#: the cache instead of in memory (48 rows of 1024 tokens at 36 N are 14 MiB)
CHUNK_ELEMENTS = 1 << 18


def row_chunks(R: int, per_row: int) -> list[slice]:
    """Slices of ``R`` rows, each of at most :data:`CHUNK_ELEMENTS` numbers at ``per_row`` numbers a row (and at
    least one row). A kernel that chunks computes each row alone, so a chunk's numbers are the whole batch's."""
    step = memory.rows_per_chunk(8.0 * per_row, 8 * CHUNK_ELEMENTS)
    return [slice(a, min(a + step, R)) for a in range(0, R, step)]


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

    @property
    def output(self) -> np.ndarray:
        """``m = sum_i alpha_i x_i`` ``(R, d)``."""
        return self.weighted[0]

    @cached_property
    def weighted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``m`` ``(R, d)`` and the tokens' products with it and with the mean, ``x_i . m`` and ``x_i . mean``
        ``(R, l)``, in one compiled pass per row (:func:`~attnbounds.empirical.compiled.weighted_products`)."""
        assert self.x is not None
        x = self.record.x if self.record is not None else np.ascontiguousarray(self.x)
        m = np.empty((self.R, x.shape[2]))
        xm, xb = np.empty((self.R, self.ell)), np.empty((self.R, self.ell))
        compiled.weighted_products(x, self.alpha, np.ascontiguousarray(self.mean), m, xm, xb)
        return m, xm, xb

    def context(self, Ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``s_N`` ``(R, n, d)`` and ``abar_N`` ``(R, n)`` for every N of ``Ns`` (each ``< l``, in any order), summed in
        weight order (:func:`~attnbounds.empirical.compiled.context_sums`, which takes the N ascending)."""
        assert self.x is not None
        Ns = np.asarray(Ns, dtype=np.int64)
        ascending = np.argsort(Ns, kind="stable")
        S = np.empty((self.R, Ns.size, self.x.shape[2]))
        abar = np.empty((self.R, Ns.size))
        x = self.record.x if self.record is not None else self.x  # the record's tokens: contiguous, a prefix read
        compiled.context_sums(x, self.order, self.a_sorted, np.ascontiguousarray(Ns[ascending]), S, abar)
        if (ascending == np.arange(Ns.size)).all():
            return S, abar
        back = np.argsort(ascending)
        return S[:, back], abar[:, back]

    def gram_parts(self, S: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What the Gram form ``||a_i x_i - s||^2 = -2 a_i (s . x_i) + yy_i + ss`` of the distances to the context
        vectors ``S`` ``(R, n, d)`` needs besides the products: ``yy = a^2 ||x||^2`` ``(R, l)``, ``ss = ||s||^2``
        ``(R, n)``, and ``small`` ``(R, n)``: a square at most this is recomputed from the vectors (a cancellation;
        ``CANCELLATION (max_i yy_i + ss)``, a superset of the entries the float forms recompute, holding every
        square that rounds to 0 or below)."""
        a = self.alpha
        yy = a * a * self.xx
        ss = np.einsum("rmd,rmd->rm", S, S)
        return yy, ss, CANCELLATION * (yy.max(-1)[:, None] + ss)

    def products(self, S: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
        """``(rows, s . x_i)`` ``(rows, n, l)``: the products of the context vectors ``S`` with the tokens (BLAS), on
        chunks of rows that fit the cache (the compiled pass reading them finds them there)."""
        xT = self.xT
        for rows in row_chunks(self.R, S.shape[1] * self.ell):
            yield rows, np.matmul(S[rows], xT[rows])


def live(Ns: np.ndarray, ell: int) -> np.ndarray:
    """Which N of ``Ns`` a row of length ``ell`` has (``N < ell``)."""
    return np.asarray(Ns) < ell


def scan(batch: Batch, Ns: np.ndarray, wanted: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """:data:`SCAN_NAMES` -> ``(R, len(Ns))`` at every N of ``Ns`` (NaN where ``N >= l``): dtilde in both
    readings, the four readings of J, ``abar_N`` and ``max_norm``. ``wanted``: a mask over ``Ns`` of the N
    to report (default all; the others are NaN). The context vectors and their products with the tokens are
    taken at every N of ``Ns`` all the same (BLAS may round a product differently in a matrix of another
    shape), the readings of J only at the wanted N: a number does not depend on which others were asked for."""
    assert batch.x is not None
    ok = live(Ns, batch.ell)
    keep = ok if wanted is None else ok & wanted
    out = {k: np.full((batch.R, len(Ns)), np.nan) for k in SCAN_NAMES}
    if not keep.any():
        return out
    N = np.ascontiguousarray(np.asarray(Ns)[ok], dtype=np.int64)
    S, abar = batch.context(N)
    yy, ss, small = batch.gram_parts(S)
    r1 = np.empty((batch.R, N.size))  # dtilde R1: the sum of the non-selected tokens' distances
    rank = batch.rank
    for rows, P in batch.products(S):
        compiled.outside_sums(P, batch.alpha[rows], yy[rows], ss[rows], small[rows], rank[rows], N,
                              batch.x[rows], S[rows], r1[rows])
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
    """The four readings of ``J = (l-N)/l sum_i ||c_i x_i - xbar||`` ``(R, n)`` (theory quantities ``J_*``):
    ``c = alpha_i (1 + rho)`` (scaled) or ``alpha_i + rho`` (printed), ``rho = N/(l-1)``, ``xbar = rho m``
    (weighted) or the mean of x. Each squared norm is a polynomial in ``rho`` whose coefficients are per-token
    numbers (``alpha_i``, ``||x_i||^2``, ``x_i . m``, ``x_i . mean``) and the row's ``||m||^2``, ``||mean||^2``;
    one compiled pass per (row, N) sums all four (:func:`~attnbounds.empirical.compiled.jensen_sums`).
    """
    assert batch.x is not None
    ell = batch.ell
    Ns = np.asarray(Ns, float)
    m, xm, xb = batch.weighted
    xbar = batch.mean
    sums = np.empty((batch.R, len(J_NAMES), Ns.size))
    mm, bb = np.einsum("rd,rd->r", m, m), np.einsum("rd,rd->r", xbar, xbar)
    compiled.jensen_sums(batch.alpha, np.ascontiguousarray(batch.xx), xm, xb, mm, bb, Ns / (ell - 1.0), sums)
    J = (ell - Ns) / ell * sums
    return {name: J[:, k] for k, name in enumerate(J_NAMES)}


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
    tokens (:attr:`Record.farthest_before`), a row is done when no remaining ``j`` can exceed the largest term
    found (:func:`~attnbounds.empirical.compiled.farthest_pair_squares`). Squared distances are in Gram form (as
    the float form ranks them); a largest one that cancels is recomputed from the differences.
    """
    out = np.full((batch.R, len(Ns)), np.nan)
    ok = live(Ns, batch.ell)
    if not ok.any():
        return out
    N = np.ascontiguousarray(np.asarray(Ns)[ok], dtype=np.int64)
    value = np.empty((batch.R, N.size))
    compiled.farthest_pair_squares(record.farthest_before, record.x, record.xx, batch.order, N, batch.ell, value)
    out[:, ok] = np.sqrt(np.maximum(value, 0.0))
    cancelled = value <= CANCELLATION * 2.0 * record.xx[:, :batch.ell].max(1)[:, None]
    for b, k in zip(*np.nonzero(cancelled)):
        outside, inside = batch.order[b, N[k]:], batch.order[b, :N[k]]
        out[b, np.flatnonzero(ok)[k]] = norm(record.x[b, outside][:, None, :] - record.x[b, inside][None, :, :]).max()
    return out


def separation(batch: Batch, Ns: np.ndarray, M: float) -> dict[str, np.ndarray]:
    """Theorem 2's per-row numbers at every N of ``Ns`` (NaN where ``N >= l``) for sphere token vectors of
    norm ``M``: the paper's radius ``r = min_{i not in I_N} ||s - alpha_i x_i||``, ``Ns_relaxed`` (selected
    tokens with ``||alpha_i x_i - s|| <= r``), ``Ns_full`` (zero when a non-selected token is in the ball,
    as the paper's ``r`` makes it); ``inside`` ``(R, n, l)``: which tokens are selected and in the ball.
    """
    assert batch.x is not None
    ok = live(Ns, batch.ell)
    n = len(Ns)
    out = {k: np.full((batch.R, n), np.nan) for k in ("r", "Ns_relaxed", "Ns_full")}
    out["inside"] = np.zeros((batch.R, n, batch.ell), dtype=bool)
    if not ok.any():
        return out
    N = np.ascontiguousarray(np.asarray(Ns)[ok], dtype=np.int64)
    S, _ = batch.context(N)
    yy, ss, small = batch.gram_parts(S)
    r, relaxed = np.empty((batch.R, N.size)), np.empty((batch.R, N.size))
    inside = np.zeros((batch.R, N.size, batch.ell), dtype=bool)
    rank, order = batch.rank, batch.order
    for rows, P in batch.products(S):
        compiled.separation_counts(P, batch.alpha[rows], yy[rows], ss[rows], small[rows], rank[rows], order[rows], N,
                                   batch.x[rows], S[rows], r[rows], relaxed[rows], inside[rows])
    out["r"][:, ok] = r
    out["Ns_relaxed"][:, ok] = relaxed
    # the nearest non-selected token lies on the sphere of the ball, so one is in it; where r is NaN no token is in
    # the ball and the count is 0 as well
    out["Ns_full"][:, ok] = 0.0
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


def _exp(z: np.ndarray, low: np.ndarray, kept: np.ndarray) -> None:
    """``np.exp(z, out=z)`` for exponents ``z`` ``(R, nT, ...)`` as :func:`~attnbounds.empirical.compiled.exponents`
    left them: at temperatures ``k`` with ``low[k]`` (some exponent may be below :data:`_EXP_FAST`; at a low T most
    are) only the entries at the flat indices ``kept`` (the others are 0 already), packed together."""
    cuts = [0, *(np.flatnonzero(low[1:] != low[:-1]) + 1), low.size]  # runs of temperatures alike (T sorted: 2)
    for a, b in zip(cuts[:-1], cuts[1:]):
        if not low[a]:
            block = z[:, a:b]
            np.exp(block, out=block)
    flat = z.reshape(-1)
    flat[kept] = np.exp(flat[kept])


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
    z = np.empty((shifted.shape[0], T.size, *shifted.shape[1:]))
    kept = np.empty(z.size, dtype=np.int64)
    low = ((shifted.min(-1) - top)[:, None, :] / T[None, :, None] < _EXP_FAST).any(axis=(0, 2))
    _exp(z, low, kept[: compiled.exponents(shifted, top, T, low, _EXP_ZERO, z, kept)])
    out = np.empty((logits.shape[0], T.size, eps.size))
    compiled.softmax_differences(z, z.sum(-1), np.ascontiguousarray(eps, dtype=float), out)
    return out
