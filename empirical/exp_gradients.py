"""Experiment 4 (paper Fig. 4): gradient sensitivity g(T, eps) of softmax on the model's logits.

``g(T, eps) = ||softmax((l + eps v)/T) - softmax(l/T)||_2 / eps`` (theory quantity ``g_fd``) for every query
row, ``v`` a random unit vector: for query ``t`` the first ``t + 1`` coordinates of one Gaussian vector per
(seed, layer, window, head), normalised (so it does not depend on how windows are batched nor on which
process runs a batch); averaged over rows per head, then the maximum over heads. ``l`` are the raw logits
``q . k`` by default (``gradient_logits``; the model's own temperature is then ``1 / scaling``, i.e.
``sqrt(d_head)`` for GPT-2), or the model's scaled logits (own temperature 1). The curves printed by
Corollary 3 (``corollary3[fd]``: ``min{1/(4T), sqrt 2}``) and the proved envelope
(``corollary3[fd,corrected]``: ``min{1/(2T), sqrt 2/eps}``) are the right sides of those registered
statements, by their own formulas.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from attnbounds.empirical import bridge, checks, kernels
from attnbounds.empirical.accumulate import PerHead, RecordSums, Tally
from attnbounds.empirical.config import Protocol
from attnbounds.empirical.rows import QuerySpec, RecordRows

ENVELOPES = ("corollary3[fd]", "corollary3[fd,corrected]")


class Gradients:
    name = "gradients"

    def __init__(self, proto: Protocol, n_heads: int, spec: QuerySpec, n_windows: int = 1):
        self.proto = proto
        self.spec = QuerySpec(spec.mode, spec.count, "drop")  # logit rows exist only over visible keys
        self.acc = PerHead(n_heads, n_windows)
        self.tally = Tally()
        self.T = np.asarray(proto.T_grid, dtype=float)
        self.eps = np.asarray(proto.eps_grid, dtype=float)
        self.envelopes = {sid: np.broadcast_to(bridge.sides(sid, {"g_fd": 0.0, "T": self.T[:, None],
                                                                 "eps": self.eps[None, :]})[1],
                                               (self.T.size, self.eps.size)).copy() for sid in ENVELOPES}
        self.window_offset = 0  # index of the batch's first window among all windows
        self.own_T: dict[int, float] = {}
        self.dev = checks.Deviations()

    @property
    def Ls(self) -> tuple[int, ...]:
        return (self.proto.gradient_L,)

    def begin(self, batch: int, window_offset: int) -> None:
        self.window_offset = window_offset

    def state(self) -> dict[str, Any]:
        return {"acc": self.acc.state(), "tally": self.tally.state(), "own_T": self.own_T, "checks": self.dev.state()}

    def absorb(self, state: dict[str, Any]) -> None:
        self.acc.absorb(state["acc"])
        self.tally.absorb(state["tally"])
        self.dev.absorb(state["checks"])
        self.own_T.update(state["own_T"])

    def directions(self, rr: RecordRows) -> np.ndarray:
        """One Gaussian vector ``(R, T)`` per (seed, layer, window, head); a row takes its first ``l`` coordinates."""
        out = np.empty((rr.R, rr.T))
        for b in range(rr.B):
            rng = np.random.default_rng([self.proto.seed, rr.rec.layer, self.window_offset + b, rr.T])
            out[b * rr.H: (b + 1) * rr.H] = rng.standard_normal((rr.H, rr.T))
        return out

    def consume(self, rr: RecordRows, rows: dict[tuple[int, int], list[int]]) -> None:
        scaled = self.proto.gradient_logits == "scaled"
        self.own_T[rr.rec.layer] = 1.0 if scaled else 1.0 / rr.rec.scaling
        sums = RecordSums()
        U = self.directions(rr)
        check_at = checks.positions(rows, self.proto.check_positions)
        for (t, ell), Ls in rows.items():
            v = U[:, :ell] / kernels.norm(U[:, :ell])[:, None]
            logits = rr.logits(t, ell, scaled)
            g = kernels.g_fd(logits, v, self.T, self.eps)
            sums.add("g", tuple(Ls), g)
            for sid, rhs in self.envelopes.items():
                self.tally.add(sid, g, np.broadcast_to(rhs, g.shape))
            if (t, ell) in check_at:
                self._check(logits, v, g, rr.window)
        sums.flush(self.acc, rr.head, rr.window)

    def _check(self, logits: np.ndarray, v: np.ndarray, g: np.ndarray, window: np.ndarray) -> None:
        """Sampled rows against theory's ``g_fd`` and the Corollary 3 statements (``empirical.checks``)."""
        rows = checks.sample(self.window_offset + window, self.proto.check_every)
        if not rows.size:
            return
        for i, j in {(0, 0), (self.T.size // 2, self.eps.size - 1), (self.T.size - 1, self.eps.size // 2)}:
            inst = bridge.logits_instance(logits[rows], float(self.T[i]), v=v[rows], eps=float(self.eps[j]))
            self.dev.compare("g_fd", g[rows, i, j], bridge.compute("g_fd", inst))
            for sid, rhs in self.envelopes.items():
                ev = bridge.evaluate(sid, inst)
                self.dev.applicable(sid, ev.applicable)
                self.dev.compare(sid, np.full(rows.size, rhs[i, j]), ev.rhs)

    def finish(self) -> dict[str, Any]:
        """``{"gradients": results}``."""
        return {"gradients": self._results()}

    def _results(self) -> dict[str, Any]:
        p = self.proto
        L = p.gradient_L
        per_head = np.moveaxis(self.acc.mean(("g", L)), 0, -1) if ("g", L) in self.acc else \
            np.full((self.T.size, self.eps.size, 1), np.nan)  # (T, eps, heads)
        own = sorted(set(self.own_T.values()))
        return {"T": list(p.T_grid), "eps": list(p.eps_grid),
                "per_head": per_head, "max_over_heads": np.nanmax(per_head, axis=-1),
                "median_over_heads": np.nanmedian(per_head, axis=-1),
                "argmax_head": np.nanargmax(np.where(np.isnan(per_head), -np.inf, per_head), axis=-1),
                "envelopes": self.envelopes, "statements": self.tally.summary(), "checks": self.dev.summary(),
                "own_temperature": {"values": own, "per_layer": {str(k): v for k, v in sorted(self.own_T.items())},
                                    "what": "the T at which softmax(l/T) is the model's own attention "
                                            "(1/scaling on raw logits, 1 on scaled ones)"},
                "choices": {"L": L, "logits": p.gradient_logits,
                            "direction": "v: for query t the first t + 1 coordinates of one Gaussian vector per "
                                         "(seed, layer, window, head), normalised",
                            "aggregate": "mean over rows per head, then max over heads"}}
