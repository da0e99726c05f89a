"""A test-only map normaliser, to show that a new map is one file plus its registration: softmax smoothed towards
the uniform weights, ``alpha_i = (c softmax_i(l / T) + 1 / L) / (1 + c)``.

Not of the form F / sum F (the uniform share depends on L and the softmax's on every logit), normalising, defined
everywhere. Its forms: float weights (with token classes), closed-form Jacobian, torch, ball; it lacks the relaxed
one (no log F). Registered for a test with ``constructors_added({SPEC.name: SPEC})``; a built-in one would be an
entry in ``attnbounds.theory.mathematics.normalisers.BUILTIN``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnbounds.theory.mathematics.normalisers import TEMPERATURE, BallContext, Normaliser, Param, check_logits, map_spec
from attnbounds.theory.mathematics.normalisers.spec import column, first_value, multiplicity

if TYPE_CHECKING:
    from torch import Tensor

#: the softmax's share is c / (1 + c)
SHARE = Param("c", 1.0, (1e-2, 1e2), log=True)


class Smoothed(Normaliser):
    """``(c softmax(l / T) + 1 / L) / (1 + c)``, ``L`` the number of tokens (counts included)."""

    name = "smoothed"
    lacks = {"relaxed": "not of the form F / sum F: there is no log F for the relaxation prover to read"}

    def __init__(self, T: Any = 1.0, c: Any = SHARE.default):
        self.T = TEMPERATURE.check(T)
        self.c = SHARE.check(c)

    @property
    def params(self) -> dict[str, Any]:
        return {"T": self.T, "c": self.c}

    def _softmax(self, lg: np.ndarray, mult: np.ndarray) -> np.ndarray:
        present = mult > 0
        z = lg / column(self.T)
        e = np.where(present, np.exp(z - np.where(present, z, -np.inf).max(-1, keepdims=True)), 0.0)
        return e / (mult * e).sum(-1, keepdims=True)

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        lg = check_logits(logits)
        mult = multiplicity(lg, counts)
        c = column(self.c)
        return np.where(mult > 0, (c * self._softmax(lg, mult) + 1.0 / mult.sum(-1, keepdims=True)) / (1 + c), 0.0)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``c / (1 + c)`` times softmax's ``(diag(s) - s s^T) / T``."""
        lg = check_logits(logits)
        s = self._softmax(lg, np.ones(lg.shape))
        J = -s[:, :, None] * s[:, None, :]
        idx = np.arange(s.shape[1])
        J[:, idx, idx] += s
        c = np.asarray(column(self.c))
        return J * (c / (1 + c) / np.asarray(column(self.T)))[..., None]

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        m = torch.ones_like(logits) if counts is None else torch.as_tensor(counts, dtype=logits.dtype)
        z = logits / torch.as_tensor(column(self.T), dtype=logits.dtype)
        s = torch.softmax(z + torch.log(m), dim=-1) / m.clamp(min=1.0)
        c = torch.as_tensor(column(self.c), dtype=logits.dtype)
        return (c * s + 1.0 / m.sum(-1, keepdim=True)) / (1 + c)

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        ops = ex.ops
        T, c, one = ops.num(first_value(self.T)), ops.num(first_value(self.c)), ops.num(1)
        F = ops.map(lambda v: ops.exp((v - logits[0]) / T), logits)
        return (c * ex.share(F, ex.weighted_total(F)) + one / ex.length) / (one + c)


SPEC = map_spec(Smoothed, "a test-only map (label-smoothed softmax)", (TEMPERATURE, SHARE))
