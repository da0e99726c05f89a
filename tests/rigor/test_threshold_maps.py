"""The ball form of the sort-based threshold maps (sparsemax, 1.5-entmax) against their exact values.

Ground truth outside the code under test: sparsemax's weights are rational at rational logits, computed here in
``Fraction`` by trying every support (the one whose threshold separates it from the rest); 1.5-entmax's at 80 digits
in mpmath the same way. The ball form must enclose them, give exactly 0 off the support, be decided exactly by the
exact tier at a column exactly at the threshold (which no ball decides), and certification must judge a bound there.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as hs

from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics import balls
from attnbounds.theory.mathematics.exact import ExactOps
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import PrecisionLoss, Unsupported, backend, decimal_value
from attnbounds.theory.mathematics.normalisers import Entmax15, Sparsemax


def _exact_support(y: list, m: list[int], tau_of, p) -> list:
    """The map's weights by brute force over every subset support: the one whose threshold is below each of its
    values and at or above every other value (unique)."""
    n = len(y)
    found = []
    for mask in range(1, 2 ** n):
        inside = [i for i in range(n) if mask >> i & 1 and m[i] > 0]
        if not inside or len(inside) != bin(mask).count("1"):
            continue
        tau = tau_of([y[i] for i in inside], [m[i] for i in inside])
        if tau is None:
            continue
        if all(y[i] > tau for i in inside) and all(y[i] <= tau for i in range(n) if i not in inside and m[i] > 0):
            found.append([p(y[i] - tau) if i in inside else 0 for i in range(n)])
    assert len(found) == 1, found
    return found[0]


def sparsemax_exact(logits: list[float], counts: list[int], T: float) -> list[Fraction]:
    y = [Fraction(v) / decimal_value(T) for v in logits]
    return _exact_support(y, counts, lambda ys, ms: (sum(a * b for a, b in zip(ms, ys)) - 1) / sum(ms),
                          lambda u: u)


def entmax_exact(logits: list[float], counts: list[int], T: float) -> list[mpmath.mpf]:
    with mpmath.workdps(80):
        T_ = decimal_value(T)  # the value a parameter stands for (0.3 is 3/10)
        y = [mpmath.mpf(v) * T_.denominator / (2 * T_.numerator) for v in logits]

        def tau_of(ys, ms):
            K = sum(ms)
            mean = sum(a * b for a, b in zip(ms, ys)) / K
            rest = 1 - sum(a * (b - mean) ** 2 for a, b in zip(ms, ys))
            return None if rest < 0 else mean - mpmath.sqrt(rest / K)

        return _exact_support(y, counts, tau_of, lambda u: u ** 2)


def _instance(n, logits, counts):
    return Instance.from_logits(np.array([logits], dtype=float), n,
                                counts=None if counts is None else np.array([counts]))


# dyadic logits and temperatures, small counts: exact ties at the threshold are frequent
dyadic = hs.integers(-16, 16).map(lambda k: k / 4)
rows = hs.integers(1, 6).flatmap(lambda K: hs.tuples(hs.lists(dyadic, min_size=K, max_size=K),
                                                     hs.lists(hs.integers(0, 3), min_size=K, max_size=K)))


def _tied(logits: list[float], counts: list[int], T: float) -> bool:
    """Whether a present column lies exactly at sparsemax's threshold (weight 0, and no ball decides the side)."""
    w = sparsemax_exact(logits, counts, T)
    y = [Fraction(v) / decimal_value(T) for v in logits]
    tau = max(yi - wi for yi, wi, c in zip(y, w, counts) if c > 0 and wi > 0)
    return any(c > 0 and yi == tau for yi, c in zip(y, counts))


@settings(max_examples=150, deadline=None)
@given(rows, hs.sampled_from([0.25, 0.5, 1.0, 2.0, 0.3]))
def test_sparsemax_ball_encloses_the_exact_rational_weights_and_the_exact_tier_is_them(row, T) -> None:
    logits, counts = row
    if sum(counts) == 0:
        counts[0] = 1
    exact = sparsemax_exact(logits, counts, T)
    inst = _instance(Sparsemax(T=T), logits, counts)
    ops = backend("arb")
    with ops.precision(128):
        try:
            ex = balls.ball_instance(inst, ops)
        except PrecisionLoss:  # only a column exactly at the threshold may be refused by the balls
            assert _tied(logits, counts, T), (logits, counts, T)
            ex = None
    if ex is not None:
        for b, e in zip(ex.alpha, exact):
            assert ops.to_fraction(ops.lower(b)) <= e <= ops.to_fraction(ops.upper(b)), (ops.text(b), e)
            assert e != 0 or ops.certainly_zero(b), (logits, counts, T, ops.text(b))
    exact_ex = balls.ball_instance(inst, ExactOps())
    assert [sp.Rational(e.numerator, e.denominator) - b for b, e in zip(exact_ex.alpha, exact)] == [0] * len(exact)


