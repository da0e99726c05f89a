"""``attnbounds report RECORDS --out DIR``: a static page that works offline (its only outside link is the paper),
the erratum first, one section per record with its verdict, the L of token-class counterexamples as their number of
tokens, figures that exist, untrusted text escaped, old records rendered, bad input refused with exit 2 before
anything is written, and Ctrl-C leaving ``--out`` as it was."""

from __future__ import annotations

import copy
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from attnbounds.theory.io import paper
from attnbounds.theory.io import records as rec
from attnbounds.theory.running.cli import main
from attnbounds.theory.mathematics.notation import relation_from_srepr
from tests._records import COUNTS, LENGTH, class_record, edited, quick_records
from tests._signals import interruptible

IDS = ["lemma1", "theorem1.fixed[R1,g2]"]


class Page(HTMLParser):
    """What the checks need from the page: sections, resources, links, text."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: dict[str, dict[str, str]] = {}
        self.resources: list[tuple[str, str, str]] = []  # (tag, attribute, value)
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = {k: v or "" for k, v in attrs}
        if tag == "section":
            self.sections[a["id"]] = a
        for key in ("src", "href", "srcset", "data", "action", "poster"):
            if key in a:
                self.resources.append((tag, key, a[key]))
        for key, value in a.items():
            assert not key.startswith("on"), f"event handler attribute {key}={value!r} on <{tag}>"

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    page.close()
    return page


@pytest.fixture(scope="module")
def records_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from attnbounds.theory.running.verify import verify

    path = tmp_path_factory.mktemp("records") / "records.json"
    rec.save_records(path, verify(IDS, budget_s=0.1, seed=0, progress=False))
    return path


def _rehash(data: dict[str, Any]) -> dict[str, Any]:
    data["content_hash"] = rec.content_hash(data)
    assert rec.validate(data) == []
    return data


def _check_offline(page: Page, out: Path) -> None:
    """No scripts, no remote resources; links go to a section, the top, the erratum, or the paper."""
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    for tag, key, value in page.resources:
        if tag == "a" and value == paper.ARXIV_URL:
            continue
        assert not value.lower().startswith(("http://", "https://", "//", "javascript:", "data:")), (tag, key, value)
        if tag == "a":
            assert value.startswith("#") and value[1:] in page.sections or value == "#top", value
        else:
            assert (out / value).is_file(), f"<{tag} {key}={value!r}> does not exist"


def test_report_has_every_record_with_its_verdict_and_works_offline(records_file: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "site"
    assert main(["report", str(records_file), "--out", str(out)]) == 0
    assert "index.html" in capsys.readouterr().out
    page = _parse(out / "index.html")
    expected = {d["id"]: d["verdict"] for d in json.loads(records_file.read_text())}
    assert {s["data-id"]: s["data-verdict"] for s in page.sections.values()} == expected
    assert expected["lemma1"] == "PROVED" and expected["theorem1.fixed[R1,g2]"] == "REFUTED"
    text = " ".join(page.text)
    for sid, verdict in expected.items():
        assert sid in text and verdict in text
    _check_offline(page, out)
    images = [value for tag, key, value in page.resources if tag == "img"]
    assert len(images) == len(expected)  # both records carry per-L search data: one plot each
    for name in images:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "math" in page.tags and "mfrac" in page.tags  # the relations as MathML
    assert "Counterexample" in text and "Tightest instance" in text and "Rests on" in text
    assert "lemma1.extreme-values" in text and "checked" in text  # the proof and its steps
    assert "L searched: dense" in text
    assert sorted(p.name for p in out.iterdir()) == sorted(["index.html", *images])  # no temporary files left
    assert sorted(p.name for p in tmp_path.iterdir()) == ["site"]
    html_text = (out / "index.html").read_text()
    # the erratum comes first, then the records; the paper's statement and the replay command per record
    assert html_text.index('id="erratum"') < html_text.index('id="records"') < html_text.index('id="r1"')
    assert "Theorem 1 (fixed top-N set)" in text and "The paper prints" in text
    assert "attnbounds search 'theorem1.fixed[R1,g2]' --replay records.json" in text
    assert "The record as JSON" in text
    # an existing report folder is replaced whole
    (out / "fig-009.png").write_bytes(b"stale")
    assert main(["report", str(records_file), "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(["index.html", *images])


def test_untrusted_text_is_escaped_and_old_records_render_without_a_plot(records_file: Path, tmp_path: Path) -> None:
    data = json.loads(records_file.read_text())
    hostile = copy.deepcopy(data[1])
    evil = '<script>alert(1)</script><img src="https://evil.example/x.png" onerror="alert(2)">'
    hostile["id"] = "user." + evil
    hostile["statement"].update(id=hostile["id"], title=evil, formula=evil, notes=evil, source="user",
                                srepr="LessThan(Symbol('<script>x</script>'), Symbol('y'))")
    hostile["reason"] = evil
    old = copy.deepcopy(data[0])  # as written before records kept per-L data and proof steps
    for info in old["search"]["by_method"].values():
        info.pop("by_L", None)
    old["proof"].pop("steps", None)
    code = copy.deepcopy(data[0])
    code["id"] = "user.code"
    code["statement"]["srepr"] = "__import__('os').system('touch pwned')"
    path = tmp_path / "records.json"
    path.write_text(json.dumps([_rehash(hostile), _rehash(old), _rehash(code)]))
    out = tmp_path / "site"
    assert main(["report", str(path), "--out", str(out)]) == 0
    page = _parse(out / "index.html")
    _check_offline(page, out)
    text = " ".join(page.text)
    assert evil in text  # shown as text, not markup
    # sympy's MathML printer writes symbol names unescaped: the element whitelist refuses that MathML, and the
    # formula is shown as text
    hostile_section = (out / "index.html").read_text().split('id="r2"')[0]
    assert "no MathML" in hostile_section and "&lt;script&gt;" in hostile_section
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()
    assert "no MathML" in text  # the srepr that is code was not rendered
    assert "No plot: this record has no per-L search data" in text
    assert "no step list" in text
    assert [s["data-id"] for s in page.sections.values()] == [hostile["id"], "lemma1", "user.code"]


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "Symbol('x').__class__", "Symbol('x', evaluate=lambda: 1)",
    "getattr(Symbol, 'x')", "Pow(Integer(10), Integer(10**9))", "Integer(1) + Integer(2)", "S.Half",
])
def test_srepr_reader_refuses_anything_but_sympy_constructors(text: str) -> None:
    with pytest.raises(ValueError):
        relation_from_srepr(text)


def test_srepr_reader_does_not_evaluate() -> None:
    expr = relation_from_srepr("LessThan(Symbol('x'), Pow(Integer(10), Integer(1000000000)))")  # returns at once
    assert str(expr) == "x <= 10**1000000000"


def test_bad_input_exits_2_and_writes_nothing(tmp_path: Path, capsys) -> None:
    from attnbounds.theory.running.verify import verify
    from tests._fakesearch import no_proof, random_search

    records_file = tmp_path / "good.json"  # a valid records file, made quickly with the stand-in search
    rec.save_records(records_file, verify(["multihead"], budget_s=0.1, progress=False, search=random_search, prover=no_proof))
    not_json = tmp_path / "a.json"
    not_json.write_text("{not json")
    not_records = tmp_path / "b.json"
    not_records.write_text('[{"id": "x"}]')
    empty = tmp_path / "c.json"
    empty.write_text("[]")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    blocked = tmp_path / "blocked"
    (blocked / "index.html").mkdir(parents=True)
    home = tmp_path / "home"  # a folder of the user's own files: never replaced
    home.mkdir()
    (home / "thesis.tex").write_text("x")
    cases = [
        ([str(tmp_path / "missing.json"), "--out", str(tmp_path / "o1")], "does not exist"),
        ([str(not_json), "--out", str(tmp_path / "o2")], "not JSON"),
        ([str(not_records), "--out", str(tmp_path / "o3")], "not a valid attnbounds record"),
        ([str(empty), "--out", str(tmp_path / "o4")], "holds no records"),
        ([str(tmp_path), "--out", str(tmp_path / "o5")], "is a directory"),
        ([str(records_file), "--out", str(a_file)], "is not a folder"),
        ([str(records_file), "--out", str(a_file / "sub")], "is a file, not a folder"),
        ([str(records_file), "--out", str(blocked)], "is a directory"),
        ([str(records_file), "--out", str(home)], "'thesis.tex', which attnbounds report did not write"),
    ]
    for argv, message in cases:
        assert main(["report", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "blocked", "c.json", "file", "good.json",
                                                          "home"]
    assert [p.name for p in home.iterdir()] == ["thesis.tex"]
    assert [p.name for p in blocked.iterdir()] == ["index.html"]
    with pytest.raises(SystemExit) as exc:  # --out is required
        main(["report", str(records_file)])
    assert exc.value.code == 2


def test_without_matplotlib_the_page_says_why_there_is_no_plot(records_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from attnbounds.theory.io.report import plot_png

    record = json.loads(records_file.read_text())[0]
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert plot_png(record) == (None, "No plot: matplotlib is not installed (pip install matplotlib).")


def _cell(html_text: str, section: str, label: str) -> str:
    """The text of the table cell after ``<th>label</th>`` in the section with ``data-id=section``."""
    from html import unescape

    start = html_text.index(f'data-id="{section}"')
    body = html_text[start:html_text.index("</section>", start)]
    cell = body.split(f"<th>{label}</th><td>", 1)[1].split("</td>", 1)[0]
    return unescape(re.sub(r"<[^>]+>", "", cell))


def test_token_class_counterexamples_show_their_number_of_tokens(tmp_path: Path) -> None:
    record = class_record()
    instance = record.counterexample["instance"]
    assert instance["L"] == LENGTH and instance["classes"] == len(COUNTS[0])  # serialised with its true length
    old = copy.deepcopy(record.to_json())  # as written before 'classes' existed: the number of classes under L
    for inst in (old["counterexample"]["instance"], old["tightness"]["witness"]):
        inst["L"] = inst.pop("classes")
    old["id"] = old["statement"]["id"] = "user.half-old"
    path = tmp_path / "records.json"
    rec.save_records(path, [record, rec.Record.from_json(edited(old))])
    assert main(["report", str(path), "--out", str(tmp_path / "site"), "--quiet"]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    for sid in ("user.half", "user.half-old"):
        shown = _cell(page, sid, "L of the counterexample")
        assert shown == f"{LENGTH} tokens in 3 classes of identical tokens", shown
        assert _cell(page, sid, "tokens per class").startswith("[1, 55, 56]")


def test_numbers_are_readable_and_exact_a_hover_away(tmp_path: Path) -> None:
    record = class_record()
    data = copy.deepcopy(record.to_json())
    data["tightness"]["best_ratio"] = 1.5323036060398776e-05
    for info in data["search"]["by_method"].values():  # a method that found nothing
        info.update(best_ratio="-inf", best_margin="inf")
    path = tmp_path / "records.json"
    rec.save_records(path, [rec.Record.from_json(edited(data))])
    assert main(["report", str(path), "--out", str(tmp_path / "site"), "--quiet"]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    assert 'title="1.5323036060398776e-05">1.532e-05</span>' in page
    assert _cell(page, "user.half", "tightest lhs / rhs") == "1.532e-05"
    assert "none found" in page and ">nan<" not in page and ">inf<" not in page and ">-inf<" not in page


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("where", ["plot-1", "page", "swap", pytest.param("reading", marks=pytest.mark.slow),
                                   pytest.param("plot-3", marks=pytest.mark.slow)])  # the last two: 10-16 s each
def test_ctrl_c_while_writing_leaves_out_as_it_was(where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """An interrupt at any point of the build: exit 130, the old report whole, no temporary folder left (new:
    nothing at all)."""
    from attnbounds.theory.io import report

    path = tmp_path / "records.json"
    rec.save_records(path, quick_records(["multihead", "theorem1.fixed[R1,g2]", "corollary3[spectral]", "lemma1"]))
    out = tmp_path / "site"
    assert main(["report", str(path), "--out", str(out), "--quiet"]) == 0
    before = _tree(out)
    calls = {"n": 0}

    def interrupt(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    def nth_plot(k: int) -> Any:
        real = report.plot_png

        def plot(*args: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == k:
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        return plot

    target = {"reading": ("iter_records", interrupt), "plot-1": ("plot_png", nth_plot(1)),
              "plot-3": ("plot_png", nth_plot(3)), "page": ("page", interrupt), "swap": ("_swap_into_place", interrupt)}
    name, replacement = target[where]
    monkeypatch.setattr(rec if name == "iter_records" else report, name, replacement)
    for folder in (out, tmp_path / "new"):
        calls["n"] = 0
        assert main(["report", str(path), "--out", str(folder), "--quiet"]) == 130
        assert "interrupted" in capsys.readouterr().err
    assert _tree(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.json", "site"]


def test_a_real_ctrl_c_leaves_out_whole(tmp_path: Path) -> None:
    """SIGINT sent to a real `attnbounds report` at several moments: it exits 130 (or 0 if it finished first; -SIGINT
    when Python re-raises the signal at exit, as for verify), and --out holds the old report or the new one, never a
    mixture, and no temporary folder is left."""
    import os
    import signal
    import subprocess
    import sys
    import time

    path = tmp_path / "records.json"
    rec.save_records(path, quick_records(["multihead", "theorem1.fixed[R1,g2]", "corollary3[spectral]", "lemma1"] * 3))
    assert main(["report", str(path), "--out", str(tmp_path / "expected"), "--quiet"]) == 0
    new = _tree(tmp_path / "expected")
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.html").write_text("old page")
    (out / "fig-001.png").write_bytes(b"old figure")
    old = _tree(out)
    command = [sys.executable, "-m", "attnbounds.theory.running.cli", "report", str(path), "--out", str(out), "--quiet"]
    for delay in (0.5, 1.5, 3.0):
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env={**os.environ, "PYTHONWARNINGS": "ignore"}, preexec_fn=interruptible)
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=120)
        assert child.returncode in (0, 130, -signal.SIGINT), err.decode()[-2000:]
        assert b"Traceback" not in err, err.decode()[-2000:]
        now = _tree(out)
        assert now in (old, new), sorted(now)  # the old report whole, or the new one whole
        assert sorted(p.name for p in tmp_path.iterdir()) == ["expected", "records.json", "site"]
        if now == new:
            (out / "index.html").write_text("old page")  # the old report again, for the next delay
            old = _tree(out)


ODD = [  # (what, edit of a valid record's JSON)
    ("a list where a boolean is", lambda d: d["search"]["by_method"].__setitem__("random", {"tried": [1]})),
    ("a number where a string is", lambda d: d["statement"].__setitem__("title", 3)),
    ("a string where a number is", lambda d: d["tightness"].__setitem__("best_ratio", "large")),
    ("an object where a list is", lambda d: d.__setitem__("hypotheses", {"id": "x"})),
    ("a list where an object is", lambda d: d["statement"].__setitem__("where", ["x"])),
    ("a step that is a number", lambda d: d.__setitem__("proof", {**(d["proof"] or {}), "steps": [1]})),
    ("a plot row of two numbers", lambda d: d["search"]["by_method"]["random"].__setitem__("by_L", [[2, 0.5]])),
    ("a plot row of strings", lambda d: d["search"]["by_method"]["random"].__setitem__("by_L", [["a", "b", "c"]])),
    ("a boolean where an integer is", lambda d: d["search"].__setitem__("tried", True)),
    ("an L beyond any length", lambda d: d["search"]["L_range"].__setitem__("all", [1, 10**42])),
    ("deep nesting", lambda d: d["statement"].__setitem__("defaults", {"a": _deep(200)})),
    ("a PROVED record without its derivation", lambda d: d.update(verdict="PROVED", proof=None)),
    ("a REFUTED record without its counterexample", lambda d: d.update(verdict="REFUTED", counterexample=None)),
]


def _deep(n: int) -> Any:
    value: Any = 0
    for _ in range(n):
        value = [value]
    return value


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return quick_records(["theorem1.fixed[R1,g2]"])[0].to_json()


@pytest.mark.parametrize("what, edit", ODD, ids=[w for w, _ in ODD])
def test_records_with_odd_values_exit_2_naming_the_problem(what: str, edit: Any, valid: dict[str, Any], tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    data = copy.deepcopy(valid)
    edit(data)
    path = tmp_path / "records.json"
    path.write_text(json.dumps([edited(data)]))
    for argv in (["report", str(path), "--out", str(tmp_path / "site"), "--quiet"], ["table", str(path)],
                 ["table", str(path), "--erratum"], ["cite", data["id"], "--records", str(path)]):
        assert main(argv) == 2, (what, argv)
        err = capsys.readouterr().err
        assert "not a valid attnbounds record" in err and "Traceback" not in err, (what, argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["records.json"]


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_in_a_records_file_exit_2(text: str, valid: dict[str, Any], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    data = edited(valid)
    raw = json.dumps([data]).replace('"best_margin": ', f'"best_margin": {text}, "was": ', 1)
    path = tmp_path / "records.json"
    path.write_text(raw)
    assert main(["table", str(path)]) == 2
    err = capsys.readouterr().err
    assert "records file" in err and "Traceback" not in err


def test_extreme_but_finite_plot_rows_render(valid: dict[str, Any], tmp_path: Path) -> None:
    data = copy.deepcopy(valid)
    data["search"]["by_method"]["random"]["by_L"] = [[2, 1e308, -1.0], [4, -1e308, 1.0], [8, 5e-324, 0.0],
                                                      [2**62, 1.0, 0.0]]
    path = tmp_path / "records.json"
    path.write_text(json.dumps([edited(data)]))
    assert main(["report", str(path), "--out", str(tmp_path / "site"), "--quiet"]) == 0
    assert (tmp_path / "site" / "fig-001.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
