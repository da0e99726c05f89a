"""Experiment 4 (paper Fig. 4): gradient sensitivity g(T, eps) of softmax on the model's logits.

``g(T, eps) = ||softmax((l + eps v)/T) - softmax(l/T)||_2 / eps`` (theory quantity ``g_fd``), ``v`` a
random unit vector per row, drawn from a generator seeded by (seed, layer, window, query position, L), so
it does not depend on how windows are batched nor on which process runs a batch; averaged over rows per head, then the maximum over heads.
``l`` are the raw logits ``q . k`` by default (``gradient_logits``; the model's own temperature is
then ``T = sqrt(d_head)``), or the model's scaled logits. The curves printed by Corollary 3
(``corollary3[fd]``: ``min{1/(4T), sqrt 2}``) and the proved envelope (``corollary3[fd,corrected]``:
``min{1/(2T), sqrt 2/eps}``) are the rhs of those registered statements on the same instances.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from attnbounds.empirical import bridge
from attnbounds.empirical.accumulate import PerHead, Tally
from attnbounds.empirical.config import Protocol
from attnbounds.empirical.extract import LayerRecord
from attnbounds.empirical.rows import QuerySpec, build

ENVELOPES = ("corollary3[fd]", "corollary3[fd,corrected]")


class Gradients:
    name = "gradients"

    def __init__(self, proto: Protocol, n_heads: int, spec: QuerySpec, n_windows: int = 1):
        self.proto = proto
        # logit rows exist only over visible keys: causally masked keys are always dropped here
        self.spec = QuerySpec(spec.mode, spec.count, "drop")
        self.acc = PerHead(n_heads, n_windows)
        self.tally = Tally()
        self.curves: dict[str, np.ndarray] = {}
        self.window_offset = 0  # index of the batch's first window among all windows

    def begin(self, batch: int, window_offset: int) -> None:
        self.window_offset = window_offset

    def state(self) -> dict[str, Any]:
        return {"acc": self.acc.state(), "tally": self.tally.state(), "curves": self.curves}

    def absorb(self, state: dict[str, Any]) -> None:
        self.acc.absorb(state["acc"])
        self.tally.absorb(state["tally"])
        for sid, curve in state["curves"].items():
            self.curves.setdefault(sid, curve)

    def directions(self, rows: Any, layer: int, H: int) -> np.ndarray:
        """A unit vector per row, from a generator seeded by (seed, layer, window, query position, L).

        Rows come in runs of the ``H`` heads of one (window, query) (``rows.build``): one draw of ``(H, L)`` per run.
        """
        R, L = rows.logits.shape
        v = np.empty((R, L))
        for start in range(0, R, H):
            w = self.window_offset + int(rows.window[start])
            rng = np.random.default_rng([self.proto.seed, layer, w, int(rows.query[start]), L])
            v[start: start + H] = rng.standard_normal((H, L))
        return v / np.linalg.norm(v, axis=-1, keepdims=True)

    def consume(self, rec: LayerRecord) -> None:
        p = self.proto
        T = np.asarray(p.T_grid, dtype=float)
        E = np.asarray(p.eps_grid, dtype=float)
        for rows in build(rec, p.gradient_L, self.spec, tensor=None, logits=p.gradient_logits):
            R = cast(np.ndarray, rows.logits).shape[0]
            v = self.directions(rows, rec.layer, rec.n_heads)
            # one instance row per (row, T, eps): logits and v repeated, T and eps varying
            nT, nE = T.size, E.size
            lg = np.repeat(cast(np.ndarray, rows.logits), nT * nE, axis=0)
            vv = np.repeat(v, nT * nE, axis=0)
            Tc = np.tile(np.repeat(T, nE), R)
            Ec = np.tile(E, R * nT)
            inst = bridge.logits_instance(lg, Tc, v=vv, eps=Ec)
            g = bridge.compute("g_fd", inst).reshape(R, nT, nE)
            for i in range(nT):
                for j in range(nE):
                    self.acc.add(("g", i, j), rows.head, g[:, i, j], rows.window)
            for sid in ENVELOPES:
                ev = bridge.evaluate(sid, inst)
                self.tally.add(sid, ev)
                self.curves.setdefault(sid, ev.rhs[: nT * nE].reshape(nT, nE))

    def finish(self) -> dict[str, Any]:
        p = self.proto
        nT, nE = len(p.T_grid), len(p.eps_grid)
        per_head = np.stack([np.stack([self.acc.mean(("g", i, j)) for j in range(nE)]) for i in range(nT)])  # (T,E,H)
        return {"T": list(p.T_grid), "eps": list(p.eps_grid),
                "per_head": per_head, "max_over_heads": np.nanmax(per_head, axis=-1),
                "median_over_heads": np.nanmedian(per_head, axis=-1),
                "argmax_head": np.nanargmax(per_head, axis=-1),
                "envelopes": {sid: c for sid, c in self.curves.items()},
                "statements": self.tally.summary(),
                "choices": {"L": p.gradient_L, "logits": p.gradient_logits,
                            "direction": "v ~ uniform on the unit sphere of R^L, one per row, seeded by "
                                          "(seed, layer, window, query, L)",
                            "aggregate": "mean over rows per head, then max over heads"}}