@settings(max_examples=100, deadline=None)
@given(rows, hs.sampled_from([0.3, 1.0, 1.7]))
def test_entmax_ball_encloses_its_80_digit_weights_and_is_0_off_the_support(row, T) -> None:
    logits, counts = row
    if sum(counts) == 0:
        counts[0] = 1
    exact = entmax_exact(logits, counts, T)
    ops = backend("arb")
    with ops.precision(128):
        try:
            ex = balls.ball_instance(_instance(Entmax15(T=T), logits, counts), ops)
        except PrecisionLoss:  # a column within rounding of the threshold: only an exact tie may be refused here
            assert any(e == 0 for e, c in zip(exact, counts) if c > 0)
            return
    for b, e, c in zip(ex.alpha, exact, counts):
        if e == 0:
            assert ops.certainly_zero(b), (logits, counts, T, ops.text(b))
        else:
            with mpmath.workdps(80):
                (mm, me), (rm, re) = b.mid().man_exp(), b.rad().man_exp()  # arb's exact midpoint and radius
                mid, rad = mpmath.ldexp(int(mm), int(me)), mpmath.ldexp(int(rm), int(re))
                lo, hi = mid - rad, mid + rad
                assert lo - 1e-70 <= e <= hi + 1e-70 and hi - lo <= 1e-25 * e, (ops.text(b), e)


def test_a_column_exactly_at_the_threshold_is_decided_by_the_exact_tier_only() -> None:
    """``T = 0.3 - 0.2`` (a double, exactly) puts the second of logits (0.3, 0.2) exactly at sparsemax's threshold
    (``z_1 - z_2 = (0.3 - 0.2) / T = 1``): in arb the comparison straddles 0 at every precision, the exact tier
    decides it, weights (1, 0) exactly; a strict bound ``alpha_min > 0`` is violated there, ``alpha_min >= 0`` holds."""
    from attnbounds.theory.running import api

    T = 0.3 - 0.2
    inst = _instance(Sparsemax(T=T), [0.3, 0.2], None)
    assert sparsemax_exact([0.3, 0.2], [1, 1], T) == [1, 0]
    ops = backend("arb")
    for bits in (128, 1024):
        with ops.precision(bits), pytest.raises(PrecisionLoss, match="threshold"):
            balls.ball_instance(inst, ops)
    ex = balls.ball_instance(inst, ExactOps())
    assert [ex.ops.sign(b) for b in ex.alpha] == [1, 0]
    strict = api.statement("alpha_min > 0").statements[0]
    loose = api.statement("alpha_min >= 0").statements[0]
    out = certify(strict, inst)
    assert out.status == "violated" and out.backend == "exact", out
    assert certify(loose, inst).status == "holds"
    off = _instance(Sparsemax(T=T), [0.3, 0.2 - 2.0**-50], None)  # a hair below the threshold: decided in balls
    assert certify(strict, off).status == "violated" and certify(strict, off).backend == "arb"


@pytest.mark.parametrize("n, logits", [(Sparsemax(T=1.0), [1.0, 1e-17]), (Sparsemax(T=1.0), [1.0, 1e-17, -3.0]),
                                        (Entmax15(T=0.5), [1.0, 1e-17])])
def test_a_weight_the_float_map_rounds_to_0_is_found_by_the_balls(n, logits) -> None:
    """At logits (1, 1e-17) sparsemax's second weight is 5e-18 (threshold 5e-18), but the float map's support test
    ``1 + 2 z_2 > z_1 + z_2`` rounds to false and gives it 0: the float support is only a first guess, the balls
    try its neighbours and certify the true support, whose weights enclose the exact ones."""
    inst = _instance(n, logits, None)
    assert inst.alpha[0][1] == 0.0  # the float map's rounding
    ops = backend("arb")
    with ops.precision(128):
        ex = balls.ball_instance(inst, ops)
    assert ops.positive(ex.alpha[1]) and ops.certainly_zero(ex.alpha[-1]) == (len(logits) == 3)
    if isinstance(n, Sparsemax):
        exact = sparsemax_exact(logits, [1] * len(logits), 1.0)
        assert exact[1] == Fraction(1e-17) / 2
        for b, e in zip(ex.alpha, exact):
            assert ops.to_fraction(ops.lower(b)) <= e <= ops.to_fraction(ops.upper(b))


def test_certified_weights_come_from_the_logits_not_the_given_weights() -> None:
    """A certificate of a threshold map is about the map at the instance's logits: weights handed in that are not
    the map's (here, a float rounding of them moved by 1e-12) do not enter it."""
    n = Sparsemax(T=1.0)
    inst = _instance(n, [1.0, 0.5, -2.0], None)
    ops = backend("arb")
    with ops.precision(128):
        ex = balls.ball_instance(inst, ops)
    assert ex.weights.startswith("recomputed from the logits")
    assert [ops.to_fraction(b) for b in ex.alpha] == [Fraction(3, 4), Fraction(1, 4), 0]


def test_a_growth_of_token_classes_is_declined_for_threshold_maps() -> None:
    """Along a growth the counts change and with them the support: the limit analysis gets Unsupported, not a claim."""
    from attnbounds.theory.deciding import limits
    from attnbounds.theory.mathematics.symbolic import SymbolicOps, Work

    for n in (Sparsemax(T=1.0), Entmax15(T=1.0)):
        growth = limits.Growth(_instance(n, [1.0, 0.0], [1, 3]), (0, 1), "the second class grows")
        with pytest.raises(Unsupported, match="growth"):
            limits._growth_instance(growth, SymbolicOps(Work(10**6)))
