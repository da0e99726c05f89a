"""The relaxation prover's executors on the operations a core is made of, against exact rational arithmetic (issue 35).

The float64 endpoint tier (``run_float``) screens boxes and the rigorous tiers (arb, ``mpmath.iv``) close them; each
answer must enclose the exact value, and the enclosures that can be exact must be:

- a product of two doubles: the rounded product is kept as an end only on the side its rounding error (Dekker's
  TwoProduct) allows, so ``lo <= a b <= hi`` exactly, for products that round up, round down or are exact; likewise
  a sum (TwoSum);
- ``exp`` at exactly 0 is exactly 1 and ``log`` at exactly 1 is exactly 0 (a bound whose equality case sits there is
  then decided at that point);
- a division by an interval of one sign is a finite enclosure of the quotient in every tier (only a divisor holding 0
  may give an unbounded one; ``mpmath.iv`` keeps the finite side of a divisor touching 0);
- ``sigmoid`` stays in [0, 1] and ``softplus`` in [0, inf) in the endpoint tiers, also where ``exp`` overflows.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding.prover.program import compile_program, run_float, run_rigorous

_x, _y = sp.symbols("x y", real=True)
RIGOROUS = ("arb", "mpmath.iv")

#: pairs of doubles whose product rounds up, rounds down, is exact, is tiny, huge, of either sign
PRODUCTS = [(1.0 + 2.0**-52, 1.0 + 2.0**-52), (1.0 + 2.0**-52, 1.0 - 2.0**-53), (1.0 - 2.0**-53, 1.0 - 2.0**-53),
            (3.0, 1.0 / 3.0), (0.1, 0.1), (0.1, 0.3), (-0.1, 0.3), (0.7, -0.7), (1.5, 2.0), (1e-150, 1e-150),
            (1e150, 3e150), (-(1.0 + 2.0**-52), 1.0 + 2.0**-52), (2.0**-1074, 0.75), (123456789.123, 987654321.987),
            # below the normal range: subnormal and underflowing products (TwoProduct's error term underflows)
            (1e-160, 1e-160), (-1e-160, 3e-161), (1e-200, 1e-200), (-1e-200, 1e-200), (3e-170, 7e-150), (0.0, 1e-300)]


def _frac(x: float) -> Fraction:
    return Fraction(x)


def _random_products(n: int) -> list[tuple[float, float]]:
    rng = np.random.default_rng(35)
    a = rng.uniform(-1.0, 1.0, n) * 10.0 ** rng.integers(-30, 30, n)
    b = rng.uniform(-1.0, 1.0, n) * 10.0 ** rng.integers(-30, 30, n)
    return list(zip(a.tolist(), b.tolist()))


def test_the_float_tier_encloses_every_product_exactly() -> None:
    pairs = PRODUCTS + _random_products(400)
    program = compile_program([_x * _y], [_x, _y])
    a = np.array([[p, q] for p, q in pairs])
    lo, hi = run_float(program, a, a)[0]
    rounded_up = rounded_down = 0
    for (p, q), l_, h_ in zip(pairs, lo.tolist(), hi.tolist()):
        exact = _frac(p) * _frac(q)
        assert _frac(l_) <= exact <= _frac(h_), f"{p!r} * {q!r}: [{l_!r}, {h_!r}] misses the exact product"
        rounded = _frac(p * q)
        rounded_up += rounded > exact
        rounded_down += rounded < exact
        if rounded == exact:  # an exact product is its own enclosure
            assert l_ == h_ == p * q, (p, q, l_, h_)
    assert rounded_up > 10 and rounded_down > 10  # both sides of the rounding were exercised


@pytest.mark.parametrize("a, b, point", [
    (2.0**-484, 2.0**-484, True),  # exactly 2^-968: the least product whose TwoProduct error term is trusted
    (3 * 2.0**-485, 2.0**-484, True),  # 1.5 2^-968
    (-(2.0**-400), 2.0**-568, True),  # -2^-968
    (3 * 2.0**-486, 2.0**-484, False),  # 0.75 2^-968: exact, but below, where its error term may underflow
    (2.0**-484, 2.0**-485, False),  # 2^-969
    (2.0**-500, 2.0**-500, False),  # 2^-1000
])
def test_an_exact_product_is_a_point_from_two_to_the_minus_968_on_and_widened_below(a: float, b: float,
                                                                                     point: bool) -> None:
    """The float tier's product (``program._product``) as its docstring states it: exact (lo = hi = a b) for a product
    of two doubles that is exact and at least 2^-968 in magnitude; below, one ulp outward on each side, since there
    the error term can underflow and read 0 (an enclosure trusted at a product the error term got wrong would miss
    it). Each pair's product is exact in doubles, so only the threshold decides."""
    program = compile_program([_x * _y], [_x, _y])
    box = np.array([[a, b]])
    lo, hi = (float(v[0]) for v in run_float(program, box, box)[0])
    exact = _frac(a) * _frac(b)
    assert _frac(a * b) == exact and _frac(lo) <= exact <= _frac(hi)
    assert (lo == hi == a * b) if point else (lo < a * b < hi), (a, b, lo, hi)


