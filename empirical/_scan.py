"""PRIVATE fast path: dtilde and the Theorem 1 expectation terms for MANY N at once (critical-N scan).

theory.quantities defines ``dtilde_R1``, ``dtilde_R2`` and ``J_<coefficient>_<xbar>`` for one N per
instance; the critical-N search (paper Fig. 2c) needs them for ~70 values of N per L, which costs
~70 full passes over ``x``. Here the N-independent inner products are computed once per row and
every N is then O(L): with ``y_i = alpha_i x_i``, ``s_N`` the prefix sum of ``y`` in top-N order,

    ||y_i - s_N||^2 = ||y_i||^2 - 2 <y_i, s_N> + ||s_N||^2,   <y_i, s_N> = (Y S^T)_{iN}  (one matmul)

which is the Gram form theory itself uses (``_dist_to_context``). Same top-N order as
``theory.instance.top_n_mask`` (stable, ties to the lower index). Tests check every value against
``theory.quantities.compute``, and ``Critical`` re-checks one N per length at run time.
TODO(theory): move into theory.quantities as a vectorised-over-N variant; then delete this module.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

NAMES = ("dtilde_R1", "dtilde_R2", "J_scaled_weighted", "J_scaled_mean", "J_printed_weighted", "J_printed_mean")


def distance_scan(alpha: np.ndarray, x: np.ndarray, Ns: Sequence[int]) -> dict[str, np.ndarray]:
    """``name -> (B, len(Ns))`` for every name in NAMES; ``alpha`` ``(B, L)``, ``x`` ``(B, L, d)``, N < L."""
    B, L = alpha.shape
    Ns_arr = np.asarray(Ns, dtype=int)
    order = np.argsort(-alpha, axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(L)[None, :].repeat(B, 0), axis=-1)
    y = alpha[..., None] * x  # (B, L, d)
    y_sorted = np.take_along_axis(y, order[..., None], axis=1)
    S = np.cumsum(y_sorted, axis=1)[:, Ns_arr - 1, :]  # (B, n, d): s_N
    yy = np.einsum("bld,bld->bl", y, y)  # ||y_i||^2
    ys = np.matmul(y, S.transpose(0, 2, 1))  # (B, L, n): <y_i, s_N>
    ss = np.einsum("bnd,bnd->bn", S, S)  # ||s_N||^2
    d2 = yy[:, :, None] - 2.0 * ys + ss[:, None, :]
    outside = rank[:, :, None] >= Ns_arr[None, None, :]  # i not in I_N
    out = {"dtilde_R1": np.where(outside, np.sqrt(np.maximum(d2, 0.0)), 0.0).sum(1)}
    m = y.sum(1)  # sum_j alpha_j x_j
    out["dtilde_R2"] = np.linalg.norm(m[:, None, :] - 2.0 * S, axis=-1)
    rho = Ns_arr / (L - 1)  # (n,)
    front = (L - Ns_arr) / L
    xx = np.einsum("bld,bld->bl", x, x)
    # scaled coefficient alpha_i (1 + rho); xbar weighted = rho m, or mean = x.mean
    xbar_mean = x.mean(1)
    xm = np.einsum("bld,bd->bl", x, m)
    xmean = np.einsum("bld,bd->bl", x, xbar_mean)
    mm = np.einsum("bd,bd->b", m, m)
    mean2 = np.einsum("bd,bd->b", xbar_mean, xbar_mean)
    a = alpha[:, :, None]
    r = rho[None, None, :]
    coef = {"scaled": a * (1 + r), "printed": a + r}
    for cname, c in coef.items():
        cx2 = c * c * xx[:, :, None]
        weighted = cx2 - 2 * c * r * xm[:, :, None] + (r * r) * mm[:, None, None]
        mean = cx2 - 2 * c * xmean[:, :, None] + mean2[:, None, None]
        out[f"J_{cname}_weighted"] = front * np.sqrt(np.maximum(weighted, 0.0)).sum(1)
        out[f"J_{cname}_mean"] = front * np.sqrt(np.maximum(mean, 0.0)).sum(1)
    return out
