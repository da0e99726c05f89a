"""Records: schema, canonical JSON, content hash, atomic files, citation text."""

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests._fakesearch import no_proof, scripted
from attnbounds.theory.io import records as rec
from attnbounds.theory.mathematics import normalisers as nm, registry
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.running.verify import verify_statement


@pytest.fixture(scope="module")
def refuted():
    inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))
    return verify_statement(registry.get("corollary3[spectral]"), search=scripted([inst], best=inst), prover=no_proof)


@pytest.fixture(scope="module")
def verified():
    # a reading the relaxation cannot prove either (the slopes of every F): VERIFIED
    return verify_statement(registry.get("lemma2[sharp]"), search=scripted([]), prover=no_proof)


def test_schema_accepts_the_longest_length_a_limit_certifies(refuted):
    """A limit along a family whose growing class already holds 10^14 tokens ends at 10^14 (2^80 - 1) tokens, about
    1.2e38 (the tight set's false.reach.llog had its record refused as not matching the schema at 10^30)."""
    from attnbounds.theory.deciding.limits import SWEEP_DEPTH
    from attnbounds.theory.mathematics.instance import MAX_LENGTH

    record = copy.deepcopy(refuted.to_json())
    longest = MAX_LENGTH * (2**SWEEP_DEPTH - 1)
    record["counterexample"]["limit"] = [{**entry, "L_max": longest} for entry in record["counterexample"]["limit"]]
    assert record["counterexample"]["limit"] and rec.validate(record) == []
    record["counterexample"]["limit"][0]["L_max"] = 10 * 10**40
    assert rec.validate(record)


def test_schema_accepts_records_and_names_problems(refuted, verified):
    for r in (refuted, verified):
        assert rec.validate(r.to_json()) == []
    bad = copy.deepcopy(refuted.to_json())
    bad["verdict"] = "TRUE"
    del bad["statement"]["srepr"]
    bad["extra"] = 1
    problems = rec.validate(bad)
    assert any("verdict" in p for p in problems) and any("srepr" in p for p in problems)
    assert any("unexpected key 'extra'" in p for p in problems)


def test_validator_keywords():
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                                                                  "b": {"type": "array", "items": {"enum": [1, 2]}},
                                                                  "c": {"type": "string", "pattern": "^x+$"}}}
    assert rec.validate({"a": None, "b": [1, 2], "c": "xx"}, schema) == []
    assert len(rec.validate({"a": 1.5, "b": [3], "c": "y"}, schema)) == 3
    assert rec.validate({}, schema) == ["$: missing required key 'a'"]
    assert rec.validate(True, {"type": "integer"})  # booleans are not integers


def test_record_content(refuted):
    d = refuted.to_json()
    assert d["id"] == "corollary3[spectral]" and d["verdict"] == "REFUTED"
    assert d["statement"]["srepr"].startswith("LessThan(") and d["statement"]["latex"]
    assert d["paper"]["arxiv"] == "arXiv:2508.17821" and d["paper"]["version"]
    hyps = registry.get("corollary3[spectral]").hypotheses
    assert d["hypotheses"] == [{"id": h.id, "description": h.description} for h in hyps]
    assert [h["id"] for h in d["hypotheses"]] == ["softmax", "domain(T)"]
    assert d["counterexample"]["instance"]["alpha"]["hex"] == [["0x1.0000000000000p-1", "0x1.0000000000000p-1"]]
    assert set(d["software"]) >= {"numpy", "sympy", "flint", "python"}
    assert d["git"]["commit"] is None or len(d["git"]["commit"]) == 40
    assert "wall_s" in d["timing"] and "seconds" not in d["counterexample"]["certificate"]
    # a certified counterexample: the record says nothing; one of a Python callable without log F says "certified":
    # false, and the record reads it so (a float64 violation only)
    assert "certified" not in d and refuted.certified is True
    assert rec.Record({**d, "certified": False}).certified is False


def test_the_format_version_is_the_released_one_and_no_other_is_read(refuted):
    """Records cited today carry ``"version": 1`` (the released format, as in README's records section); a reader
    refuses any other version by name instead of guessing at a format it does not know."""
    d = refuted.to_json()
    assert d["format"] == "attnbounds.record" and d["version"] == 1
    assert rec.validate(d) == []
    for other in (0, 2):
        problems = rec.validate({**d, "version": other})
        assert any("version" in p for p in problems), problems


