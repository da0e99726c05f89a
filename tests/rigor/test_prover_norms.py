"""Norms of totals over every F (issue 33): the log-F-values model anchors log F at a reference token, sound for a
relation free of a common shift of every token's log F. A ratio of totals cancels the factor exp(shift) by algebra;
a norm (``||alpha||_2 = sqrt(sum F^2) / sum F``) does not, and is read through its homogeneity degree
(:func:`~attnbounds.theory.deciding.prover.relax.homogeneity_degree`, 0 in the factor). The degree is a property
checked numerically (``f(c x) = c^k f(x)`` wherever it answers); Cauchy-Schwarz's ``||alpha||_2^2 L >= 1`` is proved
over every F and replays, its false twins are not proved.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.prover.relax import homogeneity_degree
from attnbounds.theory.mathematics.opaque import OAbs, OMax
from attnbounds.theory.running import api

x, y = sp.symbols("x y", real=True)
w = sp.Symbol("w", positive=True)

#: (expression, its degree in {x, y}, or None where the structure shows none)
CASES = [
    (x, 1), (w, 0), (x * y, 2), (x / y, 0), (sp.sqrt(x**2 + y**2), 1), (OAbs(x) + 3 * OAbs(y), 1),
    (sp.sqrt((OAbs(x) * w + OAbs(y)) * OAbs(x)) / (w + 1), 1), (OMax(x, 2 * y) * sp.exp(w), 1),
    (sp.Max(x, y) - sp.Min(x, y), 1), ((x**2 + y**2) ** sp.Rational(-3, 2) * x, -2), (sp.exp(w) * x**3 / y, 2),
    (x + 1, None), (x + x**2, None), (sp.exp(x), None), (sp.log(OAbs(x)), None), (x**y, None), (x**w, None),
    (OMax(x, 1), None), (sp.sin(x) * y, None),
]


@pytest.mark.parametrize("expr, expected", CASES)
def test_the_degree_read_from_the_structure_is_the_homogeneity_of_the_function(expr: sp.Expr, expected: int | None
                                                                               ) -> None:
    k = homogeneity_degree(expr, {x, y})
    assert k == expected, (expr, k)
    if k is None:
        return
    f = sp.lambdify((x, y, w), expr, modules=[{"OAbs": abs, "OMax": max, "OMin": min}, "math"])
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.uniform(0.1, 3, 2) * rng.choice([-1, 1], 2)
        scale, ww = float(rng.uniform(0.01, 100)), float(rng.uniform(0.1, 3))
        try:
            base = f(float(a), float(b), ww)
        except (ValueError, ZeroDivisionError):  # a root of a negative number: nothing to compare
            continue
        assert np.isclose(f(scale * a, scale * b, ww), scale ** float(k) * base, rtol=1e-9), (expr, a, b, scale)


def test_cauchy_schwarz_on_the_weights_is_proved_for_every_F_and_replays() -> None:
    st = api.statement("F_l2*F_l2*L >= 1", hypotheses=["F-positive"], id="norms.cauchy-schwarz").statements[0]
    result = prover.prove(st, work=prover.work_for(1.0))
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("relation", [
    "F_l2*F_l2*L > 1",         # equal weights: exactly 1
    "F_l2*F_l2*L >= 1.001",
    "F_l2*F_l2*L <= 1",        # one heavy token: up to L
])
def test_false_norm_bounds_over_every_F_are_not_proved(relation: str) -> None:
    st = api.statement(relation, hypotheses=["F-positive"], id="norms.false").statements[0]
    assert prover.prove(st, work=prover.work_for(1.0)).status != "proved"
