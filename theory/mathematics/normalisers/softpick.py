"""Softpick (Zuhri, Fuadi & Aji 2025, "Softpick: No Attention Sink, No Massive Activations with Rectified Softmax",
arXiv:2504.20966) of ``x = l / T``::

    alpha_i = relu(exp(x_i) - 1) / (sum_j |exp(x_j) - 1| + eps)

Not normalised: the weights lie in ``[0, 1]`` and sum to ``sum_{x_j > 0} (e^{x_j} - 1) / (sum_j |e^{x_j} - 1| + eps)``,
below 1 when ``eps > 0`` (exactly 1 only when ``eps = 0``, some logit is > 0 and none is < 0), and they are all 0
when no logit is positive (the point of the rectification: a head can attend to nothing, no attention sink). Not of
the form F / sum F with F > 0 either: the numerator is rectified, the denominator is not, and ``eps`` adds a constant.

``eps``: the formula's ``eps``, added to the denominator before any rescaling, with domain ``eps >= 0`` (default
``1e-8``). Its parameter is named ``epsilon``: ``eps`` is the instance parameter of Fig. 4's finite difference
(``g_fd``, domain ``eps > 0``), and a statement's ``fixed`` values of a normaliser's parameters share one namespace
with it. The authors' reference kernel adds its ``eps`` to the denominator *after* dividing it by ``exp(max_j x_j)``
(an effective ``eps * exp(max_j x_j)``, which depends on the logits); this module implements the formula as the paper
writes it. With ``eps = 0`` the weights are ``0 / 0`` when every ``x_j = 0``; they are defined as 0 there: every
numerator is exactly 0, it is the value at every ``eps > 0`` (so the limit ``eps -> 0+``), and it is what the rest of
the map says of rows without a positive logit (no token attended).

Stable float form: with ``m = max(0, max_j x_j)`` numerator and denominator are multiplied by ``exp(-m)``:
``v_j = exp(-m) (e^{x_j} - 1)`` is ``exp(x_j - m) * (-expm1(-x_j))`` for ``x_j >= 0`` and ``exp(-m) * expm1(x_j)``
for ``x_j < 0`` (no overflow, no cancellation near 0), ``alpha_i = relu(v_i) / (sum_j |v_j| + eps exp(-m))``.

At ``x_i = 0`` the map is not differentiable (relu and |.| have a kink there): the Jacobian takes their derivatives as
0, as autograd does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from attnbounds.theory.mathematics.intervals import Ball, Ops, Unsupported
from attnbounds.theory.mathematics.normalisers.spec import (TEMPERATURE, BallContext, Normaliser, Param, check_logits,
                                                            column, first_value, map_spec, multiplicity, others)

if TYPE_CHECKING:
    from torch import Tensor

#: the denominator's additive constant ``eps`` (domain ``[0, inf)``; the tests and the search draw it over
#: ``[1e-12, 1e-2]``), named ``epsilon`` (module docstring)
EPSILON = Param("epsilon", 1e-8, (1e-12, 1e-2), log=True, closed=True)


def _expm1(ops: Ops, v: Any) -> Ball:
    """``e^v - 1`` on a ball: arb's ``expm1`` (tight near 0), else ``exp(v) - 1`` (enclosing, wider near 0)."""
    return v.expm1() if ops.name == "arb" else ops.exp(v) - ops.num(1)


