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

from attnbounds.proofs.framework import Assume, Cite, Conclude, Derivation, Identity, Witness, Z3, reals
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.statements.theorem1 import FIXED_BINDINGS, GROUPING

L, N, abar_N, d_1, dtilde, max_norm = reals("L N abar_N d_1 dtilde max_norm")
a_i, a_j, n1, n2, n3, D, w, ny = reals("alpha_i alpha_j n_1 n_2 n_3 D w n_y")
x_i, x_j, t, W, y = reals("x_i x_j t W y")  # vectors (used linearly)
#: the printed groupings and the corrected R2 bound, in plain real symbols
G1 = (1 - abar_N) * d_1 + max_norm * (abar_N * (L - N) - (1 - abar_N))
R2_BOUND = (1 - abar_N) * d_1 + sp.Abs(1 - 2 * abar_N) * max_norm

SIMPLEX, TOP_N = hyp.SIMPLEX.id, hyp.TOP_N.id
NORMS = Cite("norm-nonnegative", "||x_i - x_j||, ||x_j||, ||t|| are norms",
             result=sp.And(sp.Ge(n1, 0), sp.Ge(n2, 0), sp.Ge(n3, 0)))


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
        Assume("the weight alpha_i of an excluded token is >= 0", sp.Ge(a_i, 0), SIMPLEX),
        Assume("top-N: the selected alpha_j is at least the excluded alpha_i", sp.Ge(a_j, a_i), TOP_N),
        Cite("termwise", "abar_N - alpha_j is the sum of the other selected weights, each >= 0",
             uses=(SIMPLEX,), result=sp.Ge(abar_N, a_j)),
        Identity("for i not in I_N, j in I_N, t = sum_{k in I_N, k != j} alpha_k x_k: alpha_i x_i - s = "
                 "alpha_i (x_i - x_j) - [(alpha_j - alpha_i) x_j + t]",
                 a_i * x_i - (a_j * x_j + t), a_i * (x_i - x_j) - ((a_j - a_i) * x_j + t), vectors=(x_i, x_j, t)),
        NORMS,
        Cite("triangle", "D = ||alpha_i x_i - s|| <= alpha_i ||x_i - x_j|| + (alpha_j - alpha_i) ||x_j|| + ||t||, the "
             "coefficients being >= 0", given=(sp.Ge(a_i, 0), sp.Ge(a_j, a_i)),
             result=sp.Le(D, a_i * n1 + (a_j - a_i) * n2 + n3)),
        Cite("triangle", "||t|| <= sum_{k in I_N, k != j} alpha_k ||x_k|| <= (abar_N - alpha_j) max_norm (weights >= 0)",
             uses=(SIMPLEX,), given=(sp.Ge(abar_N, a_j),), result=sp.Le(n3, (abar_N - a_j) * max_norm)),
        Cite("maximum", "||x_i - x_j|| <= d_1 (the largest excluded-to-selected distance) and ||x_j|| <= max_norm",
             result=sp.And(sp.Le(n1, d_1), sp.Le(n2, max_norm))),
        Z3("with ||x_i - x_j|| <= d_1, ||x_j|| <= max_norm: D <= alpha_i d_1 + (abar_N - alpha_i) max_norm",
           sp.Le(D, a_i * d_1 + (abar_N - a_i) * max_norm),
           (sp.Le(D, a_i * n1 + (a_j - a_i) * n2 + n3), sp.Le(n1, d_1), sp.Le(n2, max_norm),
            sp.Le(n3, (abar_N - a_j) * max_norm), sp.Ge(a_i, 0), sp.Ge(a_j, a_i))),
        Cite("termwise", "summing over the L - N excluded tokens, whose weights sum to 1 - abar_N: dtilde_R1 <= g1",
             (Identity("sum_out [alpha_i d_1 + (abar_N - alpha_i) max_norm] = g1",
                       (1 - abar_N) * d_1 + (L - N) * abar_N * max_norm - (1 - abar_N) * max_norm, G1),),
             uses=(SIMPLEX,), given=(sp.Le(D, a_i * d_1 + (abar_N - a_i) * max_norm),), result=sp.Le(dtilde, G1)),
        Conclude(sp.Le(dtilde, G1), {"dtilde": "dtilde_R1", **FIXED_BINDINGS}, text="dtilde_R1 <= g1"),
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
        Cite("maximum", "abar_N > 0: the selected set holds the largest weight, and the largest of weights summing to "
             "1 is > 0", uses=(SIMPLEX, TOP_N), result=sp.Gt(abar_N, 0)),
        Identity("W = sum_out alpha_i x_i, s = abar_N y: W - s = sum_out alpha_i (x_i - y) + (1 - 2 abar_N) y, "
                 "since sum_out alpha_i (x_i - y) = W - (1 - abar_N) y",
                 W - abar_N * y, (W - (1 - abar_N) * y) + (1 - 2 * abar_N) * y, vectors=(W, y), uses=(SIMPLEX,)),
        Cite("triangle", "w = sum_out alpha_i ||x_i - y|| <= (1 - abar_N) d_1 and n_y = ||y|| <= max_norm: y is a convex "
             "combination of the selected x_j (abar_N > 0), so ||x_i - y|| <= max_j ||x_i - x_j|| <= d_1, ||y|| <= "
             "max_j ||x_j||", uses=(SIMPLEX, TOP_N), given=(sp.Gt(abar_N, 0),),
             result=sp.And(sp.Le(w, (1 - abar_N) * d_1), sp.Le(ny, max_norm))),
        Cite("triangle", "dtilde_R2 = ||sum_out alpha_i (x_i - y) + (1 - 2 abar_N) y|| <= w + |1 - 2 abar_N| n_y",
             uses=(SIMPLEX,), result=sp.Le(dtilde, w + sp.Abs(1 - 2 * abar_N) * ny)),
        Conclude(sp.Le(dtilde, R2_BOUND), {"dtilde": "dtilde_R2", **FIXED_BINDINGS},
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
