"""A sympy expression compiled once into a straight-line program, run in three interval arithmetics.

The relaxation prover (:mod:`attnbounds.theory.deciding.prover`) evaluates the same margin on thousands of boxes. Walking the
sympy tree for each would cost more than the arithmetic, so :func:`compile_program` turns a list of expressions
(a margin and its partial derivatives, which share most of their subexpressions) into one program: a list of
operations on slots, every distinct subexpression computed once. Three executors run it:

- :func:`run_float` - endpoint intervals of doubles, vectorised over a batch of boxes (numpy), every result
  widened outward by a few units in the last place. Fast, and used only to *decide which boxes to try*: nothing
  it says is trusted.
- :func:`run_arb` - python-flint ``arb`` balls, one box at a time: rigorous.
- :func:`run_iv` - ``mpmath.iv`` endpoint intervals, one box at a time: rigorous, and tight on wide or unbounded
  boxes, where midpoint-radius balls are not.

A box is closed only when a rigorous executor certifies it (:mod:`attnbounds.theory.deciding.prover.bnb`).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.intervals import Unsupported

Op = tuple[str, tuple[int, ...], Any]


@dataclass(frozen=True)
class Program:
    """``inputs`` named input slots, then one slot per operation ``(code, operand slots, payload)``; ``outputs``
    are the slots of the compiled expressions, in order."""

    inputs: tuple[str, ...]
    ops: tuple[Op, ...]
    outputs: tuple[int, ...]

    @property
    def size(self) -> int:
        """Operations per evaluation (the unit of the prover's work budget)."""
        return len(self.ops)


#: sympy function classes by name -> opcode (the prover's opaque Min/Max/Abs, sympy's own and the normalisers')
_FUNCTIONS = {"exp": "exp", "log": "log", "Abs": "abs", "OAbs": "abs", "sigmoid": "sigmoid", "softplus": "softplus",
              "Step": "step", "Heaviside": "step", "Sign": "sign", "sign": "sign", "Min": "min", "OMin": "min",
              "Max": "max", "OMax": "max"}


def exact_rational(node: sp.Basic) -> Fraction:
    if isinstance(node, sp.Integer):
        return Fraction(int(node))
    if isinstance(node, sp.Rational):
        return Fraction(int(node.p), int(node.q))
    if isinstance(node, sp.Float):
        sign, man, exp, _ = node._mpf_
        value = Fraction(int(man)) * (Fraction(2) ** int(exp))
        return -value if sign else value
    raise Unsupported(f"not an exact number: {node}")


def compile_program(exprs: Sequence[sp.Expr], inputs: Sequence[sp.Symbol]) -> Program:
    """One program computing every expression of ``exprs`` from the ``inputs`` (raises :class:`Unsupported` on a
    function it has no interval form for)."""
    names = tuple(str(s) for s in inputs)
    slot_of: dict[sp.Basic, int] = {s: k for k, s in enumerate(inputs)}
    ops: list[Op] = []
    consts: dict[Fraction | str, int] = {}

    def emit(code: str, args: tuple[int, ...], payload: Any = None) -> int:
        ops.append((code, args, payload))
        return len(inputs) + len(ops) - 1

    def const(value: Fraction | str) -> int:
        if value not in consts:
            consts[value] = emit("const", (), value)
        return consts[value]

    def chain(code: str, slots: list[int]) -> int:
        out = slots[0]
        for s in slots[1:]:
            out = emit(code, (out, s))
        return out

    def visit(node: sp.Basic) -> int:
        if node in slot_of:
            return slot_of[node]
        if isinstance(node, sp.Symbol):
            raise InvalidArgument(f"the program has no input named {node}; inputs: {', '.join(names)}")
        if node.is_Rational or isinstance(node, sp.Float):
            out = const(exact_rational(node))
        elif node is sp.pi or node is sp.E:
            out = const(str(node))
        elif isinstance(node, sp.Add):
            out = chain("add", [visit(a) for a in node.args])
        elif isinstance(node, sp.Mul):
            num, den = [], []
            for a in node.args:
                if isinstance(a, sp.Pow) and a.exp.is_Integer and int(a.exp) < 0:
                    den.append(visit(a.base ** (-a.exp)))
                else:
                    num.append(visit(a))
            top = chain("mul", num) if num else const(Fraction(1))
            out = emit("div", (top, chain("mul", den))) if den else top
        elif isinstance(node, sp.Pow):
            base, e = node.args
            if e.is_Integer:
                n = int(e)
                inner = visit(base) if abs(n) == 1 else emit("pow", (visit(base),), abs(n))  # x^1 is x itself
                out = inner if n >= 0 else emit("div", (const(Fraction(1)), inner))
            elif e == sp.Rational(1, 2):
                out = emit("sqrt", (visit(base),))
            elif e == sp.Rational(-1, 2):
                out = emit("div", (const(Fraction(1)), emit("sqrt", (visit(base),))))
            else:
                out = emit("exp", (emit("mul", (visit(e), emit("log", (visit(base),)))),))
        elif type(node).__name__ in _FUNCTIONS:
            code = _FUNCTIONS[type(node).__name__]
            args = [visit(a) for a in node.args]
            if code in ("min", "max"):
                out = chain(code, args)
            elif len(args) != 1:
                raise Unsupported(f"{type(node).__name__} with {len(args)} arguments: {node}")
            else:
                out = emit(code, (args[0],))
        else:
            raise Unsupported(f"no interval form for {type(node).__name__} ({node})")
        slot_of[node] = out
        return out

    outputs = tuple(visit(sp.sympify(e)) for e in exprs)
    return Program(names, tuple(ops), outputs)


# -- float endpoint intervals, vectorised over boxes (a filter: never trusted) ------------------------------------
_INF = math.inf


def _down(x: np.ndarray) -> np.ndarray:
    return np.nextafter(np.where(np.isnan(x), -_INF, x), -_INF)


def _up(x: np.ndarray) -> np.ndarray:
    return np.nextafter(np.where(np.isnan(x), _INF, x), _INF)


def _widen(lo: np.ndarray, hi: np.ndarray, ulps: float = 4.0) -> tuple[np.ndarray, np.ndarray]:
    """Outward by ``ulps`` relative units (libm's exp and log are accurate to about one)."""
    k = ulps * 2.0**-52
    return _down(lo - np.abs(lo) * k), _up(hi + np.abs(hi) * k)


def _sum_down(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A double <= a + b: the rounded sum, one ulp down unless TwoSum shows it is exact or rounded down."""
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)  # a + b = s + err exactly (when no term is infinite)
    return np.where(np.isfinite(err) & (err >= 0), s, _down(s))


def _sum_up(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return np.where(np.isfinite(err) & (err <= 0), s, _up(s))


_SPLIT = 134217729.0  # 2^27 + 1: Veltkamp's splitting constant for doubles


def _product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A double <= a b and one >= a b: the rounded product, moved one ulp only on the side its rounding error
    (Dekker's TwoProduct, exact for finite operands below 2^996 whose product is 0 or at least 2^-968: below, the
    error term underflows and reads 0) says; 0 * inf is 0."""
    with np.errstate(invalid="ignore", over="ignore"):
        p = a * b
        ta, tb = _SPLIT * a, _SPLIT * b
        ah, bh = ta - (ta - a), tb - (tb - b)
        al_, bl_ = a - ah, b - bh
        err = ((ah * bh - p) + ah * bl_ + al_ * bh) + al_ * bl_  # a b = p + err exactly
    zero = ((a == 0) & np.isinf(b)) | ((b == 0) & np.isinf(a))
    p = np.where(zero, 0.0, p)
    exact_ok = np.isfinite(err) & (np.abs(a) < 2.0**996) & (np.abs(b) < 2.0**996) & (
        (np.abs(p) >= 2.0**-968) | (a == 0) | (b == 0))
    lo = np.where(zero, 0.0, np.where(exact_ok & (err >= 0), p, _down(p)))
    hi = np.where(zero, 0.0, np.where(exact_ok & (err <= 0), p, _up(p)))
    return lo, hi


def _mul(al: np.ndarray, ah: np.ndarray, bl: np.ndarray, bh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ends = [_product(x, y) for x, y in ((al, bl), (al, bh), (ah, bl), (ah, bh))]
    lo: np.ndarray = np.minimum.reduce([e[0] for e in ends])
    hi: np.ndarray = np.maximum.reduce([e[1] for e in ends])
    same_sign = ((al >= 0) & (bl >= 0)) | ((ah <= 0) & (bh <= 0))  # the product is >= 0: 0 is a lower bound
    opposite = ((al >= 0) & (bh <= 0)) | ((ah <= 0) & (bl >= 0))  # the product is <= 0: 0 is an upper bound
    return np.where(same_sign, np.maximum(lo, 0.0), lo), np.where(opposite, np.minimum(hi, 0.0), hi)


def _power_of_two(x: np.ndarray) -> np.ndarray:
    """Where ``x`` is a finite power of two (its reciprocal a double too, unless it under- or overflows)."""
    with np.errstate(all="ignore"):
        mantissa, exponent = np.frexp(x)
    return np.isfinite(x) & (np.abs(mantissa) == 0.5) & (np.abs(exponent) < 1000)


def _recip(bl: np.ndarray, bh: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lo = np.where(bl > 0, 1.0 / bh, np.where(bh < 0, 1.0 / bh, np.where((bl == 0) & (bh > 0), 1.0 / bh, -_INF)))
        hi = np.where(bl > 0, 1.0 / bl, np.where(bh < 0, 1.0 / bl, np.where((bh == 0) & (bl < 0), 1.0 / bl, _INF)))
    # 1/x is exact where x is a power of two (t = 1/L at L = 1, 2, 4, ...: log(1/t) is then exactly 0 at L = 1)
    lo = np.where(_power_of_two(bh) & np.isfinite(lo), lo, _down(lo))
    hi = np.where(_power_of_two(bl) & np.isfinite(hi), hi, _up(hi))
    lo, hi = np.where(bl >= 0, np.maximum(lo, 0.0), lo), np.where(bh <= 0, np.minimum(hi, 0.0), hi)  # x's sign
    zero = (bl == 0) & (bh == 0)  # 1/0: no value (NaN, as outside any other operation's domain), not the sign's [0, 0]
    return np.where(zero, np.nan, lo), np.where(zero, np.nan, hi)


def _const_float(value: Fraction | str) -> tuple[float, float]:
    if isinstance(value, str):
        x = math.pi if value == "pi" else math.e
    else:
        try:
            x = float(value)
        except OverflowError:  # beyond the doubles: between the largest double and infinity
            big = sys.float_info.max
            return (big, _INF) if value > 0 else (-_INF, -big)
        if Fraction(x) == value:
            return x, x
    return math.nextafter(x, -_INF), math.nextafter(x, _INF)


def run_float(program: Program, lo: np.ndarray, hi: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every output's enclosure on every box of the batch (``lo``/``hi`` of shape ``(B, inputs)``), as
    ``(lo, hi)`` arrays of shape ``(B,)``; NaN never survives (it becomes the whole line)."""
    B = lo.shape[0]
    slots: list[tuple[np.ndarray, np.ndarray]] = [(lo[:, k].astype(np.float64), hi[:, k].astype(np.float64))
                                                  for k in range(lo.shape[1])]
    with np.errstate(all="ignore"):
        for code, args, payload in program.ops:
            if code == "const":
                c_lo, c_hi = _const_float(payload)
                slots.append((np.full(B, c_lo), np.full(B, c_hi)))
                continue
            al, ah = slots[args[0]]
            if code == "add":
                bl, bh = slots[args[1]]
                out = (_sum_down(al, bl), _sum_up(ah, bh))
            elif code == "mul":
                out = _mul(al, ah, *slots[args[1]])
            elif code == "div":
                out = _mul(al, ah, *_recip(*slots[args[1]]))
            elif code == "pow":
                n = int(payload)  # >= 2: x^0 and x^1 are never compiled as powers (compile_program)
                if n % 2 == 0:
                    m_lo = np.where((al <= 0) & (ah >= 0), 0.0, np.minimum(np.abs(al), np.abs(ah)))
                    m_hi = np.maximum(np.abs(al), np.abs(ah))
                    out = (np.maximum(_down(m_lo ** n), 0.0), _up(m_hi ** n))
                else:  # an odd power keeps the sign of its base (and 0 stays 0): the outward rounding never crosses 0
                    out = (np.where(al >= 0, np.maximum(_down(al ** n), 0.0), _down(al ** n)),
                           np.where(ah <= 0, np.minimum(_up(ah ** n), 0.0), _up(ah ** n)))
            elif code == "sqrt":
                out = (np.maximum(_down(np.sqrt(np.maximum(al, 0.0))), 0.0), _up(np.sqrt(np.maximum(ah, 0.0))))
                out = (out[0], np.where(ah < 0, np.nan, out[1]))
            elif code == "exp":
                out = _widen(np.exp(al), np.exp(ah))
                out = (np.where(al == 0, 1.0, np.maximum(out[0], 0.0)), np.where(ah == 0, 1.0, out[1]))  # exp(0) = 1
            elif code == "log":
                out = _widen(np.where(al <= 0, -_INF, np.log(np.maximum(al, 1e-320))), np.where(ah <= 0, np.nan, np.log(ah)))
                out = (np.where(al == 1, 0.0, out[0]), np.where(ah == 1, 0.0, out[1]))  # log(1) = 0
            elif code == "abs":
                out = (np.where((al <= 0) & (ah >= 0), 0.0, np.minimum(np.abs(al), np.abs(ah))), np.maximum(np.abs(al), np.abs(ah)))
            elif code in ("min", "max"):
                bl, bh = slots[args[1]]
                fn = np.minimum if code == "min" else np.maximum
                out = (fn(al, bl), fn(ah, bh))
            elif code == "sigmoid":
                out = _widen(1.0 / (1.0 + np.exp(-al)), 1.0 / (1.0 + np.exp(-ah)))
                out = (np.maximum(out[0], 0.0), np.minimum(out[1], 1.0))  # sigmoid lies in [0, 1]
            elif code == "softplus":
                out = _widen(np.logaddexp(0.0, al), np.logaddexp(0.0, ah))
                out = (np.maximum(out[0], 0.0), out[1])
            elif code in ("step", "sign"):
                below = 0.0 if code == "step" else -1.0
                out = (np.where(al > 0, 1.0, below), np.where(ah < 0, below, 1.0))
            else:  # pragma: no cover - compile_program emits only the codes above
                raise Unsupported(f"unknown operation {code}")
            slots.append((np.where(np.isnan(out[0]), -_INF, out[0]), np.where(np.isnan(out[1]), _INF, out[1])))
    return [slots[k] for k in program.outputs]


# -- rigorous executors, one box at a time ----------------------------------------------------------------------
class _Rigorous:
    """The operations of one rigorous interval arithmetic on single values (subclasses: arb, mpmath.iv)."""

    name = "abstract"

    def point(self, lo: float, hi: float) -> Any:
        raise NotImplementedError

    def const(self, value: Fraction | str) -> Any:
        raise NotImplementedError

    def ends(self, x: Any) -> tuple[float, float]:
        """Doubles ``lo <= x <= hi`` (rounded outward; NaN as the whole line)."""
        raise NotImplementedError

    def sign(self, x: Any) -> int:
        """-1 or 1 when ``x`` is certainly negative or positive (however far below the doubles), else 0."""
        raise NotImplementedError

    def apply(self, code: str, args: list[Any], payload: Any) -> Any:
        raise NotImplementedError


class _Arb(_Rigorous):
    name = "arb"

    def __init__(self) -> None:
        import flint

        self.flint = flint
        self.arb = flint.arb

    def point(self, lo: float, hi: float) -> Any:
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise Unsupported("arb balls cannot hold an unbounded box")
        return self.arb(lo) if lo == hi else self.arb(lo).union(self.arb(hi))

    def const(self, value: Fraction | str) -> Any:
        if isinstance(value, str):
            return self.arb.pi() if value == "pi" else self.arb(1).exp()
        return self.arb(self.flint.fmpq(value.numerator, value.denominator))

    def sign(self, x: Any) -> int:
        return 0 if not x.is_finite() else -1 if x < 0 else 1 if x > 0 else 0

    def ends(self, x: Any) -> tuple[float, float]:
        if not x.is_finite():
            return -_INF, _INF
        lo, hi = x.lower(), x.upper()
        f_lo, f_hi = float(lo), float(hi)
        if self.arb(f_lo) > lo:
            f_lo = math.nextafter(f_lo, -_INF)
        if self.arb(f_hi) < hi:
            f_hi = math.nextafter(f_hi, _INF)
        return f_lo, f_hi

    def _squash(self, code: str, e: Any) -> Any:
        """``sigmoid(e)`` or ``softplus(e)`` at an exact point, through ``exp`` of a number <= 0 (``exp(1e308)`` is
        no arb ball; ``exp(-1e308)`` is a tiny one)."""
        if e <= 0:
            t = e.exp()
            return t / (1 + t) if code == "sigmoid" else (1 + t).log()
        t = (-e).exp()
        return 1 / (1 + t) if code == "sigmoid" else e + (1 + t).log()

    def apply(self, code: str, args: list[Any], payload: Any) -> Any:
        a = args[0]
        if code == "add":
            return a + args[1]
        if code == "mul":
            return a * args[1]
        if code == "div":
            return a / args[1]
        if code == "pow":
            n = int(payload)
            base = abs(a) if n % 2 == 0 else a
            out = self.arb(1)
            for _ in range(n):  # small exponents: repeated products are exact enough and never NaN at 0
                out = out * base
            # an even power is >= 0 (a ball around 0 would otherwise keep a negative lower end: (y0 - y1)^2 on a
            # box where y0 = y1 is possible)
            return out.nonnegative_part() if n % 2 == 0 and out.is_finite() else out
        if code == "sqrt":
            return self.arb("nan") if a.upper() < 0 else a.nonnegative_part().sqrt()
        if code == "exp":
            return a.exp()
        if code == "log":
            return a.log()
        if code == "abs":
            return abs(a)
        if code == "min":
            return a.min(args[1])
        if code == "max":
            return a.max(args[1])
        if code in ("sigmoid", "softplus"):
            # increasing: the hull of the values at the two ends (arb's own arithmetic on a wide ball loses the sign:
            # exp(-a) on [-50, 3] dips below 0 by its rounding, 1 + exp(-a) then holds 0 and the result is NaN),
            # clipped to the function's range (the hull, a midpoint and a radius, dips below 0 by its rounding)
            if not a.is_finite():
                return self.arb("nan")
            ends = [self._squash(code, e) for e in (a.lower(), a.upper())]
            hull = ends[0].union(ends[1])
            return hull.intersection(self.arb(0).union(self.arb(1))) if code == "sigmoid" else hull.nonnegative_part()
        if code in ("step", "sign"):
            below = 0 if code == "step" else -1
            if a > 0:
                return self.arb(1)
            if a < 0:
                return self.arb(below)
            return self.arb(below).union(self.arb(1))
        raise Unsupported(f"unknown operation {code}")


class _Iv(_Rigorous):
    name = "mpmath.iv"

    def __init__(self) -> None:
        import mpmath

        self.mp = mpmath
        self.iv = mpmath.iv

    def point(self, lo: float, hi: float) -> Any:
        return self.iv.mpf([lo, hi])

    def const(self, value: Fraction | str) -> Any:
        if isinstance(value, str):
            return self.iv.pi if value == "pi" else self.iv.e
        return self.iv.mpf(value.numerator) / self.iv.mpf(value.denominator)

    def sign(self, x: Any) -> int:
        lo, hi = (self.mp.make_mpf(v) for v in x._mpi_)
        return 0 if self.mp.isnan(lo) or self.mp.isnan(hi) else -1 if hi < 0 else 1 if lo > 0 else 0

    def ends(self, x: Any) -> tuple[float, float]:
        lo, hi = x._mpi_
        lo, hi = self.mp.make_mpf(lo), self.mp.make_mpf(hi)
        if self.mp.isnan(lo) or self.mp.isnan(hi):
            return -_INF, _INF
        f_lo, f_hi = float(lo), float(hi)
        if self.mp.mpf(f_lo) > lo:
            f_lo = math.nextafter(f_lo, -_INF)
        if self.mp.mpf(f_hi) < hi:
            f_hi = math.nextafter(f_hi, _INF)
        return f_lo, f_hi

    def _make(self, lo: Any, hi: Any) -> Any:
        return self.iv.mpf([lo, hi])

    def _mul(self, a: Any, b: Any) -> Any:
        """The product set of two intervals, unbounded ones included (mpmath gives [0, inf] * [0, 0] as the whole
        line: an endpoint 0 times an infinite one is 0 here, the other endpoints giving the infinite extents)."""
        mp = self.mp
        ends = []
        for x in (mp.make_mpf(a._mpi_[0]), mp.make_mpf(a._mpi_[1])):
            for y in (mp.make_mpf(args_end) for args_end in b._mpi_):
                if (x == 0 and mp.isinf(y)) or (y == 0 and mp.isinf(x)):
                    ends.append(self.iv.mpf(0))
                elif mp.isnan(x) or mp.isnan(y):
                    return self._make(-mp.inf, mp.inf)
                else:
                    ends.append(self.iv.mpf([x, x]) * self.iv.mpf([y, y]))
        return self._make(min(mp.make_mpf(e._mpi_[0]) for e in ends), max(mp.make_mpf(e._mpi_[1]) for e in ends))

    def apply(self, code: str, args: list[Any], payload: Any) -> Any:
        iv, a = self.iv, args[0]
        if code == "add":
            return a + args[1]
        if code == "mul":
            return self._mul(a, args[1])
        if code == "div":
            lo, hi = (self.mp.make_mpf(v) for v in args[1]._mpi_)
            if lo > 0 or hi < 0:
                return self._mul(a, 1 / args[1])
            if lo == 0 and hi > 0:  # 1/[0, h] = [1/h, inf]
                return self._mul(a, self._make(1 / self.iv.mpf([hi, hi]), self.mp.inf))
            if hi == 0 and lo < 0:
                return self._mul(a, self._make(-self.mp.inf, 1 / self.iv.mpf([lo, lo])))
            return self._make(-self.mp.inf, self.mp.inf)
        if code == "pow":
            n = int(payload)
            return abs(a) ** n if n % 2 == 0 else a ** n
        if code == "sqrt":
            lo, hi = a._mpi_
            if self.mp.make_mpf(hi) < 0:
                return self._make(self.mp.nan, self.mp.nan)
            return iv.sqrt(self._make(max(self.mp.make_mpf(lo), self.mp.mpf(0)), self.mp.make_mpf(hi)))
        if code == "exp":
            return iv.exp(a)
        if code == "log":
            lo, hi = a._mpi_
            if self.mp.make_mpf(hi) <= 0:
                return self._make(self.mp.nan, self.mp.nan)
            if self.mp.make_mpf(lo) <= 0:
                return self._make(-self.mp.inf, iv.log(self._make(self.mp.make_mpf(hi), self.mp.make_mpf(hi))).b)
            return iv.log(a)
        if code == "abs":
            return abs(a)
        if code in ("min", "max"):
            (p, q), (r, s) = a._mpi_, args[1]._mpi_
            fn = min if code == "min" else max
            return self._make(fn(self.mp.make_mpf(p), self.mp.make_mpf(r)), fn(self.mp.make_mpf(q), self.mp.make_mpf(s)))
        if code == "sigmoid":
            return 1 / (1 + iv.exp(-a))
        if code == "softplus":
            return iv.log(1 + iv.exp(a))
        if code in ("step", "sign"):
            lo, hi = (self.mp.make_mpf(v) for v in a._mpi_)
            below = 0 if code == "step" else -1
            return self._make(1 if lo > 0 else below, below if hi < 0 else 1)
        raise Unsupported(f"unknown operation {code}")


_EXECUTORS: dict[str, Callable[[], _Rigorous]] = {"arb": _Arb, "mpmath.iv": _Iv}
_CACHE: dict[str, _Rigorous] = {}


def rigorous(name: str) -> _Rigorous:
    """The rigorous executor ``arb`` or ``mpmath.iv``."""
    if name not in _CACHE:
        _CACHE[name] = _EXECUTORS[name]()
    return _CACHE[name]


def run_rigorous(program: Program, lo: Sequence[float] | np.ndarray, hi: Sequence[float] | np.ndarray, name: str = "arb",
                 bits: int = 128) -> list[tuple[float, float]]:
    """Every output's enclosure on one box, rigorously, as doubles rounded outward (the whole line where the
    arithmetic loses the value: NaN, division by an interval holding 0, ...)."""
    return _run(program, lo, hi, name, bits, "ends")


def rigorous_signs(program: Program, lo: Sequence[float] | np.ndarray, hi: Sequence[float] | np.ndarray,
                   name: str = "arb", bits: int = 128) -> list[int]:
    """Every output's certain sign on one box (-1, 1; 0 when unknown), read from the rigorous values themselves:
    a value far below the doubles' range keeps its sign (its outward-rounded doubles would be 0)."""
    return _run(program, lo, hi, name, bits, "sign")


def _run(program: Program, lo: Sequence[float] | np.ndarray, hi: Sequence[float] | np.ndarray, name: str, bits: int,
         read: str) -> list[Any]:
    ex = rigorous(name)
    lost = (-_INF, _INF) if read == "ends" else 0
    if name == "arb":
        old = ex.flint.ctx.prec  # type: ignore[attr-defined]
        ex.flint.ctx.prec = bits  # type: ignore[attr-defined]
    else:
        old = ex.mp.iv.prec  # type: ignore[attr-defined]
        ex.mp.iv.prec = bits  # type: ignore[attr-defined]
    try:
        slots = [ex.point(float(a), float(b)) for a, b in zip(lo, hi)]
        for code, args, payload in program.ops:
            if code == "const":
                slots.append(ex.const(payload))
            else:
                slots.append(ex.apply(code, [slots[k] for k in args], payload))
        return [getattr(ex, read)(slots[k]) for k in program.outputs]
    except (ZeroDivisionError, ValueError, OverflowError):
        return [lost for _ in program.outputs]
    finally:
        if name == "arb":
            ex.flint.ctx.prec = old  # type: ignore[attr-defined]
        else:
            ex.mp.iv.prec = old  # type: ignore[attr-defined]
