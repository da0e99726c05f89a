"""Lemma 1 (vanishing attention) and Corollary 1 (softmax)."""

import sympy as sp

from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements._symbols import C_1, C_2, Delta, L, T, alpha_i

LEMMA1 = Statement(
    "lemma1",
    "Vanishing attention: C1/L <= alpha_i <= C2/L with C1 = min F / max F, C2 = max F / min F on [-a, a]",
    sp.And(sp.Le(C_1 / L, alpha_i), sp.Le(alpha_i, C_2 / L)),
    Citation("Lemma 1"),
    (hyp.F_POSITIVE, hyp.F_LENGTH_INDEPENDENT, hyp.LOGITS_BOUNDED),
    bindings={"alpha_i": "alpha_i", "C_1": "C_1", "C_2": "C_2"},
    defaults={"a": "logit_absmax"},
    notes="The constants are made explicit from the proof (extrema of F on the compact [-a, a]).",
)


def _corollary1(reading: str, quantity: str, what: str) -> Statement:
    return Statement(
        f"corollary1[delta={reading}]",
        f"Softmax weights: exp(-2 Delta / T) / L <= alpha_i <= exp(2 Delta / T) / L, Delta = {what}",
        sp.And(sp.Le(sp.exp(-2 * Delta / T) / L, alpha_i), sp.Le(alpha_i, sp.exp(2 * Delta / T) / L)),
        Citation("Corollary 1"),
        (hyp.SOFTMAX, hyp.LOGITS_QK),
        bindings={"alpha_i": "alpha_i", "Delta": quantity},
        notes="Open reading: which key k enters Delta = ||q|| ||k||.",
    )


STATEMENTS = (
    LEMMA1,
    _corollary1("own-key", "Delta_own", "||q||_2 ||k_i||_2 (the i-th key)"),
    _corollary1("max-key", "Delta_max", "||q||_2 max_j ||k_j||_2 (the largest key)"),
)
