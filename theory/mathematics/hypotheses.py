"""The hypotheses of the paper's statements: one specification each, the way a quantity has one.

A :class:`Hypothesis` says what it assumes (``description``, ``formula`` in the paper's symbols), how a batch is
checked in float64 (``check``) and whether that check is exact, how one instance is re-checked in balls (``ball``)
or why the certified object satisfies it by construction, whether it concerns the normaliser (its form or only its
weights), the smallest ``L`` it needs, the parameter bounding the logits it states, the normaliser it names, the
cost classes it makes cheaper, and its meaning for the relaxation prover (``relax``). Search, certification,
budgets and the prover ask the specification; nothing else compares a hypothesis id.

Every check is computed from the instance's data, never from a name: the normaliser is read through
its sympy ``log F`` (softmax: ``log F = l / T + c``), the logits through the query and keys they
are said to come from, the parameters through :data:`DOMAINS`. A parameter domain is attached
automatically, as the hypothesis ``domain(<name>)``, to every statement that uses the parameter
(:func:`domain_hypotheses`); its ``formula`` is what a derivation in ``proofs/`` may assume from it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Protocol, cast

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.balls import BallInstance
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import Ops
from attnbounds.theory.mathematics.normalisers import Normaliser, RatioNormaliser
from attnbounds.theory.mathematics.quantities.multihead import MAX_HEADS_ENUMERATED

if TYPE_CHECKING:
    from attnbounds.theory.mathematics.quantities.relaxed import Space

#: a hypothesis re-checked on one instance in balls: True (certified), False (certainly fails), None (undecided);
#: the second argument names the parameters whose values the certificate computed from their defaults
BallCheck = Callable[[BallInstance, frozenset[str]], "bool | None"]
#: what a hypothesis says about the normaliser: its form (``log F``, its identity), or only the weights it gives
NormaliserPart = Literal["form", "weights"]


class NamedNormaliser(Protocol):
    """The check of a hypothesis naming one normaliser (:func:`attnbounds.theory.mathematics.callables.same_normaliser`)."""

    proto: Normaliser
    #: the torch function declared with proto's log F (:class:`attnbounds.theory.mathematics.callables.Declared`), or None
    declared: Any
    #: whether a violation on this normaliser can be certified in interval arithmetic
    certifiable: bool

    def __call__(self, inst: Instance) -> np.ndarray: ...


@dataclass(frozen=True)
class Hypothesis:
    """The specification of one hypothesis (module docstring); ``hypothesis(inst)`` is the ``(B,)`` float check.

    ``formula`` (optional) states it in the paper's symbols (``L >= 2``, ``eps > 0``): a derivation may
    assume exactly its consequences (:class:`attnbounds.proofs.framework.Assume`). How a certificate decides it
    (:attr:`certification`): ``ball`` re-checks it in balls (its float check could be fooled by rounding);
    else ``construction`` says why the certified object satisfies it once the float check passes; else ``exact``
    says the float check decides it (structural, exact rational arithmetic, comparisons of the exact input
    doubles); any other hypothesis (a user's) is checked in float64 only, and a certificate that depends on it is
    never "violated".
    """

    id: str
    description: str
    check: Callable[[Instance], np.ndarray] = field(compare=False, repr=False)
    formula: sp.Basic | None = field(default=None, compare=False, repr=False)
    #: what the hypothesis means for the relaxed space (a function of a
    #: :class:`~attnbounds.theory.mathematics.quantities.relaxed.Space`), or None: the relaxation prover does not read
    #: it, and declines statements that assume it
    relax: Callable[["Space"], None] | None = field(default=None, compare=False, repr=False)
    ball: BallCheck | None = field(default=None, compare=False, repr=False)
    exact: bool = field(default=False, compare=False, repr=False)
    construction: str | None = field(default=None, compare=False, repr=False)
    #: whether it restricts the normaliser: its ``"form"`` (a weights-only search cannot stand in for it) or only
    #: the ``"weights"`` it gives; None: neither
    normaliser: NormaliserPart | None = field(default=None, compare=False, repr=False)
    #: the smallest number of tokens an instance of it has
    min_L: int = field(default=1, compare=False, repr=False)
    #: the parameter bounding every |l_i| (``"a"``): a search with that parameter fixed draws logits inside the bound
    logit_bound: str | None = field(default=None, compare=False, repr=False)
    #: the normaliser the hypothesis names (``normaliser(<name>)``: its check), or None
    names: NamedNormaliser | None = field(default=None, compare=False, repr=False)
    #: cost classes (:data:`attnbounds.theory.mathematics.quantities.COSTS`) it makes cheaper, each to its cheaper class
    cheaper: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    #: whether it holds at every member of a growth of token classes through an instance that satisfies it (counts
    #: ``m + b t``, the same logits, vectors and parameters, the weights recomputed by the normaliser where there is
    #: one; :mod:`attnbounds.theory.deciding.limits`, which stops a growth at the upper end of the statement's range
    #: of L): a function of that instance, or None (not known: the limit analysis certifies no violation along a
    #: growth of a statement that assumes it)
    along_growths: Callable[[Instance], bool] | None = field(default=None, compare=False, repr=False)

    def __call__(self, inst: Instance) -> np.ndarray:
        return np.broadcast_to(np.asarray(self.check(inst), dtype=bool), (inst.B,))

    @property
    def certification(self) -> Literal["ball", "construction", "exact", "float"]:
        """How a certificate decides it (class docstring)."""
        if self.ball is not None:
            return "ball"
        if self.construction is not None:
            return "construction"
        return "exact" if self.exact else "float"


def smallest_length(hypotheses: Iterable[Hypothesis]) -> int:
    """The smallest ``L`` every one of ``hypotheses`` allows (1 when none asks for more)."""
    return max((h.min_L for h in hypotheses), default=1)


#: the parameters as plain real symbols (named as in the statements): formulas built from symbols that carry
#: sympy assumptions would collapse (``T > 0`` is ``True`` for a positive T) and state nothing
L, N, T, a, r, M, delta, eps, p, H, C_H, kappa = sp.symbols("L N T a r M delta eps p H C_H kappa", real=True)


def kept_along_growths(inst: Instance) -> bool:
    """Along growths of token classes: a hypothesis on the normaliser's form, the logits, the token vectors or the
    parameters holds at every member once it holds at the first (a growth copies tokens and keeps the parameters)."""
    return True


def _weights_recomputed(inst: Instance) -> bool:
    """Along growths: the weights stay on the simplex when the normaliser recomputes them from the logits for the
    grown counts; weights given without a normaliser keep their values, and their weighted sum grows past 1."""
    return inst.logits is not None and inst.normaliser is not None


def _order_kept(inst: Instance) -> bool:
    """Along growths: the order of the weights (the top-N set) is kept when the weights are given (unchanged) or
    come from an F independent of L (the order of F(l_i) at fixed logits); an F that reads L may reorder them."""
    return inst.normaliser is None or bool(inst.normaliser.length_independent)


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


# -- re-checks in balls -------------------------------------------------------------------------------
def _tie_keys(ex: BallInstance) -> list[Any]:
    """Per token, a key such that equal keys imply exactly equal weights."""
    inst = ex.inst
    if ex.weights.startswith("recomputed") and ex.logit_source == "given":
        return [float(v) for v in cast(np.ndarray, inst.logits)[0]]
    if ex.weights.startswith("recomputed"):
        return [cast(np.ndarray, inst.k)[0][i].tobytes() for i in range(ex.L)]
    return [float(v) for v in inst.alpha[0]]


def _top_n_ball(ex: BallInstance, defaulted: frozenset[str] = frozenset()) -> bool | None:
    """True if the selection certainly holds N largest weights (exact ties allowed), False if certainly not."""
    ops, sel, out = ex.ops, ex.sel, ex.out
    if len(out) == 0:
        return True
    if ops.positive(ops.minimum(ex.alpha[sel]) - ops.maximum(ex.alpha[out])):
        return True
    keys = _tie_keys(ex)
    status: bool | None = True
    for i in out:
        for j in sel:
            if keys[i] == keys[j]:
                continue
            gap = ex.alpha[j] - ex.alpha[i]
            if ops.positive(gap):
                continue
            if ops.negative(gap):
                return False
            status = None
    return status


def _simplex_ball(ex: BallInstance, defaulted: frozenset[str] = frozenset()) -> bool | None:
    ops = ex.ops
    n = ex.inst.normaliser
    if ex.weights.startswith("recomputed") and n is not None and not n.normalising:  # e.g. sigmoid attention
        total = ex.weighted_total(ex.alpha) - ops.num(1)
        if ops.certainly_zero(total):
            return True
        return False if (ops.positive(total) or ops.negative(total)) else None
    # F / sum F with F = exp(log F) > 0 or relu >= 0 from the logits, or given weights (validated >= 0)
    # renormalised: on the simplex by construction
    return True


def _logits_qk_ball(ex: BallInstance, defaulted: frozenset[str] = frozenset()) -> bool | None:
    """``l_i = <q, k_i>`` exactly: True when the certificate computes the logits from q and k (or the given
    logits equal those products exactly), False when a logit certainly differs, None when undecided."""
    if ex.logit_source == "q.k":
        return True
    if ex.q is None or ex.k is None or ex.logits is None:
        return False
    ops = ex.ops
    products = (ex.k * ex.q[None, :]).sum(axis=-1)
    status: bool | None = True
    for t in np.flatnonzero(ex.present):
        gap = products[t] - ex.logits[t]
        if ops.positive(gap) or ops.negative(gap):
            return False
        if not ops.certainly_zero(gap):
            status = None
    return status


def nonnegative_status(ops: Ops, b: Any) -> bool | None:
    """True if the ball ``b`` is certainly ``>= 0``, False if certainly ``< 0``, else None."""
    return True if ops.nonnegative(b) else (False if ops.negative(b) else None)


def _logits_bounded_ball(ex: BallInstance, defaulted: frozenset[str] = frozenset()) -> bool | None:
    """Every logit within ``[-a, a]``; True when ``a`` defaulted to ``max_i |l_i|`` (it holds by its definition)."""
    if "a" in defaulted:
        return True
    ops = ex.ops
    a = ex.param("a")
    status: bool | None = True
    for l in cast(np.ndarray, ex.logits):
        slack = a - ops.abs(l)
        if ops.negative(slack):
            return False
        if not ops.nonnegative(slack):
            status = None
    return status


# -- the paper's hypotheses -----------------------------------------------------------------------------
F_POSITIVE = Hypothesis(
    "F-positive", "alpha = F / sum F with F a smooth positive function of the logit (paper eq. 3)",
    lambda inst: _all(inst, isinstance(inst.normaliser, RatioNormaliser) and inst.normaliser.positive),
    relax=lambda space: space.normaliser_property(lambda n: n.positive, "F positive", every_F=True), exact=True,
    normaliser="form", along_growths=kept_along_growths)

F_LENGTH_INDEPENDENT = Hypothesis(
    "F-length-independent", "F does not depend explicitly on the number of tokens L (Lemma 1)",
    lambda inst: _all(inst, inst.normaliser is not None and inst.normaliser.length_independent),
    relax=lambda space: space.normaliser_property(lambda n: n.length_independent, "F independent of L", every_F=True),
    exact=True, normaliser="form", along_growths=kept_along_growths)

SOFTMAX = Hypothesis(
    "softmax", "alpha = F / sum F with log F(l) = l / T + c (c free of l) for the instance's temperature T: softmax "
    "with temperature T, decided exactly from the normaliser's log F (its name plays no part)", _softmax,
    relax=lambda space: space.softmax(), exact=True, normaliser="form",
    cheaper={"jacobian": "softmax-jacobian"},  # (log F)' is constant: the Jacobian norms are closed forms
    along_growths=kept_along_growths)

LOGITS_QK = Hypothesis(
    "logits-qk", "the logits are the query-key products l_i = <q, k_i> (the scale 1/T is in F); checked to the "
    "rounding of the dot product in float64, exactly in balls", _logits_qk, ball=_logits_qk_ball,
    relax=lambda space: space.bound_logits(by="keys"), along_growths=kept_along_growths)

LOGITS_BOUNDED = Hypothesis(
    "logits-bounded", "every logit lies in [-a, a] (a: instance parameter, default max_i |l_i|)",
    lambda inst: np.where(inst.present, np.abs(cast(np.ndarray, inst.logits)), 0.0).max(-1) <= inst.param("a"),
    relax=lambda space: space.bound_logits(), ball=_logits_bounded_ball, logit_bound="a",
    along_growths=kept_along_growths)

SIMPLEX = Hypothesis(
    "simplex", "weights are non-negative and sum to one",
    lambda inst: (np.where(inst.present, inst.alpha, 0.0).min(-1) >= 0)
    & (np.abs((inst.multiplicity * inst.alpha).sum(-1) - 1) <= 1e-9),
    relax=lambda space: space.normaliser_property(lambda n: n.positive, "weights on the simplex (F positive)"),
    ball=_simplex_ball, normaliser="weights", along_growths=_weights_recomputed)

TOP_N = Hypothesis(
    "top-N", "I_N holds N largest weights: alpha_i <= alpha_j for i not in I_N, j in I_N",
    lambda inst: inst.is_top_n, relax=lambda space: space.top_n(), ball=_top_n_ball, along_growths=_order_kept)

L_AT_LEAST_2 = Hypothesis(
    "L>=2", "at least two tokens (N/(L-1) is defined)", lambda inst: _all(inst, inst.L >= 2), formula=sp.Ge(L, 2),
    relax=lambda space: space.require_length(2), exact=True, min_L=2, along_growths=kept_along_growths)

SPHERE_FEASIBLE = Hypothesis(
    "assumptions-1-2", "Assumption 1 (x_i uniform on the sphere of radius M) and Assumption 2 "
    "(||x_i - x_j|| >= delta) with delta <= 2M (the diameter of the sphere); the expectation draws x from that law",
    lambda inst: 2 * inst.param("M") >= inst.param("delta"), formula=sp.Le(delta, 2 * M), exact=True,
    along_growths=kept_along_growths)

INDEPENDENT_HEADS = Hypothesis(
    "independent-heads", "each head covers each token independently, with probability p (the coverage is "
    "computed by enumerating the outcomes of H independent heads: it holds by construction)",
    lambda inst: _all(inst, True),
    construction="by construction: the coverage enumerates the outcomes of independent heads",
    relax=lambda space: None,  # nothing to constrain: coverage_enum's relaxed form is the same enumeration
    along_growths=kept_along_growths)

UNIT_DIRECTION = Hypothesis(
    "unit-direction", "the finite-difference direction v has unit Euclidean norm (Fig. 4's g(T, eps))",
    lambda inst: np.abs(np.sqrt((inst.multiplicity * inst.arrays["v"] ** 2).sum(-1)) - 1.0) <= 1e-12,
    construction="float check; the certificate normalises v exactly to unit length")


# -- what a statement fixes -----------------------------------------------------------------------------
FIXED_HYPOTHESIS = "fixed-parameters"


def fixed_parameters(values: dict[str, float]) -> Hypothesis:
    """The hypothesis that the instance's parameters equal the statement's fixed values (never drawn)."""
    text = ", ".join(f"{k} = {v:g}" for k, v in sorted(values.items()))

    def check(inst: Instance) -> np.ndarray:
        ok = np.ones(inst.B, dtype=bool)
        for name, value in values.items():
            ok &= inst.param(name) == value
        return ok

    # the prover reads the statement's fixed values itself
    return Hypothesis(FIXED_HYPOTHESIS, f"parameters fixed by the statement: {text}", check,
                      relax=lambda space: None, exact=True, along_growths=kept_along_growths)


RANGES_HYPOTHESIS = "parameter-ranges"


def parameter_ranges(ranges: dict[str, tuple[float, float]]) -> Hypothesis:
    """The hypothesis that the instance's parameters (and its length ``L``) lie in the statement's closed ranges
    (the search draws inside them; an instance outside, say after shrinking, is NOT-APPLICABLE)."""
    text = ", ".join(f"{k} in [{lo:g}, {hi:g}]" for k, (lo, hi) in sorted(ranges.items()))

    def check(inst: Instance) -> np.ndarray:
        ok = np.ones(inst.B, dtype=bool)
        for name, (lo, hi) in ranges.items():
            value = inst.param(name) if name == "L" or name in inst.params else None
            if value is None:
                continue  # a parameter this instance does not carry: nothing the statement reads from it
            ok &= (value >= lo) & (value <= hi)
        return ok

    # the prover reads the statement's ranges itself; along a growth only L moves, and the limit analysis stops a
    # growth at the range's upper end of L
    return Hypothesis(RANGES_HYPOTHESIS, f"parameters within the statement's ranges: {text}", check,
                      relax=lambda space: None, exact=True, along_growths=kept_along_growths)


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


def domain_sign(name: str) -> str | None:
    """``"positive"`` when the parameter's domain (:data:`DOMAINS`) makes it ``> 0``, ``"nonnegative"`` when ``>= 0``,
    else None (no domain, or one that allows negative values), read from the domain's formula."""
    domain = DOMAINS.get(name)
    if domain is None:
        return None
    sign = None
    for rel in domain.formula.args if isinstance(domain.formula, sp.And) else (domain.formula,):
        if str(rel.lhs) != name or not rel.rhs.is_number:
            continue
        if (isinstance(rel, sp.StrictGreaterThan) and rel.rhs >= 0) or (isinstance(rel, sp.GreaterThan) and rel.rhs > 0):
            return "positive"
        if isinstance(rel, sp.GreaterThan) and rel.rhs == 0:
            sign = "nonnegative"
    return sign


def domain_id(name: str) -> str:
    return f"{DOMAIN_PREFIX}{name})"


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
                      relax=lambda space: space.parameter_formula(d.formula), exact=True,
                      along_growths=kept_along_growths)  # N <= L too: the selected classes grow by at most the total


def domain_hypotheses(parameters: Iterable[str]) -> tuple[Hypothesis, ...]:
    """The domain hypotheses of the parameters that have one, in the order of :data:`DOMAINS`."""
    used = set(parameters)
    return tuple(domain_hypothesis(name) for name in DOMAINS if name in used)
