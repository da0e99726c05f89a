"""Jupyter: a record and ``verify``'s result show themselves as the report's HTML (and as Markdown), and the example
notebook ``examples/check_your_variant.ipynb`` runs.

The notebook's code cells run here as a kernel would run them, in order and in one namespace, the value of a cell's
last expression being what it displays; no Jupyter server or kernel is started (nothing to install, no network)."""

from __future__ import annotations

import ast
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from attnbounds.theory.io.records import Records
from tests._records import LENGTH, class_record, quick_records

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "check_your_variant.ipynb"


class Sections(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict[str, str]] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        if tag == "section":
            self.sections.append({k: v or "" for k, v in attrs})
        for key, _ in attrs:
            assert not key.startswith("on"), key


def _parse(text: str) -> Sections:
    page = Sections()
    page.feed(text)
    page.close()
    return page


def run_notebook(path: Path) -> list[Any]:
    """Run the code cells of the notebook at ``path`` in order; returns what each cell displays (None if nothing)."""
    shown: list[Any] = []
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("".join(cell["source"]), filename=f"{path.name} cell")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, path.name, "exec"), namespace)
        shown.append(None if last is None else eval(compile(ast.Expression(last.value), path.name, "eval"), namespace))
    return shown


def test_a_record_shows_itself_as_its_report_section_and_as_markdown() -> None:
    record = class_record()
    page = _parse(record._repr_html_())
    assert [(s["data-id"], s["data-verdict"]) for s in page.sections] == [("user.half", "REFUTED")]
    assert {"math", "details", "style"} <= page.tags  # MathML, arrays a click away, the report's own CSS
    assert f"{LENGTH} tokens" in record._repr_html_()
    markdown = record._repr_markdown_()
    assert markdown.startswith("**`user.half`**: **REFUTED**") and "alpha_i <= 1/2" in markdown


def test_verify_returns_a_list_shown_as_the_report() -> None:
    records = quick_records(["theorem1.fixed[R1,g2]", "theorem1.fixed[R1,g2,corrected]"])
    assert isinstance(records, Records) and isinstance(records, list) and len(records) == 2
    html = records._repr_html_()
    assert 'id="erratum"' in html and [s["data-id"] for s in _parse(html).sections] == [r.id for r in records]
    assert records._repr_markdown_().splitlines()[0] == "| id | verdict | formula | reading |"


def test_the_example_notebook_runs_and_shows_the_report(monkeypatch: pytest.MonkeyPatch, restore_family: Any) -> None:
    monkeypatch.setenv("ATTNBOUNDS_BUDGET", "1")
    shown = run_notebook(NOTEBOOK)
    records = [v for v in shown if hasattr(v, "_repr_html_")]
    assert [r.verdict for r in records] == ["PROVED", "REFUTED"]  # softmax's floor holds for every L, SSMax's does not
    assert records[0].data["relaxation"]["status"] == "proved"
    for r in records:
        page = _parse(r._repr_html_())
        assert [s["data-verdict"] for s in page.sections] == [r.verdict] and "img" in page.tags  # the plot inline
    verdict, certified, L = shown[records and shown.index(records[-1]) + 1]
    assert (verdict, certified) == ("REFUTED", True) and L > 12  # SSMax drops below the floor once s log L > 1
