"""``attnbounds.tighten`` on the hand-derived set: ``python bench/tighten.py [--budget S] [--only NAME ...]``.

The set is ``tests/quality/test_tighten.py``'s ``CASES`` (each best constant derived by hand there). Per case: the
bracket, whether it contains the true constant (PROVED at or past it, REFUTED strictly before it), its relative width,
the checks run, the relaxation prover's boxes over all of them, and the seconds; then the median and worst per
tighten, in checks, boxes and seconds. Checks and boxes are work units (the same on every machine for a seed and a
budget); the seconds are this machine's, measured in this run.
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import argparse
import statistics

import sympy as sp
from _util import Row, table

import attnbounds

from tests.quality.test_tighten import BUDGET, CASES, RTOL, Case, run_case


def contains(case: Case, result: attnbounds.TightenResult) -> bool:
    """Whether the bracket never excludes the truth (test_tighten's check, as a yes/no)."""
    from tests.quality.test_tighten import check_bracket

    try:
        check_bracket(case, result)
    except AssertionError:
        return False
    return True


def rows(budget: float, only: list[str] | None) -> list[Row]:
    out: list[Row] = []
    checks: list[float] = []
    boxes: list[float] = []
    seconds: list[float] = []
    for case in CASES:
        if only and case.name not in only:
            continue
        result = run_case(case, budget=budget)
        truth = float(sp.sympify(case.truth))
        ok = contains(case, result)
        width = "n/a" if result.relative_width is None else f"{result.relative_width:.2g}"
        note = (f"true {truth:.10g}; [{'?' if result.lower is None else f'{result.lower:.10g}'}, "
                f"{'?' if result.upper is None else f'{result.upper:.10g}'}], width {width}; {result.checks} checks, "
                f"{result.boxes} boxes" + ("" if result.converged else f"; stopped: {result.reason[:120]}"))
        out.append(Row("tighten", case.name, result.seconds, "s", f"contains truth, width <= {RTOL:g}"
                       if case.reaches else "contains truth, open side said", ok, note))
        checks.append(result.checks)
        boxes.append(result.boxes)
        seconds.append(result.seconds)
    if seconds:
        for what, values, unit in (("checks", checks, "checks"), ("prover boxes", boxes, "boxes"),
                                   ("seconds", seconds, "s")):
            out.append(Row("per tighten", f"median {what}", statistics.median(values), unit))
            out.append(Row("per tighten", f"worst {what}", max(values), unit))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=BUDGET, help=f"budget per check (default {BUDGET:g}, the tests')")
    ap.add_argument("--only", nargs="*", help="only these case names")
    args = ap.parse_args()
    print(table(rows(args.budget, args.only)))


if __name__ == "__main__":
    main()
