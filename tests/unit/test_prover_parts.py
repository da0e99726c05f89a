"""Small parts of the relaxation prover whose faults cost completeness or soundness without failing a whole proof
(issue 35): which distinguished tokens stand for an extreme of log F, and the order in which open boxes are taken."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import sympy as sp
from hypothesis import assume, example, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.deciding.prover import bnb
from attnbounds.theory.deciding.prover.relax import Declined, Role, _extreme_of, _moments

DOMINANCES = {
    # the extremes of log F: a positive (max) or negative (min) multiple of r.lam - k.lam
    "r.lam - k.lam": ("max", lambda r, k: r.lam - k.lam),
    "k.lam - r.lam": ("min", lambda r, k: k.lam - r.lam),
    "3*(r.lam - k.lam)/2": ("max", lambda r, k: sp.Rational(3, 2) * (r.lam - k.lam)),
    "-(r.lam - k.lam)/7": ("min", lambda r, k: -(r.lam - k.lam) / 7),
    # dominances that read something else: no extreme of log F, whatever the role's own extreme says
    "|r.g| - |k.g|": (None, lambda r, k: sp.Abs(r.g) - sp.Abs(k.g)),
    "k.g - r.g": (None, lambda r, k: k.g - r.g),
    "r.g**2 - k.g**2": (None, lambda r, k: r.g**2 - k.g**2),
    "r.l**2 - k.l**2": (None, lambda r, k: r.l**2 - k.l**2),
    "r.lam - k.lam + r.g - k.g": (None, lambda r, k: r.lam - k.lam + r.g - k.g),
    "exp(r.lam) - exp(k.lam)": (None, lambda r, k: sp.exp(r.lam) - sp.exp(k.lam)),
    "0": (None, lambda r, k: sp.Integer(0)),
}


@pytest.mark.parametrize("text", sorted(DOMINANCES))
@pytest.mark.parametrize("extreme", [None, "max", "min"])
def test_a_token_is_an_extreme_of_log_f_only_when_its_dominance_is_a_multiple_of_the_log_f_difference(
        text: str, extreme: str | None) -> None:
    """The anchor of the every-F model takes an extreme's token as the smallest or largest log F of all tokens (every
    other token's log F then on one side of it): a dominance that reads the slopes or the logits must never make it so
    (``exp(r.lam) - exp(k.lam)`` orders the same tokens but is left out: only exact multiples are recognised)."""
    want, dominates = DOMINANCES[text]
    assert _extreme_of(Role("probe", dominates, extreme)) == want, text


def _node(priority: float, tag: float) -> bnb.Node:
    lo = np.array([tag])
    return bnb.Node(lo, lo.copy(), lo.copy(), lo.copy(), priority=priority)


def test_the_open_boxes_are_taken_in_turns_newest_first_then_lowest_first() -> None:
    """:class:`bnb._Queue`: odd turns take the newest boxes (a dive), even turns the boxes of lowest priority (best
    first): neither order alone, so that a dive cannot leave the most promising box for last."""
    queue = bnb._Queue()
    queue.push_all([_node(p, p) for p in (5.0, 1.0, 3.0)])
    queue.push_all([_node(p, p) for p in (4.0, 2.0)])  # newest: 4.0, then 2.0
    taken = [float(queue.take(1)[1][0].lo[0]) for _ in range(5)]
    assert taken == [4.0, 1.0, 2.0, 3.0, 5.0], taken
    assert not queue


def test_a_batch_holds_one_faces_boxes_and_every_box_is_taken_once() -> None:
    queue = bnb._Queue()
    nodes = [_node(float(p), float(p)) for p in range(12)]
    for k, nd in enumerate(nodes):
        nd.face = ((0, 0.0),) if k % 3 == 0 else ()
    queue.push_all(nodes)
    seen: list[float] = []
    while queue:
        face, batch = queue.take(4)
        assert batch and len(batch) <= 4 and all(nd.face == face for nd in batch)
        seen += [float(nd.lo[0]) for nd in batch]
    assert sorted(seen) == [float(p) for p in range(12)]


def _end() -> hs.SearchStrategy[float]:
    return hs.one_of(hs.floats(-4.0, 4.0), hs.floats(allow_nan=False, allow_infinity=False),
                     hs.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0**-1074, 1e308, -1e308]))


@hs.composite
def _boxes(draw: hs.DrawFn) -> tuple[float, float]:
    """Bounded boxes, boxes unbounded below or above (their finite end of either sign, small or large), the line."""
    a, b = draw(_end()), draw(_end())
    kind = draw(hs.sampled_from(["bounded", "below", "above", "line"]))
    return {"bounded": (min(a, b), max(a, b)), "below": (-math.inf, a), "above": (a, math.inf),
            "line": (-math.inf, math.inf)}[kind]


@settings(max_examples=300, deadline=None)
@given(box=_boxes(), limit=hs.booleans())
def test_a_box_is_split_strictly_inside_itself(box: tuple[float, float], limit: bool) -> None:
    """:func:`bnb._split_point` cuts ``[lo, hi]`` at a finite point strictly inside it (bounded, half-bounded or the
    whole line, on t's axis or not), wherever the box holds a double strictly between its ends: a cut at an end or
    outside makes a child as large as its parent (the branch and bound then repeats itself) and an empty one; ``2 lo``
    overflowing to inf on ``[1e308, inf]`` did (the cut is now at most the largest double)."""
    lo, hi = box
    inside = math.nextafter(lo, math.inf)  # the least double above lo; the box must hold a finite one below hi
    assume(math.isfinite(inside) and inside < hi and (math.isinf(hi) or math.nextafter(inside, math.inf) < hi))
    point = bnb._split_point(lo, hi, limit=limit)
    assert math.isfinite(point) and lo < point < hi, (lo, hi, limit, point)


T_, a_, N_, L_ = sp.symbols("T a N L", positive=True)


@pytest.mark.parametrize("formula, box, problem", [
    (sp.And(T_ >= sp.Rational(1, 2), T_ <= 4), ("T", (0.5, 4.0)), False),
    (sp.And(N_ >= 1, N_ <= L_), ("N", (1.0, float("inf"))), False),  # N <= L: the selection's structure
    (T_ <= a_, None, True),  # two parameters that are not N and L: the box cannot say it
    (a_ <= 2 * T_, None, True),
    (T_ >= a_ ** 2, None, True),
], ids=str)
def test_a_bound_between_parameters_is_read_or_named_as_unreadable(formula: sp.Basic, box: tuple[str, tuple] | None,
                                                                   problem: bool) -> None:
    """A hypothesis' parameter formula becomes the parameters' boxes; a bound relating two parameters (other than
    ``N <= L``) has no box, and the relaxation must say so (the prover then declines and names it) instead of
    dropping it: a bound dropped silently leaves the relaxation wider than the hypotheses, and what it then
    decides was not asked."""
    from attnbounds.theory.deciding.prover.space import Space
    from attnbounds.theory.running import api

    space = Space(api.statement("alpha_max >= 1/L", id="parts").statements[0])
    space.parameter_formula(formula)
    assert any("cannot read the bound" in p for p in space.problems) == problem, space.problems
    if box is not None:
        assert space.boxes[box[0]] == box[1], space.boxes


@given(num=hs.integers(-10**30, 10**30), den=hs.integers(1, 10**30), shift=hs.integers(-60, 60))
def test_down_and_up_round_a_ball_outward_to_doubles(num: int, den: int, shift: int) -> None:
    """``_down``/``_up`` give a double at most the ball's lower end and one at least its upper end (a value with no
    double, num/den * 2^shift, and a ball of some radius)."""
    from flint import arb, ctx

    with ctx.workprec(bnb.ARB_BITS):
        v = arb(num) / arb(den) * arb(2) ** shift
        for ball in (v, v + arb(0, 2.0**-70), -v):
            assert arb(bnb._down(ball)) <= ball.lower() and arb(bnb._up(ball)) >= ball.upper()
            assert bnb._down(ball) <= bnb._up(ball)
    assert bnb._down(arb("nan")) == -math.inf and bnb._up(arb("nan")) == math.inf


_t, _b = sp.symbols("t b", real=True)
_s = sp.Symbol("s_r0", real=True)  # a compactified logit: its name says so (Problem.open_end)


#: (core p, q, r, s; constraint u, v, w; multiplier; strict): boxes the closure takes (the whole box [0, 1]^2):
#: alpha_max > 1/(2L) to first order, L alpha_max > 1 - 1/L to second, alpha_max >= 1/L non-strict
CLOSING = [((-1, 2, 0, 0), (-1, 1, 0), Fraction(3, 2), True), ((-1, 1, 1, 0), (-1, 1, 0), Fraction(1), True),
           ((-1, 1, 0, 0), (-1, 1, 0), Fraction(1), False)]


@pytest.mark.parametrize("case", CLOSING)
def test_the_multiplier_closure_takes_the_boxes_it_is_for(case: tuple) -> None:
    from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

    (p, q, r, s), (u, v, w), lam, strict = case
    expr, constraint = p * _t + q * _b + r * _t**2 + s, u * _t + v * _b + w
    coords = [Coordinate(_t, 0.0, 1.0, "length", "t"), Coordinate(_b, 0.0, 1.0, "role", "b")]
    problem = Problem("m", 0, "m", coords, expr, [constraint], strict, expr, [], {}, 0, 0, {}, "m")
    P = bnb.Programs.build(problem)
    lo, hi = np.zeros(2), np.ones(2)
    assert bnb._multiplier_closes(P, P.face(()), 0, lam, lo, hi, strict, [0])
    assert not bnb._multiplier_closes(P, P.face(()), 0, -lam, lo, hi, strict, [0])  # a negative one: never


@pytest.mark.parametrize("case", CLOSING)
@pytest.mark.parametrize("box", [(0.0, 1.0), (0.5, 1.0)])
def test_the_float_filter_hands_the_rigorous_check_a_multiplier_that_closes(case: tuple, box: tuple[float, float]) -> None:
    """``_by_multiplier`` ranks its candidates in the float tier and checks the best in rigorous arithmetic: on boxes
    a multiplier closes, one of those it hands on closes (the filter's face, centre and spread estimate the residual's
    bound where :func:`_residual_closes` takes it)."""
    from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

    (p, q, r, s), (u, v, w), _, strict = case
    expr, constraint = p * _t + q * _b + r * _t**2 + s, u * _t + v * _b + w
    coords = [Coordinate(_t, *box, "length", "t"), Coordinate(_b, *box, "role", "b")]
    problem = Problem("m", 0, "m", coords, expr, [constraint], strict, expr, [], {}, 0, 0, {}, "m")
    P = bnb.Programs.build(problem)
    face = P.face(())
    lo, hi = np.full(2, box[0]), np.full(2, box[1])
    limit = 0 if box[0] == 0.0 else None
    grad = face.gradient([(a[0], z[0]) for a, z in bnb.run_float(face.grad, lo[None], hi[None])])
    found = bnb._by_multiplier(P, face, [0], bnb.Node(lo, hi, lo.copy(), hi.copy()), grad, strict, limit, [0])
    assert found is not None and bnb._multiplier_closes(P, face, found[0], found[1], lo, hi, strict, [0])


@settings(max_examples=80, deadline=None)
@example(core=(*CLOSING[0][0], 0), con=CLOSING[0][1], lam=CLOSING[0][2], strict=True, box=(0.0, 1.0, 0.0, 1.0), opened=False)
@example(core=(*CLOSING[1][0], 0), con=CLOSING[1][1], lam=CLOSING[1][2], strict=True, box=(0.0, 1.0, 0.0, 1.0), opened=False)
@example(core=(-1, 1, 0, 0, 0), con=(-1, 1, 0), lam=Fraction(1), strict=True, box=(0.0, 1.0, 0.0, 1.0), opened=False)
@example(core=(0, 1, 0, 0, 1), con=(-1, 1, 0), lam=Fraction(1), strict=True, box=(0.0, 1.0, 0.0, 1.0), opened=True)
@example(core=(0, 1, 0, 0, 0), con=(0, 0, 3), lam=Fraction(0), strict=True, box=(0.0, 1.0, 0.0, 1.0), opened=False)
@example(core=(0, -1, 0, 1, 0), con=(0, 0, 3), lam=Fraction(0), strict=True, box=(0.0, 0.5, 0.0, 1.0), opened=False)
# the residual b - 1 * b is 0 on the whole box: a strict bound is not closed there (b = 0 is feasible), with no limit
# axis (t's range away from 0) and with one (t = 0 on the box, the residual flat in t)
@example(core=(0, 1, 0, 0, 0), con=(0, 1, 0), lam=Fraction(1), strict=True, box=(0.5, 1.0, 0.0, 1.0), opened=False)
@example(core=(0, 1, 0, 0, 0), con=(0, 1, 0), lam=Fraction(1), strict=True, box=(0.0, 1.0, 0.0, 1.0), opened=False)
@given(core=hs.tuples(*[hs.integers(-3, 3)] * 5), con=hs.tuples(*[hs.integers(-3, 3)] * 3),
       lam=hs.fractions(0, 4, max_denominator=4), strict=hs.booleans(),
       box=hs.sampled_from([(0.0, 1.0, 0.0, 1.0), (0.0, 0.25, 0.5, 1.0), (0.5, 1.0, 0.0, 0.5), (0.0, 0.5, 0.0, 1.0)]),
       opened=hs.booleans())
def test_a_box_closed_by_a_multiplier_has_no_feasible_point_where_the_bound_fails(
        core: tuple[int, ...], con: tuple[int, ...], lam: Any, strict: bool, box: tuple[float, ...], opened: bool) -> None:
    """Soundness of the multiplier closure on cores ``p t + q b + r t^2 + s + x t b`` (t = 1/L, its end 0 a limit;
    the bilinear term leaves slopes of no sign on the box that have one on a face of it) under a constraint
    ``u t + v b + w >= 0``, with any multiplier, b a plain coordinate or (``opened``) a softmax weight's share (never
    0, and 1 only at L = 1: open ends): when it says the box is closed, the core is ``>= 0`` (``> 0`` when strict) at
    every feasible point of a 41 x 41 grid of the box that an instance reaches, in exact arithmetic."""
    from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

    p, q, r, s, x = core
    u, v, w = con
    expr = p * _t + q * _b + r * _t**2 + s + x * _t * _b
    constraint = u * _t + v * _b + w
    coords = [Coordinate(_t, box[0], box[1], "length", "t"), Coordinate(_b, box[2], box[3], "role", "b")]
    realisation = {"weights_model": True, "role_coordinates": [_b], "atom_coordinates": []} if opened else {}
    problem = Problem("m", 0, "m", coords, expr, [constraint], strict, expr, [], {}, 0, 0, {}, "m",
                      realisation=realisation)
    P = bnb.Programs.build(problem)
    lo, hi = np.array(box[0::2]), np.array(box[1::2])
    limit = 0 if box[0] == 0.0 else None
    if not bnb._multiplier_closes(P, P.face(()), 0, Fraction(lam), lo, hi, strict, [0]):
        return
    grid = [(Fraction(box[0]) + (Fraction(box[1]) - Fraction(box[0])) * i / 40,
             Fraction(box[2]) + (Fraction(box[3]) - Fraction(box[2])) * j / 40) for i in range(41) for j in range(41)]
    for t, b in grid:
        if t == 0 or u * t + v * b + w < 0 or (opened and box[2:] == (0.0, 1.0) and (b == 0 or (b == 1 and t < 1))):
            continue
        value = p * t + q * b + r * t * t + s + x * t * b
        assert value > 0 if strict else value >= 0, (expr, constraint, lam, (t, b))


@settings(max_examples=200, deadline=None)
@given(ends=hs.lists(hs.tuples(hs.sampled_from([-2.0, -1.0, 0.0, 1.0, 2.0, math.nan]),
                               hs.sampled_from([-2.0, -1.0, 0.0, 1.0, 2.0, math.nan])), min_size=1, max_size=5))
def test_the_lowest_face_fixes_exactly_the_monotone_coordinates_at_their_lower_end(ends: list[tuple[float, float]]) -> None:
    """A slope enclosure ``[g0, g1]`` with ``g0 >= 0`` (0 included: non-decreasing) fixes its coordinate at the box's
    lower end, one with ``g1 <= 0`` (non-increasing) at the upper end, one that straddles 0 or is NaN leaves it wide;
    the face is a sub-box (an enclosure ``[0, 0]``, constant, is fixed at one end)."""
    slopes = [(min(a, b), max(a, b)) if not (math.isnan(a) or math.isnan(b)) else (a, b) for a, b in ends]
    lo, hi = np.zeros(len(slopes)), np.arange(1.0, len(slopes) + 1.0)
    f_lo, f_hi = bnb._lowest_face(lo, hi, bnb._ends_of(slopes))
    assert np.all(lo <= f_lo) and np.all(f_lo <= f_hi) and np.all(f_hi <= hi)
    for d, (g0, g1) in enumerate(slopes):
        if g0 >= 0:
            assert f_lo[d] == f_hi[d] == lo[d], (d, g0, g1)
        elif g1 <= 0:
            assert f_lo[d] == f_hi[d] == hi[d], (d, g0, g1)
        else:
            assert (f_lo[d], f_hi[d]) == (lo[d], hi[d]), (d, g0, g1)


@settings(max_examples=200, deadline=None)
@example(data=[(0.0, 0.0, 0.0, 0.0, 0.0), (1.0, 1.0, 0.5, 1e-5, 0.0)])  # a narrow box off 0: the centre rounds
@given(data=hs.lists(hs.tuples(hs.floats(-4, 4), hs.floats(-4, 4), hs.floats(-3, 3), hs.floats(0, 2),
                               hs.floats(0, 1)), min_size=1, max_size=4))
def test_the_float_spread_bounds_every_function_with_those_slopes_about_the_centre(
        data: list[tuple[float, float, float, float, float]]) -> None:
    """The mean-value estimate the float filters read (before the multiplier's and the mean-value form's rigorous
    checks): an affine function whose slope along each coordinate lies in the enclosure moves from its value at the
    box's centre by at most the spread, at every corner of the box."""
    g_lo = np.array([min(a, b) for a, b, *_ in data])
    g_hi = np.array([max(a, b) for a, b, *_ in data])
    lo = np.array([x for _, _, x, _, _ in data])
    hi = lo + np.array([w for *_, w, _ in data])
    slope = g_lo + (g_hi - g_lo) * np.array([u for *_, u in data])  # some slope within each enclosure
    for ends in (g_lo, g_hi, slope):
        for corner in itertools.product(*zip(lo, hi)):
            moved = abs(float(np.dot(ends, np.array(corner) - (lo + hi) / 2)))
            # (the test's own centre and offsets round: a few ulps of the coordinates, times the slopes)
            rounding = 8 * np.finfo(float).eps * float(np.sum(np.abs(ends) * (np.abs(lo) + np.abs(hi))))
            assert moved <= bnb._spread((g_lo, g_hi), lo, hi) + rounding, (ends, corner)


