"""What the relaxation reaches beyond one fixed log F and one logit box (issue 33).

- every positive F: with no hypothesis fixing log F, and only 'F positive' / 'F independent of L' said about it, the
  relaxation ranges over the log-F values themselves (every point is the instance of some F), so Lemma 1 is proved
  for every F at once; false variants are never proved (the model realises no counterexample: the search refutes
  them);
- query-key logits: Cauchy-Schwarz bounds every logit by Delta_max, the relaxed logit box's a.
"""

from __future__ import annotations

import json

import pytest

import attnbounds
from attnbounds.theory.deciding import prover
from attnbounds.theory.running import api


def test_lemma1_is_proved_for_every_F_and_replays() -> None:
    st = attnbounds.get("lemma1")
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("relation", [
    "alpha_i <= C_2/(L+1)",        # false where C_2 < 2: equal F values give 1/L > 1/(L+1)
    "alpha_i >= 1.0001*C_1/L",      # false at equal F values (C_1 = 1, alpha_i = 1/L)
    "alpha_max < C_2/(C_2 + L - 1)",  # the supremum is attained: one token at F's maximum, the others at its minimum
])
def test_false_bounds_over_every_F_are_not_proved(relation: str) -> None:
    st = api.statement(relation, hypotheses=["F-positive", "logits-bounded"], defaults={"a": "logit_absmax"},
                       id="everyF").statements[0]
    assert prover.prove(st, work=prover.work_for(1.0)).status != "proved"


def test_an_F_property_the_log_F_values_do_not_keep_still_declines() -> None:
    """'weights on the simplex' allows zero weights, which no finite log-F value is: that reading stays declined."""
    st = api.statement("alpha_max >= 1/L", hypotheses=["simplex"], id="simplex").statements[0]
    assert prover.prove(st, work=prover.work_for(1.0)).status == "declined"


def test_corollary1_with_the_largest_key_is_proved_through_the_keys_bound_of_the_logits() -> None:
    """logits-qk: |<q, k_j>| <= ||q|| ||k_j|| <= Delta_max, so the relaxed logits lie in [-a, a] with a = Delta_max."""
    st = attnbounds.get("corollary1[delta=max-key]")
    result = prover.prove(st, work=prover.work_for(2.0))
    assert result.status == "proved", result.reason
    assert prover.replay(st, json.loads(json.dumps(result.to_json())))[0]


@pytest.mark.parametrize("relation", ["alpha_i <= exp(Delta_max/T)/L", "alpha_i >= exp(-Delta_max/T)/L"])
def test_bounds_of_the_weights_by_the_keys_that_are_too_strong_are_not_proved(relation: str) -> None:
    """With half the exponent the bound fails (one key antiparallel to q, the others parallel with the largest norm)."""
    st = api.statement(relation, hypotheses=["softmax", "logits-qk"], id="qk").statements[0]
    assert prover.prove(st, work=prover.work_for(1.0)).status != "proved"
