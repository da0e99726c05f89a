"""The relaxation prover at the ends of a statement's ranges (issue 35): bounds false only at (or next to) one end of
the range of L or of T are never PROVED, and are refuted with a certified counterexample; the same bounds made true
there are proved. A relaxation whose range of ``t = 1/L`` (or of T) missed an end would prove the false ones: these
tests are what catches it, and the replay refuses a certificate whose coordinate ranges were narrowed
(:mod:`tests.acceptance.test_forged_records`)."""

from __future__ import annotations

from typing import Any

import pytest

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics.normalisers import constructors_added
from attnbounds.theory.running import api

#: F = 2 + sigmoid(l / T) in (2, 3): alpha_max < 3 / (2 L + 1), approached as one logit grows and the others fall
BSIG = {"name": "bsig", "log_F": "log(2 + sigmoid(l/T))"}
#: softmax with |l| <= a: alpha_max <= e^(2a/T) / (e^(2a/T) + L - 1), attained (one logit at a, the others at -a)
SOFTMAX = {"hypotheses": ["softmax", "logits-bounded"]}
EXACT = "exp(2*a/T)/(exp(2*a/T) + L - 1)"

FALSE_AT_AN_END: dict[str, dict[str, Any]] = {
    "L_min": dict(relation="alpha_max <= 3/(2*L + 1) - 1/1000 + (L - 5)/500", normaliser=BSIG, ranges={"L": [5, 10**6]}),
    "L_max": dict(relation="alpha_max <= 3/(2*L + 1) - 1/100000 + (50 - L)/500", normaliser=BSIG, ranges={"L": [2, 50]}),
    "T_min": dict(relation=f"alpha_max <= {EXACT} - 1/10000 + (T - 1/2)/100", fixed={"a": 1.0},
                  ranges={"T": [0.5, 2.0]}, **SOFTMAX),
    "T_max": dict(relation=f"alpha_max <= {EXACT} - 1/10000 + (2 - T)/100", fixed={"a": 1.0},
                  ranges={"T": [0.5, 2.0]}, **SOFTMAX),
}
TRUE: dict[str, dict[str, Any]] = {
    "T_range": dict(relation=f"alpha_max <= {EXACT}", fixed={"a": 1.0}, ranges={"T": [0.5, 2.0]}, **SOFTMAX),
    "L_range": dict(relation="alpha_max <= 3/(2*L + 1) + 1/100000", normaliser=BSIG, ranges={"L": [5, 50]}),
}


def _prove(name: str, spec: dict[str, Any]) -> tuple[Any, Any, str | None]:
    spec = dict(spec)
    user = api.statement(spec.pop("relation"), id=f"ends.{name}", **spec)
    with constructors_added(user.normalisers):
        statement = user.statements[0]
        result = prover.prove(statement, work=prover.work_for(2.0))
        status = None if result.counterexample is None else certify(statement, result.counterexample).status
    return statement, result, status


@pytest.mark.parametrize("name", sorted(FALSE_AT_AN_END))
def test_a_bound_false_only_at_an_end_of_its_range_is_refuted(name: str) -> None:
    statement, result, status = _prove(name, FALSE_AT_AN_END[name])
    assert result.status != "proved", f"{name}: a bound false at the end of its range was PROVED"
    assert result.status == "refuted" and status == "violated", (result.status, result.reason)
    inst = result.counterexample
    if name.startswith("L_"):
        lo, hi = FALSE_AT_AN_END[name]["ranges"]["L"]
        assert lo <= inst.L <= hi  # realised inside the range: at the end where it is false
        assert inst.L == (lo if name == "L_min" else hi) or abs(inst.L - (lo if name == "L_min" else hi)) <= 1


@pytest.mark.parametrize("name", sorted(TRUE))
def test_the_same_bound_true_over_the_whole_range_is_proved(name: str) -> None:
    _, result, _ = _prove(name, TRUE[name])
    assert result.status == "proved", result.reason