def test_products_about_the_exactness_threshold_are_enclosed() -> None:
    """Random mantissas with products from 2^-940 down to the subnormals: ``lo <= a b <= hi`` exactly, on both sides
    of the 2^-968 from which the rounding error is trusted."""
    rng = np.random.default_rng(968)
    ea, eb = rng.integers(-520, -440, 600), rng.integers(-540, -460, 600)
    a = rng.uniform(1.0, 2.0, 600) * np.ldexp(1.0, ea) * rng.choice([-1.0, 1.0], 600)
    b = rng.uniform(1.0, 2.0, 600) * np.ldexp(1.0, eb)
    program = compile_program([_x * _y], [_x, _y])
    box = np.stack([a, b], axis=1)
    lo, hi = run_float(program, box, box)[0]
    for p, q, l_, h_ in zip(a.tolist(), b.tolist(), lo.tolist(), hi.tolist()):
        exact = _frac(p) * _frac(q)
        assert _frac(l_) <= exact <= _frac(h_), f"{p!r} * {q!r}: [{l_!r}, {h_!r}] misses the exact product"
    assert np.any(np.abs(a * b) >= 2.0**-968) and np.any(np.abs(a * b) < 2.0**-968)


#: pairs of doubles whose sum rounds up (1 + 3 2^-54 is nearer 1 + 2^-52), rounds down (1 - 2^-60 is nearer 1), is
#: exact, cancels, is tiny, huge, of either sign
SUMS = [(1.0, 3 * 2.0**-54), (1.0, -(2.0**-60)), (1.0, 2.0**-60), (-1.0, 2.0**-60), (-1.0, -(2.0**-60)), (0.1, 0.2),
        (0.1, -0.3), (1.5, 2.25), (1e308, 1e308), (-1e308, -1e308), (1e300, -1e300), (2.0**-1074, 2.0**-1074),
        (2.0**-1074, -(2.0**-1073)), (1e16, 1.0), (1e16, -1.0), (3.0, -(2.0**-53)), (0.0, -0.0), (-5e-324, 1e-300)]


def _random_sums(n: int) -> list[tuple[float, float]]:
    rng = np.random.default_rng(36)
    a = rng.uniform(-1.0, 1.0, n) * 10.0 ** rng.integers(-20, 20, n)
    b = rng.uniform(-1.0, 1.0, n) * 10.0 ** rng.integers(-20, 20, n)
    return list(zip(a.tolist(), b.tolist()))


