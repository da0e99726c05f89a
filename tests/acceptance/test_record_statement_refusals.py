"""A record's statement is rebuilt from the record alone before anything in it is replayed
(:func:`attnbounds.theory.io.rebuild.statement_of`): a record whose statement part cannot be rebuilt, or that names a
statement other than the one it prints, is refused with :class:`InvalidArgument` naming the record and the field,
never a traceback and never a replay against a statement the record did not state (a field of the wrong JSON type is
refused earlier, by the records' schema, naming its path). A user record's ``kind`` and ``title`` are labels the relation and
hypotheses do not read: it is rebuilt as recorded, not refused.

Each case edits one field of a real user record (a token-class counterexample of ``alpha_i <= 1/2``) and keeps the
record otherwise valid (its content hash recomputed), so the refusal is the rebuild's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from attnbounds.theory.io import records as rec
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.running.replay import replay_record
from tests._records import class_record, rehash


@pytest.fixture(scope="module")
def made() -> dict[str, Any]:
    return class_record().to_json()


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = data
        for p in parents:
            node = node[p]
        node[last] = value
    return edit


@pytest.mark.parametrize("edit, field", [
    (_set("statement.id", "user.other"), "its statement's id is 'user.other', not the record's"),
    (_set("statement.source", "paper"), "statement.source is 'paper' but no reading of the paper has this id"),
    (_set("hypotheses", [{"id": "simplex-ish", "description": "?"}]), "hypotheses[0]: unknown hypothesis 'simplex-ish'"),
    (_set("statement.normaliser", "softmax"), "$.statement.normaliser: expected object, got str"),  # the schema's
    (_set("statement.normaliser", {"family": "callable", "name": "mine"}), "the normaliser 'mine' is a Python callable"),
    (_set("statement.normaliser", {"family": "no-such-family"}), "statement.normaliser"),
    (_set("statement.ranges", [1, 2]), "$.statement.ranges: expected object, got list"),  # the schema's
    (_set("statement.ranges", {"T": [1, "2"]}), "statement.ranges.T must be a pair of numbers"),
    (_set("statement.ranges", {"T": [1, 2, 3]}), "statement.ranges.T must be a pair of numbers"),
    (_set("statement.ranges", {"T": [True, 2]}), "statement.ranges.T must be a pair of numbers"),
    (_set("statement.fixed", {"T": "1"}), "statement.fixed.T must be a number"),
    (_set("statement.fixed", {"T": False}), "statement.fixed.T must be a number"),
    (_set("statement.srepr", "LessThan(Symbol('alpha_i', real=True), Rational(1, 3))"),
     "statement.formula is 'alpha_i <= 1/2', but the statement it states has 'alpha_i <= 1/3'"),
    (_set("statement.latex", "\\alpha_{i} \\leq 1"), "statement.latex is '\\\\alpha_{i} \\\\leq 1', but the statement it "
                                                   "states has"),
])
def test_a_record_whose_statement_cannot_be_rebuilt_as_printed_is_refused(made: dict[str, Any],
                                                                         edit: Callable[[dict[str, Any]], None],
                                                                         field: str) -> None:
    data = copy.deepcopy(made)
    edit(data)
    with pytest.raises(InvalidArgument) as info:  # by the records' schema on reading, or by the rebuild on replaying
        replay_record(rec.Record.from_json(rehash(data)))
    message = str(info.value)
    assert message.startswith("record 'user.half'" if not field.startswith("$.") else "not a valid attnbounds record"), \
        message
    assert field in message, message


def test_the_untampered_record_rebuilds_and_replays(made: dict[str, Any]) -> None:
    replayed = replay_record(rec.Record.from_json(copy.deepcopy(made)))
    assert replayed.ok, replayed


@pytest.mark.parametrize("value", ["garbage", None, [1.0], -1.0])
def test_a_record_built_in_python_with_a_margin_end_that_is_no_recorded_number_does_not_replay(
        made: dict[str, Any], value: Any) -> None:
    """A Record built directly (no schema check on the way, as a program may) whose counterexample's margin end is
    text, missing, of another kind or another number: the replay compares it with the margin certified again and
    says NOT reproduced, never a match and never a traceback."""
    data = copy.deepcopy(made)
    data["counterexample"]["certificate"]["margin_lo"] = value
    replayed = replay_record(rec.Record(data))
    assert not replayed.ok, replayed


def _closed(relation: str) -> dict[str, Any]:
    from attnbounds.theory.running import api

    return api.check(relation, budget=0.3, seed=0).to_json()


def _swap_sides(data: dict[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(data)
    for c in data["closed_claim"]["conjuncts"]:
        c["lhs"], c["rhs"], c["lhs_decimal"], c["rhs_decimal"] = c["rhs"], c["lhs"], c["rhs_decimal"], c["lhs_decimal"]
    return rehash(data)


@pytest.mark.parametrize("relation, legacy", [
    ("1 - (1 - 0.8)**2 >= 0.99", True),   # before 2026-12-05 a '>=' claim was written with the sides of 'b <= a'
    ("0.99 <= 1 - (1 - 0.8)**2", False),  # a '<=' claim never was: its sides swapped are a forgery
    ("(2 >= 1) & (1 <= 3)", False),       # only the '>=' conjunct may be swapped, not every one
])
def test_a_closed_claim_replays_with_its_sides_as_written_or_as_earlier_versions_wrote_them(relation: str,
                                                                                            legacy: bool) -> None:
    data = _closed(relation)
    assert replay_record(rec.Record.from_json(copy.deepcopy(data))).ok
    assert replay_record(rec.Record.from_json(_swap_sides(data))).ok == legacy


def test_a_closed_claim_with_an_edited_margin_is_refused() -> None:
    data = copy.deepcopy(_closed("1 - (1 - 0.8)**2 >= 0.99"))
    data["closed_claim"]["conjuncts"][0]["margin"] = "-1/100"
    replayed = replay_record(rec.Record.from_json(rehash(data)))
    assert not replayed.ok and "values differ" in replayed.what, replayed


@pytest.mark.parametrize("edit, message", [
    # the verdict's evidence: a PROVED record with none, a REFUTED one without its counterexample
    (lambda d: d.update(verdict="PROVED", counterexample=None, proof=None),
     "$.proof: a PROVED record needs its derivation, a relaxation certificate or a closed claim"),
    (lambda d: d.update(counterexample=None), "$.counterexample: a REFUTED record needs its counterexample"),
    (lambda d: (d.update(certified=False), d["counterexample"].pop("float", None)),
     "$.counterexample: a REFUTED record that is not certified needs its float margin ('float')"),
    # numbers outside their range, arrays of the wrong length
    (lambda d: d["search"].update(tried=-1), "$.search.tried: -1 is below the minimum 0"),
    (lambda d: d["search"].update(tried=10**42), "$.search.tried: 100000000000...0000 (43 characters) is above"),
    (lambda d: d["search"].update(tried=-(10**45)), "$.search.tried: -10000000000...0000 (47 characters) is below"),
    (lambda d: d["search"].update(by_method={"random": {"by_L": [[2, 0.1]]}}),
     "$.search.by_method.random.by_L[0]: expected 3 to 3 items, got 2"),
])
def test_a_record_without_the_evidence_its_verdict_needs_or_out_of_range_is_refused_on_reading(
        made: dict[str, Any], edit: Callable[[dict[str, Any]], None], message: str) -> None:
    data = copy.deepcopy(made)
    edit(data)
    with pytest.raises(InvalidArgument) as info:
        rec.Record.from_json(rehash(data))
    assert message in str(info.value), str(info.value)


@pytest.mark.parametrize("separator", [",", ", ", ",\n  ", "\n,\n"])
def test_records_are_read_from_an_array_however_its_commas_are_spaced(made: dict[str, Any], tmp_path: Any,
                                                                      separator: str) -> None:
    """The streaming reader steps over exactly the comma between two records (a compact ``[{...},{...}]`` too)."""
    import json

    path = tmp_path / "records.json"
    path.write_text("[" + separator.join(json.dumps(made, separators=(",", ":")) for _ in range(3)) + "]")
    assert [r.id for r in rec.load_records(path)] == ["user.half"] * 3



@pytest.mark.parametrize("pair", [[0.5, 2.0], [3, 40], [-1.0, 1e300]])
def test_a_recorded_range_reads_back_with_both_ends_as_written(pair: list[float]) -> None:
    """A user statement's range read from its record (``statement.ranges.<name>``) keeps both ends (a range read
    back with its ends mixed up is another statement, whose replay would speak for the wrong one)."""
    from attnbounds.theory.io.rebuild import _pair

    assert _pair(pair, "statement.ranges.T") == (float(pair[0]), float(pair[1]))
