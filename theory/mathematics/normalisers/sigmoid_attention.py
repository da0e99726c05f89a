"""Sigmoid attention ``alpha_i = sigmoid(l_i / T)``: not normalised (the weights need not sum to one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.normalisers.spec import (BallContext, SimplexMap, check_logits, column, first_value,
                                                            map_spec)
from attnbounds.theory.mathematics.normalisers.symbolic import l_sym, np_sigmoid, softplus

if TYPE_CHECKING:
    from torch import Tensor


class SigmoidAttention(SimplexMap):
    """Sigmoid attention ``alpha_i = sigmoid(l_i / T)``: not normalised (weights need not sum to 1)."""

    name = "sigmoid"
    normalising = False
    elementwise = True
    #: the relaxed form: ``log sigmoid(l / T) = -softplus(-l / T)`` (each weight is F itself, no sum)
    log_F = -softplus(-l_sym / sp.Symbol("T", positive=True))

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        return np_sigmoid(check_logits(logits) / column(self.T))

    def jacobian(self, logits: Any) -> np.ndarray:
        """``diag(sigmoid(x) sigmoid(-x) / T)``, ``x = l / T``: ``1 - sigmoid(x)`` as ``sigmoid(-x)``, without the
        cancellation that makes it 0 in float from x of about 37 on (its value about e^-x)."""
        x = check_logits(logits) / column(self.T)
        d = np_sigmoid(x) * np_sigmoid(-x) / column(self.T)
        return np.einsum("bi,ij->bij", d, np.eye(x.shape[1]))

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        return torch.sigmoid(logits / torch.as_tensor(column(self.T), dtype=logits.dtype))

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """``1 / (1 + exp(-l / T))`` per column."""
        ops = ex.ops
        one, T = ops.num(1), ops.decimal(first_value(self.T))
        return ops.map(lambda v: one / (one + ops.exp(-v / T)), logits)


SPEC = map_spec(SigmoidAttention, "element-wise sigmoid attention, without normalisation")