def test_the_float_tier_encloses_every_sum_exactly() -> None:
    """A sum's ends are the rounded sum kept only on the side its rounding error (TwoSum) allows: ``lo <= a + b <= hi``
    exactly for sums that round up, round down or are exact (an exact sum is its own enclosure); an overflowing sum
    has the infinite end on its side."""
    pairs = SUMS + _random_sums(400)
    program = compile_program([_x + _y], [_x, _y])
    a = np.array([[p, q] for p, q in pairs])
    with np.errstate(over="ignore"):
        lo, hi = run_float(program, a, a)[0]
    rounded_up = rounded_down = 0
    for (p, q), l_, h_ in zip(pairs, lo.tolist(), hi.tolist()):
        exact = _frac(p) + _frac(q)
        assert (l_ == -np.inf or _frac(l_) <= exact) and (h_ == np.inf or exact <= _frac(h_)), (
            f"{p!r} + {q!r}: [{l_!r}, {h_!r}] misses the exact sum")
        if np.isfinite(p + q):
            rounded = _frac(p + q)
            rounded_up += rounded > exact
            rounded_down += rounded < exact
            if rounded == exact:
                assert l_ == h_ == p + q, (p, q, l_, h_)
    assert rounded_up > 10 and rounded_down > 10  # both sides of the rounding were exercised


@pytest.mark.parametrize("tier", ("float64",) + RIGOROUS)
@pytest.mark.parametrize("constant", [sp.pi, sp.E, sp.pi / 7, sp.E**2, sp.Rational(1, 3), sp.sqrt(2)], ids=str)
def test_constants_are_enclosed_in_every_tier(tier: str, constant: sp.Expr) -> None:
    """A statement's constants (pi and e named, rationals, surds) times a coordinate at 1: each tier's enclosure
    holds the constant (mpmath at 60 digits) and is at most 32 ulps wide (exp rounds outward by several)."""
    import mpmath

    program = compile_program([constant * _x], [_x])
    if tier == "float64":
        lo, hi = (float(v[0]) for v in run_float(program, np.array([[1.0]]), np.array([[1.0]]))[0])
    else:
        lo, hi = run_rigorous(program, [1.0], [1.0], tier)[0]
    with mpmath.workdps(60):
        exact = mpmath.mpf(sp.N(constant, 60))
        assert mpmath.mpf(lo) <= exact <= mpmath.mpf(hi), (tier, constant, lo, hi)
    assert hi - lo <= 32 * np.spacing(abs(float(exact))), (tier, constant, lo, hi)


#: interval ends, infinite ones among them: a box unbounded on a side stands for arbitrarily large values there
PRODUCT_ENDS = [-np.inf, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, np.inf]


def _inside(lo: float, hi: float) -> list[float]:
    """Points of [lo, hi]: its finite ends, its midpoint, and very large values where it is unbounded."""
    points = [v for v in (lo, hi) if np.isfinite(v)]
    points += [1e300, 1e200] if hi == np.inf else []
    points += [-1e300, -1e200] if lo == -np.inf else []
    if np.isfinite(lo) and np.isfinite(hi):
        points.append(lo / 2 + hi / 2)
    return [p for p in points if lo <= p <= hi]


def test_the_float_tier_encloses_products_of_unbounded_intervals() -> None:
    """Every product x y of points of two intervals, ends 0, +-1 and +-inf among them, lies in the float tier's
    product of the intervals (``0 * inf`` at an end reads 0, as interval arithmetic has it; ``1 * inf`` is not 0)."""
    boxes = [(a, b) for a in PRODUCT_ENDS for b in PRODUCT_ENDS if a <= b and not (a == b and np.isinf(a))]
    program = compile_program([_x * _y], [_x, _y])
    pairs = [(p, q) for p in boxes for q in boxes]
    lo_, hi_ = run_float(program, np.array([[p[0], q[0]] for p, q in pairs]), np.array([[p[1], q[1]] for p, q in pairs]))[0]
    for (p, q), lo, hi in zip(pairs, lo_.tolist(), hi_.tolist()):
        assert not (np.isnan(lo) or np.isnan(hi)), (p, q, lo, hi)
        for x in _inside(*p):
            for y in _inside(*q):
                assert lo <= x * y <= hi, (p, q, x, y, lo, hi)


