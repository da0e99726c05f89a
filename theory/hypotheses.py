"""The hypotheses of the paper's statements as checkable predicates on an instance batch."""

from __future__ import annotations

import numpy as np

from attnbounds.theory.instance import Instance
from attnbounds.theory.normalisers import RatioNormaliser
from attnbounds.theory.statement import Hypothesis


def _all(inst: Instance, value: bool) -> np.ndarray:
    return np.full(inst.B, bool(value))


F_POSITIVE = Hypothesis(
    "F-positive", "alpha = F / sum F with F a smooth positive function of the logit (paper eq. 3)",
    lambda inst: _all(inst, isinstance(inst.normaliser, RatioNormaliser) and inst.normaliser.positive))

F_LENGTH_INDEPENDENT = Hypothesis(
    "F-length-independent", "F does not depend explicitly on the number of tokens L (Lemma 1)",
    lambda inst: _all(inst, inst.normaliser is not None and inst.normaliser.length_independent))

SOFTMAX = Hypothesis(
    "softmax", "the normaliser is softmax with temperature T: F(l) = exp(l / T)",
    lambda inst: _all(inst, isinstance(inst.normaliser, RatioNormaliser) and inst.normaliser.name == "softmax"))

LOGITS_BOUNDED = Hypothesis(
    "logits-bounded", "every logit lies in [-a, a] (a: instance parameter, default max_i |l_i|)",
    lambda inst: np.where(inst.present, np.abs(inst.logits), 0.0).max(-1) <= inst.param("a"))

SIMPLEX = Hypothesis(
    "simplex", "weights are non-negative and sum to one",
    lambda inst: (np.where(inst.present, inst.alpha, 0.0).min(-1) >= 0)
    & (np.abs((inst.multiplicity * inst.alpha).sum(-1) - 1) <= 1e-9))

TOP_N = Hypothesis(
    "top-N", "I_N holds N largest weights: alpha_i <= alpha_j for i not in I_N, j in I_N",
    lambda inst: inst.is_top_n)

L_AT_LEAST_2 = Hypothesis(
    "L>=2", "at least two tokens (N/(L-1) is defined)", lambda inst: _all(inst, inst.L >= 2))

SPHERE_FEASIBLE = Hypothesis(
    "assumptions-1-2", "Assumption 1 (x_i uniform on the sphere of radius M) and Assumption 2 "
    "(||x_i - x_j|| >= delta) with 0 <= delta <= 2M and radius r > 0; the expectation draws x from that law",
    lambda inst: (inst.param("M") > 0) & (inst.param("delta") >= 0) & (inst.param("delta") <= 2 * inst.param("M"))
    & (inst.param("r") > 0))

INDEPENDENT_HEADS = Hypothesis(
    "independent-heads", "each head covers each token independently, with probability p",
    lambda inst: (inst.param("p") >= 0) & (inst.param("p") <= 1) & (inst.param("H") >= 1))

UNIT_DIRECTION = Hypothesis(
    "unit-direction", "the finite-difference direction v has unit Euclidean norm (Fig. 4's g(T, eps))",
    lambda inst: np.abs(np.sqrt((inst.multiplicity * inst.arrays["v"] ** 2).sum(-1)) - 1.0) <= 1e-12)
