"""Relative margins: how far an instance is from violating a statement, on a scale that separates
real violations from float rounding.

``relative margin = margin / scale`` with ``scale`` the largest of ``|lhs|``, ``|rhs|`` and the
*condition magnitude* of each side: the same expression with every sum replaced by the sum of the
absolute values of its terms (so ``1 - abar_N`` with ``abar_N ~ 1`` is judged against 2, not
against its rounded difference), and every quantity taken at its natural magnitude (the size of
the numbers it is computed from, e.g. ``||x_i|| + ||s||`` for ``||alpha_i x_i - s||``). Float
rounding then moves a relative margin by about ``L * 1e-16``; a margin of ``-1e-17`` at an
equality case stays near zero instead of reading as a violation. Nothing here decides a verdict:
candidates with any negative float margin are passed on, and certification decides.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable

import numpy as np
import sympy as sp

from theory.instance import Instance
from theory.quantities import QUANTITIES
from theory.statement import Evaluation, Statement, _Compiled, _conjuncts

#: relative margins above ``-REAL`` are treated as possibly rounding noise when ranking candidates
REAL = 1e-9
_FIELDS = ("lhs", "rhs", "margin", "margin_lo", "margin_hi", "applicable")


def _xnorm(inst: Instance) -> np.ndarray:
    return np.sqrt(np.einsum("bld,bld->bl", inst.x, inst.x))


def _ynorm(inst: Instance) -> np.ndarray:
    return inst.alpha * _xnorm(inst)


def _top_n_sum(v: np.ndarray, n: int) -> np.ndarray:
    return -np.sort(-v, axis=-1)[:, :n].sum(-1)


def _r1_scale(inst: Instance) -> np.ndarray:
    y = _ynorm(inst)
    return y.sum(-1) + (inst.L - inst.N) * _top_n_sum(y, inst.N)


def _jensen_scale(inst: Instance) -> np.ndarray:
    xn = _xnorm(inst)
    rho = inst.N / max(inst.L - 1, 1)
    c = inst.alpha * (1 + rho) + rho
    return (c * xn).sum(-1) + inst.L * (rho * (inst.alpha * xn).sum(-1) + xn.mean(-1))


#: quantity -> the size of the numbers it is computed from (absolute rounding error ~ 1e-16 of it)
NATURAL: dict[str, Callable[[Instance], np.ndarray]] = {
    "d_1": lambda inst: _xnorm(inst).max(-1),
    "dtilde_R1": _r1_scale,
    "E_dtilde_R1": _r1_scale,
    "dtilde_R2": lambda inst: _ynorm(inst).sum(-1),
    "E_dtilde_R2": lambda inst: 3 * _ynorm(inst).sum(-1),
    "m_norm": lambda inst: _ynorm(inst).sum(-1),
    "jensen_gap_bound": _jensen_scale,
    **{f"J_{c}_{x}": _jensen_scale for c in ("scaled", "printed") for x in ("weighted", "mean")},
    "g_fd": lambda inst: 2 * np.sqrt(np.sum(inst.alpha**2, -1)) / inst.param("eps"),
}


def _magnitude(expr: sp.Basic) -> sp.Basic:
    """``expr`` with sums of absolute values in place of sums (the size of what is being added)."""
    if isinstance(expr, sp.Number):
        return sp.Abs(expr)
    if isinstance(expr, (sp.Symbol, sp.Indexed)):
        return expr  # symbols are bound to magnitudes (non-negative) by the environment
    if isinstance(expr, sp.Add):
        return sp.Add(*(_magnitude(a) for a in expr.args), evaluate=False)
    if isinstance(expr, sp.Mul):
        return sp.Mul(*(_magnitude(a) for a in expr.args), evaluate=False)
    if isinstance(expr, sp.Pow) and expr.exp.is_number and expr.exp > 0:
        return sp.Pow(_magnitude(expr.base), expr.exp, evaluate=False)
    if isinstance(expr, sp.Sum):
        return sp.Sum(_magnitude(expr.function), *expr.limits)
    return sp.Abs(expr)


@functools.lru_cache(maxsize=512)
def _compiled(relation: sp.Basic) -> list[tuple[_Compiled, _Compiled, _Compiled, _Compiled]]:
    out = []
    for c in _conjuncts(relation):
        out.append((_Compiled(c.lhs), _Compiled(c.rhs), _Compiled(_magnitude(c.lhs)), _Compiled(_magnitude(c.rhs))))
    return out


def _magnitude_env(statement: Statement, inst: Instance, env: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name, value in env.items():
        mag = np.abs(value)
        q = statement.bindings.get(name)
        if q in NATURAL:
            nat = NATURAL[q](inst)
            mag = np.maximum(mag, nat[:, None] if mag.ndim == 2 else nat)
        out[name] = mag
    return out


def _side(fn: _Compiled, env: dict[str, np.ndarray], B: int) -> np.ndarray:
    v = fn(env)
    return np.broadcast_to(v, (B, 1)) if v.ndim == 0 else v.reshape(B, -1)


def relative_margins(statement: Statement, inst: Instance, ev: Evaluation,
                     with_degenerate: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``(B,)`` relative margins (see module docstring); ``+inf`` where not applicable.

    For Monte Carlo statements the margin is the upper end of its interval (``margin_hi``),
    like :attr:`Evaluation.violated`. Per-token relations are judged token by token, and the
    smallest relative margin over tokens and conjuncts is reported. With ``with_degenerate``,
    also a ``(B,)`` mask of instances whose worst conjunct has both sides zero up to rounding
    (below ``1e-12`` of their condition magnitude): "0 <= 0" says nothing about tightness.
    """
    full_B = inst.B
    idx = np.flatnonzero(ev.applicable)
    if idx.size < full_B:  # like Statement.evaluate: quantities only where the hypotheses hold
        rel, degenerate = np.full(full_B, np.inf), np.zeros(full_B, dtype=bool)
        if idx.size:
            sub = dataclasses.replace(ev, **{f: getattr(ev, f)[idx] for f in _FIELDS},
                                      failed_hypotheses=tuple(ev.failed_hypotheses[i] for i in idx))
            rel[idx], degenerate[idx] = relative_margins(statement, inst.take(idx), sub, with_degenerate=True)
        return (rel, degenerate) if with_degenerate else rel
    inst = statement.prepare(inst)
    estimates = any(QUANTITIES[q].estimate for q in statement.bindings.values())
    sides = ("lo", "hi") if estimates else ("mid",)
    rel = degenerate = None
    for side in sides:
        env = statement._env(inst, side)
        menv = _magnitude_env(statement, inst, env)
        worst = np.full(inst.B, np.inf)
        worst_deg = np.zeros(inst.B, dtype=bool)
        for lhs_fn, rhs_fn, lmag_fn, rmag_fn in _compiled(statement.relation):
            lhs, rhs = _side(lhs_fn, env, inst.B), _side(rhs_fn, env, inst.B)
            lm, rm = _side(lmag_fn, menv, inst.B), _side(rmag_fn, menv, inst.B)
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                size = np.maximum(np.abs(lhs), np.abs(rhs))
                scale = np.maximum(size, np.maximum(lm, rm))
                r = np.where(lhs == rhs, 0.0, (rhs - lhs) / scale)
                deg = ~(size > 1e-12 * scale)
            r = np.where(np.isnan(r), np.sign(rhs - lhs), r)  # an infinite side: +-1 by its sign
            r, deg = np.broadcast_arrays(r, deg)
            k = np.argmin(r, axis=-1)[:, None]
            rk, dk = np.take_along_axis(r, k, -1)[:, 0], np.take_along_axis(deg, k, -1)[:, 0]
            better = rk < worst
            worst_deg = np.where(better, dk, worst_deg)
            worst = np.minimum(worst, rk)
        if rel is None:
            rel, degenerate = worst, worst_deg
        else:  # the upper end of the interval: the larger of the two
            degenerate = np.where(worst > rel, worst_deg, degenerate)
            rel = np.maximum(rel, worst)
    rel = np.where(ev.applicable, rel, np.inf)
    return (rel, degenerate & ev.applicable) if with_degenerate else rel
