"""The ball form of a map through a sort-based threshold (sparsemax, 1.5-entmax): the support certified.

Such a map gives ``alpha_i = p(y_i - tau)`` on its support ``S`` and 0 off it, where ``p`` is increasing with
``p(0) = 0`` (``p(u) = u`` for sparsemax, ``u^2`` for 1.5-entmax) and ``tau`` is the one value with
``sum_j m_j p((y_j - tau)_+) = 1`` (unique: the sum decreases strictly in ``tau`` while it is positive). For a
candidate support ``S`` the equation ``sum_{j in S} m_j p(y_j - tau) = 1`` has a closed form ``tau_S``, and ``tau_S``
is the threshold when every ``y_i`` of ``S`` is certainly at or above it and every other present column's ``y_i``
certainly at or below it (then the weights ``p((y - tau_S)_+)`` solve the equation, whose solution is unique; a
column exactly at ``tau_S`` has weight 0 on either side, and the same ``tau_S`` whether it is in ``S`` or not). The
candidates are prefixes of the columns sorted by their midpoints, the size of the float map's support first, then its
neighbours: the sort only proposes, the two certain comparisons decide.
A column exactly at the threshold (weight exactly 0) is decided only where the comparison is exact (the exact tier).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from attnbounds.theory.mathematics.intervals import PrecisionLoss, Unsupported
from attnbounds.theory.mathematics.normalisers.spec import BallContext, Normaliser

#: how far from the float map's support size the candidate supports reach, each way
NEIGHBOURS = 2

#: ``tau_S`` from the context, the values ``y`` (balls over the columns) and the candidate support's columns; None
#: where the closed form has no value on ``S`` (then ``S`` is not the support)
Threshold = Callable[[BallContext, np.ndarray, np.ndarray], Any]


def support_weights(n: Normaliser, ex: BallContext, logits: np.ndarray, y: np.ndarray, threshold: Threshold,
                    weight: Callable[[Any], Any]) -> np.ndarray:
    """The weights ``p(y_i - tau)`` of the map ``n`` at ``logits`` (balls; ``y`` the values it thresholds) on the
    certified support and exactly 0 off it (module docstring). :class:`PrecisionLoss` when no candidate support is
    certified (a column within rounding of the threshold: more bits, or the exact tier, decide it);
    :class:`Unsupported` along a growth of token classes, whose support may change with the counts."""
    ops = ex.ops
    if ops.name == "symbolic":
        raise Unsupported(f"{n.name}: the support of a threshold map may change along a growth of token classes (not "
                          "analysed)")
    counts = None if ex.inst.counts is None else np.asarray(ex.inst.counts)[:1]
    float_support = int((n.weights(np.array([[ops.mid_rad(b)[0] for b in logits]]), counts)[0] > 0).sum())
    columns = np.flatnonzero(ex.present)
    order = columns[np.argsort([-ops.mid_rad(y[c])[0] for c in columns], kind="stable")]
    sizes = sorted(range(1, len(order) + 1), key=lambda p: abs(p - float_support))
    for p in sizes[:2 * NEIGHBOURS + 1]:
        inside, outside = order[:p], order[p:]
        tau = threshold(ex, y, inside)
        if tau is None:
            continue
        if all(ops.nonnegative(y[i] - tau) for i in inside) and all(ops.nonnegative(tau - y[i]) for i in outside):
            out = np.array([ops.zero() for _ in range(len(y))], dtype=object)
            for i in inside:
                out[i] = weight(y[i] - tau)
            return out
    raise PrecisionLoss(f"{n.name}: no support of the threshold map is certified at this precision (a column within "
                      "rounding of the threshold)")


def _tokens(ex: BallContext, y: np.ndarray, inside: np.ndarray) -> Any:
    """``K = sum_{j in S} m_j``, the tokens of the support's columns (a ball)."""
    return ex.weighted_total(np.array([ex.ops.num(1) for _ in range(len(y))], dtype=object), inside)


def sparsemax_threshold(ex: BallContext, y: np.ndarray, inside: np.ndarray) -> Any:
    """``tau_S = (sum_{j in S} m_j y_j - 1) / sum_{j in S} m_j`` (Martins & Astudillo 2016, eq. 5's threshold)."""
    return (ex.weighted_total(y, inside) - ex.ops.num(1)) / _tokens(ex, y, inside)


def entmax15_threshold(ex: BallContext, y: np.ndarray, inside: np.ndarray) -> Any:
    """``tau_S = mean - sqrt((1 - ss) / K)`` with ``K = sum_S m_j``, ``mean = sum_S m_j y_j / K`` and
    ``ss = sum_S m_j (y_j - mean)^2`` (the smaller root of ``sum_S m_j (y_j - tau)^2 = 1``; Peters et al. 2019,
    Alg. 2); None where ``1 - ss`` is not certainly >= 0."""
    ops = ex.ops
    K = _tokens(ex, y, inside)
    mean = ex.weighted_total(y, inside) / K
    ss = ex.weighted_total(np.array([ops.ipow(v - mean, 2) for v in y], dtype=object), inside)
    rest = ops.num(1) - ss
    if not ops.nonnegative(rest):
        return None
    return mean - ops.sqrt(rest / K)
