"""Theorem 1 for a uniform random N-subset S (weights fixed): Jensen's inequality and its gap.

R1: E[dtilde] = sum_i P(i not in S) E[||alpha_i x_i - s|| | i not in S] with P = (L-N)/L and
E[s | i not in S] = N/(L-1) (m - alpha_i x_i), m = sum_j alpha_j x_j; Jensen gives the "scaled"
coefficient alpha_i (1 + N/(L-1)) and the "weighted" xbar = N/(L-1) m. The gap is at most the
conditional standard deviation of s (triangle, then Jensen for the concave square root), which is
that of a without-replacement sample sum. R2: dtilde = ||m - 2 s|| and E[s] = (N/L) m.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Cite, Conclude, Derivation, Identity, Sign, Witness, Z3, reals
from attnbounds.proofs.subsets import (P_EXCLUDED, P_GIVEN_EXCLUDED, P_INCLUDED, P_PAIR, P_SAMPLED, Ni, jensen, n)
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.statements.theorem1 import COEFFICIENTS, XBARS

L, N, E_dtilde, J, eps_bound, m = reals("L N E_dtilde J eps_bound m")
a_i, rho, P, SE, SJ, SV, E_i, J_i, D_i, W_i, Y1, Y2, nE = reals("alpha_i rho P SE SJ SV E_i J_i D_i W_i Y_1 Y_2 n_E")
x_i, R, mv, s, Wv = reals("x_i R m_vec s W")  # vectors (used linearly)
tt = sp.Symbol("t", positive=True)
p_in = Ni / n
q_in = Ni * (Ni - 1) / (n * (n - 1))
#: N (n - N)/(n - 1) sigma^2 with n = L - 1 tokens j != i and sigma^2 = Y1/n - Y2/n^2 their population variance
GAP_TERM = N * (L - 1 - N) / (L - 2) * (Y1 / (L - 1) - Y2 / (L - 1) ** 2)

CONDITIONAL_MEAN = (
    Cite("counting", "P = P(i not in S) = C(L-1, N) / C(L, N) = (L-N)/L, a probability", (P_EXCLUDED,),
         result=sp.And(sp.Eq(P, (L - N) / L), sp.Ge(P, 0))),
    Cite("conditioning", "dtilde_R1 = sum_i 1{i not in S} ||alpha_i x_i - s||, so E[dtilde_R1] = sum_i P E_i = P SE with "
         "E_i = E[||alpha_i x_i - s|| | i not in S], SE = sum_i E_i", result=sp.Eq(E_dtilde, P * SE)),
    Cite("linearity-of-expectation", "given i not in S, S is a uniform N-subset of the other L-1 tokens: "
         "E[s | i not in S] = sum_{j != i} P(j in S | i not in S) alpha_j x_j = N/(L-1) sum_{j != i} alpha_j x_j",
         (P_GIVEN_EXCLUDED,), uses=(hyp.L_AT_LEAST_2.id,)),
    Identity("with R = sum_{j != i} alpha_j x_j and m = alpha_i x_i + R: rho R = rho (m - alpha_i x_i), rho = N/(L-1)",
             rho * R, rho * ((a_i * x_i + R) - a_i * x_i), vectors=(x_i, R)),
    Identity("E[alpha_i x_i - s | i not in S] = alpha_i x_i - rho (m - alpha_i x_i) = alpha_i (1 + rho) x_i - rho m: "
             "the 'scaled' coefficient and the 'weighted' xbar = rho m",
             a_i * x_i - rho * (mv - a_i * x_i), a_i * (1 + rho) * x_i - rho * mv, vectors=(x_i, mv)),
    Cite("case-split", "N = L: no token is excluded, both sides are 0 (the factor (L-N)/L vanishes); otherwise the "
         "conditional expectations are over a non-empty event",
         (Identity("(L-N)/L at N = L", ((L - N) / L).subs(N, L), 0),)),
)
#: the conditional-mean norm ||E[alpha_i x_i - s | i not in S]|| = ||alpha_i (1 + rho) x_i - rho m|| summed: J = P SJ
J_DEFINITION = {J: P * SJ}


def _instances(L_: int, N_: int, x_fn: Callable[..., np.ndarray], seed: int, B: int = 3) -> list[Instance]:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(B, L_)) * 1.5
    alpha = softmax().weights(logits)
    return [Instance.from_logits(logits, softmax(), x=x_fn(rng, alpha), N=N_)]


def _free_x(rng: np.random.Generator, alpha: np.ndarray) -> np.ndarray:
    return rng.normal(size=(*alpha.shape, 3))


R1_JENSEN = Derivation(
    "theorem1.random.R1.jensen",
    ("theorem1.random[R1,scaled,weighted]",
     *(f"theorem1.random[R1,{c},{x},corrected]" for c in COEFFICIENTS for x in XBARS if (c, x) != ("scaled", "weighted"))),
    "condition on i not in S, then Jensen's inequality for the norm",
    (
        *CONDITIONAL_MEAN,
        jensen("E_i = E[||alpha_i x_i - s|| | i not in S] >= ||E[alpha_i x_i - s | i not in S]|| = "
               "||c_i x_i - xbar|| = J_i", result=sp.Ge(E_i, J_i)),
        Cite("termwise", "summing over the L tokens: SE >= SJ = sum_i J_i", given=(sp.Ge(E_i, J_i),),
             result=sp.Ge(SE, SJ)),
        Conclude(sp.Le(P * SJ, E_dtilde), {"J": "J_scaled_weighted", "E_dtilde": "E_dtilde_R1"},
                 definitions=J_DEFINITION,
                 text="J_scaled_weighted = (L-N)/L sum_i ||alpha_i (1 + N/(L-1)) x_i - N/(L-1) m|| = P SJ <= E[dtilde_R1]"),
    ),
    Witness("N = L - 1: given i not in S the subset is determined, Jensen is an equality",
            lambda: _instances(5, 4, _free_x, seed=2)),
)

GAP = Derivation(
    "theorem1.random.R1.jensen-gap",
    ("theorem1.random[R1,scaled,weighted,gap-bound]",),
    "E||Z|| <= ||E Z|| + sqrt(E||Z - E Z||^2), the variance of a without-replacement sample sum",
    (
        *CONDITIONAL_MEAN,
        Cite("triangle", "Z = alpha_i x_i - s given i not in S: ||Z|| <= ||E Z|| + ||Z - E Z||; taking expectations, "
             "E_i <= J_i + D_i with D_i = E||Z - E Z||", result=sp.Le(E_i, J_i + D_i)),
        Cite("jensen", "D_i = E||Z - E Z|| <= sqrt(E||Z - E Z||^2) = sqrt(W_i): the square root is concave",
             (Sign("d^2/dt^2 sqrt(t) <= 0 for t > 0", sp.diff(sp.sqrt(tt), tt, 2), "<=0"),),
             result=sp.And(sp.Ge(W_i, 0), sp.Le(D_i, sp.sqrt(W_i)))),
        Cite("bilinearity", "Z - E Z = -(s - E s): with y_j = alpha_j x_j, the n = L-1 indicators 1{j in S} (j != i) have "
             "Var = p(1-p), Cov = q - p^2 (p = N/n, q = N(N-1)/(n(n-1))), so W_i = E||s - E s||^2 = p(1-p) Y1 + "
             "(q - p^2)(Y2 - Y1), Y1 = sum ||y_j||^2, Y2 = ||sum y_j||^2 (sums over j != i)", (P_SAMPLED, P_PAIR),
             uses=(hyp.L_AT_LEAST_2.id,), result=sp.Eq(W_i, (p_in * (1 - p_in) * Y1 + (q_in - p_in**2) * (Y2 - Y1)).subs(
                 {Ni: N, n: L - 1}))),
        Identity("with p = N/n, q = N(N-1)/(n(n-1)), n = L - 1: p(1-p) Y1 + (q - p^2)(Y2 - Y1) = N (n-N)/(n-1) sigma^2, "
                 "sigma^2 = Y1/n - Y2/n^2 the population variance of {y_j : j != i}",
                 (p_in * (1 - p_in) * Y1 + (q_in - p_in**2) * (Y2 - Y1)).subs({Ni: N, n: L - 1}), GAP_TERM),
        Cite("case-split", "N >= L - 1 (in particular L = 2): given i not in S the subset is determined, the variance "
             "is 0, as the factor N (n - N) at N = n shows",
             (Identity("N (n - N) at N = n", (Ni * (n - Ni)).subs(Ni, n), 0),)),
        Z3("E_i <= J_i + D_i <= J_i + sqrt(W_i)", sp.Le(E_i, J_i + sp.sqrt(W_i)),
           (sp.Le(E_i, J_i + D_i), sp.Le(D_i, sp.sqrt(W_i)))),
        Cite("termwise", "summing over the L tokens, with W_i = N (L-1-N)/(L-2) sigma_i^2 (the two steps above): SE <= "
             "SJ + SV, SV = sum_i sqrt(N (L-1-N)/(L-2) sigma_i^2)",
             given=(sp.Le(E_i, J_i + sp.sqrt(W_i)), sp.Eq(W_i, GAP_TERM)), result=sp.Le(SE, SJ + SV)),
        Conclude(sp.Le(E_dtilde, P * SJ + P * SV),
                 {"J": "J_scaled_weighted", "E_dtilde": "E_dtilde_R1", "eps_bound": "jensen_gap_bound"},
                 definitions={**J_DEFINITION, eps_bound: P * SV},
                 text="E[dtilde_R1] <= J_scaled_weighted + jensen_gap_bound, jensen_gap_bound = (L-N)/L SV = P SV"),
    ),
    Witness("N = L - 1: the gap and its bound are both 0", lambda: _instances(6, 5, _free_x, seed=3)),
)


def _aligned_x(rng: np.random.Generator, alpha: np.ndarray) -> np.ndarray:
    """x_j = c / alpha_j: every alpha_j x_j equals c, so s = N c is deterministic."""
    c = rng.normal(size=(alpha.shape[0], 1, 3))
    return c / alpha[..., None]


R2_JENSEN = Derivation(
    "theorem1.random.R2.jensen",
    tuple(f"theorem1.random[R2,{c},{x},corrected]" for c in COEFFICIENTS for x in XBARS),
    "dtilde_R2 = ||m - 2 s||, E[s] = (N/L) m, Jensen's inequality",
    (
        Identity("W = sum_out alpha_i x_i, m = s + W: W - s = m - 2 s", Wv - s, (s + Wv) - 2 * s, vectors=(Wv, s)),
        Cite("linearity-of-expectation", "E[s] = sum_j P(j in S) alpha_j x_j = (N/L) m", (P_INCLUDED,)),
        jensen("E[dtilde_R2] = E||m - 2 s|| >= ||m - 2 E[s]|| = n_E", result=sp.Ge(E_dtilde, nE)),
        Identity("m - 2 (N/L) m = (1 - 2N/L) m", mv - 2 * (N / L) * mv, (1 - 2 * N / L) * mv, vectors=(mv,)),
        Cite("homogeneity", "n_E = ||(1 - 2N/L) m|| = |1 - 2N/L| ||m||", result=sp.Eq(nE, sp.Abs(1 - 2 * N / L) * m)),
        Conclude(sp.Le(sp.Abs(1 - 2 * N / L) * m, E_dtilde), {"m": "m_norm", "E_dtilde": "E_dtilde_R2"},
                 text="|1 - 2N/L| ||m|| <= E[dtilde_R2]"),
    ),
    Witness("x_j = c / alpha_j: every alpha_j x_j is the same vector, s is deterministic",
            lambda: _instances(6, 2, _aligned_x, seed=4) + _instances(5, 4, _aligned_x, seed=5)),
)

DERIVATIONS = (R1_JENSEN, GAP, R2_JENSEN)

NOT_PROVED = {
    **{f"theorem1.random[R1,{c},{x}]": ("Jensen's inequality gives the conditional mean E[s | i not in S] = N/(L-1) "
                                        "(m - alpha_i x_i): the scaled coefficient with the weighted xbar only",
                                        f"theorem1.random[R1,{c},{x},corrected]")
       for c in COEFFICIENTS for x in XBARS if (c, x) != ("scaled", "weighted")},
    **{f"theorem1.random[R2,{c},{x}]": ("dtilde_R2 is one norm ||m - 2 s||, not a sum over excluded tokens; Jensen "
                                        "gives |1 - 2N/L| ||m||", f"theorem1.random[R2,{c},{x},corrected]")
       for c in COEFFICIENTS for x in XBARS},
}
