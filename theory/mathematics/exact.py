"""Exact decisions: the sign of a closed real number, and ball operations on exact numbers.

:func:`sign_of` is the one decision that certification, the relaxation prover and closed claims share where an
interval enclosure straddles 0: exact rational arithmetic when the number is rational, else arb balls at rising
precision (:data:`PRECISIONS`, up to 65536 bits: a margin of ``e^-40000``, a softmax weight at a logit gap of 40000
temperatures, is a sign there, not a tie), and an exact zero recognised by sympy (``Expr.equals``, which answers
True only from an exact simplification, a surd's self-consistency or a minimal polynomial). An equality case is then
a fact: a non-strict bound holds there, a strict one fails.

:class:`ExactOps` is the :class:`~attnbounds.theory.mathematics.intervals.Ops` interface on exact sympy numbers
(doubles read as the rationals they are, ``exp``/``log``/``sqrt`` kept symbolic): a quantity's ``ball`` form run on
it yields the exact value of the quantity on one instance, and every decision a form makes on the way (a maximum,
an absolute value, a sign) goes through :func:`sign_of`. A decision it cannot make, or a range where a point is
needed (a spectral norm's Gershgorin hull, a Monte Carlo interval), raises
:class:`~attnbounds.theory.mathematics.intervals.Unsupported`: the exact tier then says nothing.
"""

from __future__ import annotations

import contextlib
import math
from fractions import Fraction
from typing import Any, Iterator

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.intervals import TEXT_DIGITS, Ball, BallEvaluator, Ops, PrecisionLoss, Unsupported, backend

#: working precisions of :func:`sign_of`, in bits (the ceiling is the last; a rung costs milliseconds to a second,
#: sympy's zero test after the last can cost minutes)
PRECISIONS = (128, 512, 2048, 4096, 16384, 65536)
#: the largest expression (sympy nodes) :class:`ExactOps` decides a sign of
MAX_NODES = 3000
#: the largest expression (sympy nodes) :func:`sign_of` asks sympy to recognise as 0 (``equals`` simplifies: its
#: time grows fast with the size); it asks only when arb's enclosure at the highest precision holds 0 within 2^-bits/2
MAX_ZERO_TEST = 600
#: nor when an ``exp`` in it has an argument beyond this in magnitude: ``equals`` simplifies with numerical evaluation
#: along the way, which chases the cancellation of such terms (a softmax at a logit gap of 580000 temperatures: 35 s,
#: and nothing recognised); a zero made of them cancels in ``powsimp`` (tried first) or stays undecided
MAX_ZERO_TEST_EXP = 10_000


#: the largest numerator or denominator of ``r`` in an ``exp(r log n)`` the exact tier builds (:meth:`ExactOps.exp`)
EXP_REWRITE_LIMIT = 2**16


def sign_of(value: sp.Expr) -> tuple[int | None, str]:
    """The sign (-1, 0, 1) of a closed sympy number, and how it was decided (module docstring); ``None`` when it
    stays unknown."""
    value = sp.sympify(value)
    if value.is_Rational:
        return (0 if value == 0 else 1 if value > 0 else -1), "exact rational arithmetic"
    if value.free_symbols:
        return None, "not a closed number"
    sign, method, near_zero, evaluable = _ball_sign(value)
    if sign is not None:
        return sign, method
    small = sum(1 for _ in sp.preorder_traversal(value)) <= MAX_ZERO_TEST
    if evaluable and small:
        # a cancellation no working precision resolves (1 - a/(a + b) with b = e^-10000 a): the same number over
        # one denominator, where sympy cancels the terms exactly, and the signs of its numerator and denominator
        num, den = sp.fraction(sp.together(value))
        if (num, den) != (value, 1) and not num.free_symbols and not den.free_symbols:
            s_num, m_num, _, _ = _ball_sign(num)
            s_den, _, _, _ = _ball_sign(den)
            if s_num is not None and s_den:
                return s_num * s_den, f"{m_num}, on the number over one denominator (sympy's together)"
    value = elementary(value)
    if sp.expand(sp.powsimp(value, combine="exp")) == 0:
        return 0, "sympy: exactly 0 (equality)"
    if not near_zero:
        return None, method
    if not small:
        return None, f"{method}; too large for sympy to recognise an exact 0"
    if _largest_exponent(value) > MAX_ZERO_TEST_EXP:
        return None, f"{method}; an exp of an argument beyond {MAX_ZERO_TEST_EXP} in magnitude (no zero test by sympy)"
    if value.equals(0) is True:
        return 0, "sympy: exactly 0 (equality)"
    return None, method


