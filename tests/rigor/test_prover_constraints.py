"""Equalities along a constraint's boundary (issue 33): the largest weight is at least the mean, the smallest at most.

- the weights model's relaxation keeps a maximum's (minimum's) dominance over the mean of the other tokens, so
  ``alpha_max >= 1/L`` is not "violated" by a relaxed point whose other tokens are heavier than the maximum;
- a box whose core is a non-negative multiple of a constraint (``core = q c``, ``q >= 0`` certified) closes on the
  constraint's boundary, where the natural enclosure straddles 0 on every box however small; the replay re-derives
  the quotient from the rebuilt problem and refuses the rule where it does not apply (a strict bound, a quotient that
  can be negative, a constraint the problem does not have);
- the orders among coordinates (``D_x - D_y >= 0``) tighten their ends to the fixed point of every chain of orders;
- a monotone projection is taken where each constraint grows toward the face, also with a slope reaching 0 there,
  and the replay refuses one along a coordinate toward which a constraint falls (it would carry feasible points out
  of the constraints, and a false core could then close as infeasible on the face).
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from typing import Any

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.deciding.prover.bnb import branch_and_bound, decode, replay
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem
from attnbounds.theory.running import api

x, y = sp.Symbol("x", real=True), sp.Symbol("y", real=True)


def _statement(relation: str) -> Any:
    return api.statement(relation, hypotheses=["softmax"], id="mean").statements[0]


def _proved_and_replayed_through(relation: str, token: str) -> None:
    """The relaxation proves ``relation``, its certificate replays, and some box of it closed by a ``token`` entry
    (the statement's own relaxation, the weights model: not a stronger statement, :func:`prover._stronger`)."""
    st = _statement(relation)
    result = prover._prove(st, work=prover.work_for(1.0))
    assert result.status == "proved", result.reason
    certificate = json.loads(json.dumps(result.to_json()))
    ok, why = prover.replay(st, certificate)
    assert ok, why
    tokens = [t for p in certificate["problems"] for t in decode(p["tree"], 1 << 20)]
    assert any(t.startswith(token) for t in tokens), tokens


@pytest.mark.parametrize("relation", ["alpha_max >= 1/L", "alpha_min <= 1/L", "L*alpha_max >= 1", "1 >= L*alpha_min"])
def test_max_at_least_mean_is_proved_and_replays(relation: str) -> None:
    _proved_and_replayed_through(relation, "M")  # the equality line closed by the constraint


@pytest.mark.parametrize("relation", [
    "alpha_max > 0.5/L", "alpha_min < 2/L", "L*alpha_max > 0.999", "alpha_max > 1/(2*L + 1)", "L*alpha_min < 1.001",
    "alpha_max >= 1/(L + 1)",                                   # non-strict, 0 only at the limit
    "alpha_max > 1/(L + 1)", "alpha_min < 1/(L - 0.5)", "L*alpha_max > 1 - 1/L",  # the residual grows like t^2
])
def test_a_bound_short_of_the_equality_is_proved_by_a_multiplier_and_replays(relation: str) -> None:
    """True bounds whose margin tends to 0 only as L grows, along the constraint's boundary (equal weights): the
    natural enclosure and the limit projection cannot close the corner t = 0; ``core - lam c`` does, its growth in t
    read to first or second order."""
    _proved_and_replayed_through(relation, "L")


@pytest.mark.parametrize("relation", [
    "L*alpha_max > 1 - 0.5/L", "L*alpha_max >= 1 - 1/(2*L)", "L*alpha_max > 1 - exp(-1)/L", "L*alpha_max > 1 - pi/L",
    "L*alpha_min < 1 + 0.5/L", "L*alpha_min <= 1 + exp(-1)/L",
])
def test_a_bound_short_of_the_equality_by_any_coefficient_is_proved_and_replays(relation: str) -> None:
    """The same bounds with the gap's coefficient other than 1 (a half, e^-1, pi): the margin ``b/t + c t - 1`` over
    one denominator is ``(b + c t^2 - t)/t`` only when ``c = 1``; otherwise sympy writes ``(E b + t^2 - E t)/(E t)``,
    whose numerator has more operations, and until this stop the quotient was kept, singular at t = 0 (the
    L = infinity end): 46 boxes open at the default work. Multiplying in the power of ``t`` alone gives ``b + t^2/e -
    t``, closed by the constraint ``b >= t`` with the multiplier 1 exactly (an irrational multiplier such as ``e``
    has no simple fraction the replay reads)."""
    _proved_and_replayed_through(relation, "L")


@pytest.mark.parametrize("relation", ["alpha_max >= 1.000001/L", "alpha_min <= 0.999999/L", "alpha_max > 1/L",
                                      "L*alpha_max > 1", "alpha_min < 1/L", "alpha_max > 1/(L - 0.000001)",
                                      "alpha_max > 1/(L - 1)", "L*alpha_max > 1 + 1/L", "alpha_min < 1/(L + 1)",
                                      "L*alpha_max >= 1 + 1/L**2", "L*alpha_max > 1 + 0.001/L",
                                      "L*alpha_max >= 1 + exp(-30)/L", "alpha_max > 1/(L - exp(-1))"])
def test_just_beyond_the_equality_is_not_proved(relation: str) -> None:
    st = _statement(relation)
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status != "proved", result.reason
    if result.counterexample is not None:
        assert certify(st, result.counterexample).status == "violated"


def _problem(core: sp.Expr, constraints: list[sp.Expr], strict: bool = False) -> Problem:
    coords = [Coordinate(x, 0.0, 1.0, "parameter", "x"), Coordinate(y, 0.0, 1.0, "parameter", "y")]
    return Problem("test", 0, "test", coords, core, constraints, strict, core, [], {}, 0, 0, {}, "test")


@pytest.mark.parametrize("core, constraint, closes", [
    (x - y, x - y, True),                      # the core is the constraint
    (2 * (x - y) * (1 + x), x - y, True),      # a positive multiple of it
    ((x - y) * (x - sp.Rational(1, 2)), x - y, False),  # a multiple whose factor changes sign (x = 0.3, y = 0.1)
    (x - y - sp.Rational(1, 100), x - y, False),  # no multiple of it (negative at x = y)
])
def test_a_core_closes_by_a_constraint_only_as_its_non_negative_multiple(core: sp.Expr, constraint: sp.Expr,
                                                                          closes: bool) -> None:
    """The true cores are proved through the rule; the false ones are not, whatever the rule closed."""
    problem = _problem(core, [constraint])
    outcome = branch_and_bound(problem, 10**6)
    if closes:
        assert outcome.status == "proved", outcome.reason
        assert "constraint" in outcome.closed
        tokens = decode(outcome.tree.encode(), 1 << 20)
        assert replay(problem, tokens)[0]
    else:
        assert outcome.status != "proved", outcome.reason


@pytest.mark.parametrize("factor", [x - sp.Rational(1, 4), x + y - sp.Rational(1, 4)])
def test_a_core_that_is_a_constraints_multiple_only_on_part_of_the_box_is_refuted(factor: sp.Expr) -> None:
    """``core = q c`` with ``c = x - y^2 >= 0`` and ``q >= 0`` only for the larger x: boxes there close by the
    constraint, in the same batches as the boxes near x = 0 where the core is negative at feasible points (x = 0.2,
    y = 0). Those are found; a box closed by the constraint never ends the batch early (which would leave the others
    undecided in a tree said to be a proof)."""
    constraint = x - y**2
    problem = _problem(factor * constraint, [constraint])
    assert float((factor * constraint).subs({x: 0.2, y: 0.0})) < 0  # a feasible point where it is negative
    outcome = branch_and_bound(problem, 10**7)
    assert outcome.status == "negative", outcome.reason
    assert "constraint" in outcome.closed, outcome.closed


def _blob(tokens: list[str]) -> list[str]:
    return decode(base64.b64encode(zlib.compress(json.dumps(tokens).encode())).decode(), 1 << 20)


@pytest.mark.parametrize("core, constraints, strict, tokens", [
    ((x - y) * (x - sp.Rational(1, 2)), [x - y], False, ["M0"]),  # the quotient is negative on part of the box
    (x - y, [x - y], True, ["M0"]),                                 # strict: c >= 0 gives core >= 0, not > 0
    (x - y, [x - y], False, ["M1"]),                                # a constraint the problem does not have
    (x - y, [y - x], False, ["M0"]),                                # the wrong constraint: quotient -1
])
def test_the_replay_refuses_the_constraint_rule_where_it_does_not_hold(core: sp.Expr, constraints: list[sp.Expr],
                                                                       strict: bool, tokens: list[str]) -> None:
    ok, why, _ = replay(_problem(core, constraints, strict), _blob(tokens))
    assert not ok, why


def test_the_replay_refuses_the_constraint_rule_on_a_projected_box() -> None:
    """After a projection the constraints read the range before it: ``c >= 0`` there says nothing about the face."""
    problem = _problem(x - y, [x - y])
    assert replay(problem, _blob(["M0"]))[0]
    ok, why, _ = replay(problem, _blob(["P0-", "M0"]))
    assert not ok, why


def test_a_dominance_that_is_not_one_sided_in_the_other_weight_adds_no_mean_constraint() -> None:
    """A role maximal for ``w (1 - w)`` allows the other weights on both sides of a gap: their mean may sit in the gap
    although every one of them is allowed, so no constraint against the mean is sound there."""
    from attnbounds.theory.deciding.prover.relax import Role, _against_mean
    from attnbounds.theory.deciding.prover.space import Token

    class _Model:
        T = sp.Integer(1)
        slopes = False  # softmax's weights model: every slope 1/T

    class _B:
        model = _Model()
        left = sp.Integer(1)

    w = sp.Symbol("w", positive=True)
    tok = Token("r", [], None, sp.log(w), sp.Integer(1), w)
    curved = Role("top", lambda r, k: r.weight * (1 - r.weight) - k.weight * (1 - k.weight), "max")
    linear = Role("max", lambda r, k: r.lam - k.lam, "max")
    assert _against_mean(_B(), curved, tok, 1) is None  # type: ignore[arg-type]
    mean = _against_mean(_B(), linear, tok, 1)  # type: ignore[arg-type]
    t = sp.Symbol("t", nonnegative=True)
    assert mean is not None and sp.simplify(mean - (w * (1 - t) - t)) == 0
    assert np.isfinite(float(mean.subs({w: 0.5, t: 0.25})))
    # with every slope free (every F), a dominance that reads the other token's slope bounds no weight alone: under
    # softmax the same dominance reads a slope 1/T common to every token, which cancels
    steep = Role("steep", lambda r, k: r.lam - k.lam + (r.g - k.g), "max")
    assert _against_mean(_B(), steep, tok, 1) is not None  # type: ignore[arg-type]

    class _Free(_B):
        model = type("_FreeModel", (), {"T": sp.Integer(1), "slopes": True})()

    free = Token("r", [], None, sp.log(w), sp.Symbol("G_r", real=True), w)
    assert _against_mean(_Free(), steep, free, 1) is None  # type: ignore[arg-type]
    assert _against_mean(_Free(), linear, free, 1) is not None  # type: ignore[arg-type]


def _closure_ends(names: list[sp.Symbol], lo: dict[sp.Symbol, float], hi: dict[sp.Symbol, float],
                  orders: list[tuple[sp.Symbol, sp.Symbol]]) -> tuple[dict[sp.Symbol, float], dict[sp.Symbol, float]]:
    """The ends the orders imply, from the transitive closure of ``x >= y`` (Floyd-Warshall): ``x`` is at least the
    lower end of everything below it, ``y`` at most the upper end of everything above it."""
    below = {(a, b): a == b for a in names for b in names}
    for a, b in orders:
        below[(a, b)] = True
    for k in names:
        for a in names:
            for b in names:
                below[(a, b)] = below[(a, b)] or (below[(a, k)] and below[(k, b)])
    return ({a: max(lo[b] for b in names if below[(a, b)]) for a in names},
            {b: min(hi[a] for a in names if below[(a, b)]) for b in names})


@pytest.mark.parametrize("seed", range(40))
def test_the_orders_of_the_constraints_tighten_the_ends_to_their_fixed_point(seed: int) -> None:
    """``D_x - D_y >= 0`` moves ``D_x``'s lower end up to ``D_y``'s and ``D_y``'s upper end down to ``D_x``'s, along
    every chain of such orders (to the fixed point the docstring promises, whatever order the constraints come in),
    and ``D >= 0`` / ``-D >= 0`` give an end 0; nothing else moves (no feasible point is cut)."""
    from attnbounds.theory.deciding.prover.relax import _propagate_orders

    rng = np.random.default_rng(seed)
    names = list(sp.symbols("d0:6", real=True))
    lo = {s: float(rng.choice([-2.0, -1.0, -0.5, 0.25])) for s in names}
    hi = {s: float(rng.choice([0.5, 1.0, 2.0, np.inf])) for s in names}
    orders = [(names[i], names[j]) for i, j in rng.integers(0, len(names), (7, 2)) if i != j]
    signs = [names[int(k)] for k in rng.integers(0, len(names), 2)]
    constraints: list[sp.Expr] = [a - b for a, b in orders] + [signs[0], -signs[1]] + [names[0] ** 2 - names[1]]
    lo_s, hi_s = dict(lo), dict(hi)
    lo_s[signs[0]] = max(lo_s[signs[0]], 0.0)
    hi_s[signs[1]] = min(hi_s[signs[1]], 0.0)
    want_lo, want_hi = _closure_ends(names, lo_s, hi_s, orders)
    coords = [Coordinate(s, lo[s], hi[s], "parameter", str(s)) for s in names]
    got = {c.symbol: (c.lo, c.hi) for c in _propagate_orders(coords, constraints)}
    assert got == {s: (want_lo[s], want_hi[s]) for s in names}, (orders, signs)


def test_a_projection_is_taken_where_a_constraint_grows_toward_the_face_with_slope_reaching_0() -> None:
    """``core = e^x - 1 - x/2 - x e^-y / 4 >= 0`` on ``x`` in [0, 1], ``y >= 0``, under ``c = y - x^2 >= 0``:
    ``d core / dx = e^x - 1/2 - e^-y / 4 >= 1/4 > 0``, so the core is least on the face ``x = 0``, where it is exactly
    0 (the natural enclosure of every box touching that face dips below 0, however small); ``dc/dx = -2x <= 0``,
    0 on that face: c never falls as x moves to 0, so the projection of a feasible point is feasible. The prover
    proves it by that projection (a slope toward the face reaching 0 is still a slope that keeps c), and the
    replay accepts it. (On an unbounded box the rigorous check reads mpmath.iv's endpoint intervals, exact at 0.)"""
    coords = [Coordinate(x, 0.0, 1.0, "parameter", "x"), Coordinate(y, 0.0, math.inf, "parameter", "y")]
    core = sp.exp(x) - 1 - x / 2 - x * sp.exp(-y) / 4
    problem = Problem("test", 0, "test", coords, core, [y - x**2], False, core, [], {}, 0, 0, {}, "test")
    outcome = branch_and_bound(problem, 10**6)
    assert outcome.status == "proved", outcome.reason
    tokens = decode(outcome.tree.encode(), 1 << 20)
    assert any(t.startswith("P") and "0-" in t for t in tokens), tokens
    assert replay(problem, tokens)[0]


@pytest.mark.parametrize("core, constraint, tokens", [
    (x - sp.Rational(3, 4), x - sp.Rational(1, 2), ["P0-", "I0"]),  # -1/4 at x = 1/2; c = -1/2 on the face x = 0
    (sp.Rational(1, 4) - x, sp.Rational(1, 2) - x, ["P0+", "I0"]),  # -1/4 at x = 1/2; c = -1/2 on the face x = 1
])
def test_the_replay_refuses_a_projection_toward_which_a_constraint_falls(core: sp.Expr, constraint: sp.Expr,
                                                                         tokens: list[str]) -> None:
    """The core is monotone in ``x`` (least on the face the tree projects onto), but the constraint falls as ``x``
    moves to that face: the projection of a feasible point (``x = 1/2``, where the core is -1/4) is infeasible, and
    the face is infeasible as a whole. Neither the prover nor the replay proves the false core through it."""
    problem = _problem(core, [constraint])
    assert branch_and_bound(problem, 10**6).status != "proved"
    ok, why, _ = replay(problem, _blob(tokens))
    assert not ok and "projection" in why, why


@pytest.mark.parametrize("slope, con_slope", [(1, 1), (3, 1), (2, 2)])
def test_a_coordinate_is_eliminated_through_a_constraint_whatever_its_slopes(slope: int, con_slope: int) -> None:
    """``core = s x + y - s/2`` over ``c = k (x - 1/2) >= 0``: ``core = (s/k) c + y``, so the remainder is ``y`` (>= 0
    on the box) for every pair of slopes, a constraint of slope 1 in x included."""
    import dataclasses

    from attnbounds.theory.deciding.prover.relax import eliminated, relax
    from attnbounds.theory.deciding.prover.space import Coordinate
    from attnbounds.theory.running import api

    template = relax(api.statement("alpha_max*alpha_min <= 1/(4*(L - 1))", hypotheses=["softmax"],
                                   ranges={"L": [2, 10**9]}, id="product").statements[0]).problems[0]
    x, y = sp.Symbol("x", real=True), sp.Symbol("y", real=True)
    problem = dataclasses.replace(template, coordinates=[Coordinate(x, 0.0, 1.0, "weight", "x"),
                                                         Coordinate(y, 0.0, 1.0, "weight", "y")],
                                  core=slope * x + y - sp.Rational(slope, 2),
                                  constraints=[con_slope * (x - sp.Rational(1, 2))], poles=[], unsigned=None)
    out = eliminated(problem)
    assert [o.core for o in out] == [y] and not out[0].exact, [(o.core, o.stripped) for o in out]
