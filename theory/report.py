"""A records file as a static HTML page: ``attnbounds report RECORDS.json --out DIR``.

``DIR/index.html`` plus one PNG per record (``DIR/fig-NNN.png``, the best ``lhs / rhs`` found against L).
The page works offline: inline CSS, no scripts, no remote resources; formulas are MathML (sympy's
presentation printer, re-serialised through a whitelist of MathML elements) with the plain-text formula
next to them. Everything read from the records is untrusted (a user's statements file names the ids and
writes the relations): text is escaped, and the relation is rebuilt from its ``srepr`` by a reader that
accepts only sympy class names from :data:`SREPR_NAMES` and literals (never ``eval``), with sympy's
evaluation off and the size bounded; anything else falls back to the plain-text formula.

Sections: a summary (counts by verdict, one linked row per record), then per record: the statement,
its source and citation, the verdict (a coloured badge) and its reason, the certified counterexample
(L, logits, weights, lhs, rhs, margin interval; long rows cut), the tightest instance, the proof (steps
by kind, the step list when the record has it, what it rests on), the search (L ranges and per-method
counts) and the plot. Records written before the search kept the tightest instance per octave of L
(``by_method[m]["by_L"]``) get a sentence instead of a plot.

Output rules are those of :mod:`attnbounds.theory.atomic`: ``DIR`` is a folder (created if new), each file
is written atomically, a directory, device, FIFO or read-only file in the way is refused before anything
is rendered; ``index.html`` is written last.
"""

from __future__ import annotations

import ast
import html
import io
import math
import os
import re
import xml.etree.ElementTree as ET
from html.entities import name2codepoint
from pathlib import Path
from typing import Any, Iterable

from attnbounds.theory import atomic
from attnbounds.theory.errors import InvalidArgument

#: the verdict badges' colours (background, text)
COLOURS = {"PROVED": ("#1a7f37", "#fff"), "VERIFIED": ("#0969da", "#fff"), "REFUTED": ("#cf222e", "#fff"),
           "UNDECIDED": ("#bf8700", "#fff"), "NOT-APPLICABLE": ("#6e7781", "#fff"), "ERROR": ("#6f42c1", "#fff")}
#: values shown per row of an array before it is cut
ROW_VALUES = 12
#: rows shown per array
ROWS = 4
#: the longest text shown for one value (a certificate's ball, a step)
TEXT_CHARS = 400
#: sympy names the srepr reader accepts (classes and constants; nothing else is looked up)
SREPR_NAMES = frozenset({
    "Symbol", "Dummy", "Integer", "Float", "Rational", "Add", "Mul", "Pow", "Abs", "Min", "Max", "exp", "log",
    "sqrt", "sin", "cos", "tanh", "floor", "ceiling", "sign", "Sum", "Product", "Piecewise", "ExprCondPair",
    "Indexed", "IndexedBase", "Idx", "Tuple", "Function", "And", "Or", "Not", "LessThan", "StrictLessThan",
    "GreaterThan", "StrictGreaterThan", "Equality", "Unequality", "true", "false", "oo", "pi", "E", "nan", "zoo",
    "Half", "One", "Zero", "NegativeOne", "Infinity", "NegativeInfinity", "Str",
})
#: the largest srepr rebuilt (characters, syntax-tree nodes)
SREPR_CHARS = 20000
SREPR_NODES = 4000
#: MathML elements and attributes kept when the printer's output is re-serialised
MATHML_TAGS = frozenset({"math", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msub", "msup", "msubsup",
                         "mfrac", "msqrt", "mroot", "munder", "mover", "munderover", "mtable", "mtr", "mtd",
                         "mstyle", "mpadded", "mphantom", "menclose", "merror", "semantics", "annotation"})
