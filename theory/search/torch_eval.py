"""A differentiable (torch) evaluator for statements, for gradient search.

Mirrors the float evaluator: torch versions of the quantities in :data:`TORCH_QUANTITIES`
(same names and meanings as :mod:`theory.quantities`; selection masks are taken from the
current weights and held fixed within a step), and each side of the statement's sympy relation
lambdified with torch functions. It is only used to steer the search: every instance it
produces is re-evaluated by the float evaluator (and certified) before anything is reported.
"""

from __future__ import annotations

import functools
import math as mathlib
import types
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import sympy as sp

from theory.normalisers import L_sym, RatioNormaliser, _stable_log, l_sym
from theory.quantities import ENUMERATION_LIMIT, _enumerated_masks
from theory.statement import Statement, _conjuncts

_TINY = 1e-300


def _torch():
    import torch

    return torch


@dataclass
class State:
    """Tensors of one batch: weights and what they are computed from, plus parameters ``(B,)``."""

    alpha: Any
    logits: Any
    N: int
    params: dict[str, Any]
    x: Any = None
    q: Any = None
    k: Any = None
    v: Any = None
    weights_fn: Callable[[Any], Any] | None = None  # logits -> alpha (finite differences)
    log_F: Callable[[Any], Any] | None = None  # elementwise log F (Lemma 1 constants)
    dlog_F: Callable[[Any], Any] | None = None  # elementwise (log F)'
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def B(self) -> int:
        return int(self.alpha.shape[0])

    @property
    def L(self) -> int:
        return int(self.alpha.shape[1])

    @property
    def mask(self) -> Any:
        if "mask" not in self.cache:
            torch = _torch()
            order = torch.argsort(-self.alpha.detach(), dim=-1, stable=True)[:, : self.N]
            m = torch.zeros_like(self.alpha, dtype=torch.bool)
            self.cache["mask"] = m.scatter(1, order, True)
        return self.cache["mask"]

    def param(self, name: str) -> Any:
        torch = _torch()
        if name == "L":
            return torch.full((self.B,), float(self.L), dtype=torch.float64)
        if name == "N":
            return torch.full((self.B,), float(self.N), dtype=torch.float64)
        return self.params[name]


def _norm(v: Any, dim: int = -1) -> Any:
    """Euclidean norm with a finite gradient at 0."""
    return ((v * v).sum(dim) + _TINY).sqrt()


def _s(st: State) -> Any:
    return ((st.alpha * st.mask)[..., None] * st.x).sum(1)


def _d1(st: State) -> Any:
    torch = _torch()
    if st.N == st.L:
        return torch.zeros(st.B, dtype=torch.float64)
    d = _norm(st.x[:, :, None, :] - st.x[:, None, :, :])
    pair = (~st.mask)[:, :, None] & st.mask[:, None, :]
    return torch.where(pair, d, torch.full_like(d, -1.0)).flatten(1).max(-1).values


def _jensen(st: State, coefficient: str, xbar: str) -> Any:
    L, N, a, x = st.L, st.N, st.alpha, st.x
    rho = N / (L - 1)
    c = a * (1 + rho) if coefficient == "scaled" else a + rho
    xb = rho * (a[..., None] * x).sum(1) if xbar == "weighted" else x.mean(1)
    return (L - N) / L * _norm(c[..., None] * x - xb[:, None, :]).sum(-1)


def _gap(st: State) -> Any:
    torch = _torch()
    L, N = st.L, st.N
    if L <= 2 or N >= L - 1:
        return torch.zeros(st.B, dtype=torch.float64)
    y = st.alpha[..., None] * st.x
    mu = y.mean(1, keepdim=True)
    dev = ((y - mu) ** 2).sum(-1)
    ss = torch.clamp(dev.sum(-1, keepdim=True) - dev * (L / (L - 1)), min=0.0)
    fpc = N * (L - 1 - N) / (L - 2)
    return (L - N) / L * (fpc * ss / (L - 1) + _TINY).sqrt().sum(-1)


def _expected(st: State, reading: str) -> Any:
    torch = _torch()
    masks = torch.as_tensor(_enumerated_masks(st.L, st.N).astype(np.float64))  # (S, L)
    y = st.alpha[..., None] * st.x
    s = torch.einsum("sl,bld->bsd", masks, y)
    if reading == "R1":
        dist = _norm(y[:, None, :, :] - s[:, :, None, :])  # (B, S, L)
        return (dist * (1 - masks)[None]).sum(-1).mean(-1)
    return _norm(y.sum(1)[:, None, :] - 2 * s).mean(-1)