_LAM, _G, _LOGIT = sp.symbols("_lam_x _g_x _l_x", real=True)
_FEATURES = {_LAM, _G, _LOGIT}
_T, _A = sp.symbols("T a", positive=True)


@pytest.mark.parametrize("bodies, moments", [
    ([_T * sp.exp(_LAM)], [sp.exp(_LAM)]),
    ([sp.exp(_LAM - 3 * _A)], [sp.exp(_LAM)]),  # exp(lam - 3a) = exp(-3a) exp(lam): a constant times the token's part
    ([_G * _LOGIT * sp.exp(_LAM) / _T + 2 * sp.exp(_LAM)], [_G * _LOGIT * sp.exp(_LAM), sp.exp(_LAM)]),  # every feature
    ([_G**2 * sp.exp(_LAM), 5 * _G**2 * sp.exp(_LAM), _A], [_G**2 * sp.exp(_LAM)]),  # one moment, said once
    ([1 + _G * sp.exp(_LAM) + _LOGIT], [_G * sp.exp(_LAM), _LOGIT]),  # a constant term before the token's terms
    ([(_A + _G) * sp.exp(_LAM)], [_G * sp.exp(_LAM), sp.exp(_LAM)]),  # a product over a sum: distributed first
    # roots of features kept apart: sqrt(g) sqrt(l) is not sqrt(g l) where both are negative
    ([sp.sqrt(_G) * sp.sqrt(_LOGIT) * sp.exp(_LAM)], [sp.sqrt(_G) * sp.sqrt(_LOGIT) * sp.exp(_LAM)]),
])
def test_a_total_splits_into_constants_times_functions_of_the_token(bodies: list[sp.Expr],
                                                                      moments: list[sp.Expr]) -> None:
    """The relaxation's moments (``relax._moments``): each term of a total is a constant times a function of the generic
    token's features (its log F, slope and logit, any of them, all three at once included), and each distinct
    function is one moment of the others' distribution."""
    found = _moments(bodies, _FEATURES)
    assert len(found) == len(moments) and all(any(sp.simplify(f - m) == 0 for f in found) for m in moments), found
    # each moment is the function as the body has it, at a point where every feature is negative too
    point = {_LAM: sp.Rational(-1, 3), _G: sp.Rational(-2, 5), _LOGIT: sp.Rational(-7, 4)}
    for m in moments:
        want = complex(m.xreplace(point).evalf(30))
        assert any(abs(complex(f.xreplace(point).evalf(30)) - want) <= 1e-20 for f in found), (m, found)


