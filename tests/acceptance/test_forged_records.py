"""Forged records: what a user holding only a records file, the JSON tools and the installed library can do to make
``attnbounds prove --replay`` accept a false PROVED, and that each is refused with a non-zero exit and a message
(issue 31). The untampered records replay with exit 0.

Every forged record has its content hash recomputed (:func:`tests._records.rehash`): the hash is a checksum anyone can
recompute, so what is tested is the replay behind it.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import time
import zlib
from pathlib import Path
from typing import Any

import pytest

from attnbounds.theory.io import records as rec
from tests._cli import run_cli
from tests._records import rehash

BSIG = {"name": "bsig", "log_F": "log(2 + sigmoid(l/T))"}


def _user(relation: str, **kw: Any) -> dict[str, Any]:
    from attnbounds.theory.running import api

    return api.check(relation, budget=0.3, seed=0, **kw).to_json()


@pytest.fixture(scope="module")
def made() -> dict[str, dict[str, Any]]:
    """Real records: user bounds (true and PROVED by the relaxation, false), a closed claim, paper readings."""
    from attnbounds.theory.running.verify import verify
    from tests._fakesearch import random_search

    out = {
        "true": _user("alpha_i <= 3/(2*L)", normaliser=BSIG, id="user.bsig.true"),
        "false": _user("alpha_i <= 5/(4*L)", normaliser=BSIG, id="user.bsig.false"),
        "two": _user("(exp(-2*a/T)/L <= alpha_i) & (alpha_i <= exp(2*a/T)/L)", hypotheses=["softmax", "logits-bounded"],
                     defaults={"a": "logit_absmax"}, id="user.two"),
        "closed": _user("1 - (1 - 0.8)**2 >= 0.99", id="user.closed"),
    }
    paper = verify(["lemma1", "theorem1.fixed[R1,g2]"], budget_s=0.1, seed=0, progress=False, search=random_search)
    out["lemma1"], out["refuted"] = (r.to_json() for r in paper)
    return out


def test_the_fixture_is_what_the_tests_assume(made: dict[str, dict[str, Any]]) -> None:
    verdicts = {k: v["verdict"] for k, v in made.items()}
    assert verdicts == {"true": "PROVED", "false": "REFUTED", "two": "PROVED", "closed": "REFUTED", "lemma1": "PROVED",
                        "refuted": "REFUTED"}, verdicts
    assert made["true"]["relaxation"]["status"] == "proved" and len(made["two"]["relaxation"]["problems"]) >= 2
    assert made["true"]["statement"]["normaliser"]["family"] == "ratio"  # the definition travels with the record


def _replay(tmp_path: Path, *records: dict[str, Any], command: str = "prove") -> tuple[int, str]:
    path = tmp_path / "records.json"
    path.write_text(json.dumps(list(records)))
    argv = ["prove", "--replay", str(path)] if command == "prove" else ["search", records[0]["id"], "--replay", str(path)]
    code, out, err = run_cli(argv)
    assert "Traceback" not in err, err[-3000:]
    return code, out + err


def test_untampered_records_replay(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    code, text = _replay(tmp_path, *made.values())
    assert code == 0, text
    assert "3 PROVED record(s) re-checked, 0 failed" in text
    for key in ("false", "refuted"):
        code, text = _replay(tmp_path, made[key], command="search")
        assert code == 0, text


def _forged(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data.update(copy.deepcopy(changes))
    return rehash(data)


def test_a_false_stronger_bound_carrying_a_true_bounds_certificate_is_refused(made: dict[str, dict[str, Any]],
                                                                                tmp_path: Path) -> None:
    """The statement edited to a false, stronger bound (every text of it consistent: taken from a real record of
    that bound) with the true bound's certificate: the certificate is not the relaxation of the stated bound."""
    false = made["false"]
    forged = _forged(made["true"], id=false["id"], statement=false["statement"], hypotheses=false["hypotheses"])
    code, text = _replay(tmp_path, forged)
    assert code == 1 and "FAILED" in text and "is not a problem of the statement's relaxation" in text, text


