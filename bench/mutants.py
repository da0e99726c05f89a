"""Planted mutants: the search's kill rate, and the time to the first certified counterexample.

Run: ``python bench/mutants.py [--budget S] [--jobs N]``. Every reading is searched with the
default budget; a reading *survives* when no candidate has a relative margin below
``-theory.margins.REAL``. For each survivor two mutants are searched with the same budget:
``scaled(st, 0.97)`` (right-hand side 3 % tighter: false as soon as the bound is attained within
3 %, must be REFUTED, i.e. a candidate certified ``violated``) and ``scaled(st, 1.03)`` (looser:
must not be). Time to the first certified counterexample = the search's first float violation
plus the certification of the candidates tried until one is certified. Searches run in ``--jobs``
processes (one core each).
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from _util import Row, table
from attnbounds.theory.mathematics import registry
from attnbounds.theory.deciding.margins import REAL
from attnbounds.theory.deciding.search import DEFAULT_BUDGET_S, search
from tests.planted import scaled

MAX_CERTIFY = 16


def run_one(job: tuple[str, float | None, float, int]) -> dict:
    """Search ``sid`` (or its mutant by ``factor``) and certify candidates until one is violated."""
    sid, factor, budget_s, seed = job
    st = registry.get(sid)
    if factor is not None:
        st = scaled(st, factor)
    res = search(st, budget_s=budget_s, seed=seed)
    firsts = [m["first_violation_s"] for m in res.by_method.values() if "first_violation_s" in m]
    out = {"id": sid, "factor": factor, "real": any(r < -REAL for r in res.violation_margins), "wall_s": res.wall_s,
           "best_margin": res.best_margin, "best_ratio": res.best_ratio, "certified": None, "statistical": False,
           "time_to_certified_s": None}
    try:
        from attnbounds.theory.deciding.certify import certify
    except ImportError:
        return out
    spent = 0.0
    out["certified"] = False
    for cand in res.violations[:MAX_CERTIFY]:
        t = time.perf_counter()
        cert = certify(st, cand, 0)
        spent += time.perf_counter() - t
        if cert.status == "violated":
            out.update(certified=True, statistical=bool(cert.statistical),
                       time_to_certified_s=(min(firsts) if firsts else res.wall_s) + spent)
            break
    return out


def rows(budget_s: float = DEFAULT_BUDGET_S, jobs: int = 2, seed: int = 0, ids: list[str] | None = None) -> list[Row]:
    ids = ids or registry.ids()
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        base = list(pool.map(run_one, [(sid, None, budget_s, seed) for sid in ids]))
        survivors = [b["id"] for b in base if not b["real"]]
        tight = list(pool.map(run_one, [(sid, 0.97, budget_s, seed) for sid in survivors]))
        loose = list(pool.map(run_one, [(sid, 1.03, budget_s, seed) for sid in survivors]))
    out = [Row("mutants", "readings searched / surviving", len(survivors), f"of {len(ids)}", "", None,
               f"budget {budget_s:g} s per search")]
    killed = [t for t in tight if t["certified"] or (t["certified"] is None and t["real"])]
    spared = [lo for lo in loose if not (lo["certified"] or (lo["certified"] is None and lo["real"]))]
    out.append(Row("mutants", "kill rate (rhs * 0.97 refuted)", 100.0 * len(killed) / max(1, len(tight)), "%",
                   "100 %", len(killed) == len(tight), f"{len(killed)}/{len(tight)}"))
    out.append(Row("mutants", "spared rate (rhs * 1.03 not refuted)", 100.0 * len(spared) / max(1, len(loose)), "%",
                   "100 %", len(spared) == len(loose), f"{len(spared)}/{len(loose)}"))
    times = [t["time_to_certified_s"] for t in tight if t["time_to_certified_s"] is not None]
    if times:
        out.append(Row("mutants", "time to first certified counterexample (median)", float(np.median(times)), "s", "",
                       None, f"max {max(times):.2f} s over {len(times)} mutants"))
    for t in tight:
        if t not in killed:
            out.append(Row("mutants", f"survived: {t['id']}{{rhs*0.97}}", t["best_margin"], "rel. margin", "", False,
                           "best relative margin of the original: " + next(
                               f"{b['best_margin']:.3g}" for b in base if b["id"] == t["id"])))
    for lo in loose:
        if lo not in spared:
            out.append(Row("mutants", f"refuted: {lo['id']}{{rhs*1.03}}", lo["best_margin"], "rel. margin", "", False))
    stat = [t["id"] for t in killed if t["statistical"]]
    if stat:
        out.append(Row("mutants", "killed by a statistical (Monte Carlo) certificate", len(stat), "", "", None,
                       ", ".join(stat)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("ids", nargs="*")
    args = ap.parse_args()
    print(table(rows(args.budget, args.jobs, ids=args.ids or None)))


if __name__ == "__main__":
    main()
