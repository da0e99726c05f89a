"""``attnbounds search ID --replay RECORDS`` refuses a record with any field it reads tampered.

Real records (:mod:`tests._records`): a user's bound refuted by a certified token-class counterexample, a refuted
paper reading, and a paper reading without a counterexample (its tightest instance replayed instead). Each field a
replay reads is edited in turn: the recorded certificate status of the tightest instance and of the counterexample,
the counterexample instance's logits and weights, the ``certified`` flags, the statement's srepr. Every tampered
record has its content hash recomputed (:func:`tests._records.rehash`: the hash is a checksum anyone can recompute),
so what is tested is the replay itself: the untampered records replay with exit 0, every tampered one exits non-zero.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from attnbounds.theory.io.serialize import float_to_json
from tests._cli import run_cli
from tests._records import class_record, quick_records, rehash

Tamper = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def made() -> dict[str, dict[str, Any]]:
    """``cx``: user.half, refuted by a certified class counterexample; ``cx_alone``: the same without a tightest instance
    (a refutation whose search kept none: the counterexample is all there is to replay); ``paper_cx``: a paper reading
    refuted by the small search; ``tight``: a paper reading with no counterexample, whose tightest instance carries a
    certificate."""
    cx = class_record().to_json()
    alone = copy.deepcopy(cx)
    alone["tightness"]["witness"] = alone["tightness"]["certificate"] = None
    lemma1, refuted = (r.to_json() for r in quick_records(["lemma1", "theorem1.fixed[R1,g2]"]))
    return {"cx": cx, "cx_alone": rehash(alone), "paper_cx": refuted, "tight": lemma1}


def test_the_fixture_is_what_the_tests_assume(made: dict[str, dict[str, Any]]) -> None:
    assert made["cx"]["verdict"] == "REFUTED" and made["cx"]["counterexample"]["certificate"]["status"] == "violated"
    assert made["cx"]["counterexample"]["instance"]["counts"] == [[1, 55, 56]]
    assert made["cx_alone"]["tightness"]["witness"] is None and made["cx_alone"]["counterexample"] is not None
    assert made["paper_cx"]["verdict"] == "REFUTED" and made["paper_cx"]["counterexample"] is not None
    assert made["tight"]["counterexample"] is None
    assert made["tight"]["tightness"]["certificate"]["status"] == "holds"


def _replay(tmp_path: Path, data: dict[str, Any], command: str = "search") -> tuple[int, str]:
    """``search ID --replay`` (or ``cite ID --records``, which replays whatever the verdict calls for) on ``data``."""
    path = tmp_path / "records.json"
    path.write_text(json.dumps([data]))  # as written, even where the schema check refuses it when it is read
    code, out, err = run_cli(["search", data["id"], "--replay", str(path)] if command == "search" else
                             ["cite", data["id"], "--records", str(path)])
    assert "Traceback" not in err, err[-3000:]
    return code, out + err


def _tampered(record: dict[str, Any], tamper: Tamper) -> dict[str, Any]:
    data = copy.deepcopy(record)
    tamper(data)
    return rehash(data)


@pytest.mark.parametrize("key", ["cx", "cx_alone", "paper_cx", "tight"])
def test_untampered_records_replay(made: dict[str, dict[str, Any]], tmp_path: Path, key: str) -> None:
    code, text = _replay(tmp_path, made[key])
    assert code == 0, text
    assert "reproduced" in text and "NOT reproduced" not in text, text


# -- the tampers -------------------------------------------------------------------------------------------------
def _certificate(where: str, field: str, value: Any) -> Tamper:
    """The recorded certificate's ``field`` (its status, a margin end) of the counterexample or the tightest instance
    replaced by ``value``."""
    def tamper(data: dict[str, Any]) -> None:
        part = data["counterexample"] if where == "counterexample" else data["tightness"]
        part["certificate"][field] = value
    return tamper


def _status(where: str, status: Any) -> Tamper:
    return _certificate(where, "status", status)


def _instance_array(name: str, make: Callable[[np.ndarray], np.ndarray]) -> Tamper:
    """Replace the counterexample instance's ``name`` array (hex and decimal alike, as a careful forger would)."""
    def tamper(data: dict[str, Any]) -> None:
        inst = data["counterexample"]["instance"]
        old = np.array([[float.fromhex(h) for h in row] for row in inst[name]["hex"]])
        inst[name] = float_to_json(make(old))
    return tamper


def _flag(where: str, value: Any) -> Tamper:
    def tamper(data: dict[str, Any]) -> None:
        (data if where == "record" else data["counterexample"])["certified"] = value
    return tamper


def _srepr(text: str | None = None, replace: tuple[str, str] | None = None) -> Tamper:
    def tamper(data: dict[str, Any]) -> None:
        old = data["statement"]["srepr"]
        if replace is not None:
            assert replace[0] in old, old
        data["statement"]["srepr"] = text if text is not None else old.replace(*replace)  # type: ignore[misc]
    return tamper


def _uncertified_with_float_margin(data: dict[str, Any]) -> None:
    """Both flags false, with the float margin an uncertified refutation carries: a record the schema accepts."""
    data["certified"] = False
    data["counterexample"]["certified"] = False
    data["counterexample"]["float"] = {"lhs": 0.9933557428230999, "rhs": 0.5, "margin": -0.4933557428230999,
                                       "relative_margin": -0.33}


