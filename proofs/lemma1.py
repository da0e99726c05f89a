"""Lemma 1 (vanishing attention) and Corollary 1 (softmax weights from |q.k| bounds).

Both follow from one fact: if every term of S = sum_j F_j lies in [lo, hi] with lo > 0, then
F_i / S lies in [lo / (L hi), hi / (L lo)]. For softmax it is applied to
alpha_i = 1 / sum_j exp((l_j - l_i) / T).
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Cite, Conclude, Derivation, Identity, Sign, Witness, Z3
from attnbounds.theory.instance import Instance
from attnbounds.theory.normalisers import softmax
from attnbounds.theory.statements._symbols import C_1, C_2, Delta, L, T, alpha_i
from attnbounds.theory.statements.corrections import Delta_max

f, S, lo, hi, u, R = sp.symbols("f S lo hi u R", positive=True)
l, j = sp.symbols("l j", real=True)
D2 = sp.Symbol("D_2", nonnegative=True)


def _ratio_bounds(text: str, num_lo: sp.Expr, num_hi: sp.Expr, t_lo: sp.Expr, t_hi: sp.Expr) -> Z3:
    """z3: a numerator in [num_lo, num_hi] and a sum of L terms in [t_lo, t_hi] give the ratio bounds."""
    return Z3(text,
              sp.And(sp.Le(num_lo / (L * t_hi), f / S), sp.Le(f / S, num_hi / (L * t_lo))),
              (sp.Le(num_lo, f), sp.Le(f, num_hi), sp.Le(L * t_lo, S), sp.Le(S, L * t_hi), sp.Ge(L, 1)))


def _termwise_sum(what: str, t_lo: sp.Expr, t_hi: sp.Expr) -> Cite:
    return Cite("termwise", f"summing {t_lo} <= {what} <= {t_hi} over the L tokens: L*{t_lo} <= S <= L*{t_hi}",
                (Identity("a sum of L equal terms", sp.summation(t_lo, (j, 1, L)), L * t_lo),))


LEMMA1 = Derivation(
    "lemma1.extreme-values",
    ("lemma1",),
    "alpha_i = F(l_i) / sum_j F(l_j) with every F(l_j) in [min F, max F] on [-a, a]",
    (
        Cite("extreme-value", "F is continuous and positive on the compact [-a, a], so lo = min F > 0 and hi = max F "
             "exist, and lo <= F(l_j) <= hi for every token since |l_j| <= a",
             uses=("F-positive", "logits-bounded")),
        _termwise_sum("F(l_j)", lo, hi),
        _ratio_bounds("f = F(l_i) in [lo, hi] and S in [L lo, L hi] give lo/(L hi) <= f/S <= hi/(L lo)", lo, hi, lo, hi),
        Conclude(sp.And(sp.Le(lo / (L * hi), alpha_i), sp.Le(alpha_i, hi / (L * lo))),
                 {"alpha_i": "alpha_i", "C_1": "C_1", "C_2": "C_2"},
                 definitions={C_1: lo / hi, C_2: hi / lo},
                 text="C_1 = min F / max F, C_2 = max F / min F on [-a, a]; constants free of L when F is"),
    ),
    Witness("equal logits l = 0 (a = 0, C_1 = C_2 = 1): alpha_i = 1/L exactly",
            lambda: [Instance.from_logits(np.zeros((1, 6)), softmax(T=t)) for t in (0.5, 1.0, 3.0)]),
)


def _corollary1_steps(spread: str, width: str) -> tuple:
    """Steps shared by both key readings: every e_j = exp((l_j - l_i)/T) lies in [1/u, u], u = exp(width/T)."""
    return (
        Cite("cauchy-schwarz", f"|l_j| = |q . k_j| <= ||q|| ||k_j||; hence {spread}", uses=("softmax",)),
        Cite("monotone-function", "exp(x / T) is increasing for T > 0, so every term exp((l_j - l_i)/T) of "
             f"S = sum_j exp((l_j - l_i)/T) lies in [1/u, u], u = exp(({width})/T)",
             (Sign("d/dl exp(l/T) > 0", sp.diff(sp.exp(l / T), l), ">0"),)),
        Identity("softmax: alpha_i = exp(l_i/T) / (exp(l_i/T) + R) = 1 / sum_j exp((l_j - l_i)/T), "
                 "R = sum_{j != i} exp(l_j/T)", sp.exp(l / T) / (sp.exp(l / T) + R), 1 / (1 + R * sp.exp(-l / T))),
        _termwise_sum("exp((l_j - l_i)/T)", 1 / u, u),
        Z3("S in [L/u, L u] gives 1/(L u) <= 1/S <= u/L",
           sp.And(sp.Le(1 / (L * u), 1 / S), sp.Le(1 / S, u / L)),
           (sp.Le(L / u, S), sp.Le(S, L * u), sp.Ge(L, 1))),
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
        *_corollary1_steps("|l_j - l_i| <= 2 Delta_max", "2 Delta_max"),
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
        *_corollary1_steps("|l_j - l_i| <= |l_j| + |l_i| <= Delta_max + Delta_i", "Delta_i + Delta_max"),
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