def _jacobian(st: State) -> Any:
    torch = _torch()
    if "J" not in st.cache:
        a, g = st.alpha, st.dlog_F(st.logits)
        st.cache["J"] = (torch.diag_embed(a) - a[:, :, None] * a[:, None, :]) * g[:, None, :]
    return st.cache["J"]


def _spectral(st: State) -> Any:
    torch = _torch()
    J = _jacobian(st)
    return torch.linalg.svdvals(J)[:, 0]


def _c_range(st: State) -> tuple[Any, Any]:
    torch = _torch()
    a = st.param("a") if "a" in st.params else st.logits.abs().max(-1).values
    ends = torch.stack([st.log_F(-a[:, None])[:, 0], st.log_F(a[:, None])[:, 0]], -1)
    return ends.min(-1).values, ends.max(-1).values


def _g_fd(st: State) -> Any:
    eps = st.param("eps")
    v = st.v / _norm(st.v)[:, None]
    return _norm(st.weights_fn(st.logits + eps[:, None] * v) - st.alpha) / eps


def _delta_own(st: State) -> Any:
    return _norm(st.q)[:, None] * _norm(st.k)


TORCH_QUANTITIES: dict[str, Callable[[State], Any]] = {
    "alpha_i": lambda st: st.alpha,
    "alpha_min": lambda st: st.alpha.min(-1).values,
    "alpha_max": lambda st: st.alpha.max(-1).values,
    "abar_N": lambda st: (st.alpha * st.mask).sum(-1),
    "logit_absmax": lambda st: st.logits.abs().max(-1).values,
    "C_1": lambda st: (lambda lo, hi: (lo - hi).exp())(*_c_range(st)),
    "C_2": lambda st: (lambda lo, hi: (hi - lo).exp())(*_c_range(st)),
    "Delta_own": _delta_own,
    "Delta_max": lambda st: _delta_own(st).max(-1).values,
    "max_norm": lambda st: (_norm(st.x) * st.mask).max(-1).values,
    "d_1": _d1,
    "dtilde_R1": lambda st: (_norm(st.alpha[..., None] * st.x - _s(st)[:, None, :]) * ~st.mask).sum(-1),
    "dtilde_R2": lambda st: _norm(((st.alpha * (1 - 2 * st.mask.double()))[..., None] * st.x).sum(1)),
    "A_norm": lambda st: (st.alpha * _norm(st.x)).sum(-1),
    "m_norm": lambda st: _norm((st.alpha[..., None] * st.x).sum(1)),
    **{f"J_{c}_{xb}": (lambda st, c=c, xb=xb: _jensen(st, c, xb)) for c in ("scaled", "printed")
       for xb in ("weighted", "mean")},
    "jensen_gap_bound": _gap,
    "E_dtilde_R1": lambda st: _expected(st, "R1"),
    "E_dtilde_R2": lambda st: _expected(st, "R2"),
    "J_spectral": _spectral,
    "J_frobenius": lambda st: _norm(_jacobian(st).flatten(1)),
    "J_row": lambda st: _norm(_jacobian(st)).max(-1).values,
    "J_entry": lambda st: _jacobian(st).abs().flatten(1).max(-1).values,
    "g_fd": _g_fd,
    "dF_max": lambda st: (st.alpha * st.dlog_F(st.logits)).abs().max(-1).values,
    "F_l2": lambda st: _norm(st.alpha),
    "dF_l2": lambda st: _norm(st.alpha * st.dlog_F(st.logits)),
    "g_absmax": lambda st: st.dlog_F(st.logits).abs().max(-1).values,
}
_EXPECTATIONS = {"E_dtilde_R1", "E_dtilde_R2"}


def supports(statement: Statement) -> bool:
    """Whether every quantity and function of the statement has a torch version here."""
    if not set(statement.bindings.values()) <= set(TORCH_QUANTITIES):
        return False
    if statement.kind == "expectation" and not set(statement.bindings.values()) & _EXPECTATIONS:
        return False
    rel = statement.relation
    return not (rel.atoms(sp.Sum) or rel.atoms(sp.Indexed) or rel.has(sp.Piecewise))


def enumerable(L: int, N: int) -> bool:
    from scipy.special import comb

    return comb(L, N, exact=True) <= ENUMERATION_LIMIT


# -- the relation -------------------------------------------------------------------------------
def _t(v: Any) -> Any:
    torch = _torch()
    return v if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=torch.float64)


