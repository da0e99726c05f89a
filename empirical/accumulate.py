"""Per-head means and statement tallies, as partial states per batch of windows merged in a fixed order.

The paper averages per head, then over heads. A batch of windows is one task (``empirical.tasks``); it
fills a :class:`PerHead` with sums and counts *per window* and a :class:`Tally`, and hands over their
``state()``. The driver ``absorb``\\ s the states in batch order: per-head sums are folded window by window
in window order, so the merged sums do not depend on how the windows were cut into batches, nor on
which process ran them, nor in what order the tasks finished.
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

import numpy as np


class PerHead:
    """Sums and counts per (key, window, head): ``add`` rows as they stream in, ``mean`` at the end.

    A key's values may carry trailing axes (one value per N, say): its table is ``(n_windows, n_heads, ...)``.
    ``n_windows`` slots hold one batch's windows (a partial state); a driver-side accumulator uses one slot
    (the running total, left-folded over the windows in order by :meth:`absorb`).
    """

    def __init__(self, n_heads: int, n_windows: int = 1):
        self.n_heads, self.n_windows = n_heads, n_windows
        self._sum: dict[Hashable, np.ndarray] = {}
        self._cnt: dict[Hashable, np.ndarray] = {}

    def _slot(self, key: Hashable, extra: tuple[int, ...]) -> None:
        if key not in self._sum:
            self._sum[key] = np.zeros((self.n_windows, self.n_heads, *extra))
            self._cnt[key] = np.zeros((self.n_windows, self.n_heads, *extra))

    def add(self, key: Hashable, heads: np.ndarray, values: np.ndarray, windows: np.ndarray | None = None) -> None:
        """Add one value (or one array of trailing shape) per row: row ``i`` of head ``heads[i]`` in window
        ``windows[i]`` (default 0); NaN entries are skipped."""
        values = np.asarray(values, dtype=np.float64)
        heads = np.asarray(heads)
        windows = np.zeros(heads.shape, dtype=np.intp) if windows is None else np.asarray(windows)
        ok = np.isfinite(values)
        self._slot(key, values.shape[1:])
        np.add.at(self._sum[key], (windows, heads), np.where(ok, values, 0.0))
        np.add.at(self._cnt[key], (windows, heads), ok.astype(np.float64))

    def add_sums(self, key: Hashable, heads: np.ndarray, windows: np.ndarray, sums: np.ndarray,
                 counts: np.ndarray) -> None:
        """Add sums and counts already taken over some rows (one per ``(windows[i], heads[i])``)."""
        self._slot(key, sums.shape[1:])
        np.add.at(self._sum[key], (windows, heads), sums)
        np.add.at(self._cnt[key], (windows, heads), counts)

    def state(self) -> dict[str, dict[Hashable, np.ndarray]]:
        """The partial state: ``(n_windows, n_heads, ...)`` sums and counts per key (plain data, picklable)."""
        return {"sum": self._sum, "cnt": self._cnt}

    def absorb(self, state: dict[str, dict[Hashable, np.ndarray]]) -> None:
        """Fold a partial state into the running totals, window after window (call in batch order)."""
        if self.n_windows != 1:
            raise ValueError("absorb folds into a one-slot (driver-side) accumulator")
        for key, sums in state["sum"].items():
            cnts = state["cnt"][key]
            self._slot(key, sums.shape[2:])
            tot, cnt = self._sum[key][0], self._cnt[key][0]
            for w in range(sums.shape[0]):
                tot += sums[w]
                cnt += cnts[w]

    def _total(self, table: dict[Hashable, np.ndarray], key: Hashable) -> np.ndarray:
        tot = np.zeros(table[key].shape[1:])
        for row in table[key]:  # the same left fold over windows as absorb
            tot += row
        return tot

    def mean(self, key: Hashable) -> np.ndarray:
        """Per-head mean ``(n_heads, ...)``, NaN for heads without rows."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._total(self._sum, key) / self._total(self._cnt, key)

    def count(self, key: Hashable) -> np.ndarray:
        return self._total(self._cnt, key)

    def keys(self) -> list[Hashable]:
        return list(self._sum)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._sum


#: the histogram of log10(lhs / rhs) a :class:`Tally` keeps for its median: bins of 0.001 over [-12, 12]
RATIO_BINS = np.linspace(-12.0, 12.0, 24001)
#: a negative margin within this fraction of max(|lhs|, |rhs|) is float64 rounding at an equality, not a violation
ROUNDING = 1e-12