@pytest.mark.parametrize("tier", RIGOROUS)
def test_the_rigorous_tiers_enclose_products(tier: str) -> None:
    program = compile_program([_x * _y], [_x, _y])
    for p, q in PRODUCTS:
        lo, hi = run_rigorous(program, [p, q], [p, q], tier)[0]
        assert _frac(lo) <= _frac(p) * _frac(q) <= _frac(hi), (tier, p, q, lo, hi)


@pytest.mark.parametrize("lo, hi", [(0.0, 0.0), (-1.0, 0.0), (0.0, 1.0), (-0.0, 0.0)])
def test_exp_is_exactly_one_at_zero_in_the_float_tier(lo: float, hi: float) -> None:
    program = compile_program([sp.exp(_x)], [_x])
    o_lo, o_hi = (float(v[0]) for v in run_float(program, np.array([[lo]]), np.array([[hi]]))[0])
    if lo == 0.0:
        assert o_lo == 1.0, (lo, hi, o_lo)
    if hi == 0.0:
        assert o_hi == 1.0, (lo, hi, o_hi)


@pytest.mark.parametrize("lo, hi", [(1.0, 1.0), (0.5, 1.0), (1.0, 2.0)])
def test_log_is_exactly_zero_at_one_in_the_float_tier(lo: float, hi: float) -> None:
    program = compile_program([sp.log(_x)], [_x])
    o_lo, o_hi = (float(v[0]) for v in run_float(program, np.array([[lo]]), np.array([[hi]]))[0])
    if lo == 1.0:
        assert o_lo == 0.0, (lo, hi, o_lo)
    if hi == 1.0:
        assert o_hi == 0.0, (lo, hi, o_hi)


#: divisor boxes of one sign (finite quotients), touching 0 and holding 0 (an unbounded side allowed)
DIVISORS = [(0.5, 2.0), (3.0, 3.0), (1e-300, 1e-299), (-2.0, -0.5), (-3.0, -3.0), (-1e-299, -1e-300), (1e300, 1e301)]
TOUCHING = [(0.0, 2.0), (-2.0, 0.0), (-1.0, 1.0)]


@pytest.mark.parametrize("tier", ("float64",) + RIGOROUS)
@pytest.mark.parametrize("d_lo, d_hi", DIVISORS + TOUCHING)
def test_a_quotient_is_enclosed_and_finite_when_the_divisor_keeps_its_sign(tier: str, d_lo: float, d_hi: float) -> None:
    program = compile_program([_x / _y], [_x, _y])
    n_lo, n_hi = 1.0, 3.0
    if tier == "float64":
        lo, hi = (float(v[0]) for v in run_float(program, np.array([[n_lo, d_lo]]), np.array([[n_hi, d_hi]]))[0])
    else:
        lo, hi = run_rigorous(program, [n_lo, d_lo], [n_hi, d_hi], tier)[0]
    if d_lo > 0 or d_hi < 0:
        assert np.isfinite(lo) and np.isfinite(hi), (tier, d_lo, d_hi, lo, hi)
    for n in (n_lo, n_hi):  # every quotient of the boxes' ends (where the divisor is not 0) is enclosed
        for d in (d_lo, d_hi):
            if d != 0:
                q = Fraction(n) / Fraction(d)
                assert (lo == -np.inf or _frac(lo) <= q) and (hi == np.inf or q <= _frac(hi)), (tier, n, d, lo, hi)
    if tier == "mpmath.iv" and d_lo == 0.0 < d_hi:  # endpoint intervals: 1/[0, h] = [1/h, inf], the lower end kept
        assert np.isfinite(lo) and hi == np.inf, (tier, lo, hi)
    if tier == "mpmath.iv" and d_lo < 0.0 == d_hi:
        assert lo == -np.inf and np.isfinite(hi), (tier, lo, hi)


