"""Interval arithmetic for certification: a ball backend (python-flint ``arb``, or ``mpmath.iv``) and an
evaluator of sympy expressions on balls.

Every backend value is a *ball*: an enclosure of one real number. ``Ops`` gathers the few
operations certification needs, so the definition-level quantities (:mod:`attnbounds.theory.mathematics.balls`) are
written once for both backends. Values over tokens are numpy object arrays of balls; arithmetic
on them is elementwise (numpy calls the balls' own operators), functions go through ``Ops.map``.
"""

from __future__ import annotations

import contextlib
import decimal
import functools
import math
from fractions import Fraction
from typing import Any, Callable, Iterator, Mapping, Protocol, Union, cast, overload

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import CannotCertify, InvalidArgument


class Unsupported(CannotCertify):
    """Certification cannot evaluate something (a quantity, a function, a normaliser) rigorously."""


class PrecisionLoss(Unsupported):
    """The balls became too wide (or NaN) at this precision; more bits may help."""


class Ball(Protocol):
    """An enclosure of one real number (python-flint ``arb``, ``mpmath.iv``): arithmetic with balls and numbers."""

    def __add__(self, other: Any) -> "Ball": ...
    def __radd__(self, other: Any) -> "Ball": ...
    def __sub__(self, other: Any) -> "Ball": ...
    def __rsub__(self, other: Any) -> "Ball": ...
    def __mul__(self, other: Any) -> "Ball": ...
    def __rmul__(self, other: Any) -> "Ball": ...
    def __truediv__(self, other: Any) -> "Ball": ...
    def __rtruediv__(self, other: Any) -> "Ball": ...
    def __neg__(self) -> "Ball": ...
    def __pow__(self, other: Any) -> "Ball": ...
    def __abs__(self) -> "Ball": ...
    def __lt__(self, other: Any) -> bool: ...
    def __le__(self, other: Any) -> bool: ...
    def __gt__(self, other: Any) -> bool: ...
    def __ge__(self, other: Any) -> bool: ...


#: the most significant digits of a decimal that a double stands for (below, every decimal is a different double)
DECIMAL_DIGITS = 15


def decimal_value(value: float | int) -> Fraction:
    """The number a parameter's value stands for: the decimal its double prints as (``repr``, the shortest decimal
    that rounds to it) where that has at most :data:`DECIMAL_DIGITS` significant digits, a value someone typed, so
    ``T = 0.1`` is ``1/10``, as a decimal literal in a relation is; else the double itself (a computed value,
    ``sqrt(1000)``, a search's draw). Both lie in the double's rounding interval, so the reading is monotone in the
    double, and a literal of at most 15 digits is read as itself: a float comparison with a fixed value or a range's
    end decides the comparison of the numbers they stand for."""
    if isinstance(value, (int, np.integer)):
        return Fraction(int(value))
    f = float(value)
    if not math.isfinite(f):
        raise InvalidArgument(f"a parameter's value must be a finite number, got {value!r}")
    text = repr(f)
    if len(decimal.Decimal(text).normalize().as_tuple().digits) <= DECIMAL_DIGITS:
        return Fraction(text)
    return Fraction(f)


def outward(x: Fraction, side: int) -> float:
    """The float nearest the exact ``x`` on its ``side`` (-1: at most ``x``, +1: at least ``x``): a root box's end
    computed from exact ends (``t = 1/L``, ``beta = a / T``, a range's decimal end) must contain them, and the nearest
    float may not (``float(1/50) > 1/50`` would leave L = 50 out of a box meant to end there)."""
    f = float(x)
    if (side < 0 and Fraction(f) > x) or (side > 0 and Fraction(f) < x):
        f = math.nextafter(f, -math.inf if side < 0 else math.inf)
    return f


#: a ball form's value (:mod:`attnbounds.theory.mathematics.quantities`): one ball, or an object array of balls, one per
#: column
BallValue = Union[Ball, np.ndarray]
#: significant digits of a ball's text where the caller names none (an error message; certificates name theirs)
TEXT_DIGITS = 20


