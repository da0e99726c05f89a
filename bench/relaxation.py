"""The relaxation prover on its quality sets: ``python bench/relaxation.py [--budget S] [--set SET] [--baseline REV]``.

``--set relaxation`` (the default): per family (weights or Jacobian norms, by normaliser) the share of the true
statements PROVED by the prover alone, and per statement the time and the boxes to a proof (or to a certified
counterexample for the false ones); the median and worst time to a proof; every true statement left open, with the
prover's reason. The work is counted in operations, so the boxes are the same on every machine.

``--set tight`` (``tests/quality/tight_set.toml``): every statement through the whole pipeline (search,
certification, the prover: ``attnbounds verify``); per family (equality cases, strict suprema, below float64, bands,
L through other functions) the share of final verdicts (PROVED for the true ones, REFUTED for the false ones), the
wrong ones (must be none), and the median and worst time to a verdict.

``--baseline REV`` measures the same set with the sources of git revision ``REV`` too (extracted to a temporary
directory and run in a subprocess, in turns with this version's), so before and after come from one run on one
machine. The seconds are this machine's, measured in this run.
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


TIGHT = SET.with_name("tight_set.toml")
#: the families of the tight set, by the second part of an id
TIGHT_FAMILIES = {"eq": "equality cases", "sup": "strict suprema", "tiny": "below float64", "band": "bands of L and T",
                  "reach": "L through log log L, L^s", "near": "short of an equality as L grows",
                  "open": "tight only at an open end", "sig": "sigmoid attention", "sparse": "sparsemax, bounded logits",
                  "ent": "entmax-1.5, bounded logits", "softpick": "softpick", "ssmax": "scalable softmax",
                  "bowl": "a bowl-shaped log F", "topN": "top-N against alpha_max, alpha_min", "Trange": "an end of T's range",
                  "jac": "the Jacobian against the weights", "side": "min, max, tanh on a side",
                  "heads": "coverage over a range of p", "bigL": "one length of 10^9"}


def measure_tight(budget: float, progress: Path | None = None) -> dict[str, tuple[str, float]]:
    """``{id: (verdict, seconds)}`` of every statement of the tight set through ``verify`` (a statement this version
    cannot read: ``REFUSED``); with ``progress``, each one appended there as a JSON line as soon as it is decided (what
    a run killed part-way, out of memory say, had decided)."""
    import json

    from attnbounds.theory.running.verify import verify

    data = tomllib.loads(TIGHT.read_text())
    out: dict[str, tuple[str, float]] = {}
    for table_ in data["statement"]:
        if progress is not None:
            with progress.open("a") as f:
                f.write(json.dumps({"started": table_["id"]}) + "\n")
        start = time.perf_counter()
        try:
            ub = load_data({"normaliser": data.get("normaliser", []), "statement": [table_]}, str(TIGHT))
            with constructors_added(ub.normalisers):
                verdict = verify(None, budget_s=budget, progress=False, statements=ub.statements)[0].verdict
        except Exception as exc:  # noqa: BLE001 - an older version may refuse a statement: counted, not final
            verdict = f"REFUSED ({type(exc).__name__})"
        out[table_["id"]] = (verdict, time.perf_counter() - start)
        if progress is not None:
            with progress.open("a") as f:
                f.write(json.dumps({"id": table_["id"], "verdict": verdict, "seconds": out[table_["id"]][1]}) + "\n")
    return out


def _final(sid: str, verdict: str) -> bool:
    return verdict == ("PROVED" if sid.startswith("true.") else "REFUTED")


def _wrong(sid: str, verdict: str) -> bool:
    return verdict == ("REFUTED" if sid.startswith("true.") else "PROVED")


def tight_rows(results: dict[str, dict[str, tuple[str, float]]]) -> list[Row]:
    """Per version (this one, and the baseline's when measured) and family: final verdicts, wrong ones, times."""
    out: list[Row] = []
    for version, got in results.items():
        by_family: dict[str, list[str]] = {}
        for sid in got:
            by_family.setdefault(TIGHT_FAMILIES.get(sid.split(".")[1], sid.split(".")[1]), []).append(sid)
        for fam, ids in [*sorted(by_family.items()), ("every statement", list(got))]:
            final = [sid for sid in ids if _final(sid, got[sid][0])]
            wrong = [sid for sid in ids if _wrong(sid, got[sid][0])]
            times = [got[sid][1] for sid in final]
            out.append(Row(version, f"final: {fam}", 100.0 * len(final) / len(ids), "%", ">= 95 %" if fam ==
                           "every statement" else "", None if fam != "every statement" else len(final) >= 0.95 * len(ids),
                           f"{len(final)} of {len(ids)}" + (f"; WRONG: {wrong}" if wrong else "")
                           + (f"; time to a final verdict: median {statistics.median(times):.1f} s, worst "
                              f"{max(times):.1f} s" if times else "")))
        for sid, (verdict, seconds) in got.items():
            if not _final(sid, verdict):
                out.append(Row(version, sid, seconds, "s", note=f"not final: {verdict}"))
    return out


def _baseline(rev: str, budget: float) -> dict[str, tuple[str, float]]:
    """The tight set measured with the sources of git revision ``rev``, in a subprocess."""
    import json
    import os
    import subprocess
    import sys
    import tempfile

    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        subprocess.run(f"git -C {root} archive {rev} | tar -x -C {tmp}", shell=True, check=True)
        package = src / "attnbounds"
        package.mkdir(parents=True)
        for name in ("theory", "proofs", "empirical"):
            (package / name).symlink_to(Path(tmp) / name)
        for f in (Path(tmp) / "attnbounds").iterdir():
            (package / f.name).symlink_to(f)
        out, progress = Path(tmp) / "baseline.json", Path(tmp) / "progress.jsonl"
        env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{Path(__file__).resolve().parent}"}  # then _util
        done = subprocess.run([sys.executable, "-P", str(Path(__file__)), "--set", "tight", "--budget", str(budget),
                               "--json", str(out), "--progress", str(progress)], env=env, cwd=tmp,
                              stdout=subprocess.DEVNULL)
        if done.returncode == 0:
            return {k: (v[0], v[1]) for k, v in json.loads(out.read_text()).items()}
        # killed part-way (the out-of-memory killer, say): what it decided, the statement it died on, the rest not run
        lines = [json.loads(line) for line in progress.read_text().splitlines()] if progress.exists() else []
        decided = {d["id"]: (d["verdict"], d["seconds"]) for d in lines if "id" in d}
        started = [d["started"] for d in lines if "started" in d and d["started"] not in decided]
        why = f"signal {-done.returncode}" if done.returncode < 0 else f"exit status {done.returncode}"
        ids = [t["id"] for t in tomllib.loads(TIGHT.read_text())["statement"]]
        return {sid: decided[sid] if sid in decided else (f"CRASHED ({why})", float("nan")) if sid in started
                else ("NOT RUN (the run died before it)", float("nan")) for sid in ids}


def main() -> None:
    import json

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=None, help="seconds of budget per statement (default: 7 for the "
                    "relaxation set, 2 for the tight set)")
    ap.add_argument("--set", choices=("relaxation", "tight"), default="relaxation", help="which quality set")
    ap.add_argument("--baseline", metavar="REV", help="also measure git revision REV (the tight set)")
    ap.add_argument("--json", metavar="PATH", help="write the tight set's verdicts and seconds to PATH")
    ap.add_argument("--progress", metavar="PATH", type=Path, help="append each tight statement's verdict to PATH as it "
                    "is decided (JSON lines)")
    args = ap.parse_args()
    if args.set == "relaxation":
        print(table(rows(7.0 if args.budget is None else args.budget)))
        return
    budget = 2.0 if args.budget is None else args.budget
    results: dict[str, dict[str, tuple[str, float]]] = {}
    if args.baseline:
        results[f"before ({args.baseline})"] = _baseline(args.baseline, budget)
    results["this version"] = measure_tight(budget, args.progress)
    if args.json:
        Path(args.json).write_text(json.dumps(results["this version"]))
    print(table(tight_rows(results)))


if __name__ == "__main__":
    main()
