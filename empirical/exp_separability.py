"""Experiment 3 (paper Fig. 3): geometric separability N_s/N and both Theorem 2 bounds, per head.

Per row (one query of one head): token vectors ``x`` (``separability_tensor``, values by default)
rescaled to the sphere of radius ``M`` (Assumption 1); ``delta`` the row's empirical minimum
pairwise distance (Assumption 2); the paper's ``r = min_{i not in I_N} ||s - alpha_i x_i||``.
``N_s`` counts selected tokens with ``alpha_i x_i`` in the ball ``B_r(s)`` (theory quantity
``Ns_relaxed``; with this ``r`` the nearest non-selected token lies on the sphere of the ball, so
the Definition's full count ``Ns_full`` is 0 by construction, and is reported as such).
The bounds are the registered ``theorem2.lower/upper[relaxed]`` formulas evaluated with the
observed ``N_s/N`` in place of ``E[N_s]/N``.

Multi-head remark: for groups of ``multihead_H`` heads of a layer, the fraction of the union of
their top-N sets that at least one selecting head separates, next to theory's
``1 - (1 - p)^H`` (``multihead`` statement) with ``p`` the observed mean ``N_s/N``.
"""

from __future__ import annotations

import itertools
from typing import Any, cast

import numpy as np

from attnbounds.empirical import bridge
from attnbounds.empirical.accumulate import PerHead, Tally
from attnbounds.empirical.config import Protocol
from attnbounds.empirical.extract import LayerRecord
from attnbounds.empirical.rows import QuerySpec, RowBatch, build

BOUNDS = {"lower": "theorem2.lower[relaxed]", "upper": "theorem2.upper[relaxed]"}