class Ops:
    """Ball operations of one backend; ``name`` is ``"arb"`` or ``"mpmath"``."""

    name = "abstract"
    #: working precision in bits (set by :meth:`precision`)
    bits = 128

    @contextlib.contextmanager
    def precision(self, bits: int) -> Iterator[None]:
        raise NotImplementedError

    def to_fraction(self, b: Any) -> Fraction:
        """The exact rational value of an exact ball."""
        raise NotImplementedError

    # constructors -----------------------------------------------------------------------------
    def num(self, value: float | int) -> Ball:
        """The exact ball of a double or an integer."""
        raise NotImplementedError

    def rational(self, p: int, q: int) -> Ball:
        raise NotImplementedError

    def decimal(self, value: float | int) -> Ball:
        """The ball of a parameter's value read as the decimal it prints as (:func:`decimal_value`): the exact ball
        of the double where the two agree (``0.5``), a ball around ``1/10`` for ``0.1``."""
        if isinstance(value, (int, np.integer)):
            return self.num(int(value))
        exact = decimal_value(value)
        if exact == Fraction(float(value)):
            return self.num(value)
        return self.rational(exact.numerator, exact.denominator)

    def dyadic(self, man: int, exp: int) -> Ball:
        """``man * 2**exp`` exactly."""
        raise NotImplementedError

    def hull(self, lo: Any, hi: Any) -> Ball:
        """The smallest ball containing the balls ``lo`` and ``hi``."""
        raise NotImplementedError

    def pi(self) -> Ball:
        raise NotImplementedError

    # endpoints and decisions ---------------------------------------------------------------------
    def lower(self, b: Any) -> Ball:
        raise NotImplementedError

    def upper(self, b: Any) -> Ball:
        raise NotImplementedError

    def positive(self, b: Any) -> bool:
        """Certainly > 0."""
        raise NotImplementedError

    def negative(self, b: Any) -> bool:
        return self.positive(-b)

    def nonnegative(self, b: Any) -> bool:
        """Certainly >= 0."""
        return self.lower_float(b) >= 0.0 and self.is_finite(b)

    def is_finite(self, b: Any) -> bool:
        raise NotImplementedError

    def exact(self, b: Any) -> bool:
        raise NotImplementedError

    def certainly_zero(self, b: Any) -> bool:
        """``b`` is the exact number 0: an exact ball (radius 0) that is not certainly away from 0."""
        return bool(self.exact(b)) and not self.positive(self.abs(b))

    def lower_float(self, b: Any) -> float:
        """A double <= every point of ``b`` (rounded outward)."""
        lo = self.lower(b)
        f = float(self._to_float(lo))
        return f if not (self.num(f) > lo if math.isfinite(f) else False) else math.nextafter(f, -math.inf)

    def upper_float(self, b: Any) -> float:
        hi = self.upper(b)
        f = float(self._to_float(hi))
        return f if not (self.num(f) < hi if math.isfinite(f) else False) else math.nextafter(f, math.inf)

    def _to_float(self, b: Any) -> float:
        raise NotImplementedError

    def mid_rad(self, b: Any) -> tuple[float, float]:
        """A double ``m`` near ``b`` and a double ``r`` with ``|x - m| <= r`` for every ``x`` in ``b``."""
        lo, hi = self.lower_float(b), self.upper_float(b)
        m = lo / 2 + hi / 2
        return m, math.nextafter(max(hi - m, m - lo), math.inf) * (1 + 2.0**-40)

    def text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        raise NotImplementedError

    def endpoint_text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        """A decimal string of an exact endpoint (rounded to ``digits`` significant digits)."""
        return self.text(b, digits)

    # functions ----------------------------------------------------------------------------------
    def exp(self, b: Any) -> Ball:
        raise NotImplementedError

    def log(self, b: Any) -> Ball:
        raise NotImplementedError

    def sqrt(self, b: Any) -> Ball:
        """Square root of the non-negative part of ``b`` (used on quantities >= 0 by definition)."""
        raise NotImplementedError

    def abs(self, b: Any) -> Ball:
        return abs(b)

    def ipow(self, b: Any, n: int) -> Ball:
        """``b ** n`` for an integer ``n >= 0`` by repeated multiplication (python-flint's ``arb ** int``
        returns NaN or a loose ball when ``b`` contains 0 or is negative); even powers of ``|b|``. A negative ``n`` is
        refused (ValueError: the caller takes ``1 / b ** -n``), never looped on."""
        if n < 0:
            raise ValueError(f"ipow needs an exponent n >= 0, got {n}")
        if n == 0:
            return self.num(1)
        base = self.abs(b) if n % 2 == 0 else b
        out: Ball | None = None
        while n:
            if n & 1:
                out = base if out is None else out * base
            n >>= 1
            if n:
                base = base * base
        return cast(Ball, out)  # n >= 1 here: at least one factor

    def min2(self, a: Any, b: Any) -> Ball:
        raise NotImplementedError

    def max2(self, a: Any, b: Any) -> Ball:
        raise NotImplementedError

    def log_binomial(self, n: int, k: int) -> Ball:
        """``log C(n, k)`` for integers ``0 <= k <= n``: exact integers while they are small, else log-Gamma."""
        if not 0 <= k <= n:
            raise InvalidArgument(f"log_binomial needs 0 <= k <= n, got n={n}, k={k}")
        if min(k, n - k) <= 64 or n <= 4096:
            return self.log(self.num(math.comb(n, k)))
        return self.lgamma(n + 1) - self.lgamma(k + 1) - self.lgamma(n - k + 1)

    def lgamma(self, n: int) -> Ball:
        """``log Gamma(n)`` for an integer ``n >= 1``."""
        raise Unsupported("log-Gamma of large integers needs the arb backend")

    # helpers ------------------------------------------------------------------------------------
    @overload
    def map(self, fn: Callable[[Any], Any], v: np.ndarray) -> np.ndarray: ...
    @overload
    def map(self, fn: Callable[[Any], Any], v: Ball) -> Ball: ...

    def map(self, fn: Callable[[Any], Any], v: Any) -> Any:
        """``fn`` elementwise over an object array (or on a single ball). A float tier's overflow is its value (an
        infinite end, read as such), not a warning for the user."""
        with np.errstate(over="ignore"):
            return np.frompyfunc(fn, 1, 1)(v) if isinstance(v, np.ndarray) else fn(v)

    def map2(self, fn: Callable[[Any, Any], Any], a: BallValue, b: BallValue) -> BallValue:
        """``fn`` elementwise over object arrays (broadcast), or on two balls."""
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return np.frompyfunc(fn, 2, 1)(a, b)
        return fn(a, b)

    def array(self, values: Any) -> np.ndarray:
        """An object array of exact balls from a float array."""
        arr = np.asarray(values, dtype=np.float64)
        return cast(np.ndarray, np.frompyfunc(self.num, 1, 1)(arr) if arr.ndim
                    else np.array(self.num(float(arr)), dtype=object))

    def zero(self) -> Ball:
        return self.num(0)

    def total(self, v: Any) -> Ball:
        """Sum of an object array (0 for an empty one)."""
        return functools.reduce(lambda a, b: a + b, list(np.ravel(v)), self.zero())

    def minimum(self, v: Any) -> Ball:
        return functools.reduce(self.min2, list(np.ravel(v)))

    def maximum(self, v: Any) -> Ball:
        return functools.reduce(self.max2, list(np.ravel(v)))

    def norm(self, v: np.ndarray, axis: int = -1) -> np.ndarray:
        """Euclidean norm along ``axis`` (an object array of balls, or one ball for a vector)."""
        sq = (v * v).sum(axis=axis)
        return self.map(self.sqrt, sq)


