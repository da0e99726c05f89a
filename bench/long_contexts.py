"""Long contexts: kill rate and time to the first certified counterexample per range of L, and the reach of the
search against its budget (``python bench/long_contexts.py [--budget S] [--jobs J]``, or ``bench/run.py --only long``).

The planted set (:mod:`attnbounds.theory.deciding.search.planted`) holds statements false only from about 20 tokens,
10^3 tokens and 10^5 tokens on, and true ones tight only as L grows. Per range: the share killed (a certified
counterexample at the default budget), the median time to the first certified counterexample (search time to
its first float violation plus the certification), and the largest L certified. The budget rows measure what a
doubled budget buys: work (instances evaluated) and reach (the longest context searched), as ratios in this run.
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from _util import Row, table


def _kill(args: tuple[int, float]) -> dict:
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.deciding.search import search
    from tests.planted import long_context_set

    index, budget = args
    planted = long_context_set("all")[index]
    start = time.perf_counter()
    res = search(planted.statement, budget_s=budget, seed=0)
    first = min((info.get("first_violation_s", np.inf) for info in res.by_method.values()), default=np.inf)
    killed_L, cert_s = None, 0.0
    for cand in ([res.minimal] if res.minimal is not None else []) + list(res.violations)[:16]:
        t = time.perf_counter()
        status = certify(planted.statement, cand, 0).status
        cert_s += time.perf_counter() - t
        if status == "violated":
            killed_L = cand.L
            break
    return {"id": planted.statement.id, "false": planted.false, "threshold": planted.threshold, "killed_L": killed_L,
            "first_s": first + cert_s, "wall_s": time.perf_counter() - start, "tried": res.tried}


def _range(threshold: int | None) -> str:
    if threshold is None:
        return "true (tight as L grows)"
    return "L ~ 10^1" if threshold < 100 else "L ~ 10^3" if threshold < 10_000 else "L ~ 10^5"


def kill_rows(budget: float, jobs: int) -> list[Row]:
    from tests.planted import long_context_set

    n = len(long_context_set("all"))
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(_kill, [(k, budget) for k in range(n)]))
    rows = []
    for name in ("L ~ 10^1", "L ~ 10^3", "L ~ 10^5", "true (tight as L grows)"):
        group = [r for r in results if _range(r["threshold"]) == name]
        if not group:
            continue
        if name.startswith("true"):
            refuted = [r["id"] for r in group if r["killed_L"] is not None]
            rows.append(Row("long contexts", f"{name}: refuted", len(refuted), f"of {len(group)}", "0",
                            not refuted, ", ".join(refuted)))
            continue
        killed = [r for r in group if r["killed_L"] is not None]
        rate = len(killed) / len(group)
        rows.append(Row("long contexts", f"{name}: kill rate", 100 * rate, "%", ">= 95 %", rate >= 0.95,
                        f"{len(killed)} of {len(group)}"))
        if killed:
            rows.append(Row("long contexts", f"{name}: first certified", float(np.median([r['first_s'] for r in killed])),
                            "s (median)", "", None, f"largest L certified {max(r['killed_L'] for r in killed)}"))
            below = [r["id"] for r in killed if r["killed_L"] < r["threshold"]]
            rows.append(Row("long contexts", f"{name}: below threshold", len(below), "certified", "0", not below,
                            ", ".join(below)))
    walls = [r["wall_s"] / budget for r in results]
    rows.append(Row("long contexts", "search wall / budget", float(np.median(walls)), "(median)", "0.5 .. 1.5",
                    0.5 <= float(np.median(walls)) <= 1.5, f"range {min(walls):.2f} .. {max(walls):.2f}"))
    return rows


def budget_rows(budget: float) -> list[Row]:
    """What twice the budget buys for one planted statement: instances evaluated and the longest context."""
    from attnbounds.theory.deciding.search import search
    from tests.planted import weights_upper

    st = weights_upper(0.01, 3.5).statement
    out = {}
    for b in (budget, 2 * budget):
        t = time.perf_counter()
        res = search(st, budget_s=b, seed=0)
        reach = max((info.get("L_range", [0, 0])[1] for info in res.by_method.values()), default=0)
        out[b] = (res.tried, reach, time.perf_counter() - t)
    (w1, r1, s1), (w2, r2, s2) = out[budget], out[2 * budget]
    return [Row("budget", "work at 2x budget", w2 / w1, "x", "about 2x", 1.5 <= w2 / w1 <= 2.6, f"{w1} -> {w2} instances"),
            Row("budget", "reach at 2x budget", r2 / r1, "x", "> 1", r2 > r1, f"longest L {r1} -> {r2}"),
            Row("budget", "wall at 2x budget", s2 / s1, "x", "about 2x", 1.4 <= s2 / s1 <= 2.8, f"{s1:.1f} s -> {s2:.1f} s")]


def rows(budget: float, jobs: int) -> list[Row]:
    return kill_rows(budget, jobs) + budget_rows(budget)


if __name__ == "__main__":
    from attnbounds.theory.deciding.search import DEFAULT_BUDGET_S

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args()
    print(table(rows(a.budget, a.jobs)))
