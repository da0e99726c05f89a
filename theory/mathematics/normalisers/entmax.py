"""1.5-entmax (Peters, Niculae & Martins 2019) of ``l / T``, exact and sort-based."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import NotApplicable
from attnbounds.theory.mathematics.normalisers.spec import (THRESHOLD_LACKS, BallContext, SimplexMap, check_logits,
                                                            column, first_value, map_spec, multiplicity)
from attnbounds.theory.mathematics.normalisers.threshold import entmax15_threshold, support_weights

if TYPE_CHECKING:
    from torch import Tensor


class Entmax15(SimplexMap):
    """1.5-entmax (Peters et al. 2019) of ``l / T``: ``alpha = [(z/2 - tau)_+]^2``, exact sort-based."""

    name = "entmax15"
    lacks = THRESHOLD_LACKS
    #: every point p of the simplex is entmax15(2 sqrt(p)) (threshold 0): l = 2 T sqrt(p)
    reaches_simplex = True
    #: ``alpha = ((l / (2T) - tau)_+)^2`` (q = 1/2): over logits in [-a, a] every two sqrt(weights) differ by at
    #: most a / T
    threshold_power = sp.Rational(1, 2)
    torch_classes = False

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """``[(z - tau)_+]^2``, ``z = l / (2T)`` shifted by its row maximum, ``tau`` from the sorted
        cumulative moments weighted by the counts."""
        lg = check_logits(logits)
        mult = multiplicity(lg, counts)
        present = mult > 0
        z = lg / column(self.T) / 2.0
        z = z - np.where(present, z, -np.inf).max(axis=-1, keepdims=True)
        order = np.argsort(np.where(present, -z, np.inf), axis=-1, kind="stable")
        zs, ms = np.take_along_axis(z, order, -1), np.take_along_axis(mult, order, -1)
        zs = np.where(ms > 0, zs, zs[..., :1])  # padding never enters the support
        k = np.cumsum(ms, -1)
        mean = np.cumsum(ms * zs, -1) / k
        mean_sq = np.cumsum(ms * zs**2, -1) / k
        ss = k * (mean_sq - mean**2)
        delta = np.maximum((1 - ss) / k, 0.0)
        tau = mean - np.sqrt(delta)
        support = ((tau <= zs) & (ms > 0)).sum(-1, keepdims=True)
        tau_star = np.take_along_axis(tau, support - 1, -1)
        return np.where(present, np.maximum(z - tau_star, 0.0) ** 2, 0.0)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``(diag(w) - w w^T / sum w) / T`` with ``w = sqrt(alpha)`` (Peters et al. 2019, Prop. 1)."""
        w = np.sqrt(self.weights(logits))
        J = -w[:, :, None] * w[:, None, :] / w.sum(-1)[:, None, None]
        idx = np.arange(w.shape[1])
        J[:, idx, idx] += w
        return J / np.asarray(column(self.T))[..., None]

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        if counts is not None:
            raise NotApplicable("entmax-1.5 in torch takes dense logits only (no token classes)")
        z = logits / torch.as_tensor(column(self.T), dtype=logits.dtype) / 2.0
        z = z - z.max(-1, keepdim=True).values
        zs, _ = torch.sort(z, -1, descending=True)
        k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
        mean = zs.cumsum(-1) / k
        mean_sq = (zs**2).cumsum(-1) / k
        delta = torch.clamp((1 - k * (mean_sq - mean**2)) / k, min=0.0)
        tau = mean - torch.sqrt(delta)
        support = (tau <= zs).sum(-1, keepdim=True)
        return torch.clamp(z - tau.gather(-1, support - 1), min=0.0) ** 2

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """``[(z - tau)_+]^2`` with ``z = l / (2T)`` on the certified support (:mod:`.threshold`)."""
        ops = ex.ops
        T = ops.decimal(first_value(self.T))
        return support_weights(self, ex, logits, ops.map(lambda v: v / (2 * T), logits), entmax15_threshold,
                               lambda u: ops.ipow(u, 2))


SPEC = map_spec(Entmax15, "Peters, Niculae & Martins 2019, Sparse sequence-to-sequence models")
