"""The branch and bound on planted problems whose answer is known exactly (issue 35: one property for many paths).

Beside the quadratic forms below, separable cores with kinks (``|x - p|``, where no slope exists) on a parameter axis
or the length axis ``t = 1/L`` (split at the square of its end near 0): the same outcomes, their least values
computed piece by piece.

A core ``k + Q(x - p, y - p')`` or ``k + e^Q - 1`` with ``Q`` a rational quadratic form (definite, semidefinite or
a saddle) and ``p`` a rational point has its least value on a box, cut or not by a linear constraint ``g >= 0``,
exactly computable (where Q is least: at its critical point, on a side of the feasible polygon). So, whatever
path the prover takes (projection, concavity, mean value, second order, exact points):

- a least value below 0 (or 0 under a strict bound): never proved; a negative box holds a point where the core is
  exactly negative (or 0 when strict);
- Q definite and the least value ``k`` >= 0 (> 0 when strict; an equality at the point closes to second order):
  proved, and the tree replays on the problem, and on no problem whose least value is below 0.

A core growing away from a corner of the box where it is exactly 0 (``a u + b v^3`` or ``e^(a u) - 1 + b v^3``, ``u``,
``v >= 0`` the distances to the corner) is projected onto that corner and decided there exactly: a strict bound is
refuted at the point itself, a non-strict one proved. A proof records as its tightest box the closed box of least
lower bound of the core: that bound keeps the claim (>= 0) and is at most the core's least value on the box, also
when the 0 at the corner is written so that only the exact decision at the point sees it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

import pytest
import sympy as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from attnbounds.theory.deciding.prover import bnb
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

x, y = sp.symbols("x y", real=True)
WORK = 4 * 10**6
#: (core, Q, box, k, planted point, a linear constraint g >= 0 or None)
Case = tuple[sp.Expr, sp.Expr, tuple[float, float], sp.Rational, tuple[sp.Rational, sp.Rational], sp.Expr | None]


def _problem(core: sp.Expr, box: tuple[float, float], strict: bool, constraint: sp.Expr | None = None) -> Problem:
    coordinates = [Coordinate(x, box[0], box[1], "parameter", "x"), Coordinate(y, box[0], box[1], "parameter", "y")]
    constraints = [] if constraint is None else [constraint]
    return Problem("planted", 0, "test", coordinates, core, constraints, strict, core, [], {}, 0, 0, {}, "test", [])


@st.composite
def planted(draw: st.DrawFn) -> Case:
    """``(core, Q, box, k, p, g)``, ``core = k + Q`` or ``k + e^Q - 1``: the box's ends dyadic or not, the point on a
    split, a simple fraction, or neither; a linear constraint ``g >= 0`` or none."""
    lo = draw(st.sampled_from([-1.0, -0.75, -0.3, 0.0]))
    hi = draw(st.sampled_from([1.0, 0.9, 0.6]))
    a, b, c = (sp.Rational(draw(st.integers(-4, 16)), 4) for _ in range(3))  # definite, semidefinite or a saddle
    points = [sp.Rational(1, 2), sp.Rational(1, 3), sp.Rational(Fraction(0.3)), sp.Rational(7, 64), sp.Integer(0)]
    px = draw(st.sampled_from([q for q in points if lo < q < hi] + [sp.Rational(Fraction(hi))]))
    py = draw(st.sampled_from([q for q in points if lo < q < hi] + [sp.Rational(Fraction(lo))]))
    u, v = x - px, y - py
    quadratic = a * u**2 + b * u * v + c * v**2
    # e^Q - 1 >= 0 vanishes where Q does and grows with it: the same least point and value, not a polynomial
    shape = sp.exp(quadratic) - 1 if draw(st.booleans()) else quadratic
    k = draw(st.sampled_from([sp.Rational(-1, 64), sp.Rational(-1, 10**6), sp.Integer(0), sp.Rational(1, 10**6),
                              sp.Rational(1, 64)]))
    constraint = None
    if draw(st.booleans()):  # a half-plane through, beside or away from the point (it may cut the box's corner off)
        al, be = draw(st.sampled_from([(1, 0), (0, 1), (1, 1), (1, -2), (-1, 1), (-2, -1)]))
        constraint = al * u + be * v + draw(st.sampled_from([sp.Rational(-1, 4), sp.Integer(0), sp.Rational(1, 8)]))
    return k + shape, quadratic, (lo, hi), k, (px, py), constraint


def _least_on(core: sp.Expr, quadratic: sp.Expr, lo: list[float], hi: list[float],
              constraint: sp.Expr | None = None) -> sp.Expr:
    """The core's least value on the box ``[lo, hi]`` (its ends the exact doubles they are) where ``constraint >= 0``
    (+oo where no point is): where the quadratic is least, since the core grows with it: at its critical point when
    that is feasible, else on the boundary of the feasible polygon (the box clipped by the half-plane), each side's
    quadratic minimised exactly."""
    (x0, x1), (y0, y1) = [(sp.Rational(Fraction(a)), sp.Rational(Fraction(b))) for a, b in zip(lo, hi)]
    polygon = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    if constraint is not None:  # Sutherland-Hodgman against one half-plane
        g = [constraint.xreplace({x: px, y: py}) for px, py in polygon]
        clipped = []
        for i, (P, gP) in enumerate(zip(polygon, g)):
            Q_, gQ = polygon[(i + 1) % 4], g[(i + 1) % 4]
            if gP >= 0:
                clipped.append(P)
            if (gP < 0) != (gQ < 0):
                w = gP / (gP - gQ)
                clipped.append((P[0] + w * (Q_[0] - P[0]), P[1] + w * (Q_[1] - P[1])))
        polygon = clipped
    if not polygon:
        return sp.oo
    s_ = sp.Symbol("s")
    points = list(polygon)
    for i, A in enumerate(polygon):
        B = polygon[(i + 1) % len(polygon)]
        along = sp.Poly(sp.expand(quadratic.xreplace({x: A[0] + s_ * (B[0] - A[0]), y: A[1] + s_ * (B[1] - A[1])})), s_)
        c2, c1 = along.coeff_monomial(s_**2), along.coeff_monomial(s_)
        if c2 > 0 and 0 <= -c1 / (2 * c2) <= 1:
            w = -c1 / (2 * c2)
            points.append((A[0] + w * (B[0] - A[0]), A[1] + w * (B[1] - A[1])))
    for crit in sp.solve([sp.diff(quadratic, x), sp.diff(quadratic, y)], [x, y], dict=True):
        if len(crit) == 2 and x0 <= crit[x] <= x1 and y0 <= crit[y] <= y1 and (
                constraint is None or constraint.xreplace(crit) >= 0):  # (a line of critical points: the sides)
            points.append((crit[x], crit[y]))
    return min(core.xreplace({x: px, y: py}) for px, py in points)


def _definite(quadratic: sp.Expr) -> bool:
    a, b, c = (sp.Poly(quadratic, x, y).coeff_monomial(m) for m in (x**2, x * y, y**2))
    return bool(a > 0 and c > 0 and 4 * a * c > b**2)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planted(), st.booleans())
def test_planted_least_values_decide_the_outcome(case: Case, strict: bool) -> None:
    core, quadratic, box, k, point, constraint = case
    problem = _problem(core, box, strict, constraint)
    outcome = bnb.branch_and_bound(problem, WORK)
    least = _least_on(core, quadratic, [box[0]] * 2, [box[1]] * 2, constraint)
    holds = least > 0 or (least == 0 and not strict)
    if not holds:
        assert outcome.status != "proved", (core, box, strict, outcome.reason)
    if outcome.status == "negative":
        assert not holds, (core, box, strict, outcome.reason)
        node = outcome.negative
        assert node is not None
        value = _least_on(core, quadratic, node.lo.tolist(), node.hi.tolist(), constraint)
        assert value < 0 or (strict and value == 0), (core, node.lo, node.hi, value)
    # definite: proved with room (least >= 1/64), and down to an equality when the point is a simple fraction (the
    # second-order closure's candidates: the float minimiser rounded to denominators up to 1000, corners, centre);
    # a margin of 1e-6 at another point may need more boxes than WORK
    simple = constraint is None and all(q.q <= bnb.MAX_DENOMINATOR for q in point)
    if holds and _definite(quadratic) and (least >= sp.Rational(1, 64) or simple):
        assert outcome.status == "proved", (core, box, strict, outcome.reason)
    if outcome.status == "proved":
        tokens = bnb.decode(outcome.tree.encode(), 10**8)
        ok, why, _ = bnb.replay(problem, tokens)
        assert ok, why


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(planted())
def test_a_proof_replays_on_no_problem_whose_least_value_is_negative(case: Case) -> None:
    """The tree of ``1/64 + Q >= 0`` replayed on ``Q - 1/64`` (least value -1/64 at the same point), on the same box:
    refused, whatever closed its boxes."""
    core, quadratic, box, k, _, _ = case
    assume(_definite(quadratic))
    shape = core - k
    core = shape + sp.Rational(1, 64)
    outcome = bnb.branch_and_bound(_problem(core, box, False), WORK)
    assert outcome.status == "proved", outcome.reason
    tokens = bnb.decode(outcome.tree.encode(), 10**8)
    assert bnb.replay(_problem(core, box, False), tokens)[0]
    ok, why, _ = bnb.replay(_problem(shape - sp.Rational(1, 64), box, False), tokens)
    assert not ok, "a proof of a true core replayed on a false one"


@pytest.mark.parametrize("strict", [False, True])
def test_an_equality_at_a_planted_point_is_decided_both_ways(strict: bool) -> None:
    """``Q(x - 1/3, y - 1/2) >= 0`` holds (proved to second order at the point), ``> 0`` fails there exactly."""
    u, v = x - sp.Rational(1, 3), y - sp.Rational(1, 2)
    core = 2 * u**2 - u * v + v**2
    outcome = bnb.branch_and_bound(_problem(core, (-1.0, 1.0), strict), WORK)
    if strict:
        assert outcome.status == "negative", outcome.reason
        node = outcome.negative
        assert node is not None and _least_on(core, core, node.lo.tolist(), node.hi.tolist()) == 0
    else:
        assert outcome.status == "proved", outcome.reason


@pytest.mark.parametrize("strict", [False, True])
def test_a_saddle_whose_negative_part_fits_inside_a_narrow_box_is_never_proved(strict: bool) -> None:
    """``(x - 1/2)^2 - (y - 1/3)^2 / 4 + 10^4 (y - 1/3)^4``: 0 at ``(1/2, 1/3)`` with no slope there, negative only
    for ``0 < |y - 1/3| < 1/200`` on ``x = 1/2`` (least value -1/640000), inside any box the second-order closure
    tries. Its Hessian bound is not positive semidefinite (``-1/2`` on the y diagonal): never proved."""
    u, v = x - sp.Rational(1, 2), y - sp.Rational(1, 3)
    core = u**2 - v**2 / 4 + 10**4 * v**4
    outcome = bnb.branch_and_bound(_problem(core, (-1.0, 1.0), strict), WORK)
    assert outcome.status != "proved", outcome.reason
    least = core.xreplace({x: sp.Rational(1, 2), y: sp.Rational(1, 3) + 1 / (200 * sp.sqrt(2))})
    assert least == sp.Rational(-1, 640000)


@st.composite
def corner(draw: st.DrawFn) -> tuple[sp.Expr, tuple[float, float], tuple[float, float]]:
    """``(core, box, corner)``: a core exactly 0 at a corner of the box and growing away from it in both coordinates."""
    lo = draw(st.sampled_from([-1.0, -0.75, -0.3, 0.0]))
    hi = draw(st.sampled_from([1.0, 0.9, 0.6]))
    cx, cy = draw(st.sampled_from([lo, hi])), draw(st.sampled_from([lo, hi]))
    u = (x - sp.Rational(Fraction(cx))) * (1 if cx == lo else -1)  # >= 0 on the box, 0 at the corner
    v = (y - sp.Rational(Fraction(cy))) * (1 if cy == lo else -1)
    a, b = (sp.Rational(draw(st.integers(1, 8)), draw(st.integers(1, 8))) for _ in range(2))
    core = a * u + b * v**3 if draw(st.booleans()) else sp.exp(a * u) - 1 + b * v**3
    return core, (lo, hi), (cx, cy)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corner(), st.booleans())
def test_a_margin_exactly_zero_at_a_corner_is_decided_at_that_point(case: tuple[sp.Expr, tuple[float, float],
                                                                                tuple[float, float]],
                                                                    strict: bool) -> None:
    core, box, point = case
    problem = _problem(core, box, strict)
    outcome = bnb.branch_and_bound(problem, WORK)
    if strict:  # 0 at the corner: the strict bound fails there, and nowhere else
        assert outcome.status == "negative", (core, box, outcome.reason)
        node = outcome.negative
        assert node is not None and node.lo.tolist() == node.hi.tolist() == list(point), (core, node)
        assert core.xreplace({x: sp.Rational(Fraction(point[0])), y: sp.Rational(Fraction(point[1]))}) == 0
    else:
        assert outcome.status == "proved", (core, box, outcome.reason)
        ok, why, _ = bnb.replay(problem, bnb.decode(outcome.tree.encode(), 10**8))
        assert ok, why


#: an exact 0 that sympy leaves unexpanded and a float enclosure cannot tell from 0 (it holds both signs): the prover
#: decides the corner then at the point itself, exactly
ZERO_IN_DISGUISE = (1 + sp.sqrt(2)) ** 2 - 3 - 2 * sp.sqrt(2)


@pytest.mark.parametrize("zero", [sp.Integer(0), ZERO_IN_DISGUISE], ids=["zero", "zero-in-disguise"])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=corner())
def test_a_proofs_tightest_bound_keeps_the_claim_and_is_at_most_the_core_on_its_box(
        zero: sp.Expr, case: tuple[sp.Expr, tuple[float, float], tuple[float, float]]) -> None:
    """The core grows away from the corner in each coordinate: its least value on a box is at a vertex, and on the
    root box it is 0 (at the corner), so the least bound of the closed boxes is exactly 0."""
    core, box, _ = case
    outcome = bnb.branch_and_bound(_problem(core + zero, box, False), WORK)
    assert outcome.status == "proved" and outcome.tightest is not None, (core, box, outcome.reason)
    bound, lo, hi = outcome.tightest
    least = min(core.xreplace({x: sp.Rational(Fraction(a)), y: sp.Rational(Fraction(b))})
                for a in (lo[0], hi[0]) for b in (lo[1], hi[1]))
    assert 0 <= bound <= least and bound <= 0, (core, box, outcome.tightest)


# -- kinks and the length axis ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kinked:
    """``k + fx(x) + fy(y)``: each part piecewise quadratic, with its kinks; ``y`` a parameter or the length axis."""

    k: sp.Rational
    fx: sp.Expr
    fy: sp.Expr
    kinks: tuple[list[sp.Expr], list[sp.Expr]]
    x_box: tuple[float, float]
    y_box: tuple[float, float]
    kind: str

    @property
    def core(self) -> sp.Expr:
        return self.k + self.fx + self.fy

    def least(self, lo: Sequence[float], hi: Sequence[float]) -> sp.Expr:
        """The core's exact least value on the box ``[lo, hi]``: separable, each part least at an end, a kink or a
        critical point of a smooth piece."""
        return self.k + sum((_least_of(f, v, (float(a), float(b)), kinks) for f, v, a, b, kinks in
                             zip((self.fx, self.fy), (x, y), lo, hi, self.kinks)), sp.Integer(0))


def _least_of(f: sp.Expr, var: sp.Symbol, box: tuple[float, float], kinks: list[sp.Expr]) -> sp.Expr:
    """The least value of ``f`` (quadratic in ``var`` between its ``kinks``) on ``box`` (its ends the exact doubles
    they are): at an end, a kink inside, or a critical point of a piece inside."""
    a, b = (sp.Rational(Fraction(e)) for e in box)
    points = [a, b, *(p for p in kinks if a <= p <= b)]
    for sign in (1, -1):
        piece = f.xreplace({sp.Abs(var - p): sign * (var - p) for p in kinks})
        points += [c for c in sp.solve(sp.diff(piece, var), var) if c.is_real and a <= c <= b]
    return min(f.xreplace({var: p}) for p in points)


@st.composite
def kinked(draw: st.DrawFn) -> Kinked:
    """``k + a |x - p| + c (y - q)^2 + e |y - q|``: a kink in x (slope ``a`` each side, or none), in y a parabola
    up or down with or without a kink; ``y`` a parameter or the length axis ``t = 1/L`` on ``[0, 1/L_min]`` (split
    at the square of its end near 0), ``q`` at ``t = 0``, near it, inside or at the far end."""
    lo, hi = draw(st.sampled_from([(-1.0, 1.0), (-0.3, 0.9), (0.0, 0.6)]))
    p = draw(st.sampled_from([sp.Rational(1, 3), sp.Rational(Fraction(0.3)), sp.Integer(0), sp.Rational(Fraction(hi))]))
    kind = draw(st.sampled_from(["parameter", "length"]))
    y_box = (0.0, draw(st.sampled_from([0.5, 1.0 / 3.0, 1e-3]))) if kind == "length" else (lo, hi)
    q = draw(st.sampled_from([sp.Integer(0), sp.Rational(1, 10**4), sp.Rational(1, 7), sp.Rational(Fraction(y_box[1]))]))
    a = sp.Rational(draw(st.integers(0, 4)), 4)
    c = sp.Rational(draw(st.integers(-4, 8)), 4)
    e = sp.Rational(draw(st.integers(0, 2)), 8)
    k = draw(st.sampled_from([sp.Rational(-1, 64), sp.Rational(-1, 10**6), sp.Integer(0), sp.Rational(1, 64)]))
    return Kinked(k, a * sp.Abs(x - p), c * (y - q) ** 2 + e * sp.Abs(y - q), ([p] if a else [], [q] if e else []),
                  (lo, hi), y_box, kind)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinked(), st.booleans())
def test_kinked_least_values_decide_the_outcome_on_every_axis(case: Kinked, strict: bool) -> None:
    """A core with kinks (absolute values: no slope there), its y a parameter or the length axis: never proved when
    its exact least value is below 0 (or 0 under a strict bound); a negative box holds a point where it is (its own
    least value); proved with room (least >= 1/64, whatever the kinks); a proof replays."""
    coordinates = [Coordinate(x, *case.x_box, "parameter", "x"), Coordinate(y, *case.y_box, case.kind, "y")]
    problem = Problem("kinked", 0, "test", coordinates, case.core, [], strict, case.core, [], {}, 0, 0, {}, "test", [])
    outcome = bnb.branch_and_bound(problem, WORK)
    least = case.least([case.x_box[0], case.y_box[0]], [case.x_box[1], case.y_box[1]])
    holds = least > 0 or (least == 0 and not strict)
    if not holds:
        assert outcome.status != "proved", (case, strict, outcome.reason)
    if outcome.status == "negative":
        node = outcome.negative
        assert node is not None
        value = case.least(node.lo.tolist(), node.hi.tolist())
        assert value < 0 or (strict and value == 0), (case, node.lo, node.hi, value)
    if least >= sp.Rational(1, 64):
        assert outcome.status == "proved", (case, strict, outcome.reason)
    if outcome.status == "proved":
        ok, why, _ = bnb.replay(problem, bnb.decode(outcome.tree.encode(), 10**8))
        assert ok, why
