"""Per-head means and statement tallies, as partial states per batch of windows merged in a fixed order.

The paper averages per head, then over heads. A batch of windows is one task (``empirical.tasks``); it
fills a :class:`PerHead` with sums and counts *per window* and a :class:`Tally`, and hands over their
``state()``. The driver ``absorb``\\ s the states in batch order: per-head sums are folded window by window
in window order, so the merged sums do not depend on how the windows were cut into batches, nor on
which process ran them, nor in what order the tasks finished.
"""

from __future__ import annotations

from typing import Any, Hashable

import numpy as np


class PerHead:
    """Sums and counts per (key, window, head): ``add`` rows as they stream in, ``mean`` at the end.

    ``n_windows`` slots hold one batch's windows (a partial state); a driver-side accumulator uses one slot
    (the running total, left-folded over the windows in order by :meth:`absorb`).
    """

    def __init__(self, n_heads: int, n_windows: int = 1):
        self.n_heads, self.n_windows = n_heads, n_windows
        self._sum: dict[Hashable, np.ndarray] = {}
        self._cnt: dict[Hashable, np.ndarray] = {}

    def _slot(self, key: Hashable) -> None:
        if key not in self._sum:
            self._sum[key] = np.zeros((self.n_windows, self.n_heads))
            self._cnt[key] = np.zeros((self.n_windows, self.n_heads))

    def add(self, key: Hashable, heads: np.ndarray, values: np.ndarray, windows: np.ndarray | None = None) -> None:
        """Add one value per row (row ``i`` of head ``heads[i]`` in window ``windows[i]``, default 0); NaN skipped."""
        values = np.asarray(values, dtype=np.float64)
        heads = np.asarray(heads)
        windows = np.zeros(heads.shape, dtype=np.intp) if windows is None else np.asarray(windows)
        ok = np.isfinite(values)
        self._slot(key)
        np.add.at(self._sum[key], (windows[ok], heads[ok]), values[ok])
        np.add.at(self._cnt[key], (windows[ok], heads[ok]), 1.0)

    def state(self) -> dict[str, dict[Hashable, np.ndarray]]:
        """The partial state: ``(n_windows, n_heads)`` sums and counts per key (plain data, picklable)."""
        return {"sum": self._sum, "cnt": self._cnt}

    def absorb(self, state: dict[str, dict[Hashable, np.ndarray]]) -> None:
        """Fold a partial state into the running totals, window after window (call in batch order)."""
        if self.n_windows != 1:
            raise ValueError("absorb folds into a one-slot (driver-side) accumulator")
        for key, sums in state["sum"].items():
            cnts = state["cnt"][key]
            if key not in self._sum:
                self._sum[key] = np.zeros((1, self.n_heads))
                self._cnt[key] = np.zeros((1, self.n_heads))
            tot, cnt = self._sum[key][0], self._cnt[key][0]
            for w in range(sums.shape[0]):
                tot += sums[w]
                cnt += cnts[w]

    def _total(self, table: dict[Hashable, np.ndarray], key: Hashable) -> np.ndarray:
        tot = np.zeros(self.n_heads)
        for row in table[key]:  # the same left fold over windows as absorb
            tot += row
        return tot

    def mean(self, key: Hashable) -> np.ndarray:
        """Per-head mean, NaN for heads without rows."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._total(self._sum, key) / self._total(self._cnt, key)

    def count(self, key: Hashable) -> np.ndarray:
        return self._total(self._cnt, key)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._sum


class Tally:
    """How a statement fared on real instances: counts, worst margin, ratios lhs/rhs."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    @staticmethod
    def _empty() -> dict[str, Any]:
        return {"instances": 0, "applicable": 0, "violated": 0, "min_margin": np.inf, "max_ratio": -np.inf,
                "_ratios": []}

    def add(self, statement_id: str, evaluation: Any) -> None:
        t = self.rows.setdefault(statement_id, self._empty())
        app = np.asarray(evaluation.applicable, dtype=bool)
        t["instances"] += int(app.size)
        t["applicable"] += int(app.sum())
        if app.any():
            margin = np.asarray(evaluation.margin)[app]
            ratio = np.asarray(evaluation.ratio)[app]
            t["violated"] += int((np.asarray(evaluation.margin_hi)[app] < 0).sum())
            t["min_margin"] = float(min(t["min_margin"], np.nanmin(margin)))
            fin = ratio[np.isfinite(ratio)]
            if fin.size:
                t["max_ratio"] = float(max(t["max_ratio"], fin.max()))
                t["_ratios"].append(fin)

    def state(self) -> dict[str, dict[str, Any]]:
        """The partial state (plain data, picklable)."""
        return self.rows

    def absorb(self, state: dict[str, dict[str, Any]]) -> None:
        """Merge a partial state (counts add, extremes combine, ratios are kept for the median)."""
        for sid, part in state.items():
            t = self.rows.setdefault(sid, self._empty())
            for k in ("instances", "applicable", "violated"):
                t[k] += part[k]
            t["min_margin"] = float(min(t["min_margin"], part["min_margin"]))
            t["max_ratio"] = float(max(t["max_ratio"], part["max_ratio"]))
            t["_ratios"].extend(part["_ratios"])

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per statement: instances, applicable, violated, min margin, max and median ratio lhs/rhs."""
        out = {}
        for sid, t in self.rows.items():
            ratios = np.concatenate(t["_ratios"]) if t["_ratios"] else np.array([])
            out[sid] = {k: v for k, v in t.items() if not k.startswith("_")}
            out[sid]["median_ratio"] = float(np.median(ratios)) if ratios.size else None
            for k in ("min_margin", "max_ratio"):
                if not np.isfinite(out[sid][k]):
                    out[sid][k] = None
        return out
