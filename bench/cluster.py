"""Dask schedulers against in-process: ``python bench/cluster.py [--budget S] [--workers N] [--readings ID ...]``.

Measured in the same run, on this machine:

- ``verify`` over the readings (every reading by default) with ``none`` and with ``processes:N``: the speed-up
  (goal >= 1.7x for N = 2 on 2 cores; cluster start-up included, and reported apart);
- the scheduler's overhead per task as a share of the mean task time: the round trip of a task that does
  nothing (submit, run, gather), divided by the mean wall time of a reading (goal < 2 %);
- one hard reading alone at a larger budget, whose search pieces are the tasks: the same speed-up.

Every run also checks that the records' content hashes agree (the figures are void otherwise).
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import argparse
import statistics
import sys
import time

from _util import Row, table

from attnbounds.theory import parallel, registry
from attnbounds.theory.verify import verify


def _noop(x: int) -> int:
    return x


def _timed_verify(ids: list[str], budget: float, scheduler: str) -> tuple[float, dict[str, str], list[float]]:
    start = time.perf_counter()
    records = verify(ids, budget_s=budget, seed=0, progress=False, scheduler=scheduler)
    wall = time.perf_counter() - start
    return wall, {r.id: r.content_hash for r in records}, [r.wall_s for r in records]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=1.0, help="search budget per reading (default 1 s)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--readings", nargs="+", help="these readings only (default: every reading)")
    ap.add_argument("--hard", default="corollary3[row]", help="the reading run alone on the cluster")
    ap.add_argument("--hard-budget", type=float, default=8.0, help="its budget (default 8 s)")
    args = ap.parse_args()
    ids = args.readings or registry.ids()
    sched = f"processes:{args.workers}"
    rows: list[Row] = []

    start = time.perf_counter()
    with parallel.runner(sched) as run:
        startup = time.perf_counter() - start
        run.map(_noop, list(range(4 * args.workers)))  # warm the workers
        t = time.perf_counter()
        n = 200
        run.map(_noop, list(range(n)))
        per_task = (time.perf_counter() - t) * args.workers / n  # worker-seconds per task
    rows.append(Row("cluster", f"start-up of {sched}", startup, "s"))
    rows.append(Row("cluster", "round trip of an empty task", per_task * 1e3, "ms", note="worker time per task"))

    base, hashes0, walls = _timed_verify(ids, args.budget, "none")
    wall, hashes1, _ = _timed_verify(ids, args.budget, sched)
    same = hashes0 == hashes1
    speedup = base / wall
    share = per_task / statistics.mean(walls)
    rows.append(Row("verify", f"{len(ids)} readings, budget {args.budget:g} s: none", base, "s"))
    rows.append(Row("verify", f"... {sched} (start-up included)", wall, "s"))
    rows.append(Row("verify", f"speed-up {sched} / none", speedup, "x", ">= 1.7", speedup >= 1.7,
                    "records identical" if same else "RECORDS DIFFER"))
    rows.append(Row("verify", "scheduler overhead per task / mean task time", 100 * share, "%", "< 2", share < 0.02))

    hard0, h0, hard_walls = _timed_verify([args.hard], args.hard_budget, "none")
    hard1, h1, _ = _timed_verify([args.hard], args.hard_budget, sched)
    speed_hard = hard0 / hard1
    rows.append(Row("one reading", f"{args.hard} at {args.hard_budget:g} s: none", hard0, "s"))
    rows.append(Row("one reading", f"... {sched}: its search pieces as tasks", hard1, "s"))
    rows.append(Row("one reading", f"speed-up {sched} / none", speed_hard, "x", ">= 1.7", speed_hard >= 1.7,
                    "records identical" if h0 == h1 else "RECORDS DIFFER"))
    print(table(rows))
    sys.exit(0 if same and h0 == h1 else 1)


if __name__ == "__main__":
    main()
