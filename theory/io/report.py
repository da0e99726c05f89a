"""A records file as a static HTML page: ``attnbounds report RECORDS.json --out DIR``.

``DIR/index.html`` plus one PNG per record (``DIR/fig-NNN.png``, the tightest ``lhs / rhs`` found against L). The
page works offline: inline CSS, no scripts, no remote resources but the links to the paper. It opens with the
erratum (:func:`attnbounds.theory.io.paper.erratum`: per result of the paper, what it prints, which readings hold, which
do not, and the corrected forms), then a summary table, then per record: its verdict and one sentence why, the
statement (the relation as the paper writes it, :mod:`attnbounds.theory.mathematics.notation`, in MathML; title, symbols,
hypotheses and notes with their formulas in MathML, :mod:`attnbounds.theory.io.prose`), the paper's own statement with
its link and the sibling reading (printed <-> corrected) with its verdict, the certified counterexample (L as the
number of tokens, token classes with their counts), the command that replays it, the tightest instance, the proof,
the search with its plot, and the record's JSON. Numbers are shown to 4 significant digits; the exact value is in
the tooltip (``title``) or, for arrays, a ``<details>`` away.

Everything read from the records is untrusted (a user's statements file names the ids and writes the relations):
records are checked by :func:`attnbounds.theory.io.records.problems` when read, text is escaped, the relation is
rebuilt by :func:`attnbounds.theory.mathematics.notation.relation_from_srepr` (never ``eval``) and its MathML re-serialised
through a whitelist of MathML elements; anything else falls back to text.

Output (:func:`write_report`): the page and its figures are built in a temporary folder next to ``DIR`` and moved
into place at the end, so ``DIR`` is replaced whole or left whole (Ctrl-C included). An existing ``DIR`` must be
empty or hold only what a report writes (``index.html``, ``fig-NNN.png``): anything else is refused, never deleted.
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import math
import os
import re
import shlex
import shutil
import signal
import tempfile
import xml.etree.ElementTree as ET
from html.entities import name2codepoint
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol

from attnbounds.theory.io import atomic, paper
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.notation import short, text_of_record
from attnbounds.theory.io.serialize import dumps
from attnbounds.theory.io.terminal import printable

#: the verdict badges' colours (background, text)
COLOURS = {"PROVED": ("#1a7f37", "#fff"), "VERIFIED": ("#0969da", "#fff"), "REFUTED": ("#cf222e", "#fff"),
           "UNDECIDED": ("#9a6700", "#fff"), "NOT-APPLICABLE": ("#6e7781", "#fff"), "ERROR": ("#6f42c1", "#fff")}
#: values shown per array before the rest is a click away
ROW_VALUES = 8
#: values written out in full in an array's ``<details>``
ALL_VALUES = 256
#: the longest text shown for one value (a certificate's ball, a step)
TEXT_CHARS = 400
#: the largest record JSON written into the page (characters; a longer one is cut, the records file has it all)
JSON_CHARS = 60_000
#: files an existing ``--out`` folder may hold (what a report writes); anything else is refused
REPORT_FILES = re.compile(r"index\.html|fig-\d{3,}\.png")
#: MathML elements and attributes kept when the printer's output is re-serialised
MATHML_TAGS = frozenset({"math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup",
                         "mfrac", "msqrt", "mroot", "munder", "mover", "munderover", "mtable", "mtr", "mtd",
                         "mstyle", "mpadded", "mphantom", "menclose", "merror", "semantics", "annotation"})
MATHML_ATTRS = frozenset({"mathvariant", "display", "stretchy", "fence", "separator", "lspace", "rspace",
                          "linethickness", "columnalign", "rowalign", "notation", "accent", "accentunder",
                          "largeop", "movablelimits", "form", "encoding"})
#: plot rows beyond this magnitude are drawn at the edge of the axis (their value is in the search table)
PLOT_LIMIT = 1e6

CSS = """
.attnbounds{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#1f2328;line-height:1.45}
body.attnbounds{max-width:74rem;margin:2rem auto;padding:0 1rem}
.attnbounds h1{font-size:1.6rem}
.attnbounds h2{font-size:1.25rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem;margin-top:2.5rem}
.attnbounds h3{font-size:1rem;margin:1.2rem 0 .4rem}
.attnbounds table{border-collapse:collapse;margin:.5rem 0}
.attnbounds td,.attnbounds th{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;vertical-align:top}
.attnbounds th{background:#f6f8fa;font-weight:600}
.attnbounds code,.attnbounds .mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
.attnbounds td code{word-break:break-word}
.attnbounds .badge{display:inline-block;padding:.05rem .5rem;border-radius:1rem;font-weight:600;font-size:.8rem;
white-space:nowrap}
.attnbounds .formula{background:#f6f8fa;padding:.5rem .8rem;border-radius:.4rem;overflow-x:auto;font-size:1.1rem}
.attnbounds .note{color:#57606a}.attnbounds .counts span{margin-right:1rem}
.attnbounds .why{font-size:1.05rem}
.attnbounds .printed{border-left:4px solid #d0d7de;padding:.2rem .8rem;margin:.4rem 0;background:#fafbfc}
.attnbounds [title]{text-decoration:underline dotted #8c959f;text-underline-offset:.2em;cursor:help}
.attnbounds details summary{cursor:pointer}
.attnbounds pre{background:#f6f8fa;padding:.6rem;overflow:auto;max-height:30rem;font-size:.8rem}
.attnbounds img{max-width:100%;border:1px solid #d0d7de}
.attnbounds ol.steps li{margin:.15rem 0}.attnbounds .cat{font-weight:600}
.attnbounds .erratum td{max-width:26rem}.attnbounds .erratum li{margin:.1rem 0}.attnbounds .erratum ul{margin:0;padding-left:1.1rem}
"""


# -- loading ----------------------------------------------------------------------------------------
# -- values as HTML ---------------------------------------------------------------------------------
def _e(value: Any) -> str:
    """Escaped text of a value (cut to :data:`TEXT_CHARS`; control characters written out as in the terminal)."""
    text = value if isinstance(value, str) else str(value)
    if len(text) > TEXT_CHARS:
        text = text[:TEXT_CHARS] + f"... ({len(text) - TEXT_CHARS} more characters)"
    return html.escape(printable(text), quote=True)


def _exact(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _n(value: Any, *, none: str = "n/a") -> str:
    """A number to 4 digits with its exact value as a tooltip; ``none`` for a missing or NaN value."""
    if value is None or (isinstance(value, str) and value == "nan") or (isinstance(value, float) and value != value):
        return _e(none)
    shown = short(value)
    exact = isinstance(value, str) or (isinstance(value, int) and abs(value) < 10**12) or (
        isinstance(value, float) and (value.is_integer() and abs(value) < 10**12 or repr(value) == shown))
    if exact:  # nothing rounded: no tooltip
        return _e(shown)
    return f'<span class="mono" title="{_e(_exact(value))}">{_e(shown)}</span>'


def _found(value: Any, start: float = -math.inf) -> str:
    """A best-of-search number: "none found" when the search had none (missing, NaN, or the search's starting value
    ``start``: -inf for the tightest ratio, +inf for the smallest margin)."""
    number = value if isinstance(value, (int, float)) else {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(
        value, math.nan) if isinstance(value, str) else math.nan
    if number != number or number == start:
        return '<span class="note">none found</span>'
    return _n(value)


def _ball(text: Any) -> str:
    """An arb ball ``[2.30000000000000013e-5 +/- 3.06e-30]`` as its midpoint, the ball itself as the tooltip."""
    if not isinstance(text, str):
        return _n(text)
    middle = text[1:].split("+/-", 1)[0].strip(" ]") if text.startswith("[") else text
    try:
        shown = short(float(middle))
    except ValueError:
        return f'<span class="mono">{_e(text)}</span>'
    return f'<span class="mono" title="{_e(text)}">{_e(shown)}</span>'


def _interval(lo: Any, hi: Any, lo_text: Any = None, hi_text: Any = None) -> str:
    exact = f"[{lo_text if lo_text is not None else _exact(lo)}, {hi_text if hi_text is not None else _exact(hi)}]"
    return f'<span class="mono" title="{_e(exact)}">[{_e(short(lo))}, {_e(short(hi))}]</span>'


def _leaves(values: Any) -> list[Any]:
    """The numbers of a nested list, row-major (at most :data:`ALL_VALUES` + 1 of them)."""
    out: list[Any] = []
    stack = [values]
    while stack and len(out) <= ALL_VALUES:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(reversed(item))
        else:
            out.append(item)
    return out


def _array(value: Any, *, per_token: bool = True) -> str:
    """An instance array (``{"hex", "values"}``): its first row's first values to 4 digits, all of them exactly in a
    ``<details>``."""
    values = value.get("values") if isinstance(value, dict) else value
    if isinstance(values, list) and values and isinstance(values[0], list) and per_token:
        values = values[0]  # the instance's only row (B = 1)
    if not isinstance(values, list):
        return _n(values)
    flat = _leaves(values)
    rows = isinstance(values[0], list) if values else False
    count = f"{len(values)} x {len(values[0])} values" if rows else f"{len(values)} values"
    head = ", ".join(short(v) for v in flat[:ROW_VALUES]) + (", ..." if len(flat) > ROW_VALUES else "")
    exact = ", ".join(_exact(v) for v in flat[:ALL_VALUES]) + (", ..." if len(flat) > ALL_VALUES else "")
    return (f'<details><summary class="mono">[{_e(head)}] <span class="note">({_e(count)})</span></summary>'
            f'<div class="mono">{html.escape(printable(exact))}</div></details>')


def _id(statement_id: Any) -> str:
    """An id as code that may break after its commas and brackets (ids are long; a table cell is narrow)."""
    return "<code>" + re.sub(r"([,\[.])", r"\1<wbr>", _e(statement_id)) + "</code>"


def _badge(verdict: Any) -> str:
    bg, fg = COLOURS.get(str(verdict), ("#57606a", "#fff"))
    return f'<span class="badge" style="background:{bg};color:{fg}">{_e(verdict)}</span>'


def _kind(value: Any) -> str:
    """What a JSON value is, for a note saying it is not what was expected."""
    for kind, name in ((bool, "true or false"), (type(None), "null"), (dict, "an object"), (list, "a list"),
                       (str, "a string"), ((int, float), "a number")):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _malformed(why: str) -> str:
    """A note in place of a part of a record that has an unexpected shape."""
    return f'<span class="note">(malformed: {_e(why)})</span>'


def _part(what: str, render: Callable[..., str], *args: Any) -> str:
    """``render(*args)``, or a note saying that this part of the record (``what``) has a shape it cannot render:
    the record's other parts are still shown (records are checked against the schema when read, but the schema
    leaves some certificates' contents open)."""
    try:
        return render(*args)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError, RecursionError) as exc:
        return _malformed(f"{what}: {type(exc).__name__}: {exc}")


def _table(rows: Iterable[tuple[str, str]]) -> str:
    """A two-column table from (escaped label, HTML cell) pairs."""
    body = "".join(f"<tr><th>{label}</th><td>{cell}</td></tr>" for label, cell in rows)
    return f"<table>{body}</table>"


def _prose(text: Any) -> str:
    """Text with its formulas as MathML (:func:`attnbounds.theory.io.prose.html_of`), cut to :data:`TEXT_CHARS`."""
    from attnbounds.theory.io.prose import html_of

    text = str(text)
    if len(text) > TEXT_CHARS:
        return _e(text)
    return html_of(text)


# -- MathML -----------------------------------------------------------------------------------------
_ENTITY = re.compile(r"&([A-Za-z][A-Za-z0-9]*);")
_XML_ENTITIES = {"lt", "gt", "amp", "quot", "apos"}


def _numeric_entities(text: str) -> str:
    """Named HTML entities (``&InvisibleTimes;``) as numeric references, which an XML parser reads."""
    from html.entities import html5

    def sub(m: re.Match[str]) -> str:
        ent = m.group(1)
        if ent in _XML_ENTITIES:
            return m.group(0)
        chars = html5.get(ent + ";") or (chr(name2codepoint[ent]) if ent in name2codepoint else None)
        if chars is None:
            raise ValueError(f"unknown entity {ent!r}")
        return "".join(f"&#x{ord(c):x};" for c in chars)

    return _ENTITY.sub(sub, text)


def _clean(element: ET.Element) -> ET.Element:
    """A copy keeping only MathML elements of :data:`MATHML_TAGS` and attributes of :data:`MATHML_ATTRS`."""
    if element.tag not in MATHML_TAGS:
        raise ValueError(f"element {element.tag!r} is not MathML kept here")
    out = ET.Element(element.tag, {k: v for k, v in element.attrib.items() if k in MATHML_ATTRS})
    out.text, out.tail = element.text, element.tail
    for child in element:
        out.append(_clean(child))
    return out


def _paper_symbols(element: ET.Element) -> ET.Element:
    """sympy's ``<mi>dtilde</mi>``, ``<mi>abar</mi>``, ``<mi>eps</mi>`` as the paper's d̃, ā, ε (in place)."""
    from attnbounds.theory.io import prose

    for parent in element.iter():
        for k, child in enumerate(list(parent)):
            if child.tag == "mi" and not len(child) and child.text in {*prose.ACCENTED, *prose.GREEK}:
                symbol = prose.symbol(child.text)
                symbol.tail = child.tail
                parent[k] = symbol
    return element


def mathml(srepr: str) -> str:
    """Presentation MathML (``<math display="block">...``) of a record's relation as the paper writes it
    (:func:`attnbounds.theory.mathematics.notation.mathml`); ValueError if it cannot be built."""
    from attnbounds.theory.mathematics import notation

    relation = notation.relation_from_srepr(srepr)
    try:
        body = notation.mathml(relation)
    except (RecursionError, MemoryError):
        raise ValueError("too deeply nested to render") from None
    except Exception as exc:  # the printer does not know a construct
        raise ValueError(f"the MathML printer failed: {type(exc).__name__}") from None
    try:
        root = ET.fromstring(f"<math display=\"block\">{_numeric_entities(body)}</math>")
    except ET.ParseError as exc:
        raise ValueError(f"the printer's MathML does not parse: {exc}") from None
    return ET.tostring(_paper_symbols(_clean(root)), encoding="unicode", method="xml")


# -- the plot ---------------------------------------------------------------------------------------
def per_L(record: dict[str, Any]) -> dict[str, list[tuple[int, float, float]]]:
    """``method -> [(L, best lhs/rhs, best relative margin)]`` from the record's search (empty when the record
    predates ``by_L`` or searched nothing); rows that are not three finite numbers with L >= 1 are left out."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    by_method = record.get("search", {}).get("by_method", {})
    for method, info in by_method.items():
        rows = info.get("by_L") if isinstance(info, dict) else None
        if not isinstance(rows, list):
            continue
        clean = []
        for row in rows:
            if isinstance(row, list) and len(row) == 3 and all(isinstance(v, (int, float)) for v in row):
                L, ratio, rel = (float(v) for v in row)
                if all(math.isfinite(v) for v in (L, ratio, rel)) and 1 <= L <= 2**62:
                    clean.append((int(L), ratio, rel))
        if clean:
            out[str(method)] = sorted(clean)
    return out


class Plotter:
    """One matplotlib figure reused for every record (a new figure and its layout per record took 0.5 s)."""

    def __init__(self) -> None:
        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

        self.figure = Figure(figsize=(10, 3.8), dpi=90)
        self.figure.subplots_adjust(left=0.07, right=0.985, bottom=0.27, top=0.91, wspace=0.22)
        self.left, self.right = self.figure.subplots(1, 2)
        self._fixed, self._null, self._func = FixedLocator, NullLocator, FuncFormatter

    def _log_L(self, ax: Any, Ls: list[int]) -> None:
        """log L on a plain axis: ticks at the powers of ten spanned, labelled 1, 10, 100, 1e3, ..."""
        lo, hi = math.log10(min(Ls)), math.log10(max(Ls))
        if hi - lo < 0.5:
            lo, hi = lo - 0.5, hi + 0.5
        ax.set_xlim(lo - 0.05 * (hi - lo), hi + 0.05 * (hi - lo))
        step = max(1, math.ceil((hi - lo) / 8))
        ax.xaxis.set_major_locator(self._fixed(list(range(max(0, math.floor(lo)), math.ceil(hi) + 1, step))))
        ax.xaxis.set_minor_locator(self._null())
        ax.xaxis.set_major_formatter(self._func(lambda v, _: f"{10.0 ** v:g}" if v < 4 else f"1e{round(v)}"))
        ax.set_xlabel("context length L (log scale)")

    def png(self, data: dict[str, list[tuple[int, float, float]]]) -> bytes:
        from matplotlib.lines import Line2D

        left, right = self.left, self.right
        left.cla()
        right.cla()
        for old in list(self.figure.legends):
            old.remove()
        handles = []
        Ls = [L for rows in data.values() for L, _, _ in rows]
        ratios = [r for rows in data.values() for _, r, _ in rows]
        top = max(1.25, min(max(ratios) * 1.08, 10.0)) if ratios else 1.25
        bottom = min(0.0, max(min(ratios) * 1.08, -1.0)) if ratios else 0.0
        for k, (method, rows) in enumerate(sorted(data.items())):
            colour = f"C{k % 10}"
            xs = [math.log10(L) for L, _, _ in rows]
            ys = [min(max(r, bottom), top) for _, r, _ in rows]
            held = [g >= 0 for _, _, g in rows]
            for mask, marker in ((True, "o"), (False, "x")):
                pts = [(x, y) for x, y, h in zip(xs, ys, held) if h == mask]
                if pts:
                    left.scatter(*zip(*pts), s=18, marker=marker, color=colour, zorder=3)
            right.scatter(xs, [g for _, _, g in rows], s=18, color=colour, zorder=3)
            handles.append(Line2D([], [], marker="o", ls="", color=colour, label=method))
        handles += [Line2D([], [], marker="x", ls="", color="#57606a", label="violated"),
                    Line2D([], [], color="#cf222e", lw=1.0, ls="--", label="the bound (lhs = rhs)")]
        left.axhline(1.0, color="#cf222e", lw=1.0, ls="--")
        left.set_ylim(bottom - 0.05 * (top - bottom), top + 0.05 * (top - bottom))
        left.set_ylabel("tightest lhs / rhs")
        left.set_title("tightest lhs/rhs per octave of L (x: violated)", fontsize=10)
        right.axhline(0.0, color="#cf222e", lw=1.0, ls="--")
        right.set_ylim(-1.05, 1.05)
        right.set_ylabel("(rhs - lhs) / (|lhs| + |rhs|)")
        right.set_title("smallest relative margin (< 0: violated)", fontsize=10)
        for ax in (left, right):
            self._log_L(ax, Ls)
            ax.grid(True, alpha=0.3)
        self.figure.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False)
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", metadata={"Software": None})
        return buf.getvalue()


CAPTION = ("The tightest instance each search method found in each octave of L (2^k <= L < 2^(k+1)), at its L: "
           "lhs/rhs (left; the dashed line is the bound, above it with rhs > 0 is violated; crosses mark violations, "
           "values beyond the axis are drawn at its edge) and the relative margin (right; below 0 is violated).")


def plot_png(record: dict[str, Any], plotter: Plotter | None = None) -> tuple[bytes | None, str]:
    """``(PNG bytes, caption)`` of the tightest lhs/rhs and relative margin against L; ``(None, why not)`` without
    data or without matplotlib."""
    data = per_L(record)
    if not data:
        if any(isinstance(i, dict) and "by_L" in i for i in record.get("search", {}).get("by_method", {}).values()):
            return None, "No plot: the search recorded no finite values per range of L."
        return None, ("No plot: this record has no per-L search data (it was written before attnbounds kept the "
                      "tightest instance per range of L, or nothing was searched); rerun `attnbounds verify` to get it.")
    try:
        plotter = plotter or Plotter()
    except ImportError:
        return None, "No plot: matplotlib is not installed (pip install matplotlib)."
    return plotter.png(data), CAPTION


# -- sections ---------------------------------------------------------------------------------------
def _statement(r: dict[str, Any]) -> str:
    st = r["statement"]
    try:
        math_html = mathml(st.get("srepr", ""))
        why = ""
    except ValueError as exc:
        math_html = ""
        why = f'<p class="note">(no MathML: {_e(exc)}; the formula is shown as text)</p>'
    out = [f"<p><strong>{_prose(st.get('title', ''))}</strong></p>"]
    if math_html:
        out.append(f'<div class="formula">{math_html}</div>')
    out.append(f'<p>as text: <code>{_e(text_of_record(st))}</code></p>{why}')
    where: dict[str, list[str]] = {}  # one gloss, the symbols it explains (names once)
    for symbol, text in (st.get("where") or {}).items():
        where.setdefault(str(text), []).append(str(symbol))
    if where:
        out.append("<p>where</p><ul>" + "".join(
            f"<li>{_prose(', '.join(symbols))}: {_prose(text)}</li>" for text, symbols in where.items()) + "</ul>")
    hyps = r.get("hypotheses") or []
    if hyps:
        out.append("<p>Hypotheses:</p><ul>" + "".join(
            f"<li><code>{_e(h.get('id', ''))}</code>: {_prose(h.get('description', ''))}</li>" for h in hyps) + "</ul>")
    if st.get("expectation_over"):
        out.append(f"<p>Expectation over: {_prose(st['expectation_over'])}</p>")
    if st.get("notes"):
        out.append(f'<p class="note">{_prose(st["notes"])}</p>')
    return "".join(out)


def _in_the_paper(r: dict[str, Any], verdicts: dict[str, tuple[int, str]] | None) -> str:
    """The paper's statement with its link, the citation, and the sibling reading with its verdict (``verdicts``:
    id -> (section number, verdict) of the records shown; None: a placeholder, :func:`_siblings` fills it in)."""
    st = r["statement"]
    cit = st["citation"]
    if st.get("source") == "user":
        return (f"<p>A statement from the user's statements file ({_e(cit['numbering'])}), not a reading of the "
                "paper.</p>")
    printed = paper.PRINTED.get(paper.result_of(str(r["id"])))
    out = [f'<p><a href="{_e(paper.ARXIV_URL)}">{_e(cit["arxiv"])} ({_e(cit["version"])})</a>, '
           f'{_e(cit["numbering"])}.</p>']
    if printed is not None:
        out.append(f'<div class="printed"><p>The paper prints: {_prose(printed.statement)}</p>'
                   + (f'<p class="note">{_prose(printed.open)}</p>' if printed.open else "") + "</div>")
    out.append(f"<!--sibling:{_e(r['id'])}-->" if verdicts is None else _sibling(str(r["id"]), verdicts))
    return "".join(out)


def _sibling(statement_id: str, verdicts: dict[str, tuple[int, str]]) -> str:
    other = paper.sibling(statement_id)
    if other is None:
        return ""
    label = "the printed reading it corrects" if paper.is_corrected(statement_id) else "its corrected form"
    if other in verdicts:
        k, verdict = verdicts[other]
        return f'<p>Sibling reading, {label}: <a href="#r{k}"><code>{_e(other)}</code></a> {_badge(verdict)}</p>'
    from attnbounds.theory.mathematics import registry

    if other in registry.ids():
        return f"<p>Sibling reading, {label}: {_id(other)} (not in this records file).</p>"
    return ""


_PLACEHOLDER = re.compile(r"<!--sibling:([^<>]*?)-->")


def _siblings(text: str, verdicts: dict[str, tuple[int, str]]) -> str:
    """``text`` with the placeholders of :func:`_in_the_paper` replaced by the sibling readings."""
    return _PLACEHOLDER.sub(lambda m: _sibling(html.unescape(m.group(1)), verdicts), text)


def _certificate_rows(cert: dict[str, Any]) -> list[tuple[str, str]]:
    how = f"{cert.get('status', '')} by {cert.get('method', '')}"
    if cert.get("precision_bits"):
        how += f" at {cert['precision_bits']} bits"
    if cert.get("level") is not None:
        how += f" (Monte Carlo, level {short(cert['level'])})"
    return [("lhs", _ball(cert.get("lhs", "n/a"))), ("rhs", _ball(cert.get("rhs", "n/a"))),
            ("margin rhs - lhs", _interval(cert.get("margin_lo"), cert.get("margin_hi"), cert.get("margin_lo_text"),
                                           cert.get("margin_hi_text"))),
            ("certificate", _e(how))]


def _params(params: Any) -> dict[str, Any]:
    """``name -> value`` of serialised parameters (a one-element list read as its element)."""
    out = {}
    for name, value in (params or {}).items():
        v = value.get("values") if isinstance(value, dict) else value
        while isinstance(v, list) and len(v) == 1:
            v = v[0]
        out[str(name)] = v
    return out


def length(inst: dict[str, Any]) -> tuple[Any, int | None]:
    """``(L, number of token classes or None)`` of a serialised instance: the sum of its counts for token classes
    (records written before ``classes`` existed held the number of classes under ``L``), else its ``L``."""
    counts = inst.get("counts")
    if isinstance(counts, list) and counts and isinstance(counts[0], list):
        return sum(c for c in counts[0] if isinstance(c, int)), len(counts[0])
    return inst.get("L"), None


def _L(inst: dict[str, Any]) -> str:
    L, classes = length(inst)
    return _n(L) + (f' tokens <span class="note">in {classes} classes of identical tokens</span>' if classes else "")


def _instance_rows(inst: dict[str, Any], *, L: bool = True) -> list[tuple[str, str]]:
    rows = [("L", _L(inst))] if L else []
    if inst.get("N") is not None:
        rows.append(("N", _n(inst["N"])))
    counts = inst.get("counts")
    if counts:
        rows.append(("tokens per class", _array(counts)))
    norm = inst.get("normaliser")
    own: dict[str, Any] = {}
    if isinstance(norm, dict):
        own = _params(norm.get("params"))
        shown = ", ".join(f"{k} = {_n(v)}" for k, v in own.items())
        rows.append(("normaliser", f"{_e(norm.get('name', norm.get('family', '')))}({shown})"))  # family: its constructor
    extra = {k: v for k, v in _params(inst.get("params")).items() if own.get(k) != v}
    if extra:
        rows.append(("parameters", ", ".join(f"{_e(k)} = {_n(v)}" for k, v in extra.items())))
    for key, label in (("logits", "logits"), ("alpha", "weights"), ("x", "token vectors"), ("q", "query"),
                       ("k", "keys")):
        if inst.get(key) is not None:
            rows.append((label, _array(inst[key])))
    return rows


def _counterexample(r: dict[str, Any]) -> str:
    cx = r.get("counterexample")
    if not isinstance(cx, dict):
        closed = r.get("closed_claim")
        if isinstance(closed, dict):
            return _table([(_e(c.get("relation", "")), f"lhs = {_e(c.get('lhs', ''))}, rhs = {_e(c.get('rhs', ''))} "
                            f"({_e(c.get('status', ''))}, {_e(c.get('method', ''))})") for c in closed["conjuncts"]])
        return "<p>None (no certified counterexample).</p>"
    inst = cx["instance"]
    rows = [("L of the counterexample", _L(inst)), *_instance_rows(inst, L=False)]
    if cx.get("certified") is False and isinstance(cx.get("float"), dict):
        f = cx["float"]
        rows += [("lhs (float64)", _n(f.get("lhs"))), ("rhs (float64)", _n(f.get("rhs"))),
                 ("margin (float64, NOT certified)", _n(f.get("margin")))]
    else:
        rows += _certificate_rows(cx["certificate"])
    if cx.get("smallest_violating_L_seen") is not None:
        rows.append(("smallest violating L seen", _n(cx["smallest_violating_L_seen"])))
    if cx.get("boundary"):
        rows.append(("on the boundary of the hypotheses", _e("; ".join(map(str, cx["boundary"])))))
    if cx.get("statistical"):
        rows.append(("statistical", "yes: a Monte Carlo interval, not interval arithmetic"))
    out = _table(rows)
    interior = cx.get("interior")
    if isinstance(interior, dict) and isinstance(interior.get("instance"), dict):
        out += "<p>An interior counterexample (inside every hypothesis):</p>" + _table(
            [("L", _L(interior["instance"])), *_certificate_rows(interior.get("certificate") or {})])
    elif isinstance(interior, dict) and interior.get("reason"):
        out += f'<p class="note">No interior counterexample: {_e(interior["reason"])}.</p>'
    out += _limits(cx.get("limit"))
    return out


def _limits(limits: Any) -> str:
    if not isinstance(limits, list) or not limits:
        return ""
    items = []
    for lim in limits:
        growth = f"{_e(lim['family'])}: " if lim.get("family") else ""  # the format's key for the growth
        extra = "; ".join(p for p in (f"L0 = {_n(lim['L0'])}" if lim.get("L0") is not None else "",
                                      _e(lim.get("limit") or "")) if p)
        items.append(f"<li>{growth}<strong>{_e(lim.get('status', ''))}</strong>{f' ({extra})' if extra else ''}"
                     f" {_e(lim.get('detail', ''))}</li>")
    return "<p>Along growing L:</p><ul>" + "".join(items) + "</ul>"


def _replay(r: dict[str, Any], records_name: str) -> str:
    cx, witness = r.get("counterexample"), r.get("tightness", {}).get("witness")
    if not isinstance(cx, dict) and not isinstance(witness, dict):
        return '<p class="note">Nothing to replay: the record has no counterexample and no tightest instance.</p>'
    what = "re-certifies the counterexample" if isinstance(cx, dict) else "re-certifies the tightest instance"
    command = f"attnbounds search {shlex.quote(str(r['id']))} --replay {shlex.quote(records_name)}"
    if r["statement"].get("source") == "user":
        command += " --statements YOUR_STATEMENTS_FILE"
    return f"<p>This command {what} from this records file (exit 0 when it reproduces):</p><pre>{_e(command)}</pre>"


def _tightness(r: dict[str, Any]) -> str:
    t = r["tightness"]
    rows = [("tightest lhs / rhs", _found(t.get("best_ratio"))),
            ("smallest relative margin", _found(t.get("best_margin"), math.inf)),
            ("equality case", _e("yes" if t.get("equality") else "no" if t.get("equality") is False else "n/a"))]
    if isinstance(t.get("witness"), dict):
        rows += _instance_rows(t["witness"])
    if isinstance(t.get("certificate"), dict):
        rows += _certificate_rows(t["certificate"])
    return _table(rows) + _limits(t.get("limit"))


def _relaxation(r: dict[str, Any]) -> str:
    """The relaxation prover's certificate: what it rests on, per problem the coordinates, the boxes and how they
    closed, the faces taken as limits, the tightest box; how to re-check it."""
    x = r.get("relaxation")
    if not isinstance(x, dict):
        return ""
    status = str(x.get("status", ""))
    head = (f"<p>Relaxation prover: <strong>{_e(status)}</strong>. {_prose(str(x.get('rests_on') or x.get('reason', '')))}"
            "</p>")
    if status == "declined":
        return head
    rows = []
    problems = x.get("problems") or []
    if not isinstance(problems, list):
        rows.append(("problems", _malformed(f"expected a list, got {_kind(problems)}")))
        problems = []
    for k, pj in enumerate(problems):
        if not isinstance(pj, dict):
            rows.append((f"problem {k + 1}", _malformed(f"expected an object, got {_kind(pj)}")))
            continue
        coordinates: Any = pj.get("coordinates") or []
        closed_by: Any = pj.get("closed") or {}
        faces: Any = pj.get("faces_as_limits") or []
        coords = (", ".join(f"{_e(str(c.get('name', '')))} in [{_n(c.get('lo'))}, {_n(c.get('hi'))}]"
                            if isinstance(c, dict) else _malformed(f"a coordinate is {_kind(c)}")
                            for c in coordinates)
                  if isinstance(coordinates, list) else _malformed(f"coordinates: {_kind(coordinates)}"))
        closed = (", ".join(f"{_n(v)} {_e(str(m))}" for m, v in closed_by.items()) if isinstance(closed_by, dict)
                  else _malformed(f"closed: {_kind(closed_by)}"))
        limits = (", ".join(_e(str(f)) for f in faces) if isinstance(faces, list)
                  else _malformed(f"faces as limits: {_kind(faces)}"))
        rows.append((f"problem {k + 1}: conjunct {_n(pj.get('conjunct'))}, {_e(str(pj.get('pattern', '')))}",
                     f"{_e(str(pj.get('status', '')))}; {_n(pj.get('boxes'))} boxes ({closed or 'none closed'}); "
                     f"coordinates {coords}" + (f"; faces as limits: {limits}" if limits else "")
                     + (f"; tree sha256 {_e(str(pj['tree_sha256'])[:16])}..." if pj.get("tree_sha256") else "")))
    out = [head, _table(rows)] if rows else [head]
    if status == "proved":
        out.append(f"<p>Re-check it from the record alone: <code>attnbounds prove --replay RECORDS {_e(str(r['id']))}</code>"
                   f" (boxes sha256 {_e(str(x.get('boxes_sha256', ''))[:16])}...).</p>")
    return "".join(out)


def _proof(r: dict[str, Any]) -> str:
    p = r.get("proof")
    if not isinstance(p, dict):
        return "<p>No derivation in <code>proofs/</code> for this reading.</p>" + _relaxation(r)
    counts = ", ".join(f"{_n(p.get(k))} {label}" for k, label in (
        ("checked", "checked"), ("size_limited", "size-limited"), ("cited", "cited"),
        ("cited_unchecked", "cited on the citation alone"), ("prose", "prose")))
    out = [f"<p>Derivation <code>{_e(p.get('name', ''))}</code>: <strong>{_e(p.get('result', ''))}</strong>; "
           f"steps: {counts}.</p>", f"<p>Rests on: {_prose(p.get('rests_on', ''))}</p>"]
    steps = p.get("steps")
    if isinstance(steps, list) and steps:
        items = []
        for s in steps:
            ok = {True: "ok", False: "FAILED", None: "not checked"}.get(s.get("ok"), "?")
            items.append(f'<li><span class="cat">{_e(s.get("category", ""))}</span> ({_e(ok)}): {_prose(s.get("text", ""))}</li>')
        out.append('<ol class="steps">' + "".join(items) + "</ol>")
    else:
        out.append('<p class="note">The record has no step list (written before records kept one); '
                   "<code>attnbounds prove -v</code> shows every step.</p>")
    premises = p.get("premises")
    if premises:
        out.append("<p>Premises:</p><ul>" + "".join(
            f"<li>{_prose(q.get('premise', ''))} from <code>{_e(q.get('hypothesis', ''))}</code>"
            f"{'' if q.get('checked') else ' (read from the hypothesis)'}</li>" for q in premises) + "</ul>")
    if p.get("size_limited_steps"):
        out.append("<p>Checked only at small sizes:</p><ul>" + "".join(
            f"<li>{_prose(s)}</li>" for s in p["size_limited_steps"]) + "</ul>")
    out.append(_relaxation(r))
    return "".join(out)


def _span(v: Any) -> str:
    return f"{short(v[0])} to {short(v[1])}" if isinstance(v, list) and len(v) == 2 else "none"


def _search(r: dict[str, Any]) -> str:
    s = r["search"]
    rng = s.get("L_range", {})
    out = [f"<p>Budget {_n(s.get('budget_s'))} s, seed {_n(s.get('seed'))}, {_n(s.get('tried'))} instances tried. "
           f"L searched: dense {_e(_span(rng.get('dense')))}, token classes {_e(_span(rng.get('classes')))}, "
           f"all {_e(_span(rng.get('all')))}.</p>"]
    by_method = s.get("by_method", {})
    if by_method:
        head = "<tr><th>method</th><th>tried</th><th>applicable</th><th>violations</th><th>L range</th>" \
               "<th>tightest lhs/rhs</th><th>smallest relative margin</th></tr>"
        body = "".join(
            f"<tr><td>{_e(m)}</td><td>{_n(i.get('tried'))}</td><td>{_n(i.get('applicable'))}</td>"
            f"<td>{_n(i.get('violations'))}</td><td>{_e(_span(i.get('L_range')))}</td>"
            f"<td>{_found(i.get('best_ratio'))}</td><td>{_found(i.get('best_margin'), math.inf)}</td></tr>"
            for m, i in by_method.items())
        out.append(f"<table>{head}{body}</table>")
    return "".join(out)


def _json(r: dict[str, Any]) -> str:
    text = dumps(r)
    full = len(text)
    size = f"{full / 1024:.0f} kB" if full >= 1024 else f"{full} characters"
    cut = ""
    if full > JSON_CHARS:
        text, cut = text[:JSON_CHARS], f"\n... (cut after {JSON_CHARS} of {full} characters: the records file has it all)"
    return (f"<details><summary>The record as JSON ({_e(size)}, content hash <code>{_e(r['content_hash'])}</code>)"
            f"</summary><pre>{html.escape(printable(text))}{_e(cut)}</pre></details>")


def section(k: int, r: dict[str, Any], figure: str | None, caption: str, *,
            verdicts: dict[str, tuple[int, str]] | None, records_name: str) -> str:
    """One record's section (``figure``: the plot's ``src``, a file name or a data URI, or None)."""
    plot = (f'<figure><img src="{html.escape(figure, quote=True)}" alt="tightest lhs/rhs against L">'
            f"<figcaption class=\"note\">{_e(caption)}</figcaption></figure>") if figure else f'<p class="note">{_e(caption)}</p>'
    return (f'<section id="r{k}" data-id="{_e(r["id"])}" data-verdict="{_e(r["verdict"])}">'
            f'<h2><code>{_e(r["id"])}</code> {_badge(r["verdict"])}</h2>'
            f'<p class="why">{_part("why", lambda: _e(paper.why(r)))}</p><p class="note">{_e(r["reason"])}</p>'
            f"<h3>Statement</h3>{_part('statement', _statement, r)}"
            f"<h3>In the paper</h3>{_part('citation', _in_the_paper, r, verdicts)}"
            f"<h3>Counterexample</h3>{_part('counterexample', _counterexample, r)}"
            f"<h3>Replay</h3>{_part('replay', _replay, r, records_name)}"
            f"<h3>Tightest instance</h3>{_part('tightness', _tightness, r)}"
            f"<h3>Proof</h3>{_part('proof', _proof, r)}<h3>Search</h3>{_part('search', _search, r)}{plot}"
            f"<h3>Record</h3>{_json(r)}"
            f'<p><a href="#top">back to the top</a></p></section>')


def _erratum(entries: list[paper.Entry], verdicts: dict[str, tuple[int, str]]) -> str:
    if not entries:
        return ""

    def items(pairs: list[tuple[str, str]]) -> str:
        if not pairs:
            return '<span class="note">none</span>'
        return "<ul>" + "".join(f'<li><a href="#r{verdicts[i][0]}">{_id(i)}</a> {_badge(v)}</li>'
                                for i, v in pairs) + "</ul>"

    rows = []
    for entry in entries:
        printed = entry.printed
        what = (f'<a href="{_e(paper.ARXIV_URL)}">{_e(printed.numbering)}</a><br>{_prose(printed.statement)}'
                if printed is not None else f"<code>{_e(entry.result)}</code>")
        rows.append(f"<tr><td>{what}<p class=\"note\">{_e(entry.summary)}</p></td><td>{items(entry.holds + entry.open)}"
                    f"</td><td>{items(entry.fails)}</td><td>{items(entry.corrected)}</td></tr>")
    return ('<h2 id="erratum">The paper\'s statements and what holds</h2>'
            f'<p class="note">Per result of <a href="{_e(paper.ARXIV_URL)}">arXiv:2508.17821</a>: the statement as the '
            "paper prints it, its readings that hold (PROVED, or VERIFIED: searched, nothing found) and those that are "
            "refuted (a certified counterexample), and the corrected forms: the strongest forms proved here.</p>"
            '<table class="erratum"><tr><th>the paper prints</th><th>readings that hold (or are open)</th>'
            "<th>readings refuted</th><th>corrected forms</th></tr>" + "".join(rows) + "</table>")


def _summary(rows: list[tuple[int, str, str, str, Any]]) -> str:
    counts: dict[str, int] = {}
    for _, _, verdict, _, _ in rows:
        counts[verdict] = counts.get(verdict, 0) + 1
    chips = "".join(f"<span>{_badge(v)} {n}</span>" for v, n in sorted(counts.items()))
    body = "".join(
        f'<tr><td><a href="#r{k}">{_id(i)}</a></td><td>{_badge(v)}</td><td><code>{_e(f)}</code></td>'
        f"<td>{_found(ratio)}</td></tr>" for k, i, v, f, ratio in rows)
    return (f'<h2 id="records">Records</h2><p class="counts">{len(rows)} records: {chips}</p>'
            f"<table><tr><th>id</th><th>verdict</th><th>formula</th><th>tightest lhs/rhs</th></tr>{body}</table>")


LEGEND = ("Verdicts: PROVED (a derivation replays, or the relaxation prover closed every box, and the search found "
          "nothing), VERIFIED (searched, nothing found: "
          "evidence, not a proof), REFUTED (a certified counterexample), UNDECIDED, NOT-APPLICABLE, ERROR. Numbers are "
          "shown to 4 significant digits: hover over one (dotted underline) for its exact value; arrays open on a click.")


def fragment(records: list[dict[str, Any]], *, figures: bool = True, records_name: str = "RECORDS") -> str:
    """The report's HTML for records held in memory (a notebook's view of a record or of ``verify``'s result):
    scoped CSS, the erratum when there are several records, each record's section, plots inline as PNG data."""
    plotter = None
    if figures:
        with contextlib.suppress(ImportError):
            plotter = Plotter()
    verdicts = {str(r["id"]): (k, str(r["verdict"])) for k, r in enumerate(records, 1)}
    parts = [f"<style>{CSS}</style>", '<div class="attnbounds">']
    if len(records) > 1:
        parts.append(_erratum(paper.erratum((r["id"], r["verdict"], r["statement"].get("source", "paper"))
                                            for r in records), verdicts))
    for k, r in enumerate(records, 1):
        src, caption = None, "No plot."
        if plotter is not None:
            png, caption = plot_png(r, plotter)
            src = None if png is None else "data:image/png;base64," + base64.b64encode(png).decode()
        parts.append(section(k, r, src, caption, verdicts=verdicts, records_name=records_name))
    parts.append("</div>")
    return "".join(parts)


def page(title: str, erratum: str, summary: str, sections: Iterable[str]) -> str:
    """The whole page from its parts."""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head>"
            f'<body class="attnbounds"><h1 id="top">{_e(title)}</h1>'
            f'<p class="note">Written by <code>attnbounds report</code>. {_e(LEGEND)}</p>'
            f"{erratum}{summary}{''.join(sections)}</body></html>\n")


# -- the command ------------------------------------------------------------------------------------
def _out_dir(out: str | os.PathLike[str]) -> Path:
    """``out`` checked as an output folder: a new path under a folder, or a folder (symlinks followed) that is empty
    or holds only a report's files (module docstring)."""
    if not str(out) or "\0" in str(out):
        raise InvalidArgument(f"--out: expected a folder path, got {str(out)!r}")
    target = Path(os.path.realpath(out))
    if target.exists() and not target.is_dir():
        raise InvalidArgument(f"--out {str(out)!r} is not a folder; attnbounds report writes into a folder (new or "
                              "one it wrote before)")
    atomic.check_target(target / "index.html", "--out")  # a folder we can create files in (or create)
    if target.is_dir():
        try:
            entries = sorted(os.scandir(target), key=lambda e: e.name)
        except OSError as exc:
            raise InvalidArgument(f"--out {str(out)!r}: cannot read the folder: {exc.strerror}") from None
        foreign = [e for e in entries if not (REPORT_FILES.fullmatch(e.name) and e.is_file(follow_symlinks=False))]
        if foreign:
            shown = ", ".join(f"{e.name!r}" + (" (a directory)" if e.is_dir(follow_symlinks=False) else "")
                              for e in foreign[:5])
            raise InvalidArgument(f"--out {str(out)!r} holds {shown}{', ...' if len(foreign) > 5 else ''}, which "
                                  "attnbounds report did not write: it replaces its folder whole, so give a new "
                                  "folder or one it wrote")
    return target


@contextlib.contextmanager
def _ctrl_c_held() -> Iterator[None]:
    """Ctrl-C (SIGINT) held back until the block ends, then delivered: the folder swap is never cut in half."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _swap_into_place(built: Path, target: Path) -> None:
    """Move the finished folder ``built`` to ``target``, replacing an existing ``target`` whole (Ctrl-C held back
    until the old one is gone: nothing of either is left half-way)."""
    with _ctrl_c_held():
        target.parent.mkdir(parents=True, exist_ok=True)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name[:100]}.old.", dir=target.parent))
            os.rename(target, old / "report")
        try:
            os.rename(built, target)
        except OSError:
            if old is not None:
                os.rename(old / "report", target)
                old.rmdir()
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def _build_folder(target: Path) -> Path:
    """A new private folder next to ``target`` (in its nearest existing parent) to build the report in."""
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    built = Path(tempfile.mkdtemp(prefix=f".{target.name[:100]}.", suffix=".tmp", dir=parent))
    os.chmod(built, 0o777 & ~atomic._umask())
    return built


class Recorded(Protocol):
    """What the report reads of a record (:class:`attnbounds.theory.io.records.Record`): its JSON object."""

    def to_json(self) -> dict[str, Any]: ...


def write_report(records: Iterable[Recorded], out: str | os.PathLike[str], *, name: str,
                 progress: bool = False, profile: Any = None) -> Path:
    """Write ``out/index.html`` and its figures for ``records`` (checked records, e.g.
    :func:`attnbounds.theory.io.records.iter_records` of the records file ``name``; module docstring); returns the page's
    path. Records are taken one at a time (only their sections are kept). ``progress``: a progress bar (tqdm) on
    stderr. ``profile``: a profile file's data (:func:`attnbounds.theory.io.profiles.load`), shown after the erratum
    with the paper's explanation of the alternatives linked to the rows that bear on it."""
    from attnbounds.theory.io import profiles

    shown = "" if profile is None else profiles.html_section(profiles.normalise(profile) if "kind" in profile
                                                              else profile)
    folder = _out_dir(out)
    built = _build_folder(folder)
    try:
        plotter: Plotter | None = None
        with contextlib.suppress(ImportError):
            plotter = Plotter()
        if progress:
            from tqdm.auto import tqdm

            records = tqdm(records, desc="report", unit="record")
        summary: list[tuple[int, str, str, str, Any]] = []
        sources, sections = [], []
        for k, r in enumerate((record.to_json() for record in records), 1):
            png, caption = plot_png(r, plotter) if plotter is not None else plot_png(r)
            figure = f"fig-{k:03d}.png" if png is not None else None
            if png is not None and figure is not None:
                (built / figure).write_bytes(png)
            summary.append((k, str(r["id"]), str(r["verdict"]), text_of_record(r["statement"]),
                            r["tightness"].get("best_ratio")))
            sources.append(str(r["statement"].get("source", "paper")))
            sections.append(section(k, r, figure, caption, verdicts=None, records_name=name))
        if not summary:
            raise InvalidArgument(f"records file {name!r} holds no records")
        verdicts = {i: (k, v) for k, i, v, _, _ in summary}
        entries = paper.erratum((i, v, src) for (_, i, v, _, _), src in zip(summary, sources))
        text = page(f"attnbounds records: {name}", _erratum(entries, verdicts) + shown, _summary(summary), sections)
        (built / "index.html").write_text(_siblings(text, verdicts), encoding="utf-8")
        _swap_into_place(built, folder)
    except OSError as exc:
        raise InvalidArgument(f"cannot write the report into {str(out)!r}: {exc.strerror or exc}") from None
    finally:
        if built.exists():
            shutil.rmtree(built, ignore_errors=True)
    return folder / "index.html"
