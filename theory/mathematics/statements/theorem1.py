"""Theorem 1: the distance dtilde between the context vector and the non-selected tokens."""

import sympy as sp

from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import E_dtilde, J, L, N, abar_N, d_1, dtilde, eps_bound, max_norm

DTILDE = {"R1": "dtilde_R1", "R2": "dtilde_R2"}
GROUPING = {
    "g1": (1 - abar_N) * d_1 + max_norm * (abar_N * (L - N) - (1 - abar_N)),
    "g2": (1 - abar_N) * d_1 + max_norm * abar_N * (L - N) - (1 - abar_N),
}
#: strongest forms we derive (proofs/): R1 is bounded by g1 itself; R2 by a one-line bound.
CORRECTED = {
    "R1": GROUPING["g1"],
    "R2": (1 - abar_N) * d_1 + sp.Abs(1 - 2 * abar_N) * max_norm,
}
FIXED_HYPOTHESES = (hyp.SIMPLEX, hyp.TOP_N)
FIXED_BINDINGS = {"abar_N": "abar_N", "d_1": "d_1", "max_norm": "max_norm"}


def _fixed(reading: str, grouping: str) -> Statement:
    return Statement(
        f"theorem1.fixed[{reading},{grouping}]",
        f"Distance bound for a fixed top-N set, dtilde read as {reading}, printed bound grouped as {grouping}",
        sp.Le(dtilde, GROUPING[grouping]),
        Citation("Theorem 1 (fixed top-N set)"),
        FIXED_HYPOTHESES,
        bindings={"dtilde": DTILDE[reading], **FIXED_BINDINGS},
    )


def _fixed_corrected(reading: str, grouping: str) -> Statement:
    return Statement(
        f"theorem1.fixed[{reading},{grouping},corrected]",
        f"Strongest proved form of Theorem 1 (fixed top-N) for dtilde read as {reading}",
        sp.Le(dtilde, CORRECTED[reading]),
        Citation("Theorem 1 (fixed top-N set), corrected by attnbounds"),
        FIXED_HYPOTHESES,
        bindings={"dtilde": DTILDE[reading], **FIXED_BINDINGS},
        notes="R1: ||alpha_i x_i - s|| <= alpha_i d_1 + (abar_N - alpha_i) max_norm (top-N), summed. "
              "R2: sum_out alpha_i (x_i - y) + (1 - 2 abar_N) y with y = s / abar_N.",
    )


COEFFICIENTS = ("scaled", "printed")
XBARS = ("weighted", "mean")
RANDOM_NOTE = (
    "coefficient 'scaled' = alpha_i (1 + N/(L-1)), 'printed' = alpha_i + N/(L-1); xbar 'weighted' = "
    "N/(L-1) sum_j alpha_j x_j (the conditional mean of s), 'mean' = (1/L) sum_j x_j. The statement is "
    "the paper's claim eps >= 0 (Jensen gap): E[dtilde] >= (L-N)/L sum_i ||c_i x_i - xbar||."
)


def _random(reading: str, coefficient: str, xbar: str) -> Statement:
    return Statement(
        f"theorem1.random[{reading},{coefficient},{xbar}]",
        f"Random N-subset: E[dtilde] = (L-N)/L sum_i ||c_i x_i - xbar|| + eps with eps >= 0 "
        f"(dtilde {reading}, coefficient {coefficient}, xbar {xbar})",
        sp.Le(J, E_dtilde),
        Citation("Theorem 1 (random N-subset)"),
        (hyp.SIMPLEX, hyp.L_AT_LEAST_2),
        bindings={"J": f"J_{coefficient}_{xbar}", "E_dtilde": f"E_{DTILDE[reading]}"},
        kind="expectation",
        expectation_over="I_N uniform among the N-subsets of {1..L}, weights and x fixed",
        notes=RANDOM_NOTE,
    )


GAP = Statement(
    "theorem1.random[R1,scaled,weighted,gap-bound]",
    "Bound on the Jensen gap: eps <= (L-N)/L sum_i sqrt(N (L-1-N)/(L-2) Var_{j != i}(alpha_j x_j))",
    sp.Le(E_dtilde, J + eps_bound),
    Citation("Theorem 1 (random N-subset), bound on eps by attnbounds"),
    (hyp.SIMPLEX, hyp.L_AT_LEAST_2),
    bindings={"J": "J_scaled_weighted", "E_dtilde": "E_dtilde_R1", "eps_bound": "jensen_gap_bound"},
    kind="expectation",
    expectation_over="I_N uniform among the N-subsets of {1..L}, weights and x fixed",
    notes="E||Z|| - ||E Z|| <= sqrt(E||Z - E Z||^2), with the variance of a without-replacement sample sum.",
)

STATEMENTS = (
    *(_fixed(r, g) for r in DTILDE for g in GROUPING),
    *(_fixed_corrected(r, g) for r, g in (("R1", "g2"), ("R2", "g1"), ("R2", "g2"))),
    *(_random(r, c, x) for r in DTILDE for c in COEFFICIENTS for x in XBARS),
    GAP,
)