class Tally:
    """How a statement fared on real instances: counts, worst margin, ratios lhs/rhs.

    The median ratio comes from a histogram of ``log10(lhs / rhs)`` in bins of 0.001 (integer counts, so
    merging partial states in any order gives the same median), ratios outside ``[1e-12, 1e12]`` in the
    end bins. A margin below 0 by less than :data:`ROUNDING` of the sides' size is counted apart
    (``at_equality``): float64 rounding at an equality case, not a violation.
    """

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}
        self._pending: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        self._pending_size = 0

    @staticmethod
    def _empty() -> dict[str, Any]:
        return {"instances": 0, "applicable": 0, "violated": 0, "at_equality": 0, "min_margin": np.inf,
                "max_ratio": -np.inf, "_hist": np.zeros(RATIO_BINS.size - 1, dtype=np.int64)}

    def add(self, statement_id: str, lhs: np.ndarray, rhs: np.ndarray) -> None:
        """One (lhs, rhs) pair per instance; NaN pairs (no such instance, e.g. ``N >= L``) are not counted.
        Pairs are buffered and tallied in bulk."""
        lhs, rhs = np.broadcast_arrays(np.asarray(lhs, dtype=np.float64), np.asarray(rhs, dtype=np.float64))
        self._pending.setdefault(statement_id, []).append((lhs.ravel(), rhs.ravel()))
        self._pending_size += lhs.size
        if self._pending_size > 1 << 21:
            self._flush()

    def _flush(self) -> None:
        for sid, parts in self._pending.items():
            self._tally(sid, np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts]))
        self._pending.clear()
        self._pending_size = 0

    def _tally(self, statement_id: str, lhs: np.ndarray, rhs: np.ndarray) -> None:
        t = self.rows.setdefault(statement_id, self._empty())
        app = ~(np.isnan(lhs) | np.isnan(rhs))
        t["instances"] += int(app.sum())
        t["applicable"] += int(app.sum())
        if not app.any():
            return
        lhs, rhs = lhs[app], rhs[app]
        margin = rhs - lhs
        beyond = margin < -ROUNDING * np.maximum(np.abs(lhs), np.abs(rhs))
        t["violated"] += int(beyond.sum())
        t["at_equality"] += int(((margin < 0) & ~beyond).sum())
        t["min_margin"] = float(min(t["min_margin"], margin.min()))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where((lhs == 0) & (rhs == 0), 1.0, lhs / rhs)
        fin = ratio[np.isfinite(ratio)]
        if fin.size:
            t["max_ratio"] = float(max(t["max_ratio"], fin.max()))
            pos = fin[fin > 0]
            if pos.size:
                idx = np.clip(np.searchsorted(RATIO_BINS, np.log10(pos)) - 1, 0, RATIO_BINS.size - 2)
                t["_hist"] += np.bincount(idx, minlength=RATIO_BINS.size - 1)

    def state(self) -> dict[str, dict[str, Any]]:
        """The partial state (plain data, picklable)."""
        self._flush()
        return self.rows

    def absorb(self, state: dict[str, dict[str, Any]]) -> None:
        """Merge a partial state (counts add, extremes combine, histograms add)."""
        self._flush()
        for sid, part in state.items():
            t = self.rows.setdefault(sid, self._empty())
            for k in ("instances", "applicable", "violated", "at_equality"):
                t[k] += part[k]
            t["min_margin"] = float(min(t["min_margin"], part["min_margin"]))
            t["max_ratio"] = float(max(t["max_ratio"], part["max_ratio"]))
            t["_hist"] = t["_hist"] + part["_hist"]

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per statement: instances, applicable, violated, min margin, max and median ratio lhs/rhs."""
        self._flush()
        out = {}
        for sid, t in self.rows.items():
            out[sid] = {k: v for k, v in t.items() if not k.startswith("_")}
            hist = t["_hist"]
            if hist.sum():
                b = int(np.searchsorted(np.cumsum(hist), (hist.sum() + 1) / 2))
                out[sid]["median_ratio"] = float(10 ** (0.5 * (RATIO_BINS[b] + RATIO_BINS[b + 1])))
            else:
                out[sid]["median_ratio"] = None
            for k in ("min_margin", "max_ratio"):
                if not np.isfinite(out[sid][k]):
                    out[sid][k] = None
        return out


class RecordSums:
    """Row sums within one layer record before they reach a :class:`PerHead`: rows that count for the same
    window lengths are summed together (one array per (name, lengths)), then added once per length."""

    def __init__(self) -> None:
        self.sums: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}
        self.counts: dict[tuple[str, tuple[int, ...]], np.ndarray] = {}

    def add(self, name: str, Ls: tuple[int, ...], values: np.ndarray) -> None:
        """``values`` ``(R, ...)``: one per (window, head) row of the record; NaN entries are not counted."""
        key = (name, Ls)
        ok = np.isfinite(values)
        if key not in self.sums:
            self.sums[key] = np.zeros(values.shape)
            self.counts[key] = np.zeros(values.shape)
        self.sums[key] += np.where(ok, values, 0.0)
        self.counts[key] += ok

    def flush(self, acc: PerHead, heads: np.ndarray, windows: np.ndarray,
              columns: Callable[[str, int], np.ndarray | None] | None = None) -> None:
        """Add every (name, lengths) sum to ``acc`` under ``(name, L)`` for each of its lengths ``L``.
        ``columns(name, L)``: a mask over the trailing axis of the columns ``L`` reports (None: all); the
        others are added empty (rows that count for other lengths too may have filled them)."""
        for (name, Ls), total in self.sums.items():
            counts = self.counts[(name, Ls)]
            for L in Ls:
                keep = columns(name, L) if columns is not None else None
                if keep is None:
                    acc.add_sums((name, L), heads, windows, total, counts)
                else:
                    acc.add_sums((name, L), heads, windows, np.where(keep, total, 0.0), np.where(keep, counts, 0.0))
        self.sums.clear()
        self.counts.clear()
