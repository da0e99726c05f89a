"""Lemma 1 (vanishing attention) and Corollary 1 (softmax weights from |q.k| bounds).

Both follow from one fact: if every term of S = sum_j F_j lies in [lo, hi] with lo > 0, then
F_i / S lies in [lo / (L hi), hi / (L lo)]. For softmax it is applied to
alpha_i = 1 / sum_j exp((l_j - l_i) / T), each term in [1/u, u] once |l_j - l_i| <= T log u.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Assume, Cite, Conclude, Derivation, Identity, Sign, Witness, Z3, reals
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax

C_1, C_2, Delta, Delta_max, L, T, alpha_i = reals("C_1 C_2 Delta Delta_max L T alpha_i")
f, S, lo, hi, u, Fj, ej, c, D2 = reals("f S lo hi u F_j e_j c D_2")
l, l_i, l_j, j = reals("l l_i l_j j")
T_pos = sp.Symbol("T", positive=True)  # the sign check below reasons with sympy's assumption T > 0
L_TOKENS = Assume("an instance has L >= 1 tokens", sp.Ge(L, 1), hyp.domain_id("L"))


def _termwise_sum(what: str, t_lo: sp.Expr, t_hi: sp.Expr, term: sp.Symbol) -> Cite:
    """Summing ``t_lo <= term <= t_hi`` over the L tokens bounds their sum S."""
    return Cite("termwise", f"summing {t_lo} <= {what} <= {t_hi} over the L tokens: L*{t_lo} <= S <= L*{t_hi}",
                (Identity("a sum of L equal terms", sp.summation(t_lo, (j, 1, L)), L * t_lo),),
                given=(sp.Le(t_lo, term), sp.Le(term, t_hi)), result=sp.And(sp.Le(L * t_lo, S), sp.Le(S, L * t_hi)))


LEMMA1 = Derivation(
    "lemma1.extreme-values",
    ("lemma1",),
    "alpha_i = F(l_i) / sum_j F(l_j) with every F(l_j) in [min F, max F] on [-a, a]",
    (
        L_TOKENS,
        Assume("alpha = F / sum F: alpha_i = f / S with f = F(l_i), S = sum_j F(l_j)", sp.Eq(alpha_i, f / S),
               hyp.F_POSITIVE.id),
        Cite("extreme-value", "F is continuous and positive on the compact [-a, a], so lo = min F > 0 and hi = max F "
             "exist, and lo <= F(l_j) <= hi for every token (f = F(l_i) among them) since |l_j| <= a",
             uses=(hyp.F_POSITIVE.id, hyp.LOGITS_BOUNDED.id),
             result=sp.And(sp.Gt(lo, 0), sp.Le(lo, Fj), sp.Le(Fj, hi), sp.Le(lo, f), sp.Le(f, hi))),
        _termwise_sum("F(l_j)", lo, hi, Fj),
        Z3("f in [lo, hi] and S in [L lo, L hi] give lo/(L hi) <= f/S <= hi/(L lo)",
           sp.And(sp.Le(lo / (L * hi), f / S), sp.Le(f / S, hi / (L * lo))),
           (sp.Le(lo, f), sp.Le(f, hi), sp.Le(L * lo, S), sp.Le(S, L * hi), sp.Ge(L, 1), sp.Gt(lo, 0))),
        Conclude(sp.And(sp.Le(lo / (L * hi), alpha_i), sp.Le(alpha_i, hi / (L * lo))),
                 {"alpha_i": "alpha_i", "C_1": "C_1", "C_2": "C_2"},
                 definitions={C_1: lo / hi, C_2: hi / lo},
                 text="C_1 = min F / max F, C_2 = max F / min F on [-a, a]; constants free of L when F is"),
    ),
    Witness("equal logits l = 0 (a = 0, C_1 = C_2 = 1): alpha_i = 1/L exactly",
            lambda: [Instance.from_logits(np.zeros((1, 6)), softmax(T=t)) for t in (0.5, 1.0, 3.0)]),
)


def _corollary1_steps(bounds: str, spread: sp.Expr, logit_bounds: sp.Basic) -> tuple:
    """Steps shared by both key readings: |l_j - l_i| <= spread puts every e_j = exp((l_j - l_i)/T) in [1/u, u],
    u = exp(spread / T); then alpha_i = 1 / sum_j e_j."""
    gap = sp.And(sp.Le(l_j - l_i, spread), sp.Le(l_i - l_j, spread))
    return (
        L_TOKENS,
        Assume("the temperature is positive", sp.Gt(T, 0), hyp.domain_id("T")),
        Assume("softmax with temperature T (log F = l/T + c): alpha_i = F(l_i) / sum_j F(l_j) = 1 / S with "
               "S = sum_j e_j, e_j = F(l_j) / F(l_i)", sp.Eq(alpha_i, 1 / S), hyp.SOFTMAX.id),
        Identity("log F = l/T + c: e_j = F(l_j) / F(l_i) = exp((l_j - l_i)/T)",
                 sp.exp(l_j / T + c) / sp.exp(l_i / T + c), sp.exp((l_j - l_i) / T)),
        Cite("cauchy-schwarz", f"l_j = <q, k_j> for every token: |l_j| <= ||q|| ||k_j||; {bounds}", uses=(hyp.LOGITS_QK.id,),
             result=logit_bounds),
        Z3("the triangle inequality on the reals bounds the logit gaps", gap,
           tuple(a for a in logit_bounds.args)),
        Cite("monotone-function", "exp(x / T) is increasing for T > 0, so every e_j = exp((l_j - l_i)/T) lies in "
             f"[1/u, u], u = exp(({spread})/T) > 0",
             (Sign("d/dl exp(l/T) > 0 for T > 0", sp.diff(sp.exp(l / T_pos), l), ">0"),),
             given=(gap.args[0], gap.args[1], sp.Gt(T, 0)),
             result=sp.And(sp.Gt(u, 0), sp.Le(1 / u, ej), sp.Le(ej, u))),
        _termwise_sum("e_j", 1 / u, u, ej),
        Z3("S in [L/u, L u] gives 1/(L u) <= 1/S <= u/L",
           sp.And(sp.Le(1 / (L * u), 1 / S), sp.Le(1 / S, u / L)),
           (sp.Le(L / u, S), sp.Le(S, L * u), sp.Ge(L, 1), sp.Gt(u, 0))),
    )


def _witness_keys(own: bool) -> list[Instance]:
    """q = e_1; key 0 antiparallel to q with norm 1, the others parallel with norm 2 (L growing)."""
    out = []
    for L_ in (10, 100, 1000):
        k = np.zeros((1, L_, 2))
        k[0, 0, 0] = -1.0
        k[0, 1:, 0] = 2.0 if own else 1.0
        out.append(Instance.from_qk(np.array([[1.0, 0.0]]), k, softmax(T=1.0)))
    return out


COROLLARY1_MAX = Derivation(
    "corollary1.cauchy-schwarz.max-key",
    ("corollary1[delta=max-key]",),
    "|l_j - l_i| <= 2 ||q|| max_j ||k_j||, then the ratio bounds of alpha_i = 1 / sum_j exp((l_j - l_i)/T)",
    (
        *_corollary1_steps("with Delta = ||q|| max_j ||k_j||: |l_j| <= Delta and |l_i| <= Delta", 2 * Delta,
                           sp.And(sp.Le(sp.Abs(l_j), Delta), sp.Le(sp.Abs(l_i), Delta))),
        Conclude(sp.And(sp.Le(1 / (L * u), alpha_i), sp.Le(alpha_i, u / L)), {"alpha_i": "alpha_i", "Delta": "Delta_max"},
                 definitions={Delta: T * sp.log(u) / 2}, text="u = exp(2 Delta_max / T)"),
    ),
    Witness("k_0 = -q, every other key = q, L = 10, 100, 1000: alpha_0 -> exp(-2 Delta/T)/L relatively",
            lambda: _witness_keys(own=False), mode="approached"),
)

COROLLARY1_OWN = Derivation(
    "corollary1.cauchy-schwarz.own-key",
    ("corollary1[delta=own-key,corrected]",),
    "|l_j - l_i| <= ||q|| ||k_i|| + ||q|| max_j ||k_j||, then the ratio bounds of alpha_i",
    (
        *_corollary1_steps("with Delta = ||q|| ||k_i|| and Delta_max = ||q|| max_j ||k_j||: |l_i| <= Delta, "
                           "|l_j| <= Delta_max", Delta + Delta_max,
                           sp.And(sp.Le(sp.Abs(l_j), Delta_max), sp.Le(sp.Abs(l_i), Delta))),
        Conclude(sp.And(sp.Le(1 / (L * u), alpha_i), sp.Le(alpha_i, u / L)),
                 {"alpha_i": "alpha_i", "Delta": "Delta_own", "Delta_max": "Delta_max"},
                 definitions={Delta: T * sp.log(u) - D2, Delta_max: D2}, text="u = exp((Delta_i + Delta_max)/T)"),
    ),
    Witness("k_0 = -q (Delta_0 = 1), every other key = 2q (Delta_max = 2), L = 10, 100, 1000: alpha_0 -> "
            "exp(-3/T)/L relatively", lambda: _witness_keys(own=True), mode="approached"),
)

DERIVATIONS = (LEMMA1, COROLLARY1_MAX, COROLLARY1_OWN)

#: readings without a derivation: id -> (why, the proved corrected id or None)
NOT_PROVED = {
    "corollary1[delta=own-key]": ("the i-th key alone does not bound the other logits: the proof needs "
                                  "|l_j - l_i| <= Delta_i + Delta_max", "corollary1[delta=own-key,corrected]"),
}
