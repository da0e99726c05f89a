"""Statistics of the experiments: the two-sample KS test, the critical-N search and simple fits."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def ks_2samp(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov ``(statistic, p-value)`` (scipy, exact/asymptotic as scipy picks)."""
    from scipy.stats import ks_2samp as _ks

    a, b = np.asarray(a, float), np.asarray(b, float)
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if a.size == 0 or b.size == 0:
        return float("nan"), float("nan")
    res = _ks(a, b)
    return float(res.statistic), float(res.pvalue)


def first_indistinguishable(Ns: Sequence[int], pvalues: Sequence[float], alpha: float) -> int | None:
    """The first N whose KS p-value exceeds ``alpha`` (true and expected distances not distinguished)."""
    for N, p in zip(Ns, pvalues):
        if np.isfinite(p) and p > alpha:
            return int(N)
    return None


def fit_through_origin(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Least squares ``y = c x``: ``c`` and R^2 (about the mean)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size == 0:
        return {"c": float("nan"), "r2": float("nan"), "points": 0}
    c = float((x @ y) / (x @ x))
    ss_res = float(((y - c * x) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return {"c": c, "r2": 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan"), "points": int(x.size)}


def fit_power_law(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> dict[str, float]:
    """Least squares on logs: ``y = a x^b``; returns ``a``, ``b`` (the log-log slope) and R^2."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return {"a": float("nan"), "b": float("nan"), "r2": float("nan"), "points": int(ok.sum())}
    lx, ly = np.log(x[ok]), np.log(y[ok])
    b, la = np.polyfit(lx, ly, 1)
    pred = la + b * lx
    ss_tot = float(((ly - ly.mean()) ** 2).sum())
    r2 = 1.0 - float(((ly - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else float("nan")
    return {"a": float(np.exp(la)), "b": float(b), "r2": r2, "points": int(ok.sum())}
