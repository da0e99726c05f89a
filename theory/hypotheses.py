"""The hypotheses of the paper's statements as checkable predicates on an instance batch.

Every check is computed from the instance's data, never from a name: the normaliser is read through
its sympy ``log F`` (softmax: ``log F = l / T + c``), the logits through the query and keys they
are said to come from, the parameters through :data:`DOMAINS`. A parameter domain is attached
automatically, as the hypothesis ``domain(<name>)``, to every statement that uses the parameter
(:func:`domain_hypotheses`); its ``formula`` is what a derivation in ``proofs/`` may assume from it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Iterable, cast

import numpy as np
import sympy as sp

from attnbounds.theory.instance import Instance
from attnbounds.theory.normalisers import RatioNormaliser
from attnbounds.theory.quantities.multihead import MAX_HEADS_ENUMERATED
from attnbounds.theory.statement import Hypothesis

#: the parameters as plain real symbols (named as in the statements): formulas built from symbols that carry
#: sympy assumptions would collapse (``T > 0`` is ``True`` for a positive T) and state nothing
L, N, T, a, r, M, delta, eps, p, H, C_H, kappa = sp.symbols("L N T a r M delta eps p H C_H kappa", real=True)


def _all(inst: Instance, value: bool) -> np.ndarray:
    return np.full(inst.B, bool(value))


# -- softmax, from log F -------------------------------------------------------------------------------
_T_INSTANCE = sp.Symbol("T_instance")
_Polynomial = tuple[tuple[tuple[int, ...], Fraction], ...]


@dataclass(frozen=True)
class _Defect:
    """``T_instance (log F)' - 1`` for a ``log F`` affine in the logit: ``log F = l / T + c`` iff it vanishes.

    ``names`` are its symbols; ``ratio`` its numerator and denominator as exact polynomials when it is a
    rational function of them (then decided in exact rational arithmetic), else None (decided by sympy).
    """

    expr: sp.Expr
    names: tuple[str, ...]
    approx: Callable[..., float]
    ratio: tuple[_Polynomial, _Polynomial] | None


def _polynomial(expr: sp.Expr, symbols: list[sp.Symbol]) -> _Polynomial:
    poly = sp.Poly(expr, *symbols) if symbols else sp.Poly(expr, sp.Dummy())
    return tuple((monom[:len(symbols)], Fraction(int(c.p), int(c.q))) for monom, c in poly.terms())


@functools.lru_cache(maxsize=256)
def _softmax_defect(log_F: sp.Expr) -> _Defect | None:
    """The :class:`_Defect` of ``log F``, or None when ``(log F)'`` depends on the logit."""
    logit = next((s for s in log_F.free_symbols if s.name == "l"), None)
    if logit is None:
        return None
    slope = sp.diff(log_F, logit)
    if logit in slope.free_symbols:
        return None
    defect = sp.simplify(_T_INSTANCE * slope - 1)
    symbols = sorted(defect.free_symbols, key=lambda s_: s_.name)
    names = tuple(s_.name for s_ in symbols)
    plain = [sp.Symbol(nm) for nm in names]
    approx = sp.lambdify(plain, defect.xreplace(dict(zip(symbols, plain))), "numpy")
    num, den = sp.fraction(sp.together(defect))
    rational = all(e.is_polynomial(*symbols) and all(c.is_Rational for c in sp.Poly(e, *symbols).coeffs())
                   for e in (num, den)) if symbols else defect.is_Rational
    ratio = (_polynomial(num, symbols), _polynomial(den, symbols)) if rational else None
    return _Defect(defect, names, approx, ratio)


def _is_zero_at(poly: _Polynomial, values: tuple[tuple[int, int], ...]) -> bool:
    """Whether the polynomial vanishes exactly at ``values`` (each a double as its integer ratio ``(n, d)``)."""
    num, den = 0, 1  # the running sum num / den, in integers (no normalisation needed for a zero test)
    for monom, coeff in poly:
        tn, td = coeff.numerator, coeff.denominator
        for (vn, vd), e in zip(values, monom):
            if e:
                tn *= vn**e
                td *= vd**e
        num, den = num * td + tn * den, den * td
    return num == 0


def _vanishes(defect: _Defect, row: tuple[float, ...]) -> bool:
    """Whether the defect is exactly 0 at these doubles (each read as the exact binary rational it is)."""
    if defect.ratio is not None:
        exact = tuple(v.as_integer_ratio() for v in row)
        num, den = defect.ratio
        return not _is_zero_at(den, exact) and _is_zero_at(num, exact)
    subs = {sp.Symbol(nm): sp.Rational(v) for nm, v in zip(defect.names, row)}
    plain = defect.expr.xreplace({s_: sp.Symbol(s_.name) for s_ in defect.expr.free_symbols})
    return sp.simplify(plain.xreplace(subs)) == 0


