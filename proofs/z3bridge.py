"""Translate sympy relations over the reals into z3 and prove implications by refutation.

Only what the derivations need: rational arithmetic, integer powers, ``Abs``, ``Min``, ``Max``, ``Piecewise``,
square roots (each ``sqrt(e)`` becomes a fresh variable ``w >= 0`` with ``w**2 = e`` when ``e >= 0``: the
square root of a negative number is left unconstrained, never assumed away) and
boolean connectives. Every free symbol is an unconstrained z3 ``Real``, named as in sympy: sympy
assumptions on a symbol (``positive``, ``nonnegative``, ``integer``) are ignored, so every premise a
proof uses must be one of the ``given`` formulas.
"""

from __future__ import annotations

import sympy as sp
import z3

from attnbounds.theory.mathematics.errors import InvalidArgument

#: per-check time limit for z3 (milliseconds)
TIMEOUT_MS = 10_000


class _Translator:
    def __init__(self) -> None:
        self.vars: dict[str, z3.ArithRef] = {}
        self.side: list[z3.BoolRef] = []
        self._roots: dict[sp.Expr, z3.ArithRef] = {}

    def var(self, sym: sp.Symbol) -> z3.ArithRef:
        name = str(sym)
        if name not in self.vars:
            self.vars[name] = z3.Real(name)
        return self.vars[name]

    def expr(self, e: sp.Basic) -> z3.ArithRef:
        if isinstance(e, sp.Symbol):
            return self.var(e)
        if isinstance(e, (sp.Integer, sp.Rational)):
            return z3.RealVal(f"{e.p}/{e.q}")
        if isinstance(e, sp.Float):
            return z3.RealVal(str(sp.Rational(e)))
        if isinstance(e, sp.Add):
            return z3.Sum(*[self.expr(a) for a in e.args])
        if isinstance(e, sp.Mul):
            out = self.expr(e.args[0])
            for a in e.args[1:]:
                out = out * self.expr(a)
            return out
        if isinstance(e, sp.Pow):
            base, ex = e.args
            if ex == sp.Rational(1, 2):
                return self._sqrt(base)
            if ex == -sp.Rational(1, 2):
                return 1 / self._sqrt(base)
            if isinstance(ex, sp.Integer):
                b = self.expr(base)
                k = int(ex)
                out = z3.RealVal(1)
                for _ in range(abs(k)):
                    out = out * b
                return out if k >= 0 else 1 / out
        if isinstance(e, sp.Abs):
            a = self.expr(e.args[0])
            return z3.If(a >= 0, a, -a)
        if isinstance(e, sp.Piecewise):
            *branches, (last, otherwise) = e.args
            if otherwise is not sp.true:
                raise InvalidArgument(f"z3 translation needs a Piecewise ending with a (value, True) branch: {e}")
            out = self.expr(last)
            for value, cond in reversed(branches):
                out = z3.If(self.boolean(cond), self.expr(value), out)
            return out
        if isinstance(e, (sp.Min, sp.Max)):
            args = [self.expr(a) for a in e.args]
            out = args[0]
            for a in args[1:]:
                out = z3.If(a < out, a, out) if isinstance(e, sp.Min) else z3.If(a > out, a, out)
            return out
        raise InvalidArgument(f"z3 translation does not support {type(e).__name__}: {e}")

    def _sqrt(self, base: sp.Expr) -> z3.ArithRef:
        if base not in self._roots:
            w = z3.Real(f"_sqrt{len(self._roots)}")
            b = self.expr(base)
            self.side += [w >= 0, z3.Implies(b >= 0, w * w == b)]
            self._roots[base] = w
        return self._roots[base]

    def boolean(self, rel: sp.Basic) -> z3.BoolRef:
        if rel is sp.true:
            return z3.BoolVal(True)
        if rel is sp.false:
            return z3.BoolVal(False)
        if isinstance(rel, sp.And):
            return z3.And(*[self.boolean(a) for a in rel.args])
        if isinstance(rel, sp.Or):
            return z3.Or(*[self.boolean(a) for a in rel.args])
        if isinstance(rel, sp.Not):
            return z3.Not(self.boolean(rel.args[0]))
        if isinstance(rel, sp.Implies):
            return z3.Implies(self.boolean(rel.args[0]), self.boolean(rel.args[1]))
        ops = {sp.LessThan: lambda a, b: a <= b, sp.StrictLessThan: lambda a, b: a < b,
               sp.GreaterThan: lambda a, b: a >= b, sp.StrictGreaterThan: lambda a, b: a > b,
               sp.Equality: lambda a, b: a == b, sp.Unequality: lambda a, b: a != b}
        for cls, op in ops.items():
            if isinstance(rel, cls):
                return op(self.expr(rel.lhs), self.expr(rel.rhs))
        raise InvalidArgument(f"z3 translation needs a relation or a boolean combination, got {rel}")


def translatable(formula: sp.Basic) -> bool:
    """Whether :func:`prove` can read ``formula`` (no Sum, exp, log, undefined function, symbolic power, ...)."""
    try:
        _Translator().boolean(formula)
    except (InvalidArgument, TypeError):
        return False
    return True


def prove(goal: sp.Basic, given: tuple[sp.Basic, ...] = ()) -> tuple[bool, str]:
    """``(True, 'proved')`` when ``given => goal`` holds for all reals (z3 finds ``given & ~goal`` unsat).

    Otherwise ``(False, detail)`` with a countermodel or z3's reason (unknown, timeout).
    """
    tr = _Translator()
    hyps = [tr.boolean(g) for g in given]
    target = tr.boolean(goal)
    solver = z3.Solver()
    solver.set("timeout", TIMEOUT_MS)
    solver.add(*tr.side, *hyps, z3.Not(target))
    verdict = solver.check()
    if verdict == z3.unsat:
        return True, "proved (z3: negation unsatisfiable)"
    if verdict == z3.sat:
        model = solver.model()
        shown = ", ".join(f"{d.name()}={model[d]}" for d in model.decls() if not d.name().startswith("_"))
        return False, f"z3 countermodel: {shown}"
    return False, f"z3 could not decide ({solver.reason_unknown()})"
