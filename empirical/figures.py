"""PNG figures mirroring the paper's Figs. 2-4 (matplotlib, Agg backend; written atomically)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from attnbounds.theory import atomic
from attnbounds.empirical.headlines import HEADLINE_BOUND


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return atomic.write_bytes(path, buf.getvalue())


def _model_label(results: dict[str, Any]) -> str:
    m = results["model"]
    return f"{m['name']} ({m['n_layer']}x{m['n_head']} heads)"


def _distance_panel(ax: Any, exp: dict[str, Any], pairs: list[dict[str, Any]], key: str, xlabel: str) -> None:
    x = [r[key] for r in pairs]
    series = [("dtilde_R1", "true $\\tilde d$ (R1)", "C0", "-"), ("dtilde_R2", "true $\\tilde d$ (R2)", "C1", "-"),
              (exp.get("expectation", "J_scaled_weighted"), "Thm 1 expectation term", "C2", "--"),
              (HEADLINE_BOUND, f"Thm 1 bound {HEADLINE_BOUND[len('theorem1.fixed'):]}", "C3", ":")]
    series.append(("theorem1.fixed[R2,g1,corrected]", "Thm 1 proved bound for R2", "C4", ":"))
    for name, label, color, ls in series:
        if name not in pairs[0]["per_head"]:
            continue
        per_head = np.array([r["per_head"][name] for r in pairs])  # (points, heads)
        mean = np.nanmean(per_head, axis=1)
        ax.plot(x, mean, ls, color=color, marker="o", ms=3, label=label)
        if name == "dtilde_R1":
            lo, hi = np.nanpercentile(per_head, [25, 75], axis=1)
            ax.fill_between(x, lo, hi, color=color, alpha=0.15, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("distance (mean over heads)")
    ax.grid(alpha=0.3, which="both")


def fig2_distance(results: dict[str, Any], out: Path) -> list[Path]:
    exp = results["experiments"].get("distance")
    if not exp:
        return []
    exp = {**exp, "expectation": results["protocol"]["expectation"]}
    plt = _plt()
    N = exp["choices"]["N_fixed"]
    Lmax = max(exp["choices"]["L_grid"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    by_L = [r for r in exp["pairs"] if r["N"] == N]
    by_N = [r for r in exp["pairs"] if r["L"] == Lmax]
    _distance_panel(axes[0], exp, by_L, "L", "sequence length L")
    axes[0].set_title(f"(a) N = {N}, varying L")
    _distance_panel(axes[1], exp, by_N, "N", "top-N")
    axes[1].set_title(f"(b) L = {Lmax}, varying N")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle(f"Fig. 2a/b: distance between context vector and non-selected tokens, {_model_label(results)}")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    return [_save(fig, out / "fig2ab_distance.png")]


def fig2_critical(results: dict[str, Any], out: Path) -> list[Path]:
    exp = results["experiments"].get("critical")
    if not exp:
        return []
    plt = _plt()
    key = exp["expectation"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for r in exp["per_L"]:
        axes[0].plot(np.asarray(r["N"]) / r["L"], r["scans"][key]["p_value"], marker=".", ms=3, label=f"L={r['L']}")
    axes[0].axhline(exp["choices"]["ks_alpha"], color="k", ls="--", lw=1, label=f"alpha={exp['choices']['ks_alpha']}")
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("N / L")
    axes[0].set_ylabel("KS p-value (true vs expected, over heads)")
    axes[0].legend(fontsize=7)
    axes[0].grid(alpha=0.3, which="both")
    axes[0].set_title("KS test along N")
    Ls = np.array([r["L"] for r in exp["per_L"]], float)
    Nc = np.array([np.nan if r["scans"][key]["critical_N"] is None else r["scans"][key]["critical_N"]
                   for r in exp["per_L"]], float)
    axes[1].plot(Ls, Nc, "o", color="C0", label="critical N (measured)")
    c = exp["fits"][key]["linear"]["c"]
    grid = np.linspace(0, Ls.max() * 1.05, 50)
    if np.isfinite(c):
        axes[1].plot(grid, c * grid, "-", color="C0", label=f"fit {c:.3f} L")
    axes[1].plot(grid, 0.06 * grid, "--", color="C3", label="paper: 0.06 L")
    axes[1].set_xlabel("L")
    axes[1].set_ylabel("critical N")
    axes[1].legend(fontsize=8)
    axes[1].grid(alpha=0.3)
    axes[1].set_title(f"(c) critical top-N ({key})")
    fig.suptitle(f"Fig. 2c: critical top-N, {_model_label(results)}")
    return [_save(fig, out / "fig2c_critical_n.png")]


def fig3_separability(results: dict[str, Any], out: Path) -> list[Path]:
    exp = results["experiments"].get("separability")
    if not exp:
        return []
    plt = _plt()
    per_N = exp["per_N"]
    Ns = [r["N"] for r in per_N]
    pos = np.arange(len(Ns))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    data = [np.asarray(r["per_head"]["Ns_frac"])[np.isfinite(r["per_head"]["Ns_frac"])] for r in per_N]
    ax.boxplot(data, positions=pos, widths=0.5, showfliers=True)
    ax.axhspan(0.70, 0.85, color="C2", alpha=0.12, label="paper: plateau 0.70-0.85")
    for side, color in (("lower", "C0"), ("upper", "C3")):
        med = [np.nanmedian(r["per_head"][side]) for r in per_N]
        ax.plot(pos, med, "--", color=color, marker="^" if side == "upper" else "v",
                label=f"Thm 2 {side} bound (median over heads)")
    ax.set_xticks(pos, [str(n) for n in Ns])
    ax.set_xlabel("top-N")
    ax.set_ylabel("$N_s / N$ per head")
    lowest = min([0.0] + [float(np.nanmedian(r["per_head"]["lower"])) for r in per_N])
    ax.set_ylim(max(-0.5, lowest - 0.05), 1.05)  # the lower bound can be negative (vacuous); shown down to -0.5
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax.set_title(f"Fig. 3: geometric separability, L = {exp['choices']['L']}, x = {exp['choices']['tensor']} "
                 f"on the sphere, {_model_label(results)}", fontsize=9)
    return [_save(fig, out / "fig3_separability.png")]


def fig4_gradients(results: dict[str, Any], out: Path) -> list[Path]:
    exp = results["experiments"].get("gradients")
    if not exp:
        return []
    plt = _plt()
    T = np.asarray(exp["T"], float)
    g = np.asarray(exp["max_over_heads"], float)
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for j, eps in enumerate(exp["eps"]):
        ax.plot(T, g[:, j], "-o", ms=3, color=f"C{j}", label=f"g(T, eps={eps:g}), max over heads")
    printed = exp["envelopes"].get("corollary3[fd]")
    if printed is not None:
        ax.plot(T, np.asarray(printed)[:, 0], "k--", lw=1.2, label="Cor. 3 as printed: min{1/(4T), sqrt 2}")
    proved = exp["envelopes"].get("corollary3[fd,corrected]")
    if proved is not None:
        for j, eps in enumerate(exp["eps"]):
            ax.plot(T, np.asarray(proved)[:, j], ":", color=f"C{j}", lw=1.2,
                    label="proved: min{1/(2T), sqrt2/eps}" if j == 0 else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"temperature T (logits: {exp['choices']['logits']})")
    ax.set_ylabel("g(T, eps)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title(f"Fig. 4: gradient sensitivity, L = {exp['choices']['L']}, {_model_label(results)}", fontsize=9)
    return [_save(fig, out / "fig4_gradients.png")]


def all_figures(results: dict[str, Any], out: Path) -> list[Path]:
    paths: list[Path] = []
    for make in (fig2_distance, fig2_critical, fig3_separability, fig4_gradients):
        paths += make(results, out)
    return paths
