"""The symbolic ball backend (:class:`SymbolicOps`), beside the arb and mpmath ones of
:mod:`attnbounds.theory.mathematics.intervals`: values are sympy expressions in ``t`` (a growth parameter of
:mod:`attnbounds.theory.deciding.limits`), anything that does not depend on ``t`` is computed in arb and held as a
symbol. The work it does is counted (:class:`Work`); :func:`differentiate` differentiates such expressions with
each shared subexpression once.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Iterator

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.intervals import TEXT_DIGITS, ArbOps, Ball, BallEvaluator, Ops, Unsupported
from attnbounds.theory.mathematics.opaque import OAbs, OMax, OMin

#: the variable the values depend on
t = sp.Symbol("t", nonnegative=True)


class WorkLimit(AttnBoundsError):
    """More interval work than its :class:`Work` allows (or a closed form too large to analyse)."""


@dataclass
class Work:
    """Interval work done so far (in one analysis), against ``limit``."""

    limit: int
    done: int = 0

    def spend(self, units: int) -> None:
        self.done += units
        if self.done > self.limit:
            raise WorkLimit(f"the certificate needed more than {self.limit} units of interval work (subexpressions evaluated)")


def size(expr: sp.Expr) -> int:
    """Distinct subexpressions of ``expr`` plus the references to them (a DAG: shared parts count once, each
    use once more): the work of one memoised interval evaluation."""
    seen: set[sp.Basic] = set()
    stack = [expr]
    refs = 0
    while stack:
        e = stack.pop()
        if e not in seen:
            seen.add(e)
            refs += len(e.args)
            stack.extend(e.args)
    return len(seen) + refs


def differentiate(expr: sp.Expr, x: sp.Symbol) -> sp.Expr:
    """d expr / dx by the chain rule, each distinct subexpression once (sympy's own ``diff`` walks the
    expression as a tree, exponential in the depth of shared parts)."""
    memo: dict[sp.Basic, sp.Expr] = {}
    depends: dict[sp.Basic, bool] = {}

    def on_x(e: sp.Basic) -> bool:
        if e not in depends:
            depends[e] = e == x or any(on_x(a) for a in e.args)
        return depends[e]

    def d(e: sp.Basic) -> sp.Expr:
        if e in memo:
            return memo[e]
        if not on_x(e):
            out: sp.Expr = sp.Integer(0)
        elif e == x:
            out = sp.Integer(1)
        elif isinstance(e, sp.Add):
            out = sp.Add(*[d(a) for a in e.args])
        elif isinstance(e, sp.Mul):
            args = e.args
            out = sp.Add(*[sp.Mul(*args[:k], d(a), *args[k + 1:]) for k, a in enumerate(args)])
        elif isinstance(e, sp.Pow):
            b, n = e.args
            if not on_x(n):
                out = n * b ** (n - 1) * d(b)
            else:
                out = e * (d(n) * sp.log(b) + n * d(b) / b)
        elif isinstance(e, sp.Function) and len(e.args) >= 1:
            out = sp.Add(*[e.fdiff(k + 1) * d(a) for k, a in enumerate(e.args) if on_x(a)])
        else:
            raise Unsupported(f"no derivative rule for {type(e).__name__}")
        memo[e] = out
        return out

    return d(expr)


class SymbolicOps(Ops):
    """Ball operations where values are sympy expressions in ``t``; anything that does not depend on ``t`` is
    computed in arb and held as a symbol whose ball is recorded (``consts``)."""

    name = "symbolic"

    def __init__(self, work: Work) -> None:
        self.arb = ArbOps()
        self.consts: dict[sp.Symbol, Any] = {}
        self._env: dict[str, Any] = {}  # the constants' balls by name, as BallEvaluator reads them
        self.work = work
        self._on_t: dict[sp.Basic, bool] = {}  # whether a (sub)expression depends on t, once per subexpression

    @contextlib.contextmanager
    def precision(self, bits: int) -> Iterator[None]:
        with self.arb.precision(bits):
            self.bits = bits
            yield

    # -- constants --------------------------------------------------------------------------------
    def const(self, ball: Any) -> sp.Symbol:
        name = f"_c{len(self.consts)}"
        sym = sp.Symbol(name, real=True)
        self.consts[sym] = ball
        self._env[name] = ball
        self.work.spend(1)
        return sym

    def ball(self, value: Any) -> Ball | None:
        """The arb ball of a value that does not depend on ``t`` (None when it does)."""
        if isinstance(value, sp.Symbol) and value in self.consts:
            return self.consts[value]
        expr = sp.sympify(value)
        if self.depends_on_t(expr):
            return None
        self.work.spend(size(expr))
        return BallEvaluator(self.arb, self._env)(expr)

    def depends_on_t(self, expr: sp.Basic) -> bool:
        """Whether ``expr`` holds ``t``, remembered for every subexpression: a fold of n values (a maximum over n
        columns) asks about each new node once, not about its whole tree again (``free_symbols`` walks the tree,
        which made a maximum over 900 columns quadratic)."""
        memo, stack = self._on_t, [expr]
        while stack:
            e = stack[-1]
            if e in memo:
                stack.pop()
                continue
            todo = [a for a in e.args if a not in memo]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            memo[e] = e == t or any(memo[a] for a in e.args)
        return memo[expr]

    def _fold(self, fn_ball: Any, fn_sym: Any, *values: Any) -> Ball:
        args = [self.ball(v) for v in values]
        if all(a is not None for a in args):
            return self.const(fn_ball(*args))
        self.work.spend(1)
        return fn_sym(*values)

    def _decide(self, fn: Any, b: Any) -> bool:
        ball = self.ball(b)
        if ball is None:
            raise Unsupported("a decision on a value that depends on L: no closed form along this family")  # record text: kept
        return bool(fn(ball))

    # -- the Ops interface ---------------------------------------------------------------------------
    def to_fraction(self, b: Any) -> Any:
        return self.arb.to_fraction(self._need(b))

    def _need(self, b: Any) -> Ball:
        ball = self.ball(b)
        if ball is None:
            raise Unsupported("this step needs a number, not an expression in L")
        return ball

    def num(self, value: float | int) -> Ball:
        if isinstance(value, (int, np.integer)):
            return sp.Integer(int(value))
        return self.const(self.arb.num(value))

    def rational(self, p: int, q: int) -> Ball:
        return sp.Rational(int(p), int(q))

    def dyadic(self, man: int, exp: int) -> Ball:
        return self.const(self.arb.dyadic(man, exp))

    def hull(self, lo: Any, hi: Any) -> Ball:
        return self.const(self.arb.hull(self._need(lo), self._need(hi)))

    def pi(self) -> Ball:
        return sp.pi

    def lower(self, b: Any) -> Ball:
        return self.const(self.arb.lower(self._need(b)))

    def upper(self, b: Any) -> Ball:
        return self.const(self.arb.upper(self._need(b)))

    def positive(self, b: Any) -> bool:
        return self._decide(self.arb.positive, b)

    def nonnegative(self, b: Any) -> bool:
        return self._decide(self.arb.nonnegative, b)

    def is_finite(self, b: Any) -> bool:
        ball = self.ball(b)
        return True if ball is None else self.arb.is_finite(ball)

    def exact(self, b: Any) -> bool:
        ball = self.ball(b)
        return False if ball is None else self.arb.exact(ball)

    def _to_float(self, b: Any) -> float:
        return self.arb._to_float(self._need(b))

    # (Ops' own compare a double with the value in Python: a constant held as a symbol makes that a sympy Relational)
    def lower_float(self, b: Any) -> float:
        return self.arb.lower_float(self._need(b))

    def upper_float(self, b: Any) -> float:
        return self.arb.upper_float(self._need(b))

    def mid_rad(self, b: Any) -> tuple[float, float]:
        return self.arb.mid_rad(self._need(b))

    def text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        ball = self.ball(b)
        return self.arb.text(ball, digits) if ball is not None else str(b)

    def exp(self, b: Any) -> Ball:
        return self._fold(self.arb.exp, sp.exp, b)

    def log(self, b: Any) -> Ball:
        return self._fold(self.arb.log, sp.log, b)

    def sqrt(self, b: Any) -> Ball:
        return self._fold(self.arb.sqrt, sp.sqrt, b)

    def abs(self, b: Any) -> Ball:
        return self._fold(self.arb.abs, OAbs, b)

    def min2(self, a: Any, b: Any) -> Ball:
        return self._fold(self.arb.min2, OMin, a, b)

    def max2(self, a: Any, b: Any) -> Ball:
        return self._fold(self.arb.max2, OMax, a, b)

    def ipow(self, b: Any, n: int) -> Ball:
        return self._fold(lambda x: self.arb.ipow(x, n), lambda x: x**n, b)

    def lgamma(self, n: int) -> Ball:
        return self.const(self.arb.lgamma(n))

    def total(self, v: Any) -> Ball:
        return sp.Add(*list(np.ravel(v))) if np.size(v) else sp.Integer(0)


__all__ = ["SymbolicOps", "Work", "WorkLimit", "differentiate", "size", "t"]
