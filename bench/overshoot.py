"""How far a run goes past its budget: per reading, the search's wall time and the whole reading's (search,
certification, limits, proof replay) against ``--budget``, with and without a CPU-bound process beside it.

    python bench/overshoot.py [--budget S] [--load] [IDS ...]

``--load`` starts one busy process per core for the measurement (a loaded machine). Prints one row per reading
and the largest ratios; the wall-clock ceiling of a search is ``CEILING * budget + CEILING_GRACE_S``
(:mod:`attnbounds.theory.deciding.search.budget`).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

READINGS = ["lemma1", "corollary3[row]", "theorem1.fixed[R2,g1]", "theorem1.random[R2,printed,mean]",
            "theorem2.upper[full]", "corollary2.i[R1]", "multihead"]


def _burn(stop: mp.Event) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 31 + 7) % 1000003


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ids", nargs="*", default=READINGS)
    ap.add_argument("--budget", type=float, default=2.0)
    ap.add_argument("--load", action="store_true", help="one busy process per core beside the run")
    args = ap.parse_args()
    from attnbounds.theory.mathematics.memory import cores
    from attnbounds.theory.deciding.search.budget import CEILING, CEILING_GRACE_S
    from attnbounds.theory.running.verify import verify

    stop = mp.Event()
    burners = [mp.Process(target=_burn, args=(stop,), daemon=True) for _ in range(cores() if args.load else 0)]
    for p in burners:
        p.start()
    try:
        verify(["lemma1"], budget_s=0.2, progress=False)  # imports and first calls, not measured
        rows = []
        for rid in args.ids:
            t = time.perf_counter()
            rec = verify([rid], budget_s=args.budget, progress=False)[0]
            total = time.perf_counter() - t
            search = float(rec.data["timing"].get("search.wall_s", float("nan")))
            cut = {m: i["cut"] for m, i in rec.data["search"]["by_method"].items() if isinstance(i, dict) and i.get("cut")}
            rows.append((rid, search / args.budget, total / args.budget, cut))
            print(f"{rid:36s} search {search:7.2f} s = {search / args.budget:5.2f} x budget, reading {total:7.2f} s = "
                  f"{total / args.budget:5.2f} x{'  cut ' + str(cut) if cut else ''}", flush=True)
    finally:
        stop.set()
        for p in burners:
            p.join()
    print(f"\nbudget {args.budget:g} s, {'loaded (' + str(len(burners)) + ' busy processes)' if args.load else 'as is'}: "
          f"search at most {max(r[1] for r in rows):.2f} x budget, reading at most {max(r[2] for r in rows):.2f} x; "
          f"ceiling {CEILING:g} x budget + {CEILING_GRACE_S:g} s")


if __name__ == "__main__":
    main()
