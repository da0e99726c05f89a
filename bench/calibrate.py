"""Re-measure the search rates of the cost classes (``theory.quantities.COSTS``): units of work per second.

Run: ``python bench/calibrate.py [--budget 2] [--only CLASS]``. Runs the whole search on every
reading (one core, in process) and divides the work each method did (random and token-class batches,
gradient starts, targeted examples, shrink evaluations, Monte Carlo refinements) by the seconds it
took, overheads included; prints per cost class the geometric mean of those rates beside the table in
use, and the search's wall time against its budget. The search itself never reads the clock: paste
the new numbers into ``COSTS`` only on the reference machine (2 cores, nothing else running), since
every result depends on them.
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import argparse
import time
from collections import defaultdict

import numpy as np

from _util import Row, table
from attnbounds.theory.mathematics import registry
from attnbounds.theory.mathematics.families import cost
from attnbounds.theory.mathematics.quantities import COSTS
from attnbounds.theory.deciding.search import search

#: method -> (Cost attribute, where its units are counted: the plan or the method's tried count)
METHODS = {"random": ("random_per_s", "random_batches"), "classes": ("class_per_s", "class_batches"),
           "gradient": ("gradient_per_s", "gradient_starts"), "targeted": ("targeted_per_s", "tried"),
           "shrink": ("shrink_per_s", "tried"), "refine": ("refine_per_s", "tried")}
#: a method that ran for less than this is too short to time
MIN_SECONDS = 0.02


def rows(budget_s: float, only: str | None = None) -> list[Row]:
    rates: dict[tuple[str, str], list[float]] = defaultdict(list)
    walls: dict[str, list[float]] = defaultdict(list)
    for st in registry.all_statements():
        cls = cost(st).name
        if only is not None and cls != only:
            continue
        t = time.perf_counter()
        res = search(st, budget_s=budget_s, seed=0)
        walls[cls].append(time.perf_counter() - t)
        for method, (_attr, unit) in METHODS.items():
            stats = res.by_method.get(method)
            if not stats or stats.get("seconds", 0.0) < MIN_SECONDS:
                continue
            units = stats["tried"] if unit == "tried" else res.plan[unit]
            if units:
                rates[(cls, method)].append(units / stats["seconds"])
    out = []
    for cls, w in walls.items():
        out.append(Row(f"calibrate {cls}", "search wall / budget", float(np.mean(w)) / budget_s, "",
                       "0.5 .. 1.5", 0.5 <= float(np.mean(w)) / budget_s <= 1.5,
                       f"{len(w)} readings, max {max(w) / budget_s:.2f}"))
        for method, (attr, _unit) in METHODS.items():
            got = rates.get((cls, method))
            if got:
                out.append(Row(f"calibrate {cls}", f"{method} units/s", float(np.exp(np.mean(np.log(got)))), "",
                               f"table: {getattr(COSTS[cls], attr):g}", None,
                               f"{len(got)} readings, {min(got):.3g} .. {max(got):.3g}"))
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of search per reading (default 2)")
    ap.add_argument("--only", choices=sorted(COSTS), help="one cost class")
    args = ap.parse_args()
    print(table(rows(args.budget, args.only)))
