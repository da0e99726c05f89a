"""Compiled row loops (numba) of the experiments' kernels: one pass over a row's tokens for every N.

numpy would run each of these as several passes over ``(rows x N x tokens)`` arrays, each writing an array the
next one reads; a loop does the arithmetic of every pass on one token while it is in registers. Each function
states the formula it computes; :mod:`attnbounds.empirical.kernels` prepares their inputs (the products of the
context vectors with the tokens come from BLAS) and documents what they mean. Sums run in token (or weight)
order with reassociation allowed (``REASSOC``: the compiler splits a sum into SIMD lanes), so a number agrees with
the numpy formula to rounding (a few units in the last place), not bit for bit; the tests compare them with the
float forms of :mod:`attnbounds.theory.mathematics.quantities`. NaN is never assumed away: a NaN input gives a
NaN where numpy would.

Compiled on first use and cached on disk next to this file (numba's ``cache=True``; ``NUMBA_CACHE_DIR``
moves the cache).
"""

from __future__ import annotations

import math

import numpy as np

try:
    import numba
except ImportError as exc:  # pragma: no cover - numba is a dependency of the empirical extra
    raise ImportError("the experiments' kernels need numba: pip install 'attnbounds[empirical]'") from exc

#: reassociation (sums split into SIMD lanes); not ``nnan``/``ninf``, which would let the compiler drop the NaN checks
#: below, nor ``contract`` (fused multiply-adds would round a distance differently in different loops)
REASSOC = {"reassoc"}
#: below this sum of squares a norm is recomputed scaled by its largest entry (the squares may have underflowed)
TINY_SQUARES = 1e-280


@numba.njit(fastmath=REASSOC, cache=True)
def _norm(w: np.ndarray) -> float:
    """``||w||_2``, scaled by the largest entry when the squares may underflow."""
    ss = 0.0
    for i in range(w.size):
        ss += w[i] * w[i]
    if ss >= TINY_SQUARES or ss != ss:
        return math.sqrt(ss)
    big = 0.0
    for i in range(w.size):
        big = max(big, abs(w[i]))
    if big == 0.0:
        return 0.0
    ss = 0.0
    for i in range(w.size):
        v = w[i] / big
        ss += v * v
    return big * math.sqrt(ss)


@numba.njit(fastmath=REASSOC, cache=True)
def _dot(u: np.ndarray, v: np.ndarray) -> float:
    acc = 0.0
    for c in range(u.size):
        acc += u[c] * v[c]
    return acc


@numba.njit(fastmath=REASSOC, cache=True)
def weighted_products(x: np.ndarray, a: np.ndarray, mean: np.ndarray, m: np.ndarray, xm: np.ndarray,
                      xb: np.ndarray) -> None:
    """Per row ``r`` (``l = a.shape[1]`` tokens of ``x``): ``m[r] = sum_i a_i x_i``, ``xm[r, i] = x_i . m[r]``,
    ``xb[r, i] = x_i . mean[r]``; the second pass finds the row's tokens in the cache."""
    R, ell = a.shape
    for r in range(R):
        mr, xr, ar = m[r], x[r], a[r]
        mr[:] = 0.0
        for i in range(ell):
            xi, w = xr[i], ar[i]
            for c in range(mr.size):
                mr[c] += w * xi[c]
        for i in range(ell):
            xm[r, i] = _dot(xr[i], mr)
            xb[r, i] = _dot(xr[i], mean[r])


@numba.njit(cache=True)
def context_sums(x: np.ndarray, order: np.ndarray, a_sorted: np.ndarray, Ns: np.ndarray,
                 S: np.ndarray, abar: np.ndarray) -> None:
    """``S[r, k] = sum_{j < N_k} a_sorted[r, j] x[r, order[r, j]]`` and ``abar[r, k] = sum_{j < N_k} a_sorted[r, j]``
    (``Ns`` ascending): the context vectors ``s_N`` and ``abar_N`` of every N, summed in weight order."""
    R, _, d = x.shape
    n = Ns.size
    acc = np.empty(d)
    for r in range(R):
        acc[:] = 0.0
        total = 0.0
        k = 0
        for j in range(Ns[n - 1]):
            w = a_sorted[r, j]
            xi = x[r, order[r, j]]
            for c in range(d):
                acc[c] += w * xi[c]
            total += w
            while k < n and Ns[k] == j + 1:
                S[r, k, :] = acc
                abar[r, k] = total
                k += 1


@numba.njit(cache=True)
def _square(p: float, a: float, yy: float, s2: float) -> float:
    """The Gram form ``d2 = -2 a p + yy + s2`` of ``||a x - s||^2`` (``p = s . x``, ``yy = a^2 ||x||^2``, ``s2 =
    ||s||^2``), rounded as written in every loop (compiled without reassociation)."""
    return p * (-2.0 * a) + yy + s2


