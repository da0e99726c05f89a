"""Theorem 1 for a fixed top-N set: the distance dtilde between s and the non-selected tokens.

R1 (sum of norms): pair each excluded i with a selected j; top-N gives alpha_j >= alpha_i, so
alpha_i x_i - s = alpha_i (x_i - x_j) - [(alpha_j - alpha_i) x_j + sum_{k in I_N, k != j} alpha_k x_k]
has norm <= alpha_i d_1 + (abar_N - alpha_i) max_norm; summing over the L - N excluded tokens
gives g1 exactly. R2 (norm of the sum): with y = s / abar_N, a convex combination of selected
x_j, sum_out alpha_i x_i - s = sum_out alpha_i (x_i - y) + (1 - 2 abar_N) y.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Cite, Conclude, Derivation, Identity, Witness, Z3
from attnbounds.theory.instance import Instance
from attnbounds.theory.normalisers import softmax
from attnbounds.theory.statements._symbols import L, N, abar_N, d_1, dtilde, max_norm
from attnbounds.theory.statements.theorem1 import CORRECTED, FIXED_BINDINGS, GROUPING

a_i, a_j, amax = sp.symbols("alpha_i alpha_j alpha_max", nonnegative=True)
n1, n2, n3, w, ny = sp.symbols("n_1 n_2 n_3 w n_y", nonnegative=True)
x_i, x_j, t, W, y = sp.symbols("x_i x_j t W y")  # vectors (used linearly)

SIMPLEX, TOP_N = "simplex", "top-N"


def _sample(seed: int, L_: int, N_: int, B: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """Distinct random logits and the top-N mask of their softmax weights."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(B, L_)) * 2
    inst = Instance.from_logits(logits, softmax(), N=N_)
    return logits, inst.mask


def _equal_embeddings() -> list[Instance]:
    logits, _ = _sample(0, 7, 3)
    u = np.array([0.6, 0.0, 0.8])
    return [Instance.from_logits(logits, softmax(), x=np.broadcast_to(u, (*logits.shape, 3)).copy(), N=3)]


R1 = Derivation(
    "theorem1.fixed.R1.pairing",
    ("theorem1.fixed[R1,g1]", "theorem1.fixed[R1,g2,corrected]"),
    "pair each excluded token with a selected one; top-N orders their weights; sum over the L - N excluded",
    (
        Identity("for i not in I_N, j in I_N, t = sum_{k in I_N, k != j} alpha_k x_k: alpha_i x_i - s = "
                 "alpha_i (x_i - x_j) - [(alpha_j - alpha_i) x_j + t]",
                 a_i * x_i - (a_j * x_j + t), a_i * (x_i - x_j) - ((a_j - a_i) * x_j + t), vectors=(x_i, x_j, t)),
        Cite("triangle", "||alpha_i x_i - s|| <= alpha_i ||x_i - x_j|| + (alpha_j - alpha_i) ||x_j|| + ||t||, the "
             "coefficients being >= 0", (Z3("top-N: alpha_j >= alpha_i >= 0 makes alpha_j - alpha_i >= 0",
                                            sp.Ge(a_j - a_i, 0), (sp.Ge(a_j, a_i),)),),
             uses=(SIMPLEX, TOP_N)),
        Cite("triangle", "||t|| <= sum_{k in I_N, k != j} alpha_k ||x_k|| <= (abar_N - alpha_j) max_norm",
             (Z3("the weights of I_N other than j sum to abar_N - alpha_j >= 0",
                 sp.Ge(abar_N - a_j, 0), (sp.Ge(abar_N, a_j),)),), uses=(SIMPLEX,)),
        Z3("with ||x_i - x_j|| <= d_1, ||x_j|| <= max_norm: the bound is <= alpha_i d_1 + (abar_N - alpha_i) max_norm",
           sp.Le(a_i * n1 + (a_j - a_i) * n2 + n3, a_i * d_1 + (abar_N - a_i) * max_norm),
           (sp.Le(n1, d_1), sp.Le(n2, max_norm), sp.Le(n3, (abar_N - a_j) * max_norm), sp.Le(a_i, a_j),
            sp.Le(a_j, abar_N))),
        Cite("termwise", "summing over the L - N excluded tokens, whose weights sum to 1 - abar_N",
             (Identity("sum_out [alpha_i d_1 + (abar_N - alpha_i) max_norm] = g1",
                       (1 - abar_N) * d_1 + (L - N) * abar_N * max_norm - (1 - abar_N) * max_norm, GROUPING["g1"]),),
             uses=(SIMPLEX,)),
        Conclude(sp.Le(dtilde, GROUPING["g1"]), {"dtilde": "dtilde_R1", **FIXED_BINDINGS},
                 text="dtilde_R1 <= g1"),
    ),
    Witness("every x_i the same vector (d_1 = 0): dtilde_R1 = sum_out (abar_N - alpha_i) max_norm = g1",
            _equal_embeddings),
)


