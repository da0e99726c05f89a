"""The paper's headline numbers (section 3, Discussion) next to the measured ones and the nulls', with a verdict.

Each row applies one stated criterion to the model and to every null (``empirical.nulls``). Verdicts:
``reproduced`` (the model passes, no null does), ``does not discriminate`` (the model passes and so does a
null: the criterion says more about the architecture or the statistics than about what the model learned),
``not reproduced``, or ``not comparable`` (the experiment was not run, or the measurement cannot decide).
Verdicts speak for the model measured, not for GPT-2 in general.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from attnbounds.empirical import stats
from attnbounds.empirical.exp_critical import AT_CEILING, FOUND

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"
DOES_NOT_DISCRIMINATE = "does not discriminate"
HEADLINE_BOUND = "theorem1.fixed[R1,g1]"
#: the low-temperature range of the 1/T fit: below T = 0.01 the weights are one-hot and g saturates
LOW_T = (0.01, 0.1)


def _row(claim: str, paper: str, measured: str, passed: bool | None, criterion: str, **numbers: Any) -> dict[str, Any]:
    return {"claim": claim, "paper": paper, "measured": measured, "passed": passed, "criterion": criterion,
            "numbers": numbers}


def critical(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "critical top-N", "~0.06 L"
    crit = ("slope c of critical N = c L (least squares through 0, over the lengths whose N was found below the scan "
            "ceiling) in [0.03, 0.12], found below the ceiling for >= half the lengths")
    if exp is None:
        return _row(claim, paper, "not run", None, crit)
    key = exp["expectation"]
    fit = exp["fits"][key]
    ceiling = {r["L"]: r["ceiling"] for r in exp["per_L"]}

    def shown(r: dict[str, Any], e: str) -> str:
        s = r["scans"][e]
        if s["status"] == FOUND:
            return str(s["critical_N"])
        return f"only at the ceiling N={r['ceiling']}" if s["status"] == AT_CEILING else f"not found up to N={r['ceiling']}"

    listing = "; ".join(f"L={r['L']}: {shown(r, key)}" for r in exp["per_L"])
    readings = {e: {r["L"]: (r["scans"][e]["critical_N"] if r["scans"][e]["status"] == FOUND else None)
                    for r in exp["per_L"]} for e in exp["fits"]}
    slopes = {e: (f["linear"]["c"] if f["linear"] else None) for e, f in exp["fits"].items()}
    heads = exp.get("ks_resolution", {}).get("heads_per_sample")
    if fit["linear"] is None:
        return _row(claim, paper, f"no line fitted: found below the ceiling at {fit['found']} of {fit['of']} lengths "
                    f"({listing})", False, crit, c=None, critical_N=readings[key], readings=readings, slopes=slopes,
                    ceiling=ceiling, heads=heads)
    c = fit["linear"]["c"]
    ok = 0.03 <= c <= 0.12 and 2 * fit["found"] >= fit["of"]
    return _row(claim, paper, f"{c:.3f} L over {fit['found']} of {fit['of']} lengths (R^2 {fit['linear']['r2']:.2f}; "
                f"{listing})", ok, crit, c=c, critical_N=readings[key], readings=readings, slopes=slopes,
                ceiling=ceiling, heads=heads)


def separability(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "separability N_s/N", "falls until N ~ 16, then saturates at 0.70-0.85"
    crit = "median over heads of N_s/N for every N >= 16 within [0.70, 0.85] (+-0.02), spread across those N <= 0.10"
    if exp is None:
        return _row(claim, paper, "not run", None, crit)
    med = {r["N"]: r["median_over_heads"]["Ns_frac"] for r in exp["per_N"]}
    tail = {N: v for N, v in med.items() if N >= 16}
    curve = ", ".join(f"N={N}: {v:.2f}" for N, v in med.items())
    if not tail:
        return _row(claim, paper, curve, None, crit, medians=med)
    vals = np.array(list(tail.values()))
    ok = bool(np.all((vals >= 0.68) & (vals <= 0.87)) and vals.max() - vals.min() <= 0.10)
    top = [r["max_over_heads"]["Ns_frac"] for r in exp["per_N"] if r["N"] >= 16 and "max_over_heads" in r]
    best = f"; max over heads {np.mean(top):.2f}" if top else ""
    return _row(claim, paper, f"plateau {vals.mean():.2f} (median over heads, N >= 16{best}); {curve}", ok, crit,
                plateau=float(vals.mean()), medians=med, plateau_max_over_heads=float(np.mean(top)) if top else None)


def _g_curve(exp: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, float]:
    T = np.asarray(exp["T"], float)
    j = int(np.argmin(exp["eps"]))
    return T, np.asarray(exp["max_over_heads"], float)[:, j], float(exp["eps"][j])


def gradient_slope(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "gradient sensitivity, low T", "~1/T below T = 0.1"
    crit = (f"log-log slope of max-over-heads g(T, smallest eps) over {LOW_T[0]} <= T < {LOW_T[1]} in [-1.25, -0.75] "
            "(below T = 0.01 the weights are one-hot and g saturates)")
    if exp is None:
        return _row(claim, paper, "not run", None, crit)
    T, g, eps = _g_curve(exp)
    low = (T >= LOW_T[0]) & (T < LOW_T[1])
    fit = stats.fit_power_law(T[low], g[low])
    if fit["points"] < 3:
        return _row(claim, paper, f"{fit['points']} usable points in [{LOW_T[0]}, {LOW_T[1]})", None, crit, fit=fit)
    ok = -1.25 <= fit["b"] <= -0.75
    return _row(claim, paper, f"g ~ T^{fit['b']:.2f} (eps={eps:g}, R^2 {fit['r2']:.2f})", ok, crit, slope=fit["b"],
                fit=fit, fit_range=list(LOW_T))


def gradient_drop(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "gradient sensitivity, T >= 1", "~100x lower than below T = 0.1"
    crit = ("geometric mean of g over 0.01 <= T < 0.1 / geometric mean over 1 <= T < 10 (smallest eps, max over "
            "heads) within 10^(2 +- 0.5); a 1/T law gives exactly 100")
    if exp is None:
        return _row(claim, paper, "not run", None, crit)
    T, g, eps = _g_curve(exp)
    lo, hi = g[(T >= 0.01) & (T < 0.1)], g[(T >= 1) & (T < 10)]
    if lo.size == 0 or hi.size == 0 or np.any(lo <= 0) or np.any(hi <= 0):
        return _row(claim, paper, "T grid lacks points in [0.01, 0.1) and [1, 10), or g vanishes there", None, crit)
    ratio = float(np.exp(np.log(lo).mean() - np.log(hi).mean()))
    ok = 1.5 <= math.log10(ratio) <= 2.5
    return _row(claim, paper, f"{ratio:.3g}x (eps={eps:g})", ok, crit, ratio=ratio)


def distance(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "distance at N = 5", "grows ~linearly in L; Theorem 1 bound safe but conservative"
    crit = (f"log-log slope of mean dtilde (R1) vs L in [0.75, 1.25]; {HEADLINE_BOUND} never violated; "
            "median bound/true ratio >= 2")
    if exp is None:
        return _row(claim, paper, "not run", None, crit)
    N = exp["choices"]["N_fixed"]
    pts = sorted((r["L"], r["mean_over_heads"]["dtilde_R1"]) for r in exp["pairs"] if r["N"] == N)
    fit = stats.fit_power_law([L for L, _ in pts], [d for _, d in pts])
    tally = exp["statements"].get(HEADLINE_BOUND, {})
    med = tally.get("median_ratio")
    conservative = 1.0 / med if med else float("nan")
    if fit["points"] < 2 or not tally:
        return _row(claim, paper, "too few L values", None, crit)
    ok = 0.75 <= fit["b"] <= 1.25 and tally["violated"] == 0 and conservative >= 2
    measured = (f"dtilde ~ L^{fit['b']:.2f}; bound violated on {tally['violated']}/{tally['applicable']} rows, "
                f"median bound/true {conservative:.3g}")
    return _row(claim, paper, measured, ok, crit, slope=fit["b"], violated=tally["violated"],
                bound_over_true=conservative)


def multihead(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "multi-head coverage", "H = 3 heads at p = 0.8 cover ~99%"
    crit = "observed coverage of H-head groups within 0.05 of the independence prediction 1 - (1 - p)^H at observed p"
    if exp is None:
        return _row(claim, paper, "not run", None, crit)
    m = exp["multihead"]
    obs, pred = m.get("coverage_observed"), m.get("coverage_predicted_independent")
    arith = f"formula at p=0.8, H=3: {m['paper_example']['coverage']:.3f}"
    if obs is None or pred is None:
        return _row(claim, paper, f"{arith}; no head groups measured", None, crit)
    ok = abs(obs - pred) <= 0.05
    return _row(claim, paper, f"{arith}; observed p={m['p_observed']:.2f}, H={m['H']}: coverage {obs:.3f} vs "
                f"independence {pred:.3f}", ok, crit, observed=obs, predicted=pred)


#: the headline rows in the paper's order of claims: (criterion, experiment it reads)
CRITERIA: tuple[tuple[Callable[[dict[str, Any] | None], dict[str, Any]], str], ...] = (
    (critical, "critical"), (separability, "separability"), (gradient_slope, "gradients"),
    (gradient_drop, "gradients"), (distance, "distance"), (multihead, "separability"))


def rows_for(experiments: dict[str, Any]) -> list[dict[str, Any]]:
    """Every criterion on one set of experiment results (the model's or a null's)."""
    return [fn(experiments.get(name)) for fn, name in CRITERIA]


def verdict(row: dict[str, Any], null_rows: dict[str, dict[str, Any]]) -> str:
    if row["passed"] is None:
        return NOT_COMPARABLE
    if not row["passed"]:
        return NOT_REPRODUCED
    return DOES_NOT_DISCRIMINATE if any(r["passed"] for r in null_rows.values()) else REPRODUCED


def table(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The headline rows: the model's measurement and verdict, and each null's measurement and pass/fail."""
    model = rows_for(results["experiments"])
    per_null = {name: rows_for(n["experiments"]) for name, n in results.get("nulls", {}).items()}
    out = []
    for k, row in enumerate(model):
        nulls_k = {name: rows[k] for name, rows in per_null.items()}
        row = {**row, "verdict": verdict(row, nulls_k),
               "nulls": {name: {"measured": r["measured"], "passed": r["passed"], "numbers": r["numbers"]}
                         for name, r in nulls_k.items()}}
        out.append(row)
    return out