@numba.njit(fastmath=REASSOC, cache=True)
def _outside_pass(p: np.ndarray, a: np.ndarray, yy: np.ndarray, s2: float, small: float, rank: np.ndarray,
                  N: int) -> tuple[float, int]:
    """Over the tokens ``i`` with ``rank_i >= N`` of one row: the sum of ``sqrt(d2_i)`` and how many ``d2_i <= small``
    (a loop over one-dimensional views without a min: the compiler vectorises it)."""
    acc = 0.0
    low = 0
    for i in range(p.size):
        d2 = _square(p[i], a[i], yy[i], s2)
        out = rank[i] >= N
        acc += math.sqrt(d2) if out else 0.0
        low += 1 if out and d2 <= small else 0
    return acc, low


@numba.njit(fastmath={"reassoc", "nnan", "nsz"}, cache=True)
def _outside_min(p: np.ndarray, a: np.ndarray, yy: np.ndarray, s2: float, rank: np.ndarray, N: int) -> float:
    """The smallest ``d2_i`` over the tokens with ``rank_i >= N`` of one row; called only where none is NaN (its
    sum was not), so the compiler may vectorise the minimum."""
    low = np.inf
    for i in range(p.size):
        d2 = _square(p[i], a[i], yy[i], s2)
        low = min(low, d2 if rank[i] >= N else np.inf)
    return low


@numba.njit(cache=True)
def _distance(p: float, a: float, yy: float, s2: float, small: float, x: np.ndarray, s: np.ndarray) -> float:
    """``||a x - s||``: the square root of its Gram form, or from the vectors when that is at most ``small``."""
    d2 = _square(p, a, yy, s2)
    if d2 <= small:
        return _norm(a * x - s)
    return math.sqrt(d2)


@numba.njit(cache=True)
def outside_sums(P: np.ndarray, a: np.ndarray, yy: np.ndarray, ss: np.ndarray, small: np.ndarray,
                 rank: np.ndarray, Ns: np.ndarray, x: np.ndarray, S: np.ndarray, out: np.ndarray) -> None:
    """``out[r, k] = sum_{i: rank[r, i] >= N_k} ||a_i x_i - s_k||`` (dtilde, reading R1), each distance the square
    root of its Gram form ``d2 = -2 a_i (s_k . x_i) + a_i^2 ||x_i||^2 + ||s_k||^2`` (``P`` the products ``s_k . x_i``,
    ``yy`` the ``a_i^2 ||x_i||^2``, ``ss`` the ``||s_k||^2``), recomputed from the vectors where ``d2 <= small[r, k]``
    (a cancellation; a negative ``d2`` is one). A NaN ``d2`` makes the sum NaN."""
    R, n, ell = P.shape
    for r in range(R):
        for k in range(n):
            p, ar, yr, s2, lim = P[r, k], a[r], yy[r], ss[r, k], small[r, k]
            acc, low = _outside_pass(p, ar, yr, s2, lim, rank[r], Ns[k])
            if low:
                acc = 0.0
                for i in range(ell):
                    if rank[r, i] >= Ns[k]:
                        acc += _distance(p[i], ar[i], yr[i], s2, lim, x[r, i], S[r, k])
            out[r, k] = acc


@numba.njit(cache=True)
def separation_counts(P: np.ndarray, a: np.ndarray, yy: np.ndarray, ss: np.ndarray, small: np.ndarray,
                      rank: np.ndarray, order: np.ndarray, Ns: np.ndarray, x: np.ndarray, S: np.ndarray,
                      radius: np.ndarray, relaxed: np.ndarray, inside: np.ndarray) -> None:
    """Theorem 2's ball at every N (distances as in :func:`outside_sums`): ``radius[r, k] = min_{rank_i >= N_k}
    ||a_i x_i - s_k||`` (NaN if a distance is NaN), ``inside[r, k, i]``: ``i`` selected (``rank_i < N_k``) with
    ``||a_i x_i - s_k|| <= radius``, ``relaxed[r, k]`` their count."""
    R, n, ell = P.shape
    for r in range(R):
        for k in range(n):
            N = Ns[k]
            p, ar, yr, s2, lim = P[r, k], a[r], yy[r], ss[r, k], small[r, k]
            acc, low = _outside_pass(p, ar, yr, s2, lim, rank[r], N)
            if low:  # a cancellation (a negative square is one): every distance as _distance takes it
                rad = np.inf
                for i in range(ell):
                    if rank[r, i] >= N:
                        dist = _distance(p[i], ar[i], yr[i], s2, lim, x[r, i], S[r, k])
                        rad = dist if dist != dist or dist < rad else rad
                        if rad != rad:
                            break
            elif acc != acc:  # no square is negative: one is NaN
                rad = np.nan
            else:  # sqrt is monotone: the square root of the smallest square is the smallest root
                rad = math.sqrt(_outside_min(p, ar, yr, s2, rank[r], N))
            radius[r, k] = rad
            count = 0
            for j in range(N):
                i = order[r, j]
                if _distance(p[i], ar[i], yr[i], s2, lim, x[r, i], S[r, k]) <= rad:
                    inside[r, k, i] = True
                    count += 1
            relaxed[r, k] = count


