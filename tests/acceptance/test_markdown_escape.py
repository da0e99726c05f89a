"""Texts a record carries are shown as text, never as markup (issue 31): the Markdown views (``record_markdown``,
a record's ``_repr_markdown_``, the verdict table, the erratum, the README they are written into) are rendered as
GitHub and Jupyter render them (CommonMark with tables and raw HTML, markdown-it-py) and the HTML audited: only the
elements our own format writes, no link or image from a record's text, the text itself shown literally. The HTML
views (``attnbounds report``, ``_repr_html_``) get the same texts and the same audit (Python's ``html.parser``). And
certificates of shapes the schema lets through but the views do not expect render what they can and say
"(malformed: ...)" for the rest instead of failing."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from attnbounds.theory.io import paper
from attnbounds.theory.io import records as rec
from attnbounds.theory.io.report import MATHML_TAGS, fragment, write_report
from tests._records import class_record, quick_records, rehash

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "[click](http://evil/) and [ref][1]",
    "![x](http://evil/x.png)",
    "**bold** and _em_ and ~~gone~~",
    "a | b || c",
    "``code`` and `x`",
    "line\n# heading\n---\n- item",
    "&lt;script&gt; &amp; &#60;b&#62;",
    '<a href="http://evil/">x</a>',
    "<http://evil/> www.evil.com mail@evil.com $x$",
    "back\\slash \\<b\\> \\[x\\](y) \\|",
]


def _flat(text: str) -> str:
    """What a one-line view shows of ``text``: its words separated by single spaces."""
    return " ".join(text.split())


# -- records with hostile texts ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bases() -> dict[str, dict[str, Any]]:
    """A paper reading REFUTED (with its counterexample), one VERIFIED (without proofs: the finite difference's bound,
    which the relaxation prover declines), and a user's statement REFUTED."""
    refuted, verified = quick_records(["theorem1.fixed[R1,g2]", "corollary3[fd,corrected]"])  # (no relaxation)
    return {"refuted": refuted.to_json(), "verified": verified.to_json(), "user": class_record().to_json()}


def _proof(text: str) -> dict[str, Any]:
    return {"name": text, "result": text, "ok": True, "complete": True, "checked": 2, "size_limited": 1, "cited": 0,
            "cited_unchecked": 0, "prose": 0, "size_limited_steps": [text],
            "premises": [{"premise": text, "hypothesis": text, "checked": False}],
            "steps": [{"category": text, "text": text, "ok": True}, {"category": "prose", "text": text, "ok": None}],
            "uses": [text], "rests_on": text}


def _relaxation(text: str) -> dict[str, Any]:
    return {"method": text, "status": "proved", "reason": text, "work": 1, "boxes": 1, "rests_on": text,
            "boxes_sha256": text, "problems": [{"conjunct": 0, "pattern": text, "status": text, "boxes": 1,
                                                "closed": {text: 1}, "faces_as_limits": [text], "tree_sha256": text,
                                                "coordinates": [{"name": text, "lo": 0.0, "hi": 1.0}]}]}


def hostile(base: dict[str, Any], text: str, statement_id: str, *, verdict: str | None = None) -> rec.Record:
    """``base`` with ``text`` in every text a view shows (id ``statement_id``); with ``verdict="PROVED"`` a
    derivation and a relaxation certificate of those texts."""
    d = copy.deepcopy(base)
    d["id"] = statement_id
    st = d["statement"]
    st.update(id=statement_id, title=text, formula=text, srepr=text, latex=text, notes=text,
              where={"x": text}, expectation_over=None)
    st["citation"].update(numbering=text, arxiv=text, version=text)
    d["reason"] = text
    d["hypotheses"] = [{"id": text, "description": text}]
    cx = d.get("counterexample")
    if isinstance(cx, dict):
        cx["certificate"].update(lhs=text, rhs=text, notes=[text], method=text, status=text)
        cx["boundary"] = [text]
    if verdict == "PROVED":
        d.update(verdict="PROVED", proof=_proof(text), relaxation=_relaxation(text), counterexample=None)
    return rec.Record.from_json(rehash(d))


def hostile_records(bases: dict[str, dict[str, Any]], text: str) -> list[rec.Record]:
    """Paper readings (one of a result the paper prints, one of no known result: the erratum's two kinds of row),
    one PROVED by a derivation named ``text``, and a user's statement, every text of them ``text``."""
    return [hostile(bases["refuted"], text, f"theorem1.fixed[{text}]"),
            hostile(bases["verified"], text, text, verdict="PROVED"),
            hostile(bases["verified"], text, f"multihead[{text}]"),
            hostile(bases["user"], text, f"user.{text}")]


