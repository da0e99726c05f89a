"""Uniform random N-subsets of L tokens, seen through token classes (Theorem 1, random subset; Corollary 2).

A uniform N-subset of L tokens picks ``c_k`` tokens of class ``k``; the count vector ``c`` follows
the multivariate hypergeometric law ``P(c) = prod_k C(m_k, c_k) / C(L, N)``, and every quantity of
the subset used here (the context vector ``s = sum_k c_k y_k``, the non-selected tokens
``m_k - c_k``) depends on ``c`` only. So an expectation over subsets is the finite sum over count
vectors, exactly, whatever L is (a dense instance has ``m_k = 1``: count vectors are the subsets).
When there are too many count vectors, they are sampled (Monte Carlo with a Hoeffding interval).
"""

from __future__ import annotations

import functools

import numpy as np

from attnbounds.theory.mathematics.errors import NotApplicable

#: count vectors times classes enumerated at most by the float forms
ENUMERATION_WORK = 1 << 17
#: ball operations the interval form spends on an enumeration at most (about (d + 5) per vector and class)
BALL_ENUMERATION_WORK = 1 << 19
#: numpy's multivariate hypergeometric sampler needs fewer tokens than this
_NUMPY_SAMPLER_LIMIT = 10**9 - 1


@functools.lru_cache(maxsize=256)
def number_of_count_vectors(m: tuple[int, ...], N: int, cap: int = ENUMERATION_WORK + 1) -> int:
    """``#{c : 0 <= c_k <= m_k, sum c = N}``, or ``cap`` when it is at least ``cap``.

    Each ``c_k`` ranges over ``[lo_k, hi_k]`` with ``lo_k = max(0, N - (L - m_k))`` and ``hi_k = min(m_k, N)``,
    and takes every value there, so the count is at least the longest range; otherwise a capped
    dynamic programme over the shifted counts ``c_k - lo_k`` (whose total is at most the sum of the ranges).
    """
    L = sum(m)
    lo = [max(0, N - (L - mk)) for mk in m]
    ranges = [min(mk, N) - lo_k for mk, lo_k in zip(m, lo)]
    if any(r < 0 for r in ranges):
        return 0
    if max(ranges, default=0) + 1 >= cap:
        return cap
    target = N - sum(lo)
    ways = np.zeros(target + 1, dtype=np.int64)
    ways[0] = 1
    for r in ranges:
        prefix = np.concatenate([[0], np.cumsum(ways)])
        upper = np.arange(target + 1) + 1
        ways = np.minimum(prefix[upper] - prefix[np.maximum(upper - r - 1, 0)], cap)
    return int(min(ways[target], cap))


def enumerable(m: tuple[int, ...], N: int, per_class: int = 1, limit: int = ENUMERATION_WORK) -> bool:
    """Whether the count vectors of ``(m, N)`` are few enough to enumerate: their number times the
    classes times ``per_class`` is at most ``limit`` (:data:`ENUMERATION_WORK` for float,
    :data:`BALL_ENUMERATION_WORK` with ``per_class = d + 5`` for balls)."""
    cap = limit // max(len(m) * per_class, 1) + 1
    return number_of_count_vectors(m, N, cap) * max(len(m), 1) * per_class <= limit


@functools.lru_cache(maxsize=64)
def count_vectors(m: tuple[int, ...], N: int) -> np.ndarray:
    """Every count vector ``(S, K)`` (read-only), in lexicographic order of ``(c_1, c_2, ...)`` decreasing."""
    K = len(m)
    suffix = np.concatenate([np.cumsum(np.asarray(m[::-1], dtype=np.int64))[::-1], [0]])  # tokens in classes k..K-1
    rows = np.zeros((1, 0), dtype=np.int64)
    left = np.array([N], dtype=np.int64)
    for k in range(K):
        lo = np.maximum(left - suffix[k + 1], 0)
        hi = np.minimum(left, m[k])
        width = np.maximum(hi - lo + 1, 0)
        rep = np.repeat(np.arange(rows.shape[0]), width)
        offset = np.arange(width.sum()) - np.repeat(np.cumsum(width) - width, width)
        c = hi[rep] - offset
        rows = np.concatenate([rows[rep], c[:, None]], axis=1)
        left = left[rep] - c
    rows.flags.writeable = False
    return rows


def probabilities(m: tuple[int, ...], C: np.ndarray) -> np.ndarray:
    """``P(c) = prod_k C(m_k, c_k) / C(L, N)`` for the rows ``c`` of ``C`` (every count vector of ``(m, N)``).

    ``log C(m_k, c) - log C(m_k, c_min)`` is accumulated term by term over the few values ``c_k`` takes
    (``log((m - j) / (j + 1))``), never as a difference of huge log-Gamma values; the common factor is
    removed by normalising, since the rows are every count vector and their probabilities sum to one.
    """
    if len(C) == 0:
        return np.zeros(0)
    lo, hi = C.min(axis=0), C.max(axis=0)
    logw = np.zeros(len(C))
    for k, mk in enumerate(m):
        j = np.arange(lo[k], hi[k], dtype=np.float64)
        steps = np.concatenate([[0.0], np.cumsum(np.log((mk - j) / (j + 1)))])  # log C(m, c) - log C(m, lo)
        logw += steps[C[:, k] - lo[k]]
    w = np.exp(logw - logw.max())
    return w / w.sum()


def sample_count_vectors(rng: np.random.Generator, m: tuple[int, ...], N: int, draws: int) -> np.ndarray:
    """``draws`` count vectors of uniform N-subsets ``(draws, K)`` (multivariate hypergeometric)."""
    colors = np.asarray(m, dtype=np.int64)
    L = int(colors.sum())
    if L <= _NUMPY_SAMPLER_LIMIT:
        return rng.multivariate_hypergeometric(colors, N, size=draws, method="marginals" if L > 10**6 else "count")
    if N > 10**5:
        raise NotApplicable(f"cannot sample {N}-subsets of L = {L} tokens (more than 10^5 selected beyond 10^9 tokens)")
    edges = np.cumsum(colors)
    out = np.empty((draws, len(m)), dtype=np.int64)
    for t in range(draws):  # N distinct tokens by rejection (N << L), then their classes
        picked: set[int] = set()
        while len(picked) < N:
            picked.update(int(v) for v in rng.integers(0, L, N - len(picked)))
        out[t] = np.bincount(np.searchsorted(edges, np.fromiter(picked, np.int64), side="right"), minlength=len(m))
    return out


def top_sum(values: list[float] | np.ndarray, m: tuple[int, ...], n: int) -> float:
    """The sum of the ``n`` largest token values (column values repeated by their counts)."""
    total, left = 0.0, n
    for k in np.argsort(-np.asarray(values, dtype=np.float64), kind="stable"):
        if m[k] == 0:
            continue
        take = min(left, m[k])
        total += take * float(values[k])
        left -= take
        if left == 0:
            break
    return total