class ArbOps(Ops):
    """python-flint ``arb`` balls (the default)."""

    name = "arb"

    def __init__(self) -> None:
        import flint

        self.flint = flint
        self.arb = flint.arb

    @contextlib.contextmanager
    def precision(self, bits: int) -> Iterator[None]:
        old, old_bits = self.flint.ctx.prec, self.bits
        self.flint.ctx.prec = self.bits = int(bits)
        try:
            yield
        finally:
            self.flint.ctx.prec, self.bits = old, old_bits

    def to_fraction(self, b: Any) -> Fraction:
        if not b.is_exact():
            raise Unsupported(f"{b} is not an exact number")
        man, exp = b.mid().man_exp()
        man, exp = int(man), int(exp)
        return Fraction(man * 2**exp) if exp >= 0 else Fraction(man, 2**-exp)

    def num(self, value: float | int) -> Ball:
        return self.arb(value)

    def rational(self, p: int, q: int) -> Ball:
        return self.arb(self.flint.fmpq(int(p), int(q)))

    def dyadic(self, man: int, exp: int) -> Ball:
        return self.arb((self.flint.fmpz(int(man)), self.flint.fmpz(int(exp))))

    def hull(self, lo: Any, hi: Any) -> Ball:
        return lo.union(hi)

    def pi(self) -> Ball:
        return self.arb.pi()

    def lower(self, b: Any) -> Ball:
        return b.lower()

    def upper(self, b: Any) -> Ball:
        return b.upper()

    def positive(self, b: Any) -> bool:
        return bool(b > 0)

    def nonnegative(self, b: Any) -> bool:
        return bool(b >= 0)

    def is_finite(self, b: Any) -> bool:
        return bool(b.is_finite())

    def exact(self, b: Any) -> bool:
        return bool(b.is_exact())

    def _to_float(self, b: Any) -> float:
        return float(b)

    def mid_rad(self, b: Any) -> tuple[float, float]:
        m = float(b.mid())  # within half an ulp of the midpoint (arb rounds to nearest)
        return m, float(b.rad()) * (1 + 2.0**-40) + abs(m) * 2.0**-52 + 5e-324

    def text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        return b.str(digits) if b.is_finite() else str(b)

    def endpoint_text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        return b.str(digits, radius=False) if b.is_finite() else str(b)

    def exp(self, b: Any) -> Ball:
        return b.exp()

    def log(self, b: Any) -> Ball:
        return b.log()

    def sqrt(self, b: Any) -> Ball:
        if b < 0:  # certainly negative: undefined, as in float and the mpmath tier (not the root of 0)
            return self.arb("nan")
        return b.nonnegative_part().sqrt()

    def min2(self, a: Any, b: Any) -> Ball:
        return a.min(b)

    def lgamma(self, n: int) -> Ball:
        return self.arb(n).lgamma()

    def max2(self, a: Any, b: Any) -> Ball:
        return a.max(b)


