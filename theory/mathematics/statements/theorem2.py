"""Theorem 2 (geometric separability) under Assumptions 1-2.

xi_i is encoded from the proof: ||s - alpha_i x_i||^2 = sum_{j,k != i} alpha_j alpha_k <x_j, x_k> with
<x_j, x_k> = M^2 - ||x_j - x_k||^2 / 2 <= M^2 - delta^2 / 2, so
xi_i^2 = M^2 P_i^2 - (delta^2 / 2)(P_i^2 - Q_i), P_i, Q_i the sum and sum of squares of the other
selected weights. The Hoeffding constant C_H is a parameter (16 as printed).
"""

import sympy as sp

from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import C_H, E_Ns, M, N, i, r, xi

COUNT = {"full": "E_Ns_full", "relaxed": "E_Ns_relaxed"}
OVER = "x_1..x_L i.i.d. uniform on the sphere of radius M in R^dim conditioned on pairwise distance >= delta; weights fixed"
LOWER = sp.Le(1 - sp.Sum(xi[i], (i, 1, N)) / (r * N), E_Ns)
UPPER = sp.Le(E_Ns, sp.Sum(sp.exp(-((r - xi[i]) ** 2) / (C_H * M**2)), (i, 1, N)) / N)
COUNT_NOTE = {
    "full": "N_s as defined: alpha_i x_i in the closed ball B_r(s) and no non-selected alpha_j x_j in it.",
    "relaxed": "N_s counts the selected tokens with alpha_i x_i in B_r(s), ignoring the non-selected ones.",
}


def _make(side: str, count: str) -> Statement:
    return Statement(
        f"theorem2.{side}[{count}]",
        f"Geometric separability, {side} bound on E[N_s]/N ({count} count)",
        LOWER if side == "lower" else UPPER,
        Citation(f"Theorem 2 ({side} bound)"),
        (hyp.SIMPLEX, hyp.TOP_N, hyp.SPHERE_FEASIBLE),
        bindings={"E_Ns": COUNT[count], "xi": "xi"},
        defaults={"C_H": 16.0} if side == "upper" else {},
        kind="expectation",
        expectation_over=OVER,
        notes=COUNT_NOTE[count] + " Parameters: M, delta, r (and dim, mc_draws, seed for the expectation).",
    )


STATEMENTS = tuple(_make(side, count) for side in ("lower", "upper") for count in ("full", "relaxed"))