@pytest.mark.parametrize("body", [sp.exp(_A * _LAM), sp.log(_T + _G), (_LOGIT + _A) ** sp.Rational(1, 2)])
def test_a_total_whose_token_part_reads_a_parameter_is_declined(body: sp.Expr) -> None:
    """A term that mixes a parameter into the token's function (exp(a lam), log(T + g)) is no constant times a
    function of the token: the others' distribution is not captured by finitely many averages, so it is declined."""
    with pytest.raises(Declined, match="does not split"):
        _moments([body], _FEATURES)


_b = sp.Symbol("b", real=True)


@pytest.mark.parametrize("expr, sign", [(_b - 1, -1), (_b - 2, -1), (_b + 1, 1), (_b, 1), (_b - sp.Rational(1, 2), 0),
                                        (sp.gamma(_b + 1) - 1, 0), (sp.Symbol("z", real=True), 0)])
def test_absolute_values_are_resolved_only_where_the_sign_is_certain_on_the_box(expr: sp.Expr, sign: int) -> None:
    """``refine_abs`` writes ``|x|`` as ``x`` or ``-x`` only where rigorous arithmetic shows the sign of ``x`` on the
    whole box (b in [0, 1]): not where ``x`` changes sign, reads a symbol outside the box, or has no interval form
    (gamma: the evaluation raises, which says nothing about the sign), and records each replacement it makes."""
    from attnbounds.theory.deciding.prover.problem import Coordinate
    from attnbounds.theory.deciding.prover.relax import refine_abs

    signs: list[tuple[sp.Expr, int]] = []
    got = refine_abs(sp.Abs(expr), [Coordinate(_b, 0.0, 1.0, "parameter", "b")], signs)
    assert got == (expr if sign > 0 else -expr if sign < 0 else sp.Abs(expr)), got
    assert signs == ([(expr, sign)] if sign else []), signs