class Separability:
    name = "separability"

    def __init__(self, proto: Protocol, n_heads: int, spec: QuerySpec, heads_per_layer: int, n_windows: int = 1):
        self.proto, self.spec = proto, spec
        self.acc = PerHead(n_heads, n_windows)
        self.tally = Tally()
        self.stmts = {side: bridge.with_observed(sid, "E_Ns", "Ns_frac") for side, sid in BOUNDS.items()}
        H = heads_per_layer
        groups = list(itertools.combinations(range(H), min(proto.multihead_H, H)))
        rng = np.random.default_rng(proto.seed)
        if len(groups) > proto.multihead_groups:
            groups = [groups[i] for i in sorted(rng.choice(len(groups), proto.multihead_groups, replace=False))]
        self.groups = groups
        self.window_offset = 0
        # coverage samples with the (global) window each came from: put in window order at the end, so the
        # order of the samples does not depend on the batches
        self.coverage: list[np.ndarray] = []
        self.coverage_window: list[np.ndarray] = []
        self.delta_all: list[np.ndarray] = []

    def begin(self, batch: int, window_offset: int) -> None:
        self.window_offset = window_offset

    def state(self) -> dict[str, Any]:
        return {"acc": self.acc.state(), "tally": self.tally.state(), "coverage": self.coverage,
                "coverage_window": self.coverage_window, "delta_all": self.delta_all}

    def absorb(self, state: dict[str, Any]) -> None:
        self.acc.absorb(state["acc"])
        self.tally.absorb(state["tally"])
        for k in ("coverage", "coverage_window", "delta_all"):
            getattr(self, k).extend(state[k])

    def consume(self, rec: LayerRecord) -> None:
        p = self.proto
        for rows in build(rec, p.separability_L, self.spec, tensor=p.separability_tensor,
                          sphere=p.separability_sphere, M=p.M):
            delta = bridge.min_pairwise_distance(cast(np.ndarray, rows.x))
            self.delta_all.append(delta)
            for N in p.separability_N:
                if N < rows.L:
                    self._n(rows, N, delta, rec.n_heads)

    def _n(self, rows: RowBatch, N: int, delta: np.ndarray, H: int) -> None:
        p = self.proto
        inst = bridge.weights_instance(rows, N, M=p.M, delta=delta)
        r = bridge.paper_r(inst)
        inst = inst.with_params(r=r)
        ns = bridge.compute("Ns_relaxed", inst)
        frac = ns / N
        h, w = rows.head, rows.window
        self.acc.add(("Ns_frac", N), h, frac, w)
        self.acc.add(("Ns_full_frac", N), h, bridge.compute("Ns_full", inst) / N, w)
        self.acc.add(("r", N), h, r, w)
        self.acc.add(("delta", N), h, delta, w)
        observed = inst.with_params(Ns_frac=frac, C_H=p.hoeffding_constant)
        for side, stmt in self.stmts.items():
            ev = stmt.evaluate(observed)
            self.acc.add((side, N), h, ev.lhs if side == "lower" else ev.rhs, w)
            self.tally.add(stmt.id, ev)
        if N == p.multihead_N:
            self._coverage(rows, bridge.inside_ball(inst, r), inst.mask, H)

    def _coverage(self, rows: RowBatch, inside: np.ndarray, selected: np.ndarray, H: int) -> None:
        # rows are ordered (window, head) with H consecutive heads per (window, query)
        n_groups = rows.alpha.shape[0] // H
        ins = inside.reshape(n_groups, H, -1)
        sel = selected.reshape(n_groups, H, -1)
        window = self.window_offset + rows.window[::H]
        for g in self.groups:
            union_sel = sel[:, list(g)].any(1)
            union_in = ins[:, list(g)].any(1)
            self.coverage.append(union_in.sum(-1) / union_sel.sum(-1))
            self.coverage_window.append(window)

    def finish(self) -> dict[str, Any]:
        p = self.proto
        Ns = [N for N in p.separability_N if ("Ns_frac", N) in self.acc]
        per_N: list[dict[str, Any]] = []
        for N in Ns:
            ph = {k: self.acc.mean((k, N)) for k in ("Ns_frac", "Ns_full_frac", "lower", "upper", "r", "delta")}
            per_N.append({"N": N, "per_head": ph,
                          "median_over_heads": {k: float(np.nanmedian(v)) for k, v in ph.items()},
                          "mean_over_heads": {k: float(np.nanmean(v)) for k, v in ph.items()},
                          "max_over_heads": {k: float(np.nanmax(v)) for k, v in ph.items()}})
        p_hat = next((r["mean_over_heads"]["Ns_frac"] for r in per_N if r["N"] == p.multihead_N), float("nan"))
        multihead = self._multihead(p_hat)
        delta = np.concatenate(self.delta_all) if self.delta_all else np.array([np.nan])
        return {"per_N": per_N, "multihead": multihead, "statements": self.tally.summary(),
                "delta_summary": {"min": float(np.min(delta)), "median": float(np.median(delta)),
                                  "max": float(np.max(delta))},
                "choices": {"L": p.separability_L, "N": p.separability_N, "tensor": p.separability_tensor,
                            "sphere": p.separability_sphere, "M": p.M, "hoeffding_constant": p.hoeffding_constant,
                            "r": "min over non-selected i of ||s - alpha_i x_i|| (per row)",
                            "delta": "min pairwise distance of the row's x (per row)",
                            "N_s": "selected i with ||alpha_i x_i - s|| <= r (theory Ns_relaxed)",
                            "bounds": {k: v.id for k, v in self.stmts.items()}}}

    def _multihead(self, p_hat: float) -> dict[str, Any]:
        from attnbounds.theory.instance import Instance

        P = self.proto
        H = len(self.groups[0]) if self.groups else 0  # fewer heads per layer than multihead_H: all of them
        out: dict[str, Any] = {"H": H, "N": P.multihead_N, "groups": [list(g) for g in self.groups],
                               "p_observed": p_hat, "definition":
                               "per (window, query, head group): |union of separated tokens| / |union of top-N sets|"}
        if self.coverage:
            win = np.concatenate(self.coverage_window)
            cov = np.concatenate(self.coverage).astype(float)[np.argsort(win, kind="stable")]
        else:
            cov = np.array([], dtype=float)
        out["coverage_observed"] = float(np.nanmean(cov)) if cov.size else None
        out["coverage_samples"] = int(cov.size)
        paper = Instance.from_weights(np.ones((2, 1)), H=[max(H, 1), 3], p=[p_hat if np.isfinite(p_hat) else 0.0, 0.8])
        ev = bridge.evaluate("multihead", paper)
        cov_theory = bridge.compute("coverage_enum", paper)
        out["coverage_predicted_independent"] = float(cov_theory[0]) if np.isfinite(p_hat) else None
        out["paper_example"] = {"H": 3, "p": 0.8, "coverage": float(cov_theory[1]), "statement_margin": float(ev.margin[1])}
        return out
