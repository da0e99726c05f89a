"""``alpha_i = relu(l_i / T) / sum_j relu(l_j / T)``: of the form F / sum F, but F = relu is not positive."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import numpy as np

from attnbounds.theory.mathematics.errors import NotApplicable
from attnbounds.theory.mathematics.intervals import Unsupported
from attnbounds.theory.mathematics.normalisers.spec import (BallContext, SimplexMap, check_logits, column, first_value,
                                                            map_spec, multiplicity)

if TYPE_CHECKING:
    from torch import Tensor


class ReluNormalised(SimplexMap):
    """``alpha_i = relu(l_i) / sum_j relu(l_j)``: of the form F / sum F but F = relu is not positive."""

    name = "relu"
    lacks = {"relaxed": "F = relu is not positive (log F = -inf for l <= 0): the relaxation prover reads a finite "
                        "log F"}
    needs_positive_logit = True
    #: every point p of the simplex is relu(p) / sum relu(p) (some p_i > 0): l = T p
    reaches_simplex = True

    @staticmethod
    def F(l: np.ndarray) -> np.ndarray:
        return np.maximum(l, 0.0)

    @functools.cached_property
    def positive(self) -> bool:
        probe = np.linspace(-10.0, 10.0, 201)
        return bool(np.all(self.F(probe) > 0))

    length_independent = True  # relu has no L in it; Lemma 1 fails through positivity instead

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        lg = check_logits(logits)
        f = self.F(lg / column(self.T))
        tot = (multiplicity(lg, counts) * f).sum(-1, keepdims=True)
        if np.any(tot == 0):
            raise NotApplicable("relu normaliser: every logit of some row is <= 0, weights undefined")
        return f / tot

    def jacobian(self, logits: Any) -> np.ndarray:
        lg = check_logits(logits)
        a = self.weights(lg)
        on = (lg > 0).astype(np.float64)
        tot = self.F(lg / column(self.T)).sum(-1)
        J = -a[:, :, None] * on[:, None, :]
        idx = np.arange(a.shape[1])
        J[:, idx, idx] += on
        return J / (tot[:, None, None] * np.asarray(column(self.T))[..., None])

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        f = torch.relu(logits / torch.as_tensor(column(self.T), dtype=logits.dtype))
        m = 1.0 if counts is None else torch.as_tensor(counts, dtype=logits.dtype)
        return f / (m * f).sum(-1, keepdim=True)

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """``relu(l_k / T) / sum_j m_j relu(l_j / T)``, refused unless the sum is certainly positive."""
        ops = ex.ops
        T = ops.decimal(first_value(self.T))
        F = ops.map(lambda v: ops.max2(v / T, ops.zero()), logits)
        S = ex.weighted_total(F)
        if not ops.positive(S):
            raise Unsupported("relu normaliser: the sum of relu(l / T) is not certainly positive")
        return F / S


SPEC = map_spec(ReluNormalised, "ReLU attention normalised by its sum (a map of paper eq. 3 with F = relu >= 0)")