@numba.njit(cache=True)
def _gram_square(x: np.ndarray, xx: np.ndarray, i: int, j: int) -> float:
    """``||x_i - x_j||^2`` in Gram form, ``(xx_i + xx_j) - 2 x_i . x_j``."""
    return xx[i] + xx[j] - 2.0 * _dot(x[i], x[j])


@numba.njit(cache=True)
def farthest_pair_squares(farthest: np.ndarray, x: np.ndarray, xx: np.ndarray, order: np.ndarray, Ns: np.ndarray,
                          ell: int, out: np.ndarray) -> None:
    """``out[r, k] = max_{i not in I_N, j in I_N} ||x_i - x_j||^2`` (Gram form) over the first ``ell`` tokens, for
    ``N = Ns[k]`` (``I_N = order[r, :N]``), from ``farthest[r, j, ell - 1] = max_{i < ell} ||x_i - x_j||^2``.

    Selected ``j`` are taken in decreasing order of ``farthest`` (ties: the earlier in weight order): when ``j``'s
    farthest token is not selected (it is farther than every selected token, beyond rounding), that is ``j``'s term
    exactly; otherwise ``j``'s term is its largest square to a non-selected token. A row is done when no remaining
    ``j`` can exceed the largest term found. NaN tokens give NaN."""
    R = x.shape[0]
    c = ell - 1
    buffer = np.empty(Ns.max())
    for r in range(R):
        xr, xxr, sel = x[r], xx[r], order[r]
        for k in range(Ns.size):
            N = Ns[k]
            cand = buffer[:N]
            bad = False
            for q in range(N):
                cand[q] = farthest[r, sel[q], c]
                bad = bad or cand[q] != cand[q]
            if bad:
                out[r, k] = np.nan
                continue
            value = -np.inf
            for _ in range(N):
                best, top = -1, -np.inf
                for q in range(N):
                    if cand[q] > top:
                        best, top = q, cand[q]
                if best < 0 or not value < top:
                    break
                cand[best] = -np.inf  # taken
                j = sel[best]
                farthest_selected = -np.inf
                for q in range(N):
                    farthest_selected = max(farthest_selected, _gram_square(xr, xxr, sel[q], j))
                exact = top
                if top <= farthest_selected * (1 + 1e-9):  # j's farthest token may be selected: the others, in full
                    exact = -np.inf
                    for q in range(N, ell):
                        exact = max(exact, _gram_square(xr, xxr, sel[q], j))
                value = max(value, exact)
            out[r, k] = value


@numba.njit(fastmath=REASSOC, cache=True)
def _jensen_pass(a: np.ndarray, xx: np.ndarray, xm: np.ndarray, xb: np.ndarray, mm: float, bb: float, rho: float,
                 clamp: bool) -> tuple[float, float, float, float]:
    acc0 = acc1 = acc2 = acc3 = 0.0
    k = 1.0 + rho
    for i in range(a.size):
        ai, x2, xmi, xbi = a[i], xx[i], xm[i], xb[i]
        y2 = ai * ai * x2
        q0 = k * k * y2 - 2.0 * k * rho * (ai * xmi) + rho * rho * mm
        q1 = k * k * y2 - 2.0 * k * (ai * xbi) + bb
        q2 = y2 + rho * (2.0 * ai * (x2 - xmi)) + rho * rho * (x2 - 2.0 * xmi + mm)
        q3 = (y2 - 2.0 * ai * xbi + bb) + rho * (2.0 * (ai * x2 - xbi)) + rho * rho * x2
        if clamp:  # a square that rounded below 0 is a norm of 0 (NaN stays NaN)
            q0 = 0.0 if q0 < 0.0 else q0
            q1 = 0.0 if q1 < 0.0 else q1
            q2 = 0.0 if q2 < 0.0 else q2
            q3 = 0.0 if q3 < 0.0 else q3
        acc0 += math.sqrt(q0)
        acc1 += math.sqrt(q1)
        acc2 += math.sqrt(q2)
        acc3 += math.sqrt(q3)
    return acc0, acc1, acc2, acc3


