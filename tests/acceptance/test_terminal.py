"""What the command line prints for people: plain-text help with examples and exit codes, ``--version``, formulas
as the paper writes them, control characters escaped everywhere, the verdict table and erratum in Markdown, and
``search ID --replay RECORDS``."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

import attnbounds
from attnbounds.theory.mathematics import notation, registry
from attnbounds.theory.io import records as rec
from attnbounds.theory.running.cli import main
from attnbounds.theory.io.terminal import printable
from tests._records import class_record, edited, quick_records

ROOT = Path(__file__).resolve().parents[2]
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    return capsys.readouterr().out


def test_help_is_plain_text_with_examples_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(["--help"], capsys)
    assert "``" not in text and "examples:" in text and "exit codes:" in text
    for code in ("0 ", "1 ", "2 ", "130 "):
        assert re.search(rf"^\s+{code}", text, re.M), code
    for command in ("verify", "search", "cite", "tighten", "profile", "table", "report", "list"):
        sub = _help([command, "--help"], capsys)
        assert "``" not in sub and "`" not in sub and "exit codes:" in sub, command
    budget = _help(["verify", "--help"], capsys)
    assert "calibrated seconds" in " ".join(budget.split()) and "seconds per reading" not in budget


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert _help(["--version"], capsys).strip() == f"attnbounds {attnbounds.__version__}"
    from importlib.metadata import version

    assert version("attnbounds") == attnbounds.__version__
    assert f"version: {attnbounds.__version__}" in (ROOT / "CITATION.cff").read_text()


def test_formulas_are_printed_as_the_paper_writes_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "lemma1", "multihead", "corollary2.i[R1]", "--short"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split(None, 1)[1] == "C_1/L <= alpha_i <= C_2/L"
    assert lines[1].split(None, 1)[1] == "coverage = 1 - (1 - p)^H"
    assert lines[2].split(None, 1)[1] == "|A - E_dtilde| <= A*N*kappa/L"
    assert main(["list", "lemma1"]) == 0
    assert "formula:  C_1/L <= alpha_i <= C_2/L" in capsys.readouterr().out


def test_every_reading_reads_back_from_its_record_as_written() -> None:
    """The table and the report rebuild the relation from the record's srepr: the same text as the statement's."""
    import sympy as sp

    for st in registry.all_statements():
        rebuilt = notation.relation_from_srepr(sp.srepr(st.relation))
        assert sp.srepr(rebuilt) == sp.srepr(st.relation), st.id
        assert notation.text(rebuilt) == notation.text(st.relation), st.id
        assert " & " not in notation.text(st.relation), st.id  # every conjunction of the paper reads as a chain


@pytest.mark.parametrize("text, lines, expected", [
    ("a\x1b[31mb", True, "a\\x1b[31mb"), ("x\ny\tz", True, "x\ny\tz"), ("x\ny", False, "x\\x0ay"),
    ("\u202eevil", True, "\\u202eevil"), ("bell\x07 del\x7f c1\x9b", True, "bell\\x07 del\\x7f c1\\x9b"),
    ("plain ü ≤ α", True, "plain ü ≤ α"),
])
def test_printable_escapes_control_characters(text: str, lines: bool, expected: str) -> None:
    assert printable(text, lines=lines) == expected


@pytest.fixture
def hostile(tmp_path: Path) -> Path:
    """A records file whose id, title and reason carry terminal escapes (a crafted file: the hash recomputed)."""
    data = copy.deepcopy(class_record().to_json())
    data["id"] = data["statement"]["id"] = "user.\x1b]0;owned\x07\x1b[2J"
    data["statement"]["title"] = "title \x1b[31mred\u202e"
    data["reason"] = "reason \r\x1b[1A"
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps([edited(data)]))
    return path


def test_table_and_cite_escape_control_characters(hostile: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hostile_id = json.loads(hostile.read_text())[0]["id"]
    for argv in (["table", str(hostile)], ["table", str(hostile), "--erratum"], ["cite", hostile_id, "--records", str(hostile)],
                 ["cite", "missing\x1b[2J", "--records", str(hostile)]):
        main(argv)
        out, err = capsys.readouterr()
        assert not RAW.search(out) and not RAW.search(err), (argv, out, err)
        assert "\\x1b" in out + err or "--erratum" in argv, argv  # the erratum leaves a user's statements out


def test_verify_escapes_control_characters(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           restore_family: Any) -> None:
    """A statements file with escapes in an id and a title: refused (exit 2) or verified (exit 0), never echoed raw."""
    path = tmp_path / "mine.toml"
    path.write_text('[[statement]]\nid = "user.e\\u001b[2Jvil"\ntitle = "t \\u001b[31m\\u202e"\n'
                    'relation = "alpha_i <= 1"\nhypotheses = ["simplex"]\n')
    code = main(["verify", "--statements", str(path), "--budget", "0.1", "--quiet"])
    out, err = capsys.readouterr()
    assert code in (0, 2) and not RAW.search(out) and not RAW.search(err), (code, out, err)
    assert "\\x1b" in out + err


def test_the_verdict_table_escapes_bars_and_rounds_trips(tmp_path: Path) -> None:
    records = quick_records(["lemma2[two-term]", "corollary1[delta=own-key]", "corollary2.i[R1]"])
    table = rec.verdict_table(records)
    assert "//" not in table and "\\|" in table
    assert "| `corollary2.i[R1]` |" in table and "`\\|A - E_dtilde\\| <= A*N*kappa/L`" in table
    for line in table.splitlines()[2:]:
        assert len(re.split(r"(?<!\\)\|", line)) == 6, line  # four cells: no bar of a norm splits one
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{rec.TABLE_START}\nold\n{rec.TABLE_END}\noutro\n")
    rec.update_readme(doc, table)
    assert rec.parse_verdict_table(doc.read_text()) == {r.id: rec.verdict_label(r) for r in records}


def test_the_readme_table_and_erratum_are_generated_and_have_no_double_slashes() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split(rec.TABLE_START, 1)[1].split(rec.TABLE_END, 1)[0]
    erratum = text.split(rec.ERRATUM_START, 1)[1].split(rec.ERRATUM_END, 1)[0]
    assert "//" not in table and "//" not in erratum.replace("https://", "")
    assert "\\|\\|q\\|\\|_2" in table  # the norms of Corollary 1's titles, escaped
    labels = rec.parse_verdict_table(text)
    for sid, label in labels.items():  # the erratum lists every reading of the paper with the table's verdict
        assert f"`{sid}` {label}" in erratum, sid


def test_table_erratum_groups_the_readings_by_result(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = ["theorem1.fixed[R1,g1]", "theorem1.fixed[R1,g2]", "theorem1.fixed[R1,g2,corrected]", "multihead"]
    path = tmp_path / "records.json"
    records = quick_records(ids)
    rec.save_records(path, records)
    assert main(["table", str(path), "--erratum"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| [")]
    assert len(rows) == 2 and "Theorem 1 (fixed top-N set)" in rows[0] and "Discussion (multi-head remark)" in rows[1]
    cells = [c.strip() for c in re.split(r"(?<!\\)\|", rows[0])[1:-1]]
    verdicts = {r.id: rec.verdict_label(r) for r in records}
    holds = [i for i in ids[:2] if verdicts[i] in ("VERIFIED", "PROVED")]
    fails = [i for i in ids[:2] if verdicts[i] == "REFUTED"]
    assert [f"`{i}` {verdicts[i]}" for i in holds] == (cells[1].split("<br>") if holds else [])
    assert [f"`{i}` {verdicts[i]}" for i in fails] == (cells[2].split("<br>") if fails else [])
    assert cells[3] == f"`theorem1.fixed[R1,g2,corrected]` {verdicts['theorem1.fixed[R1,g2,corrected]']}"
    assert "arxiv.org/abs/2508.17821" in rows[0] and "The paper" not in rows[0]


def test_search_replay_recertifies_the_recorded_counterexample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = quick_records(["theorem1.fixed[R1,g2]", "multihead"])
    path = tmp_path / "records.json"
    rec.save_records(path, records)
    assert records[0].verdict == "REFUTED"
    assert main(["search", "theorem1.fixed[R1,g2]", "--replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "replaying the record's counterexample" in out and "certificate violated" in out and "reproduced" in out
    assert main(["search", "multihead", "--replay", str(path)]) == 0  # no counterexample: the tightest instance
    assert "tightest instance" in capsys.readouterr().out
    # a record whose counterexample was edited to hold (token vectors of norm > 1: the printed g2 grouping then
    # exceeds g1, a proved bound): the replay says so (exit 1)
    data = copy.deepcopy(records[0].to_json())
    inst = data["counterexample"]["instance"]
    inst["x"] = {"values": [[[1e6 * (1 + abs(v)) for v in row] for row in inst["x"]["values"][0]]]}
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps([edited(data)]))
    assert main(["search", "theorem1.fixed[R1,g2]", "--replay", str(tampered)]) == 1
    assert "NOT reproduced" in capsys.readouterr().out
    # a record of another reading, or of another relation under the same id, is refused
    assert main(["search", "lemma1", "--replay", str(path)]) == 2
    assert "no record for 'lemma1'" in capsys.readouterr().err
    other = copy.deepcopy(records[0].to_json())
    other["statement"]["srepr"] = "LessThan(Symbol('x'), Integer(1))"
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps([edited(other)]))
    assert main(["search", "theorem1.fixed[R1,g2]", "--replay", str(changed)]) == 2
    assert "the record does not print the statement it claims" in capsys.readouterr().err
