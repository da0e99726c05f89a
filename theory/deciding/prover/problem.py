"""The problem branch and bound reads (:mod:`~attnbounds.theory.deciding.prover.bnb`): prove ``core >= 0`` on a box of
coordinates of the relaxed space (``t = 1/L`` among them) where some constraints hold, with the margin's positive
factors divided out (:func:`strip_positive`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Sequence

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.intervals import outward
from attnbounds.theory.mathematics.opaque import OAbs

#: the relaxed length variable t = 1/L
t_sym = sp.Symbol("t", nonnegative=True)


def length_range(L_lo: float, L_hi: float) -> tuple[float, float]:
    """The root box ``[t_lo, t_hi]`` of ``t = 1/L`` for every length in ``[L_lo, L_hi]`` (``t_lo = 0`` for no longest
    length), rounded outward."""
    t_lo = 0.0 if not math.isfinite(L_hi) else outward(1 / Fraction(L_hi), -1)
    return t_lo, outward(1 / Fraction(L_lo), 1)


@dataclass(frozen=True)
class Coordinate:
    """One coordinate of the relaxed space: its symbol, its box (the closure: ``t = 0``, unbounded ends) and what
    it stands for."""

    symbol: sp.Symbol
    lo: float
    hi: float
    kind: str  # "length", "parameter", "role", "atom", "weight"
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"name": str(self.symbol), "lo": _num(self.lo), "hi": _num(self.hi), "kind": self.kind, "text": self.text}


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


@dataclass
class Problem:
    """One conjunct of a statement under one pattern of its roles: prove ``core >= 0`` (``> 0`` when strict) on the
    box of ``coordinates`` where ``constraints`` (each ``>= 0``) may hold."""

    statement_id: str
    conjunct: int
    pattern: str
    coordinates: list[Coordinate]
    core: sp.Expr
    constraints: list[sp.Expr]
    strict: bool
    margin: sp.Expr  # the margin itself (rhs - lhs), before positive factors were divided out
    stripped: list[str]  # the positive factors divided out ("t", "1/T", ...)
    roles: dict[str, str]  # role -> token of the pattern
    atoms: int
    moments: int
    parameters: dict[str, sp.Expr]
    model: str
    #: absolute values replaced by their argument's sign on the whole box (each certified there): (argument, sign)
    signs: list[tuple[sp.Expr, int]] = field(default_factory=list)
    #: whether the margin is the instance's at its point (False: at most it, a maximum read at another token or F's
    #: extremes over the tokens; a proof still proves the statement)
    exact: bool = True
    #: how a point becomes an instance: the logits of the distinguished tokens and the atoms, the atoms' masses (or,
    #: in the weights model, their token counts), the range of L
    realisation: dict[str, Any] = field(default_factory=dict)
    #: the core and stripped factors before the factors of known sign were divided out (``strip_signed``), when some
    #: were: the same problem in the margin's own grouping, which can keep a monotonicity the quotient hides
    unsigned: tuple[sp.Expr, list[str]] | None = None
    #: the divisors of the core that may change sign on the box (``relax.poles``): the core may jump from one infinity
    #: to the other there, so no box is closed; the lengths next to their zeros are realised instead
    poles: list[sp.Expr] = field(default_factory=list)

    @property
    def symbols(self) -> list[sp.Symbol]:
        return [c.symbol for c in self.coordinates]

    def parameter_of(self, symbol: sp.Symbol) -> tuple[str, Fraction]:
        """``(name, g)``: the parameter a coordinate stands for, ``name = g * symbol`` (``g`` 1 but for a range whose
        ends are decimals no float holds, read on whole ends: ``T = symbol / 10``)."""
        for name, expr in self.parameters.items():
            g, rest = sp.sympify(expr).as_coeff_Mul()
            if rest == symbol and g.is_Rational:
                return name, Fraction(int(g.p), int(g.q))
        return str(symbol), Fraction(1)

    def open_end(self, d: int, side: int, lo: Sequence[float] | np.ndarray, hi: Sequence[float] | np.ndarray) -> bool:
        """Whether no instance the box ``lo``..``hi`` stands for has coordinate ``d`` at its end (``side`` -1: its
        lower end, +1: its upper end; the box's own end, which must be the coordinate's): a point of the closure
        that is only a limit. Derived from the problem alone (a replay re-derives it):

        - ``t = 1/L = 0`` (L -> oo);
        - 0 for a parameter whose domain makes it ``> 0`` (``T``, ``nu = N/L``, a domain ``x > 0``);
        - softmax over unbounded logits (the weights model): a weight is never 0, so neither a role's share ``b``
          nor an atom's ``y`` is 0; a role's share is 1 only when no token comes after it: never for a role before
          the last, and for the last one only at ``L = k`` (``k`` roles), so not on a box where ``t < 1/k``;
        - compactified logits ``s = 0, 1`` (``l = -oo, +oo``)."""
        c = self.coordinates[d]
        end = lo[d] if side < 0 else hi[d]
        if end != (c.lo if side < 0 else c.hi):
            return False
        if c.kind == "length":
            return side < 0 and end == 0.0
        if c.kind == "parameter":
            return side < 0 and end == 0.0 and c.symbol.is_positive is True
        info = self.realisation
        if info.get("weights_model"):
            roles = list(info.get("role_coordinates", []))
            if c.symbol in info.get("atom_coordinates", []):
                return c.kind == "atom" and side < 0 and end == 0.0
            if c.kind != "role" or c.symbol not in roles or (c.lo, c.hi) != (0.0, 1.0):
                return False
            if side < 0 or c.symbol != roles[-1]:
                return True
            t = next((j for j, k in enumerate(self.coordinates) if k.kind == "length"), None)
            if t is not None:
                return Fraction(hi[t]) < Fraction(1, len(roles))
            return float(info.get("L_range", (1.0, 1.0))[0]) > len(roles)
        if info.get("bounded") is False and c.kind in ("role", "atom") and str(c.symbol).startswith("s_"):
            return (c.lo, c.hi) == (0.0, 1.0)
        return False

    def describe(self) -> str:
        return (f"conjunct {self.conjunct}, {self.pattern}: {len(self.coordinates)} coordinates ("
                + ", ".join(f"{c.symbol} in [{c.lo:g}, {c.hi:g}]" for c in self.coordinates) + f"); {self.atoms} atom(s) "
                f"for {self.moments} total(s) of the other tokens; {self.model}")


def strip_positive(margin: sp.Expr) -> tuple[sp.Expr, list[str]]:
    """The margin divided by its factors that are positive on the whole (open) space: powers of ``t`` (the order
    at which the margin vanishes as L -> oo), of positive parameters, ``exp`` of anything, positive numbers. The
    sign of what is left is the sign of the margin wherever ``t > 0`` (every instance)."""
    expr = sp.factor_terms(_abs_out(margin))
    stripped: list[str] = []
    num, den = sp.fraction(sp.together(expr))  # 1 - b/t = (t - b)/t: a positive denominator goes too
    if den != 1 and all(_positive_factor(f) for f in sp.Mul.make_args(den)):
        powers = sp.Mul(*[f for f in sp.Mul.make_args(den) if f.as_base_exp()[0] == t_sym])
        if sp.count_ops(num) <= sp.count_ops(expr):
            stripped.append(f"1/({den})")
            expr = sp.factor_terms(num)
        elif powers != 1:  # the power of t alone (the core is singular at t = 0, where intervals cannot enclose it),
            stripped.append(f"1/({powers})")  # multiplied into each term: the other factors keep their place
            expr = sp.factor_terms(sp.Add(*[term * powers for term in sp.Add.make_args(expr)]))
    if not isinstance(expr, sp.Mul):
        return expr, stripped
    keep = []
    for f in expr.args:
        if _positive_factor(f):
            stripped.append(str(f))
        else:
            keep.append(f)
    return sp.Mul(*keep), stripped


def _positive_factor(f: sp.Expr) -> bool:
    """Whether ``f`` is > 0 wherever the relaxed space is open: a positive number, ``exp`` of anything, a power of
    ``t`` or of a parameter whose domain is ``> 0``."""
    base, exp_ = f.as_base_exp()
    if f.is_number:
        return bool(f.is_positive)
    if isinstance(f, sp.exp):
        return True
    return (base == t_sym or (isinstance(base, sp.Symbol) and base.is_positive is True)) and bool(exp_.is_number)


def _abs_out(expr: sp.Expr) -> sp.Expr:
    """``|c x| = c |x|`` for the positive factors c of an absolute value (so that they can be divided out)."""
    def pull(node: sp.Expr) -> sp.Expr:
        factors = sp.Mul.make_args(sp.factor_terms(node.args[0]))
        pos = [f for f in factors if _positive_factor(f)]
        if not pos:
            return node
        rest = sp.Mul(*[f for f in factors if not _positive_factor(f)])
        return sp.Mul(*pos) * (rest if rest.is_number and rest.is_nonnegative else OAbs(rest))

    return expr.replace(lambda e: isinstance(e, OAbs), pull)


__all__ = ["Coordinate", "Problem", "strip_positive", "t_sym"]