def test_a_statement_that_does_not_print_as_recorded_is_refused(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """Only the srepr edited (the formula still the true one): the record does not state what it prints."""
    statement = dict(made["true"]["statement"], srepr=made["false"]["statement"]["srepr"])
    code, text = _replay(tmp_path, _forged(made["true"], statement=statement))
    assert code == 2 and "does not print the statement it claims" in text, text


def test_a_true_certificate_pasted_into_a_refuted_record_is_refused(made: dict[str, dict[str, Any]],
                                                                    tmp_path: Path) -> None:
    forged = _forged(made["false"], verdict="PROVED", counterexample=None, relaxation=made["true"]["relaxation"])
    code, text = _replay(tmp_path, forged)
    assert code == 1 and "FAILED" in text, text


def _coordinates(made: dict[str, dict[str, Any]]) -> list[tuple[str, int, int, str]]:
    return [(key, k, d, end) for key in ("true", "two") for k, p in enumerate(made[key]["relaxation"]["problems"])
            for d, _ in enumerate(p["coordinates"]) for end in ("lo", "hi")]


def test_a_certificate_with_any_coordinate_range_narrowed_is_refused(made: dict[str, dict[str, Any]],
                                                                     tmp_path: Path) -> None:
    """Every coordinate of every problem, each end moved inward (an infinite end made finite): the replay compares
    each recorded root box with the rebuilt relaxation's (a prover whose t-range missed L_min would be caught)."""
    cases = _coordinates(made)
    assert len(cases) >= 8
    for key, k, d, end in cases:
        data = copy.deepcopy(made[key])
        c = data["relaxation"]["problems"][k]["coordinates"][d]
        lo, hi = (float(c["lo"]), float(c["hi"]))
        if end == "lo":
            c["lo"] = lo + (1e-3 if hi == float("inf") else (hi - lo) * 1e-3) if lo != float("-inf") else -1e6
        else:
            c["hi"] = hi - (1e-3 if lo == float("-inf") else (hi - lo) * 1e-3) if hi != float("inf") else 1e6
        code, text = _replay(tmp_path, rehash(data))
        assert code == 1 and f"coordinate {c['name']}" in text, (key, k, c, text)


def test_a_certificate_missing_one_problem_is_refused(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    for k in range(len(made["two"]["relaxation"]["problems"])):
        data = copy.deepcopy(made["two"])
        del data["relaxation"]["problems"][k]
        code, text = _replay(tmp_path, rehash(data))
        assert code == 1 and "is not covered" in text, text


def test_a_tree_edited_to_skip_a_box_is_refused(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    data = copy.deepcopy(made["true"])
    problem = data["relaxation"]["problems"][0]
    tokens = json.loads(zlib.decompress(base64.b64decode(problem["tree"])))
    tokens[-1] = "O"  # the last box left open
    problem["tree"] = base64.b64encode(zlib.compress(json.dumps(tokens).encode())).decode()
    code, text = _replay(tmp_path, rehash(data))
    assert code == 1 and "open box" in text, text


@pytest.mark.parametrize("forge", ["out of range", "repeated", "bad side"])
def test_a_tree_with_a_projection_along_coordinates_the_problem_lacks_is_refused(made: dict[str, dict[str, Any]],
                                                                                tmp_path: Path, forge: str) -> None:
    """A real proof's projection entry edited to name a coordinate past the problem's, the same coordinate twice, or
    a side that is none of ``+ - <`` (the tree's and the certificate's hashes recomputed): the replay refuses it."""
    data = copy.deepcopy(made["true"])
    problem = data["relaxation"]["problems"][0]
    tokens = json.loads(zlib.decompress(base64.b64decode(problem["tree"])))
    k = next(i for i, t in enumerate(tokens) if t.startswith("P"))
    claims = tokens[k][1:].split(",")
    d, side = claims[0][:-1], claims[0][-1]
    n = len(problem["coordinates"])
    tokens[k] = "P" + ",".join({"out of range": [f"{n}{side}", *claims[1:]],
                                "repeated": [claims[0], f"{d}{'+' if side == '-' else '-'}", *claims[1:]],
                                "bad side": [f"{d}?", *claims[1:]]}[forge])
    problem["tree"] = _tree(tokens)
    data["relaxation"]["boxes_sha256"] = hashlib.sha256("".join(
        hashlib.sha256(p["tree"].encode()).hexdigest() for p in data["relaxation"]["problems"]).encode()).hexdigest()
    code, text = _replay(tmp_path, rehash(data))
    assert code == 1 and "along coordinates the problem does not have" in text, text


def test_a_derivation_pasted_into_a_refuted_reading_is_refused(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    forged = _forged(made["refuted"], verdict="PROVED", counterexample=None, proof=made["lemma1"]["proof"])
    code, text = _replay(tmp_path, forged)
    assert code == 1 and "derivation" in text, text


def test_a_record_naming_another_derivation_is_refused(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """lemma1's PROVED record with its proof renamed (the derivation of another reading, or none): the replay re-derives
    lemma1's own derivation and refuses a record that names a different one."""
    for name in ("corollary1[delta=max-key]", "a derivation that does not exist"):
        forged = _forged(made["lemma1"], proof=dict(made["lemma1"]["proof"], name=name))
        code, text = _replay(tmp_path, forged)
        assert code == 1 and "the record names" in text, text


def test_a_users_record_cannot_claim_a_derivation(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    forged = _forged(made["false"], verdict="PROVED", counterexample=None, proof=made["lemma1"]["proof"])
    code, text = _replay(tmp_path, forged)
    assert code == 1 and "a user's statement has no derivation" in text, text


def test_a_proved_record_with_nothing_to_recheck_fails(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    proof = dict(made["lemma1"]["proof"], ok=False, complete=False, result="FAILED")
    forged = _forged(made["refuted"], verdict="PROVED", counterexample=None, proof=proof)
    code, text = _replay(tmp_path, forged)
    assert code == 1 and "no evidence to re-check" in text, text


def test_a_proved_record_that_keeps_its_counterexample_fails(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    forged = _forged(made["false"], verdict="PROVED", relaxation=made["true"]["relaxation"])
    code, text = _replay(tmp_path, forged)
    assert code == 1 and "holds a counterexample" in text, text


def test_a_false_closed_claim_set_to_proved_is_refused(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    claim = copy.deepcopy(made["closed"]["closed_claim"])
    for c in claim["conjuncts"]:
        c["status"] = "holds"
    code, text = _replay(tmp_path, _forged(made["closed"], verdict="PROVED", closed_claim=claim))
    assert code == 1 and "closed claim: decided again exactly, it is REFUTED" in text, text


PAYLOADS = ["__import__('os').system('touch {marker}')",
            "Symbol('x').__class__.__mro__[-1].__subclasses__()",
            "Add(Symbol('x'), Integer(1)).func.__globals__['__builtins__']['exec']('open(\"{marker}\", \"w\")')",
            "Symbol('x; __import__(\"os\").system(\"touch {marker}\")')",
            "eval('open(\"{marker}\", \"w\")')"]


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("field", ["statement.srepr", "core", "margin", "constraint", "face", "sign"])
def test_reading_a_record_runs_no_code(made: dict[str, dict[str, Any]], tmp_path: Path, payload: str,
                                       field: str) -> None:
    """Expressions in a record are read by the whitelisted srepr reader: a payload stays text, and the record is
    refused (exit 1 or 2), for ``prove --replay`` and ``search --replay`` alike."""
    marker = tmp_path / "ran"
    text = payload.format(marker=marker)
    data = copy.deepcopy(made["true"])
    problem = data["relaxation"]["problems"][0]
    if field == "statement.srepr":
        data["statement"]["srepr"] = text
    elif field == "face":
        problem["faces"][next(iter(problem["faces"]))] = [text]
    elif field == "constraint":
        problem["constraints"] = [text]
    elif field == "sign":
        problem["signs"] = [[text, 1]]
    else:
        problem[field] = text
    code, out = _replay(tmp_path, rehash(data))
    assert code in (1, 2) and not marker.exists(), out
    if field == "statement.srepr":
        forged = _forged(made["false"], statement=dict(made["false"]["statement"], srepr=text))
        code, out = _replay(tmp_path, forged, command="search")
        assert code == 2 and not marker.exists(), out


def _tree(tokens: Any) -> str:
    return base64.b64encode(zlib.compress(json.dumps(tokens).encode())).decode()


MALFORMED = {
    "not base64": ("tree", "@@not base64@@"),
    "not zlib": ("tree", base64.b64encode(b"plain bytes").decode()),
    "not a JSON list": ("tree", base64.b64encode(zlib.compress(b'{"a": 1}')).decode()),
    "a split along a coordinate that does not exist": ("tree", _tree(["S99:0x1.0p-1", "Cnatural", "Cnatural"])),
    "a split at a negative coordinate": ("tree", _tree(["S-1:0x1.0p-1", "Cnatural", "Cnatural"])),
    "a projection along a coordinate that does not exist": ("tree", _tree(["P99-", "Cnatural"])),
    "a closing form that does not exist": ("tree", _tree(["Cnatural:-1"])),
    "an infeasibility by a constraint that does not exist": ("tree", _tree(["I7"])),
    "a garbled entry": ("tree", _tree(["Sx:y"])),
    "a missing tree": ("tree", None),
    "a number where the coordinates are": ("coordinates", 5),
    "a number where the faces are": ("faces", 3),
    "a face key that is not a list": ("faces", {"junk(": ["Integer(1)"]}),
    "a face at a coordinate that does not exist": ("faces", {"[(42, 0.0)]": ["Integer(1)"]}),
    "a negative box count": ("boxes", -1),
    "a box count that does not match the tree": ("boxes", 1000),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_certificate_is_refused_without_a_traceback(made: dict[str, dict[str, Any]], tmp_path: Path,
                                                                case: str) -> None:
    field, value = MALFORMED[case]
    data = copy.deepcopy(made["true"])
    problem = data["relaxation"]["problems"][0]
    if value is None:
        del problem[field]
    else:
        problem[field] = value
    code, text = _replay(tmp_path, rehash(data))
    assert code in (1, 2), text
    if code == 2:
        assert "user.bsig.true" in text or "relaxation.problems" in text or "problem 0" in text, text


def _containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every object and list inside ``value`` (``value`` itself excluded)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    out = []
    for key, inner in items:
        if isinstance(inner, (dict, list)):
            out += [path + (key,)] + _containers(inner, path + (key,))
    return out


def test_a_problem_with_an_object_where_a_list_is_or_a_list_where_an_object_is_is_refused_without_a_traceback(
        made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """Every object and list that the replay compares with the rebuilt relaxation (the coordinates, model, totals,
    signs, constraints of every problem), each replaced by a value of the other kind: the replay says the record is
    not the statement's relaxation (exit 1) or malformed (exit 2), never fails with an error of its own."""
    from attnbounds.theory.deciding.prover import PROBLEM_FIELDS

    data = made["two"]
    paths = [(k, f) + inner for k, p in enumerate(data["relaxation"]["problems"]) for f in PROBLEM_FIELDS
             if isinstance(p.get(f), (dict, list)) for inner in [()] + _containers(p[f])]
    assert len(paths) >= 12
    for path in paths:
        forged = copy.deepcopy(data)
        parent = forged["relaxation"]["problems"]
        for key in path[:-1]:
            parent = parent[key]
        old = parent[path[-1]]
        parent[path[-1]] = list(old.values()) if isinstance(old, dict) else {str(i): v for i, v in enumerate(old)}
        code, text = _replay(tmp_path, rehash(forged))
        assert code in (1, 2), (path, text)


def test_a_tree_that_inflates_without_limit_is_refused_before_it_takes_the_memory(made: dict[str, dict[str, Any]],
                                                                                  tmp_path: Path) -> None:
    data = copy.deepcopy(made["true"])
    bomb = zlib.compress(b"[" + b'"Cnatural",' * 20_000_000 + b'"E"]', 9)  # 220 MB inflated, 200 kB packed
    data["relaxation"]["problems"][0]["tree"] = base64.b64encode(bomb).decode()
    code, text = _replay(tmp_path, rehash(data))
    assert code == 2 and "inflates beyond" in text, text


def test_a_refused_record_names_itself_and_the_field(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    data = copy.deepcopy(made["true"])
    data["relaxation"]["problems"][0]["tree"] = 12
    code, text = _replay(tmp_path, rehash(data))
    assert code == 2 and "record 'user.bsig.true': relaxation.problems[0].tree must be a string" in text, text


def test_records_read_back_replay_through_the_library(made: dict[str, dict[str, Any]]) -> None:
    """The library's own entry point says the same as the CLI (a Record, not a file)."""
    from attnbounds.theory.running.replay import replay_proved

    record = rec.Record.from_json(made["true"])
    start = time.perf_counter()
    out = replay_proved(record)
    elapsed = time.perf_counter() - start
    assert out.ok and "relaxation certificate" in out.what
    assert 0 <= out.seconds <= elapsed, (out.seconds, elapsed)  # the replay's own time, within the call's
    forged = _forged(made["true"], id=made["false"]["id"], statement=made["false"]["statement"],
                     hypotheses=made["false"]["hypotheses"])
    assert not replay_proved(rec.Record.from_json(forged)).ok


def test_a_forged_record_is_not_cited(made: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    """``cite --records`` replays the record first: a forged PROVED is refused, an untampered one cited."""
    false = made["false"]
    forged = _forged(made["true"], id=false["id"], statement=false["statement"], hypotheses=false["hypotheses"])
    for record, want in ((forged, 1), (made["true"], 0), (made["refuted"], 0), (made["closed"], 0)):
        path = tmp_path / "records.json"
        path.write_text(json.dumps([record]))
        code, _, err = run_cli(["cite", record["id"], "--records", str(path)])
        assert code == want, err
        assert ("does not replay, so it is not cited" in err) == (want == 1)