# -- the Markdown audit -----------------------------------------------------------------------------------
class Html(HTMLParser):
    """Start tags with their attributes, and the text content (entities read)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.starts: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.data: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.starts.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.data.append(data)

    @property
    def text(self) -> str:
        return "".join(self.data)


def parse(html: str) -> Html:
    out = Html()
    out.feed(html)
    out.close()
    return out


#: the elements our own Markdown produces: a paragraph with bold id and verdict, code spans, an italic reason and a
#: link to the paper; tables; the erratum's line breaks (raw ``<br>``) and its links to the paper
PARAGRAPH = {"p", "strong", "code", "em", "a"}
TABLE = {"table", "thead", "tbody", "tr", "th", "td", "code"}
ERRATUM = TABLE | {"em", "a", "br"}


def render(markdown: str) -> str:
    """HTML of ``markdown`` as GitHub renders it: CommonMark, tables, raw HTML passed through."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def audit(markdown: str, allowed: set[str], *, links: int) -> Html:
    """The rendered ``markdown`` (checked: only ``allowed`` elements, without attributes but the ``links`` links to
    the paper, no script, image or other link anywhere)."""
    html = render(markdown)
    page = parse(html)
    tags = [tag for tag, _ in page.starts]
    assert set(tags) <= allowed, (sorted(set(tags) - allowed), markdown)
    for tag, attrs in page.starts:
        assert attrs == ([("href", paper.ARXIV_URL)] if tag == "a" else []), (tag, attrs, markdown)
    assert tags.count("a") == links, markdown
    lowered = html.lower()
    assert "<script" not in lowered and "<img" not in lowered and lowered.count("<a ") == links, html
    return page


def test_markdown_text_escapes_every_construct_and_reads_back() -> None:
    for text in HOSTILE:
        escaped = rec.markdown_text(text)
        assert "\n" not in escaped and "<" not in escaped and ">" not in escaped
        assert re.sub(r"&(amp|lt|gt);", "", escaped).count("&") == 0
        assert rec.markdown_plain(escaped) == _flat(text) or "\n" in text
        page = audit(escaped, {"p"}, links=0)
        assert _flat(page.text) == _flat(text), (text, escaped)
    assert rec.markdown_text("E_dtilde and |x|_2") == "E_dtilde and \\|x\\|\\_2"  # an underscore in a word is kept
    assert rec.markdown_text("- item") == "\\- item" and rec.markdown_text("1. item") == "1\\. item"
    assert rec.markdown_text("a\x1b[2Jb") == "a\\\\x1b\\[2Jb"  # control characters as the terminal shows them


@pytest.mark.parametrize("text", HOSTILE)
def test_record_markdown_shows_hostile_text_as_text(text: str, bases: dict[str, dict[str, Any]]) -> None:
    for record in hostile_records(bases, text):
        markdown = record._repr_markdown_()
        assert markdown == rec.record_markdown(record)
        user = record.data["statement"]["source"] == "user"
        page = audit(markdown, PARAGRAPH, links=0 if user else 1)
        assert [p for p, _ in page.starts].count("p") == 3, markdown  # the three paragraphs, no more
        shown = _flat(page.text)
        # the id, the formula (its srepr does not parse), the title, the reason, and the citation of the paper's own
        assert shown.count(_flat(text)) >= (4 if user else 7), (shown, markdown)
        assert shown.startswith(_flat(record.id)), shown
        if record.verdict == "PROVED":
            assert f"PROVED ({_flat(text)} + relaxation)" in shown


