"""Corrected statements: the strongest forms proved in ``proofs/`` of readings the paper prints differently.

Each id is the printed reading's id with ``,corrected`` appended inside the brackets; a reading
that needs a hypothesis the paper does not state must carry it explicitly in its id and hypotheses.
The derivations, and the instances showing each bound cannot be improved, are in ``proofs/``.
Registering a corrected form claims nothing about the printed one, whose verdict comes from the search.
"""

from typing import Any

import sympy as sp

from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import (Delta, E_dtilde, E_Ns, L, M, N, T, alpha_i, delta, i, m, r, xi)
from attnbounds.theory.mathematics.statements.theorem1 import COEFFICIENTS, XBARS
from attnbounds.theory.mathematics.statements.theorem2 import OVER as THEOREM2_OVER

Delta_max = sp.Symbol("Delta_max", nonnegative=True)
C = sp.IndexedBase("C")
J_sw = sp.Symbol("J", nonnegative=True)


def _corrected(printed: str, title: str, relation: sp.Basic, citation: str, hypotheses: tuple,
               bindings: dict, notes: str, **kwargs: Any) -> Statement:
    result, reading = printed.split("[", 1)
    return Statement(f"{result}[{reading[:-1]},corrected]", title, relation,
                     Citation(f"{citation}, corrected by attnbounds"), hypotheses, bindings=bindings,
                     notes=notes, **kwargs)


# -- Corollary 1, the i-th key ---------------------------------------------------------------------
_c1 = (Delta + Delta_max) / T
COROLLARY1_OWN = _corrected(
    "corollary1[delta=own-key]",
    "Softmax weights with the i-th key: exp(-(Delta_i + Delta_max)/T)/L <= alpha_i <= exp((Delta_i + Delta_max)/T)/L",
    sp.And(sp.Le(sp.exp(-_c1) / L, alpha_i), sp.Le(alpha_i, sp.exp(_c1) / L)),
    "Corollary 1", (hyp.SOFTMAX, hyp.LOGITS_QK), {"alpha_i": "alpha_i", "Delta": "Delta_own", "Delta_max": "Delta_max"},
    "|l_j - l_i| <= ||q|| ||k_j|| + ||q|| ||k_i|| <= Delta_max + Delta_i; the exponent is sharp as L -> infinity "
    "(k_i antiparallel to q, every other key parallel with the largest norm).")

# -- Theorem 1, random subset ------------------------------------------------------------------------
_RANDOM = dict(kind="expectation", expectation_over="I_N uniform among the N-subsets of {1..L}, weights and x fixed")
THEOREM1_RANDOM = tuple(
    _corrected(
        f"theorem1.random[R1,{c},{x}]",
        "Random N-subset, dtilde R1: E[dtilde] >= (L-N)/L sum_i ||alpha_i (1 + N/(L-1)) x_i - N/(L-1) sum_j alpha_j x_j|| "
        "(Jensen with the conditional mean of s)",
        sp.Le(J_sw, E_dtilde), "Theorem 1 (random N-subset)", (hyp.SIMPLEX, hyp.L_AT_LEAST_2),
        {"J": "J_scaled_weighted", "E_dtilde": "E_dtilde_R1"},
        "E[s | i not in S] = N/(L-1) (m - alpha_i x_i): the Jensen term has the scaled coefficient and the weighted xbar "
        "whatever the printed reading; equality when N = L - 1.", **_RANDOM)
    for c in COEFFICIENTS for x in XBARS if (c, x) != ("scaled", "weighted")
) + tuple(
    _corrected(
        f"theorem1.random[R2,{c},{x}]",
        "Random N-subset, dtilde R2: E[dtilde] >= |1 - 2N/L| ||sum_i alpha_i x_i|| (Jensen, E[s] = (N/L) m)",
        sp.Le(sp.Abs(1 - 2 * N / L) * m, E_dtilde), "Theorem 1 (random N-subset)", (hyp.SIMPLEX, hyp.L_AT_LEAST_2),
        {"m": "m_norm", "E_dtilde": "E_dtilde_R2"},
        "dtilde_R2 = ||m - 2 s||; equality when every alpha_j x_j is the same vector.", **_RANDOM)
    for c in COEFFICIENTS for x in XBARS
)

# -- Theorem 2, upper bounds -----------------------------------------------------------------------
#: per selected token, the bound on P(||s - alpha_i x_i|| <= r): Markov for xi_i^2 - ||s - alpha_i x_i||^2 >= 0
TAIL = sp.Piecewise((sp.Min(1, C[i] * (M**2 * L / (L - 1) - delta**2 / 2) / (xi[i] ** 2 - r**2)), r < xi[i]),
                    (1, True))
THEOREM2_UPPER = tuple(
    _corrected(
        f"theorem2.upper[{count}]",
        f"Geometric separability, upper bound on E[N_s]/N ({count} count): P(||s - alpha_i x_i|| <= r) <= "
        "C_i (M^2 L/(L-1) - delta^2/2) / (xi_i^2 - r^2) when r < xi_i, else 1",
        sp.Le(E_Ns, sp.Sum(TAIL, (i, 1, N)) / N), "Theorem 2 (upper bound)",
        (hyp.SIMPLEX, hyp.TOP_N, hyp.SPHERE_FEASIBLE, hyp.L_AT_LEAST_2),
        {"E_Ns": f"E_Ns_{count}", "xi": "xi", "C": "C_other"},
        "Markov's inequality for the non-negative xi_i^2 - ||s - alpha_i x_i||^2, whose mean is at most "
        "C_i (M^2 L/(L-1) - delta^2/2): the embeddings are exchangeable, so E<x_j, x_k> >= -M^2/(L-1). "
        "The printed Hoeffding form cannot hold for r >= xi_i, where ||s - alpha_i x_i|| <= xi_i <= r surely. "
        "Equality when N = 2 and r < xi_i (both sides 0). Parameters: M, delta, r (and dim, mc_draws, seed).",
        kind="expectation", expectation_over=THEOREM2_OVER)
    for count in ("relaxed", "full")
)

STATEMENTS = (COROLLARY1_OWN, *THEOREM1_RANDOM, *THEOREM2_UPPER)
