"""The relaxation prover on its quality set: ``python bench/relaxation.py [--budget S]``.

Per family (weights or Jacobian norms, by normaliser) the share of the true statements PROVED, and per statement
the time and the boxes to a proof (or to a certified counterexample for the false ones); the median and worst time
to a proof; every true statement left open, with the prover's reason. The work is counted in operations, so the
boxes are the same on every machine; the seconds are this machine's, measured in this run.
"""

from __future__ import annotations

import _util  # noqa: F401  (one BLAS thread before numpy loads)

import argparse
import statistics
import time
import tomllib
from pathlib import Path

from _util import Row, table

from attnbounds.theory.deciding import prover
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.io.userbounds import load_data
from attnbounds.theory.mathematics.normalisers import constructors_added

SET = Path(__file__).resolve().parents[1] / "tests" / "quality" / "relaxation_set.toml"


def family(sid: str, text: str) -> str:
    kind = {"w": "weights", "j": "Jacobian norms"}[sid.split(".")[1]]
    normaliser = sid.split(".")[2]
    return f"{kind}, {normaliser}"


def rows(budget: float) -> list[Row]:
    ub = load_data(tomllib.loads(SET.read_text()), str(SET))
    out: list[Row] = []
    times: list[float] = []
    by_family: dict[str, list[bool]] = {}
    with constructors_added(ub.normalisers):
        for st in ub.statements:
            start = time.perf_counter()
            result = prover.prove(st, work=prover.work_for(budget))
            seconds = time.perf_counter() - start
            true = st.id.startswith("true.")
            if result.status == "refuted":
                cert = certify(st, result.counterexample)
                status = f"refuted at L = {result.counterexample.L} ({cert.status})"
            else:
                status = result.status
            ok = (result.status == "proved") if true else (result.status == "refuted")
            if true:
                by_family.setdefault(family(st.id, ""), []).append(result.status == "proved")
                if result.status == "proved":
                    times.append(seconds)
            note = f"{result.boxes} boxes, {result.work:.3g} operations" + ("" if ok else f": {result.reason[:120]}")
            out.append(Row("prover", st.id, seconds, "s", "proved" if true else "refuted", ok, f"{status}; {note}"))
    for fam, proved in sorted(by_family.items()):
        out.append(Row("prover", f"PROVED rate: {fam}", 100.0 * sum(proved) / len(proved), "%",
                       note=f"{sum(proved)} of {len(proved)}"))
    every = [p for v in by_family.values() for p in v]
    out.append(Row("prover", "PROVED rate: every true statement", 100.0 * sum(every) / len(every), "%", ">= 90 %",
                   sum(every) >= 0.9 * len(every), f"{sum(every)} of {len(every)}"))
    if times:
        out.append(Row("prover", "time to a proof: median", statistics.median(times), "s"))
        out.append(Row("prover", "time to a proof: worst", max(times), "s"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=7.0, help="seconds of budget per statement (the default: 7)")
    args = ap.parse_args()
    print(table(rows(args.budget)))


if __name__ == "__main__":
    main()