def test_a_common_shift_of_log_F_cancels_from_a_ratio_of_totals_and_not_from_log_F_itself() -> None:
    """``relax._shift_free``: exp(D_x + c) / (exp(D_x + c) + exp(D_y + c)) is free of c once e^c cancels; exp(D_x + c)
    alone, D_x + c and a sum exp(D_x + c) + 1 are not."""
    from attnbounds.theory.deciding.prover.relax import _shift_free

    c, x, y = sp.symbols("c D_x D_y", real=True)
    ex, ey = sp.exp(x + c), sp.exp(y + c)
    assert _shift_free(ex / (ex + ey), c) and _shift_free(x - y, c) and _shift_free(ex / ey - 1, c)
    assert not _shift_free(ex, c) and not _shift_free(x + c, c) and not _shift_free(ex / (ex + 1), c)


def _face(core: sp.Expr, lo: float = -1.0, hi: float = 1.0) -> tuple[Any, np.ndarray, np.ndarray]:
    from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

    x, y = sp.symbols("x y", real=True)
    coords = [Coordinate(x, lo, hi, "parameter", "x"), Coordinate(y, lo, hi, "parameter", "y")]
    problem = Problem("parts", 0, "test", coords, core, [], False, core, [], {}, 0, 0, {}, "test", [])
    return bnb.Programs(problem).face(()), np.array([lo, lo]), np.array([hi, hi])


