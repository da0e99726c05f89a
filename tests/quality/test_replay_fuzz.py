"""A fuzzer of the replays (issue 31): real records mutated one field at a time (types, shapes, sizes, values), their
content hashes recomputed, handed to ``prove --replay`` and ``search --replay``.

Invariants: never a traceback, exit 0, 1 or 2 only; and a mutation of a field the verdict rests on (the statement
and its hypotheses, a certificate's problems, trees and faces, a derivation's block, a closed claim, a recorded
certificate status) never replays with exit 0. Fields the verdict does not rest on (timing, the search's counts,
software versions, a certificate's descriptive texts) may be mutated freely: the replay must only not crash.
The campaign scales with the hypothesis profile (:func:`tests.acceptance.test_fuzz.examples`).
"""

from __future__ import annotations

import copy
import json
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as hs

from tests._cli import run_cli
from tests._records import rehash
from tests.acceptance.test_fuzz import FUZZ, examples
from tests.acceptance.test_fuzz_records import odd_values

#: the fields of a record a PROVED verdict rests on (a path prefix; ``*`` any index or key)
PROVED_BEARING = ("statement", "hypotheses", "proof", "closed_claim", "counterexample",
                  "relaxation.status", "relaxation.boxes_sha256", "relaxation.problems.*.tree",
                  "relaxation.problems.*.boxes",
                  *(f"relaxation.problems.*.{f}" for f in ("conjunct", "pattern", "coordinates", "model", "atoms",
                                                           "totals", "strict", "stripped", "signs", "margin", "core",
                                                           "constraints")))
#: not listed above: a problem's faces are hints, each checked equal to the core on its face by exact algebra (a
#: wrong form is refused: tests/acceptance/test_forged_records.py, tests/rigor/test_prover_reach.py) and rebuilt
#: from the statement where missing, so a record whose faces lost or changed an entry and still replays is a valid
#: proof (the thorough profile dropped a face the tree never reads)

#: a user's own words about a statement: free text the user may edit (a reading of the paper's are the registry's)
USERS_TEXTS = ("statement.title", "statement.notes", "statement.citation")
#: the terms of a user's statement that no other field is derived from: an edit states another statement, which a
#: replay then checks on its own terms (a PROVED one that replays must then hold: no counterexample is found)
USERS_TERMS = ("statement.defaults", "statement.kind", "statement.expectation_over", "statement.fixed",
               "statement.ranges")
#: the fields of a record a REFUTED verdict rests on, as ``search --replay`` reads it
REFUTED_BEARING = ("statement", "hypotheses", "counterexample.certificate.status")


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for k, v in enumerate(value[:4]):
            yield from _leaves(v, (*path, k))


def _bearing(path: tuple[Any, ...], prefixes: tuple[str, ...]) -> bool:
    parts = [str(p) if not isinstance(p, int) else "*" for p in path]
    for prefix in prefixes:
        want = prefix.split(".")
        if len(parts) >= len(want) and all(w == p or (w == "*" and p == "*") for w, p in zip(want, parts)):
            return True
    return False


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        data = data[p]
    return data


