"""The paper's headline numbers (section 3, Discussion) next to the measured ones, with a verdict.

Verdicts: ``reproduced``, ``not reproduced``, or ``not comparable`` (the experiment was not run,
or the measurement cannot decide). Each row states the criterion it applies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from attnbounds.empirical import stats

REPRODUCED, NOT_REPRODUCED, NOT_COMPARABLE = "reproduced", "not reproduced", "not comparable"
HEADLINE_BOUND = "theorem1.fixed[R1,g1]"


def _row(claim: str, paper: str, measured: str, verdict: str, criterion: str, **numbers: Any) -> dict[str, Any]:
    return {"claim": claim, "paper": paper, "measured": measured, "verdict": verdict, "criterion": criterion,
            "numbers": numbers}


def critical(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "critical top-N", "~0.06 L"
    crit = "slope c of critical N = c L (least squares through 0) in [0.03, 0.12], found for >= half the L values"
    if exp is None:
        return _row(claim, paper, "not run", NOT_COMPARABLE, crit)
    key = exp["expectation"]
    fit = exp["fits"][key]
    found = {r["L"]: r["scans"][key]["critical_N"] for r in exp["per_L"]}
    c = fit["linear"]["c"]
    listing = ", ".join(f"L={L}: {'>' + str(max(r['N'])) if n is None else n}"
                        for (L, n), r in zip(found.items(), exp["per_L"]))
    if fit["found"] == 0:
        return _row(claim, paper, f"never indistinguishable within N <= {exp['choices']['max_frac']} L ({listing})",
                    NOT_REPRODUCED, crit, c=None, critical_N=found)
    ok = 0.03 <= c <= 0.12 and 2 * fit["found"] >= fit["of"]
    return _row(claim, paper, f"{c:.3f} L (R^2 {fit['linear']['r2']:.2f}; {listing})",
                REPRODUCED if ok else NOT_REPRODUCED, crit, c=c, critical_N=found)


def separability(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "separability N_s/N", "falls until N ~ 16, then saturates at 0.70-0.85"
    crit = "median over heads of N_s/N for every N >= 16 within [0.70, 0.85] (+-0.02), spread across those N <= 0.10"
    if exp is None:
        return _row(claim, paper, "not run", NOT_COMPARABLE, crit)
    med = {r["N"]: r["median_over_heads"]["Ns_frac"] for r in exp["per_N"]}
    tail = {N: v for N, v in med.items() if N >= 16}
    curve = ", ".join(f"N={N}: {v:.2f}" for N, v in med.items())
    if not tail:
        return _row(claim, paper, curve, NOT_COMPARABLE, crit, medians=med)
    vals = np.array(list(tail.values()))
    ok = bool(np.all((vals >= 0.68) & (vals <= 0.87)) and vals.max() - vals.min() <= 0.10)
    return _row(claim, paper, f"plateau {vals.mean():.2f} (N >= 16); {curve}", REPRODUCED if ok else NOT_REPRODUCED,
                crit, plateau=float(vals.mean()), medians=med)


def _g_curve(exp: dict[str, Any]) -> tuple[np.ndarray, np.ndarray, float]:
    T = np.asarray(exp["T"], float)
    j = int(np.argmin(exp["eps"]))
    return T, np.asarray(exp["max_over_heads"], float)[:, j], float(exp["eps"][j])


def gradient_slope(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "gradient sensitivity, low T", "~1/T below T = 0.1"
    crit = "log-log slope of max-over-heads g(T, smallest eps) over T < 0.1 in [-1.25, -0.75]"
    if exp is None:
        return _row(claim, paper, "not run", NOT_COMPARABLE, crit)
    T, g, eps = _g_curve(exp)
    low = T < 0.1
    fit = stats.fit_power_law(T[low], g[low])
    if fit["points"] < 3:
        return _row(claim, paper, f"{fit['points']} usable points below T = 0.1", NOT_COMPARABLE, crit, fit=fit)
    ok = -1.25 <= fit["b"] <= -0.75
    return _row(claim, paper, f"g ~ T^{fit['b']:.2f} (eps={eps:g}, R^2 {fit['r2']:.2f})",
                REPRODUCED if ok else NOT_REPRODUCED, crit, slope=fit["b"], fit=fit)


def gradient_drop(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "gradient sensitivity, T >= 1", "~100x lower than below T = 0.1"
    crit = ("geometric mean of g over 0.01 <= T < 0.1 / geometric mean over 1 <= T < 10 (smallest eps, max over "
            "heads) within 10^(2 +- 0.5); a 1/T law gives exactly 100")
    if exp is None:
        return _row(claim, paper, "not run", NOT_COMPARABLE, crit)
    T, g, eps = _g_curve(exp)
    lo, hi = g[(T >= 0.01) & (T < 0.1)], g[(T >= 1) & (T < 10)]
    if lo.size == 0 or hi.size == 0 or np.any(lo <= 0) or np.any(hi <= 0):
        return _row(claim, paper, "T grid lacks points in [0.01, 0.1) and [1, 10), or g vanishes there",
                    NOT_COMPARABLE, crit)
    ratio = float(np.exp(np.log(lo).mean() - np.log(hi).mean()))
    ok = 1.5 <= math.log10(ratio) <= 2.5
    return _row(claim, paper, f"{ratio:.3g}x (eps={eps:g})", REPRODUCED if ok else NOT_REPRODUCED, crit, ratio=ratio)


def distance(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "distance at N = 5", "grows ~linearly in L; Theorem 1 bound safe but conservative"
    crit = (f"log-log slope of mean dtilde (R1) vs L in [0.75, 1.25]; {HEADLINE_BOUND} never violated; "
            "median bound/true ratio >= 2")
    if exp is None:
        return _row(claim, paper, "not run", NOT_COMPARABLE, crit)
    N = exp["choices"]["N_fixed"]
    pts = sorted((r["L"], r["mean_over_heads"]["dtilde_R1"]) for r in exp["pairs"] if r["N"] == N)
    fit = stats.fit_power_law([L for L, _ in pts], [d for _, d in pts])
    tally = exp["statements"].get(HEADLINE_BOUND, {})
    med = tally.get("median_ratio")
    conservative = 1.0 / med if med else float("nan")
    if fit["points"] < 2 or not tally:
        return _row(claim, paper, "too few L values", NOT_COMPARABLE, crit)
    ok = 0.75 <= fit["b"] <= 1.25 and tally["violated"] == 0 and conservative >= 2
    measured = (f"dtilde ~ L^{fit['b']:.2f}; bound violated on {tally['violated']}/{tally['applicable']} rows, "
                f"median bound/true {conservative:.3g}")
    return _row(claim, paper, measured, REPRODUCED if ok else NOT_REPRODUCED, crit, slope=fit["b"],
                violated=tally["violated"], bound_over_true=conservative)


def multihead(exp: dict[str, Any] | None) -> dict[str, Any]:
    claim, paper = "multi-head coverage", "H = 3 heads at p = 0.8 cover ~99%"
    crit = "observed coverage of H-head groups within 0.05 of the independence prediction 1 - (1 - p)^H at observed p"
    if exp is None:
        return _row(claim, paper, "not run", NOT_COMPARABLE, crit)
    m = exp["multihead"]
    obs, pred = m.get("coverage_observed"), m.get("coverage_predicted_independent")
    arith = f"formula at p=0.8, H=3: {m['paper_example']['coverage']:.3f}"
    if obs is None or pred is None:
        return _row(claim, paper, f"{arith}; no head groups measured", NOT_COMPARABLE, crit)
    ok = abs(obs - pred) <= 0.05
    return _row(claim, paper, f"{arith}; observed p={m['p_observed']:.2f}, H={m['H']}: coverage {obs:.3f} vs "
                f"independence {pred:.3f}", REPRODUCED if ok else NOT_REPRODUCED, crit, observed=obs, predicted=pred)


def table(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The headline rows, in the paper's order of claims."""
    ex = results["experiments"]
    return [critical(ex.get("critical")), separability(ex.get("separability")), gradient_slope(ex.get("gradients")),
            gradient_drop(ex.get("gradients")), distance(ex.get("distance")), multihead(ex.get("separability"))]
