"""``attnbounds report RECORDS --out DIR``: a static page that works offline, one section per record with its verdict,
figures that exist, untrusted text escaped, old records without per-L data rendered without a plot, and bad input
refused with exit 2 before anything is written."""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from attnbounds.theory import records as rec
from attnbounds.theory.cli import main
from attnbounds.theory.report import relation_from_srepr

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
    from attnbounds.theory.verify import verify

    path = tmp_path_factory.mktemp("records") / "records.json"
    rec.save(path, verify(IDS, budget_s=0.1, seed=0, progress=False))
    return path


def _rehash(data: dict[str, Any]) -> dict[str, Any]:
    data["content_hash"] = rec.content_hash(data)
    assert rec.validate(data) == []
    return data


def _check_offline(page: Page, out: Path) -> None:
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    for tag, key, value in page.resources:
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
    assert "Certified counterexample" in text and "Tightest instance" in text and "Rests on" in text
    assert "lemma1.extreme-values" in text and "checked" in text  # the proof and its steps
    assert "L searched: dense" in text
    assert sorted(p.name for p in out.iterdir()) == sorted(["index.html", *images])  # no temporary files left
    # an existing folder is reused: the page is replaced
    assert main(["report", str(records_file), "--out", str(out)]) == 0
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
    from attnbounds.theory.verify import verify
    from tests._fakesearch import no_proof, random_search

    records_file = tmp_path / "good.json"  # a valid records file, made quickly with the stand-in search
    rec.save(records_file, verify(["multihead"], budget_s=0.1, progress=False, search=random_search, prover=no_proof))
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
    cases = [
        ([str(tmp_path / "missing.json"), "--out", str(tmp_path / "o1")], "does not exist"),
        ([str(not_json), "--out", str(tmp_path / "o2")], "not JSON"),
        ([str(not_records), "--out", str(tmp_path / "o3")], "not a valid attnbounds record"),
        ([str(empty), "--out", str(tmp_path / "o4")], "holds no records"),
        ([str(tmp_path), "--out", str(tmp_path / "o5")], "is a directory"),
        ([str(records_file), "--out", str(a_file)], "is not a folder"),
        ([str(records_file), "--out", str(a_file / "sub")], "is a file, not a folder"),
        ([str(records_file), "--out", str(blocked)], "is a directory"),
    ]
    for argv, message in cases:
        assert main(["report", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.json", "blocked", "c.json", "file", "good.json"]
    assert [p.name for p in blocked.iterdir()] == ["index.html"]
    with pytest.raises(SystemExit) as exc:  # --out is required
        main(["report", str(records_file)])
    assert exc.value.code == 2


def test_without_matplotlib_the_page_says_why_there_is_no_plot(records_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from attnbounds.theory.report import plot_png

    record = json.loads(records_file.read_text())[0]
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    assert plot_png(record) == (None, "No plot: matplotlib is not installed (pip install matplotlib).")
