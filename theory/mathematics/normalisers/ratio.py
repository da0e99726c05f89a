"""Ratio normalisers ``alpha_i = F(l_i) / sum_j F(l_j)`` (paper eq. 3), each generated from one ``log F``.

A ratio normaliser is one sympy expression for ``log F(l; theta, L)``: its float weights and closed-form Jacobian
(Lemma 2) are generated numpy kernels, its torch form a lambdified expression, its ball form ``log F`` evaluated in
interval arithmetic, its relaxed form ``log F`` itself; the hypotheses it satisfies (F positive, F independent of
L) are computed from it, never declared by hand. A :class:`RatioSpec` is the specification: a name, ``log F`` and
the parameters (:class:`~attnbounds.theory.mathematics.normalisers.spec.Param`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, overload

import numpy as np
import sympy as sp
from sympy.printing.lambdarepr import LambdaPrinter

from attnbounds.theory.mathematics.errors import InvalidArgument, NotApplicable
from attnbounds.theory.mathematics.intervals import Ball, BallEvaluator, Ops
from attnbounds.theory.mathematics.normalisers.spec import (FORMS, TEMPERATURE, BallContext, Normaliser, NormaliserSpec,
                                                            Param, check_logits, column, first_value, length,
                                                            multiplicity)
from attnbounds.theory.mathematics.normalisers.symbolic import (L_sym, NUMPY_MODULES, derivative, l_sym, np_printer,
                                                                sigmoid, softplus, stable_log, torch_modules)
from attnbounds.theory.mathematics.validation import nonnegative

if TYPE_CHECKING:
    from torch import Tensor


@functools.lru_cache(maxsize=256)
def _kernels(log_F: sp.Expr, names: tuple[str, ...]) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    """Generated numpy kernels for ``log F`` and ``(log F)'``, cached per expression."""
    pos = {sp.Symbol(n): sp.Symbol(n, positive=True) for n in names}
    expr = log_F.subs(pos)
    args = (l_sym, L_sym, *(pos[sp.Symbol(n)] for n in names))
    f = sp.lambdify(args, stable_log(expr), modules=NUMPY_MODULES, printer=np_printer())
    df = sp.lambdify(args, derivative(expr, l_sym), modules=NUMPY_MODULES, printer=np_printer())
    return f, df