def _set(data: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(data, path[:-1])[path[-1]] = value


def _different(old: Any) -> hs.SearchStrategy[Any]:
    """A value other than ``old``: a near one of the same kind (a digit, a character, a flipped flag) or an odd one."""
    near: list[Any] = []
    if isinstance(old, bool):
        near = [not old]
    elif isinstance(old, (int, float)):
        near = [old + 1, old * 2 + 1, -old - 1, old / 2 + 0.25]
    elif isinstance(old, str):
        near = [old + "0", old[:-1], old.replace("1", "2", 1) if "1" in old else old + "1", old.upper() + "x"]
    elif isinstance(old, list):
        near = [old[:-1], old + old[:1], list(reversed(old)) + [None]]
    elif isinstance(old, dict):
        near = [{**old, "extra": 1}, dict(list(old.items())[:-1])]
    return hs.one_of(hs.sampled_from(near), odd_values()) if near else odd_values()


@pytest.fixture(scope="module")
def base() -> dict[str, dict[str, Any]]:
    from attnbounds.theory.running import api
    from attnbounds.theory.running.verify import verify
    from tests._fakesearch import random_search

    bsig = {"name": "bsig", "log_F": "log(2 + sigmoid(l/T))"}
    out = {"relaxation": api.check("alpha_i <= 3/(2*L)", normaliser=bsig, budget=0.3, seed=0, id="user.true").to_json(),
           "closed": api.check("1 - (1 - 0.8)**2 >= 0.95", budget=0.3, id="user.closed").to_json(),
           "refuted": api.check("alpha_i <= 5/(4*L)", normaliser=bsig, budget=0.3, seed=0, id="user.false").to_json()}
    out["derivation"] = verify(["lemma2[sharp]"], budget_s=0.1, seed=0, progress=False, search=random_search)[0].to_json()
    assert [r["verdict"] for r in out.values()] == ["PROVED", "PROVED", "REFUTED", "PROVED"]
    return out


def _run(argv: list[str]) -> tuple[int, str]:
    code, out, err = run_cli(argv)
    return code, out + err


@hs.composite
def mutations(draw: Any, base: dict[str, dict[str, Any]]) -> tuple[str, tuple[Any, ...], dict[str, Any]]:
    which = draw(hs.sampled_from(sorted(base)))
    data = copy.deepcopy(base[which])
    paths = [p for p in _leaves(data) if p and p[0] not in ("content_hash", "format", "version")]
    path = draw(hs.sampled_from(paths))
    old = _get(data, path)
    new = draw(_different(old).filter(lambda v: json.dumps(v, sort_keys=True) != json.dumps(old, sort_keys=True)))
    _set(data, path, new)
    return which, path, rehash(data)


def test_replay_fuzz(base: dict[str, dict[str, Any]]) -> None:
    @settings(max_examples=examples(1.0), **FUZZ)
    @given(case=mutations(base))
    def check(case: tuple[str, tuple[Any, ...], dict[str, Any]]) -> None:
        which, path, data = case
        with tempfile.TemporaryDirectory() as folder:
            records = Path(folder) / "records.json"
            records.write_text(json.dumps([data]))
            prove = _run(["prove", "--replay", str(records)])
            search = _run(["search", str(data.get("id")), "--replay", str(records)])
        for name, (code, text) in (("prove", prove), ("search", search)):
            assert "Traceback" not in text and code in (0, 1, 2), (name, path, code, text[-3000:])
        user = which != "derivation"
        bearing = _bearing(path, REFUTED_BEARING if which == "refuted" else PROVED_BEARING) \
            and not (user and _bearing(path, USERS_TEXTS + USERS_TERMS))
        if user and _bearing(path, USERS_TERMS) and which != "refuted" and prove[0] == 0:
            _no_counterexample_to(data)  # the record states another statement now: it must be true too
        if bearing and which == "refuted":
            assert search[0] != 0, (path, search[1][-2000:])
        elif bearing:  # a PROVED record: prove --replay refuses it, or it is no longer PROVED and search refuses it
            assert prove[0] != 0 or (search[0] != 0 and "PROVED record(s) re-checked" in prove[1]
                                     and "0 PROVED record(s)" in prove[1]), (path, prove[1][-2000:], search[1][-2000:])
        event(f"{which}: {'bearing' if bearing else 'free'} field, prove exit {prove[0]}, search exit {search[0]}")

    check()


def _no_counterexample_to(data: dict[str, Any]) -> None:
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.io import records as rec
    from attnbounds.theory.io.rebuild import statement_of
    from tests._fakesearch import random_search

    statement = statement_of(rec.Record.from_json(data))
    found = random_search(statement, budget_s=0.2, seed=0)
    assert not [v for v in found.violations[:4] if certify(statement, v).status == "violated"], statement


def test_the_classification_sees_the_fields_it_names(base: dict[str, dict[str, Any]]) -> None:
    """The bearing prefixes match real paths of the records (a renamed field would silently leave the check)."""
    paths = {tuple("*" if isinstance(p, int) else p for p in path) for r in base.values() for path in _leaves(r)}
    for prefix in PROVED_BEARING + REFUTED_BEARING:
        assert any(_bearing(p, (prefix,)) for p in paths if p), prefix