@pytest.mark.parametrize("text", HOSTILE)
def test_verdict_table_and_erratum_show_hostile_text_as_text(text: str, bases: dict[str, dict[str, Any]],
                                                            tmp_path: Path) -> None:
    records = hostile_records(bases, text)
    table = rec.verdict_table(records)
    page = audit(table, TABLE, links=0)
    cells = [tag for tag, _ in page.starts]
    assert cells.count("tr") == 1 + len(records) and cells.count("td") == 4 * len(records), table
    assert _flat(page.text).count(_flat(text)) >= 3 * len(records)  # formula, reading, and the id (in it)
    erratum = rec.erratum_table(records)
    entries = paper.erratum((r.id, r.verdict, r.data["statement"]["source"]) for r in records)
    printed = sum(e.printed is not None for e in entries)
    assert printed >= 1 and len(entries) > printed  # both kinds of row: a printed result and an unknown one
    page = audit(erratum, ERRATUM, links=printed)
    cells = [tag for tag, _ in page.starts]
    assert cells.count("tr") == 1 + len(entries) and cells.count("td") == 4 * len(entries), erratum
    for r in records[:3]:  # the paper's readings (a user's statement is not in the erratum)
        assert f"{_flat(r.id)} {_flat(rec.verdict_label(r))}" in _flat(page.text), (r.id, page.text)
    # written into a README (both generated parts) and read back
    doc = tmp_path / "README.md"
    doc.write_text(f"# README\n\n{rec.TABLE_START}\nold\n{rec.TABLE_END}\n\ntext\n\n{rec.ERRATUM_START}\nold\n"
                   f"{rec.ERRATUM_END}\n")
    rec.update_readme(doc, table)
    rec.update_readme(doc, erratum, erratum=True)
    written = doc.read_text(encoding="utf-8")
    page = audit(written.replace(rec.TABLE_START, "").replace(rec.TABLE_END, "").replace(rec.ERRATUM_START, "")
                 .replace(rec.ERRATUM_END, ""), ERRATUM | {"h1", "p"}, links=printed)
    tags = [tag for tag, _ in page.starts]
    assert tags.count("h1") == 1 and tags.count("table") == 2 and tags.count("p") == 1, written
    assert rec.parse_verdict_table(written) == {_one_line(r.id): _flat(rec.verdict_label(r)) for r in records}


def _one_line(text: str) -> str:
    """An id as a code span shows it (line breaks as spaces, nothing else changed)."""
    return " ".join(text.splitlines()).strip()


# -- the HTML views ---------------------------------------------------------------------------------------
#: every element the report writes (its own markup, MathML of formulas)
REPORT_TAGS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "div", "section", "span",
               "code", "wbr", "strong", "em", "br", "table", "tr", "th", "td", "ul", "ol", "li", "details", "summary",
               "pre", "a", "figure", "img", "figcaption"} | set(MATHML_TAGS)


def audit_html(html: str, texts: list[str]) -> Html:
    """``html`` checked: only the report's elements, no event handler, links only within the page or to the paper,
    images only the page's own plots; each of ``texts`` shown literally."""
    page = parse(html)
    for tag, attrs in page.starts:
        assert tag in REPORT_TAGS, tag
        for key, value in attrs:
            assert not key.startswith("on") and key not in ("srcset", "action", "formaction", "xlink:href"), (tag, key)
            if key == "href":
                assert tag == "a" and (value == paper.ARXIV_URL or re.fullmatch(r"#(top|erratum|r\d+)", value or "")), value
            if key == "src":
                assert tag == "img" and re.fullmatch(r"data:image/png;base64,[A-Za-z0-9+/=]+|fig-\d{3}\.png", value or "")
    lowered = html.lower()
    assert "<script" not in lowered and "<img src=x" not in lowered and '<a href="http://evil' not in lowered
    shown = page.text
    for text in texts:
        assert text in shown, (text, shown[:2000])
    return page


