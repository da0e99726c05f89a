"""Corollary 2: the random-subset distance as N is fixed and L grows (i), and as N -> L (ii).

Everything follows from the triangle inequality (both directions) and the inclusion
probabilities of the uniform N-subset: E||s|| <= sum_j P(j in S) ||alpha_j x_j|| = (N/L) A.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Assume, Cite, Conclude, Derivation, Identity, Witness, Z3, reals
from attnbounds.proofs.subsets import P_EXCLUDED, P_GIVEN_EXCLUDED, P_INCLUDED, jensen
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax

A, E_dtilde, L, N, m = reals("A E_dtilde L N m")
e1, es, ed, SE, SG, E_i, A_i, G_i = reals("e_1 e_s e_d SE SG E_i A_i G_i")
s, Wv = reals("s W")  # vectors (used linearly)
BINDINGS = {"A": "A_norm", "m": "m_norm"}
SIZES = (Assume("L >= 2 tokens", sp.Ge(L, 2), hyp.L_AT_LEAST_2.id),
         Assume("at most L selected tokens", sp.Le(N, L), hyp.domain_id("N")))


def _equal_x(L_: int, N_: int, logits: np.ndarray | None = None) -> Instance:
    """Every x_i the same vector (uniform weights unless logits are given)."""
    lg = np.zeros((1, L_)) if logits is None else logits
    return Instance.from_logits(lg, softmax(), x=np.full((*lg.shape, 2), [0.6, -1.1]), N=N_)


R1_I = Derivation(
    "corollary2.i.R1.reverse-triangle",
    ("corollary2.i[R1,corrected]",),
    "| ||alpha_i x_i - s|| - ||alpha_i x_i|| | <= ||s|| for every excluded i, averaged over S",
    (
        *SIZES,
        Cite("conditioning", "E[dtilde_R1] = sum_i P(i not in S) E_i = (L-N)/L SE with E_i = E[||alpha_i x_i - s|| | i not "
             "in S], SE = sum_i E_i", (P_EXCLUDED,), result=sp.Eq(E_dtilde, (L - N) / L * SE)),
        Cite("reverse-triangle", "| ||alpha_i x_i - s|| - ||alpha_i x_i|| | <= ||s|| for every draw with i not in S"),
        jensen("|E_i - A_i| <= E[| ||alpha_i x_i - s|| - A_i | | i not in S] <= G_i = E[||s|| | i not in S] (|.| is the "
               "norm on R), A_i = alpha_i ||x_i||", result=sp.And(sp.Le(E_i - A_i, G_i), sp.Le(A_i - E_i, G_i))),
        Cite("triangle", "G_i = E[||s|| | i not in S] <= sum_{j != i} P(j in S | i not in S) alpha_j ||x_j|| = "
             "N/(L-1) (A - A_i)", (P_GIVEN_EXCLUDED,), uses=(hyp.L_AT_LEAST_2.id,), result=sp.Le(G_i, N / (L - 1) * (A - A_i))),
        Cite("termwise", "summing over the L tokens, with sum_i A_i = A: |SE - A| <= SG = sum_i G_i and "
             "SG <= N/(L-1) (L A - A)",
             given=(sp.Le(E_i - A_i, G_i), sp.Le(A_i - E_i, G_i), sp.Le(G_i, N / (L - 1) * (A - A_i))),
             result=sp.And(sp.Le(SE - A, SG), sp.Le(A - SE, SG), sp.Le(SG, N / (L - 1) * (L * A - A)))),
        Identity("(L-N)/L N/(L-1) (L A - A) = N (L-N)/L A",
                 (L - N) / L * N / (L - 1) * (L * A - A), N * (L - N) / L * A),
        Conclude(sp.And(sp.Le(E_dtilde - (L - N) / L * A, N * (L - N) / L * A),
                        sp.Le((L - N) / L * A - E_dtilde, N * (L - N) / L * A)),
                 {"E_dtilde": "E_dtilde_R1", **BINDINGS}, text="|E[dtilde_R1] - (L-N)/L A| <= N (L-N)/L A"),
    ),
    Witness("N = 1, every x_i equal, uniform weights: E[dtilde_R1] = 0 and the error is (L-1)/L A",
            lambda: [_equal_x(L_, 1) for L_ in (3, 8)]),
)


def _r2(reading: str) -> Derivation:
    """(i): R2 = ||m - 2 s||, E||s|| <= (N/L) A. (ii): R2 = ||2 s_out - m||, E||s_out|| <= (L-N)/L A."""
    part, prob, fact, bound = {
        "i": ("s", N / L, P_INCLUDED, 2 * N / L),
        "ii": ("s_out", (L - N) / L, P_EXCLUDED, 2 * (L - N) / L),
    }[reading]
    return Derivation(
        f"corollary2.{reading}.R2.reverse-triangle",
        (f"corollary2.{reading}[R2,corrected]",),
        f"dtilde_R2 = ||m - 2 {part}||-type identity, reverse triangle, E||{part}|| <= P A",
        (
            Identity("W = s_out = sum_out alpha_i x_i, m = s + W: W - s = m - 2 s and W - s = 2 W - m",
                     sp.Matrix([Wv - s, Wv - s]), sp.Matrix([(s + Wv) - 2 * s, 2 * Wv - (s + Wv)]), vectors=(Wv, s)),
            Cite("reverse-triangle", f"| dtilde_R2 - ||m|| | <= 2 ||{part}|| for every draw; taking expectations, "
                 f"e_d = E| dtilde_R2 - ||m|| | <= 2 e_s, e_s = E||{part}||", result=sp.Le(ed, 2 * es)),
            jensen("|E[dtilde_R2] - ||m||| <= E| dtilde_R2 - ||m|| | = e_d (Jensen for |.|)",
                   result=sp.Le(sp.Abs(E_dtilde - m), ed)),
            Cite("triangle", f"e_s = E||{part}|| <= sum_j P(j in {part}) alpha_j ||x_j|| = ({prob}) A", (fact,),
                 result=sp.Le(es, prob * A)),
            Conclude(sp.And(sp.Le(E_dtilde - m, bound * A), sp.Le(m - E_dtilde, bound * A)),
                     {"E_dtilde": "E_dtilde_R2", **BINDINGS}, text=f"|E[dtilde_R2] - ||m||| <= {bound} A"),
        ),
        Witness(f"every x_i equal, uniform weights, N = {'1' if reading == 'i' else 'L - 1'}: the error equals the bound",
                lambda: [_equal_x(L_, 1 if reading == "i" else L_ - 1) for L_ in (3, 8)]),
    )


def _antipodal() -> list[Instance]:
    """L = 2, N = 1, x_2 = -x_1: every excluded token is antiparallel to s."""
    logits = np.array([[0.0, 0.0], [0.3, -1.0], [2.0, 0.5]])
    x = np.broadcast_to(np.array([[1.0, 2.0], [-1.0, -2.0]]), (3, 2, 2)).copy()
    return [Instance.from_logits(logits, softmax(), x=x, N=1)]


R1_II = Derivation(
    "corollary2.ii.R1.triangle",
    ("corollary2.ii[R1]",),
    "||alpha_i x_i - s|| <= alpha_i ||x_i|| + ||s||, summed over the L - N excluded tokens, averaged over S",
    (
        SIZES[1],
        Cite("triangle", "||alpha_i x_i - s|| <= alpha_i ||x_i|| + ||s||; summing over the L - N excluded tokens and "
             "taking expectations: E[dtilde_R1] <= e_1 + (L - N) e_s, e_1 = E[sum_{i not in S} alpha_i ||x_i||], "
             "e_s = E||s||", result=sp.Le(E_dtilde, e1 + (L - N) * es)),
        Cite("linearity-of-expectation", "e_1 = E[sum_{i not in S} alpha_i ||x_i||] = (L-N)/L A", (P_EXCLUDED,),
             result=sp.Eq(e1, (L - N) / L * A)),
        Cite("triangle", "e_s = E||s|| <= sum_j P(j in S) alpha_j ||x_j|| = (N/L) A", (P_INCLUDED,),
             result=sp.Le(es, N / L * A)),
        Z3("(L-N)/L A + (L-N) e_s <= (L-N)(N+1)/L A", sp.Le(E_dtilde, (L - N) * (N + 1) / L * A),
           (sp.Le(E_dtilde, e1 + (L - N) * es), sp.Eq(e1, (L - N) / L * A), sp.Le(es, N / L * A), sp.Le(N, L))),
        Conclude(sp.Le(E_dtilde, (L - N) * (N + 1) / L * A), {"E_dtilde": "E_dtilde_R1", **BINDINGS},
                 text="E[dtilde_R1] <= (L-N)(N+1)/L A"),
    ),
    Witness("L = 2, N = 1, x_2 = -x_1: both triangle steps are equalities", _antipodal),
)

DERIVATIONS = (R1_I, _r2("i"), _r2("ii"), R1_II)

NOT_PROVED = {
    "corollary2.i[R1]": ("the proved two-sided error N (L-N)/L A is attained (N = 1, equal x, uniform weights give "
                         "E[dtilde_R1] = 0 for every L): the relative error to A does not decay like N/L",
                         "corollary2.i[R1,corrected]"),
    "corollary2.i[R2]": ("dtilde_R2 = ||m - 2 s|| tracks ||m||, not A = sum_i ||alpha_i x_i||",
                         "corollary2.i[R2,corrected]"),
    "corollary2.ii[R2]": ("at N = L, dtilde_R2 = ||m|| while the bound is 0", "corollary2.ii[R2,corrected]"),
}
