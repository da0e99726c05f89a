"""A profile's JSON (``attnbounds profile --json``) read back and shown in a report: Markdown and HTML.

:func:`load` reads a profile file (one profile, or ``--compare``'s several) and checks its shape; :func:`table_markdown`
is the side-by-side table (one column per normaliser, one row per profile row); :func:`alternatives_markdown` and
:func:`alternatives_html` are the paper's closing explanation of the alternatives to softmax
(:data:`attnbounds.theory.io.paper.ALTERNATIVES`) with, per claim, the profile rows that bear on it (linked to the
rows in HTML); :func:`html_section` is the report's profile section. Everything read from the file is untrusted
text: escaped, never evaluated.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from attnbounds.theory.io import paper
from attnbounds.theory.mathematics.errors import InvalidArgument

KINDS = ("attnbounds.profile", "attnbounds.profile.compare")
#: the largest profile file read, in bytes (every record of every row is in it)
MAX_BYTES = 256 << 20


def load(path: str | Path) -> dict[str, Any]:
    """The profile file at ``path`` as ``{"profiles": [...], "missing": [...], "seconds": ...}`` (one profile is a
    list of one); :class:`InvalidArgument` naming what is wrong."""
    p = Path(path)
    if not p.is_file():
        raise InvalidArgument(f"--profile {str(path)!r} does not exist or is not a regular file")
    if p.stat().st_size > MAX_BYTES:
        raise InvalidArgument(f"--profile {str(path)!r} is larger than {MAX_BYTES >> 20} MiB")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"--profile {str(path)!r} is not JSON: {exc}") from None
    return normalise(data, str(path))


def normalise(data: Any, where: str = "profile") -> dict[str, Any]:
    """``data`` (a profile's or a comparison's ``to_json()``) in the comparison's shape, its fields checked."""
    if not isinstance(data, dict) or data.get("kind") not in KINDS:
        raise InvalidArgument(f"{where}: not a profile written by attnbounds profile --json (kind must be one of "
                              f"{', '.join(KINDS)})")
    profiles = [data] if data["kind"] == KINDS[0] else data.get("profiles")
    if not isinstance(profiles, list) or not profiles:
        raise InvalidArgument(f"{where}: no profiles in it")
    for p in profiles:
        if not isinstance(p, dict) or not isinstance(p.get("rows"), list) or not isinstance(p.get("normaliser"), str):
            raise InvalidArgument(f"{where}: a profile without a normaliser name or rows")
        for r in p["rows"]:
            if not isinstance(r, dict) or not all(isinstance(r.get(k), str) for k in ("key", "title", "verdict",
                                                                                      "finding", "reason")):
                raise InvalidArgument(f"{where}: a row of {p['normaliser']!r} lacks key, title, verdict, finding or "
                                      "reason")
    missing = data.get("missing", []) if data["kind"] == KINDS[1] else []
    return {"profiles": profiles, "missing": [str(m) for m in missing if isinstance(m, str)],
            "seconds": data.get("seconds")}


def _num(v: Any, digits: int) -> str:
    return "open" if v is None else f"{float(v):.{digits}g}"


def bracket_text(row: Mapping[str, Any], digits: int = 7) -> str:
    """``[lower, upper]`` of a row, each side marked P (PROVED there) or R (REFUTED there), ``open`` without a record."""
    lo, hi, side = row.get("lower"), row.get("upper"), row.get("proved_side")
    if lo is None and hi is None:
        return "n/a"

    def mark(v: Any, which: str) -> str:
        if v is None or not side:
            return _num(v, digits)
        return f"{_num(v, digits)} {'P' if which == side else 'R'}"

    return f"[{mark(lo, 'lower')}, {mark(hi, 'upper')}]"


def cell(row: Mapping[str, Any]) -> str:
    """A row's text in the side-by-side table: the bracket, the verdict and the finding (the escape row: its finding)."""
    if row.get("key") == "vanish.escape":
        return str(row["finding"])
    label = "" if row.get("certified", True) else " (float only)"
    return f"{bracket_text(row, 6)} {row['verdict']}{label}; {row['finding']}"


def md(text: Any) -> str:
    """``text`` on one line, runs of white space as one space, as literal Markdown for a paragraph or a table cell
    (:func:`~attnbounds.theory.io.markdown.markdown_text`, which already writes a table's bar as ``\\|``)."""
    from attnbounds.theory.io.markdown import markdown_text

    return markdown_text(" ".join(str(text).split()))


def table_markdown(profiles: list[Mapping[str, Any]], missing: Iterable[str] = (), seconds: float | None = None) -> str:
    """The profiles side by side in Markdown (one column per normaliser)."""
    if not profiles:
        return "(no profile)\n"
    p0 = profiles[0]
    keys: list[str] = []
    titles: dict[str, str] = {}
    for p in profiles:
        for r in p["rows"]:
            if r["key"] not in titles:
                keys.append(r["key"])
                titles[r["key"]] = r["title"]
    took = "" if seconds is None else f"; {float(seconds):.0f} s in all"
    lines = [f"Logits in [-a, a], a = {float(p0['a']):g}, T = {float(p0['T']):g}; budget {float(p0['budget_s']):g} s "
             f"per check, at most {p0['max_checks']} checks per row, rtol {float(p0['rtol']):g}, seed {p0['seed']}"
             f"{took}. Brackets [lower, upper]: P = PROVED there (every L), R = REFUTED there (certified "
             "counterexample), open = no record.", "",
             "| row | " + " | ".join(md(p["normaliser"]) for p in profiles) + " |",
             "|---" * (len(profiles) + 1) + "|"]
    for key in keys:
        cells = []
        for p in profiles:
            row = next((r for r in p["rows"] if r["key"] == key), None)
            cells.append("n/a" if row is None else md(cell(row)))
        lines.append(f"| {md(titles[key])} | " + " | ".join(cells) + " |")
    params = "; ".join(f"{p['normaliser']}: " + ", ".join(f"{k} = {float(v):g}" for k, v in sorted(p["params"].items()))
                       for p in profiles if p.get("params"))
    if params:
        lines += ["", f"Parameters: {md(params)}."]
    uncertified = [p["normaliser"] for p in profiles if not p.get("certified", True)]
    if uncertified:
        lines += ["", f"Float only (Python functions, nothing certified): {md(', '.join(uncertified))}."]
    missing = list(missing)
    if missing:
        lines += ["", f"Not in the registry (not profiled): {md(', '.join(missing))}."]
    return "\n".join(lines) + "\n"