@pytest.mark.parametrize("text", HOSTILE)
def test_the_html_views_show_hostile_text_as_text(text: str, bases: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    records = hostile_records(bases, text)
    one_line = text.replace("\n", "\\n")  # the record's JSON on the page writes a line break so
    for record in records:
        page = audit_html(record._repr_html_(), [record.id, record.reason])
        assert [t for t, _ in page.starts].count("section") == 1
        assert one_line in page.text  # the JSON of the record, in a <pre>
    page = audit_html(rec.Records(records)._repr_html_(), [r.id for r in records])
    assert [t for t, _ in page.starts].count("section") == len(records)
    audit_html(fragment([r.data for r in records], figures=False), [r.id for r in records])
    index = write_report(records, tmp_path / "out", name=f"records {text}.json")
    page = audit_html(index.read_text(encoding="utf-8"), [r.id for r in records] + [f"records {text}.json"])
    assert [t for t, _ in page.starts].count("section") == len(records)


# -- shapes the schema lets through -----------------------------------------------------------------------
PROBLEMS = [
    {},
    {"coordinates": 5},
    {"coordinates": "x"},
    {"coordinates": [1, "a", None, {"name": {"x": 1}, "lo": [1], "hi": {}}]},
    {"closed": [1, 2]},
    {"closed": 3},
    {"closed": {"bisection": "many", "interval": [1]}},
    {"faces_as_limits": 7},
    {"faces_as_limits": {"L = 0": 1}},
    {"boxes": [1], "conjunct": {"a": 1}, "pattern": ["p"], "status": {"s": 1}, "tree_sha256": 12,
     "tightest": "no", "model": 5},
]
REDUCTIONS = [None, 5, "text", [1, 2], {"problems": 3, "normaliser": None}, {"hypotheses read": "all"}]


def _odd_relaxation(reduction: Any) -> dict[str, Any]:
    out = {"method": "relaxation", "status": "proved", "reason": "closed", "work": 1, "boxes": 3,
           "problems": copy.deepcopy(PROBLEMS) + [{"pattern": "the well-formed problem", "status": "proved",
                                                   "boxes": 2, "closed": {"bound": 2}, "coordinates": [
                                                       {"name": "s_1", "lo": 0.0, "hi": 1.0}]}]}
    if reduction is not None:
        out["reduction"] = reduction
    return out


def _odd_certificate() -> dict[str, Any]:
    return {"status": "violated", "method": "arb", "margin_lo": "nan", "margin_hi": "inf", "precision_bits": None,
            "scale": "-inf", "lhs": "not a ball", "rhs": "[garbage +/- x]", "margin_lo_text": "",
            "level": None, "notes": [], "hypotheses": {}, "worst": {}}


def odd_records(bases: dict[str, dict[str, Any]]) -> list[rec.Record]:
    """Records the schema accepts with certificates of shapes the views do not expect."""
    out = []
    for reduction in REDUCTIONS:  # PROVED by the relaxation prover alone, its problems of odd shapes
        d = copy.deepcopy(bases["verified"])
        d.update(verdict="PROVED", proof=None, relaxation=_odd_relaxation(reduction))
        out.append(d)
    for steps in ([], [{}], [{"ok": None}, {"text": ""}, {"category": "x"}], None):  # derivations with odd steps
        d = copy.deepcopy(bases["verified"])
        proof = _proof("derivation")
        proof.update(premises=[], size_limited_steps=[], uses=[])
        if steps is None:
            del proof["steps"]
        else:
            proof["steps"] = steps
        d.update(verdict="PROVED", proof=proof, relaxation=_odd_relaxation(None))  # proved, without rests_on
        out.append(d)
    d = copy.deepcopy(bases["refuted"])  # numbers as the text of non-finite ones, balls that are not balls
    d["tightness"]["certificate"] = _odd_certificate()
    d["counterexample"]["certificate"] = _odd_certificate()
    d["counterexample"]["interior"] = {"certificate": _odd_certificate(), "reason": "none"}
    out.append(d)
    d = copy.deepcopy(bases["user"])  # a float-only refutation whose float margin says nothing
    d["certified"] = False
    d["counterexample"]["float"] = {}
    out.append(d)
    d = copy.deepcopy(bases["verified"])  # no relaxation at all
    del d["relaxation"]
    out.append(d)
    for k, data in enumerate(out):
        data["id"] = f"{data['id']}[odd{k}]"
    return [rec.Record.from_json(rehash(d)) for d in out]


def test_odd_certificates_render_what_they_can(bases: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    records = odd_records(bases)
    for record in records:
        html = record._repr_html_()
        audit_html(html, [record.id])
        relaxation = record.data.get("relaxation") or {}
        if relaxation.get("problems"):
            assert html.count("(malformed:") >= 6, record.id  # each odd problem says so
            assert "the well-formed problem" in html and "s_1" in html  # ... and the others render
        markdown = record._repr_markdown_()
        audit(markdown, PARAGRAPH, links=0 if record.data["statement"]["source"] == "user" else 1)
        assert record.cite()
    assert "(malformed: KeyError" in records[-2]._repr_markdown_()  # the float margin paper.why reads is missing
    assert "(malformed: why: KeyError" in records[-2]._repr_html_()
    audit(rec.verdict_table(records), TABLE, links=0)
    entries = paper.erratum((r.id, r.verdict, r.data["statement"]["source"]) for r in records)
    audit(rec.erratum_table(records), ERRATUM, links=sum(e.printed is not None for e in entries))
    index = write_report(records, tmp_path / "out", name="odd.json")
    page = audit_html(index.read_text(encoding="utf-8"), [r.id for r in records])
    assert [t for t, _ in page.starts].count("section") == len(records)


def test_the_report_command_renders_odd_certificates(bases: dict[str, dict[str, Any]], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from attnbounds.theory.running.cli import main

    path = tmp_path / "odd.json"
    rec.save_records(path, odd_records(bases))
    assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 0, capsys.readouterr()
    assert main(["table", str(path)]) == 0 and main(["table", str(path), "--erratum"]) == 0
    assert "(malformed:" in (tmp_path / "out" / "index.html").read_text(encoding="utf-8")
