"""The relaxation prover's power and soundness, measured (issue: PROVED for your own bounds, for every L).

- the quality set (``relaxation_set.toml``): at the default budget, at least 90 % of its true statements are
  PROVED, every false one is REFUTED by a certified counterexample, and none is wrongly PROVED; each PROVED
  certificate replays from its JSON alone;
- the planted long-context set (:mod:`attnbounds.theory.deciding.search.planted`): no false statement is PROVED, the
  relaxed ones are decided;
- the paper's readings: no REFUTED reading (its certified counterexample is stored in theory/data/counterexamples/) is
  PROVED by the relaxation.

The fast statements run in the default test run; the whole set, under ``-m slow``.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from attnbounds.theory.deciding import prover
from attnbounds.theory.mathematics import registry
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.io.counterexamples import stored_ids
from tests._marks import slow_where
from tests.planted import long_context_set
from attnbounds.theory.io.userbounds import load_data
from attnbounds.theory.mathematics.normalisers import constructors_added

SET = Path(__file__).with_name("relaxation_set.toml")
BUDGET = 7.0  # the default budget
#: statements of the set that take well under a second (the default test run's share)
FAST = ("true.w.bsig.upper", "true.w.bsig.lower", "true.w.bsig.max", "true.w.softmax.exp", "true.j.softmax.entry",
        "true.j.softmax.row", "true.j.softmax.dFl2", "true.w.bsig.range", "false.w.bsig.far", "false.w.bsig.far12",
        "false.w.bsig.range", "false.j.softmax.entry", "false.j.softmax.row")


def _set() -> tuple[dict, list]:
    data = tomllib.loads(SET.read_text())
    ub = load_data(data, str(SET))
    return ub.normalisers, ub.statements


def _decide(statement):
    result = prover.prove(statement, work=prover.work_for(BUDGET))
    if result.status == "refuted":
        cert = certify(statement, result.counterexample)
        return result, cert.status
    return result, None


def _check(statement) -> str:
    result, cert = _decide(statement)
    true = statement.id.startswith("true.")
    assert not (result.status == "proved" and not true), f"{statement.id} is false and was PROVED"
    if result.status == "proved":  # the certificate replays from its JSON alone
        ok, why = prover.replay(statement, json.loads(json.dumps(result.to_json())))
        assert ok, f"{statement.id}: the certificate does not replay: {why}"
    if not true:
        assert result.status == "refuted" and cert == "violated", \
            f"{statement.id} is false: want a certified counterexample, got {result.status} ({result.reason})"
    return result.status


@pytest.mark.parametrize("sid", FAST)
def test_fast_statements(sid: str) -> None:
    normalisers, statements = _set()
    with constructors_added(normalisers):
        statement = next(s for s in statements if s.id == sid)
        status = _check(statement)
    if sid.startswith("true."):
        assert status == "proved", f"{sid} is true and tight, and the prover proves it at the default budget"


#: true statements of the set the prover does not close at the default budget (README, "Measured"): any other one
#: left open is a lost proof (alpha_max's bound was lost unnoticed while the rate stayed above 90 %)
KNOWN_OPEN = {"true.w.softmax.abar", "true.j.sigmax.row"}


@pytest.mark.slow
def test_the_whole_set_is_at_least_90_percent_proved_none_lost_and_never_wrong() -> None:
    normalisers, statements = _set()
    with constructors_added(normalisers):
        outcome = {s.id: _check(s) for s in statements}
    true = [sid for sid in outcome if sid.startswith("true.")]
    proved = [sid for sid in true if outcome[sid] == "proved"]
    assert len(proved) >= 0.9 * len(true), (f"{len(proved)} of {len(true)} true statements PROVED; open: "
                                            f"{sorted(set(true) - set(proved))}")
    assert set(true) - set(proved) <= KNOWN_OPEN, f"proofs lost: {sorted(set(true) - set(proved) - KNOWN_OPEN)}"


#: the planted Jacobian bounds take 15-25 s each: one in the default run, the others with -m slow
@pytest.mark.parametrize("planted", slow_where(long_context_set("all"), lambda p: p.statement.id, {
    "planted.jacobian[delta=0.02,a=3.5]", "planted.jacobian[delta=0.05,a=1]", "planted.jacobian[delta=0.05,a=2]"}))
def test_no_planted_false_statement_is_proved(planted) -> None:
    result, cert = _decide(planted.statement)
    if planted.false:
        assert result.status != "proved"
        if result.status == "refuted":
            assert cert == "violated"
            assert result.counterexample.L >= planted.threshold
    elif result.status != "declined":
        assert result.status == "proved", result.reason


@pytest.mark.parametrize("sid", stored_ids())
def test_no_refuted_reading_is_proved(sid: str) -> None:
    result = prover.prove(registry.get(sid), work=prover.work_for(1.0))
    assert result.status != "proved", f"{sid} has a certified counterexample and the relaxation PROVED it"