@numba.njit(cache=True)
def jensen_sums(a: np.ndarray, xx: np.ndarray, xm: np.ndarray, xb: np.ndarray, mm: np.ndarray, bb: np.ndarray,
                rho: np.ndarray, out: np.ndarray) -> None:
    """``out[r, g, k] = sum_i ||c_i x_i - xbar||`` for the four readings ``g`` of the Theorem 1 expectation term at
    ``rho = rho[k]``, each squared norm expanded in ``a_i``, ``xx_i = ||x_i||^2``, ``xm_i = x_i . m``,
    ``xb_i = x_i . mean``, ``mm = ||m||^2``, ``bb = ||mean||^2`` (``m = sum_i a_i x_i``, ``K = 1 + rho``):

    - scaled, weighted (``c = K a``, ``xbar = rho m``): ``K^2 a^2 xx - 2 K rho a xm + rho^2 mm``
    - scaled, mean (``c = K a``, ``xbar = mean``): ``K^2 a^2 xx - 2 K a xb + bb``
    - printed, weighted (``c = a + rho``, ``xbar = rho m``): ``a^2 xx + 2 rho a (xx - xm) + rho^2 (xx - 2 xm + mm)``
    - printed, mean (``c = a + rho``, ``xbar = mean``): ``a^2 xx - 2 a xb + bb + 2 rho (a xx - xb) + rho^2 xx``

    A square that rounds below 0 is the square of a norm of 0: a NaN sum is redone with such squares at 0."""
    R = a.shape[0]
    for r in range(R):
        for k in range(rho.size):
            sums = _jensen_pass(a[r], xx[r], xm[r], xb[r], mm[r], bb[r], rho[k], False)
            if sums[0] != sums[0] or sums[1] != sums[1] or sums[2] != sums[2] or sums[3] != sums[3]:
                sums = _jensen_pass(a[r], xx[r], xm[r], xb[r], mm[r], bb[r], rho[k], True)
            out[r, 0, k], out[r, 1, k], out[r, 2, k], out[r, 3, k] = sums


@numba.njit(cache=True)
def exponents(shifted: np.ndarray, top: np.ndarray, T: np.ndarray, low: np.ndarray, zero_below: float,
              z: np.ndarray, kept: np.ndarray) -> int:
    """``z[r, t, s, i] = shifted[r, s, i] / T[t] - top[r, s] / T[t]``: softmax's exponents at every temperature,
    shifted by the row's largest (``top``), rounded as numpy rounds the two divisions and the difference. At the
    temperatures ``t`` with ``low[t]`` an exponent below ``zero_below`` is replaced by its exponential, 0, and the
    flat indices of the others are written to ``kept``; returns how many (``z`` C-contiguous)."""
    R, shifts, ell = shifted.shape
    n = 0
    for r in range(R):
        for t in range(T.size):
            Tt = T[t]
            for s in range(shifts):
                m = top[r, s] / Tt
                out, y = z[r, t, s], shifted[r, s]
                if not low[t]:
                    for i in range(ell):
                        out[i] = y[i] / Tt - m
                    continue
                base = ((r * T.size + t) * shifts + s) * ell
                for i in range(ell):
                    v = y[i] / Tt - m
                    if v < zero_below:
                        out[i] = 0.0
                    else:
                        out[i] = v
                        kept[n] = base + i
                        n += 1
    return n


@numba.njit(fastmath=REASSOC, cache=True)
def softmax_differences(E: np.ndarray, totals: np.ndarray, eps: np.ndarray, out: np.ndarray) -> None:
    """``out[r, t, e] = ||E[r, t, e+1] / totals[r, t, e+1] - E[r, t, 0] / totals[r, t, 0]||_2 / eps[e]`` for the
    exponentials ``E`` ``(R, nT, 1 + n_eps, l)`` of the unperturbed (index 0) and perturbed logits and their sums
    ``totals``: the finite difference of two softmax vectors. The probabilities are the divisions numpy makes
    (the sums come from the caller: a finite difference at a small ``eps`` magnifies their rounding by ``1/eps``);
    only the sum of squares is reassociated."""
    R, nT, shifts, ell = E.shape
    p, w = np.empty(ell), np.empty(ell)
    for r in range(R):
        for t in range(nT):
            base, t0 = E[r, t, 0], totals[r, t, 0]
            for i in range(ell):
                p[i] = base[i] / t0
            for e in range(shifts - 1):
                q, t1 = E[r, t, e + 1], totals[r, t, e + 1]
                for i in range(ell):
                    w[i] = q[i] / t1 - p[i]
                out[r, t, e] = _norm(w) / eps[e]
