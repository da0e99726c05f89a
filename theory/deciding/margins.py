"""Relative margins: how far an instance is from violating a statement, on a scale that separates real
violations from float rounding. The one definition the search, certification, gradient ascent and
the proofs' witnesses share.

``relative_margin(lhs, rhs, scale) = (rhs - lhs) / max(|lhs|, |rhs|, scale)`` (0 where the sides are
equal). For a statement on an instance, ``scale`` is the larger *condition magnitude* of the two
sides: the same expression with every sum replaced by the sum of the absolute values of its terms
(so ``1 - abar_N`` with ``abar_N ~ 1`` is judged against 2, not against its rounded difference), and
every quantity taken at its magnitude (its specification's ``magnitude``: the size of the numbers it
is computed from, e.g. ``||x_i|| + ||s||`` for ``||alpha_i x_i - s||``). Float rounding then moves a
relative margin by about ``L * 1e-16``. Nothing here decides a verdict: certification does.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.quantities import QUANTITIES, magnitude

if TYPE_CHECKING:
    from attnbounds.theory.mathematics.instance import Instance
    from attnbounds.theory.mathematics.statement import Evaluation, Statement

#: relative margins above ``-REAL`` are treated as possibly rounding noise when ranking candidates
REAL = 1e-9
_FIELDS = ("lhs", "rhs", "margin", "margin_lo", "margin_hi", "applicable", "strict")


def relative_margin(lhs: Any, rhs: Any, scale: Any = 0.0) -> Any:
    """``(rhs - lhs) / max(|lhs|, |rhs|, scale)``, 0 where ``lhs == rhs``, the sign of ``rhs - lhs`` (+-1)
    where a side is infinite; for numpy arrays and torch tensors alike (elementwise)."""
    if type(lhs).__module__.startswith("torch") or type(rhs).__module__.startswith("torch"):
        import torch

        size = torch.maximum(torch.maximum(lhs.abs(), rhs.abs()), torch.as_tensor(scale, dtype=lhs.dtype))
        r = torch.where(lhs == rhs, torch.zeros_like(size), (rhs - lhs) / (size + 1e-300))
        return torch.where(torch.isnan(r), torch.sign(rhs - lhs), r)
    lhs, rhs = np.asarray(lhs, dtype=np.float64), np.asarray(rhs, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        size = np.maximum(np.maximum(np.abs(lhs), np.abs(rhs)), scale)
        r = np.where(lhs == rhs, 0.0, (rhs - lhs) / size)  # type: ignore[assignment]  # r: typed Tensor by the torch branch
    return np.where(np.isnan(r), np.sign(rhs - lhs), r)


def condition_magnitude(expr: sp.Basic) -> sp.Basic:
    """``expr`` with sums of absolute values in place of sums (the size of what is being added)."""
    if isinstance(expr, sp.Number):
        return sp.Abs(expr)
    if isinstance(expr, (sp.Symbol, sp.Indexed)):
        return expr  # symbols are bound to magnitudes (non-negative) by the environment
    if isinstance(expr, sp.Add):
        return sp.Add(*(condition_magnitude(a) for a in expr.args), evaluate=False)
    if isinstance(expr, sp.Mul):
        return sp.Mul(*(condition_magnitude(a) for a in expr.args), evaluate=False)
    if isinstance(expr, sp.Pow) and expr.exp.is_number and expr.exp > 0:
        return sp.Pow(condition_magnitude(expr.base), expr.exp, evaluate=False)
    if isinstance(expr, sp.Sum):
        return sp.Sum(condition_magnitude(expr.function), *expr.limits)
    return sp.Abs(expr, evaluate=False)  # evaluating asks sympy for signs: exponential in the nesting depth


@functools.lru_cache(maxsize=512)
def compiled_magnitudes(relation: sp.Basic) -> list[tuple[Any, Any]]:
    from attnbounds.theory.mathematics.statement import Compiled, conjuncts

    return [(Compiled(condition_magnitude(c.lhs)), Compiled(condition_magnitude(c.rhs))) for c in conjuncts(relation)]


def _magnitude_env(statement: "Statement", inst: "Instance", env: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    out = {}
    for name, value in env.items():
        q = statement.bindings.get(name)
        if q is None:
            out[name] = np.abs(value) if name != "__selected_weights__" else value
            continue
        m = magnitude(q, inst)
        out[name] = np.maximum(np.abs(value), m[:, None] if m.ndim == 1 else m)
    return out


def side_values(fn: Any, env: dict[str, np.ndarray], B: int) -> np.ndarray:
    """One side of a relation evaluated on ``env``, as ``(B, tokens)`` (a scalar broadcast to every row)."""
    v = fn(env)
    return np.broadcast_to(v, (B, 1)) if v.ndim == 0 else v.reshape(B, -1)


def relative_margins(statement: "Statement", inst: "Instance", ev: "Evaluation", with_degenerate: bool = False,
                     pessimistic: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``(B,)`` relative margins of a statement (see module docstring); ``+inf`` where not applicable.

    For Monte Carlo statements the margin is the upper end of its interval (``margin_hi``), like
    :attr:`Evaluation.violated`; with ``pessimistic`` the lower end (what "clearly holds" needs). Per-token relations are judged column by column, and the smallest
    relative margin over columns and conjuncts is reported. With ``with_degenerate``, also a ``(B,)``
    mask of instances whose worst conjunct has both sides zero up to rounding (below ``1e-12`` of
    their condition magnitude): "0 <= 0" says nothing about tightness.
    """
    rel: np.ndarray | None
    degenerate: np.ndarray | None
    full_B = inst.B
    idx = np.flatnonzero(ev.applicable)
    if idx.size < full_B:  # like Statement.evaluate: quantities only where the hypotheses hold
        rel, degenerate = np.full(full_B, np.inf), np.zeros(full_B, dtype=bool)
        if idx.size:
            sub = dataclasses.replace(ev, **{f: getattr(ev, f)[idx] for f in _FIELDS if getattr(ev, f) is not None},
                                      failed_hypotheses=tuple(ev.failed_hypotheses[i] for i in idx))
            rel[idx], degenerate[idx] = relative_margins(statement, inst.take(idx), sub, with_degenerate=True,
                                                         pessimistic=pessimistic)
        return (rel, degenerate) if with_degenerate else rel
    inst = statement.prepare(inst)
    estimates = any(QUANTITIES[q].estimate for q in statement.bindings.values())
    rel = degenerate = None
    for side in (("lo", "hi") if estimates else ("mid",)):
        env = statement.env(inst, side)
        menv = _magnitude_env(statement, inst, env)
        worst = np.full(inst.B, np.inf)
        worst_deg = np.zeros(inst.B, dtype=bool)
        for (lhs, rhs, cols), (lmag_fn, rmag_fn) in zip(statement.sides(env, inst), compiled_magnitudes(statement.relation)):
            lm, rm = side_values(lmag_fn, menv, inst.B), side_values(rmag_fn, menv, inst.B)
            cond = np.maximum(lm, rm)
            r = relative_margin(lhs, rhs, cond)
            with np.errstate(invalid="ignore"):
                size = np.maximum(np.abs(lhs), np.abs(rhs))
                deg = ~(size > 1e-12 * np.maximum(size, cond))
            r, deg = np.broadcast_arrays(r, deg)
            if cols is not None:
                r = np.where(cols, r, np.inf)
            k = np.argmin(r, axis=-1)[:, None]
            rk, dk = np.take_along_axis(r, k, -1)[:, 0], np.take_along_axis(deg, k, -1)[:, 0]
            worst_deg = np.where(rk < worst, dk, worst_deg)
            worst = np.minimum(worst, rk)
        if rel is None:
            rel, degenerate = worst, worst_deg
        else:  # the upper end of the interval is the larger of the two (the lower end the smaller)
            take = (worst < rel) if pessimistic else (worst > rel)
            degenerate = np.where(take, worst_deg, cast(np.ndarray, degenerate))  # set with rel
            rel = np.where(take, worst, rel)
    assert rel is not None and degenerate is not None
    rel = np.where(ev.applicable, rel, np.inf)
    return (rel, degenerate & ev.applicable) if with_degenerate else rel
