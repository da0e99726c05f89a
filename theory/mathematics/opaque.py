"""Min, Max and Abs as opaque sympy functions, with their interval forms and derivatives.

sympy re-simplifies its own ``Min``, ``Max`` and ``Abs`` whenever it rebuilds an expression (substitution,
``together``, ``expand``), at a cost exponential in their size. These stay as they are; each carries its interval
form (``ball_form``, read by :class:`~attnbounds.theory.mathematics.intervals.BallEvaluator`) and its derivative (``fdiff``:
the step and sign functions, themselves with interval forms), for the limit analysis' mean-value forms and the
relaxation prover's monotonicity tests.
"""

from __future__ import annotations

from typing import Any

import sympy as sp

from attnbounds.theory.mathematics.intervals import Ops


def _jump(ops: Ops, x: Any, below: int) -> Any:
    """1 for x > 0, ``below`` for x < 0, and the hull of both where the ball of x holds 0."""
    if ops.positive(x):
        return ops.num(1)
    if ops.positive(-x):
        return ops.num(below)
    return ops.hull(ops.num(below), ops.num(1))


class Step(sp.Function):
    """Heaviside step: 1 for x > 0, 0 for x < 0, [0, 1] at 0."""

    nargs = 1
    ball_form = staticmethod(lambda ops, x: _jump(ops, x, 0))

    def _eval_evalf(self, prec: int) -> sp.Expr:
        return sp.Heaviside(self.args[0], sp.Rational(1, 2))._eval_evalf(prec)


class Sign(sp.Function):
    """Sign: 1 for x > 0, -1 for x < 0, [-1, 1] at 0."""

    nargs = 1
    ball_form = staticmethod(lambda ops, x: _jump(ops, x, -1))

    def _eval_evalf(self, prec: int) -> sp.Expr:
        return sp.sign(self.args[0])._eval_evalf(prec)


class OMax(sp.Function):
    """max(x, y)."""

    nargs = 2
    ball_form = staticmethod(lambda ops, x, y: ops.max2(x, y))

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        a, b = self.args
        return Step(a - b) if argindex == 1 else Step(b - a)

    def _eval_evalf(self, prec: int) -> sp.Expr:
        return sp.Max(*self.args)._eval_evalf(prec)


class OMin(sp.Function):
    """min(x, y)."""

    nargs = 2
    ball_form = staticmethod(lambda ops, x, y: ops.min2(x, y))

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        a, b = self.args
        return Step(b - a) if argindex == 1 else Step(a - b)

    def _eval_evalf(self, prec: int) -> sp.Expr:
        return sp.Min(*self.args)._eval_evalf(prec)


class OAbs(sp.Function):
    """|x|."""

    nargs = 1
    ball_form = staticmethod(lambda ops, x: ops.abs(x))

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return Sign(self.args[0])

    def _eval_evalf(self, prec: int) -> sp.Expr:
        return sp.Abs(self.args[0])._eval_evalf(prec)


def transparent(expr: sp.Expr) -> sp.Expr:
    """``expr`` with the opaque functions as sympy's own (``Abs``, ``Max``, ...): for the numerical tools that
    translate an expression by its functions' names (``nsolve``, ``lambdify``), which know no opaque one."""
    return expr.replace(OAbs, sp.Abs).replace(OMax, sp.Max).replace(OMin, sp.Min).replace(Sign, sp.sign) \
        .replace(Step, lambda x: sp.Heaviside(x, sp.Rational(1, 2)))
