"""report.md, report.html (figures inline, base64) and results.json, published whole.

The report opens with what was measured (model, held-out perplexity, split, queries, windows, nulls: the
verdicts speak for this model) and the paper's headline numbers next to the measured ones and the nulls'.
Everything is built in a temporary folder next to ``--out`` and moved into place at the end: an existing
``--out`` is replaced whole or left whole (Ctrl-C, a full disk), never mixed.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

from attnbounds.empirical.exp_critical import AT_CEILING, FOUND
from attnbounds.theory.io import atomic
from attnbounds.theory.mathematics.errors import InvalidArgument


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _md_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _statement_rows(results: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, exp in results["experiments"].items():
        for sid, t in exp.get("statements", {}).items():
            rows.append([name, f"`{sid}`", t["instances"], t["violated"], t["at_equality"], t["min_margin"],
                         t["median_ratio"], t["max_ratio"]])
    return rows


def _choices(results: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, exp in results["experiments"].items():
        for k, v in exp.get("choices", {}).items():
            rows.append([name, k, json.dumps(v) if not isinstance(v, str) else v])
    return rows


def _checks(results: dict[str, Any]) -> list[list[Any]]:
    seen, rows = set(), []
    for name, exp in results["experiments"].items():
        c = exp.get("checks")
        if not c or id(c) in seen:
            continue
        seen.add(id(c))
        na = sum(c["not_applicable"].values())
        rows.append([name, c["worst"], c["numbers_checked"], na])
    return rows


def model_line(results: dict[str, Any]) -> str:
    """Model, perplexity, split, queries, windows and nulls in two sentences (the report and the terminal)."""
    m, w = results["model"], results["windows"]
    t = m.get("training")
    heads = f"{m['n_layer']} layers x {m['n_head']} heads = {m['n_layer'] * m['n_head']} heads"
    if t:
        unk = t.get("heldout_unknown_fraction")
        ppl = (f"held-out perplexity {t['heldout_perplexity']:.1f} (loss {t['heldout_loss']:.2f} nats over "
               f"{t['heldout_windows']} windows of {t['spec']['seq_len']} held-out tokens"
               + (f"; {100 * unk:.1f} % of them outside its vocabulary" if unk else "") + ")"
               if t.get("heldout_perplexity") else "held-out perplexity not measured")
        trained = (f"trained here for {t['steps_done']} steps ({t['tokens_seen']:,} tokens, {t['seconds'] / 60:.0f} min "
                   f"on {t['threads']} threads), {ppl}")
    else:
        trained = "trained elsewhere (perplexity not measured here)"
    nulls = results.get("nulls", {})
    null_text = (", ".join(nulls) + f" (first {next(iter(nulls.values()))['windows']} windows)") if nulls else "none"
    return (f"Model **{m['name']}** ({heads}, {m['n_params']:,} parameters), {trained}. "
            f"Windows: {w['count']} of {max(w['lengths'])} tokens, {w['alignment']}, {w['layout']}, from "
            f"{w['region']['split']}. Queries: {results['queries']}. Nulls: {null_text}. "
            "The paper measured GPT-2 small (12 x 12 heads): **verdicts speak for this model**.")


def _null_cell(row: dict[str, Any]) -> str:
    if not row.get("nulls"):
        return "-"
    return "; ".join(f"{name}: {'passes' if r['passed'] else 'fails' if r['passed'] is False else 'n/a'} "
                     f"({r['measured']})" for name, r in row["nulls"].items())


def _critical_table(exp: dict[str, Any], null_exps: dict[str, dict[str, Any]]) -> str:
    """Every reading's critical N side by side (and the nulls' for the headline reading)."""
    readings = list(exp["fits"])
    key = exp["expectation"]

    def cell(r: dict[str, Any], e: str) -> str:
        s = r["scans"][e]
        return str(s["critical_N"]) if s["status"] == FOUND else \
            f"{r['ceiling']} (ceiling)" if s["status"] == AT_CEILING else f"none <= {r['ceiling']}"

    header = ["L", *[f"`{e}`" for e in readings], *[f"{n} null (`{key}`)" for n in null_exps]]
    rows = []
    by_L = {name: {r["L"]: r for r in n["per_L"]} for name, n in null_exps.items()}
    for r in exp["per_L"]:
        rows.append([r["L"], *[cell(r, e) for e in readings],
                     *[cell(by_L[n][r["L"]], key) if r["L"] in by_L[n] else "-" for n in null_exps]])
    slopes = ["slope c (found below ceiling)",
              *[f"{f['linear']['c']:.3f} ({f['found']}/{f['of']})" if f["linear"] else f"no fit ({f['found']}/{f['of']})"
                for f in exp["fits"].values()], *["" for _ in null_exps]]
    rows.append(slopes)
    res = exp.get("ks_resolution", {})
    note = (f"Each KS sample holds {res.get('heads_per_sample')} per-head means: the statistic moves in steps of "
            f"1/{res.get('heads_per_sample')}, so a decision can rest on a few heads. 'none <= N' = not found up to "
            "the scan ceiling; '(ceiling)' = found only at the ceiling (never fitted).")
    return _md_table(header, rows) + "\n\n" + note


def markdown(results: dict[str, Any], figures: list[Path]) -> str:
    tm = results.get("timing", {})
    head = _md_table(["claim", "paper", "measured", "nulls", "verdict"],
                     [[r["claim"], r["paper"], r["measured"], _null_cell(r), f"**{r['verdict']}**"]
                      for r in results["headlines"]])
    t = results["text"]
    parts = [
        "# Limitations of Normalization in Attention: the paper's experiments on "
        f"`{results['model']['name']}`",
        "",
        model_line(results),
        "",
        head,
        "",
        "'does not discriminate': the model passes the criterion and so does a null (random initial weights, "
        "shuffled tokens or uniform attention), so passing says little about what the model learned.",
        "",
        f"Text: {t['path']} ({t['origin']}, sha256 {t['sha256'][:16]}..., {t['tokens']:,} tokens, "
        f"{t['chapters']} chapter headings). Protocol: {results['protocol']['name']}.",
        "",
    ]
    crit = results["experiments"].get("critical")
    if crit:
        nulls = {n: v["experiments"]["critical"] for n, v in results.get("nulls", {}).items()
                 if "critical" in v["experiments"]}
        parts += ["## Critical top-N, every reading", "", _critical_table(crit, nulls), ""]
    parts += [
        "## Verdict criteria",
        "",
        _md_table(["claim", "criterion"], [[r["claim"], r["criterion"]] for r in results["headlines"]]),
        "",
        "## Figures",
        "",
    ]
    parts += [f"![{p.stem}]({p.name})\n" for p in figures]
    parts += ["## The paper's statements on this model's instances", "",
              "Each registered reading evaluated by its own formula on every (window, query, head) instance; margin "
              "= rhs - lhs (>= 0 holds), ratio = lhs / rhs (median from a histogram of log10 ratios in bins of "
              "0.001); 'violated' counts margins below 0 by more than 1e-12 of the sides, 'at equality' the float64 "
              "rounding at an equality case. Theorem 2 bounds E[N_s]/N over random sphere embeddings; its rows put the observed N_s/N of "
              "the model's embeddings in place of the expectation, as the paper's Fig. 3 does, so a violation there "
              "is a disagreement with the figure, not a counterexample to the theorem.",
              "",
              _md_table(["experiment", "statement", "instances", "violated", "at equality (rounding)", "min margin",
                         "median ratio", "max ratio"], _statement_rows(results)), "",
              "## Kernels against theory", "",
              "Sampled rows of every layer record recomputed by the float forms of the theory quantities and "
              "statements:", "",
              _md_table(["experiment", "largest relative deviation", "numbers checked", "hypotheses failing"],
                        _checks(results)), "",
              "## Choices the paper leaves open (parameters of this run)", "",
              _md_table(["experiment", "parameter", "value"], _choices(results)), "",
              "## Timing", "",
              _md_table(["step", "seconds"], [[k, v] for k, v in _flat(tm).items()]), "",
              "Every raw number and the full configuration are in `results.json`.", ""]
    return "\n".join(parts)


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def html_page(markdown_text: str, figures: list[Path]) -> str:
    """A self-contained HTML page: tables and text from the Markdown, figures inline as base64 PNG."""
    images = {p.name: base64.b64encode(p.read_bytes()).decode("ascii") for p in figures}
    body: list[str] = []
    table: list[str] = []

    def inline(text: str) -> str:
        esc = html.escape(text)
        esc = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", esc)
        return re.sub(r"`(.+?)`", r"<code>\1</code>", esc)

    def flush() -> None:
        if not table:
            return
        rows = [r.strip().strip("|").split(" | ") for r in table if not r.startswith("|---")]
        out = ["<table>", "<tr>" + "".join(f"<th>{inline(c)}</th>" for c in rows[0]) + "</tr>"]
        out += ["<tr>" + "".join(f"<td>{inline(c.replace(chr(92) + '|', '|'))}</td>" for c in r) + "</tr>"
                for r in rows[1:]]
        body.append("\n".join(out + ["</table>"]))
        table.clear()

    for line in markdown_text.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush()
        if line.startswith("![") and "](" in line:
            name = line[line.index("](") + 2: line.rindex(")")]
            if name in images:
                body.append(f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{images[name]}">'
                            f"<figcaption>{html.escape(name)}</figcaption></figure>")
        elif line.startswith("## "):
            body.append(f"<h2>{inline(line[3:])}</h2>")
        elif line.startswith("# "):
            body.append(f"<h1>{inline(line[2:])}</h1>")
        elif line.strip():
            body.append(f"<p>{inline(line)}</p>")
    flush()
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto;padding:1em}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;"
             "font-size:90%;text-align:left}img{max-width:100%}code{font-size:90%}")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>attnbounds empirical report</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def check_out(out: str | os.PathLike[str]) -> Path:
    """``--out`` checked before any work: a folder (replaced whole at the end) or a new path in a writable folder."""
    if not str(out) or "\0" in str(out):
        raise InvalidArgument(f"--out: expected a folder path, got {str(out)!r}")
    target = Path(os.path.realpath(out))
    if target.exists() and not target.is_dir():
        raise InvalidArgument(f"--out {str(out)!r} is a file; give a folder (new or existing, replaced whole)")
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidArgument(f"--out {str(out)!r}: cannot create folders in {str(parent)!r}")
    return target


def publish(built: Path, out: Path) -> None:
    """Move the folder ``built`` to ``out``, replacing an existing ``out`` whole; Ctrl-C is held off meanwhile."""
    main = threading.current_thread() is threading.main_thread()
    if main:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / out.name)
            os.replace(built, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(built, out)
    finally:
        if main:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def write_all(results: dict[str, Any], out: Path, *, figures: bool = True) -> dict[str, Path]:
    """Figures, results.json, report.md and report.html, built next to ``out`` and then moved into place."""
    from attnbounds.empirical.figures import all_figures

    out = check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    built = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        figs = all_figures(results, built) if figures else []
        results["outputs"] = {"figures": [p.name for p in figs], "report": ["report.md", "report.html"],
                              "results": "results.json"}
        atomic.write_json(built / "results.json", results)
        md = markdown(results, figs)
        atomic.write_text(built / "report.md", md)
        atomic.write_text(built / "report.html", html_page(md, figs))
        os.chmod(built, 0o777 & ~_umask())
        publish(built, out)
    finally:
        shutil.rmtree(built, ignore_errors=True)
    names = {"results": "results.json", "markdown": "report.md", "html": "report.html"}
    return {k: out / v for k, v in names.items()}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
