"""PNG figures mirroring the paper's Figs. 2-4 (matplotlib, Agg backend; written atomically).

Every curve is in a legend, each bound beside the quantity it bounds (same colour, dotted), bands say what
they span, reference lines are drawn (slope 1 for distances against L, 1/T for gradients, the model's own
temperature, the paper's values) and a null is drawn for comparison where one was run.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from attnbounds.empirical.exp_critical import AT_CEILING, FOUND
from attnbounds.empirical.exp_separability import NEARLY_ONE
from attnbounds.empirical.headlines import HEADLINE_BOUND, LOW_T
from attnbounds.theory.io import atomic

NULL_COLOR = "0.45"
#: what the tensor names mean, for axis labels
VECTORS = {"values": "value vectors", "keys": "key vectors", "queries": "query vectors"}


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


def _null(results: dict[str, Any], name: str, experiment: str) -> tuple[str, dict[str, Any]] | None:
    """The first null (in the order given) that ran ``experiment``, as (null name, its results)."""
    for null, v in results.get("nulls", {}).items():
        if experiment in v["experiments"] and (name == "any" or null == name):
            return null, v["experiments"][experiment]
    return None


# -- Fig. 2a/b -------------------------------------------------------------------------------------------
def _distance_panel(ax: Any, exp: dict[str, Any], pairs: list[dict[str, Any]], key: str, null: Any,
                    slope_ref: bool) -> None:
    x = np.array([r[key] for r in pairs], float)
    J = exp.get("expectation", "J_scaled_weighted")
    # (series, label, colour, line style): each true distance with its bound, then the expectation term
    series = [("dtilde_R1", "R1: true $\\tilde d$ (sum of norms)", "C0", "-"),
              (HEADLINE_BOUND, f"R1: its Thm 1 bound {HEADLINE_BOUND[len('theorem1.fixed'):]}", "C0", ":"),
              ("dtilde_R2", "R2: true $\\tilde d$ (norm of sum)", "C1", "-"),
              ("theorem1.fixed[R2,g1,corrected]", "R2: its proved bound [R2,corrected]", "C1", ":"),
              (J, f"Thm 1 expectation term ({J})", "C2", "--")]
    for name, label, color, ls in series:
        if name not in pairs[0]["per_head"]:
            continue
        per_head = np.array([r["per_head"][name] for r in pairs])  # (points, heads)
        ax.plot(x, np.nanmean(per_head, axis=1), ls, color=color, marker="o", ms=3, label=label + ", mean over heads")
        if name == "dtilde_R1":
            lo, hi = np.nanpercentile(per_head, [25, 75], axis=1)
            ax.fill_between(x, lo, hi, color=color, alpha=0.15, lw=0, label="R1: interquartile range over heads")
    if null is not None:
        null_name, npairs = null
        by = {r[key]: r["mean_over_heads"]["dtilde_R1"] for r in npairs}
        xs = [v for v in x if v in by]
        ax.plot(xs, [by[v] for v in xs], "-.", color=NULL_COLOR, marker="x", ms=4,
                label=f"{null_name} null: true $\\tilde d$ R1, mean over heads")
    if slope_ref:
        y0 = float(np.nanmean(np.array([r["per_head"]["dtilde_R1"] for r in pairs])[0]))
        ax.plot(x, y0 * x / x[0], color="k", lw=0.8, ls=(0, (4, 3)), label="slope 1 ($\\tilde d \\propto L$), reference")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_ticks(ax.xaxis, x)
    ax.grid(alpha=0.3, which="both")


def _plain_ticks(axis: Any, values: Any) -> None:
    """Ticks at the measured values, written as plain numbers (not 2 x 10^1)."""
    from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

    axis.set_major_locator(FixedLocator(sorted(set(float(v) for v in values))))
    axis.set_minor_locator(NullLocator())
    fmt = ScalarFormatter()
    fmt.set_scientific(False)
    axis.set_major_formatter(fmt)


def fig2_distance(results: dict[str, Any], out: Path) -> list[Path]:
    exp = results["experiments"].get("distance")
    if not exp or not exp["pairs"]:
        return []
    exp = {**exp, "expectation": results["protocol"]["expectation"]}
    plt = _plt()
    N = exp["choices"]["N_fixed"]
    Lmax = max(exp["choices"]["L_grid"])
    null = _null(results, "random-init", "distance")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    by_L = [r for r in exp["pairs"] if r["N"] == N]
    by_N = [r for r in exp["pairs"] if r["L"] == Lmax]
    nL = (null[0], [r for r in null[1]["pairs"] if r["N"] == N]) if null else None
    nN = (null[0], [r for r in null[1]["pairs"] if r["L"] == Lmax]) if null else None
    _distance_panel(axes[0], exp, by_L, "L", nL, slope_ref=True)
    axes[0].set_xlabel("window length L (every query: rows of length 2..L)")
    axes[0].set_title(f"(a) N = {N}, varying L")
    _distance_panel(axes[1], exp, by_N, "N", nN, slope_ref=False)
    axes[1].set_xlabel("top-N")
    axes[1].set_title(f"(b) L = {Lmax}, varying N")
    x_i = VECTORS.get(exp["choices"]["tensor"], exp["choices"]["tensor"])
    for ax in axes:
        ax.set_ylabel(f"distance, mean over heads (x_i = {x_i})")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.suptitle(f"Fig. 2a/b: distance between context vector and non-selected tokens, {_model_label(results)}; "
                 f"{results['queries'].split(';')[0]}", fontsize=10)
    fig.tight_layout(rect=(0, 0.17, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=7.5, bbox_to_anchor=(0.5, 0.0))
    return [_save(fig, out / "fig2ab_distance.png")]


# -- Fig. 2c ---------------------------------------------------------------------------------------------
def fig2_critical(results: dict[str, Any], out: Path) -> list[Path]:
    exp = results["experiments"].get("critical")
    if not exp or not exp["per_L"]:
        return []
    plt = _plt()
    key = exp["expectation"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6))
    ax = axes[0]
    for k, r in enumerate(exp["per_L"]):
        p = np.asarray(r["scans"][key]["p_value"], float)
        ax.plot(np.asarray(r["N"]) / r["L"], np.maximum(p, 1e-300), marker=".", ms=3, color=f"C{k}", label=f"L={r['L']}")
    ax.axhline(exp["choices"]["ks_alpha"], color="k", ls="--", lw=1, label=f"alpha = {exp['choices']['ks_alpha']}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(top=1.5)
    ax.set_xlabel("N / L")
    ax.set_ylabel("KS p-value, per-head means: true vs expected")
    heads = exp.get("ks_resolution", {}).get("heads_per_sample")
    ax.set_title(f"KS test along N ({key}); {heads} heads per sample", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    ax = axes[1]
    Ls = np.array([r["L"] for r in exp["per_L"]], float)
    ceil = np.array([r["ceiling"] for r in exp["per_L"]], float)
    ax.plot(Ls, ceil, ":", color="0.6", label="scan ceiling (N = L/2)")
    markers = ["o", "s", "D", "^"]
    for k, e in enumerate(exp["fits"]):
        st = [r["scans"][e] for r in exp["per_L"]]
        off = 1 + 0.03 * (k - 1.5)  # readings side by side
        found = np.array([s["status"] == FOUND for s in st])
        Nc = np.array([s["critical_N"] or np.nan for s in st], float)
        lin = exp["fits"][e]["linear"]
        slope = f" (fit {lin['c']:.3f} L)" if lin is not None else ""
        if found.any():
            ax.plot(Ls[found] * off, Nc[found], markers[k % 4], ms=5, color=f"C{k}", label=f"critical N, {e}{slope}")
        at = np.array([s["status"] == AT_CEILING for s in st])
        if at.any():
            ax.plot(Ls[at] * off, ceil[at], markers[k % 4], ms=6, mfc="none", color=f"C{k}",
                    label=f"{e}: only at the ceiling (not fitted)")
        miss = np.array([s["status"] not in (FOUND, AT_CEILING) for s in st])
        if miss.any():
            ax.plot(Ls[miss] * off, ceil[miss] * 1.15, "^", ms=6, mfc="none", color=f"C{k}",
                    label=f"{e}: not found up to the ceiling")
    grid = np.geomspace(Ls.min() * 0.9, Ls.max() * 1.1, 50)
    fit = exp["fits"][key]["linear"]
    if fit is not None:
        ax.plot(grid, fit["c"] * grid, "-", color="C0", lw=1,
                label=f"fit {fit['c']:.3f} L ({key}, {exp['fits'][key]['found']} lengths found below the ceiling)")
    ax.plot(grid, 0.06 * grid, "--", color="C3", label="paper: 0.06 L")
    null = _null(results, "any", "critical")
    if null is not None:
        name, nexp = null
        xs, ys = [], []
        for r in nexp["per_L"]:
            s = r["scans"][key]
            xs.append(r["L"])
            ys.append(s["critical_N"] if s["status"] == FOUND else r["ceiling"] * (1.0 if s["status"] == AT_CEILING else 1.15))
        ax.plot(xs, ys, "x", color=NULL_COLOR, ms=6, label=f"{name} null, {key} (on the ceiling: found only there; x1.15: not found)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_ticks(ax.xaxis, Ls)
    ax.set_xlabel("L")
    ax.set_ylabel("critical N")
    ax.legend(fontsize=6.5, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    ax.set_title("(c) critical top-N, every reading of the expectation term", fontsize=9)
    fig.suptitle(f"Fig. 2c: critical top-N, {_model_label(results)}", fontsize=10)
    fig.tight_layout()
    return [_save(fig, out / "fig2c_critical_n.png")]


# -- Fig. 3 ----------------------------------------------------------------------------------------------
def fig3_separability(results: dict[str, Any], out: Path) -> list[Path]:
    exp = results["experiments"].get("separability")
    if not exp or not exp["per_N"]:
        return []
    plt = _plt()
    per_N = exp["per_N"]
    Ns = [r["N"] for r in per_N]
    pos = np.arange(len(Ns))
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.axhspan(0.70, 0.85, color="C2", alpha=0.12, label="paper: plateau 0.70-0.85")
    data = [np.asarray(r["per_head"]["Ns_frac"])[np.isfinite(r["per_head"]["Ns_frac"])] for r in per_N]
    box = ax.boxplot(data, positions=pos, widths=0.5, showfliers=True, patch_artist=False)
    box["boxes"][0].set_label("$N_s/N$ per head (box: quartiles over heads)")
    mx = [r["max_over_heads"]["Ns_frac"] for r in per_N]
    ax.plot(pos, mx, "-", color="k", marker="*", ms=7, label="$N_s/N$, max over heads (what the paper compares)")
    floor = -0.45
    for side, color, marker in (("upper", "C3", "^"), ("lower", "C0", "v")):
        vals = np.array([r["max_over_heads"][side] for r in per_N])
        clipped = f" (clipped at {floor})" if np.nanmin(vals) < floor else ""
        ax.plot(pos, np.maximum(vals, floor), "--", color=color, marker=marker,
                label=f"Thm 2 {side} bound [relaxed], max over heads{clipped}")
    vac = exp.get("vacuous", {})
    notes = []
    if vac.get("upper_nearly_1_for_N"):
        notes.append(f"upper bound >= {NEARLY_ONE} on every head for N in {vac['upper_nearly_1_for_N']} (smallest over "
                     f"heads {vac['upper_min']:.3f}): says almost nothing, N_s/N <= 1 anyway")
    if vac.get("lower_at_or_below_0_for_N"):
        notes.append(f"lower bound <= 0 on every head for N in {vac['lower_at_or_below_0_for_N']} (largest over heads "
                     f"{vac['lower_max']:.3f}): vacuous")
    sphere = [r["median_over_heads"]["Ns_frac_sphere_null"] for r in per_N]
    ax.plot(pos, sphere, "-.", color=NULL_COLOR, marker="x", label="null: same weights, x uniform on the sphere (median)")
    null = _null(results, "uniform", "separability")
    if null is not None:
        by = {r["N"]: r["median_over_heads"]["Ns_frac"] for r in null[1]["per_N"]}
        ax.plot(pos, [by.get(N, np.nan) for N in Ns], ":", color=NULL_COLOR, marker="+", ms=8,
                label="null: uniform attention (median over heads)")
    ax.set_xticks(pos, [str(n) for n in Ns])
    ax.set_xlabel("top-N")
    ax.set_ylabel("$N_s / N$")
    ax.set_ylim(floor - 0.05, 1.08)
    if notes:
        ax.text(0.01, 0.02, "\n".join(notes), transform=ax.transAxes, fontsize=7.5, color="C3", va="bottom",
                bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "C3"})
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    ax.set_title(f"Fig. 3: geometric separability, L = {exp['choices']['L']}, x = "
                 f"{VECTORS.get(exp['choices']['tensor'], exp['choices']['tensor'])} "
                 f"on the sphere (M = {exp['choices']['M']:g}), {_model_label(results)}", fontsize=9)
    return [_save(fig, out / "fig3_separability.png")]


# -- Fig. 4 ----------------------------------------------------------------------------------------------
EPS_STYLE = [("-", "o", 2.2, 6), ("--", "s", 1.4, 4), (":", "^", 1.4, 4)]


def fig4_gradients(results: dict[str, Any], out: Path) -> list[Path]:
    exp = results["experiments"].get("gradients")
    if not exp:
        return []
    plt = _plt()
    T = np.asarray(exp["T"], float)
    g = np.asarray(exp["max_over_heads"], float)
    fig, (ax, hx) = plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [2.2, 1]})
    ax.axvspan(*LOW_T, color="C2", alpha=0.08, label=f"range of the 1/T fit (T in [{LOW_T[0]}, {LOW_T[1]}))")
    for j, eps in enumerate(exp["eps"]):
        ls, mk, lw, ms = EPS_STYLE[j % len(EPS_STYLE)]
        ax.plot(T, g[:, j], ls=ls, marker=mk, lw=lw, ms=ms, mfc="none" if j else None, color=f"C{j}",
                label=f"g(T, eps={eps:g}), max over heads")
    proved = exp["envelopes"].get("corollary3[fd,corrected]")
    if proved is not None:
        for j, eps in enumerate(exp["eps"]):
            ax.plot(T, np.asarray(proved)[:, j], ":", color=f"C{j}", lw=1.0,
                    label=f"proved envelope min{{1/(2T), sqrt2/eps}}, eps={eps:g}")
    printed = exp["envelopes"].get("corollary3[fd]")
    if printed is not None:
        ax.plot(T, np.asarray(printed)[:, 0], "k--", lw=1.2, label="Cor. 3 as printed: min{1/(4T), sqrt 2} (every eps)")
    j0 = int(np.argmin(exp["eps"]))
    low = (T >= LOW_T[0]) & (T < LOW_T[1])
    if low.any():
        T0 = T[low][0]
        ref = g[low, j0][0] * T0 / T
        ax.plot(T, ref, color="0.3", lw=0.8, ls=(0, (1, 2)), label="slope -1 (1/T), reference")
    own = exp.get("own_temperature", {}).get("values", [])
    for k, t_own in enumerate(own[:3]):
        ax.axvline(t_own, color="C4", lw=1, ls="-.", label=f"the model's own temperature T = {t_own:.3g}" if k == 0 else None)
    null = _null(results, "random-init", "gradients")
    if null is not None:
        ax.plot(T, np.asarray(null[1]["max_over_heads"], float)[:, j0], "-", color=NULL_COLOR, lw=1, marker="x",
                ms=3, label=f"{null[0]} null: g(T, eps={exp['eps'][j0]:g}), max over heads")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"temperature T (logits: {exp['choices']['logits']} q.k)")
    ax.set_ylabel("g(T, eps)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6.5, loc="lower left")
    ax.set_title(f"Fig. 4: gradient sensitivity, L = {exp['choices']['L']}, {_model_label(results)}", fontsize=9)
    arg = np.asarray(exp["argmax_head"])
    H = results["model"]["n_head"]
    for j, eps in enumerate(exp["eps"]):
        ls, mk, lw, ms = EPS_STYLE[j % len(EPS_STYLE)]
        hx.step(T, arg[:, j] + 0.15 * j, where="mid", color=f"C{j}", ls=ls, lw=1.2, label=f"eps={eps:g}")
    hx.set_xscale("log")
    from matplotlib.ticker import MaxNLocator

    hx.yaxis.set_major_locator(MaxNLocator(integer=True))
    hx.set_xlabel("temperature T")
    hx.set_ylabel(f"head with the largest g (layer x {H} + head)")
    hx.set_title("which head attains the maximum", fontsize=9)
    hx.legend(fontsize=7)
    hx.grid(alpha=0.3)
    fig.tight_layout()
    return [_save(fig, out / "fig4_gradients.png")]


def all_figures(results: dict[str, Any], out: Path) -> list[Path]:
    paths: list[Path] = []
    for make in (fig2_distance, fig2_critical, fig3_separability, fig4_gradients):
        paths += make(results, out)
    return paths