def _hull_witness() -> list[Instance]:
    """Selected x_j = u, excluded x_i = u + sign(1 - 2 abar_N) d u/||u||: both triangle steps are equalities."""
    logits, mask = _sample(1, 6, 2, B=6)
    logits[:3] *= 0.2  # flat weights: abar_N < 1/2; peaked ones: abar_N > 1/2
    inst = Instance.from_logits(logits, softmax(), N=2)
    abar = np.where(inst.mask, inst.alpha, 0).sum(-1)
    u = np.array([1.0, 2.0])
    shift = np.sign(1 - 2 * abar)[:, None, None] * 0.7 * u / np.linalg.norm(u)
    x = np.where(inst.mask[..., None], u, u + shift)
    return [Instance.from_logits(logits, softmax(), x=x, N=2)]


R2 = Derivation(
    "theorem1.fixed.R2.convex-hull",
    ("theorem1.fixed[R2,g1,corrected]", "theorem1.fixed[R2,g2,corrected]"),
    "split the excluded mass around y = s / abar_N, a convex combination of the selected embeddings",
    (
        Identity("W = sum_out alpha_i x_i, s = abar_N y: W - s = sum_out alpha_i (x_i - y) + (1 - 2 abar_N) y, "
                 "since sum_out alpha_i (x_i - y) = W - (1 - abar_N) y",
                 W - abar_N * y, (W - (1 - abar_N) * y) + (1 - 2 * abar_N) * y, vectors=(W, y), uses=(SIMPLEX,)),
        Cite("triangle", "||x_i - y|| <= sum_{j in I_N} (alpha_j / abar_N) ||x_i - x_j|| <= d_1 and ||y|| <= max_norm: "
             "y is a convex combination of the selected x_j",
             (Z3("abar_N > 0: it holds the largest weight, which is >= 1/L", sp.Gt(abar_N, 0),
                 (sp.Ge(amax, 1 / L), sp.Ge(abar_N, amax))),), uses=(SIMPLEX, TOP_N)),
        Cite("triangle", "||sum_out alpha_i (x_i - y) + (1 - 2 abar_N) y|| <= sum_out alpha_i ||x_i - y|| + "
             "|1 - 2 abar_N| ||y||", uses=(SIMPLEX,)),
        Z3("w = sum_out alpha_i ||x_i - y|| <= (1 - abar_N) d_1 and ||y|| <= max_norm bound the sum",
           sp.Le(w + sp.Abs(1 - 2 * abar_N) * ny, CORRECTED["R2"]),
           (sp.Le(w, (1 - abar_N) * d_1), sp.Le(ny, max_norm))),
        Conclude(sp.Le(dtilde, CORRECTED["R2"]), {"dtilde": "dtilde_R2", **FIXED_BINDINGS},
                 text="dtilde_R2 <= (1 - abar_N) d_1 + |1 - 2 abar_N| max_norm"),
    ),
    Witness("selected x_j = u, excluded x_i = u + sign(1 - 2 abar_N) d_1 u/||u||, abar_N on both sides of 1/2",
            _hull_witness),
)

DERIVATIONS = (R1, R2)

NOT_PROVED = {
    "theorem1.fixed[R1,g2]": ("g2 = g1 + (1 - abar_N)(max_norm - 1) is below the proved and attained bound g1 when "
                              "max_norm < 1 (g2 is not homogeneous in x); where max_norm >= 1, g2 >= g1 and the printed "
                              "form follows from the corrected one", "theorem1.fixed[R1,g2,corrected]"),
    **{f"theorem1.fixed[R2,{g}]": ("the pairing argument bounds a sum of norms; the norm of the sum keeps the term "
                                   "(1 - 2 abar_N) y, which g1 and g2 do not control when the weights are flat",
                                   f"theorem1.fixed[R2,{g},corrected]") for g in GROUPING},
}
