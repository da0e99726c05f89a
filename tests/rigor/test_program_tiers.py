"""The relaxation prover's executors on the operations a core is made of, against exact rational arithmetic (issue 35).

The float64 endpoint tier (``run_float``) screens boxes and the rigorous tiers (arb, ``mpmath.iv``) close them; each
answer must enclose the exact value, and the enclosures that can be exact must be:

- a product of two doubles: the rounded product is kept as an end only on the side its rounding error (Dekker's
  TwoProduct) allows, so ``lo <= a b <= hi`` exactly, for products that round up, round down or are exact;
- ``exp`` at exactly 0 is exactly 1 and ``log`` at exactly 1 is exactly 0 (a bound whose equality case sits there is
  then decided at that point);
- a division by an interval of one sign is a finite enclosure of the quotient in every tier (only a divisor holding 0
  may give an unbounded one; ``mpmath.iv`` keeps the finite side of a divisor touching 0).
"""

from __future__ import annotations

from fractions import Fraction

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
