"""Running per-head means and statement tallies (the paper averages per head, then over heads)."""

from __future__ import annotations

from typing import Any, Hashable

import numpy as np


class PerHead:
    """Sums and counts per (key, head): ``add`` rows as they stream in, ``mean`` at the end."""

    def __init__(self, n_heads: int):
        self.n_heads = n_heads
        self._sum: dict[Hashable, np.ndarray] = {}
        self._cnt: dict[Hashable, np.ndarray] = {}

    def add(self, key: Hashable, heads: np.ndarray, values: np.ndarray) -> None:
        """Add one value per row; NaN values (not applicable) are skipped."""
        values = np.asarray(values, dtype=np.float64)
        ok = np.isfinite(values)
        if key not in self._sum:
            self._sum[key] = np.zeros(self.n_heads)
            self._cnt[key] = np.zeros(self.n_heads)
        np.add.at(self._sum[key], heads[ok], values[ok])
        np.add.at(self._cnt[key], heads[ok], 1.0)

    def mean(self, key: Hashable) -> np.ndarray:
        """Per-head mean, NaN for heads without rows."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self._sum[key] / self._cnt[key]

    def count(self, key: Hashable) -> np.ndarray:
        return self._cnt[key]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._sum


class Tally:
    """How a statement fared on real instances: counts, worst margin, ratios lhs/rhs."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def add(self, statement_id: str, evaluation: Any) -> None:
        t = self.rows.setdefault(statement_id, {"instances": 0, "applicable": 0, "violated": 0,
                                                "min_margin": np.inf, "max_ratio": -np.inf, "_ratios": []})
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