def _softmax(inst: Instance) -> np.ndarray:
    """``log F(l) = l / T + c`` for the instance's own temperature ``T``, decided exactly per instance."""
    n = inst.normaliser
    if not isinstance(n, RatioNormaliser) or "T" not in inst.params:
        return _all(inst, False)
    defect = _softmax_defect(n.log_F)
    if defect is None:
        return _all(inst, False)
    columns = []
    for name in defect.names:
        value = inst.param("T") if name == _T_INSTANCE.name else inst.L if name == "L" else n.values.get(name)
        if value is None:
            return _all(inst, False)  # a symbol of log F with no value: F is not a function of l alone
        columns.append(np.broadcast_to(np.asarray(value, dtype=np.float64), (inst.B,)))
    table = np.stack(columns, axis=-1) if columns else np.zeros((inst.B, 0))
    rows, inverse = np.unique(table, axis=0, return_inverse=True)
    with np.errstate(all="ignore"):
        near = np.abs(np.broadcast_to(defect.approx(*rows.T), (len(rows),))) <= 1e-9  # else certainly not 0
    ok = np.zeros(len(rows), dtype=bool)
    for j in np.flatnonzero(near):
        ok[j] = _vanishes(defect, tuple(map(float, rows[j])))
    return ok[np.ravel(inverse)]


# -- logits from the query and keys --------------------------------------------------------------------
def _logits_qk(inst: Instance) -> np.ndarray:
    """``l_i = <q, k_i>`` up to the rounding of a d-term dot product (certification re-checks it exactly)."""
    if inst.q is None or inst.k is None or inst.logits is None:
        return _all(inst, False)
    qk = np.einsum("bd,bkd->bk", inst.q, inst.k)
    scale = np.linalg.norm(inst.q, axis=-1)[:, None] * np.linalg.norm(inst.k, axis=-1)
    slack = (inst.q.shape[-1] + 2) * 2.0**-52 * scale
    return cast(np.ndarray, np.where(inst.present, np.abs(inst.logits - qk) <= slack, True).all(-1))


F_POSITIVE = Hypothesis(
    "F-positive", "alpha = F / sum F with F a smooth positive function of the logit (paper eq. 3)",
    lambda inst: _all(inst, isinstance(inst.normaliser, RatioNormaliser) and inst.normaliser.positive),
    relax=lambda space: space.normaliser_property(lambda n: n.positive, "F positive"))

F_LENGTH_INDEPENDENT = Hypothesis(
    "F-length-independent", "F does not depend explicitly on the number of tokens L (Lemma 1)",
    lambda inst: _all(inst, inst.normaliser is not None and inst.normaliser.length_independent),
    relax=lambda space: space.normaliser_property(lambda n: n.length_independent, "F independent of L"))

SOFTMAX = Hypothesis(
    "softmax", "alpha = F / sum F with log F(l) = l / T + c (c free of l) for the instance's temperature T: softmax "
    "with temperature T, decided exactly from the normaliser's log F (its name plays no part)", _softmax,
    relax=lambda space: space.softmax())

LOGITS_QK = Hypothesis(
    "logits-qk", "the logits are the query-key products l_i = <q, k_i> (the scale 1/T is in F); checked to the "
    "rounding of the dot product in float64, exactly in balls", _logits_qk)

LOGITS_BOUNDED = Hypothesis(
    "logits-bounded", "every logit lies in [-a, a] (a: instance parameter, default max_i |l_i|)",
    lambda inst: np.where(inst.present, np.abs(cast(np.ndarray, inst.logits)), 0.0).max(-1) <= inst.param("a"),
    relax=lambda space: space.bound_logits())

SIMPLEX = Hypothesis(
    "simplex", "weights are non-negative and sum to one",
    lambda inst: (np.where(inst.present, inst.alpha, 0.0).min(-1) >= 0)
    & (np.abs((inst.multiplicity * inst.alpha).sum(-1) - 1) <= 1e-9),
    relax=lambda space: space.normaliser_property(lambda n: n.positive, "weights on the simplex (F positive)"))

TOP_N = Hypothesis(
    "top-N", "I_N holds N largest weights: alpha_i <= alpha_j for i not in I_N, j in I_N",
    lambda inst: inst.is_top_n, relax=lambda space: space.top_n())

L_AT_LEAST_2 = Hypothesis(
    "L>=2", "at least two tokens (N/(L-1) is defined)", lambda inst: _all(inst, inst.L >= 2), formula=sp.Ge(L, 2),
    relax=lambda space: space.require_length(2))

SPHERE_FEASIBLE = Hypothesis(
    "assumptions-1-2", "Assumption 1 (x_i uniform on the sphere of radius M) and Assumption 2 "
    "(||x_i - x_j|| >= delta) with delta <= 2M (the diameter of the sphere); the expectation draws x from that law",
    lambda inst: 2 * inst.param("M") >= inst.param("delta"), formula=sp.Le(delta, 2 * M))

INDEPENDENT_HEADS = Hypothesis(
    "independent-heads", "each head covers each token independently, with probability p (the coverage is "
    "computed by enumerating the outcomes of H independent heads: it holds by construction)",
    lambda inst: _all(inst, True))