def elementary(value: sp.Expr) -> sp.Expr:
    """``value`` with the stable kernels of ``log F`` written as the elementary functions they are (``softplus(x) =
    log(1 + e^x)``, ``sigmoid(x) = 1 / (1 + e^-x)``), which sympy simplifies: ``e (1 + e^-1) - e - 1`` is 0 only so."""
    from attnbounds.theory.mathematics.normalisers.symbolic import sigmoid, softplus

    return value.replace(lambda e: isinstance(e, softplus), lambda e: sp.log(1 + sp.exp(e.args[0]))) \
                .replace(lambda e: isinstance(e, sigmoid), lambda e: 1 / (1 + sp.exp(-e.args[0])))


def _largest_exponent(value: sp.Expr) -> float:
    """The largest magnitude of an ``exp``'s argument in ``value`` (0 without one; infinite when not a number)."""
    return max((_magnitude(a.args[0]) for a in value.atoms(sp.exp)), default=0.0)


def _magnitude(number: sp.Expr) -> float:
    try:
        return abs(complex(number)) if number.is_number else math.inf
    except (TypeError, ValueError, OverflowError):
        return math.inf


def _ball_sign(value: sp.Expr) -> tuple[int | None, str, bool, bool]:
    """The sign of a closed number from arb balls at each of :data:`PRECISIONS` (exact for a rational), how, whether
    the enclosure at the highest precision reached holds 0 within ``2^-bits/2`` (worth a proof of 0), and whether
    interval arithmetic could evaluate it at all."""
    if value.is_Rational:
        return (0 if value == 0 else 1 if value > 0 else -1), "exact rational arithmetic", False, True
    ops = backend(None)
    near_zero = False
    for bits in PRECISIONS:
        try:
            with ops.precision(bits):
                ball = BallEvaluator(ops, {})(value)
        except (PrecisionLoss, OverflowError):
            continue
        except Unsupported as exc:
            return None, f"not evaluable in interval arithmetic: {exc}", False, False
        if ops.positive(ball) or ops.negative(ball):
            return (1 if ops.positive(ball) else -1), f"{ops.name} interval arithmetic at {bits} bits", False, True
        # compared in balls: 2^-(bits/2) is below the doubles' range from 2148 bits on (a float radius, never below
        # 5e-324, made an exact 0 look far from 0 at the top precisions, and sympy was never asked)
        near_zero = ops.is_finite(ball) and ops.positive(ops.num(1) / ops.ipow(ops.num(2), bits // 2) - abs(ball))
    return None, f"arb balls up to {PRECISIONS[-1]} bits: the sign stayed unknown", near_zero, True


def _closed(value: Any) -> sp.Expr:
    return value if isinstance(value, sp.Basic) else sp.sympify(value)


class ExactOps(Ops):
    """Ball operations on exact sympy numbers (module docstring): every ball is a point, every decision
    :func:`sign_of`."""

    name = "exact"

    def __init__(self) -> None:
        self._arb = backend(None)
        self._signs: dict[sp.Basic, int | None] = {}

    @contextlib.contextmanager
    def precision(self, bits: int) -> Iterator[None]:
        old = self.bits
        self.bits = int(bits)
        try:
            yield
        finally:
            self.bits = old

    # -- decisions --------------------------------------------------------------------------------------------
    def sign(self, b: Any) -> int | None:
        """The exact sign of ``b`` (memoised), None when :func:`sign_of` cannot decide it; an expression of more than
        :data:`MAX_NODES` nodes is refused (:class:`Unsupported`): exact arithmetic is for small equality cases."""
        value = _closed(b)
        if value not in self._signs:
            if sum(1 for _ in sp.preorder_traversal(value)) > MAX_NODES:
                raise Unsupported(f"an expression of more than {MAX_NODES} nodes: too large for exact arithmetic")
            self._signs[value] = sign_of(value)[0]
        return self._signs[value]

    def _known_sign(self, b: Any, what: str) -> int:
        s = self.sign(b)
        if s is None:
            raise Unsupported(f"the exact sign of {what} could not be decided")
        return s

    # (an undecided sign raises: every ball here is a point, so callers read "not positive" as "<= 0" and "exact and
    # not positive(|v|)" as "exactly 0"; an undecided one answered False would be read so: 1 - 1/(1 + e^-10000) as 0)
    def positive(self, b: Any) -> bool:
        return self._known_sign(b, "a number compared with 0") == 1

    def negative(self, b: Any) -> bool:
        return self._known_sign(b, "a number compared with 0") == -1

    def nonnegative(self, b: Any) -> bool:
        return self._known_sign(b, "a number compared with 0") in (0, 1)

    def is_finite(self, b: Any) -> bool:
        return not _closed(b).has(sp.zoo, sp.nan, sp.oo, -sp.oo)  # (sympy's own is_finite evaluates: slow)

    def exact(self, b: Any) -> bool:
        return True

    # -- constructors -----------------------------------------------------------------------------------------
    def to_fraction(self, b: Any) -> Fraction:
        value = _closed(b)
        if not value.is_Rational:
            raise Unsupported(f"{value} is not a rational number")
        return Fraction(int(value.p), int(value.q))

    def num(self, value: float | int) -> Ball:
        if isinstance(value, (int, np.integer)):
            return sp.Integer(int(value))
        if not math.isfinite(float(value)):
            raise PrecisionLoss(f"{value} is not a finite number")
        return sp.Rational(*float(value).as_integer_ratio())

    def rational(self, p: int, q: int) -> Ball:
        return sp.Rational(int(p), int(q))

    def dyadic(self, man: int, exp: int) -> Ball:
        return sp.Integer(int(man)) * sp.Integer(2) ** int(exp)

    def hull(self, lo: Any, hi: Any) -> Ball:
        if lo == hi or self.sign(_closed(hi) - _closed(lo)) == 0:
            return lo
        raise Unsupported("exact arithmetic holds numbers, not ranges")

    def pi(self) -> Ball:
        return sp.pi

    def lower(self, b: Any) -> Ball:
        return b

    def upper(self, b: Any) -> Ball:
        return b

    # -- to doubles and text, through an arb enclosure ---------------------------------------------------------
    def _ball(self, b: Any) -> Any:
        with self._arb.precision(max(self.bits, 128)):
            return BallEvaluator(self._arb, {})(_closed(b))

    def lower_float(self, b: Any) -> float:
        """A double at most ``b``: 0 at an exact 0, and never below 0 for a positive one (whose ball may hold 0)."""
        sign = self.sign(b)
        if sign == 0:
            return 0.0
        low = self._arb.lower_float(self._ball(b))
        return max(low, 0.0) if sign == 1 else low

    def upper_float(self, b: Any) -> float:
        sign = self.sign(b)
        if sign == 0:
            return 0.0
        high = self._arb.upper_float(self._ball(b))
        return min(high, -0.0) if sign == -1 else high

    def _to_float(self, b: Any) -> float:
        return self._arb._to_float(self._ball(b))

    def mid_rad(self, b: Any) -> tuple[float, float]:
        return self._arb.mid_rad(self._ball(b))

    def text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        return "0" if self.sign(b) == 0 else self._arb.text(self._ball(b), digits)

    def endpoint_text(self, b: Any, digits: int = TEXT_DIGITS) -> str:
        return "0" if self.sign(b) == 0 else self._arb.endpoint_text(self._ball(b), digits)

    # -- functions ----------------------------------------------------------------------------------------------
    def exp(self, b: Any) -> Ball:
        """``exp(b)``; refused (:class:`Unsupported`: the exact tier decides nothing) where ``b`` is a rational ``r``
        times a logarithm and ``r``'s numerator or denominator exceeds :data:`EXP_REWRITE_LIMIT`: sympy rewrites
        ``exp(r log n)`` as ``n**r`` and computes the whole and root parts of ``n**(p/q)`` as integers, ``n**p`` in
        effect, which never ends for a ``p`` and ``q`` of hundreds of bits (a scalable softmax's ``s log(L) l / T`` at
        a tiny T), and does so again wherever such exps meet in a product."""
        coeff, rest = sp.sympify(b).as_coeff_Mul()
        size = max(abs(int(coeff.p)), int(coeff.q)) if coeff.is_Rational else 0
        if size > EXP_REWRITE_LIMIT and rest.has(sp.log):
            raise Unsupported(f"exp of a rational of {size.bit_length()} bits times a logarithm: sympy's rewriting of "
                              "it as a power does not end")
        return sp.exp(b)

    def log(self, b: Any) -> Ball:
        if self._known_sign(b, "the argument of a logarithm") <= 0:
            raise Unsupported("the logarithm of a number that is not positive")
        return sp.log(b)

    def sqrt(self, b: Any) -> Ball:
        sign = self._known_sign(b, "the argument of a square root")
        if sign < 0:
            raise Unsupported("the square root of a negative number")
        return sp.Integer(0) if sign == 0 else sp.sqrt(b)

    def abs(self, b: Any) -> Ball:
        return -b if self._known_sign(b, "an absolute value's argument") < 0 else b

    def min2(self, a: Any, b: Any) -> Ball:
        return a if self._known_sign(_closed(b) - _closed(a), "a minimum's comparison") >= 0 else b

    def max2(self, a: Any, b: Any) -> Ball:
        return a if self._known_sign(_closed(a) - _closed(b), "a maximum's comparison") >= 0 else b

    def lgamma(self, n: int) -> Ball:
        return sp.loggamma(sp.Integer(int(n)))

    def total(self, v: Any) -> Ball:
        return sp.Add(*list(np.ravel(v))) if np.size(v) else sp.Integer(0)


__all__ = ["ExactOps", "PRECISIONS", "sign_of"]
