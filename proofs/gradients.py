"""Lemma 2 (Jacobian of alpha = F / sum F) and Corollary 3 (softmax).

J = diag(F')/S - F F'^T/S^2 = (diag(alpha) - alpha alpha^T) diag(g), S = sum_j F(l_j),
g = (log F)'. The two-term bound is the triangle inequality; minF bounds S, ||F||, ||F'|| by
min F, max F, max |F'|; the sharp bound uses 0 <= diag(alpha) - alpha alpha^T <= diag(alpha) in
Loewner order and ||diag(alpha) - alpha alpha^T||_F^2 = S2 - 2 S3 + S2^2 <= S2 - S2^2 <= 1/4.
Softmax has g = 1/T.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from attnbounds.proofs.framework import Cite, Conclude, Derivation, Identity, Witness, Z3, vector
from attnbounds.theory.instance import Instance
from attnbounds.theory.normalisers import softmax
from attnbounds.theory.statements._symbols import (F_l2, L, T, alpha_max, alpha_min, dF_l2, dF_max, eps, g_absmax, g_fd, jac)

Sv, Dm, nF, nFp, lo, hi, lam, G, S2, S3, rn, al, aj = sp.symbols(
    "S D n_F n_Fp lo hi lambda G S_2 S_3 R alpha a_j", nonnegative=True)
F_POS, SOFTMAX = "F-positive", "softmax"

# --- the Jacobian, checked on three tokens with a generic F -------------------------------------
_l = sp.symbols("l_1:4", real=True)
_F = sp.Function("F")
_Fs = [_F(x) for x in _l]
_S3 = sum(_Fs)
_alpha = sp.Matrix([f / _S3 for f in _Fs])
_dF = sp.Matrix([sp.diff(f, x) for f, x in zip(_Fs, _l)])
_jac = _alpha.jacobian(sp.Matrix(_l))
QUOTIENT = Cite("quotient-rule", "d alpha_i / d l_j = delta_ij F'(l_i)/S - F(l_i) F'(l_j)/S^2: J = diag(F')/S - F F'^T/S^2",
                (Identity("three tokens, generic F", _jac, sp.diag(*_dF) / _S3 - sp.Matrix(_Fs) * _dF.T / _S3**2),),
                uses=(F_POS,))
FACTORED = Identity("J = (diag(alpha) - alpha alpha^T) diag(g), g_j = F'(l_j)/F(l_j) = (log F)'(l_j) (three tokens)",
                    sp.diag(*_dF) / _S3 - sp.Matrix(_Fs) * _dF.T / _S3**2,
                    (sp.diag(*_alpha) - _alpha * _alpha.T) * sp.diag(*[d / f for d, f in zip(_dF, _Fs)]))

_u, _v = vector("u", 3), vector("v", 3)
RANK_ONE = Cite("rank-one-norm", "||F F'^T||_2 = ||F|| ||F'|| and ||diag(F')||_2 = max_j |F'(l_j)|",
                (Identity("(u v^T)^T (u v^T) v = ||u||^2 ||v||^2 v: v is a top singular vector (rank one)",
                          (_u * _v.T).T * (_u * _v.T) * _v, _u.dot(_u) * _v.dot(_v) * _v),))
TWO_TERM = (
    QUOTIENT,
    Cite("triangle", "||J||_2 <= ||diag(F')||_2 / S + ||F F'^T||_2 / S^2 (operator norm)"),
    RANK_ONE,
)


def _softmax_instances(logits: list[list[float]], T_: float = 0.3, **kw) -> list[Instance]:
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
        *TWO_TERM,
        Cite("termwise", "every F(l_j) is in [min F, max F] and every |F'(l_j)| <= D: S >= L lo, ||F||^2 <= L hi^2, "
             "||F'||^2 <= L D^2", uses=(F_POS,)),
        Z3("D/S + n_F n_F'/S^2 <= D/(L lo) + D hi/(L lo^2)",
           sp.Le(Dm / Sv + nF * nFp / Sv**2, Dm / (L * lo) + Dm * hi / (L * lo**2)),
           (sp.Ge(Sv, L * lo), sp.Gt(lo, 0), sp.Le(nF**2, L * hi**2), sp.Le(nFp**2, L * Dm**2), sp.Ge(L, 1))),
        Conclude(sp.Le(jac, Dm / (L * lo) + Dm * hi / (L * lo**2)),
                 {"J_norm": "J_spectral", "dF_max": "dF_max", "alpha_min": "alpha_min", "alpha_max": "alpha_max"},
                 definitions={dF_max: Dm / Sv, alpha_min: lo / Sv, alpha_max: hi / Sv},
                 text="alpha_min = min F / S, alpha_max = max F / S, dF_max = max|F'| / S"),
    ),
    notes="no witness: on random softmax and exp_poly instances the ratio stays below 1/2",
)

# --- the Loewner / Frobenius bounds on diag(alpha) - alpha alpha^T ---------------------------------
_a = sp.symbols("a_1:5", nonnegative=True)
_w = sp.symbols("w_1:5", real=True)
_one = {_a[3]: 1 - sum(_a[:3])}
_quad = (sum(x * y**2 for x, y in zip(_a, _w)) - sum(x * y for x, y in zip(_a, _w)) ** 2).subs(_one)
_pairs = sum(_a[j] * _a[k] * (_w[j] - _w[k]) ** 2 for j in range(4) for k in range(4)) / 2
_A3 = sp.Matrix(_a[:3])
_C3 = sp.diag(*_a[:3]) - _A3 * _A3.T
PSD = Cite("cauchy-schwarz", "diag(alpha) - alpha alpha^T >= 0: w^T (diag(alpha) - alpha alpha^T) w = sum alpha_j w_j^2 - "
           "(sum alpha_j w_j)^2 = (1/2) sum_{j,k} alpha_j alpha_k (w_j - w_k)^2 >= 0 when sum alpha = 1",
           (Identity("four tokens on the simplex", _quad, _pairs.subs(_one)),))
FROBENIUS = (
    Cite("bilinearity", "||diag(alpha) - alpha alpha^T||_F^2 = S2 - 2 S3 + S2^2, S_k = sum_j alpha_j^k",
         (Identity("three tokens", sum(e**2 for e in _C3),
                   sum(x**2 for x in _a[:3]) - 2 * sum(x**3 for x in _a[:3]) + sum(x**2 for x in _a[:3]) ** 2),)),
    Cite("cauchy-schwarz", "S2^2 = (sum alpha^(1/2) alpha^(3/2))^2 <= (sum alpha)(sum alpha^3) = S3"),
    Z3("S2 - 2 S3 + S2^2 <= S2 - S2^2 <= 1/4", sp.Le(S2 - 2 * S3 + S2**2, sp.Rational(1, 4)),
       (sp.Ge(S3, S2**2),)),
)
SIMPLEX_NOTE = Cite("termwise", "alpha = F / sum F is on the simplex (F > 0), so sum alpha = 1", uses=(F_POS,))

LEMMA2_SHARP = Derivation(
    "lemma2.sharp.loewner",
    ("lemma2[sharp]",),
    "J = (diag(alpha) - alpha alpha^T) diag(g); 0 <= diag(alpha) - alpha alpha^T <= min(max alpha, 1/2) I",
    (
        QUOTIENT,
        FACTORED,
        SIMPLEX_NOTE,
        PSD,
        Cite("loewner", "diag(alpha) - alpha alpha^T <= diag(alpha): lambda_max <= max_j alpha_j; PSD, so its spectral "
             "norm is lambda_max"),
        *FROBENIUS,
        Cite("spectral-le-frobenius", "lambda_max <= ||diag(alpha) - alpha alpha^T||_F <= 1/2"),
        Cite("submultiplicativity", "||J||_2 <= lambda_max ||diag(g)||_2 = lambda_max max_j |g_j|", (RANK_ONE,)),
        Conclude(sp.Le(jac, lam * G), {"J_norm": "J_spectral", "alpha_max": "alpha_max", "g_absmax": "g_absmax"},
                 definitions={g_absmax: G}, given=(sp.Le(lam, alpha_max), sp.Le(lam, sp.Rational(1, 2))),
                 text="||J||_2 <= lambda G with lambda <= min(alpha_max, 1/2), G = max|g|"),
    ),
    Witness("softmax, L = 2, equal logits: ||J||_2 = 1/(2T) = min(1/2, 1/2) / T",
            lambda: _softmax_instances([[0.0, 0.0], [1.5, 1.5]])),
)

_lz = sp.Symbol("l", real=True)
SOFTMAX_G = Identity("softmax: g = d/dl log exp(l/T) = 1/T", sp.diff(sp.log(sp.exp(_lz / T)), _lz), 1 / T,
                     uses=(SOFTMAX,))

COR3_SPECTRAL = Derivation(
    "corollary3.softmax.frobenius",
    ("corollary3[spectral,corrected]", "corollary3[frobenius,corrected]"),
    "softmax: J = (diag(alpha) - alpha alpha^T)/T and ||.||_2 <= ||.||_F <= 1/(2T)",
    (
        SOFTMAX_G,
        FACTORED,
        *FROBENIUS,
        Cite("homogeneity", "||J||_F = ||diag(alpha) - alpha alpha^T||_F / T <= sqrt(1/4) / T"),
        Cite("spectral-le-frobenius", "||J||_2 <= ||J||_F"),
        Conclude(sp.Le(jac, rn), {"J_norm": ("J_spectral", "J_frobenius")}, given=(sp.Le(rn**2 * T**2, sp.Rational(1, 4)),),
                 text="||J|| <= R with R^2 T^2 <= 1/4"),
    ),
    Witness("L = 2, equal logits: both norms equal 1/(2T)", lambda: _softmax_instances([[0.0, 0.0], [-2.0, -2.0]], 0.05)),
)

_row3 = [_a[0] * ((1 if k == 0 else 0) - _a[k]) for k in range(3)]
COR3_ROW = Derivation(
    "corollary3.softmax.row",
    ("corollary3[row,corrected]",),
    "||grad alpha_i||^2 T^2 = alpha_i^2 ((1 - alpha_i)^2 + sum_{j != i} alpha_j^2) <= 2 alpha_i^2 (1 - alpha_i)^2",
    (
        SOFTMAX_G,
        FACTORED,
        Identity("row i of (diag(alpha) - alpha alpha^T): squared norm alpha_i^2 ((1 - alpha_i)^2 + sum_{j != i} alpha_j^2) "
                 "(three tokens)", sum(e**2 for e in _row3), _a[0] ** 2 * ((1 - _a[0]) ** 2 + _a[1] ** 2 + _a[2] ** 2)),
        Cite("termwise", "sum_{j != i} alpha_j^2 <= (sum_{j != i} alpha_j)^2 = (1 - alpha_i)^2 (non-negative terms)",
             (Z3("two terms", sp.Le(_a[1] ** 2 + _a[2] ** 2, (_a[1] + _a[2]) ** 2)),), uses=(SOFTMAX,)),
        Z3("2 alpha^2 (1 - alpha)^2 <= 2/16 for alpha in [0, 1]", sp.Le(2 * al**2 * (1 - al) ** 2, sp.Rational(2, 16)),
           (sp.Le(al, 1),)),
        Conclude(sp.Le(jac, rn), {"J_norm": "J_row"}, given=(sp.Le(rn**2 * T**2, sp.Rational(2, 16)),),
                 text="max_i ||grad alpha_i|| <= R with R^2 T^2 <= 2/16"),
    ),
    Witness("L = 2, equal logits: ||grad alpha_1|| = sqrt(2)/(4T)",
            lambda: _softmax_instances([[0.0, 0.0], [3.0, 3.0]], 2.0)),
)

COR3_ENTRY = Derivation(
    "corollary3.softmax.entry",
    ("corollary3[entry,corrected]",),
    "|J_ij| T = alpha_i |delta_ij - alpha_j|: alpha (1 - alpha) <= 1/4, alpha_i alpha_j <= ((alpha_i + alpha_j)/2)^2 <= 1/4",
    (
        SOFTMAX_G,
        FACTORED,
        Z3("diagonal: alpha (1 - alpha) <= 1/4", sp.Le(al * (1 - al), sp.Rational(1, 4))),
        Z3("off-diagonal: alpha_i alpha_j <= 1/4 when alpha_i + alpha_j <= 1", sp.Le(al * aj, sp.Rational(1, 4)),
           (sp.Le(al + aj, 1),), uses=(SOFTMAX,)),
        Conclude(sp.Le(jac, rn), {"J_norm": "J_entry"}, given=(sp.Le(rn * T, sp.Rational(1, 4)),),
                 text="max |J_ij| <= R with R T <= 1/4"),
    ),
    Witness("L = 2, equal logits: J_11 = 1/(4T)", lambda: _softmax_instances([[0.0, 0.0], [0.7, 0.7]], 0.5)),
)

_p1, _p2 = sp.symbols("p_1:3", nonnegative=True)
COR3_FD = Derivation(
    "corollary3.softmax.fd",
    ("corollary3[fd,corrected]",),
    "mean value inequality with sup ||J||_2 <= 1/(2T); and ||alpha - alpha'|| <= sqrt(2) on the simplex",
    (
        Cite("mean-value", "softmax is C^1: ||alpha(l + eps v) - alpha(l)|| <= eps ||v|| sup_t ||J(l + t eps v)||_2 "
             "<= eps / (2T) by corollary3[spectral,corrected] and ||v|| = 1", uses=(SOFTMAX, "unit-direction")),
        Cite("triangle", "for alpha, alpha' on the simplex: ||alpha - alpha'||^2 = ||alpha||^2 + ||alpha'||^2 - "
             "2 <alpha, alpha'> <= 1 + 1 - 0",
             (Z3("||alpha||^2 <= (sum alpha)^2 = 1 (two coordinates)", sp.Le(_p1**2 + _p2**2, 1), (sp.Le(_p1 + _p2, 1),)),)),
        Conclude(sp.Le(g_fd, rn), {"g": "g_fd"}, given=(sp.Le(rn * T, sp.Rational(1, 2)), sp.Le(rn**2 * eps**2, 2)),
                 text="g <= R with R <= 1/(2T) and R eps <= sqrt(2)"),
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