UNIT_DIRECTION = Hypothesis(
    "unit-direction", "the finite-difference direction v has unit Euclidean norm (Fig. 4's g(T, eps))",
    lambda inst: np.abs(np.sqrt((inst.multiplicity * inst.arrays["v"] ** 2).sum(-1)) - 1.0) <= 1e-12)


# -- parameter domains ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Domain:
    """The allowed values of one parameter: ``formula`` in the paper's symbols, ``check`` on a batch."""

    name: str
    text: str
    formula: sp.Basic
    check: Callable[[Instance], np.ndarray]


def _finite(inst: Instance, name: str) -> np.ndarray:
    return np.isfinite(inst.param(name))


def _positive(name: str) -> Callable[[Instance], np.ndarray]:
    return lambda inst: _finite(inst, name) & (inst.param(name) > 0)


def _nonnegative(name: str) -> Callable[[Instance], np.ndarray]:
    return lambda inst: _finite(inst, name) & (inst.param(name) >= 0)


def _temperature(inst: Instance) -> np.ndarray:
    """``T > 0``, and ``T`` is the normaliser's own temperature where the normaliser has one."""
    T = inst.param("T")
    ok = np.isfinite(T) & (T > 0)
    own = None if inst.normaliser is None else inst.normaliser.params.get("T")
    return ok if own is None else ok & (T == np.broadcast_to(np.asarray(own, dtype=np.float64), T.shape))


def _heads(inst: Instance) -> np.ndarray:
    H_ = inst.param("H")
    return (H_ == np.round(H_)) & (H_ >= 1) & (H_ <= MAX_HEADS_ENUMERATED)


def _probability(inst: Instance) -> np.ndarray:
    p_ = inst.param("p")
    return (p_ >= 0) & (p_ <= 1)


DOMAIN_PREFIX = "domain("
#: parameter name -> its domain (what a statement using the parameter assumes of it)
DOMAINS: dict[str, Domain] = {d.name: d for d in (
    Domain("L", "L >= 1 tokens (every instance has one)", sp.Ge(L, 1), lambda inst: _all(inst, inst.L >= 1)),
    Domain("N", "1 <= N <= L selected tokens", sp.And(sp.Ge(N, 1), sp.Le(N, L)),
           lambda inst: _all(inst, inst.N is not None and 1 <= inst.N <= inst.L)),
    Domain("T", "T > 0, equal to the normaliser's temperature where it has one", sp.Gt(T, 0), _temperature),
    Domain("eps", "eps > 0", sp.Gt(eps, 0), _positive("eps")),
    Domain("H", f"H a whole number of heads, 1 <= H <= {MAX_HEADS_ENUMERATED} (the enumeration's limit)",
           sp.And(sp.Ge(H, 1), sp.Le(H, MAX_HEADS_ENUMERATED)), _heads),
    Domain("p", "0 <= p <= 1 (a probability)", sp.And(sp.Ge(p, 0), sp.Le(p, 1)), _probability),
    Domain("M", "M > 0", sp.Gt(M, 0), _positive("M")),
    Domain("delta", "delta >= 0", sp.Ge(delta, 0), _nonnegative("delta")),
    Domain("r", "r > 0", sp.Gt(r, 0), _positive("r")),
    Domain("a", "a >= 0", sp.Ge(a, 0), _nonnegative("a")),
    Domain("kappa", "kappa > 0", sp.Gt(kappa, 0), _positive("kappa")),
    Domain("C_H", "C_H > 0", sp.Gt(C_H, 0), _positive("C_H")),
)}
#: parameters a quantity reads besides the statement's own symbols, by what it needs (theory.quantities.spec.NEEDS)
NEED_PARAMETERS: dict[str, tuple[str, ...]] = {"sphere": ("M", "delta", "r"), "fd": ("eps",), "heads": ("p", "H")}


def domain_id(name: str) -> str:
    return f"{DOMAIN_PREFIX}{name})"


def is_domain(hypothesis_id: str) -> bool:
    return hypothesis_id.startswith(DOMAIN_PREFIX)


@functools.cache
def domain_hypothesis(name: str) -> Hypothesis:
    """The hypothesis ``domain(name)``: the parameter lies in :data:`DOMAINS` ``[name]``.

    An instance without the parameter has nothing to check here: a relation or quantity that reads it
    raises naming it (and ``L``, ``N`` are always there).
    """
    d = DOMAINS[name]

    def check(inst: Instance) -> np.ndarray:
        if name not in ("L", "N") and name not in inst.params:
            return _all(inst, True)
        return d.check(inst)

    return Hypothesis(domain_id(name), f"parameter domain: {d.text}", check, formula=d.formula,
                      relax=lambda space: space.parameter_formula(d.formula))


def domain_hypotheses(parameters: Iterable[str]) -> tuple[Hypothesis, ...]:
    """The domain hypotheses of the parameters that have one, in the order of :data:`DOMAINS`."""
    used = set(parameters)
    return tuple(domain_hypothesis(name) for name in DOMAINS if name in used)
