"""Equalities along a constraint's boundary (issue 33): the largest weight is at least the mean, the smallest at most.

- the weights model's relaxation keeps a maximum's (minimum's) dominance over the mean of the other tokens, so
  ``alpha_max >= 1/L`` is not "violated" by a relaxed point whose other tokens are heavier than the maximum;
- a box whose core is a non-negative multiple of a constraint (``core = q c``, ``q >= 0`` certified) closes on the
  constraint's boundary, where the natural enclosure straddles 0 on every box however small; the replay re-derives
  the quotient from the rebuilt problem and refuses the rule where it does not apply (a strict bound, a quotient that
  can be negative, a constraint the problem does not have).
"""

from __future__ import annotations

import base64
import json
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


@pytest.mark.parametrize("relation", ["alpha_max >= 1/L", "alpha_min <= 1/L", "L*alpha_max >= 1", "1 >= L*alpha_min"])
def test_max_at_least_mean_is_proved_and_replays(relation: str) -> None:
    st = _statement(relation)
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "proved", result.reason
    certificate = json.loads(json.dumps(result.to_json()))
    ok, why = prover.replay(st, certificate)
    assert ok, why
    tokens = [t for p in certificate["problems"] for t in decode(p["tree"], 1 << 20)]
    assert any(t.startswith("M") for t in tokens), tokens  # the equality line closed by the constraint


@pytest.mark.parametrize("relation", ["alpha_max >= 1.000001/L", "alpha_min <= 0.999999/L", "alpha_max > 1/L"])
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
