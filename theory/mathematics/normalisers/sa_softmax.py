"""Self-Adjusting Softmax (Zheng et al. 2025, "Self-Adjust Softmax", arXiv:2502.18277; EMNLP 2025) of ``z = l / T``.

The paper modifies ``softmax(z)`` to ``z * softmax(z)`` and to its normalised variant; this module implements the
normalised one, the form the paper's abstract gives beside the plain one and the one it uses because it keeps the
scaling factor in ``[0, 1]`` and is stable (the plain ``z_i softmax(z)_i`` is negative wherever ``z_i < 0`` and
unbounded in ``z``)::

    alpha_i = (z_i - min(z_min, 0)) / (max(0, z_max) - min(z_min, 0)) * softmax(z)_i

with ``z_min``, ``z_max`` the least and largest of ``z`` over the tokens. The factor is scale-free (``T > 0`` cancels
in it): it is computed on the logits, ``(l_i - min(l_min, 0)) / (max(0, l_max) - min(l_min, 0))``.

Not normalised: every factor lies in ``[0, 1]``, so the weights lie in ``[0, 1]`` and sum to at most 1, to exactly 1
only when every factor is 1 (all logits equal and > 0); the token of the least logit gets weight 0 when that logit is
< 0 (or when every logit is 0). When ``max(0, z_max) = min(z_min, 0)``, i.e. every logit is 0, the factor is ``0 / 0``;
it is defined as 0 there (every weight 0): every numerator ``z_i - min(z_min, 0)`` is 0, it is the limit as the
logits rise to 0 from below, and it is what an implementation adding a small ``eps`` to the denominator computes.
(The limit from above, every logit ``c -> 0+``, is ``softmax = 1 / L``: the map is not continuous there.)

The map is piecewise smooth: its factor follows the least and the largest logit. Where two logits tie for the least or
the largest (or ``z_min`` or ``z_max`` is exactly 0) it is not differentiable; the Jacobian takes the one-sided
derivative through the first such token (``numpy.argmin`` / ``argmax``, as the torch form does), and none through a
clamp at exactly 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnbounds.theory.mathematics.intervals import Unsupported
from attnbounds.theory.mathematics.normalisers.spec import (BallContext, SimplexMap, check_logits, column, first_value,
                                                            map_spec, multiplicity, others)

if TYPE_CHECKING:
    from torch import Tensor


class SelfAdjustingSoftmax(SimplexMap):
    """Self-Adjusting Softmax, normalised variant: ``(z_i - min(z_min, 0)) / (max(0, z_max) - min(z_min, 0)) *
    softmax(z)_i`` with ``z = l / T`` (module docstring)."""

    name = "sa_softmax"
    normalising = False
    length_independent = True  # no L in it
    lacks = {"relaxed": "not of the form F / sum F: the factor (z_i - min(z_min, 0)) / (max(0, z_max) - min(z_min, 0)) "
                        "depends on every logit, so there is no log F for the relaxation prover to read"}

    @staticmethod
    def _factor(lg: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(r, lo, hi, D)``: the factor (0 where ``D = 0`` and on columns without tokens), ``min(l_min, 0)``,
        ``max(0, l_max)`` and ``D = hi - lo``."""
        lo = np.minimum(np.where(present, lg, np.inf).min(-1, keepdims=True), 0.0)
        hi = np.maximum(np.where(present, lg, -np.inf).max(-1, keepdims=True), 0.0)
        D = hi - lo
        r = np.where(present & (D > 0), (lg - lo) / np.where(D > 0, D, 1.0), 0.0)
        return r, lo, hi, D

    def _softmax(self, lg: np.ndarray, mult: np.ndarray) -> np.ndarray:
        z = np.where(mult > 0, lg / column(self.T), -np.inf)  # columns without tokens: exp(-inf) = 0
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / (mult * e).sum(-1, keepdims=True)

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """``r_i * softmax(l / T)_i`` (the softmax shifted by its row maximum, weighted by the counts)."""
        lg = check_logits(logits)
        mult = multiplicity(lg, counts)
        r = self._factor(lg, mult > 0)[0]
        return r * self._softmax(lg, mult)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``d alpha_i / d l_j = s_i d r_i / d l_j + r_i s_i ([i = j] - s_j) / T`` with ``s = softmax(l / T)`` and
        ``d r_i / d l_j = ([i = j] - a_j (1 - r_i) - r_i b_j) / D``, ``a_j = [l_min < 0][j = argmin]``,
        ``b_j = [l_max > 0][j = argmax]``, ``1 - r_i = (hi - l_i) / D`` and ``1 - s_i`` summed without cancellation
        (every term of an entry has the entry's sign); 0 where ``D = 0`` (every logit 0)."""
        lg = check_logits(logits)
        B, L = lg.shape
        r, lo, hi, D = self._factor(lg, np.ones(lg.shape, dtype=bool))
        safe = np.where(D > 0, D, 1.0)
        q = np.where(D > 0, (hi - lg) / safe, 0.0)  # 1 - r
        z = lg / column(self.T)
        e = np.exp(z - z.max(-1, keepdims=True))
        total = e.sum(-1, keepdims=True)
        s = e / total
        rows, idx = np.arange(B), np.arange(L)
        a = np.zeros(lg.shape)
        b = np.zeros(lg.shape)
        a[rows, lg.argmin(-1)] = lg.min(-1) < 0
        b[rows, lg.argmax(-1)] = lg.max(-1) > 0
        dr = -a[:, None, :] * q[:, :, None] - r[:, :, None] * b[:, None, :]
        dr[:, idx, idx] = np.where(b > 0, q * (1 - a), np.where(a > 0, r, 1.0))
        dr = np.where((D > 0)[:, :, None], dr / safe[:, :, None], 0.0)
        ds = -s[:, :, None] * s[:, None, :]
        ds[:, idx, idx] = s * others(e) / total
        ds = ds / np.asarray(column(self.T))[..., None]
        return s[:, :, None] * dr + r[:, :, None] * ds

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        mult = torch.ones_like(logits) if counts is None else torch.as_tensor(counts, dtype=logits.dtype)
        present = mult > 0
        zero = torch.zeros_like(logits)
        # the least and the largest logit through the first such token (torch.argmin / argmax), clamped at 0 with no
        # gradient through the clamp, as the closed-form Jacobian
        least = torch.where(present, logits, torch.full_like(logits, torch.inf))
        largest = torch.where(present, logits, torch.full_like(logits, -torch.inf))
        l_min = logits.gather(-1, least.argmin(-1, keepdim=True))
        l_max = logits.gather(-1, largest.argmax(-1, keepdim=True))
        lo = torch.where(l_min < 0, l_min, torch.zeros_like(l_min))
        hi = torch.where(l_max > 0, l_max, torch.zeros_like(l_max))
        D = hi - lo
        r = torch.where(present & (D > 0), (logits - lo) / torch.where(D > 0, D, torch.ones_like(D)), zero)
        z = logits / torch.as_tensor(column(self.T), dtype=logits.dtype)
        s = torch.softmax(torch.where(present, z + torch.log(mult), torch.full_like(z, -torch.inf)), dim=-1)
        return r * s / mult.clamp(min=1.0)

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """``(l_k - lo) / (hi - lo) * exp((l_k - l_r) / T) / sum_j m_j exp((l_j - l_r) / T)``, ``l_r`` the largest
        logit's column (exactly 1 on its ties); every weight exactly 0 when ``hi - lo`` is exactly 0, refused when
        its sign is not decided."""
        ops = ex.ops
        T, zero = ops.decimal(first_value(self.T)), ops.zero()
        held = logits[ex.present]
        lo = ops.min2(ops.minimum(held), zero)
        hi = ops.max2(ops.maximum(held), zero)
        D = hi - lo
        if not ops.positive(D):
            if ops.certainly_zero(D):
                return np.array([zero] * len(logits), dtype=object)  # every logit 0: 0 / 0 defined as 0
            raise Unsupported("self-adjusting softmax: whether some logit is non-zero is not decided")
        factor = ops.map(lambda v: (v - lo) / D, logits)
        # relative to the largest logit (nothing above 1; exp(0) = 1 exactly on its ties)
        top = held[int(np.argmax([ops.upper_float(v) for v in held]))]
        F = ops.map(lambda v: ops.exp((v - top) / T), logits)
        return factor * ex.share(F, ex.weighted_total(F))


SPEC = map_spec(SelfAdjustingSoftmax, "Zheng et al. 2025, Self-Adjust Softmax (arXiv:2502.18277), the normalised "
                                      "variant (z - min(z_min, 0)) / (max(0, z_max) - min(z_min, 0)) * softmax(z)")
