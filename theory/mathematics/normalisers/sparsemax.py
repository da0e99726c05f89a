"""Sparsemax (Martins & Astudillo 2016): the Euclidean projection of ``l / T`` onto the simplex."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import NotApplicable
from attnbounds.theory.mathematics.normalisers.spec import (THRESHOLD_LACKS, BallContext, SimplexMap, check_logits,
                                                            column, first_value, map_spec, multiplicity)
from attnbounds.theory.mathematics.normalisers.threshold import sparsemax_threshold, support_weights

if TYPE_CHECKING:
    from torch import Tensor


class Sparsemax(SimplexMap):
    """Sparsemax (Martins & Astudillo 2016): Euclidean projection of ``l / T`` onto the simplex."""

    name = "sparsemax"
    lacks = THRESHOLD_LACKS
    #: every point p of the simplex is sparsemax(p) (the projection of a simplex point is itself): l = T p
    reaches_simplex = True
    #: ``alpha = (l / T - tau)_+`` (q = 1): over logits in [-a, a] every two weights differ by at most 2 a / T
    threshold_power = sp.Integer(1)
    torch_classes = False

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """``max(z - tau, 0)``, ``z = l / T`` shifted by its row maximum (no cancellation in the sums),
        ``tau`` from the sorted cumulative sums weighted by the counts."""
        lg = check_logits(logits)
        mult = multiplicity(lg, counts)
        present = mult > 0
        z = lg / column(self.T)
        z = z - np.where(present, z, -np.inf).max(axis=-1, keepdims=True)
        order = np.argsort(np.where(present, -z, np.inf), axis=-1, kind="stable")
        zs, ms = np.take_along_axis(z, order, -1), np.take_along_axis(mult, order, -1)
        k = np.cumsum(ms, axis=-1)  # tokens up to and including this column
        cums = np.cumsum(ms * zs, axis=-1)
        support = (1 + k * zs > cums) & (ms > 0)
        last = support.sum(axis=-1, keepdims=True) - 1
        tau = (np.take_along_axis(cums, last, -1) - 1) / np.take_along_axis(k, last, -1)
        return np.where(present, np.maximum(z - tau, 0.0), 0.0)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``(diag(s) - s s^T / |S|) / T`` with ``s`` the support indicator."""
        s = (self.weights(logits) > 0).astype(np.float64)
        J = -s[:, :, None] * s[:, None, :] / s.sum(-1)[:, None, None]
        idx = np.arange(s.shape[1])
        J[:, idx, idx] += s
        return J / np.asarray(column(self.T))[..., None]

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        if counts is not None:
            raise NotApplicable("sparsemax in torch takes dense logits only (no token classes)")
        z = logits / torch.as_tensor(column(self.T), dtype=logits.dtype)
        z = z - z.max(-1, keepdim=True).values
        zs, _ = torch.sort(z, dim=-1, descending=True)
        k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
        cums = zs.cumsum(-1)
        kz = ((1 + k * zs) > cums).sum(-1, keepdim=True)
        tau = (cums.gather(-1, kz - 1) - 1) / kz.to(z.dtype)
        return torch.clamp(z - tau, min=0.0)

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """``max(z - tau, 0)`` with ``z = l / T`` on the certified support (:mod:`.threshold`)."""
        ops = ex.ops
        T = ops.decimal(first_value(self.T))
        return support_weights(self, ex, logits, ops.map(lambda v: v / T, logits), sparsemax_threshold, lambda u: u)


SPEC = map_spec(Sparsemax, "Martins & Astudillo 2016, From softmax to sparsemax")
