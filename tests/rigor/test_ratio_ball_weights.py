"""The ball weights of a ratio normaliser when F vanishes at some token (issue 35).

``alpha_k = F_k / sum_j m_j F_j`` is computed on balls relative to the column of the largest float ``log F``. A token
whose F is 0 (``log F = -inf``, a user's ``F(l) = l`` at ``l = 0``) must never be that column: the weights are then
read relative to a token whose F is positive, so that in the endpoint tier (``mpmath.iv``) every token with ``F > 0``
gets a bounded enclosure of its weight (today a wide one, ``[0, w]``: the vanishing token's own enclosure is
``[0, inf]``, and arb loses every weight to NaN there). In every tier each enclosure holds the float weight (NaN and
unbounded enclosures say nothing, and are allowed where the tier loses the value).
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.mathematics import balls
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import backend
from attnbounds.theory.mathematics.normalisers.ratio import RatioNormaliser
from attnbounds.theory.mathematics.normalisers.symbolic import l_sym

LINEAR = RatioNormaliser("linear", sp.log(l_sym))  # F(l) = l: 0 at l = 0, positive above
ROWS = [[0.0, 1.0, 2.0], [2.0, 0.0, 1.0], [2.0, 1.0, 0.0], [0.0, 2.0], [3.0, 0.0, 0.0, 1.0], [0.5, 0.0, 0.5]]


@pytest.mark.parametrize("tier", ["arb", "mpmath"])
@pytest.mark.parametrize("row", ROWS, ids=str)
def test_a_token_whose_F_vanishes_costs_the_others_nothing(tier: str, row: list[float]) -> None:
    logits = np.array([row])
    with np.errstate(divide="ignore"):
        want = LINEAR.weights(logits)[0]
    ops = backend(tier)
    with ops.precision(128):
        alpha = balls.ball_instance(Instance(alpha=want[None], logits=logits, normaliser=LINEAR), ops).alpha
    for k, (ball, w) in enumerate(zip(alpha, want)):
        lo, hi = ops.lower_float(ball), ops.upper_float(ball)
        assert np.isnan(lo) or np.isnan(hi) or lo <= w <= hi, (tier, row, k, ops.text(ball), w)
        if tier == "mpmath" and row[k] > 0:  # the endpoint tier keeps every positive token's weight bounded
            assert np.isfinite(lo) and np.isfinite(hi) and hi <= 1.0 + 1e-12, (row, k, ops.text(ball), w)
