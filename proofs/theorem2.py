"""Theorem 2 (geometric separability): bounds on E[N_s]/N over random sphere embeddings.

Z_i = s - alpha_i x_i = sum_{j in I_N, j != i} alpha_j x_j for a selected i; alpha_i x_i is in
the ball B_r(s) iff ||Z_i|| <= r. On the sphere of radius M, <x_j, x_k> = M^2 - ||x_j - x_k||^2/2,
so Assumption 2 gives ||Z_i||^2 <= M^2 Q_i + (M^2 - delta^2/2) C_i = xi_i^2 surely (P_i, Q_i the
sum and sum of squares of the other selected weights, C_i = P_i^2 - Q_i). Lower bound: Markov for
||Z_i||. Upper bound: Markov for the non-negative xi_i^2 - ||Z_i||^2, whose mean is small because
the embeddings are exchangeable: 0 <= E||sum_l x_l||^2 forces E<x_j, x_k> >= -M^2/(L-1).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Assume, Cite, Conclude, Derivation, Identity, Witness, Z3, reals, vector
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.statements._symbols import i, xi
from attnbounds.theory.mathematics.statements.corrections import C, TAIL

E_Ns, L, M, N, delta, r = reals("E_Ns L M N delta r")
Ps, Qs, Cs, X, Bsum, xis, pr, W, EW, Zn, EZ2, gamma, D2 = reals("P Q C X B xi_i p W E_W Z E_Z2 gamma D")
a1, a2, a3 = reals("a_1:4")
SPHERE, SIMPLEX = hyp.SPHERE_FEASIBLE.id, hyp.SIMPLEX.id
#: xi_i^2 (quantity xi): M^2 P_i^2 - (delta^2/2)(P_i^2 - Q_i), P_i, Q_i the sum and sum of squares of the other
#: selected weights, C_i = P_i^2 - Q_i
XI_SQUARED = M**2 * Ps**2 - delta**2 / 2 * (Ps**2 - Qs)

_xj, _xk = vector("x", 2), vector("y", 2)
POLARISATION = Identity("<x_j, x_k> = (||x_j||^2 + ||x_k||^2 - ||x_j - x_k||^2)/2 (two vectors span a plane, so R^2 "
                        "components are general)", _xj.dot(_xk),
                        (_xj.dot(_xj) + _xk.dot(_xk) - (_xj - _xk).dot(_xj - _xk)) / 2)
_vs = [vector(f"v{k}", 3) for k in range(3)]
_z = a1 * _vs[0] + a2 * _vs[1] + a3 * _vs[2]
EXPANSION = Cite(
    "bilinearity", "||Z_i||^2 = sum_j alpha_j^2 ||x_j||^2 + sum_{j != k} alpha_j alpha_k <x_j, x_k> (sums over I_N \\ {i}); "
    "sum_{j != k} alpha_j alpha_k = P_i^2 - Q_i = C_i",
    (Identity("||sum_j a_j v_j||^2 = sum_j a_j^2 ||v_j||^2 + sum_{j != k} a_j a_k <v_j, v_k>",
              _z.dot(_z), sum(aj**2 * v.dot(v) for aj, v in zip((a1, a2, a3), _vs))
              + sum(aj * ak * vj.dot(vk) for aj, vj in zip((a1, a2, a3), _vs)
                    for ak, vk in zip((a1, a2, a3), _vs) if vj is not vk), sizes="three vectors in R^3"),
     Identity("(sum a_j)^2 - sum a_j^2 = sum_{j != k} a_j a_k", (a1 + a2 + a3) ** 2 - (a1**2 + a2**2 + a3**2),
              2 * (a1 * a2 + a1 * a3 + a2 * a3), sizes="three weights")),
    result=sp.Eq(Cs, Ps**2 - Qs))


def _separability(logits: np.ndarray, N_: int, **params: float) -> list[Instance]:
    base: dict[str, Any] = dict(M=1.0, dim=3.0, mc_draws=64.0, seed=0.0)
    return [Instance.from_logits(logits, softmax(), N=N_, **{**base, **params})]


SURELY = (
    POLARISATION,
    EXPANSION,
    Cite("termwise", "C_i = sum_{j != k} alpha_j alpha_k >= 0: the selected weights are >= 0", uses=(SIMPLEX,),
         result=sp.Ge(Cs, 0)),
    Cite("termwise", "Assumptions 1-2: ||x_j|| = M and <x_j, x_k> = M^2 - ||x_j - x_k||^2/2 <= M^2 - delta^2/2 for "
         "j != k; the weights alpha_j alpha_k are >= 0: ||Z_i||^2 <= M^2 Q_i + (M^2 - delta^2/2) C_i",
         (Z3("a weight c >= 0 times M^2 - D/2 with D = ||x_j - x_k||^2 >= delta^2",
             sp.Le(Cs * (M**2 - D2 / 2), Cs * (M**2 - delta**2 / 2)), (sp.Ge(D2, delta**2), sp.Ge(Cs, 0))),),
         uses=(SPHERE, SIMPLEX), given=(sp.Ge(Cs, 0), sp.Eq(Cs, Ps**2 - Qs)),
         result=sp.Le(Zn**2, M**2 * Qs + (M**2 - delta**2 / 2) * Cs)),
    Identity("M^2 Q + (M^2 - delta^2/2)(P^2 - Q) = M^2 P^2 - delta^2/2 (P^2 - Q) = xi_i^2 (quantity xi)",
             M**2 * Qs + (M**2 - delta**2 / 2) * (Ps**2 - Qs), XI_SQUARED),
    Cite("norm-nonnegative", "||Z_i|| >= 0 and xi_i = sqrt(xi_i^2) >= 0 (quantity xi)",
         result=sp.And(sp.Ge(Zn, 0), sp.Ge(xis, 0), sp.Eq(xis**2, XI_SQUARED))),
    Z3("||Z_i||^2 <= xi_i^2 with both >= 0: ||Z_i|| <= xi_i surely", sp.Le(Zn, xis),
       (sp.Le(Zn**2, M**2 * Qs + (M**2 - delta**2 / 2) * Cs), sp.Eq(Cs, Ps**2 - Qs), sp.Ge(Zn, 0), sp.Ge(xis, 0),
        sp.Eq(xis**2, XI_SQUARED))),
)
R_POSITIVE = Assume("the radius is positive", sp.Gt(r, 0), hyp.domain_id("r"))

LOWER = Derivation(
    "theorem2.lower.relaxed.markov",
    ("theorem2.lower[relaxed]",),
    "||s - alpha_i x_i|| <= xi_i surely (Assumptions 1-2), then Markov's inequality",
    (
        R_POSITIVE,
        Assume("N >= 1 selected tokens", sp.Ge(N, 1), hyp.domain_id("N")),
        *SURELY,
        Cite("markov", "||Z_i|| >= 0 and r > 0: W = P(||Z_i|| > r) <= E||Z_i|| / r <= xi_i / r", uses=(SPHERE,),
             given=(sp.Gt(r, 0), sp.Ge(Zn, 0), sp.Le(Zn, xis)), result=sp.Le(W, xis / r)),
        Cite("complement", "p = P(alpha_i x_i in B_r(s)) = P(||Z_i|| <= r) = 1 - W", result=sp.Eq(pr, 1 - W)),
        Z3("p = 1 - W >= 1 - xi_i / r", sp.Ge(pr, 1 - xis / r), (sp.Eq(pr, 1 - W), sp.Le(W, xis / r))),
        Cite("linearity-of-expectation", "E[N_s]/N = (1/N) sum_{i in I_N} p_i >= (1/N) sum_i (1 - xi_i/r) = 1 - X/(r N), "
             "X = sum_i xi_i", (Identity("(1/N) sum_{i=1}^N (1 - xi_i/r) = 1 - X/(r N)", (N - X / r) / N, 1 - X / (r * N)),),
             given=(sp.Ge(pr, 1 - xis / r), sp.Ge(N, 1)), result=sp.Ge(E_Ns, 1 - X / (r * N))),
        Conclude(sp.Le(1 - X / (r * N), E_Ns), {"xi": "xi", "E_Ns": "E_Ns_relaxed"},
                 definitions={sp.Sum(xi[i], (i, 1, N)): X}, text="1 - sum_i xi_i / (r N) <= E[N_s]/N (relaxed count)"),
    ),
    Witness("N = 1: s = alpha_1 x_1, xi_1 = 0, every draw counts the token: both sides are 1",
            lambda: _separability(np.array([[1.0, 0.2, -0.5, 0.0]]), 1, delta=0.3, r=0.1)),
)

_tail = TAIL.xreplace({xi[i]: xis, C[i]: Cs})
_mean_bound = Cs * (M**2 * L / (L - 1) - delta**2 / 2)

UPPER = Derivation(
    "theorem2.upper.exchangeable.markov",
    ("theorem2.upper[relaxed,corrected]", "theorem2.upper[full,corrected]"),
    "W_i = xi_i^2 - ||Z_i||^2 >= 0 has mean <= C_i (M^2 L/(L-1) - delta^2/2) by exchangeability; Markov's inequality",
    (
        R_POSITIVE,
        Assume("L >= 2 tokens", sp.Ge(L, 2), hyp.L_AT_LEAST_2.id),
        Assume("N >= 1 selected tokens", sp.Ge(N, 1), hyp.domain_id("N")),
        *SURELY,
        Cite("exchangeability", "the Assumption 1-2 law (i.i.d. uniform points conditioned on a permutation-invariant "
             "event) is exchangeable: E<x_j, x_k> = gamma for every pair j != k", uses=(SPHERE,)),
        Cite("bilinearity", "0 <= E||sum_{l=1}^L x_l||^2 = L M^2 + L (L-1) gamma (||x_l|| = M)", uses=(SPHERE,),
             result=sp.Ge(L * M**2 + L * (L - 1) * gamma, 0)),
        Z3("L >= 2: gamma >= -M^2/(L-1)", sp.Ge(gamma, -M**2 / (L - 1)),
           (sp.Ge(L * M**2 + L * (L - 1) * gamma, 0), sp.Ge(L, 2))),
        Cite("bilinearity", "E||Z_i||^2 = M^2 Q_i + C_i gamma (the expansion above, in expectation)", uses=(SPHERE,),
             result=sp.Eq(EZ2, M**2 * Qs + Cs * gamma)),
        Cite("linearity-of-expectation", "E[W_i] = xi_i^2 - E||Z_i||^2 with W_i = xi_i^2 - ||Z_i||^2 >= 0 surely",
             result=sp.Eq(EW, xis**2 - EZ2)),
        Z3("E[W_i] <= xi_i^2 - M^2 Q_i + M^2 C_i/(L-1) = C_i (M^2 L/(L-1) - delta^2/2)", sp.Le(EW, _mean_bound),
           (sp.Eq(EW, xis**2 - EZ2), sp.Eq(EZ2, M**2 * Qs + Cs * gamma), sp.Ge(gamma, -M**2 / (L - 1)), sp.Ge(Cs, 0),
            sp.Eq(xis**2, XI_SQUARED), sp.Eq(Cs, Ps**2 - Qs), sp.Ge(L, 2))),
        Cite("markov", "W_i >= 0; for r < xi_i: P(||Z_i|| <= r) = P(W_i >= xi_i^2 - r^2) <= E[W_i] / (xi_i^2 - r^2) "
             "(r > 0, so ||Z_i|| <= r iff ||Z_i||^2 <= r^2)",
             (Z3("0 < r < xi makes the threshold xi^2 - r^2 > 0", sp.Gt(xis**2 - r**2, 0), (sp.Lt(r, xis), sp.Gt(r, 0))),),
             uses=(SPHERE,), given=(sp.Gt(r, 0),),
             result=sp.Implies(sp.Lt(r, xis), sp.Le(pr * (xis**2 - r**2), EW))),
        Cite("counting", "p = P(||Z_i|| <= r) is a probability: p <= 1", result=sp.Le(pr, 1)),
        Z3("a probability p <= 1 with p (xi^2 - r^2) <= E[W] <= C (M^2 L/(L-1) - delta^2/2) whenever r < xi is <= the "
           "per-token bound b_i", sp.Le(pr, _tail),
           (sp.Le(pr, 1), sp.Le(EW, _mean_bound), sp.Ge(L, 2), sp.Gt(r, 0),
            sp.Implies(sp.Lt(r, xis), sp.Le(pr * (xis**2 - r**2), EW)))),
        Cite("termwise", "N_s (full) <= N_s (relaxed) = sum_{i in I_N} 1{||Z_i|| <= r}; take expectations and sum "
             "the per-token bounds: E[N_s]/N <= (1/N) sum_i b_i = B/N", given=(sp.Le(pr, _tail), sp.Ge(N, 1)),
             result=sp.Le(E_Ns, Bsum / N)),
        Conclude(sp.Le(E_Ns, Bsum / N), {"E_Ns": ("E_Ns_relaxed", "E_Ns_full"), "xi": "xi", "C": "C_other"},
                 definitions={sp.Sum(TAIL, (i, 1, N)): Bsum}, text="E[N_s]/N <= (1/N) sum_i b_i"),
    ),
    Witness("N = 2, r < xi_i: ||Z_i|| = M alpha_other = xi_i > r surely; both sides are 0",
            lambda: _separability(np.log(np.array([[0.4, 0.3, 0.2, 0.1]])), 2, delta=0.3, r=0.2)),
)

DERIVATIONS = (LOWER, UPPER)

#: readings without a derivation: id -> (why, the proved corrected id or None = no corrected form: UNDECIDED)
NOT_PROVED = {
    "theorem2.lower[full]": (
        "Markov controls only the selected tokens; the full count also needs every non-selected alpha_j x_j outside "
        "B_r(s), and ||alpha_j x_j - s|| <= (alpha_j + abar_N) M puts them all inside for large r. No corrected form "
        "proved (UNDECIDED): it needs a lower bound on P(no non-selected alpha_j x_j in B_r(s)), i.e. anti-concentration "
        "of ||alpha_j x_j - s|| under the Assumption 1-2 law. Tried: (a) a deterministic bound: impossible, s can be 0 "
        "(antipodal selected embeddings); (b) a union bound with the exchangeability-Markov argument of the corrected "
        "upper bound applied to ||s|| <= r + M max_out alpha_j: the resulting lower bound is <= 0 except in degenerate "
        "cases (N = 1), so registering it would add nothing. Needs a dimension-dependent small-ball estimate for the "
        "spherical law.", None),
    "theorem2.upper[relaxed]": (
        "||s - alpha_i x_i|| <= xi_i surely, so for r >= xi_i the ball always contains alpha_i x_i while the printed "
        "bound exp(-(r - xi_i)^2/(C_H M^2)) is < 1", "theorem2.upper[relaxed,corrected]"),
    "theorem2.upper[full]": (
        "the full count is at most the relaxed one, and the same configurations apply (all non-selected tokens outside "
        "the ball)", "theorem2.upper[full,corrected]"),
}