@pytest.mark.parametrize("tier", ("float64",) + RIGOROUS)
def test_a_quotient_by_an_exact_zero_has_no_value(tier: str) -> None:
    """x / [0, 0] is no number: every tier says nothing of it (the whole line, or NaN in the float tier), never
    [0, 0] from 1/x's sign rule (the float tier's answer before: a form singular at the limit t = 0 then looked like
    a value to the prover's filters, which skip such a form through ``nanmax`` over the forms)."""
    program = compile_program([_x / _y], [_x, _y])
    for n_lo, n_hi in ((1.0, 3.0), (-2.0, 5.0), (0.0, 0.0)):
        if tier == "float64":
            lo, hi = (float(v[0]) for v in run_float(program, np.array([[n_lo, 0.0]]), np.array([[n_hi, 0.0]]))[0])
            assert (lo == -np.inf or math.isnan(lo)) and (hi == np.inf or math.isnan(hi)), (n_lo, n_hi, lo, hi)
        else:
            assert run_rigorous(program, [n_lo, 0.0], [n_hi, 0.0], tier)[0] == (-np.inf, np.inf), (tier, n_lo, n_hi)


@pytest.mark.parametrize("tier", ("float64",) + RIGOROUS)
@pytest.mark.parametrize("d_lo, d_hi", DIVISORS)
@pytest.mark.parametrize("n_lo, n_hi", [(1.0, 3.0), (-3.0, -1.0), (-1.0, 2.0), (0.5, 0.5)])
def test_a_quotient_by_a_divisor_of_one_sign_is_its_exact_range_to_a_few_ulps(tier: str, n_lo: float, n_hi: float,
                                                                               d_lo: float, d_hi: float) -> None:
    """Enclosing is not enough: a reciprocal whose end is twice the true one encloses too, and leaves every box it
    touches undecided. The range of n/d over a box whose divisor keeps its sign lies between its corners' quotients;
    every tier's enclosure is that range widened by at most a relative 2^-40 (rounding) in the endpoint tiers, 2^-24 in
    arb (a box is a midpoint-radius ball there, its radius a 30-bit number)."""
    program = compile_program([_x / _y], [_x, _y])
    if tier == "float64":
        lo, hi = (float(v[0]) for v in run_float(program, np.array([[n_lo, d_lo]]), np.array([[n_hi, d_hi]]))[0])
    else:
        lo, hi = run_rigorous(program, [n_lo, d_lo], [n_hi, d_hi], tier)[0]
    corners = [Fraction(n) / Fraction(d) for n in (n_lo, n_hi) for d in (d_lo, d_hi)]
    q_lo, q_hi = min(corners), max(corners)
    slack = max(abs(q_lo), abs(q_hi)) * Fraction(1, 2**24 if tier == "arb" else 2**40)
    assert q_lo - slack <= _frac(lo) <= q_lo and q_hi <= _frac(hi) <= q_hi + slack, (tier, n_lo, n_hi, d_lo, d_hi, lo, hi)