def _profile_of(profiles: list[Mapping[str, Any]], names: tuple[str, ...]) -> Mapping[str, Any] | None:
    return next((p for p in profiles if p["normaliser"] in names), None)


def anchor(normaliser: str, key: str) -> str:
    """The HTML id of a profile row."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in normaliser)
    return f"profile-{safe}-{key}"


def alternatives_markdown(data: Mapping[str, Any]) -> str:
    """The paper's explanation of the alternatives, each claim with the profile rows that bear on it."""
    profiles = data["profiles"]
    lines = ["| the paper's explanation of the alternatives | profile rows that bear on it |", "|---|---|"]
    for alt in paper.ALTERNATIVES:
        p = _profile_of(profiles, alt.names)
        if p is None:
            rows = f"not profiled ({md(', '.join(alt.names))} not in the profile file)"
        else:
            found = [r for r in p["rows"] if r["key"] in alt.rows]
            rows = "<br>".join(f"{md(r['title'])}: {md(r['verdict'])} {md(bracket_text(r, 6))}, "
                               f"{md(r['finding'])}" for r in found) or "none of its rows were run"
        lines.append(f"| {md(alt.name)}: {md(alt.claim)} | {rows} |")
    return "\n".join(lines) + "\n"


def markdown(data: Mapping[str, Any]) -> str:
    """The profile section of a Markdown report: the alternatives, then the side-by-side table."""
    return ("## The alternatives to softmax, profiled\n\n" + alternatives_markdown(data) + "\n"
            + table_markdown(data["profiles"], data.get("missing", ()), data.get("seconds")))


def alternatives_html(data: Mapping[str, Any]) -> str:
    e = html.escape
    profiles = data["profiles"]
    body = []
    for alt in paper.ALTERNATIVES:
        p = _profile_of(profiles, alt.names)
        if p is None:
            rows = f'<span class="note">not profiled ({e(", ".join(alt.names))} not in the profile file)</span>'
        else:
            found = [r for r in p["rows"] if r["key"] in alt.rows]
            rows = "<ul>" + "".join(
                f'<li><a href="#{e(anchor(p["normaliser"], r["key"]))}">{e(r["title"])}</a> {e(r["verdict"])} '
                f"{e(bracket_text(r, 6))}: {e(r['finding'])}</li>" for r in found) + "</ul>" if found else "none"
        body.append(f"<tr><td><b>{e(alt.name)}</b>: {e(alt.claim)}</td><td>{rows}</td></tr>")
    return ('<table class="erratum"><tr><th>the paper\'s explanation of the alternatives</th><th>profile rows that '
            "bear on it</th></tr>" + "".join(body) + "</table>")


def html_section(data: Mapping[str, Any]) -> str:
    """The report's profile section: the alternatives (linked to the rows), then each profile's table."""
    e = html.escape
    parts = ['<h2 id="profile">The alternatives to softmax, profiled</h2>',
             '<p class="note">Written by <code>attnbounds profile --json</code>. Per claim of the paper\'s closing '
             "explanation of the alternatives, the rows of the normaliser's profile that bear on it. Brackets "
             "[lower, upper]: P = PROVED there (every L), R = REFUTED there (a certified counterexample), open = no "
             "record.</p>", alternatives_html(data)]
    for p in data["profiles"]:
        head = (f"{p['normaliser']}: a = {float(p['a']):g}, T = {float(p['T']):g}"
                + ("" if p.get("certified", True) else " (float only: a Python function, nothing certified)"))
        rows = []
        for r in p["rows"]:
            refs = "<br>".join(f"{e(str(x.get('verdict')))} <code>{e(str(x.get('id')))}</code> "
                               f"({e(str(x.get('content_hash', ''))[:16])})" for x in r.get("records", [])
                               if isinstance(x, dict)) or "none"
            rows.append(f'<tr id="{e(anchor(p["normaliser"], r["key"]))}"><td>{e(r["title"])}</td>'
                        f"<td>{e(r['verdict'])}</td><td>{e(bracket_text(r))}</td><td>{e(r['finding'])}</td>"
                        f"<td>{refs}</td><td>{e(r['reason'][:400])}</td></tr>")
        parts.append(f"<h3>{e(head)}</h3><table><tr><th>row</th><th>verdict</th><th>bracket</th><th>finding</th>"
                     f"<th>records</th><th>why a side is open</th></tr>{''.join(rows)}</table>")
    if data.get("missing"):
        parts.append(f'<p class="note">Not in the registry (not profiled): {e(", ".join(data["missing"]))}.</p>')
    return "".join(parts)


__all__ = ["load", "normalise", "table_markdown", "alternatives_markdown", "alternatives_html", "html_section",
           "markdown", "cell", "bracket_text", "anchor"]
