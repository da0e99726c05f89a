"""Dask schedulers against in-process: ``python bench/cluster.py [--budget S] [--workers N] [--readings ID ...]``.

Measured in the same run, on this machine:

- ``verify`` over the readings (every reading by default) with ``none`` and with ``processes:N``: the speed-up
  (goal >= 1.7x for N = 2 on 2 cores; cluster start-up included, and reported apart);
- the scheduler's overhead per task as a share of the mean task time: the round trip of a task that does
  nothing (submit, run, gather), divided by the mean wall time of a reading (goal < 2 %);
- hard readings alone at a larger budget, whose pieces (search, proof, certificates, limits) are the tasks:
  the same speed-up.

Each is measured on fresh workers (what a first run pays: imports, generated evaluators) and then ``--repeat`` times
on the same, now warm, workers (a long-lived cluster), alternating with ``none`` in this process; the best warm time
of each counts (this shared 2-core machine's speed varies by up to 30 % from minute to minute).

Every run also checks that the records' content hashes agree (the figures are void otherwise).
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import argparse
import statistics
import sys
import time

from _util import Row, table

from attnbounds.theory.deciding import parallel
from attnbounds.theory.mathematics import registry
from attnbounds.theory.running.verify import verify


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
    ap.add_argument("--hard", nargs="+", default=["corollary3[row]", "theorem2.upper[full]",
                                                   "theorem1.random[R2,printed,mean]"],
                    help="readings run alone on the cluster, one after another (default: one of each kind of search)")
    ap.add_argument("--hard-budget", type=float, default=30.0, help="their budget (default 30 s)")
    ap.add_argument("--repeat", type=int, default=2, help="warm runs of each, alternating; the best counts (default 2)")
    args = ap.parse_args()
    from attnbounds.theory.mathematics.memory import tune_allocator

    tune_allocator()  # as the command line does, so that this process and the workers allocate alike
    ids = args.readings or registry.ids()
    sched = f"processes:{args.workers}"
    rows: list[Row] = []

    import dask
    from distributed import LocalCluster

    start = time.perf_counter()
    with dask.config.set(parallel.WORKER_CONFIG):
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                               scheduler_kwargs={"dashboard_address": ":0"}, silence_logs=40)
    address = cluster.scheduler_address  # verify connects to it as to any tcp scheduler: the workers stay warm
    rows.append(Row("cluster", f"start-up of {args.workers} worker processes", time.perf_counter() - start, "s"))
    with parallel.runner(address) as run:
        run.map(_noop, list(range(4 * args.workers)))
        t = time.perf_counter()
        n = 200
        run.map(_noop, list(range(n)))
        per_task = (time.perf_counter() - t) * args.workers / n  # worker-seconds per task
    rows.append(Row("cluster", "round trip of an empty task", per_task * 1e3, "ms", note="worker time per task"))

    same = True
    for label, todo, budget in ((f"{len(ids)} readings, budget {args.budget:g} s", ids, args.budget),
                                *((f"{hard} alone at {args.hard_budget:g} s (its pieces as tasks)", [hard], args.hard_budget)
                                  for hard in args.hard)):
        base, hashes0, walls = _timed_verify(todo, budget, "none")
        cold, hashes1, _ = _timed_verify(todo, budget, address)
        warm_runs: dict[str, list[float]] = {"none": [], address: []}
        hashes = [hashes0, hashes1]
        for _ in range(args.repeat):  # alternating, so that a slow spell of the machine hits both
            for where in warm_runs:
                wall, h, _ = _timed_verify(todo, budget, where)
                warm_runs[where].append(wall)
                hashes.append(h)
        base_warm, warm = min(warm_runs["none"]), min(warm_runs[address])
        identical = all(h == hashes0 for h in hashes)
        same = same and identical
        rows.append(Row(label, "none: first run, then again (warm, best)", base, "s", note=f"{base_warm:.3g} s warm"))
        rows.append(Row(label, f"{sched}: fresh workers, then again (warm, best)", cold, "s", note=f"{warm:.3g} s warm"))
        rows.append(Row(label, "speed-up, fresh workers", base / cold, "x", ">= 1.7", base / cold >= 1.7,
                        "records identical" if identical else "RECORDS DIFFER"))
        rows.append(Row(label, "speed-up, warm", base_warm / warm, "x", ">= 1.7", base_warm / warm >= 1.7))
        if len(todo) > 1:
            share = per_task / statistics.mean(walls)
            rows.append(Row(label, "scheduler overhead per task / mean task time", 100 * share, "%", "< 2", share < 0.02))
    cluster.close()
    print(table(rows))
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