class RatioNormaliser(Normaliser):
    """``alpha_i = F(l_i) / sum_j F(l_j)`` with ``log F`` given as a sympy expression.

    ``log_F`` may contain ``l`` (:data:`l_sym`), ``L`` (:data:`L_sym`) and the parameter
    symbols named in ``values``. Positive F: F = exp(log_F) > 0 wherever ``log_F`` is finite, so
    positivity is decided by whether ``log_F`` is real-valued for all real ``l`` (checked by sympy,
    then on a probe grid).
    """

    def __init__(self, name: str, log_F: sp.Expr, values: dict[str, Any] | None = None):
        self.name = name
        self.log_F = sp.sympify(log_F)
        self.values = dict(values or {})

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.values)

    def _with(self, params: dict[str, Any]) -> "Normaliser":
        return RatioNormaliser(self.name, self.log_F, params)

    # -- generated kernels ---------------------------------------------------------------
    @functools.cached_property
    def _symbols(self) -> tuple[sp.Symbol, ...]:
        names = sorted(self.values)
        return (l_sym, L_sym, *(sp.Symbol(n, positive=True) for n in names))

    def _subs_symbols(self) -> sp.Expr:
        # parameters are declared positive so that sympy can reason about the sign of F
        return self.log_F.subs({sp.Symbol(n): sp.Symbol(n, positive=True) for n in self.values})

    @functools.cached_property
    def _expr(self) -> sp.Expr:
        return stable_log(self._subs_symbols())

    @property
    def _log_F_np(self) -> Callable[..., np.ndarray]:
        return _kernels(self.log_F, tuple(sorted(self.values)))[0]

    @property
    def _dlog_F_np(self) -> Callable[..., np.ndarray]:
        return _kernels(self.log_F, tuple(sorted(self.values)))[1]

    def _args(self, L: int) -> list[Any]:
        return [L, *(column(self.values[n]) for n in sorted(self.values))]

    def log_F_values(self, logits: Any, L: int | None = None) -> np.ndarray:
        """``log F(l_i)`` for a batch, shape ``(B, K)``; ``L`` the context length (default: the columns)."""
        lg = check_logits(logits)
        out = self._log_F_np(lg, *self._args(lg.shape[1] if L is None else L))
        return np.broadcast_to(np.asarray(out, dtype=np.float64), lg.shape).copy()

    def dlog_F_values(self, logits: Any, L: int | None = None) -> np.ndarray:
        """``g_i = d log F / d l`` at each logit, shape ``(B, K)``."""
        lg = check_logits(logits)
        out = self._dlog_F_np(lg, *self._args(lg.shape[1] if L is None else L))
        return np.broadcast_to(np.asarray(out, dtype=np.float64), lg.shape).copy()

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """Stable ``exp(log F_i - max_j log F_j) / sum_j m_j exp(log F_j - max log F)`` (``m_j`` the counts)."""
        lg = check_logits(logits)
        lf = self.log_F_values(lg, length(lg, counts))
        mult = multiplicity(lg, counts)
        present = mult > 0
        if np.any(np.isnan(lf) & present) or np.any((lf == np.inf) & present):
            raise NotApplicable(f"{self!r}: log F is not finite on these logits (F <= 0 or overflow)")
        if np.any(np.all((lf == -np.inf) | ~present, axis=-1)):
            raise NotApplicable(f"{self!r}: F vanishes on every token of some row, weights undefined")
        top = np.where(present, lf, -np.inf).max(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.where(present, np.exp(lf - top), 0.0)
        return e / (mult * e).sum(axis=-1, keepdims=True)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``J = (diag(alpha) - alpha alpha^T) diag(g)`` with ``g = (log F)'`` (Lemma 2)."""
        a = self.weights(logits)
        g = self.dlog_F_values(logits)
        with np.errstate(invalid="ignore"):
            ag = np.where(a > 0, a * g, 0.0)  # F = 0 tokens (ReLU) carry no gradient
        J = -a[:, :, None] * ag[:, None, :]
        idx = np.arange(a.shape[1])
        J[:, idx, idx] += ag
        return J

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        f = sp.lambdify(self._symbols, self._expr, modules=torch_modules(), printer=LambdaPrinter({"strict": False}))
        lg = logits if logits.ndim == 2 else logits[None, :]
        L = float(lg.shape[1]) if counts is None else float(counts[0].sum())
        args = [torch.tensor(L, dtype=lg.dtype)]
        for n in sorted(self.values):
            v = torch.as_tensor(np.asarray(self.values[n], dtype=np.float64), dtype=lg.dtype)
            args.append(v if v.ndim == 0 else v[:, None])
        lf = f(lg, *args) + torch.zeros_like(lg)
        if counts is None:
            return torch.softmax(lf, dim=-1)
        m = torch.as_tensor(counts, dtype=lg.dtype)
        return torch.softmax(lf + torch.log(m), dim=-1) / m.clamp(min=1.0)

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """``F_k / sum_j m_j F_j`` from ``log F`` on balls, F taken relative to the column of the largest float
        ``log F``: ``exp(log F_j - log F_r)``, exactly 1 on the columns whose given logit equals that column's (equal
        logits, equal F), so that one token, or equal logits, give weights without rounding (a strict bound's
        equality case is then decided)."""
        ops = ex.ops
        lf = log_F(ops, self, ex.length, logits)
        if ops.name not in ("arb", "mpmath"):  # symbolic counts (limits): no float to pick a column by
            F = ops.map(ops.exp, lf)
            return ex.share(F, ex.weighted_total(F))
        # ties are read from the instance's own given logits (exact doubles), never from shifted ones
        given = ex.inst.logits[0] if ex.logit_source == "given" and logits is ex.logits and ex.inst.logits is not None \
            else None
        lf = np.atleast_1d(lf)
        approx = np.array([ops.upper_float(v) for v in lf])
        r = int(np.argmax(np.where(np.isfinite(approx), approx, -np.inf)))
        one = ops.num(1)
        F = np.array([one if given is not None and given[j] == given[r] else ops.exp(lf[j] - lf[r])
                      for j in range(len(lf))], dtype=object)
        return F / ex.weighted_total(F)

    # -- computed hypotheses ---------------------------------------------------------------
    @functools.cached_property
    def length_independent(self) -> bool:
        return L_sym not in self.log_F.free_symbols

    @functools.cached_property
    def positive(self) -> bool:
        """F = exp(log F) > 0 iff log F is real-valued (finite) for every real l."""
        expr = self._subs_symbols()
        if expr.is_real is True and not expr.has(sp.zoo, sp.oo, -sp.oo, sp.nan):
            return True
        probe = np.concatenate([-np.logspace(-3, 3, 61)[::-1], [0.0], np.logspace(-3, 3, 61)])
        with np.errstate(all="ignore"):
            vals = self.log_F_values(np.tile(probe, (1, 1)))
        return bool(np.all(np.isfinite(vals)))

    @property
    def _critical_points(self) -> np.ndarray:
        """Real zeros of ``(log F)'`` (empty when its sign is constant); requires scalar parameters."""
        if any(np.ndim(v) for v in self.values.values()):
            raise InvalidArgument("Lemma 1's F range needs scalar normaliser parameters, got a per-instance array")
        return _critical_points(self.log_F, tuple(sorted((k, float(v)) for k, v in self.values.items())))

    def log_F_range(self, a: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(log min F, log max F)`` on ``[-a, a]`` for each bound ``a`` (Lemma 1's constants).

        The extrema lie at the endpoints or at real zeros of ``(log F)'``, found once by sympy.
        """
        if not self.length_independent:
            raise InvalidArgument(f"{self!r} depends on L: Lemma 1's F range is not defined for it")
        a = np.atleast_1d(np.asarray(nonnegative("a", a), dtype=np.float64))
        crit = self._critical_points
        pts = np.concatenate([-a[:, None], a[:, None], np.broadcast_to(crit, (a.size, crit.size))], axis=1)
        inside = np.abs(pts) <= a[:, None]
        lf = self.log_F_values(np.clip(pts, -a[:, None], a[:, None]))
        return np.where(inside, lf, np.inf).min(-1), np.where(inside, lf, -np.inf).max(-1)


def log_F_map(normaliser: Normaliser | None) -> RatioNormaliser | None:
    """The ratio normaliser whose ``log F`` kernels give a map's tokens ``log F`` and ``(log F)'``: the map itself when
    it is ``F / sum F``, an element-wise map's own F (:attr:`Normaliser.elementwise`: its weights are F, not F over
    their sum, but a token's log F and slope read alike), else None."""
    if isinstance(normaliser, RatioNormaliser):
        return normaliser
    if normaliser is not None and normaliser.elementwise and normaliser.has("relaxed"):
        return RatioNormaliser(normaliser.name, getattr(normaliser, FORMS["relaxed"]), dict(normaliser.params))
    return None


@functools.lru_cache(maxsize=256)
def _critical_points(log_F: sp.Expr, values: tuple[tuple[str, float], ...]) -> np.ndarray:
    expr = log_F.subs({sp.Symbol(n): sp.Symbol(n, positive=True) for n, _ in values})
    d = sp.diff(stable_log(expr), l_sym).subs({sp.Symbol(n, positive=True): sp.Rational(v) for n, v in values})
    if d.is_positive or d.is_negative or d.is_zero:  # cheap: decided from the factors' assumptions
        return np.empty(0)
    if d.is_polynomial(l_sym):
        return np.array([float(r) for r in sp.Poly(d, l_sym).real_roots()])
    signed = sp.simplify(d.rewrite(sp.exp))  # slow: only when the factors did not decide the sign
    if signed.is_positive or signed.is_negative:
        return np.empty(0)
    raise InvalidArgument(f"cannot locate the extrema of F={sp.exp(log_F)}: (log F)' = {d} is neither "
                          "of constant sign nor a polynomial in l")


# -- log F on balls ----------------------------------------------------------------------------------
def _log_F_symbol(expr: sp.Expr) -> sp.Symbol:
    return next((s for s in expr.free_symbols if s.name == "l"), l_sym)


def _ratio_env(ops: Ops, normaliser: RatioNormaliser, L: Any) -> dict[str, Any]:
    """Parameter values of a ratio normaliser as exact balls (plus ``L``, an integer or a ball)."""
    return {"L": ops.num(L) if isinstance(L, int) else L,
            **{name: ops.decimal(first_value(v)) for name, v in normaliser.values.items()}}


@functools.lru_cache(maxsize=64)
def _log_F_expr(log_F_expr: sp.Expr, derivative_form: bool) -> sp.Expr:
    return derivative(log_F_expr, _log_F_symbol(log_F_expr)) if derivative_form else log_F_expr


@overload
def log_F(ops: Ops, normaliser: RatioNormaliser, L: Any, l: np.ndarray, derivative: bool = False) -> np.ndarray: ...
@overload
def log_F(ops: Ops, normaliser: RatioNormaliser, L: Any, l: Ball, derivative: bool = False) -> Ball: ...


def log_F(ops: Ops, normaliser: RatioNormaliser, L: Any, l: Any, derivative: bool = False) -> Any:
    """``log F(l)`` (or ``(log F)'(l)``) on balls, evaluated from the normaliser's sympy expression."""
    expr = _log_F_expr(normaliser.log_F, derivative)
    env = _ratio_env(ops, normaliser, L)
    env["l"] = l
    value = BallEvaluator(ops, env)(expr)
    if not isinstance(value, np.ndarray) and isinstance(l, np.ndarray):
        value = np.array([value] * len(l), dtype=object)  # expression constant in l
    return value


# -- specifications ----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class RatioSpec(NormaliserSpec):
    """A ratio normaliser's specification: its name, ``log F`` and parameters; calling it builds the
    :class:`RatioNormaliser` (every parameter checked on its domain, missing ones at their defaults)."""

    log_F: sp.Expr = sp.S.Zero

    def __call__(self, **params: Any) -> RatioNormaliser:
        known = {p.name for p in self.parameters}
        for name in params:
            if name not in known:
                raise TypeError(f"{self.name}() got an unexpected keyword argument {name!r}")
        return RatioNormaliser(self.name, self.log_F,
                               {p.name: p.check(params.get(p.name, p.default)) for p in self.parameters})


_T = sp.Symbol("T", positive=True)

SOFTMAX = RatioSpec("softmax", (TEMPERATURE,), "paper eq. (3) with F = exp(l / T), T = sqrt(d) usually", l_sym / _T)
SOFTPLUS = RatioSpec("softplus", (TEMPERATURE, Param("c", 0.1, (1e-3, 10.0), log=True)),
                     "F = softplus(l / T) + c, positive for c > 0", sp.log(softplus(l_sym / _T) + sp.Symbol("c")))
EXP_POLY = RatioSpec("exp_poly", (TEMPERATURE, Param("b", 0.1, (1e-4, 10.0), log=True, stress=(0.05, 1.0))),
                     "F = exp(l / T - b l^2): positive, not monotone (its maximum inside a moderate [-a, a])",
                     l_sym / _T - sp.Symbol("b") * l_sym**2)
SHIFTED_SIGMOID = RatioSpec("shifted_sigmoid",
                            (TEMPERATURE, Param("shift", 0.0, (-10.0, 10.0), log=False, positive=False)),
                            "F = sigmoid(l / T - shift): positive, bounded",
                            sp.log(sigmoid(l_sym / _T - sp.Symbol("shift"))))
SSMAX = RatioSpec("ssmax", (TEMPERATURE, Param("s", 0.4, (0.05, 2.0), log=True)),
                  "Scalable-Softmax (Nakanishi 2025): F = exp(s log(L) l / T), depends on L (breaks Lemma 1)",
                  sp.Symbol("s") * sp.log(L_sym) * l_sym / _T)


def softmax(T: Any = 1.0) -> RatioNormaliser:
    """Softmax with temperature: ``F(l) = exp(l / T)`` (paper eq. 3 with ``T = sqrt(d)`` usually)."""
    return SOFTMAX(T=T)


def softplus_shift(c: float = 0.1, T: Any = 1.0) -> RatioNormaliser:
    """``F(l) = softplus(l / T) + c``, positive for ``c > 0``."""
    return SOFTPLUS(c=c, T=T)


def exp_poly(b: float = 0.1, T: Any = 1.0) -> RatioNormaliser:
    """``F(l) = exp(l / T - b l^2)``: exponential of a polynomial, positive, not monotone."""
    return EXP_POLY(b=b, T=T)


def shifted_sigmoid(shift: float = 0.0, T: Any = 1.0) -> RatioNormaliser:
    """``F(l) = sigmoid(l / T - shift)``: positive, bounded."""
    return SHIFTED_SIGMOID(shift=shift, T=T)


def scalable_softmax(s: float = 0.4, T: Any = 1.0) -> RatioNormaliser:
    """Scalable-Softmax (Nakanishi 2025): ``F(l) = exp(s log(L) l / T)``; depends on L (breaks Lemma 1)."""
    return SSMAX(s=s, T=T)