def _modules() -> list[Any]:
    torch = _torch()

    def tmin(*args: Any) -> Any:
        return functools.reduce(torch.minimum, [_t(a) for a in args])

    def tmax(*args: Any) -> Any:
        return functools.reduce(torch.maximum, [_t(a) for a in args])

    funcs = {"sqrt": lambda v: torch.sqrt(_t(v)), "exp": lambda v: torch.exp(_t(v)), "log": lambda v: torch.log(_t(v))}
    math = types.SimpleNamespace(**funcs, pi=mathlib.pi, e=mathlib.e)  # the printer may write math.exp(...)
    return [{"tmin": tmin, "tmax": tmax, "tabs": lambda v: torch.abs(_t(v)), **funcs, "math": math,
             "softplus": torch.nn.functional.softplus, "sigmoid": torch.sigmoid}, "torch"]


def _printer() -> Any:
    from sympy.printing.lambdarepr import LambdaPrinter

    return LambdaPrinter({"strict": False})


_TMIN, _TMAX, _TABS = sp.Function("tmin"), sp.Function("tmax"), sp.Function("tabs")


def _for_torch(expr: sp.Expr) -> sp.Expr:
    return (expr.replace(lambda e: isinstance(e, sp.Min), lambda e: _TMIN(*e.args))
            .replace(lambda e: isinstance(e, sp.Max), lambda e: _TMAX(*e.args))
            .replace(lambda e: isinstance(e, sp.Abs), lambda e: _TABS(*e.args)))


@functools.lru_cache(maxsize=256)
def _side(expr: sp.Expr) -> tuple[tuple[str, ...], Callable[..., Any]]:
    names = tuple(sorted(str(s) for s in expr.free_symbols))
    return names, sp.lambdify([sp.Symbol(n) for n in names], _for_torch(expr), modules=_modules(), printer=_printer())


def gap(statement: Statement, st: State) -> Any:
    """Per instance the largest normalised gap ``(lhs - rhs) / (|lhs| + |rhs|)`` over conjuncts and tokens.

    Positive means violated; maximising it pushes towards (and past) equality.
    """
    torch = _torch()
    env: dict[str, Any] = {}
    for name in statement.symbols():
        q = statement.bindings.get(name)
        value = TORCH_QUANTITIES[q](st) if q is not None else st.param(name)
        env[name] = value[:, None] if value.ndim == 1 else value
    worst = None
    for c in _conjuncts(statement.relation):
        sides = []
        for expr in (c.lhs, c.rhs):
            names, fn = _side(expr)
            sides.append(_t(fn(*(env[n] for n in names))))
        lhs, rhs = torch.broadcast_tensors(*(s.reshape(st.B, -1) if s.ndim else s.expand(st.B, 1) for s in sides))
        g = ((lhs - rhs) / (lhs.abs() + rhs.abs() + _TINY)).max(-1).values
        worst = g if worst is None else torch.maximum(worst, g)
    return worst


# -- normalisers ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _log_F_fns(log_F: sp.Expr, names: tuple[str, ...]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    pos = {sp.Symbol(n): sp.Symbol(n, positive=True) for n in names}
    expr = log_F.subs(pos)
    args = (l_sym, L_sym, *(pos[sp.Symbol(n)] for n in names))
    mods, printer = _modules(), _printer()
    f = sp.lambdify(args, _for_torch(_stable_log(expr)), modules=mods, printer=printer)
    df = sp.lambdify(args, _for_torch(_stable_log(sp.simplify(sp.diff(expr, l_sym)))), modules=mods, printer=printer)
    return f, df


def ratio_fns(normaliser: RatioNormaliser, T: Any) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """Elementwise ``log F`` and ``(log F)'`` in torch, with the temperature ``T`` a ``(B,)`` tensor."""
    torch = _torch()
    names = tuple(sorted(normaliser.values))
    f, df = _log_F_fns(normaliser.log_F, names)

    def args(lg: Any) -> list[Any]:
        out = [torch.tensor(float(lg.shape[-1]), dtype=torch.float64)]
        for n in names:
            v = T if n == "T" else torch.as_tensor(np.asarray(normaliser.values[n], dtype=np.float64))
            out.append(v[:, None] if v.ndim == 1 else v)
        return out

    return (lambda lg: f(lg, *args(lg)) + torch.zeros_like(lg)), (lambda lg: df(lg, *args(lg)) + torch.zeros_like(lg))