@pytest.mark.parametrize("tier", RIGOROUS)
@pytest.mark.parametrize("error", [ZeroDivisionError, ValueError, OverflowError])
def test_rigorous_arithmetic_that_raises_gives_the_whole_line_and_no_sign(tier: str, error: type,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the arithmetic of a rigorous tier raises (a library's division by zero, a domain error), the value is
    lost: its enclosure is the whole line and its sign unknown (0), never a number a box could be closed with."""
    from attnbounds.theory.deciding.prover import program as program_module

    executor = program_module.rigorous(tier)

    def raising(*args: object) -> object:
        raise error("raised by the test")

    monkeypatch.setattr(executor, "apply", raising)
    program = compile_program([sp.log(_x) + _y, _x * _y], [_x, _y])
    assert run_rigorous(program, [1.0, 2.0], [2.0, 3.0], tier) == [(-np.inf, np.inf)] * 2
    assert program_module.rigorous_signs(program, [1.0, 2.0], [2.0, 3.0], tier) == [0, 0]


#: argument boxes of the bounded functions: far below 0 (exp(-x) overflows, the sigmoid underflows to 0), around 0,
#: far above (the sigmoid rounds to 1)
SQUASH_BOXES = [(-1e308, -1e300), (-800.0, -700.0), (-40.0, -30.0), (-1.0, 1.0), (0.0, 0.0), (30.0, 40.0),
                (700.0, 800.0), (1e300, 1e308), (-50.0, 3.0), (-800.0, 3.0), (-1e5, 0.0), (-1000.0, 1000.0), (-1e308, 1e308)]


def _squashed(tier: str, lo: float, hi: float) -> list[tuple[str, Any, tuple[float, float]]]:
    """Per bounded function (``sigmoid``, ``softplus``): its name, its exact value (an mpmath function) and the tier's
    enclosure of it on the box ``[lo, hi]``."""
    import mpmath

    from attnbounds.theory.mathematics.normalisers.symbolic import sigmoid, softplus

    out = []
    for name, fn, exact in (("sigmoid", sigmoid, lambda v: 1 / (1 + mpmath.exp(-v))),
                            ("softplus", softplus, lambda v: mpmath.log(1 + mpmath.exp(v)))):
        program = compile_program([fn(_x)], [_x])
        if tier == "float64":
            with np.errstate(over="ignore"):
                o_lo, o_hi = (float(v[0]) for v in run_float(program, np.array([[lo]]), np.array([[hi]]))[0])
        else:
            o_lo, o_hi = run_rigorous(program, [lo], [hi], tier)[0]
        out.append((name, exact, (o_lo, o_hi)))
    return out


@pytest.mark.parametrize("tier", ("float64",) + RIGOROUS)
@pytest.mark.parametrize("lo, hi", SQUASH_BOXES)
def test_sigmoid_and_softplus_stay_in_their_ranges(tier: str, lo: float, hi: float) -> None:
    """``sigmoid`` lies in [0, 1] and ``softplus`` in [0, inf): the enclosures hold the exact values at the box's ends
    (mpmath at 300 bits), never leave those ranges (a lower end of ``-5e-324`` instead of 0 would leave
    ``sigmoid(x) >= 0`` undecided on the box; arb's midpoint-radius hull of a wide box dips below 0 by its rounding),
    and the sigmoid's is never the whole line (arb's own ``1 / (1 + exp(-a))`` on [-50, 3] is NaN: ``exp(-a)``, a
    midpoint and a radius, holds 0)."""
    import mpmath

    for name, exact, (o_lo, o_hi) in _squashed(tier, lo, hi):
        with mpmath.workprec(300):
            for p in (lo, hi):
                v = exact(mpmath.mpf(p))
                assert mpmath.mpf(o_lo) <= v <= mpmath.mpf(o_hi), (tier, name, lo, hi, o_lo, o_hi, p)
        # an endpoint tier exactly; arb's hull (a midpoint and a 30-bit radius rounded up) within its radius' rounding
        if name == "sigmoid" or max(abs(lo), abs(hi)) < 1e300:  # never the whole line (softplus(1e308) is no arb ball)
            assert math.isfinite(o_lo) and math.isfinite(o_hi), (tier, name, lo, hi, o_lo, o_hi)
        slack = 2.0**-28 * max(abs(o_hi), 1.0) if tier == "arb" else 0.0
        assert o_lo >= -slack, (tier, name, lo, hi, o_lo)
        if name == "sigmoid":
            assert o_hi <= 1.0 + slack, (tier, name, lo, hi, o_hi)


@pytest.mark.parametrize("tier", ("float64",) + RIGOROUS)
@pytest.mark.parametrize("x", [-30.0, -1.0, 0.0, 0.5, 3.0, 30.0])
def test_sigmoid_and_softplus_at_a_point_are_tight(tier: str, x: float) -> None:
    """At a point (a box of width 0) ``sigmoid`` and ``softplus`` are enclosed within 1e-12 of their value in every
    tier: the range clipping above may widen, never replace, the function's own rounding (a looser formula, such as
    ``1 / (2 + exp(-x))`` for the lower end, would still lie in [0, 1] and pass the range test)."""
    import mpmath

    for name, exact, (o_lo, o_hi) in _squashed(tier, x, x):
        with mpmath.workprec(300):
            v = exact(mpmath.mpf(x))
            assert mpmath.mpf(o_lo) <= v <= mpmath.mpf(o_hi), (tier, name, x, o_lo, o_hi)
            assert o_hi - o_lo <= 1e-12 * float(v), (tier, name, x, o_lo, o_hi)


@pytest.mark.parametrize("tier", ["float", *RIGOROUS])
@pytest.mark.parametrize("e", [sp.Rational(1, 2), sp.Rational(-1, 2), sp.Rational(1, 3), sp.Rational(-1, 3),
                               sp.Rational(3, 2), sp.Rational(-5, 4)], ids=str)
def test_fractional_powers_are_enclosed_in_every_tier(tier: str, e: sp.Rational) -> None:
    """x^e for the square root's own compilations (1/2, -1/2) and the general exp(e log x) (1/3, -1/3, ...): every
    tier's enclosure on a box holds x^e at the box's ends and inside it (mpmath at 50 digits)."""
    import mpmath

    program = compile_program([_x ** e], [_x])
    for lo, hi in ((0.25, 0.25), (0.5, 2.0), (3.0, 7.5), (1e-6, 1e-3)):
        if tier == "float":
            (a, z), = run_float(program, np.array([[lo]]), np.array([[hi]]))
            a, z = float(a[0]), float(z[0])
        else:
            (a, z), = run_rigorous(program, [lo], [hi], tier)
        with mpmath.workdps(50):
            for x in (lo, (lo + hi) / 2, hi):
                exact = mpmath.mpf(x) ** (mpmath.mpf(e.p) / e.q)
                assert mpmath.mpf(a) <= exact <= mpmath.mpf(z), (tier, e, lo, hi, x, a, z)


@pytest.mark.parametrize("lo, hi", [(0.0, np.inf), (-np.inf, 0.0), (-np.inf, np.inf), (np.nan, 1.0)])
def test_arb_says_nothing_on_a_box_it_cannot_hold_and_mpmath_encloses_it(lo: float, hi: float) -> None:
    """arb balls cannot hold an unbounded (or NaN) side: on such a box the arb tier gives the whole line (sound, and
    nothing to close a box with; the prover's bounded-box test sends it to ``mpmath.iv``), and ``mpmath.iv`` encloses
    exp(-x) on the half-line [0, inf] as [0, 1]."""
    program = compile_program([sp.exp(-_x)], [_x])
    assert run_rigorous(program, [lo], [hi], "arb") == [(-np.inf, np.inf)]
    if lo == 0.0:
        (a, z), = run_rigorous(program, [lo], [hi], "mpmath.iv")
        assert a == 0.0 and z == 1.0


@pytest.mark.parametrize("tier", ("float64",) + RIGOROUS)
@pytest.mark.parametrize("value", [Fraction(10**400), Fraction(-(10**400)), Fraction(1, 10**400), Fraction(-3, 7)],
                         ids=["above the doubles", "below the doubles", "under the doubles", "inexact"])
def test_a_constant_beyond_the_doubles_is_enclosed_not_an_error(tier: str, value: Fraction) -> None:
    """``x + c`` for a rational c past the largest double (10^400: a bound's 1e-300 squared and inverted), or below
    the smallest: every tier encloses it (the float tier between the largest double and infinity), never raises."""
    program = compile_program([_x + sp.Rational(value.numerator, value.denominator)], [_x])
    if tier == "float64":
        o_lo, o_hi = (float(v[0]) for v in run_float(program, np.array([[0.0]]), np.array([[0.0]]))[0])
    else:
        o_lo, o_hi = run_rigorous(program, [0.0], [0.0], tier)[0]
    assert Fraction(o_lo) <= value if math.isfinite(o_lo) else o_lo < 0, (tier, o_lo)
    assert value <= Fraction(o_hi) if math.isfinite(o_hi) else o_hi > 0, (tier, o_hi)
