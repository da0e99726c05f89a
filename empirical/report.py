"""report.md, report.html (figures inline, base64) and results.json, written atomically.

The first table of the report is the paper's headline numbers next to the measured ones.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

from attnbounds.theory import atomic


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
            rows.append([name, f"`{sid}`", t["applicable"], t["violated"], t["min_margin"], t["median_ratio"],
                         t["max_ratio"]])
    return rows


def _choices(results: dict[str, Any]) -> list[list[Any]]:
    rows = []
    for name, exp in results["experiments"].items():
        for k, v in exp.get("choices", {}).items():
            rows.append([name, k, json.dumps(v) if not isinstance(v, str) else v])
    return rows


def markdown(results: dict[str, Any], figures: list[Path]) -> str:
    m, t, tm = results["model"], results["text"], results.get("timing", {})
    head = _md_table(["claim", "paper", "measured", "verdict"],
                     [[r["claim"], r["paper"], r["measured"], f"**{r['verdict']}**"] for r in results["headlines"]])
    parts = [
        "# Limitations of Normalization in Attention: the paper's experiments on "
        f"`{m['name']}`",
        "",
        head,
        "",
        f"Model: **{m['name']}** (source {m['source']}, {m['n_layer']} layers x {m['n_head']} heads, "
        f"n_embd {m['n_embd']}, {m['n_params']:,} parameters; {m['path'] or ''}). The paper measured GPT-2 small "
        "(12 x 12 heads): verdicts speak for this model." + _tiny_note(m),
        f"Text: {t['path']} ({t['origin']}, sha256 {t['sha256'][:16]}..., {t['tokens']:,} tokens); "
        f"{results['windows']['count']} windows of {results['windows']['length']} tokens from token "
        f"{results['windows']['start']}. Protocol: {results['protocol']['name']}, queries "
        f"{results['protocol']['queries']}.",
        "",
        "## Verdict criteria",
        "",
        _md_table(["claim", "criterion"], [[r["claim"], r["criterion"]] for r in results["headlines"]]),
        "",
        "## Figures",
        "",
    ]
    parts += [f"![{p.stem}]({p.name})\n" for p in figures]
    parts += ["## The paper's statements on this model's instances", "",
              "Each registered reading evaluated on every (window, query, head) instance; margin = rhs - lhs "
              "(>= 0 holds), ratio = lhs / rhs. Theorem 2 bounds E[N_s]/N over random sphere embeddings; its rows "
              "put the observed N_s/N of the model's embeddings in place of the expectation, as the paper's Fig. 3 "
              "does, so a violation there is a disagreement with the figure, not a counterexample to the theorem.",
              "",
              _md_table(["experiment", "statement", "instances", "violated", "min margin", "median ratio",
                         "max ratio"], _statement_rows(results)), "",
              "## Choices the paper leaves open (parameters of this run)", "",
              _md_table(["experiment", "parameter", "value"], _choices(results)), "",
              "## Timing", "",
              _md_table(["step", "seconds"], [[k, v] for k, v in _flat(tm).items()]), "",
              "Every raw number and the full configuration are in `results.json`.", ""]
    return "\n".join(parts)


def _tiny_note(model: dict[str, Any]) -> str:
    t = model.get("tiny")
    if not t:
        return ""
    return (f" The embedded model was trained here on the text: {t['steps_done']} steps of "
            f"{t['spec']['seq_len']} tokens, final training loss {t['final_loss']:.2f}, held-out loss "
            f"{t['heldout_loss']:.2f} (seed {t['spec']['seed']}).")


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


def write_all(results: dict[str, Any], out: Path, *, figures: bool = True) -> dict[str, Path]:
    """Figures, results.json, report.md and report.html under ``out`` (each file written atomically)."""
    from attnbounds.empirical.figures import all_figures

    out.mkdir(parents=True, exist_ok=True)
    figs = all_figures(results, out) if figures else []
    results["outputs"] = {"figures": [p.name for p in figs], "report": ["report.md", "report.html"],
                          "results": "results.json"}
    paths = {"results": atomic.write_json(out / "results.json", results)}
    md = markdown(results, figs)
    paths["markdown"] = atomic.write_text(out / "report.md", md)
    paths["html"] = atomic.write_text(out / "report.html", html_page(md, figs))
    return paths


