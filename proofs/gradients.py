"""Lemma 2 (Jacobian of alpha = F / sum F) and Corollary 3 (softmax).

J = diag(F')/S - F F'^T/S^2 = (diag(alpha) - alpha alpha^T) diag(g), S = sum_j F(l_j),
g = (log F)', both checked entry by entry for any number of tokens (the other tokens enter through
the rest R of the sum). The two-term bound is the triangle inequality; minF bounds S, ||F||, ||F'||
by min F, max F, max |F'|; the sharp bound uses 0 <= diag(alpha) - alpha alpha^T <= diag(alpha) in
Loewner order (the quadratic form is a sum of squared differences) and
||diag(alpha) - alpha alpha^T||_F^2 = S2 - 2 S3 + S2^2 <= S2 - S2^2 <= 1/4. Softmax has g = 1/T.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Assume, Cite, Conclude, Derivation, Identity, Step, Witness, Z3, reals, vector
from attnbounds.theory.mathematics import hypotheses as hyp
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax

F_l2, L, T, alpha_max, alpha_min, dF_l2, dF_max, eps, g_absmax, g_fd, jac = reals(
    "F_l2 L T alpha_max alpha_min dF_l2 dF_max eps g_absmax g J_norm")
Sv, Dm, nF, nFp, nD, nR, lo, hi, lam, G, Fr, JF, Rn, Sq, Dn = reals(
    "S D n_F n_Fp n_D n_R lo hi lambda G Fr J_F R_n Sq D_n")
S0, S2, S3, Sw1, Sw2, Qd, qC, al, aj = reals("S_0 S_2 S_3 Sw_1 Sw_2 Q q_C alpha a_j")
F_POS, SOFTMAX = hyp.F_POSITIVE.id, hyp.SOFTMAX.id

# --- the Jacobian, entry by entry, for any number of tokens -------------------------------------
_li, _lj, _R = reals("l_i l_j R")  # R: the sum of F over the other tokens (free of l_i and l_j)
_F = sp.Function("F")
_Fi, _Fj = _F(_li), _F(_lj)
_Fi_, _Fj_, _dFi, _dFj = reals("F_i F_j dF_i dF_j")
QUOTIENT = Cite(
    "quotient-rule", "d alpha_i / d l_j = delta_ij F'(l_i)/S - F(l_i) F'(l_j)/S^2: J = diag(F')/S - F F'^T/S^2",
    (Identity("i = j: d/dl_i [F(l_i) / (F(l_i) + R)]; i != j: d/dl_j [F(l_i) / (F(l_i) + F(l_j) + R)], R the other "
              "tokens' terms (any number of tokens)",
              sp.Matrix([sp.diff(_Fi / (_Fi + _R), _li), sp.diff(_Fi / (_Fi + _Fj + _R), _lj)]),
              sp.Matrix([sp.diff(_Fi, _li) / (_Fi + _R) - _Fi * sp.diff(_Fi, _li) / (_Fi + _R) ** 2,
                         -_Fi * sp.diff(_Fj, _lj) / (_Fi + _Fj + _R) ** 2])),),
    uses=(F_POS,))
FACTORED = Identity(
    "J = (diag(alpha) - alpha alpha^T) diag(g), g_j = F'(l_j)/F(l_j) = (log F)'(l_j): entries i = j and i != j",
    sp.Matrix([_dFi / Sv - _Fi_ * _dFi / Sv**2, -_Fi_ * _dFj / Sv**2]),
    sp.Matrix([(_Fi_ / Sv - (_Fi_ / Sv) ** 2) * (_dFi / _Fi_), -(_Fi_ / Sv) * (_Fj_ / Sv) * (_dFj / _Fj_)]))

_u, _v = vector("u", 3), vector("v", 3)
RANK_ONE = Cite("rank-one-norm", "n_R = ||F F'^T||_2 = ||F|| ||F'|| and n_D = ||diag(F')||_2 = max_j |F'(l_j)| = D",
                (Identity("(u v^T)^T (u v^T) v = ||u||^2 ||v||^2 v: v is a top singular vector (rank one)",
                          (_u * _v.T).T * (_u * _v.T) * _v, _u.dot(_u) * _v.dot(_v) * _v, sizes="u, v in R^3"),),
                result=sp.And(sp.Eq(nR, nF * nFp), sp.Eq(nD, Dm)))
TWO_TERM = (
    Assume("alpha = F / sum F with F > 0: S = sum_j F(l_j) > 0", sp.Gt(Sv, 0), F_POS),
    QUOTIENT,
    Cite("triangle", "||J||_2 <= ||diag(F')||_2 / S + ||F F'^T||_2 / S^2 = n_D / S + n_R / S^2 (operator norm, S > 0)",
         given=(sp.Gt(Sv, 0),), result=sp.Le(jac, nD / Sv + nR / Sv**2)),
    RANK_ONE,
)


def _softmax_instances(logits: list[list[float]], T_: float = 0.3, **kw: Any) -> list[Instance]:
    return [Instance.from_logits(np.array(logits), softmax(T=T_), **kw)]


LEMMA2_TWO_TERM = Derivation(
    "lemma2.two-term.triangle",
    ("lemma2[two-term]",),
    "quotient rule, triangle inequality for the operator norm, rank-one and diagonal norms",
    (
        *TWO_TERM,
        Conclude(sp.Le(jac, Dm / Sv + nF * nFp / Sv**2),
                 {"J_norm": "J_spectral", "dF_max": "dF_max", "F_l2": "F_l2", "dF_l2": "dF_l2"},
                 definitions={dF_max: Dm / Sv, F_l2: nF / Sv, dF_l2: nFp / Sv},
                 text="||J||_2 <= max|F'|/S + ||F|| ||F'|| / S^2 with D = max|F'|, n_F = ||F||, n_F' = ||F'||"),
    ),
    notes="no witness: the triangle step loses up to a factor 2 (ratio 1/2 at L = 2 with equal logits; the largest "
          "ratio seen on random softmax and exp_poly instances is about 0.7)",
)

LEMMA2_MINF = Derivation(
    "lemma2.minF",
    ("lemma2[minF]",),
    "the two-term bound with S >= L min F, ||F|| <= sqrt(L) max F, ||F'|| <= sqrt(L) max|F'|",
    (
        Assume("an instance has L >= 1 tokens", sp.Ge(L, 1), hyp.domain_id("L")),
        *TWO_TERM,
        Cite("norm-nonnegative", "n_F = ||F||, n_F' = ||F'|| and D = max_j |F'(l_j)| are >= 0",
             result=sp.And(sp.Ge(nF, 0), sp.Ge(nFp, 0), sp.Ge(Dm, 0))),
        Cite("termwise", "every F(l_j) is in [lo, hi] = [min_j F(l_j), max_j F(l_j)] with lo > 0 and every |F'(l_j)| <= D: "
             "S >= L lo, ||F||^2 <= L hi^2, ||F'||^2 <= L D^2", uses=(F_POS,),
             result=sp.And(sp.Gt(lo, 0), sp.Le(lo, hi), sp.Ge(Sv, L * lo), sp.Le(nF**2, L * hi**2),
                           sp.Le(nFp**2, L * Dm**2))),
        Z3("D/S + n_F n_F'/S^2 <= D/(L lo) + D hi/(L lo^2)",
           sp.Le(Dm / Sv + nF * nFp / Sv**2, Dm / (L * lo) + Dm * hi / (L * lo**2)),
           (sp.Ge(Sv, L * lo), sp.Gt(lo, 0), sp.Le(lo, hi), sp.Le(nF**2, L * hi**2), sp.Le(nFp**2, L * Dm**2), sp.Ge(L, 1),
            sp.Ge(nF, 0), sp.Ge(nFp, 0), sp.Ge(Dm, 0))),
        Conclude(sp.Le(jac, Dm / (L * lo) + Dm * hi / (L * lo**2)),
                 {"J_norm": "J_spectral", "dF_max": "dF_max", "alpha_min": "alpha_min", "alpha_max": "alpha_max"},
                 definitions={dF_max: Dm / Sv, alpha_min: lo / Sv, alpha_max: hi / Sv},
                 text="alpha_min = min F / S, alpha_max = max F / S, dF_max = max|F'| / S"),
    ),
    notes="no witness: on random softmax and exp_poly instances the ratio stays below 1/2",
)

# --- diag(alpha) - alpha alpha^T: positive semidefinite, Frobenius norm <= 1/2 (any number of tokens) ---
ON_SIMPLEX: dict[str, Step] = {
    F_POS: Cite("termwise", "alpha = F / sum F with F > 0: every alpha_j >= 0 and S_0 = sum_j alpha_j = 1",
                uses=(F_POS,), result=sp.Eq(S0, 1)),
    SOFTMAX: Assume("softmax weights are positive and sum to one: S_0 = sum_j alpha_j = 1", sp.Eq(S0, 1), SOFTMAX),
}


def _psd(hypothesis: str) -> tuple:
    """w^T (diag(alpha) - alpha alpha^T) w = (1/2) sum_{j,k} alpha_j alpha_k (w_j - w_k)^2 >= 0 for every w."""
    return (
        Cite("bilinearity", "expanding (w_j - w_k)^2 in the double sum: Q = (1/2) sum_{j,k} alpha_j alpha_k (w_j - w_k)^2 "
             "= S_0 Sw_2 - Sw_1^2, Sw_1 = sum_j alpha_j w_j, Sw_2 = sum_j alpha_j w_j^2",
             (Identity("(1/2)(S_0 Sw_2 - 2 Sw_1 Sw_1 + Sw_2 S_0) = S_0 Sw_2 - Sw_1^2",
                       (S0 * Sw2 - 2 * Sw1 * Sw1 + Sw2 * S0) / 2, S0 * Sw2 - Sw1**2),),
             result=sp.Eq(Qd, S0 * Sw2 - Sw1**2)),
        Cite("termwise", "Q >= 0: every term alpha_j alpha_k (w_j - w_k)^2 is >= 0", uses=(hypothesis,),
             result=sp.Ge(Qd, 0)),
        Cite("bilinearity", "w^T (diag(alpha) - alpha alpha^T) w = sum_j alpha_j w_j^2 - (sum_j alpha_j w_j)^2 = "
             "Sw_2 - Sw_1^2", result=sp.Eq(qC, Sw2 - Sw1**2)),
        Z3("sum-of-squared-differences identity: w^T (diag(alpha) - alpha alpha^T) w = Q >= 0 (S_0 = 1)", sp.Ge(qC, 0),
           (sp.Eq(qC, Sw2 - Sw1**2), sp.Eq(Qd, S0 * Sw2 - Sw1**2), sp.Eq(S0, 1), sp.Ge(Qd, 0))),
    )


FROBENIUS = (
    Cite("bilinearity", "||diag(alpha) - alpha alpha^T||_F^2 = sum_i (alpha_i - alpha_i^2)^2 + sum_{i != j} alpha_i^2 "
         "alpha_j^2 = S2 - 2 S3 + S2^2, S_k = sum_j alpha_j^k (the i = j terms alpha_i^4 complete the double sum)",
         (Identity("the squared entries: (a - a^2)^2 = a^2 - 2 a^3 + a^4 (i = j), (a_i a_j)^2 = a_i^2 a_j^2",
                   sp.Matrix([(al - al**2) ** 2, (al * aj) ** 2]), sp.Matrix([al**2 - 2 * al**3 + al**4, al**2 * aj**2])),),
         result=sp.Eq(Fr**2, S2 - 2 * S3 + S2**2)),
    Cite("cauchy-schwarz", "S2^2 = (sum alpha^(1/2) alpha^(3/2))^2 <= (sum alpha)(sum alpha^3) = S_0 S3",
         result=sp.Le(S2**2, S0 * S3)),
    Z3("S2 - 2 S3 + S2^2 <= S2 - S2^2 <= 1/4", sp.Le(Fr**2, sp.Rational(1, 4)),
       (sp.Eq(Fr**2, S2 - 2 * S3 + S2**2), sp.Le(S2**2, S0 * S3), sp.Eq(S0, 1))),
    Cite("norm-nonnegative", "Fr = ||diag(alpha) - alpha alpha^T||_F >= 0", result=sp.Ge(Fr, 0)),
)

LEMMA2_SHARP = Derivation(
    "lemma2.sharp.loewner",
    ("lemma2[sharp]",),
    "J = (diag(alpha) - alpha alpha^T) diag(g); 0 <= diag(alpha) - alpha alpha^T <= min(max alpha, 1/2) I",
    (
        QUOTIENT,
        FACTORED,
        ON_SIMPLEX[F_POS],
        *_psd(F_POS),
        Cite("loewner", "w arbitrary: C = diag(alpha) - alpha alpha^T >= 0, so ||C||_2 = lambda_max(C) = lambda >= 0; and "
             "diag(alpha) - C = alpha alpha^T >= 0 gives lambda <= lambda_max(diag(alpha)) = alpha_max",
             given=(sp.Ge(qC, 0),), result=sp.And(sp.Ge(lam, 0), sp.Le(lam, alpha_max))),
        *FROBENIUS,
        Cite("spectral-le-frobenius", "lambda = ||C||_2 <= ||C||_F = Fr", result=sp.Le(lam, Fr)),
        Cite("norm-nonnegative", "G = max_j |g_j| >= 0", result=sp.Ge(G, 0)),
        Cite("submultiplicativity", "||J||_2 <= ||C||_2 ||diag(g)||_2 = lambda G, ||diag(g)||_2 = max_j |g_j| = G (the "
             "norm of a diagonal matrix, rank-one-norm)", result=sp.Le(jac, lam * G)),
        Conclude(sp.Le(jac, sp.Min(alpha_max, sp.Rational(1, 2)) * G),
                 {"J_norm": "J_spectral", "alpha_max": "alpha_max", "g_absmax": "g_absmax"},
                 definitions={g_absmax: G}, text="||J||_2 <= lambda G with lambda <= min(alpha_max, 1/2), G = max|g|"),
    ),
    Witness("softmax, L = 2, equal logits: ||J||_2 = 1/(2T) = min(1/2, 1/2) / T",
            lambda: _softmax_instances([[0.0, 0.0], [1.5, 1.5]])),
)

_lz, _c = reals("l c")
SOFTMAX_G = Identity("softmax: g = d/dl (l/T + c) = 1/T", sp.diff(_lz / T + _c, _lz), 1 / T, uses=(SOFTMAX,))
T_POSITIVE = Assume("the temperature is positive", sp.Gt(T, 0), hyp.domain_id("T"))

COR3_SPECTRAL = Derivation(
    "corollary3.softmax.frobenius",
    ("corollary3[spectral,corrected]", "corollary3[frobenius,corrected]"),
    "softmax: J = (diag(alpha) - alpha alpha^T)/T and ||.||_2 <= ||.||_F <= 1/(2T)",
    (
        T_POSITIVE,
        ON_SIMPLEX[SOFTMAX],
        SOFTMAX_G,
        FACTORED,
        *FROBENIUS,
        Cite("homogeneity", "J_F = ||J||_F = ||diag(alpha) - alpha alpha^T||_F / T = Fr / T (T > 0)", given=(sp.Gt(T, 0),),
             result=sp.Eq(JF, Fr / T)),
        Cite("spectral-le-frobenius", "J_norm is ||J||_2 or ||J||_F; both are <= ||J||_F", result=sp.Le(jac, JF)),
        Conclude(sp.Le(jac, 1 / (2 * T)), {"J_norm": ("J_spectral", "J_frobenius")}, text="||J|| <= Fr / T <= 1/(2T)"),
    ),
    Witness("L = 2, equal logits: both norms equal 1/(2T)", lambda: _softmax_instances([[0.0, 0.0], [-2.0, -2.0]], 0.05)),
)

COR3_ROW = Derivation(
    "corollary3.softmax.row",
    ("corollary3[row,corrected]",),
    "||grad alpha_i||^2 T^2 = alpha_i^2 ((1 - alpha_i)^2 + sum_{j != i} alpha_j^2) <= 2 alpha_i^2 (1 - alpha_i)^2",
    (
        T_POSITIVE,
        Assume("softmax weights lie in [0, 1]", sp.And(sp.Ge(al, 0), sp.Le(al, 1)), SOFTMAX),
        SOFTMAX_G,
        FACTORED,
        Cite("bilinearity", "row i of diag(alpha) - alpha alpha^T has entries alpha_i (1 - alpha_i) and -alpha_i alpha_j "
             "(j != i): its squared norm is R_n^2 = alpha_i^2 ((1 - alpha_i)^2 + Sq), Sq = sum_{j != i} alpha_j^2",
             (Identity("the squared entries", sp.Matrix([(al * (1 - al)) ** 2, (al * aj) ** 2]),
                       sp.Matrix([al**2 * (1 - al) ** 2, al**2 * aj**2])),),
             result=sp.Eq(Rn**2, al**2 * ((1 - al) ** 2 + Sq))),
        Cite("termwise", "Sq = sum_{j != i} alpha_j^2 <= (sum_{j != i} alpha_j)^2 = (1 - alpha_i)^2 (non-negative terms, "
             "weights summing to one)", uses=(SOFTMAX,), result=sp.Le(Sq, (1 - al) ** 2)),
        Z3("R_n^2 <= 2 alpha^2 (1 - alpha)^2 <= 2/16 for alpha in [0, 1]", sp.Le(Rn**2, sp.Rational(2, 16)),
           (sp.Eq(Rn**2, al**2 * ((1 - al) ** 2 + Sq)), sp.Le(Sq, (1 - al) ** 2), sp.Ge(al, 0), sp.Le(al, 1))),
        Cite("norm-nonnegative", "R_n >= 0", result=sp.Ge(Rn, 0)),
        Cite("maximum", "J_row = max_i ||grad alpha_i|| = R_n / T at the maximising token i (J = (diag(alpha) - "
             "alpha alpha^T)/T, homogeneity)", given=(sp.Gt(T, 0),), result=sp.Eq(jac, Rn / T)),
        Conclude(sp.Le(jac, sp.sqrt(2) / (4 * T)), {"J_norm": "J_row"}, text="max_i ||grad alpha_i|| <= sqrt(2)/(4T)"),
    ),
    Witness("L = 2, equal logits: ||grad alpha_1|| = sqrt(2)/(4T)",
            lambda: _softmax_instances([[0.0, 0.0], [3.0, 3.0]], 2.0)),
)

COR3_ENTRY = Derivation(
    "corollary3.softmax.entry",
    ("corollary3[entry,corrected]",),
    "|J_ij| T = alpha_i |delta_ij - alpha_j|: alpha (1 - alpha) <= 1/4, alpha_i alpha_j <= ((alpha_i + alpha_j)/2)^2 <= 1/4",
    (
        T_POSITIVE,
        Assume("two softmax weights are >= 0 and sum to at most one", sp.And(sp.Ge(al, 0), sp.Ge(aj, 0), sp.Le(al + aj, 1)),
               SOFTMAX),
        SOFTMAX_G,
        FACTORED,
        Cite("maximum", "J_entry = max_{i,j} |J_ij| is attained at some entry: a diagonal one alpha_i (1 - alpha_i) / T "
             "or an off-diagonal one alpha_i alpha_j / T (J = (diag(alpha) - alpha alpha^T)/T)",
             result=sp.Or(sp.Eq(jac, al * (1 - al) / T), sp.Eq(jac, al * aj / T))),
        Z3("diagonal: alpha (1 - alpha) <= 1/4", sp.Le(al * (1 - al), sp.Rational(1, 4))),
        Z3("off-diagonal: alpha_i alpha_j <= 1/4 when alpha_i + alpha_j <= 1", sp.Le(al * aj, sp.Rational(1, 4)),
           (sp.Le(al + aj, 1), sp.Ge(al, 0), sp.Ge(aj, 0))),
        Conclude(sp.Le(jac, 1 / (4 * T)), {"J_norm": "J_entry"}, text="max |J_ij| <= 1/(4T)"),
    ),
    Witness("L = 2, equal logits: J_11 = 1/(4T)", lambda: _softmax_instances([[0.0, 0.0], [0.7, 0.7]], 0.5)),
)

_S1, _Sa, _Sb, _ab, _Pc = reals("S_1 S_a S_b ab P_c")
COR3_FD = Derivation(
    "corollary3.softmax.fd",
    ("corollary3[fd,corrected]",),
    "mean value inequality with sup ||J||_2 <= 1/(2T); and ||alpha - alpha'|| <= sqrt(2) on the simplex",
    (
        T_POSITIVE,
        Assume("the finite-difference step is positive", sp.Gt(eps, 0), hyp.domain_id("eps")),
        Cite("mean-value", "softmax is C^1: D_n = ||alpha(l + eps v) - alpha(l)|| <= eps ||v|| sup_t ||J(l + t eps v)||_2 "
             "<= eps / (2T) by corollary3[spectral,corrected] and ||v|| = 1", uses=(SOFTMAX, hyp.UNIT_DIRECTION.id),
             given=(sp.Gt(T, 0), sp.Gt(eps, 0)), result=sp.Le(Dn, eps / (2 * T))),
        Cite("simplex-diameter", "alpha(l) and alpha(l + eps v) lie on the simplex: D_n^2 = ||a||^2 + ||b||^2 - 2 <a, b> "
             "<= 2, D_n >= 0",
             (Z3("||a||^2 = S_a <= (sum_j a_j)^2 = 1: (sum a_j)^2 = S_a + P_c with P_c = sum_{j != k} a_j a_k >= 0",
                 sp.Le(_Sa, 1), (sp.Eq(_S1, 1), sp.Eq(_S1**2, _Sa + _Pc), sp.Ge(_Pc, 0))),
              Z3("S_a, S_b <= 1 and <a, b> >= 0: ||a - b||^2 = S_a + S_b - 2 <a, b> <= 2",
                 sp.Le(_Sa + _Sb - 2 * _ab, 2), (sp.Le(_Sa, 1), sp.Le(_Sb, 1), sp.Ge(_ab, 0)))),
             uses=(SOFTMAX,), result=sp.And(sp.Le(Dn**2, 2), sp.Ge(Dn, 0))),
        Conclude(sp.Le(Dn / eps, sp.Min(1 / (2 * T), sp.sqrt(2) / eps)), {"g": "g_fd"}, definitions={g_fd: Dn / eps},
                 text="g = D_n / eps <= min(1/(2T), sqrt(2)/eps)"),
    ),
    Witness("L = 2, equal logits, v = (1, -1)/sqrt(2), eps -> 0: g -> ||J v|| = 1/(2T)",
            lambda: [Instance.from_logits(np.zeros((1, 2)), softmax(T=0.5), eps=e,
                                          arrays={"v": np.array([[1.0, -1.0]]) / np.sqrt(2)}) for e in (0.5, 0.1, 0.02)],
            mode="approached"),
)

DERIVATIONS = (LEMMA2_TWO_TERM, LEMMA2_MINF, LEMMA2_SHARP, COR3_SPECTRAL, COR3_ROW, COR3_ENTRY, COR3_FD)

_CLASSIC = "the supremum of the {what} is {sup}, attained at L = 2 with equal logits, which exceeds min(1/(4T), sqrt 2)"
NOT_PROVED = {
    "corollary3[spectral]": (_CLASSIC.format(what="spectral norm", sup="1/(2T)"), "corollary3[spectral,corrected]"),
    "corollary3[frobenius]": (_CLASSIC.format(what="Frobenius norm", sup="1/(2T)"), "corollary3[frobenius,corrected]"),
    "corollary3[row]": (_CLASSIC.format(what="largest row norm", sup="sqrt(2)/(4T)"), "corollary3[row,corrected]"),
    "corollary3[entry]": ("the largest entry reaches 1/(4T) (L = 2, equal logits), above the cap sqrt(2) when "
                          "T < 1/(4 sqrt 2)", "corollary3[entry,corrected]"),
    "corollary3[fd]": ("as eps -> 0, g approaches ||J v|| which reaches 1/(2T) > 1/(4T)", "corollary3[fd,corrected]"),
}