MATHML_ATTRS = frozenset({"mathvariant", "display", "stretchy", "fence", "separator", "lspace", "rspace",
                          "linethickness", "columnalign", "rowalign", "notation", "accent", "accentunder",
                          "largeop", "movablelimits", "form", "encoding"})

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:72rem;margin:2rem auto;
padding:0 1rem;color:#1f2328;line-height:1.45}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-bottom:1px solid #d0d7de;padding-bottom:.3rem;margin-top:2.5rem}
h3{font-size:1rem;margin:1.2rem 0 .4rem}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;
vertical-align:top}th{background:#f6f8fa}code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;
font-size:.88em;word-break:break-all}
.badge{display:inline-block;padding:.1rem .55rem;border-radius:1rem;font-weight:600;font-size:.85rem}
.formula{background:#f6f8fa;padding:.5rem .8rem;border-radius:.4rem;overflow-x:auto}
.note{color:#57606a}.counts span{margin-right:1rem}
img{max-width:100%;border:1px solid #d0d7de}
ol.steps li{margin:.15rem 0}.cat{font-weight:600}
"""


# -- loading ----------------------------------------------------------------------------------------
def load(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a file written by ``attnbounds verify --json`` (InvalidArgument naming the problem)."""
    from attnbounds.theory import records as rec

    found = rec.load(path)
    if not found:
        raise InvalidArgument(f"records file {str(path)!r} holds no records")
    return [r.to_json() for r in found]


# -- values as text ---------------------------------------------------------------------------------
def _e(value: Any) -> str:
    """Escaped text of a value (cut to :data:`TEXT_CHARS`)."""
    text = value if isinstance(value, str) else _num(value) if isinstance(value, (int, float)) else str(value)
    if len(text) > TEXT_CHARS:
        text = text[:TEXT_CHARS] + f"... ({len(text) - TEXT_CHARS} more characters)"
    return html.escape(text, quote=True)


def _num(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _float(value: Any) -> float | None:
    """A record's number (numbers, or strings such as 'inf' for non-finite values) as a float; None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _row(values: Any) -> str:
    """One row of numbers, cut after :data:`ROW_VALUES` values."""
    if not isinstance(values, list):
        return _e(values)
    shown = ", ".join(_num(v) for v in values[:ROW_VALUES])
    more = f", ... ({len(values) - ROW_VALUES} more)" if len(values) > ROW_VALUES else ""
    return html.escape(f"[{shown}{more}]")


def _array(value: Any) -> str:
    """An instance array (``{"values": [[...], ...]}`` or a plain list): the first rows, each cut."""
    if isinstance(value, dict):
        value = value.get("values")
    if value is None:
        return "n/a"
    if isinstance(value, list) and value and isinstance(value[0], list):
        rows = [_row(r) for r in value[:ROWS]]
        if len(value) > ROWS:
            rows.append(html.escape(f"... ({len(value) - ROWS} more rows)"))
        return "<br>".join(rows)
    return _row(value)


def _badge(verdict: Any) -> str:
    bg, fg = COLOURS.get(str(verdict), ("#57606a", "#fff"))
    return f'<span class="badge" style="background:{bg};color:{fg}">{_e(verdict)}</span>'


def _table(rows: Iterable[tuple[str, str]]) -> str:
    """A two-column table from (escaped label, HTML cell) pairs."""
    body = "".join(f"<tr><th>{label}</th><td>{cell}</td></tr>" for label, cell in rows)
    return f"<table>{body}</table>"


# -- MathML -----------------------------------------------------------------------------------------
def relation_from_srepr(text: str) -> Any:
    """The sympy relation of a record's ``srepr``, read without ``eval``: only names in :data:`SREPR_NAMES`,
    literals and keyword flags; sympy's evaluation off (no big powers computed). ValueError otherwise."""
    import sympy as sp

    if not isinstance(text, str) or len(text) > SREPR_CHARS:
        raise ValueError("no srepr, or too long to render")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(f"not a sympy srepr: {type(exc).__name__}") from None
    if sum(1 for _ in ast.walk(tree)) > SREPR_NODES:
        raise ValueError("too large to render")

    def name(node: ast.Name) -> Any:
        if node.id not in SREPR_NAMES:
            raise ValueError(f"name {node.id!r} is not rendered")
        value = getattr(sp, node.id, None)
        if value is None:
            value = getattr(sp.S, node.id)
        return value

    def build(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str, bool)):
            if isinstance(node.value, str) and len(node.value) > 200:
                raise ValueError("a name too long to render")
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            return -node.operand.value
        if isinstance(node, ast.Tuple):
            return tuple(build(e) for e in node.elts)
        if isinstance(node, ast.Name):
            value = name(node)
            if isinstance(value, type) or value is sp.Function:  # a class named without a call: refused
                raise ValueError(f"name {node.id!r} is not rendered")
            return value
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name):
                func = name(node.func)
            elif isinstance(node.func, ast.Call) and isinstance(node.func.func, ast.Name) and node.func.func.id == "Function":
                func = build(node.func)  # an undefined function f = Function('f'), then f(x)
            else:
                raise ValueError("only calls of sympy names are rendered")
            args = [build(a) for a in node.args]
            kwargs = {}
            for kw in node.keywords:
                value = build(kw.value)
                if kw.arg is None or not isinstance(value, (bool, int, str)):
                    raise ValueError("only flag keywords are rendered")
                kwargs[kw.arg] = value
            return func(*args, **kwargs)
        raise ValueError(f"{type(node).__name__} is not rendered")

    try:
        with sp.evaluate(False):
            expr = build(tree.body)
    except ValueError:
        raise
    except (RecursionError, MemoryError):
        raise ValueError("too deeply nested to render") from None
    except Exception as exc:  # sympy refusing the arguments
        raise ValueError(f"sympy cannot rebuild it: {type(exc).__name__}") from None
    if not isinstance(expr, sp.Basic):
        raise ValueError("not a sympy expression")
    return expr


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


def mathml(srepr: str) -> str:
    """Presentation MathML (``<math display="block">...``) of a record's relation; ValueError if it cannot be built."""
    from sympy.printing.mathml import mathml as to_mathml

    expr = relation_from_srepr(srepr)
    try:
        body = to_mathml(expr, printer="presentation")
    except (RecursionError, MemoryError):
        raise ValueError("too deeply nested to render") from None
    except Exception as exc:  # the printer does not know a construct
        raise ValueError(f"the MathML printer failed: {type(exc).__name__}") from None
    try:
        root = ET.fromstring(f"<math display=\"block\">{_numeric_entities(body)}</math>")
    except ET.ParseError as exc:
        raise ValueError(f"the printer's MathML does not parse: {exc}") from None
    return ET.tostring(_clean(root), encoding="unicode", method="xml")


# -- the plot ---------------------------------------------------------------------------------------
def per_L(record: dict[str, Any]) -> dict[str, list[tuple[int, float, float]]]:
    """``method -> [(L, best lhs/rhs, best relative margin)]`` from the record's search (empty when the record
    predates ``by_L`` or searched nothing); rows that are not three numbers are skipped."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    by_method = record.get("search", {}).get("by_method", {})
    if not isinstance(by_method, dict):
        return out
    for method, info in by_method.items():
        rows = info.get("by_L") if isinstance(info, dict) else None
        if not isinstance(rows, list):
            continue
        clean = []
        for row in rows:
            if isinstance(row, list) and len(row) == 3:
                L, ratio, rel = (_float(v) for v in row)
                if L is not None and math.isfinite(L) and L >= 1 and ratio is not None and rel is not None:
                    clean.append((int(L), ratio, rel))
        if clean:
            out[str(method)] = sorted(clean)
    return out


def plot_png(record: dict[str, Any]) -> tuple[bytes | None, str]:
    """``(PNG bytes, caption)`` of the best lhs/rhs and relative margin against L; ``(None, why not)`` without data."""
    data = per_L(record)
    if not data:
        if any(isinstance(i, dict) and "by_L" in i for i in record.get("search", {}).get("by_method", {}).values()):
            return None, "No plot: the search recorded no finite values per range of L."
        return None, ("No plot: this record has no per-L search data (it was written before attnbounds kept the "
                      "tightest instance per range of L, or nothing was searched); rerun `attnbounds verify` to get it.")
    finite = {m: [(L, r, g) for L, r, g in rows if math.isfinite(r) or math.isfinite(g)] for m, rows in data.items()}
    if not any(finite.values()):
        return None, "No plot: every value the search recorded per range of L is infinite or undefined."
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        return None, "No plot: matplotlib is not installed (pip install matplotlib)."
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.6))
    for method, rows in sorted(finite.items()):
        Ls = [L for L, _, _ in rows]
        left.plot(Ls, [r if math.isfinite(r) else float("nan") for _, r, _ in rows], marker="o", ms=3, label=method)
        right.plot(Ls, [g if math.isfinite(g) else float("nan") for _, _, g in rows], marker="o", ms=3, label=method)
    for ax in (left, right):
        ax.set_xscale("log")
        ax.set_xlabel("context length L")
        ax.grid(True, alpha=0.3)
    left.set_yscale("symlog", linthresh=1e-2)
    left.axhline(1.0, color="k", lw=0.8, ls="--")
    left.set_ylabel("best lhs / rhs")
    left.set_title("tightest lhs/rhs per range of L", fontsize=10)
    right.axhline(0.0, color="k", lw=0.8, ls="--")
    right.set_ylabel("(rhs - lhs) / (|lhs| + |rhs|)")
    right.set_title("smallest relative margin (< 0: violated)", fontsize=10)
    left.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
    caption = ("The tightest instance each search method found in each octave of L (2^k <= L < 2^(k+1)), plotted at "
               "its L: lhs/rhs (left; above 1 with rhs > 0 means violated) and the relative margin (right).")
    return buf.getvalue(), caption


# -- sections ---------------------------------------------------------------------------------------
def _statement(r: dict[str, Any]) -> str:
    st = r.get("statement", {})
    try:
        math_html = mathml(st.get("srepr", ""))
        why = ""
    except ValueError as exc:
        math_html = ""
        why = f'<p class="note">(no MathML: {_e(exc)}; the formula is shown as text)</p>'
    out = [f"<p><strong>{_e(st.get('title', ''))}</strong></p>"]
    if math_html:
        out.append(f'<div class="formula">{math_html}</div>')
    out.append(f'<p>as text: <code>{_e(st.get("formula", ""))}</code></p>{why}')
    where = st.get("where") or {}
    if isinstance(where, dict) and where:
        out.append("<ul>" + "".join(f"<li><code>{_e(k)}</code>: {_e(v)}</li>" for k, v in where.items()) + "</ul>")
    hyps = r.get("hypotheses") or []
    if hyps:
        out.append("<p>Hypotheses:</p><ul>" + "".join(
            f"<li><code>{_e(h.get('id', ''))}</code>: {_e(h.get('description', ''))}</li>" for h in hyps
            if isinstance(h, dict)) + "</ul>")
    if st.get("notes"):
        out.append(f'<p class="note">{_e(st["notes"])}</p>')
    return "".join(out)


def _source(r: dict[str, Any]) -> str:
    st, paper = r.get("statement", {}), r.get("paper", {})
    cit = st.get("citation", {}) if isinstance(st.get("citation"), dict) else {}
    source = "the user's statements file" if st.get("source") == "user" else "the paper"
    sw = r.get("software", {}) if isinstance(r.get("software"), dict) else {}
    git = r.get("git", {}) if isinstance(r.get("git"), dict) else {}
    return _table([
        ("source", _e(source)),
        ("citation", _e(f"{cit.get('numbering', '')}, {cit.get('arxiv', '')} ({cit.get('version', '')})")),
        ("paper", _e(f"{paper.get('title', '')} ({paper.get('arxiv', '')}, {paper.get('version', '')})")),
        ("record hash", f'<code>{_e(r.get("content_hash", ""))}</code>'),
        ("software", _e(", ".join(f"{k} {v}" for k, v in sw.items() if v))),
        ("git", _e(f"{git.get('commit') or 'n/a'}{' (dirty)' if git.get('dirty') else ''}")),
    ])


def _certificate_rows(cert: dict[str, Any]) -> list[tuple[str, str]]:
    lo = cert.get("margin_lo_text", cert.get("margin_lo"))
    hi = cert.get("margin_hi_text", cert.get("margin_hi"))
    how = f"{cert.get('status', '')} by {cert.get('method', '')}"
    if cert.get("precision_bits"):
        how += f" at {cert['precision_bits']} bits"
    if cert.get("level") is not None:
        how += f" (Monte Carlo, level {cert['level']})"
    return [("lhs", f'<span class="mono">{_e(cert.get("lhs", "n/a"))}</span>'),
            ("rhs", f'<span class="mono">{_e(cert.get("rhs", "n/a"))}</span>'),
            ("margin rhs - lhs", f'<span class="mono">[{_e(lo)}, {_e(hi)}]</span>'), ("certificate", _e(how))]


def _instance_rows(inst: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [("L", _e(_num(inst.get("L")))), ("N", _e(_num(inst.get("N"))))]
    if inst.get("counts") is not None:
        rows.append(("token counts", _array(inst["counts"])))
    norm = inst.get("normaliser")
    if isinstance(norm, dict):
        params = norm.get("params", {}) if isinstance(norm.get("params"), dict) else {}
        shown = ", ".join(f"{k}={_num(v.get('values') if isinstance(v, dict) else v)}" for k, v in params.items())
        rows.append(("normaliser", _e(f"{norm.get('family', '')}({shown})")))
    for key, label in (("logits", "logits"), ("alpha", "weights"), ("x", "token vectors")):
        if inst.get(key) is not None:
            rows.append((label, f'<span class="mono">{_array(inst[key])}</span>'))
    return rows


def _counterexample(r: dict[str, Any]) -> str:
    cx = r.get("counterexample")
    if not isinstance(cx, dict):
        return "<p>None (no certified counterexample).</p>"
    inst = cx.get("instance", {}) if isinstance(cx.get("instance"), dict) else {}
    cert = cx.get("certificate", {}) if isinstance(cx.get("certificate"), dict) else {}
    rows = [("L of the counterexample", _e(_num(cx.get("L")))), *_instance_rows(inst)[1:], *_certificate_rows(cert)]
    if cx.get("smallest_violating_L_seen") is not None:
        rows.append(("smallest violating L seen", _e(_num(cx["smallest_violating_L_seen"]))))
    if cx.get("boundary"):
        rows.append(("on the boundary of the hypotheses", _e("; ".join(map(str, cx["boundary"])))))
    if cx.get("statistical"):
        rows.append(("statistical", "yes: a Monte Carlo interval, not interval arithmetic"))
    out = _table(rows)
    interior = cx.get("interior")
    if isinstance(interior, dict):
        icert = interior.get("certificate", {}) if isinstance(interior.get("certificate"), dict) else {}
        out += "<p>An interior counterexample (inside every hypothesis):</p>" + _table(
            [("L", _e(_num(interior.get("L")))), *_certificate_rows(icert)])
    out += _limits(cx.get("limit"))
    return out


def _limits(limits: Any) -> str:
    if not isinstance(limits, list) or not limits:
        return ""
    items = []
    for lim in limits:
        if isinstance(lim, dict):
            family = f"{_e(lim['family'])}: " if lim.get("family") else ""
            extra = "; ".join(_e(p) for p in (f"L0 = {_num(lim['L0'])}" if lim.get("L0") is not None else "",
                                                lim.get("limit") or "") if p)
            items.append(f"<li>{family}<strong>{_e(lim.get('status', ''))}</strong>{f' ({extra})' if extra else ''}"
                         f" {_e(lim.get('detail', ''))}</li>")
    return "<p>Along families of growing L:</p><ul>" + "".join(items) + "</ul>"


def _tightness(r: dict[str, Any]) -> str:
    t = r.get("tightness", {}) if isinstance(r.get("tightness"), dict) else {}
    rows = [("best lhs / rhs", _e(_num(t.get("best_ratio")))),
            ("best relative margin", _e(_num(t.get("best_margin")))),
            ("equality case", _e(_num(t.get("equality"))))]
    if isinstance(t.get("witness"), dict):
        rows += _instance_rows(t["witness"])
    if isinstance(t.get("certificate"), dict):
        rows += _certificate_rows(t["certificate"])
    return _table(rows) + _limits(t.get("limit"))


def _proof(r: dict[str, Any]) -> str:
    p = r.get("proof")
    if not isinstance(p, dict):
        return "<p>No derivation in <code>proofs/</code> for this reading.</p>"
    counts = ", ".join(f"{_e(_num(p.get(k)))} {label}" for k, label in (
        ("checked", "checked"), ("size_limited", "size-limited"), ("cited", "cited"),
        ("cited_unchecked", "cited on the citation alone"), ("prose", "prose")))
    out = [f"<p>Derivation <code>{_e(p.get('name', ''))}</code>: <strong>{_e(p.get('result', ''))}</strong>; "
           f"steps: {counts}.</p>", f"<p>Rests on: {_e(p.get('rests_on', ''))}</p>"]
    steps = p.get("steps")
    if isinstance(steps, list) and steps:
        items = []
        for s in steps:
            if isinstance(s, dict):
                ok = {True: "ok", False: "FAILED", None: "not checked"}.get(s.get("ok"), "?")
                items.append(f'<li><span class="cat">{_e(s.get("category", ""))}</span> ({_e(ok)}): {_e(s.get("text", ""))}</li>')
        out.append('<ol class="steps">' + "".join(items) + "</ol>")
    else:
        out.append('<p class="note">The record has no step list (written before records kept one); '
                   "<code>attnbounds prove -v</code> shows every step.</p>")
    premises = p.get("premises")
    if isinstance(premises, list) and premises:
        out.append("<p>Premises:</p><ul>" + "".join(
            f"<li><code>{_e(q.get('premise', ''))}</code> from <code>{_e(q.get('hypothesis', ''))}</code>"
            f"{'' if q.get('checked') else ' (read from the hypothesis)'}</li>" for q in premises if isinstance(q, dict)) + "</ul>")
    if p.get("size_limited_steps"):
        out.append("<p>Checked only at small sizes:</p><ul>" + "".join(
            f"<li>{_e(s)}</li>" for s in p["size_limited_steps"]) + "</ul>")
    return "".join(out)


def _search(r: dict[str, Any]) -> str:
    s = r.get("search", {}) if isinstance(r.get("search"), dict) else {}
    rng = s.get("L_range", {}) if isinstance(s.get("L_range"), dict) else {}

    def span(v: Any) -> str:
        return f"{_num(v[0])} to {_num(v[1])}" if isinstance(v, list) and len(v) == 2 else "none"

    out = [f"<p>Budget {_e(_num(s.get('budget_s')))} s, seed {_e(_num(s.get('seed')))}, "
           f"{_e(_num(s.get('tried')))} instances tried. L searched: dense {_e(span(rng.get('dense')))}, "
           f"token classes {_e(span(rng.get('classes')))}, all {_e(span(rng.get('all')))}.</p>"]
    by_method = s.get("by_method", {}) if isinstance(s.get("by_method"), dict) else {}
    if by_method:
        head = "<tr><th>method</th><th>tried</th><th>applicable</th><th>violations</th><th>L range</th>" \
               "<th>best lhs/rhs</th><th>best relative margin</th></tr>"
        body = "".join(
            f"<tr><td>{_e(m)}</td><td>{_e(_num(i.get('tried')))}</td><td>{_e(_num(i.get('applicable')))}</td>"
            f"<td>{_e(_num(i.get('violations')))}</td><td>{_e(span(i.get('L_range')))}</td>"
            f"<td>{_e(_num(i.get('best_ratio')))}</td><td>{_e(_num(i.get('best_margin')))}</td></tr>"
            for m, i in by_method.items() if isinstance(i, dict))
        out.append(f"<table>{head}{body}</table>")
    return "".join(out)


def _section(k: int, r: dict[str, Any], figure: str | None, caption: str) -> str:
    plot = (f'<figure><img src="{html.escape(figure, quote=True)}" alt="best lhs/rhs against L">'
            f"<figcaption class=\"note\">{_e(caption)}</figcaption></figure>") if figure else f'<p class="note">{_e(caption)}</p>'
    return (f'<section id="r{k}" data-id="{_e(r.get("id", ""))}" data-verdict="{_e(r.get("verdict", ""))}">'
            f'<h2><code>{_e(r.get("id", ""))}</code> {_badge(r.get("verdict"))}</h2>'
            f'<p>{_e(r.get("reason", ""))}</p>'
            f"<h3>Statement</h3>{_statement(r)}<h3>Source</h3>{_source(r)}"
            f"<h3>Certified counterexample</h3>{_counterexample(r)}<h3>Tightest instance</h3>{_tightness(r)}"
            f"<h3>Proof</h3>{_proof(r)}<h3>Search</h3>{_search(r)}{plot}"
            f'<p><a href="#top">back to the summary</a></p></section>')


def _summary(records: list[dict[str, Any]]) -> str:
    counts: dict[str, int] = {}
    for r in records:
        counts[str(r.get("verdict"))] = counts.get(str(r.get("verdict")), 0) + 1
    chips = "".join(f"<span>{_badge(v)} {n}</span>" for v, n in sorted(counts.items()))
    rows = "".join(
        f'<tr><td><a href="#r{k}"><code>{_e(r.get("id", ""))}</code></a></td><td>{_badge(r.get("verdict"))}</td>'
        f'<td><code>{_e(r.get("statement", {}).get("formula", ""))}</code></td>'
        f'<td>{_e(_num(r.get("tightness", {}).get("best_ratio")))}</td></tr>'
        for k, r in enumerate(records, 1))
    return (f'<p class="counts">{len(records)} records: {chips}</p>'
            f"<table><tr><th>id</th><th>verdict</th><th>formula</th><th>best lhs/rhs</th></tr>{rows}</table>")


def render(records: list[dict[str, Any]], figures: dict[int, tuple[str | None, str]], title: str) -> str:
    """The page (``figures``: record number -> (figure file name or None, caption))."""
    sections = "".join(_section(k, r, *figures.get(k, (None, ""))) for k, r in enumerate(records, 1))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_e(title)}</title><style>{CSS}</style></head>"
            f'<body><h1 id="top">{_e(title)}</h1>'
            f'<p class="note">Written by <code>attnbounds report</code>. Verdicts: PROVED (a derivation replays and the '
            f"search found nothing), VERIFIED (searched, nothing found: evidence, not a proof), REFUTED (a certified "
            f"counterexample), UNDECIDED, NOT-APPLICABLE, ERROR.</p>"
            f"{_summary(records)}{sections}</body></html>\n")


# -- the command ------------------------------------------------------------------------------------
def _out_dir(out: str | os.PathLike[str]) -> Path:
    """``out`` checked as an output folder: a directory (symlinks followed) or a new path under a folder."""
    if not str(out) or "\0" in str(out):
        raise InvalidArgument(f"--out: expected a folder path, got {str(out)!r}")
    target = Path(os.path.realpath(out))
    if target.exists() and not target.is_dir():
        raise InvalidArgument(f"--out {str(out)!r} is not a folder; attnbounds report writes into a folder (new or existing)")
    atomic.check_target(target / "index.html", "--out")
    return target


def write_report(records_path: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Write ``out/index.html`` and its figures for the records file ``records_path``; returns the page's path."""
    records = load(records_path)
    folder = _out_dir(out)
    figures: dict[int, tuple[str | None, str]] = {}
    pngs: dict[str, bytes] = {}
    for k, r in enumerate(records, 1):
        png, caption = plot_png(r)
        name = f"fig-{k:03d}.png" if png is not None else None
        if png is not None and name is not None:
            atomic.check_target(folder / name, "--out")
            pngs[name] = png
        figures[k] = (name, caption)
    page = render(records, figures, f"attnbounds records: {Path(records_path).name}")
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in pngs.items():
        atomic.write_bytes(folder / name, data)
    atomic.write_text(folder / "index.html", page)
    return folder / "index.html"
