"""Corollary 2: the random-subset distance as N is fixed and L grows (i), and as N -> L (ii).

The paper states approximations ("~", "-> 0"); each gets a quantitative reading:
(i) the relative error |E[dtilde] - A| / A vanishes like kappa N / L (A = sum_i ||alpha_i x_i||);
(ii) an explicit bound that reaches 0 at N = L. Corrected forms give the proved two-sided errors.
"""

import sympy as sp

from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import A, E_dtilde, L, N, kappa, m

HYPS = (hyp.SIMPLEX, hyp.L_AT_LEAST_2)
OVER = "I_N uniform among the N-subsets of {1..L}, weights and x fixed"


def _two_sided(center: sp.Expr, err: sp.Expr) -> sp.Basic:
    return sp.And(sp.Le(E_dtilde - center, err), sp.Le(center - E_dtilde, err))


def _make(ident: str, title: str, relation: sp.Basic, reading: str, citation: str, notes: str,
          defaults: dict | None = None) -> Statement:
    return Statement(ident, title, relation, Citation(citation), HYPS,
                     bindings={"E_dtilde": f"E_dtilde_{reading}", "A": "A_norm", "m": "m_norm"},
                     defaults=defaults or {}, kind="expectation", expectation_over=OVER, notes=notes)


STATEMENTS = tuple(
    s
    for reading in ("R1", "R2")
    for s in (
        _make(f"corollary2.i[{reading}]",
              "N fixed, L growing: E[dtilde] ~ sum_i ||alpha_i x_i||, read as relative error <= kappa N / L",
              _two_sided(A, kappa * N / L * A), reading, "Corollary 2 (i)",
              "kappa is a parameter (default 1); a family whose relative error does not decay in L refutes "
              "every kappa.", {"kappa": 1.0}),
        _make(f"corollary2.ii[{reading}]",
              "L fixed, N -> L: E[dtilde] -> 0, read as E[dtilde] <= (L-N)(N+1)/L sum_i ||alpha_i x_i||",
              sp.Le(E_dtilde, (L - N) * (N + 1) / L * A), reading, "Corollary 2 (ii)",
              "The triangle-inequality bound that vanishes at N = L."),
    )
) + (
    _make("corollary2.i[R1,corrected]", "|E[dtilde_R1] - (L-N)/L A| <= N (L-N)/L A (sharp at N = 1)",
          _two_sided((L - N) / L * A, N * (L - N) / L * A), "R1", "Corollary 2 (i), corrected by attnbounds",
          "|| ||alpha_i x_i - s|| - ||alpha_i x_i|| | <= ||s|| and E[||s|| | i not in S] <= N/(L-1) sum_{j!=i} alpha_j ||x_j||."),
    _make("corollary2.i[R2,corrected]", "|E[dtilde_R2] - ||sum_i alpha_i x_i||| <= 2 N / L A",
          _two_sided(m, 2 * N / L * A), "R2", "Corollary 2 (i), corrected by attnbounds",
          "dtilde_R2 = ||m - 2 s|| with m the attention output; E||s|| <= N/L A."),
    _make("corollary2.ii[R2,corrected]", "|E[dtilde_R2] - ||sum_i alpha_i x_i||| <= 2 (L-N)/L A (-> ||m||, not 0)",
          _two_sided(m, 2 * (L - N) / L * A), "R2", "Corollary 2 (ii), corrected by attnbounds",
          "dtilde_R2 = ||2 s_out - m|| with s_out the non-selected part; E||s_out|| <= (L-N)/L A."),
)
