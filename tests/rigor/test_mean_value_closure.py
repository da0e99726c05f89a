"""The mean-value form of the branch and bound, in the prover and in the replay (issue 35).

Near an interior minimum the natural enclosure of a core loses the dependency between its terms and cannot close a
box; the mean-value form ``core(c) + grad(box) . (box - c)`` can. Checked here:

- ``_mean_value_bound`` is a finite lower bound of the linear model over the whole box whenever its inputs are finite
  (and ``-inf`` otherwise);
- a core with a single form (a float coefficient: it is not factored) whose minimum is inside the box is proved with
  boxes closed by the mean-value form, and the tree re-checks in the replay: both read the core's only form at the
  box's centre.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding.prover import bnb
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem

x, y = sp.symbols("x y", real=True)


def _frac(v: float) -> Fraction:
    return Fraction(v)


@pytest.mark.parametrize("seed", range(6))
def test_the_mean_value_bound_is_a_finite_lower_bound_of_the_linear_model(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(20):
        n = int(rng.integers(1, 4))
        lo = rng.uniform(-2.0, 1.0, n)
        hi = lo + rng.uniform(0.0, 1.5, n) * (rng.uniform() > 0.1)  # now and then a point box
        c = lo / 2 + hi / 2
        rc = tuple(sorted(rng.normal(size=2)))
        rg = [tuple(sorted(rng.normal(size=2) * 3)) for _ in range(n)]
        bound = bnb._mean_value_bound((float(rc[0]), float(rc[1])), [(float(a), float(b)) for a, b in rg], lo, hi, c)
        assert math.isfinite(bound), (rc, rg, lo, hi)
        # the model's minimum over the box, the centre value and the slopes anywhere in their enclosures: at a corner
        # of the (box x slopes) product, as the model is bilinear in (slope, x - c)
        lowest = min(_frac(rc[0]) + sum(_frac(g[k]) * (_frac(v[k]) - _frac(c[k])) for k in range(n))
                     for g in itertools.product(*rg) for v in itertools.product(*zip(lo, hi)))
        assert _frac(bound) <= lowest, (bound, float(lowest))
        # and not needlessly low (arb's radii carry 30 bits)
        assert float(lowest) - bound <= 1e-7 * (1 + abs(float(lowest)) + sum(abs(g[0]) + abs(g[1]) for g in rg))


def test_an_unbounded_slope_gives_no_mean_value_bound() -> None:
    lo, hi = np.array([0.0, 0.0]), np.array([1.0, 1.0])
    assert bnb._mean_value_bound((1.0, 1.0), [(0.0, 1.0), (-math.inf, 1.0)], lo, hi, lo / 2 + hi / 2) == -math.inf
    # a point coordinate reads no slope
    assert bnb._mean_value_bound((1.0, 1.0), [(0.0, 1.0), (-math.inf, 1.0)], lo, np.array([1.0, 0.0]),
                                 np.array([0.5, 0.0])) == pytest.approx(0.5)


def _problem(core: sp.Expr) -> Problem:
    coordinates = [Coordinate(x, -1.0, 1.0, "parameter", "x"), Coordinate(y, -1.0, 1.0, "parameter", "y")]
    return Problem("mean-value", 0, "test", coordinates, core, [], False, core, [], {}, 0, 0, {}, "test", [])


def test_a_single_form_core_is_proved_through_mean_value_closures_and_its_tree_replays() -> None:
    core = x**2 - 2 * x * y + y**2 + sp.Float(0.01)  # (x - y)^2 + 1/100, its minimum along the diagonal
    assert len(bnb._forms(core)) == 1  # a float coefficient: never factored
    problem = _problem(core)
    outcome = bnb.branch_and_bound(problem, 10**7)
    assert outcome.status == "proved", outcome.reason
    assert outcome.closed.get("mean-value", 0) > 0, outcome.closed  # the natural enclosure alone does not close it
    tokens = bnb.decode(outcome.tree.encode(), 10**8)
    assert any(t.startswith("Cmean-value") for t in tokens)
    ok, why, leaves = bnb.replay(problem, tokens)
    assert ok, why
    assert leaves == sum(t[0] in "CIE" for t in tokens)


def test_a_mean_value_closure_of_a_false_core_does_not_replay() -> None:
    """The same tree recorded for a core that is negative on the diagonal: the re-check of its boxes fails."""
    good = _problem(x**2 - 2 * x * y + y**2 + sp.Float(0.01))
    tokens = bnb.decode(bnb.branch_and_bound(good, 10**7).tree.encode(), 10**8)
    ok, why, _ = bnb.replay(_problem(x**2 - 2 * x * y + y**2 - sp.Float(0.01)), tokens)
    assert not ok
