"""The signs the relaxation prover may assume of Lemma 1's constants (issue 35).

``C_1 = min F / max F`` and ``C_2 = max F / min F`` on ``[-a, a]`` are ratios of positive values: their specifications
declare them nonnegative, and the prover reads that sign when it decides which way a margin moves with them. Where F
is not monotone on ``[-a, a]`` (``F = exp(l/T - l^2/10)`` with ``a = 10``: its maximum at ``l = 5``) and the margin
falls as ``C_1`` grows (``L alpha_min - C_1^2``, only because ``C_1 >= 0``) or rises as ``C_2`` grows
(``C_2^2 - L alpha_max``), the relaxation may read F's extremes over ``[-a, a]`` at the tokens (sound: the margin only
decreases) and offers those problems; without the sign it cannot.
"""

from __future__ import annotations

import pytest

from attnbounds.theory.deciding.prover.relax import relax
from attnbounds.theory.mathematics.normalisers import constructors_added
from attnbounds.theory.running import api

NOT_MONOTONE = {"name": "bump", "log_F": "l/T - l**2/10"}
BOUNDED = "F's extremes on [-a, a] bounded by the tokens'"


@pytest.mark.parametrize("relation", ["L*alpha_min >= C_1**2", "C_2**2 >= L*alpha_max"])
def test_the_relaxation_reads_the_sign_of_lemma_1_constants(relation: str) -> None:
    user = api.statement(relation, normaliser=NOT_MONOTONE, hypotheses=["logits-bounded"], fixed={"a": 10.0, "T": 1.0},
                         id="signs")
    with constructors_added(user.normalisers):
        patterns = [p.pattern for p in relax(user.statements[0]).problems]
    assert any(BOUNDED in p for p in patterns), patterns
