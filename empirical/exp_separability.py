"""Experiment 3 (paper Fig. 3): geometric separability N_s/N and both Theorem 2 bounds, per head.

Per row (one query of one head, every query position by default): token vectors ``x`` (``separability_tensor``,
values by default) rescaled to the sphere of radius ``M`` (Assumption 1); ``delta`` the row's empirical minimum
pairwise distance (Assumption 2, over the row's own tokens); the paper's ``r = min_{i not in I_N} ||s - alpha_i x_i||``.
``N_s`` counts selected tokens with ``alpha_i x_i`` in the ball ``B_r(s)`` (theory quantity ``Ns_relaxed``; with
this ``r`` the nearest non-selected token lies on the sphere of the ball, so the Definition's full count
``Ns_full`` is 0 by construction, and is reported as such). The bounds are the registered
``theorem2.lower/upper[relaxed]`` formulas with the observed ``N_s/N`` in place of ``E[N_s]/N``.

Null reference: the same weights with token vectors drawn uniformly on the sphere (Assumption 1 itself),
seeded by (seed, layer, window, head): what ``N_s/N`` is when the vectors carry no structure.

Multi-head remark: for groups of ``multihead_H`` heads of a layer, the fraction of the union of their top-N
sets that at least one selecting head separates, next to theory's ``1 - (1 - p)^H`` (``multihead``
statement) with ``p`` the observed mean ``N_s/N``.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from attnbounds.empirical import bridge, checks, kernels
from attnbounds.empirical.accumulate import PerHead, RecordSums, Tally
from attnbounds.empirical.config import Protocol
from attnbounds.empirical.rows import QuerySpec, RecordRows, to_sphere

BOUNDS = {"lower": "theorem2.lower[relaxed]", "upper": "theorem2.upper[relaxed]"}
#: an upper bound on N_s/N at least this large on every head says almost nothing (N_s/N <= 1 anyway)
NEARLY_ONE = 0.99
SERIES = ("Ns_frac", "Ns_full_frac", "lower", "upper", "r", "delta", "Ns_frac_sphere_null")


class Separability:
    name = "separability"

    def __init__(self, proto: Protocol, n_heads: int, spec: QuerySpec, heads_per_layer: int, n_windows: int = 1):
        self.proto, self.spec = proto, spec
        self.Ns = np.asarray(proto.separability_N, dtype=np.int64)
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
        self.dev = checks.Deviations()
        # coverage per window slot: sum and count over (query, head group) samples
        self.coverage = np.zeros((n_windows, 2))

    @property
    def Ls(self) -> tuple[int, ...]:
        return (self.proto.separability_L,)

    def begin(self, batch: int, window_offset: int) -> None:
        self.window_offset = window_offset

    def state(self) -> dict[str, Any]:
        return {"acc": self.acc.state(), "tally": self.tally.state(), "coverage": self.coverage,
                "checks": self.dev.state()}

    def absorb(self, state: dict[str, Any]) -> None:
        self.acc.absorb(state["acc"])
        self.tally.absorb(state["tally"])
        self.dev.absorb(state["checks"])
        for row in state["coverage"]:  # window after window, in batch order
            self.coverage[0] += row

    def sphere_null(self, rr: RecordRows, d: int) -> np.ndarray:
        """Token vectors uniform on the sphere of radius M ``(R, T, d)``, one draw per (seed, layer, window, head)."""
        out = np.empty((rr.R, rr.T, d))
        for b in range(rr.B):
            rng = np.random.default_rng([self.proto.seed, 3, rr.rec.layer, self.window_offset + b])
            out[b * rr.H: (b + 1) * rr.H] = rng.standard_normal((rr.H, rr.T, d))
        return to_sphere(out, self.proto.M)

    def consume(self, rr: RecordRows, rows: dict[tuple[int, int], list[int]]) -> None:
        p = self.proto
        sums = RecordSums()
        x = rr.x(p.separability_tensor, p.separability_sphere, p.M)
        delta_all = rr.record(p.separability_tensor, p.separability_sphere, p.M).closest_pairs
        null = kernels.Record(self.sphere_null(rr, x.shape[-1]), transposed_copy=False)
        n = self.Ns.size
        check_at = checks.positions(rows, p.check_positions)
        per_row: list[tuple[tuple[int, ...], dict[str, np.ndarray]]] = []
        inputs: dict[int, list[dict[str, np.ndarray]]] = {k: [] for k in range(n)}  # the bounds: one call per N
        checked = []
        for (t, ell), Ls in rows.items():
            batch = rr.batch(t, ell, p.separability_tensor, p.separability_sphere, p.M)
            delta = delta_all[:, ell - 1]
            sep = kernels.separation(batch, self.Ns, p.M)
            vals = {k: np.full((rr.R, n), np.nan) for k in SERIES}
            for k, N in enumerate(self.Ns):
                if N >= ell:
                    continue
                frac = sep["Ns_relaxed"][:, k] / N
                inputs[k].append({"xi": kernels.xi(batch.a_sorted[:, :N], p.M, delta), "r": sep["r"][:, k, None],
                                  "Ns_frac": frac[:, None], "row": np.full(1, len(per_row))})
                vals["Ns_frac"][:, k] = frac
                vals["Ns_full_frac"][:, k] = sep["Ns_full"][:, k] / N
                vals["r"][:, k], vals["delta"][:, k] = sep["r"][:, k], delta
                if N == p.multihead_N:
                    self._coverage(rr, sep["inside"][:, k], batch.rank < N)
            random_x = kernels.Batch(batch.alpha, null.x[:, :ell], null, order=batch.order)  # the same weights: the same sort
            vals["Ns_frac_sphere_null"] = kernels.separation(random_x, self.Ns, p.M)["Ns_relaxed"] / self.Ns[None, :]
            per_row.append((tuple(Ls), vals))
            if (t, ell) in check_at:
                checked.append((batch, sep, vals))
        for k, parts in inputs.items():
            if parts:
                self._bounds(k, parts, [v for _, v in per_row])
        for key, vals in per_row:
            for name, v in vals.items():
                sums.add(name, key, v)
        for args in checked:
            self._check(*args, rr.window)
        sums.flush(self.acc, rr.head, rr.window)

    def _bounds(self, k: int, parts: list[dict[str, np.ndarray]], vals: list[dict[str, np.ndarray]]) -> None:
        """Both Theorem 2 bounds at ``N = Ns[k]`` on every row of a record, by the statements' own formulas."""
        p = self.proto
        stacked = {name: np.concatenate([q[name] for q in parts]) for name in ("xi", "r", "Ns_frac")}
        values = {**stacked, "N": float(self.Ns[k]), "M": p.M, "C_H": p.hoeffding_constant}
        lower, _ = bridge.sides(self.stmts["lower"], values, selected=stacked["xi"].shape)
        _, upper = bridge.sides(self.stmts["upper"], values, selected=stacked["xi"].shape)
        self.tally.add(self.stmts["lower"].id, lower, stacked["Ns_frac"])
        self.tally.add(self.stmts["upper"].id, stacked["Ns_frac"], upper)
        cuts = np.cumsum([q["r"].shape[0] for q in parts])[:-1]
        for q, lo, up in zip(parts, np.split(lower[:, 0], cuts), np.split(upper[:, 0], cuts)):
            row = vals[int(q["row"][0])]
            row["lower"][:, k], row["upper"][:, k] = lo, up

    def _check(self, batch: kernels.Batch, sep: dict[str, np.ndarray], vals: dict[str, np.ndarray],
               window: np.ndarray) -> None:
        """Sampled rows against theory's float forms and the Theorem 2 statements (``empirical.checks``)."""
        p = self.proto
        rows = checks.sample(self.window_offset + window, p.check_every)
        if not rows.size:
            return
        a, x = batch.alpha[rows], batch.x[rows]  # type: ignore[index]
        delta = bridge.compute("delta_min", bridge.weights_instance(np.full(a.shape, 1.0 / a.shape[1]), x))
        self.dev.compare("delta", vals["delta"][rows, 0], delta)
        live = np.nonzero(self.Ns < batch.ell)[0]
        for k in live[np.unique(np.linspace(0, live.size - 1, min(3, live.size)).round().astype(int))]:
            N = int(self.Ns[k])
            inst = bridge.weights_instance(a, x, N, M=p.M, delta=delta)
            r = bridge.compute("r_paper", inst)
            self.dev.compare("r", sep["r"][rows, k], r)
            inst = inst.with_params(r=r)
            # a selected token at the ball's edge within rounding is in or out by summation order: not compared
            dist = bridge.compute("context_distance", inst)
            clear = np.all(~inst.mask | (np.abs(dist - r[:, None]) > checks.EDGE * r[:, None]), axis=1)
            self.dev.skip("Ns at the ball's edge", int((~clear).sum()))
            for name in ("Ns_relaxed", "Ns_full"):
                self.dev.compare(name, sep[name][rows[clear], k], bridge.compute(name, inst)[clear])
            ref_xi = np.take_along_axis(bridge.compute("xi", inst), batch.order[rows, :N], axis=1)
            self.dev.compare("xi", kernels.xi(batch.a_sorted[rows, :N], p.M, delta), ref_xi)
            observed = inst.with_params(Ns_frac=vals["Ns_frac"][rows, k], C_H=p.hoeffding_constant)
            for side, stmt in self.stmts.items():
                ev = stmt.evaluate(observed)
                self.dev.applicable(stmt.id, ev.applicable)
                self.dev.compare(stmt.id, vals[side][rows, k], ev.lhs if side == "lower" else ev.rhs)

    def _coverage(self, rr: RecordRows, inside: np.ndarray, selected: np.ndarray) -> None:
        ins = inside.reshape(rr.B, rr.H, -1)
        sel = selected.reshape(rr.B, rr.H, -1)
        for g in self.groups:
            union_in = ins[:, list(g)].any(1).sum(-1)
            union_sel = sel[:, list(g)].any(1).sum(-1)
            self.coverage[:, 0] += union_in / union_sel
            self.coverage[:, 1] += 1.0

    def finish(self) -> dict[str, Any]:
        """``{"separability": results}``."""
        return {"separability": self._results()}

    def _results(self) -> dict[str, Any]:
        p = self.proto
        L = p.separability_L
        per_N: list[dict[str, Any]] = []
        if ("Ns_frac", L) in self.acc:
            means = {k: self.acc.mean((k, L)) for k in SERIES}
            for k, N in enumerate(self.Ns):
                ph = {name: means[name][:, k] for name in SERIES}
                if not np.isfinite(ph["Ns_frac"]).any():
                    continue
                per_N.append({"N": int(N), "per_head": ph,
                              "median_over_heads": {s: float(np.nanmedian(v)) for s, v in ph.items()},
                              "mean_over_heads": {s: float(np.nanmean(v)) for s, v in ph.items()},
                              "max_over_heads": {s: float(np.nanmax(v)) for s, v in ph.items()},
                              "min_over_heads": {s: float(np.nanmin(v)) for s, v in ph.items()}})
        p_hat = next((r["mean_over_heads"]["Ns_frac"] for r in per_N if r["N"] == p.multihead_N), float("nan"))
        delta = self.acc.mean(("delta", L)) if ("delta", L) in self.acc else np.array([np.nan])
        return {"per_N": per_N, "multihead": self._multihead(p_hat), "statements": self.tally.summary(),
                "checks": self.dev.summary(),
                "delta_summary": {"min": float(np.nanmin(delta)), "median": float(np.nanmedian(delta)),
                                  "max": float(np.nanmax(delta)), "what": "per-head means of each row's delta"},
                "vacuous": _vacuous(per_N),
                "choices": {"L": L, "N": p.separability_N, "tensor": p.separability_tensor,
                            "sphere": p.separability_sphere, "M": p.M, "hoeffding_constant": p.hoeffding_constant,
                            "r": "min over non-selected i of ||s - alpha_i x_i|| (per row)",
                            "delta": "min pairwise distance of the row's x (per row)",
                            "N_s": "selected i with ||alpha_i x_i - s|| <= r (theory Ns_relaxed)",
                            "null": "the same weights, x uniform on the sphere of radius M (seeded per layer, window, head)",
                            "bounds": {k: v.id for k, v in self.stmts.items()}}}

    def _multihead(self, p_hat: float) -> dict[str, Any]:
        from attnbounds.theory.mathematics.instance import Instance

        P = self.proto
        H = len(self.groups[0]) if self.groups else 0  # fewer heads per layer than multihead_H: all of them
        out: dict[str, Any] = {"H": H, "N": P.multihead_N, "groups": [list(g) for g in self.groups],
                               "p_observed": p_hat, "definition":
                               "per (window, query, head group): |union of separated tokens| / |union of top-N sets|"}
        total, count = self.coverage[0]
        out["coverage_observed"] = float(total / count) if count else None
        out["coverage_samples"] = int(count)
        paper = Instance.from_weights(np.ones((2, 1)), H=[max(H, 1), 3], p=[p_hat if np.isfinite(p_hat) else 0.0, 0.8])
        ev = bridge.evaluate("multihead", paper)
        cov_theory = bridge.compute("coverage_enum", paper)
        out["coverage_predicted_independent"] = float(cov_theory[0]) if np.isfinite(p_hat) else None
        out["paper_example"] = {"H": 3, "p": 0.8, "coverage": float(cov_theory[1]), "statement_margin": float(ev.margin[1])}
        return out


def _vacuous(per_N: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the bounds say nothing: the lower bound <= 0 or the upper bound >= 1 on every head."""
    low = [r for r in per_N if np.nanmax(r["per_head"]["lower"]) <= 0]
    up = [r for r in per_N if np.nanmin(r["per_head"]["upper"]) >= NEARLY_ONE]
    return {"lower_at_or_below_0_for_N": [r["N"] for r in low], "upper_nearly_1_for_N": [r["N"] for r in up],
            "lower_max": max((float(np.nanmax(r["per_head"]["lower"])) for r in low), default=None),
            "upper_min": min((float(np.nanmin(r["per_head"]["upper"])) for r in up), default=None),
            "what": f"N where a bound says (almost) nothing on every head: lower <= 0, upper >= {NEARLY_ONE}; and its "
                    "largest (smallest) value there"}
