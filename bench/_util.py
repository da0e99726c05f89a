"""Shared helpers of the benchmark scripts: one BLAS thread, interleaved best-of timing, a result table.

Every figure is a ratio or a rate measured in the same run (never compared with a stored number).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # the test instruments (tests/planted.py) beside bench/
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # per-core figures; must precede the first numpy import

import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

warnings.filterwarnings("ignore", category=RuntimeWarning)


@dataclass
class Row:
    section: str
    item: str
    value: float
    unit: str
    goal: str = ""
    ok: bool | None = None
    note: str = ""

    def cells(self) -> list[str]:
        v = f"{self.value:.3g}" if abs(self.value) < 1e5 else f"{self.value:.3e}"
        ok = "" if self.ok is None else ("yes" if self.ok else "NO")
        return [self.section, self.item, f"{v} {self.unit}", self.goal, ok, self.note]


def timed(fn: Callable[[Any], Any], prepare: Callable[[], Any] = lambda: None, repeats: int = 5) -> float:
    """Best wall time of ``fn(prepare())`` over ``repeats`` (the preparation is not timed)."""
    best = float("inf")
    for _ in range(repeats):
        arg = prepare()
        t = time.perf_counter()
        fn(arg)
        best = min(best, time.perf_counter() - t)
    return best


def interleaved(fns: dict[str, tuple[Callable[[Any], Any], Callable[[], Any]]], repeats: int = 5) -> dict[str, float]:
    """Best times of several measurements taken in turns, so load on a shared machine hits all alike."""
    best = {k: float("inf") for k in fns}
    for _ in range(repeats):
        for name, (fn, prepare) in fns.items():
            best[name] = min(best[name], timed(fn, prepare, 1))
    return best


def table(rows: list[Row]) -> str:
    head = ["section", "item", "value", "goal", "ok", "note"]
    cells = [head] + [r.cells() for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    line = lambda c: "  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip()  # noqa: E731
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(c) for c in cells[1:]])
