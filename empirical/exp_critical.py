"""Experiment 2 (paper Fig. 2c): the critical top-N, from the per-head means of ``exp_distance``.

For each L, N grows over ``Protocol.critical_N_grid(L)``; at each N the per-head means of the true
distance (dtilde, reading ``critical_reading``) and of the Theorem 1 expectation term over all heads are
compared with a two-sample KS test. The critical N is the first N where the test does not reject at
level ``ks_alpha``; it is reported for every reading of the expectation term.

Honest statistics: the scan stops at its ceiling (``critical_max_frac L``); where no N passed the result is
"not found up to the ceiling", and an N found only *at* the ceiling is flagged as such. Lines are fitted
(critical N = c L through the origin, and a power law) only through lengths whose N was found below the
ceiling, and only when there are at least two. The KS resolution is stated: each sample holds one mean
per head, so the statistic moves in steps of 1/heads.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnbounds.empirical import stats
from attnbounds.empirical.accumulate import PerHead
from attnbounds.empirical.config import EXPECTATIONS, Protocol

FOUND, AT_CEILING, NOT_FOUND = "found", "at the scan ceiling", "not found"


def finish(acc: PerHead, Ns: np.ndarray, proto: Protocol) -> dict[str, Any]:
    """The critical-N results from the per-head sums ``acc`` (keys ``(name, L)``, one column per N of ``Ns``)."""
    alpha = proto.ks_alpha
    true = f"dtilde_{proto.critical_reading}"
    per_L: list[dict[str, Any]] = []
    heads = 0
    for L in proto.L_grid:
        if (true, L) not in acc:
            continue
        grid = [N for N in proto.critical_N_grid(L)]
        cols = np.searchsorted(Ns, grid)
        t_means = acc.mean((true, L))[:, cols]
        heads = t_means.shape[0]
        ceiling = grid[-1]
        scans = {}
        for exp in EXPECTATIONS:
            e_means = acc.mean((exp, L))[:, cols]
            ks = [stats.ks_2samp(t_means[:, k], e_means[:, k]) for k in range(len(grid))]
            pvals = [p for _, p in ks]
            found = stats.first_indistinguishable(grid, pvals, alpha)
            status = NOT_FOUND if found is None else AT_CEILING if found == ceiling else FOUND
            scans[exp] = {"ks_statistic": [s for s, _ in ks], "p_value": pvals, "critical_N": found, "status": status}
        per_L.append({"L": L, "N": grid, "ceiling": ceiling, "scans": scans,
                      "true_mean_over_heads": np.nanmean(t_means, axis=0).tolist(),
                      "expected_mean_over_heads": {e: np.nanmean(acc.mean((e, L))[:, cols], axis=0).tolist()
                                                   for e in EXPECTATIONS}})
    fits = {}
    for exp in EXPECTATIONS:
        pts = [(r["L"], r["scans"][exp]["critical_N"]) for r in per_L if r["scans"][exp]["status"] == FOUND]
        Ls, Nc = [a for a, _ in pts], [b for _, b in pts]
        fits[exp] = {"found": len(pts), "of": len(per_L),
                     "at_ceiling": sum(r["scans"][exp]["status"] == AT_CEILING for r in per_L),
                     "linear": stats.fit_through_origin(Ls, Nc) if len(pts) >= 2 else None,
                     "power": stats.fit_power_law(Ls, Nc) if len(pts) >= 2 else None}
    return {"per_L": per_L, "fits": fits, "expectation": proto.expectation, "true": true,
            "ks_resolution": {"heads_per_sample": heads, "statistic_step": 1.0 / heads if heads else None,
                              "what": "each KS sample holds one per-head mean per head; the statistic moves in steps "
                                      "of 1/heads, so a decision can rest on a few heads"},
            "choices": {"ks_alpha": alpha, "critical_reading": proto.critical_reading,
                        "max_frac": proto.critical_max_frac, "dense_upto": proto.critical_dense_upto,
                        "step": proto.critical_step, "tensor": proto.distance_tensor,
                        "sphere": proto.distance_sphere,
                        "test": "scipy.stats.ks_2samp on the per-head means (all layers x heads)",
                        "fit": "through lengths whose critical N was found below the scan ceiling (at least two)"}}