@pytest.mark.parametrize("slope, side, rigorous_sign, grows", [
    ((0.5, 1.0), -1, True, True),  # the slope's lower end > 0: grows with x
    ((-1.0, 1.0), -1, True, False),  # a slope of both signs: neither
    ((-1.0, 1.0), 1, True, False),
    ((-1.0, -0.5), 1, True, True),  # falls with x: grows away from the upper end
    ((-1.0, -0.5), -1, True, False),
    ((0.0, 1.0), -1, True, True),  # the lower end rounds to 0; the rigorous slope (exp(y) > 0) is positive
    ((0.0, 1.0), -1, False, False),  # ... and where the rigorous slope (y) straddles 0, not
])
def test_the_core_grows_off_an_end_only_where_its_slope_certainly_has_the_sign(
        slope: tuple[float, float], side: int, rigorous_sign: bool, grows: bool) -> None:
    """``bnb._grows``: a projection onto an end of a coordinate is sound only where the core strictly grows away from
    it on the whole box: the slope enclosure's end beyond 0, or at 0 with the rigorous slope of that sign; a slope
    of both signs, the wrong sign or an unbounded box never."""
    x, y = sp.symbols("x y", real=True)
    face, lo, hi = _face(x * (sp.exp(y) if rigorous_sign else y) + y)
    assert bnb._grows(face, lo, hi, 0, slope, [0], side) is grows
    unbounded = lo.copy()
    unbounded[1] = -math.inf
    if slope[0 if side < 0 else 1] == 0.0:
        assert bnb._grows(face, unbounded, hi, 0, slope, [0], side) is False


