"""Experiment 1 (paper Fig. 2a/b): distance dtilde, the Theorem 1 expectation term and bound, per head.

Pairs (L, N): N = ``N_fixed`` over ``L_grid`` (Fig. 2a) and L = max(L_grid) over ``N_grid``
(Fig. 2b). Per row: dtilde in both readings (R1 sum of norms, R2 norm of sum), every reading of
the Theorem 1 expectation term ``J`` (theory quantities ``J_<coefficient>_<xbar>``), and every
registered reading of the fixed top-N bound (``theorem1.fixed[...]``), whose rhs is the bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnbounds.empirical import bridge
from attnbounds.empirical.accumulate import PerHead, Tally
from attnbounds.empirical.config import EXPECTATIONS, Protocol
from attnbounds.empirical.extract import LayerRecord
from attnbounds.empirical.rows import QuerySpec, build

DTILDE = ("dtilde_R1", "dtilde_R2")


class Distance:
    """Streams layers in, keeps per-head means per (L, N) pair."""

    name = "distance"

    def __init__(self, proto: Protocol, n_heads: int, spec: QuerySpec, n_windows: int = 1):
        self.proto, self.spec = proto, spec
        Lmax = max(proto.L_grid)
        pairs = [(L, proto.N_fixed) for L in proto.L_grid] + [(Lmax, N) for N in proto.N_grid if N < Lmax]
        self.pairs = sorted(set(pairs))
        self.bounds = bridge.statement_ids("theorem1.fixed")
        self.acc = PerHead(n_heads, n_windows)
        self.tally = Tally()

    def begin(self, batch: int, window_offset: int) -> None:
        """A new batch of windows (nothing here depends on which)."""

    def state(self) -> dict[str, Any]:
        return {"acc": self.acc.state(), "tally": self.tally.state()}

    def absorb(self, state: dict[str, Any]) -> None:
        self.acc.absorb(state["acc"])
        self.tally.absorb(state["tally"])

    def consume(self, rec: LayerRecord) -> None:
        p = self.proto
        for L in sorted({L for L, _ in self.pairs}):
            for rows in build(rec, L, self.spec, tensor=p.distance_tensor, sphere=p.distance_sphere, M=p.M):
                for _, N in (pair for pair in self.pairs if pair[0] == L):
                    if N >= rows.L:
                        continue
                    self._pair(rows, L, N)

    def _pair(self, rows: Any, L: int, N: int) -> None:
        inst = bridge.weights_instance(rows, N)
        h, w = rows.head, rows.window
        for name in (*DTILDE, *EXPECTATIONS, "abar_N", "d_1", "max_norm"):
            self.acc.add((name, L, N), h, bridge.compute(name, inst), w)
        for sid in self.bounds:
            ev = bridge.evaluate(sid, inst)
            self.acc.add((sid, L, N), h, ev.rhs, w)
            self.tally.add(sid, ev)
        if self.proto.expected_mc_draws > 0:
            # one seed for every call: theory samples one set of count vectors per (seed, N) and uses it for
            # every row, so the estimate of a row does not depend on its batch (nor on the scheduler)
            mc = inst.with_params(mc_draws=self.proto.expected_mc_draws, seed=self.proto.seed)
            for reading in ("R1", "R2"):
                self.acc.add((f"E_dtilde_{reading}", L, N), h, bridge.compute(f"E_dtilde_{reading}", mc), w)
            for sid in bridge.statement_ids("theorem1.random"):
                if sid.startswith(f"theorem1.random[{self.proto.critical_reading},"):
                    self.tally.add(sid, bridge.evaluate(sid, mc))

    def finish(self) -> dict[str, Any]:
        series = [*DTILDE, *EXPECTATIONS, "abar_N", "d_1", "max_norm", *self.bounds]
        if self.proto.expected_mc_draws > 0:
            series += ["E_dtilde_R1", "E_dtilde_R2"]
        records = []
        for L, N in self.pairs:
            if (DTILDE[0], L, N) not in self.acc:
                continue
            per_head = {s: self.acc.mean((s, L, N)) for s in series}
            records.append({"L": L, "N": N, "rows_per_head": self.acc.count((DTILDE[0], L, N)),
                            "per_head": per_head,
                            "mean_over_heads": {s: float(np.nanmean(v)) for s, v in per_head.items()},
                            "median_over_heads": {s: float(np.nanmedian(v)) for s, v in per_head.items()}})
        return {"pairs": records, "bounds": self.bounds, "expectations": list(EXPECTATIONS),
                "statements": self.tally.summary(),
                "choices": {"tensor": self.proto.distance_tensor, "sphere": self.proto.distance_sphere,
                            "N_fixed": self.proto.N_fixed, "L_grid": self.proto.L_grid,
                            "N_grid": self.proto.N_grid, "expected_mc_draws": self.proto.expected_mc_draws}}
