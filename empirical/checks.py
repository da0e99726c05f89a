"""Every run re-checks the kernels against theory: sampled rows of every layer record, recomputed by the
float forms of the registered quantities and statements (``attnbounds.theory``).

At ``check_positions`` query positions of each record (the longest rows among them), for every head of the
windows whose index is a multiple of ``check_every`` (so the rows checked do not depend on how the windows
were batched), the experiments hand the numbers they used to :class:`Deviations`, which rebuilds
the rows as theory :class:`~attnbounds.theory.mathematics.instance.Instance` objects, evaluates the same quantities and
statements there, and keeps the largest relative deviation per name and how many checked instances a
statement's hypotheses did not cover. ``results.json`` reports them; the tests require them at rounding level.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: deviations are relative to the reference, with this floor on the scale (numbers near 0 compared absolutely)
FLOOR = 1e-12
#: a count decided by a distance this close (relatively) to its threshold depends on rounding: not compared
EDGE = 1e-12


def positions(rows: dict[tuple[int, int], list[int]], count: int) -> set[tuple[int, int]]:
    """``count`` of the planned rows ``(t, l)``, evenly spread over their lengths, the longest always among them."""
    keys = sorted(rows, key=lambda k: (k[1], k[0]))
    if count <= 0 or not keys:
        return set()
    idx = np.unique(np.linspace(len(keys) - 1, 0, count).round().astype(int))
    return {keys[i] for i in idx}


def sample(windows: np.ndarray, every: int) -> np.ndarray:
    """The rows (of a record, in (window, head) order) of the windows whose global index is a multiple of ``every``."""
    return np.nonzero(np.asarray(windows) % every == 0)[0]


class Deviations:
    """Largest relative deviation of the kernels from theory per name, instances checked, and hypotheses that failed."""

    def __init__(self) -> None:
        self.max: dict[str, float] = {}
        self.checked = 0
        self.not_applicable: dict[str, int] = {}
        self.skipped: dict[str, int] = {}

    def compare(self, name: str, got: Any, ref: Any) -> None:
        got, ref = np.asarray(got, dtype=float), np.asarray(ref, dtype=float)
        both_nan = np.isnan(got) & np.isnan(ref)
        scale = np.maximum(np.abs(ref), FLOOR * max(1.0, float(np.nanmax(np.abs(ref), initial=0.0))))
        with np.errstate(invalid="ignore"):
            dev = np.where(both_nan, 0.0, np.abs(got - ref) / scale)
        dev = np.where(np.isnan(dev), np.inf, dev)
        self.max[name] = max(self.max.get(name, 0.0), float(dev.max(initial=0.0)))
        self.checked += int(got.size)

    def skip(self, what: str, count: int) -> None:
        """``count`` numbers not compared because rounding decides them (``what`` says why)."""
        self.skipped[what] = self.skipped.get(what, 0) + count

    def applicable(self, statement_id: str, ok: np.ndarray) -> None:
        self.not_applicable[statement_id] = self.not_applicable.get(statement_id, 0) + int((~np.asarray(ok)).sum())

    def state(self) -> dict[str, Any]:
        return {"max": self.max, "checked": self.checked, "not_applicable": self.not_applicable, "skipped": self.skipped}

    def absorb(self, state: dict[str, Any]) -> None:
        for k, v in state["max"].items():
            self.max[k] = max(self.max.get(k, 0.0), v)
        self.checked += state["checked"]
        for k, v in state["not_applicable"].items():
            self.not_applicable[k] = self.not_applicable.get(k, 0) + v
        for k, v in state["skipped"].items():
            self.skipped[k] = self.skipped.get(k, 0) + v

    def summary(self) -> dict[str, Any]:
        return {"max_relative_deviation": dict(sorted(self.max.items())),
                "worst": max(self.max.values(), default=0.0), "numbers_checked": self.checked,
                "not_applicable": self.not_applicable, "skipped": self.skipped,
                "what": "kernel numbers vs the float forms of the theory quantities and statements, on sampled rows "
                        "of every layer record"}