def _git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_git_provenance_is_the_commit_and_the_dirty_flag_git_reports(tmp_path, monkeypatch):
    """In a work tree (a scratch repository, named by GIT_DIR): HEAD's commit, dirty when a tracked file changed (an
    untracked one does not count); where git fails (no repository) or is missing: neither is known."""
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    repo = tmp_path / "repo"
    assert _git("init", "-q", str(repo)).returncode == 0
    (repo / "tracked.txt").write_text("a\n")
    assert _git("add", "tracked.txt", cwd=repo).returncode == 0
    assert _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "m", cwd=repo).returncode == 0
    head = _git("rev-parse", "HEAD", cwd=repo).stdout.strip()
    assert re.fullmatch("[0-9a-f]{40}", head), head
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repo))
    (repo / "untracked.txt").write_text("b\n")
    assert rec.git_state.__wrapped__() == {"commit": head, "dirty": False}
    (repo / "tracked.txt").write_text("c\n")
    assert rec.git_state.__wrapped__() == {"commit": head, "dirty": True}
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "no-repository"))
    assert _git("rev-parse", "HEAD").returncode != 0
    assert rec.git_state.__wrapped__() == {"commit": None, "dirty": None}
    monkeypatch.setenv("PATH", str(tmp_path / "no-git"))
    assert rec.git_state.__wrapped__() == {"commit": None, "dirty": None}


def test_a_record_made_in_a_git_work_tree_carries_its_head_commit(refuted):
    """The package run from a git work tree (a clone; not an installed wheel, where the test is skipped): the
    record's ``git`` names that tree's HEAD."""
    root = Path(rec.__file__).resolve().parents[2]
    head = _git("rev-parse", "HEAD", cwd=root) if shutil.which("git") else None
    if head is None or head.returncode != 0:
        pytest.skip("the package does not run from a git work tree")
    git = refuted.to_json()["git"]
    assert git["commit"] == head.stdout.strip() and isinstance(git["dirty"], bool), git


def test_content_hash_ignores_timing_only(refuted):
    d = copy.deepcopy(refuted.to_json())
    d["timing"]["wall_s"] = 123.0
    assert rec.content_hash(d) == refuted.content_hash
    d["reason"] += "!"
    assert rec.content_hash(d) != refuted.content_hash
    with pytest.raises(AttnBoundsError, match="hash mismatch"):
        rec.Record.from_json({**d, "content_hash": refuted.content_hash})


def test_canonical_json_is_deterministic():
    value = {"b": np.float64(0.1), "a": [np.int64(3), float("inf"), float("nan"), np.array([1.5, -0.0])], "c": True}
    text = rec.dumps(value, indent=None)
    assert text == '{"a":[3,"inf","nan",[1.5,-0.0]],"b":0.1,"c":true}'
    with pytest.raises(AttnBoundsError, match="cannot write"):
        rec.dumps({"x": object()})


def test_files_are_written_atomically(tmp_path, refuted, verified):
    path = tmp_path / "out" / "records.json"
    rec.save_records(path, [refuted, verified])
    back = rec.load_records(path)
    assert [r.content_hash for r in back] == [refuted.content_hash, verified.content_hash]
    before = path.read_bytes()
    with pytest.raises(AttnBoundsError):
        rec.write_json(path, [{"bad": object()}])  # fails while serialising: the old file is untouched
    assert path.read_bytes() == before
    assert sorted(os.listdir(path.parent)) == ["records.json"]  # no temporary file left behind
    json.loads(before)


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000, 1 << 20])
def test_records_read_the_same_whatever_the_size_of_the_pieces(tmp_path, monkeypatch, refuted, verified, chunk):
    """A file is read in pieces (a record may span many of them, or share one with the next): the records are the
    same whatever the piece size."""
    path = tmp_path / "records.json"
    rec.save_records(path, [refuted, verified, refuted])
    read_chunks = rec.atomic.read_chunks
    monkeypatch.setattr(rec.atomic, "read_chunks", lambda *a, **k: read_chunks(*a, **{**k, "chunk": chunk}))
    back = rec.load_records(path)
    assert [r.content_hash for r in back] == [refuted.content_hash, verified.content_hash, refuted.content_hash]
    path.write_text(path.read_text()[:-3])  # cut short inside the last record
    with pytest.raises(AttnBoundsError, match="not JSON"):
        rec.load_records(path)


def test_every_leaf_of_an_instance_array_is_validated(refuted):
    """The arrays of an instance (nested lists of hex strings and numbers) are checked leaf by leaf."""
    good = refuted.to_json()
    assert rec.validate(good) == []
    for where, leaf in ((("alpha", "hex"), 5), (("alpha", "hex"), None), (("alpha", "values"), "one"),
                        (("alpha", "values"), True), (("logits", "hex"), ["0x1p-1", 3.0])):
        bad = copy.deepcopy(good)
        array = bad["counterexample"]["instance"]
        for key in where:
            array = array[key]
        array[0][-1] = leaf  # the last leaf of the first row
        problems = rec.validate(bad)
        assert any(".".join(where) in p for p in problems), (where, leaf, problems)


