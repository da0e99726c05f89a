"""Experiment 2 (paper Fig. 2c): the critical top-N.

For each L, N grows over ``Protocol.critical_N_grid(L)``; at each N the per-head means of the true
distance (dtilde, reading ``critical_reading``) and of the Theorem 1 expectation term (quantity
``expectation``) over all heads are compared with a two-sample KS test. The critical N is the first
N where the test does not reject at level ``ks_alpha``. Then critical N is fitted against L
(through the origin, the paper's "~0.06 L", and as a power law). The KS test and the critical N
are also reported for every other reading of the expectation term.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from attnbounds.empirical import bridge, stats
from attnbounds.theory.quantities.theorem1 import distance_scan
from attnbounds.empirical.accumulate import PerHead
from attnbounds.empirical.config import EXPECTATIONS, Protocol
from attnbounds.empirical.extract import LayerRecord
from attnbounds.empirical.rows import QuerySpec, build


class Critical:
    name = "critical"

    def __init__(self, proto: Protocol, n_heads: int, spec: QuerySpec, n_windows: int = 1):
        self.proto, self.spec = proto, spec
        self.grids = {L: proto.critical_N_grid(L) for L in proto.L_grid}
        self.true = f"dtilde_{proto.critical_reading}"
        self.acc = PerHead(n_heads, n_windows)
        self.max_deviation = 0.0

    def begin(self, batch: int, window_offset: int) -> None:
        """A new batch of windows (nothing here depends on which)."""

    def state(self) -> dict[str, Any]:
        return {"acc": self.acc.state(), "max_deviation": self.max_deviation}

    def absorb(self, state: dict[str, Any]) -> None:
        self.acc.absorb(state["acc"])
        self.max_deviation = max(self.max_deviation, state["max_deviation"])

    def consume(self, rec: LayerRecord) -> None:
        p = self.proto
        for L, grid in self.grids.items():
            for rows in build(rec, L, self.spec, tensor=p.distance_tensor, sphere=p.distance_sphere, M=p.M):
                Ns = [N for N in grid if N < rows.L]
                if not Ns:
                    continue
                scan = distance_scan(rows.alpha, cast(np.ndarray, rows.x), Ns)  # all N at once (see attnbounds.theory.quantities.theorem1.distance_scan)
                for k, N in enumerate(Ns):
                    for name in (self.true, *EXPECTATIONS):
                        self.acc.add((name, L, N), rows.head, scan[name][:, k], rows.window)
                self._check(rows, Ns, scan)

    def _check(self, rows: Any, Ns: list[int], scan: dict[str, np.ndarray]) -> None:
        """Re-check the fast scan against theory's quantities at one N (the middle of the grid)."""
        k = len(Ns) // 2
        inst = bridge.weights_instance(rows, Ns[k])
        for name in (self.true, *EXPECTATIONS):
            ref = bridge.compute(name, inst)
            dev = np.abs(scan[name][:, k] - ref) / np.maximum(np.abs(ref), 1e-300)
            self.max_deviation = max(self.max_deviation, float(dev.max()))

    def finish(self) -> dict[str, Any]:
        alpha = self.proto.ks_alpha
        per_L: list[dict[str, Any]] = []
        for L, grid in self.grids.items():
            Ns = [N for N in grid if (self.true, L, N) in self.acc]
            scans = {}
            for exp in EXPECTATIONS:
                ks = [stats.ks_2samp(self.acc.mean((self.true, L, N)), self.acc.mean((exp, L, N))) for N in Ns]
                pvals = [p for _, p in ks]
                scans[exp] = {"ks_statistic": [s for s, _ in ks], "p_value": pvals,
                              "critical_N": stats.first_indistinguishable(Ns, pvals, alpha)}
            per_L.append({"L": L, "N": Ns, "scans": scans,
                          "true_mean_over_heads": [float(np.nanmean(self.acc.mean((self.true, L, N)))) for N in Ns],
                          "expected_mean_over_heads": {e: [float(np.nanmean(self.acc.mean((e, L, N)))) for N in Ns]
                                                       for e in EXPECTATIONS}})
        fits = {}
        for exp in EXPECTATIONS:
            pts = [(r["L"], r["scans"][exp]["critical_N"]) for r in per_L if r["scans"][exp]["critical_N"] is not None]
            Ls, Nc = [a for a, _ in pts], [b for _, b in pts]
            fits[exp] = {"linear": stats.fit_through_origin(Ls, Nc), "power": stats.fit_power_law(Ls, Nc),
                         "found": len(pts), "of": len(per_L)}
        return {"per_L": per_L, "fits": fits, "expectation": self.proto.expectation, "true": self.true,
                "scan_check": {"max_relative_deviation_from_theory": self.max_deviation,
                               "what": "distance_scan vs the float forms of the quantities at the middle N of each grid"},
                "choices": {"ks_alpha": alpha, "critical_reading": self.proto.critical_reading,
                            "max_frac": self.proto.critical_max_frac, "dense_upto": self.proto.critical_dense_upto,
                            "step": self.proto.critical_step, "tensor": self.proto.distance_tensor,
                            "sphere": self.proto.distance_sphere,
                            "test": "scipy.stats.ks_2samp on the per-head means (all layers x heads)"}}
