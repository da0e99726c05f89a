"""Every benchmark in one table: ``python bench/run.py [--quick] [--only SECTION ...] [--json PATH]``.

Sections: ``kernel`` (Theorem 1 fixed set at L=128, d=64, N=5 against the memory floor and a
straightforward numpy version), ``evaluators`` (every reading against naive sympy and the floor),
``throughput`` (softmax-only readings at L=128, instances/s per core), ``certify`` (interval
arithmetic per instance at L=128), ``mutants`` (kill rate of planted mutants with the default
search budget, time to the first certified counterexample), ``long`` (the long-context set: kill rate and time
to the first certificate per range of L, and what twice the budget buys), ``prover`` (the relaxation prover on its
quality set: PROVED rate per family, time and boxes to a proof). Every figure is measured in this run;
nothing is compared with stored timings. ``--quick`` shortens the mutant searches to 2 s (about
5 minutes in all otherwise, on 2 cores).
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import argparse
import json
import os
import time
from dataclasses import asdict

from _util import Row, table

SECTIONS = ("kernel", "evaluators", "throughput", "certify", "mutants", "long", "prover")


def main() -> None:
    ap = argparse.ArgumentParser(description="attnbounds benchmarks (ratios measured in the same run)")
    ap.add_argument("--quick", action="store_true", help="2 s mutant searches instead of the default budget")
    ap.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes for the mutant searches")
    ap.add_argument("--json", help="also write the rows as JSON to this path")
    args = ap.parse_args()
    todo = args.only or SECTIONS
    rows: list[Row] = []
    start = time.perf_counter()
    if "kernel" in todo:
        import evaluators

        rows += evaluators.theorem1_rows()
    if "evaluators" in todo:
        import evaluators

        rows += evaluators.evaluator_rows()
    if "throughput" in todo:
        import throughput

        rows += throughput.rows()
    if "certify" in todo:
        import certification

        rows += certification.rows()
    if "mutants" in todo:
        import mutants
        from attnbounds.theory.deciding.search import DEFAULT_BUDGET_S

        rows += mutants.rows(2.0 if args.quick else DEFAULT_BUDGET_S, args.jobs)
    if "long" in todo:
        import long_contexts
        from attnbounds.theory.deciding.search import DEFAULT_BUDGET_S

        rows += long_contexts.rows(DEFAULT_BUDGET_S, args.jobs)
    if "prover" in todo:
        import relaxation

        rows += relaxation.rows(DEFAULT_BUDGET_S)
    print(table(rows))
    print(f"\n{len(rows)} rows in {time.perf_counter() - start:.0f} s")
    if args.json:
        tmp = args.json + ".tmp"
        with open(tmp, "w") as fh:
            json.dump([asdict(r) for r in rows], fh, indent=1)
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
