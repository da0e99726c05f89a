"""Experiments 1 and 2 (paper Fig. 2): distance dtilde, the Theorem 1 expectation term and bound, per head.

One scan per row serves both (:func:`attnbounds.empirical.kernels.scan`): dtilde in both readings (R1 sum
of norms, R2 norm of sum), every reading of the Theorem 1 expectation term ``J`` (theory quantities
``J_<coefficient>_<xbar>``), ``abar_N`` and ``max_norm`` at every N either experiment needs.

- Distance (Fig. 2a/b): pairs (L, N): N = ``N_fixed`` over ``L_grid`` and L = max(L_grid) over ``N_grid``;
  per row also ``d_1`` and every registered reading of the fixed top-N bound (``theorem1.fixed[...]``),
  whose right side is the bound, evaluated by its own formula on the row's quantities.
- Critical top-N (Fig. 2c): for each L, the per-head means at every N of ``Protocol.critical_N_grid(L)``,
  compared by ``exp_critical``.

Each row is an instance of its own length (``l = t + 1`` for query ``t`` when masked keys are dropped): the
statements read ``L = l``. Per-head means are over every row of every window that counts for the length.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnbounds.empirical import bridge, checks, exp_critical, kernels
from attnbounds.empirical.accumulate import PerHead, RecordSums, Tally
from attnbounds.empirical.config import EXPECTATIONS, Protocol
from attnbounds.empirical.rows import QuerySpec, RecordRows

DTILDE = ("dtilde_R1", "dtilde_R2")
#: per-head series of the distance experiment besides the bounds
SERIES = (*DTILDE, *EXPECTATIONS, "abar_N", "d_1", "max_norm")


class Theorem1:
    """Streams layer records in; keeps per-head sums per (name, L) with one column per N of :attr:`Ns`."""

    name = "theorem1"

    def __init__(self, proto: Protocol, n_heads: int, spec: QuerySpec, n_windows: int = 1):
        self.proto, self.spec = proto, spec
        self.run_distance = "distance" in proto.experiments
        self.run_critical = "critical" in proto.experiments
        Lmax = max(proto.L_grid)
        self.pairs = sorted({(L, proto.N_fixed) for L in proto.L_grid} | {(Lmax, N) for N in proto.N_grid if N < Lmax})
        self.distance_Ns = np.array(sorted({N for _, N in self.pairs}), dtype=np.int64)
        crit = {N for L in proto.L_grid for N in proto.critical_N_grid(L)} if self.run_critical else set()
        dist = set(self.distance_Ns.tolist()) if self.run_distance else set()
        self.Ns = np.array(sorted(crit | dist), dtype=np.int64)
        #: per window length, the N of :attr:`Ns` it reports (its critical grid and the distance N); a row is
        #: scanned at the N of the lengths it counts for
        self.reported = {L: np.isin(self.Ns, sorted(dist | (set(proto.critical_N_grid(L)) if self.run_critical else set())))
                         for L in proto.L_grid}
        self._wanted: dict[tuple[int, ...], np.ndarray] = {}
        self.bounds = bridge.statement_ids("theorem1.fixed")
        self.acc = PerHead(n_heads, n_windows)
        self.tally = Tally()
        self.dev = checks.Deviations()
        self.window_offset = 0
        self.mc_ids = [s for s in bridge.statement_ids("theorem1.random") if s.startswith(f"theorem1.random[{proto.critical_reading},")]

    @property
    def Ls(self) -> tuple[int, ...]:
        return self.proto.L_grid

    def begin(self, batch: int, window_offset: int) -> None:
        self.window_offset = window_offset

    def state(self) -> dict[str, Any]:
        return {"acc": self.acc.state(), "tally": self.tally.state(), "checks": self.dev.state()}

    def absorb(self, state: dict[str, Any]) -> None:
        self.acc.absorb(state["acc"])
        self.tally.absorb(state["tally"])
        self.dev.absorb(state["checks"])

    def consume(self, rr: RecordRows, rows: dict[tuple[int, int], list[int]]) -> None:
        p = self.proto
        sums = RecordSums()
        record = rr.record(p.distance_tensor, p.distance_sphere, p.M) if self.run_distance else None
        dcols = np.searchsorted(self.Ns, self.distance_Ns)
        check_at = checks.positions(rows, p.check_positions)
        pending: list[tuple[tuple[int, ...], int, dict[str, np.ndarray]]] = []  # the bounds: by row, one call per record
        for (t, ell), Ls in rows.items():
            batch = rr.batch(t, ell, p.distance_tensor, p.distance_sphere, p.M)
            key = tuple(Ls)
            wanted = self.wanted(key)
            scan = kernels.scan(batch, self.Ns, wanted)
            for name in (*DTILDE, *EXPECTATIONS):
                sums.add(name, key, scan[name])
            q = None
            if record is not None:
                q = {name: scan[name][:, dcols] for name in ("dtilde_R1", "dtilde_R2", "abar_N", "max_norm")}
                q["d_1"] = kernels.d_1(batch, record, self.distance_Ns)
                for name in ("abar_N", "d_1", "max_norm"):
                    sums.add(name, key, q[name])
                pending.append((key, ell, q))
                if p.expected_mc_draws > 0:
                    self._expected(batch, sums, key)
            if (t, ell) in check_at:
                self._check(batch, scan, q, rr.window, wanted)
        if pending:
            self._bounds(pending, sums)
        sums.flush(self.acc, rr.head, rr.window, self._columns)

    def wanted(self, Ls: tuple[int, ...]) -> np.ndarray:
        """The N of :attr:`Ns` a row counting for the lengths ``Ls`` is scanned at: those they report."""
        if Ls not in self._wanted:
            self._wanted[Ls] = np.logical_or.reduce([self.reported[L] for L in Ls])
        return self._wanted[Ls]

    def _columns(self, name: str, L: int) -> np.ndarray | None:
        """The columns of ``(name, L)`` that length ``L`` reports (the scanned series; None: all)."""
        return self.reported[L] if name in (*DTILDE, *EXPECTATIONS) else None

    def _bounds(self, pending: list[tuple[tuple[int, ...], int, dict[str, np.ndarray]]], sums: RecordSums) -> None:
        """Every reading of the fixed top-N bound on every row of a record, by the statement's own formula."""
        stacked = {name: np.concatenate([q[name] for _, _, q in pending]) for name in pending[0][2]}
        L = np.concatenate([np.full((q["d_1"].shape[0], 1), float(ell)) for _, ell, q in pending])
        cuts = np.cumsum([q["d_1"].shape[0] for _, _, q in pending])[:-1]
        for sid in self.bounds:
            lhs, rhs = bridge.sides(sid, {**stacked, "L": L, "N": self.distance_Ns[None, :].astype(float)})
            self.tally.add(sid, lhs, rhs)
            for (key, _, _), part in zip(pending, np.split(rhs, cuts)):
                sums.add(sid, key, part)

    def _check(self, batch: kernels.Batch, scan: dict[str, np.ndarray], q: dict[str, np.ndarray] | None,
               window: np.ndarray, wanted: np.ndarray) -> None:
        """The numbers of sampled rows against theory's float forms and statements (``empirical.checks``)."""
        rows = checks.sample(self.window_offset + window, self.proto.check_every)
        if not rows.size:
            return
        a, x = batch.alpha[rows], batch.x[rows] if batch.x is not None else None
        live = self.Ns[(self.Ns < batch.ell) & wanted]
        for N in live[np.unique(np.linspace(0, live.size - 1, min(3, live.size)).round().astype(int))]:
            inst = bridge.weights_instance(a, x, int(N))
            k = int(np.searchsorted(self.Ns, N))
            for name in (*DTILDE, *EXPECTATIONS, "abar_N", "max_norm"):
                self.dev.compare(name, scan[name][rows, k], bridge.compute(name, inst))
            if q is None or N not in self.distance_Ns:
                continue
            kd = int(np.searchsorted(self.distance_Ns, N))
            self.dev.compare("d_1", q["d_1"][rows, kd], bridge.compute("d_1", inst))
            mine = {name: v[rows, kd] for name, v in q.items()}
            for sid in self.bounds:
                ev = bridge.evaluate(sid, inst)
                self.dev.applicable(sid, ev.applicable)
                lhs, rhs = bridge.sides(sid, {**mine, "L": float(batch.ell), "N": float(N)})
                self.dev.compare(sid, np.stack([lhs, rhs]), np.stack([ev.lhs, ev.rhs]))

    def _expected(self, batch: kernels.Batch, sums: RecordSums, key: tuple[int, ...]) -> None:
        """Theory's E[dtilde] over random N-subsets (Monte Carlo, ``expected_mc_draws``) and its readings."""
        p = self.proto
        out = {f"E_dtilde_{r}": np.full((batch.R, self.distance_Ns.size), np.nan) for r in ("R1", "R2")}
        for k, N in enumerate(self.distance_Ns):
            if N >= batch.ell:
                continue
            # one seed for every call: theory samples one set of count vectors per (seed, N) and uses it for
            # every row, so the estimate of a row does not depend on its batch (nor on the scheduler)
            inst = bridge.weights_instance(batch.alpha, batch.x, int(N), mc_draws=p.expected_mc_draws, seed=p.seed)
            for name in out:
                out[name][:, k] = bridge.compute(name, inst)
            for sid in self.mc_ids:
                ev = bridge.evaluate(sid, inst)
                self.tally.add(sid, np.where(ev.applicable, ev.lhs, np.nan), np.where(ev.applicable, ev.rhs, np.nan))
        for name, values in out.items():
            sums.add(name, key, values)

    def finish(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.run_distance:
            out["distance"] = self._finish_distance()
        if self.run_critical:
            out["critical"] = exp_critical.finish(self.acc, self.Ns, self.proto)
        for part in out.values():
            part["checks"] = self.dev.summary()
        return out

    def _finish_distance(self) -> dict[str, Any]:
        p = self.proto
        series = [*SERIES, *self.bounds] + (["E_dtilde_R1", "E_dtilde_R2"] if p.expected_mc_draws > 0 else [])
        records = []
        for L, N in self.pairs:
            if ("dtilde_R1", L) not in self.acc:
                continue
            col = {s: int(np.searchsorted(self.Ns if s in (*DTILDE, *EXPECTATIONS) else self.distance_Ns, N))
                   for s in series}
            per_head = {s: self.acc.mean((s, L))[:, col[s]] for s in series if (s, L) in self.acc}
            rows = self.acc.count(("dtilde_R1", L))[:, col["dtilde_R1"]]
            records.append({"L": L, "N": N, "rows_per_head": rows, "per_head": per_head,
                            "mean_over_heads": {s: float(np.nanmean(v)) for s, v in per_head.items()},
                            "median_over_heads": {s: float(np.nanmedian(v)) for s, v in per_head.items()},
                            "max_over_heads": {s: float(np.nanmax(v)) for s, v in per_head.items()}})
        return {"pairs": records, "bounds": self.bounds, "expectations": list(EXPECTATIONS),
                "statements": self.tally.summary(),
                "choices": {"tensor": p.distance_tensor, "sphere": p.distance_sphere, "N_fixed": p.N_fixed,
                            "L_grid": p.L_grid, "N_grid": p.N_grid, "expected_mc_draws": p.expected_mc_draws,
                            "x_i": f"{p.distance_tensor} vectors of the head" + (" on the sphere" if p.distance_sphere else ""),
                            "statement L": "each row's own length (t + 1 for query t when masked keys are dropped)"}}