def test_forms_sympy_cannot_compare_are_never_called_equal(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bnb._equal`` decides two forms equal by exact algebra only: equal forms are, different ones are not, and
    when sympy's algebra fails (here made to) the answer is "not equal", never a guess."""
    x, y = sp.symbols("x y", real=True)
    assert bnb._equal((x + y) ** 2, x**2 + 2 * x * y + y**2) and not bnb._equal(x * y, x + y)

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise sp.PolynomialError("made to fail")

    monkeypatch.setattr(sp, "together", fail)
    assert bnb._equal(x * y, x * y) is False


@pytest.mark.parametrize("core, closes", [
    (_t**2 * (1 + _b), True),  # r(t = 0) = 0, dr/dt >= 0, d^2r/dt^2 = 2 (1 + b) > 0: > 0 at every t > 0
    (_t**2 * _b**2, False),  # 0 at b = 0 for every t: the strict bound fails there
    (_t**2 * sp.Abs(_b), False),  # the same with a kink: no second derivative is enclosed, so no closure
    (_t**2 * (1 + sp.Abs(_b)), False),  # true, but across a kink the second order is not certified: refused
    (_t**3 * (1 + _b), True),  # third order: d^3r/dt^3 = 6 (1 + b) > 0, the lower derivatives >= 0 on the box
    (_t**3 * (_b - sp.Rational(1, 2)), False),  # negative at b < 1/2 for every t > 0
    (_t**4 * (1 + _b), True),  # fourth order (GROWTH_DEPTH)
    (_t**5 * (1 + _b), False),  # true, but beyond GROWTH_DEPTH derivatives: left open
    (_t**2 * (1 + _b) - _t**3, False),  # 0 at t = 1, b = 0 (an instance, L = 1): the strict bound fails there
])
def test_the_multiplier_closure_reads_the_second_order_at_the_limit_only_where_it_is_enclosed(
        core: sp.Expr, closes: bool) -> None:
    """A strict bound whose residual is 0 on the face t = 0 (L -> oo, no instance) and whose t-slope is >= 0 but not
    > 0 there closes only when a higher derivative in t is > 0 on the box and the ones between are >= 0 (to
    ``GROWTH_DEPTH``), read from their rigorous enclosures; where the core has a kink there is none to read, and the box
    stays open (closing it would prove ``t^2 |b| > 0``, false at b = 0)."""
    from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

    coords = [Coordinate(_t, 0.0, 1.0, "length", "t"), Coordinate(_b, 0.0, 1.0, "role", "b")]
    problem = Problem("m", 0, "m", coords, core, [_b], True, core, [], {}, 0, 0, {}, "m")
    P = bnb.Programs.build(problem)
    assert bnb._multiplier_closes(P, P.face(()), 0, Fraction(0), np.zeros(2), np.ones(2), True, [0]) is closes


@pytest.mark.parametrize("core, closes", [
    ((1 - _s) * (1 + _t), True),  # 0 at the open end s = 1 (a logit at +oo), falling into it: > 0 off it
    ((1 - _s) ** 2 * (1 + _t), True),  # the same to second order: -dr/ds >= 0, and -d/ds(-dr/ds) < 0 grows off s = 1
    ((1 - _s) * (_s - sp.Rational(1, 2)) ** 2, False),  # 0 at s = 1/2 too, inside: the strict bound fails there
    (_s * (1 - _s) * (sp.Rational(1, 2) - _s) ** 2 + 0 * _t, False),  # and at s = 1/2 between two open ends
    ((1 - _t) * (1 - _s), False),  # 0 at t = 1 (L = 1, an instance): -dr/ds = 1 - t falls as t grows, it does not grow
])
def test_the_multiplier_closure_reads_growth_off_an_open_upper_end(core: sp.Expr, closes: bool) -> None:
    """Growth off an open end is read at both ends: a compactified logit ``s = sigmoid(l)`` is never 1, so a residual 0
    only at ``s = 1`` and growing away from it (its slope in s, or a higher derivative, of the right sign) is > 0 at
    every instance; a residual also 0 inside the box is not."""
    from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

    coords = [Coordinate(_t, 0.0, 1.0, "length", "t"), Coordinate(_s, 0.0, 1.0, "role", "s")]
    problem = Problem("m", 0, "m", coords, core, [_s], True, core, [], {}, 0, 0, {}, "m",
                      realisation={"bounded": False})
    assert problem.open_end(1, 1, [0.0, 0.0], [1.0, 1.0])
    P = bnb.Programs.build(problem)
    assert bnb._multiplier_closes(P, P.face(()), 0, Fraction(0), np.zeros(2), np.ones(2), True, [0]) is closes


def test_the_identity_check_of_a_rewritten_core_tells_different_functions_apart() -> None:
    """``relax._same_function``, the check behind every factor divided out of a core: the same function written
    otherwise agrees at its seeded points; a function that differs anywhere on them does not (nor one that is not
    finite there)."""
    from attnbounds.theory.deciding.prover.problem import Coordinate
    from attnbounds.theory.deciding.prover.relax import _same_function

    x, y = sp.symbols("x y", real=True)
    coords = [Coordinate(x, -1.0, 1.0, "parameter", "x"), Coordinate(y, 0.0, math.inf, "parameter", "y")]
    assert _same_function(x**2 - y**2, (x - y) * (x + y), coords)
    assert not _same_function(x**2 - y**2, (x - y) * (x + y) + sp.Rational(1, 10**12), coords)
    assert not _same_function(x * y, x + y, coords)
    assert not _same_function(1 / (x - x), x, coords)
    unknown = sp.Function("unknown")  # no value at any point: the identity is not checked, so it is not accepted
    assert not _same_function(unknown(x), unknown(x) + 0 * x, coords)
    assert not _same_function(x, unknown(x), coords)


def test_strip_positive_divides_out_exactly_the_factors_positive_on_the_whole_space() -> None:
    """exp of anything, positive numbers, powers of t and of positive parameters go (each named, in a numerator or a
    denominator); a factor of unknown sign stays, and what is left has the margin's sign."""
    from attnbounds.theory.deciding.prover.problem import strip_positive, t_sym

    x = sp.Symbol("x", real=True)
    T = sp.Symbol("T", positive=True)
    core, stripped = strip_positive(3 * sp.exp(-x**2) * t_sym**2 * T * (x - sp.Rational(1, 2)))
    ratio = sp.simplify(core / (x - sp.Rational(1, 2)))
    assert ratio.is_number and ratio > 0, core
    assert {"3", "T", "t**2"} <= set(stripped) and any("exp" in s for s in stripped), stripped
    assert strip_positive(-sp.exp(x) * (x - 1)) == (1 - x, ["exp(x)"])
    assert strip_positive(sp.exp(x + T) * (x - 1) * (x + 2)) == ((x - 1) * (x + 2), ["exp(T + x)"])
    assert strip_positive(x * (x - 1)) == (x * (x - 1), [])


def test_a_parameter_is_positive_only_where_a_hypothesis_says_so() -> None:
    """``relax._positive_domain``: a parameter whose domain hypothesis is ``> 0`` (eps) is positive, one the user
    declares free (c) or whose domain admits 0 is not; the prover divides out a power of a positive parameter and
    reads the margin's monotonicity in a quantity from the signs, so a free one taken as positive would change both."""
    from attnbounds.theory.deciding.prover.relax import _positive_domain
    from attnbounds.theory.running import api

    st = api.statement("c*alpha_max*L >= c*p + eps", hypotheses=["softmax"], parameters=["c"]).statements[0]
    assert _positive_domain(st, "eps") and _positive_domain(st, sp.Symbol("eps"))
    assert not _positive_domain(st, "c") and not _positive_domain(st, "L")


@settings(max_examples=60, deadline=None)
@given(priorities=hs.lists(hs.floats(-10, 10), min_size=2, max_size=12), taken=hs.integers(1, 6))
def test_the_queue_reports_the_lowest_of_the_boxes_left_never_a_taken_one(priorities: list[float], taken: int) -> None:
    """What a VERIFIED record says of the unexplored boxes (the lowest float lower bound among them, and where) is
    the queue's :meth:`lowest`: taken boxes (closed, split) leave the heap lazily, so the report must skip them and
    never drop a box still open."""
    from attnbounds.theory.deciding.prover.bnb import Node, _Queue

    queue = _Queue()
    nodes = [Node(np.array([float(k)]), np.array([float(k) + 1]), np.array([0.0]), np.array([1.0]), priority=p)
             for k, p in enumerate(priorities)]
    for node in nodes:
        queue.push(node)
    taken_ids: set[int] = set()
    while queue and len(taken_ids) < taken:
        taken_ids |= {id(nd) for nd in queue.take(1)[1]}  # depth first (newest), then best first, in turns
    left = [nd for nd in nodes if id(nd) not in taken_ids]
    report = queue.lowest()
    if not left:
        assert report is None
        return
    assert report is not None
    count, bound, lo, hi = report
    assert count == len(left) and bound == min(nd.priority for nd in left)
    assert any(nd.lo.tolist() == lo and nd.priority == bound for nd in left)
    assert queue.lowest() == report  # reporting takes nothing away
