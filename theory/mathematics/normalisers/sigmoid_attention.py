"""Sigmoid attention ``alpha_i = sigmoid(l_i / T)``: not normalised (the weights need not sum to one)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnbounds.theory.mathematics.normalisers.spec import (BallContext, SimplexMap, check_logits, column, first_value,
                                                            map_spec)
from attnbounds.theory.mathematics.normalisers.symbolic import np_sigmoid

if TYPE_CHECKING:
    from torch import Tensor


class SigmoidAttention(SimplexMap):
    """Sigmoid attention ``alpha_i = sigmoid(l_i / T)``: not normalised (weights need not sum to 1)."""

    name = "sigmoid"
    normalising = False
    lacks = {"relaxed": "not of the form F / sum F: there is no log F for the relaxation prover to read"}

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        return np_sigmoid(check_logits(logits) / column(self.T))

    def jacobian(self, logits: Any) -> np.ndarray:
        a = self.weights(logits)
        d = a * (1 - a) / column(self.T)
        return np.einsum("bi,ij->bij", d, np.eye(a.shape[1]))

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        return torch.sigmoid(logits / torch.as_tensor(column(self.T), dtype=logits.dtype))

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """``1 / (1 + exp(-l / T))`` per column."""
        ops = ex.ops
        one, T = ops.num(1), ops.decimal(first_value(self.T))
        return ops.map(lambda v: one / (one + ops.exp(-v / T)), logits)


SPEC = map_spec(SigmoidAttention, "element-wise sigmoid attention, without normalisation")