def _restated(relation: str) -> Tamper:
    """The whole statement part rewritten for another relation (srepr, formula, latex, ... consistent with each other:
    the record prints as the statement it now states)."""
    def tamper(data: dict[str, Any]) -> None:
        from attnbounds.theory.io.builder import statement_part
        from attnbounds.theory.running import api

        st = api.statement(relation, hypotheses=["simplex"], id=data["id"]).statements[0]
        data["statement"] = statement_part(st, "user")
    return tamper


TAMPERS: list[Any] = [
    # the tightest instance's recorded certificate status (what a record without a counterexample replays)
    pytest.param("tight", _status("tightness", "violated"), id="tightest status holds->violated"),
    pytest.param("tight", _status("tightness", "inconclusive"), id="tightest status holds->inconclusive"),
    pytest.param("tight", _status("tightness", "not-applicable"), id="tightest status holds->not-applicable"),
    pytest.param("tight", _status("tightness", "proved"), id="tightest status holds->unknown word"),
    pytest.param("tight", _status("tightness", None), id="tightest status removed"),
    pytest.param("cx", _status("tightness", "holds"), id="tightest status of a refuted record violated->holds"),
    # the counterexample's certificate status
    pytest.param("cx", _status("counterexample", "holds"), id="counterexample status violated->holds"),
    pytest.param("cx", _status("counterexample", "inconclusive"), id="counterexample status violated->inconclusive"),
    pytest.param("cx", _status("counterexample", "refuted"), id="counterexample status violated->unknown word"),
    pytest.param("paper_cx", _status("counterexample", "holds"), id="paper counterexample status violated->holds"),
    # the recorded margin ends, which the replay compares with those certified again
    pytest.param("cx", _certificate("counterexample", "margin_lo", "not a number"), id="counterexample margin_lo text"),
    pytest.param("cx", _certificate("counterexample", "margin_hi", -1.0), id="counterexample margin_hi moved"),
    pytest.param("tight", _certificate("tightness", "margin_lo", "garbage"), id="tightest margin_lo text"),
    # the counterexample instance's logits and weights
    pytest.param("cx", _instance_array("logits", lambda a: np.zeros_like(a)), id="counterexample logits all equal"),
    pytest.param("cx", _instance_array("logits", lambda a: -a), id="counterexample logits negated"),
    pytest.param("cx_alone", _instance_array("logits", lambda a: np.zeros_like(a)),
                 id="counterexample logits all equal, no tightest instance"),
    pytest.param("cx_alone", _status("counterexample", "holds"),
                 id="counterexample status violated->holds, no tightest instance"),
    pytest.param("cx", _instance_array("logits", lambda a: a + np.array([[1.0, 0.0, 0.0]])),
                 id="counterexample logits moved, still violating"),
    pytest.param("cx", _instance_array("alpha", lambda a: np.full_like(a, 1.0 / 112)),
                 id="counterexample weights made uniform"),
    pytest.param("cx", _instance_array("alpha", lambda a: a[:, ::-1].copy()),
                 id="counterexample weights permuted"),
    # the certified flags
    pytest.param("cx", _flag("record", False), id="record certified false"),
    pytest.param("cx", _flag("counterexample", False), id="counterexample certified false"),
    pytest.param("tight", _flag("record", False), id="record without counterexample certified false"),
    pytest.param("paper_cx", _flag("record", False), id="paper record certified false"),
    pytest.param("cx", _uncertified_with_float_margin, id="certified false with a float margin"),
    # the statement's srepr
    pytest.param("cx", _srepr(replace=("Rational(1, 2)", "Integer(1)")), id="srepr bound 1/2->1"),
    pytest.param("cx", _srepr(replace=("LessThan", "GreaterThan")), id="srepr <= -> >="),
    pytest.param("cx", _srepr(text="not an expression"), id="srepr garbage"),
    pytest.param("cx", _restated("alpha_i <= 1"), id="statement restated consistently, bound 1/2->1"),
    pytest.param("tight", _srepr(text="LessThan(Integer(0), Integer(1))"), id="paper srepr replaced"),
    pytest.param("paper_cx", _srepr(text="LessThan(Integer(0), Integer(1))"), id="refuted paper srepr replaced"),
]


@pytest.mark.parametrize("key, tamper", TAMPERS)
def test_a_tampered_record_does_not_replay(made: dict[str, dict[str, Any]], tmp_path: Path, key: str,
                                           tamper: Tamper) -> None:
    code, text = _replay(tmp_path, _tampered(made[key], tamper))
    assert code != 0, text


def test_a_flipped_certified_flag_is_refused_saying_what_the_statement_is(made: dict[str, dict[str, Any]],
                                                                          tmp_path: Path) -> None:
    """The refusal names the mismatch the user must look at: the record claims an uncertified (float64) refutation
    of a statement that certification covers."""
    code, text = _replay(tmp_path, _tampered(made["cx"], _uncertified_with_float_margin))
    assert code != 0 and "the record says certified = False, but its statement is certifiable" in text, text


@pytest.mark.parametrize("command", ["search", "cite"])
def test_a_refutation_without_a_tightest_instance_is_replayed_from_its_counterexample(
        made: dict[str, dict[str, Any]], tmp_path: Path, command: str) -> None:
    """Both replay paths (``search --replay`` re-checks the instances, ``cite --records`` whatever the verdict calls
    for) re-certify a REFUTED record's counterexample when it is its only instance: never 'nothing to re-check'."""
    code, text = _replay(tmp_path, made["cx_alone"], command)
    assert code == 0 and "nothing to re-check" not in text, text
    for tamper in (_instance_array("logits", lambda a: np.zeros_like(a)), _status("counterexample", "holds")):
        code, text = _replay(tmp_path, _tampered(made["cx_alone"], tamper), command)
        assert code != 0, text