class MpmathOps(Ops):
    """``mpmath.iv`` intervals: the fallback when python-flint is not installed (slower)."""

    name = "mpmath"

    def __init__(self) -> None:
        import mpmath

        self.mp = mpmath
        self.iv = mpmath.iv

    @contextlib.contextmanager
    def precision(self, bits: int) -> Iterator[None]:
        old, old_bits = self.iv.prec, self.bits
        self.iv.prec = self.bits = int(bits)
        try:
            yield
        finally:
            self.iv.prec, self.bits = old, old_bits

    def to_fraction(self, b: Any) -> Fraction:
        lo, hi = self._ends(b)
        if lo != hi:
            raise Unsupported(f"{b} is not an exact number")
        sign, man, exp, _ = lo._mpf_
        man, exp = (-int(man) if sign else int(man)), int(exp)
        return Fraction(man * 2**exp) if exp >= 0 else Fraction(man, 2**-exp)

    def from_fraction(self, f: Fraction) -> Ball:
        return self.iv.mpf(f.numerator) / self.iv.mpf(f.denominator)

    def signed_man_exp(self, x: Any) -> tuple[int, int]:
        """``(man, exp)`` with ``x = man * 2**exp`` for an mpmath ``mpf`` endpoint."""
        sign, man, exp, _ = x._mpf_
        return (-int(man) if sign else int(man)), int(exp)

    def _ends(self, b: Any) -> tuple[Any, Any]:
        lo, hi = b._mpi_
        return self.mp.make_mpf(lo), self.mp.make_mpf(hi)  # exact: mpf(raw) would round to mp.prec (53 bits)

    def _make(self, lo: Any, hi: Any) -> Ball:
        return self.iv.mpf([lo, hi])

    def num(self, value: float | int) -> Ball:
        return self.iv.mpf(value)

    def rational(self, p: int, q: int) -> Ball:
        return self.iv.mpf(int(p)) / self.iv.mpf(int(q))

    def dyadic(self, man: int, exp: int) -> Ball:
        return self.iv.mpf(self.mp.mpf((int(man), int(exp))))

    def hull(self, lo: Any, hi: Any) -> Ball:
        (a, b), (c, d) = self._ends(lo), self._ends(hi)
        return self._make(min(a, c), max(b, d))

    def pi(self) -> Ball:
        return self.iv.pi

    def lower(self, b: Any) -> Ball:
        return self.iv.mpf(self._ends(b)[0])

    def upper(self, b: Any) -> Ball:
        return self.iv.mpf(self._ends(b)[1])

    def positive(self, b: Any) -> bool:
        return bool(self._ends(b)[0] > 0)

    def is_finite(self, b: Any) -> bool:
        lo, hi = self._ends(b)
        return bool(self.mp.isfinite(lo) and self.mp.isfinite(hi))

    def exact(self, b: Any) -> bool:
        lo, hi = self._ends(b)
        return bool(lo == hi)

    def _to_float(self, b: Any) -> float:
        lo, hi = self._ends(b)
        return float((lo + hi) / 2) if self.mp.isfinite(lo) and self.mp.isfinite(hi) else float(lo if lo == hi else "nan")

    def text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        lo, hi = self._ends(b)
        return f"[{self.mp.nstr(lo, digits)}, {self.mp.nstr(hi, digits)}]"

    def endpoint_text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        return self.mp.nstr(self._ends(b)[0], digits)

    def exp(self, b: Any) -> Ball:
        return self.iv.exp(b)

    def log(self, b: Any) -> Ball:
        if not self.positive(b):
            return self._make(-self.mp.inf, self.mp.inf)
        return self.iv.log(b)

    def sqrt(self, b: Any) -> Ball:
        lo, hi = self._ends(b)
        if hi < 0 or self.mp.isnan(hi):
            return self._make(self.mp.nan, self.mp.nan)
        return self.iv.sqrt(self._make(max(lo, self.mp.mpf(0)), hi))

    def min2(self, a: Any, b: Any) -> Ball:
        (p, q), (r, s) = self._ends(a), self._ends(b)
        return self._make(min(p, r), min(q, s))

    def max2(self, a: Any, b: Any) -> Ball:
        (p, q), (r, s) = self._ends(a), self._ends(b)
        return self._make(max(p, r), max(q, s))