class Softpick(Normaliser):
    """Softpick: ``alpha_i = relu(e^{x_i} - 1) / (sum_j |e^{x_j} - 1| + eps)``, ``x = l / T`` (module docstring)."""

    name = "softpick"
    normalising = False
    length_independent = True  # no L in it
    lacks = {"relaxed": "not of the form F / sum F with F > 0 (the numerator relu(e^x - 1) is not the denominator's "
                        "|e^x - 1| and vanishes for x <= 0; eps adds a constant): there is no log F for the "
                        "relaxation prover to read"}

    def __init__(self, T: Any = 1.0, epsilon: Any = EPSILON.default):
        self.T = TEMPERATURE.check(T)
        self.epsilon = EPSILON.check(epsilon)

    @property
    def params(self) -> dict[str, Any]:
        return {"T": self.T, "epsilon": self.epsilon}

    def _scaled(self, lg: np.ndarray, mult: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(x, exp(x - m), v, c)``: ``v = exp(-m) (e^x - 1)`` and ``c = eps exp(-m)``, with ``m = max(0, max_j x_j)``
        over the columns holding tokens (0 on the others): the denominator is ``d = sum_j m_j |v_j| + c``."""
        present = mult > 0
        x = np.where(present, lg / column(self.T), 0.0)
        m = np.maximum(np.where(present, x, -np.inf).max(-1, keepdims=True), 0.0)
        pos, neg = np.maximum(x, 0.0), np.minimum(x, 0.0)
        with np.errstate(under="ignore"):
            e = np.exp(x - m)
            v = np.where(x >= 0, np.exp(pos - m) * -np.expm1(-pos), np.exp(-m) * np.expm1(neg))
            c = column(self.epsilon) * np.exp(-m)
        return x, e, np.where(present, v, 0.0), c

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """``relu(v_i) / d`` (:meth:`_scaled`); 0 where ``d = 0`` (``eps = 0`` and every ``x_j = 0``)."""
        lg = check_logits(logits)
        mult = multiplicity(lg, counts)
        _, _, v, c = self._scaled(lg, mult)
        d = (mult * np.abs(v)).sum(-1, keepdims=True) + c
        return np.where(d > 0, np.maximum(v, 0.0) / np.where(d > 0, d, 1.0), 0.0)  # (v is 0 on count-0 columns)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``d alpha_i / d l_j = ([i = j] [x_i > 0] e^{x_i} - alpha_i sign(x_j) e^{x_j}) / (T (sum_k |e^{x_k} - 1| +
        eps))``, computed with ``e^{x} / D = exp(x - m) / d``; the diagonal as ``[x_i > 0] (e^{x_i} / D)
        (1 - alpha_i)`` with ``1 - alpha_i = (d - v_i) / d`` summed without cancellation; 0 where ``d = 0``."""
        lg = check_logits(logits)
        x, e, v, c = self._scaled(lg, np.ones(lg.shape))
        size = np.abs(v)
        d = size.sum(-1, keepdims=True) + c
        safe = np.where(d > 0, d, 1.0)
        a = np.where(d > 0, np.maximum(v, 0.0) / safe, 0.0)
        g = np.where(d > 0, e / safe, 0.0)  # e^{x_j} / D
        J = -a[:, :, None] * (np.sign(x) * g)[:, None, :]
        idx = np.arange(lg.shape[1])
        J[:, idx, idx] = np.where(x > 0, g * others(size, c) / safe, 0.0)
        return J / np.asarray(column(self.T))[..., None]

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        mult = torch.ones_like(logits) if counts is None else torch.as_tensor(counts, dtype=logits.dtype)
        present = mult > 0
        zero = torch.zeros_like(logits)
        x = torch.where(present, logits / torch.as_tensor(column(self.T), dtype=logits.dtype), zero)
        # the map does not depend on the shift m: no gradient through it
        m = torch.where(present, x, torch.full_like(x, -torch.inf)).amax(-1, keepdim=True).clamp(min=0.0).detach()
        pos, neg = x.clamp(min=0.0), x.clamp(max=0.0)  # each branch finite (and its gradient) on every column
        v = torch.where(x >= 0, torch.exp(pos - m) * -torch.expm1(-pos), torch.exp(-m) * torch.expm1(neg))
        v = torch.where(present, v, zero)
        eps = torch.as_tensor(column(self.epsilon), dtype=logits.dtype)
        d = (mult * v.abs()).sum(-1, keepdim=True) + eps * torch.exp(-m)
        w = torch.relu(v) / torch.where(d > 0, d, torch.ones_like(d))
        return torch.where(present & (d > 0), w, zero)

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """``relu(v_k) / (sum_j m_j |v_j| + eps e^{-m})`` with ``v = e^{-m} expm1(l / T)``, ``m = max(0, l_r / T)`` for
        the column ``r`` of the largest logit (the float form's rescaling, exact in balls; ``e^{(l_k - l_r) / T}`` is
        exactly 1 on ``r``'s ties). The rectification and ``|.|`` follow the sign of each logit where it is decided
        (exact doubles: always, unless the logits were moved); every weight is exactly 0 when the denominator is
        exactly 0 (``eps = 0`` and every logit 0), refused when its sign is not decided."""
        ops = ex.ops
        T, zero, eps = ops.decimal(first_value(self.T)), ops.zero(), first_value(self.epsilon)
        held = np.flatnonzero(ex.present)
        top = logits[held[int(np.argmax([ops.upper_float(logits[j]) for j in held]))]]
        positive_top = ops.positive(top)
        scale = ops.exp(-top / T) if positive_top else ops.num(1)  # e^{-m}
        numerators, sizes = [], []
        for v in logits:
            if ops.positive(v):  # e^{x - m} (1 - e^{-x}): no cancellation, nothing above 1
                u = (ops.exp((v - top) / T) if positive_top else ops.exp(v / T)) * -_expm1(ops, -v / T)
                numerators.append(u)
                sizes.append(u)
            elif ops.negative(v):
                u = scale * _expm1(ops, v / T)
                numerators.append(zero)
                sizes.append(-u)
            elif ops.certainly_zero(v):  # x = 0: e^0 - 1 = 0
                numerators.append(zero)
                sizes.append(zero)
            else:  # a moved logit whose sign is not decided
                u = scale * _expm1(ops, v / T)
                numerators.append(ops.max2(u, zero))
                sizes.append(ops.abs(u))
        num, size = np.array(numerators, dtype=object), np.array(sizes, dtype=object)
        # the denominator is > 0 iff eps > 0 or some column holding tokens has e^{x_j} != 1 (counts >= 1 there):
        # decided on the columns' own values, never on a sum that may grow with L
        if not (eps > 0 or any(ops.positive(size[j]) for j in held)):
            if all(ops.certainly_zero(size[j]) for j in held):  # every size is >= 0 by construction
                return np.array([zero] * len(logits), dtype=object)  # 0 / 0 defined as 0 (module docstring)
            raise Unsupported("softpick with eps = 0: whether some e^{x_j} - 1 is non-zero is not decided")
        return ex.share(num, ex.weighted_total(size) + ops.decimal(eps) * scale)


SPEC = map_spec(Softpick, "Zuhri, Fuadi & Aji 2025, Softpick: No Attention Sink, No Massive Activations with Rectified "
                          "Softmax (arXiv:2504.20966)", (TEMPERATURE, EPSILON))
