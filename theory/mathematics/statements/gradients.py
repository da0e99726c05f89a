"""Lemma 2 (Jacobian of a general normaliser) and Corollary 3 (softmax)."""

import sympy as sp

from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import (F_l2, L, T, alpha_max, alpha_min, dF_l2, dF_max, eps, g_absmax, g_fd,
                                        jac)

# The Jacobian of eq. (3) is J = diag(F')/S - F F'^T / S^2 (S = sum F) = (diag(alpha) - alpha alpha^T) diag(g),
# g = (log F)'. In those terms max|F'|/S = max_j alpha_j |g_j|, ||F||/S = ||alpha||, ||F'||/S = ||alpha g||.
LEMMA2_BINDINGS = {"J_norm": "J_spectral", "dF_max": "dF_max", "F_l2": "F_l2", "dF_l2": "dF_l2",
                   "alpha_min": "alpha_min", "alpha_max": "alpha_max", "g_absmax": "g_absmax"}
LEMMA2 = {
    "two-term": (dF_max + F_l2 * dF_l2,
                 "||J||_2 <= max_j |F'(l_j)| / S + ||F||_2 ||F'||_2 / S^2 (triangle inequality on the two terms)"),
    "minF": (dF_max / (L * alpha_min) * (1 + alpha_max / alpha_min),
             "||J||_2 <= max|F'| / (L min F) (1 + max F / min F): both terms scale like 1 / min F, as the paper says"),
    "sharp": (sp.Min(alpha_max, sp.Rational(1, 2)) * g_absmax,
              "||J||_2 <= min(max_i alpha_i, 1/2) max_j |(log F)'(l_j)|, since 0 <= diag(alpha) - alpha alpha^T <= "
              "min(max alpha, 1/2) I"),
}

CLASSIC = sp.Min(1 / (4 * T), sp.sqrt(2))
COROLLARY3 = {
    "spectral": ("J_spectral", "spectral norm of d alpha / d l", sp.Le(jac, CLASSIC)),
    "frobenius": ("J_frobenius", "Frobenius norm of d alpha / d l", sp.Le(jac, CLASSIC)),
    "row": ("J_row", "largest ||grad_l alpha_i||_2", sp.Le(jac, CLASSIC)),
    "entry": ("J_entry", "largest Jacobian entry |d alpha_i / d l_j|", sp.Le(jac, CLASSIC)),
    "fd": ("g_fd", "finite difference g(T, eps) = ||alpha(l + eps v) - alpha(l)|| / eps", sp.Le(g_fd, CLASSIC)),
}
COROLLARY3_CORRECTED = {
    "spectral": sp.Le(jac, 1 / (2 * T)),
    "frobenius": sp.Le(jac, 1 / (2 * T)),
    "row": sp.Le(jac, sp.sqrt(2) / (4 * T)),
    "entry": sp.Le(jac, 1 / (4 * T)),
    "fd": sp.Le(g_fd, sp.Min(1 / (2 * T), sp.sqrt(2) / eps)),
}


def _corollary3(reading: str, relation: sp.Basic, corrected: bool) -> Statement:
    quantity, what, _ = COROLLARY3[reading]
    return Statement(
        f"corollary3[{reading}{',corrected' if corrected else ''}]",
        f"Softmax gradient bound on the {what}" + (" (strongest proved form)" if corrected else ""),
        relation,
        Citation("Corollary 3" + (", corrected by attnbounds" if corrected else "")),
        (hyp.SOFTMAX, hyp.UNIT_DIRECTION) if reading == "fd" else (hyp.SOFTMAX,),
        bindings={"J_norm": quantity, "g": quantity},
        notes="fd needs eps and a unit direction arrays={'v': ...}." if reading == "fd" else "",
    )


STATEMENTS = (
    *(Statement(f"lemma2[{name}]", title, sp.Le(jac, rhs), Citation("Lemma 2, two-term bound derived by attnbounds"),
                (hyp.F_POSITIVE,), bindings=LEMMA2_BINDINGS) for name, (rhs, title) in LEMMA2.items()),
    *(_corollary3(name, rel, False) for name, (_, _, rel) in COROLLARY3.items()),
    *(_corollary3(name, rel, True) for name, rel in COROLLARY3_CORRECTED.items()),
)