def test_loading_bad_files_names_the_problem(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("{not json")
    with pytest.raises(AttnBoundsError, match="not JSON"):
        rec.load_records(p)
    p.write_text("{}")
    with pytest.raises(AttnBoundsError, match="JSON array"):
        rec.load_records(p)
    with pytest.raises(AttnBoundsError, match="does not exist"):
        rec.load_records(tmp_path / "missing.json")


def test_citation_sentence_and_bibtex(refuted, verified):
    s = rec.citation_sentence(refuted)
    assert "is false" in s and "corollary3[spectral]" in s and refuted.content_hash in s and "128 bits" in s
    s = rec.citation_sentence(verified)
    assert "evidence, not a proof" in s and "seed 0" in s
    assert "@article{mudarisov2025limitations" in rec.BIBTEX and "2508.17821" in rec.BIBTEX


@pytest.fixture(scope="module")
def proved():
    return verify_statement(registry.get("corollary3[fd,corrected]"), search=scripted([]))


def test_a_proved_record_states_what_its_proof_rests_on(proved):
    d = proved.to_json()
    assert d["verdict"] == "PROVED" and rec.validate(d) == []
    p = d["proof"]
    assert {"checked", "size_limited", "cited", "cited_unchecked", "prose", "size_limited_steps", "premises",
            "rests_on"} <= set(p)
    hypotheses = {h["id"] for h in d["hypotheses"]}
    assert p["premises"] == [{"premise": "T > 0", "hypothesis": "domain(T)", "checked": True},
                             {"premise": "eps > 0", "hypothesis": "domain(eps)", "checked": True}]
    assert {q["hypothesis"] for q in p["premises"]} <= hypotheses and set(p["uses"]) <= hypotheses
    assert "eps > 0 (implied by domain(eps))" in p["rests_on"] and "prose" in p["rests_on"]
    sentence = rec.citation_sentence(proved)
    assert "rests on" in sentence and "eps > 0" in sentence
    # a second proof by the relaxation is cited exactly when the record holds one
    for status in ("proved", "declined", "open"):
        second = copy.deepcopy(proved)
        second.data["relaxation"] = {**(d.get("relaxation") or {}), "status": status, "rests_on": "the planted prover"}
        cited = "also proved for every L by the planted prover" in rec.citation_sentence(second)
        assert cited == (status == "proved"), (status, rec.citation_sentence(second))
    bad = copy.deepcopy(d)
    del bad["proof"]["premises"]
    assert rec.validate(bad)  # a proof without its premises is not a valid record


def test_nesting_deeper_than_the_limit_is_refused_and_the_limit_itself_accepted() -> None:
    from attnbounds.theory.io.records import MAX_DEPTH, too_deep, validate

    def nested(depth: int) -> object:
        value: object = 0
        for k in range(depth):
            value = [value] if k % 2 else {"k": value}
        return value

    assert not too_deep(nested(MAX_DEPTH)) and too_deep(nested(MAX_DEPTH + 1))
    assert not too_deep({"a": [1, 2, {"b": 3}]}) and not too_deep(5)
    assert validate(nested(MAX_DEPTH + 5)) == [f"$: arrays and objects nested more than {MAX_DEPTH} levels deep"]


def test_a_verdict_table_reads_back_whatever_columns_follow_the_verdict() -> None:
    """:func:`parse_verdict_table` reads ``id -> verdict`` from the first two cells of each row whose first cell is a
    code span: a table of only those two columns as well as one with more (header and rule rows are skipped)."""
    for extra in ("", " 12 s |", " 12 s | a note with \\| a bar |"):
        rows = [f"| reading | verdict |{' time |' if extra else ''}", "|---|---|", f"| `lemma1` | PROVED |{extra}",
                f"| `corollary3[row]` | REFUTED |{extra}"]
        text = f"intro\n{rec.TABLE_START}\n" + "\n".join(rows) + f"\n{rec.TABLE_END}\n"
        assert rec.parse_verdict_table(text) == {"lemma1": "PROVED", "corollary3[row]": "REFUTED"}, extra


def test_a_malformed_array_is_reported_in_a_few_lines_not_one_per_leaf():
    """An instance array of 100 000 wrong leaves gives a handful of problems (the validator stops after six), never a
    line per leaf: reading a large malformed file stays fast and its message readable."""
    from attnbounds.theory.io import records as rec_module

    problems = rec_module.validate(["x"] * 100_000, {"leaves": {"type": "number"}})
    assert 1 <= len(problems) <= 6, len(problems)
    assert problems[0] == "$[99999]: expected number, got str"