@functools.lru_cache(maxsize=None)
def backend(name: str | None = None) -> Ops:
    """The ball backend by name (``"arb"`` or ``"mpmath"``); ``None``: arb when python-flint imports."""
    if name in (None, "arb"):
        try:
            return ArbOps()
        except ImportError:
            if name == "arb":
                raise InvalidArgument("backend 'arb' needs python-flint (pip install python-flint)") from None
    if name in (None, "mpmath"):
        return MpmathOps()
    raise InvalidArgument(f"unknown interval backend {name!r}; allowed: arb, mpmath")


# -- sympy expressions on balls ---------------------------------------------------------------------
def _name(node: sp.Basic) -> str:
    if isinstance(node, sp.Indexed):
        return node.base.label.name
    return node.name


class BallEvaluator:
    """Evaluate a sympy expression on balls.

    ``env`` maps symbol names to balls or object arrays (per column); ``selected`` maps names of
    per-selected-token quantities (``xi``) to object arrays over the selected columns, used inside
    ``Sum(f(xi[i]), (i, 1, N))``: the sum of the terms weighted by ``weights`` (the columns' token
    counts; a dense instance has weights 1), so that a body without per-token values counts N times. Supported: numbers, ``pi``,
    ``E``, ``+ * **``, ``exp log sqrt Abs Min Max``, ``softplus`` and ``sigmoid`` of the
    normalisers module, ``Sum`` over selected tokens, ``Piecewise`` with inequality conditions
    (decided in balls; an undecided condition takes the hull of the branches). Anything else
    raises :class:`Unsupported`.
    """

    def __init__(self, ops: Ops, env: Mapping[str, Any], selected: Mapping[str, Any] | None = None,
                 weights: np.ndarray | None = None):
        self.ops, self.env, self.selected, self.weights = ops, env, dict(selected or {}), weights

    def __call__(self, expr: sp.Basic) -> Any:
        self._memo: dict[sp.Basic, Any] = {}  # shared subexpressions are evaluated once per call
        try:
            return self._eval(expr, self.env)
        finally:
            self._memo = {}

    def _eval(self, node: sp.Basic, env: Mapping[str, Any]) -> Any:
        if env is not self.env:  # inside a Sum: the body's per-token environment
            return self._eval_node(node, env)
        memo = self.__dict__.setdefault("_memo", {})
        if node not in memo:
            memo[node] = self._eval_node(node, env)
        return memo[node]

    def _number(self, node: sp.Basic) -> Ball:
        ops = self.ops
        if isinstance(node, sp.Integer):
            return ops.num(int(node))
        if isinstance(node, sp.Rational):
            return ops.rational(int(node.p), int(node.q))
        if isinstance(node, sp.Float):
            sign, man, exp, _ = node._mpf_
            return ops.dyadic(-man if sign else man, exp)
        if node is sp.pi:
            return ops.pi()
        if node is sp.E:
            return ops.exp(ops.num(1))
        raise Unsupported(f"cannot evaluate the number {node} in interval arithmetic")

    def _eval_node(self, node: sp.Basic, env: Mapping[str, Any]) -> Any:
        ops = self.ops
        if node.is_Number or node.is_NumberSymbol:
            return self._number(node)
        if isinstance(node, (sp.Symbol, sp.Indexed)):
            name = _name(node)
            if name not in env:
                raise Unsupported(f"no value for symbol {name!r}")
            return env[name]
        if isinstance(node, (sp.Add, sp.Mul)):
            # arrays first: numpy then drives the elementwise operation (mpmath scalars refuse arrays)
            parts = sorted((self._eval(a, env) for a in node.args), key=lambda v: not isinstance(v, np.ndarray))
            if isinstance(node, sp.Add):
                return functools.reduce(lambda a, b: a + b, parts)
            return functools.reduce(lambda a, b: a * b, parts)
        if isinstance(node, sp.Pow):
            return self._pow(node, env)
        if isinstance(node, sp.exp):
            return ops.map(ops.exp, self._eval(node.args[0], env))
        if isinstance(node, sp.log):
            if len(node.args) != 1:
                raise Unsupported(f"log with a base is not supported: {node}")
            return ops.map(ops.log, self._eval(node.args[0], env))
        if isinstance(node, sp.Abs):
            return ops.map(ops.abs, self._eval(node.args[0], env))
        if isinstance(node, (sp.Min, sp.Max)):
            fn = ops.min2 if isinstance(node, sp.Min) else ops.max2
            return functools.reduce(lambda a, b: ops.map2(fn, a, b), (self._eval(a, env) for a in node.args))
        if isinstance(node, sp.Sum):
            return self._sum(node, env)
        if isinstance(node, sp.Piecewise):
            return self._piecewise(node, env)
        form = getattr(type(node), "ball_form", None)  # a function class that brings its own interval form
        if form is not None:
            args = [self._eval(a, env) for a in node.args]
            if len(args) == 1:
                return ops.map(lambda x: form(ops, x), args[0])
            return functools.reduce(lambda a, b: ops.map2(lambda x, y: form(ops, x, y), a, b), args)
        fname = type(node).__name__
        if fname == "softplus":
            return ops.map(lambda x: ops.log(ops.num(1) + ops.exp(x)), self._eval(node.args[0], env))
        if fname == "sigmoid":
            return ops.map(lambda x: ops.num(1) / (ops.num(1) + ops.exp(-x)), self._eval(node.args[0], env))
        raise Unsupported(f"cannot evaluate {fname} ({node}) in interval arithmetic")

    def _pow(self, node: sp.Pow, env: Mapping[str, Any]) -> Any:
        ops = self.ops
        base, e = node.args
        b = self._eval(base, env)
        if e.is_Integer:
            n = int(e)
            if n >= 0:
                return ops.map(lambda x: ops.ipow(x, n), b)
            return ops.map(lambda x: ops.num(1) / ops.ipow(x, -n), b)
        if e == sp.Rational(1, 2):
            return ops.map(ops.sqrt, b)
        if e == sp.Rational(-1, 2):
            return ops.map(lambda x: ops.num(1) / ops.sqrt(x), b)
        ev = self._eval(e, env)
        if not isinstance(ev, np.ndarray) and ops.exact(ev) and ops.is_finite(ev):
            f = ops._to_float(ev)  # an exact ball holding an integer: the power is a product
            if f.is_integer() and abs(f) < 2**31 and ops.certainly_zero(ev - ops.num(int(f))):
                n = int(f)
                return ops.map(lambda x: ops.ipow(x, n) if n >= 0 else ops.num(1) / ops.ipow(x, -n), b)
        return ops.map2(lambda x, y: ops.exp(y * ops.log(x)), b, ev)

    def _condition(self, cond: sp.Basic, env: Mapping[str, Any]) -> Any:
        """True / False / None (undecided) for a relational condition, elementwise over arrays."""
        ops = self.ops
        if cond is sp.true or cond is sp.false:
            return bool(cond)
        if isinstance(cond, (sp.StrictLessThan, sp.LessThan, sp.StrictGreaterThan, sp.GreaterThan)):
            small, big = (cond.lhs, cond.rhs) if isinstance(cond, (sp.StrictLessThan, sp.LessThan)) else (cond.rhs, cond.lhs)
            strict = isinstance(cond, (sp.StrictLessThan, sp.StrictGreaterThan))
            gap = self._eval(big, env) - self._eval(small, env) if not isinstance(self._eval(small, env), np.ndarray) \
                else -self._eval(small, env) + self._eval(big, env)

            def decide(g: Any) -> bool | None:
                if ops.positive(g) or (not strict and ops.nonnegative(g)):
                    return True
                if ops.negative(g) or (strict and ops.certainly_zero(g)):
                    return False
                return None

            return ops.map(decide, gap)
        raise Unsupported(f"cannot decide the condition {cond} in interval arithmetic")

    def _piecewise(self, node: sp.Piecewise, env: Mapping[str, Any]) -> Any:
        """The first branch whose condition certainly holds; the hull of the candidates while undecided."""
        ops = self.ops
        pieces = [(self._eval(e, env), self._condition(c, env)) for e, c in node.args]
        values = np.broadcast_arrays(*[np.asarray(v, dtype=object) for v, _ in pieces],
                                     *[np.asarray(c, dtype=object) for _, c in pieces])
        k = len(pieces)
        vals, conds = values[:k], values[k:]
        out = np.empty(vals[0].shape, dtype=object)
        for idx in np.ndindex(out.shape):
            acc: Any = None
            for v, c in zip(vals, conds):
                decided: Any = c[idx]  # True, False or an undecided condition
                if decided is False:
                    continue
                acc = v[idx] if acc is None else ops.hull(acc, v[idx])
                if decided is True:
                    break
            else:
                if acc is None:
                    raise Unsupported(f"no branch of {node} applies")
            out[idx] = acc
        return out if out.ndim else out[()]

    def _sum(self, node: sp.Sum, env: Mapping[str, Any]) -> Any:
        if len(node.limits) != 1:
            raise Unsupported(f"only single sums over the selected tokens are supported: {node}")
        var, lo, hi = node.limits[0]
        if lo != 1 or str(hi) != "N":
            raise Unsupported(f"a Sum must run over the selected tokens, (i, 1, N); got {node.limits[0]}")
        inner = dict(env)
        inner.update(self.selected)
        inner.pop(str(var), None)
        value = self._eval(node.function, inner)
        if self.weights is None:
            raise Unsupported("a Sum over the selected tokens needs a selection")
        if not isinstance(value, np.ndarray):
            value = np.array([value] * len(self.weights), dtype=object)
        if value.shape != self.weights.shape:
            raise Unsupported(f"the body of {node} is not a value per selected token")
        return self.ops.total(value * self.weights)
