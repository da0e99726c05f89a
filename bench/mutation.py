"""Mutation testing of the soundness core with cosmic-ray (issue 35): does the test suite catch one-line faults?

    python bench/mutation.py                         # every mutant of the core (hours on 2 cores)
    python bench/mutation.py --sample 60 --seed 0    # a seeded sample (a few minutes)
    python bench/mutation.py --group prover --list   # the mutants of one group, without running them
    python bench/mutation.py --changed-since REV     # only the mutants on lines changed since git revision REV

The configuration is ``[tool.attnbounds.mutation]`` in ``pyproject.toml``: the operators (plausible one-line faults:
a comparison flipped or made strict, ``and``/``or`` swapped, a ``not`` dropped or added, a sign, an operation or a
number changed, a loop skipped) and the groups, each a set of modules with the tests that cover them (the test run of
a mutant is that selection, stopped at the first failure). Survivors judged equivalent (no behaviour can differ) are
listed in ``bench/mutation_equivalent.toml`` with the reason, reviewed like code; the score counts them apart. Known
survivors a test is still owed for are listed there too (``kind = "open"``): they count as survived, and the sampled
run in the quality tests fails only on a survivor nobody has listed (a ratchet: the score cannot fall silently).

Why cosmic-ray and not mutmut: mutmut 3 copies the sources into ``mutants/`` and maps file paths to module names,
which this layout (``theory/`` installed as ``attnbounds.theory``) defeats; cosmic-ray mutates a file in place and runs
any test command. Nothing here touches the working tree: each worker mutates its own copy of the sources, imported
through ``PYTHONPATH`` ahead of the editable install, so ``--workers 2`` runs two mutants at once on 2 cores.

The report (``--out``, JSON and Markdown beside it) holds the date, commit, time, per group and in all the mutants,
killed, survived, equivalent and incompetent, and every survivor's diff. Exit 0 when the score (killed over killed
plus non-equivalent survivors) is at least ``--fail-under`` (default 0: report only), else 1.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    group: str
    module: str  # relative to the repository root
    operator: str
    occurrence: int
    line: int
    source: str  # the original line


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # killed / survived / equivalent / incompetent / no-test
    seconds: float
    diff: str = ""
    reason: str = ""
    tail: str = field(default="", repr=False)
    #: a survivor listed in bench/mutation_equivalent.toml as open (a test is owed): counted as survived
    known: bool = False
    #: killed by the timeout (the tests ran past it), not by a failing test: a mutant that hangs or slows the tests
    timed_out: bool = False


def config() -> dict[str, Any]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return data["tool"]["attnbounds"]["mutation"]


def equivalents() -> list[dict[str, str]]:
    path = ROOT / "bench" / "mutation_equivalent.toml"
    return tomllib.loads(path.read_text()).get("equivalent", []) if path.exists() else []


def mutants(cfg: dict[str, Any], groups: list[str] | None) -> list[Mutant]:
    """Every mutant of the configured groups and operators, in a stable order."""
    import cosmic_ray.plugins
    from cosmic_ray.ast import ast_nodes, get_ast_from_path

    wanted = [re.compile(p) for p in cfg["operators"]]
    names = [n for n in cosmic_ray.plugins.operator_names() if any(p.fullmatch(n) for p in wanted)]
    out = []
    for group in cfg["group"]:
        if groups and group["name"] not in groups:
            continue
        for module in group["modules"]:
            path = ROOT / module
            lines = path.read_text().splitlines()
            tree = get_ast_from_path(path)
            for name in names:
                operator = cosmic_ray.plugins.get_operator(name)()
                positions = [(start, end) for node in ast_nodes(tree) for start, end in operator.mutation_positions(node)]
                for occurrence, (start, _) in enumerate(positions):
                    line = start[0]
                    text = lines[line - 1]
                    if "pragma: no mutate" in text or text.strip().startswith(("#", '"""', "log.")):
                        continue
                    out.append(Mutant(group["name"], module, name, occurrence, line, text.strip()))
    return out


def changed_lines(rev: str, modules: set[str]) -> dict[str, set[int]]:
    """Per module, the line numbers of the working tree that ``git diff rev`` adds or changes (none for a module it
    does not touch)."""
    out: dict[str, set[int]] = {m: set() for m in modules}
    proc = subprocess.run(["git", "diff", "-U0", rev, "--", *sorted(modules)], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"git diff {rev} failed: {proc.stderr.strip()[:500]}")
    module = None
    for line in proc.stdout.splitlines():
        if line.startswith("+++ "):
            module = line[6:] if line.startswith("+++ b/") else None
        elif line.startswith("@@") and module in out:
            new = re.search(r"\+(\d+)(?:,(\d+))?", line.split("@@")[1])
            if new:
                start, count = int(new.group(1)), int(new.group(2) or 1)
                out[module].update(range(start, start + count))
    return out


def sample(population: list[Mutant], size: int, seed: int) -> list[Mutant]:
    """``size`` mutants chosen by a hash of what they are (module, operator, the line's text, the rank among the
    same), not of where they are: an edit elsewhere in a module, which moves line numbers and occurrences, leaves the
    sample as it was."""
    seen: dict[tuple[str, str, str], int] = {}
    keyed = []
    for m in population:
        rank = seen.setdefault((m.module, m.operator, m.source), 0)
        seen[(m.module, m.operator, m.source)] += 1
        text = f"{seed}|{m.module}|{m.operator}|{m.source}|{rank}"
        keyed.append((hashlib.sha256(text.encode()).hexdigest(), m))
    chosen = [m for _, m in sorted(keyed, key=lambda km: km[0])[:size]]
    return sorted(chosen, key=lambda m: (m.group, m.module, m.line, m.operator, m.occurrence))


def _added(diff: str) -> list[str]:
    return [line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]


def _mutated(m: Mutant) -> tuple[str, str | None]:
    """``(original, mutated)`` source of ``m``'s module, the mutation applied to a scratch copy (None: not applicable)."""
    import cosmic_ray.plugins
    from cosmic_ray.mutating import apply_mutation

    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder) / "m.py"
        shutil.copy2(ROOT / m.module, scratch)
        return apply_mutation(scratch, cosmic_ray.plugins.get_operator(m.operator)(), m.occurrence)


def survivors_of(report: dict[str, Any], population: list[Mutant]) -> list[Mutant]:
    """The mutants of ``population`` that survived an earlier ``report`` or were killed there by the timeout (an
    outcome that says nothing on a loaded machine): the same module, operator, line text and mutated line (each
    mutation is applied to a scratch copy of its module to see its line). A kill by the timeout recorded without its
    diff (reports before the diff was kept) matches by its line number and occurrence as well: rerun it before the
    module is edited."""
    again = report["survivors"] + report.get("timed_out", [])
    wanted = {(s["module"], s["operator"], s["source"], tuple(_added(s["diff"]))) for s in again if "diff" in s}
    exact = {(s["module"], s["operator"], s["source"], s["line"], s["occurrence"]) for s in again if "diff" not in s}
    out = [m for m in population if (m.module, m.operator, m.source, m.line, m.occurrence) in exact]
    places = {w[:3] for w in wanted}
    for m in population:
        if (m.module, m.operator, m.source) not in places:
            continue
        original, mutated = _mutated(m)
        if mutated is None:
            continue
        lines = [b for a, b in zip(original.splitlines(), mutated.splitlines()) if a != b]
        if (m.module, m.operator, m.source, tuple(line.strip() for line in lines)) in wanted:
            out.append(m)
    return out


def _copy(into: Path) -> Path:
    """A copy of the sources and tests importable ahead of the editable install: ``into/src`` goes on PYTHONPATH."""
    for part in ("theory", "proofs", "empirical", "tests", "attnbounds"):
        shutil.copytree(ROOT / part, into / part, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, into / name)
    src = into / "src" / "attnbounds"
    src.mkdir(parents=True)
    for f in (into / "attnbounds").glob("*"):
        (src / f.name).symlink_to(f)
    for part in ("theory", "proofs", "empirical"):
        (src / part).symlink_to(into / part)
    return into


def _command(copy: Path, tests: list[str]) -> str:
    """The test run of a mutant in ``copy`` (``-P``: the working directory, which may hold the unmutated package, is
    not put on ``sys.path``)."""
    paths = " ".join(str(copy / t) for t in tests)
    return (f"env PYTHONPATH={copy / 'src'} {sys.executable} -P -m pytest -x -q -p no:cacheprovider --no-header "
            f"-o addopts= -m 'not slow' --rootdir {copy} -c {copy / 'pyproject.toml'} {paths}")


def _equivalent(m: Mutant, diff: str, rules: list[dict[str, str]]) -> dict[str, str] | None:
    """The reason a surviving mutant is equivalent, from the rule (``bench/mutation_equivalent.toml``) that names its
    module, its original line (a substring), its operator (a regular expression) and, when given, its mutated line (a
    substring of the diff's added line) and its context (a substring of the diff: the lines around a line as common
    as ``continue``)."""
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    for rule in rules:
        if rule["module"] == m.module and rule["line"] in m.source and re.fullmatch(rule["operator"], m.operator) \
                and ("to" not in rule or any(rule["to"] in line for line in added)) \
                and ("context" not in rule or rule["context"] in diff):
            return rule
    return None


def _judged(m: Mutant, rules: list[dict[str, str]]) -> Outcome | None:
    """The outcome an equivalence rule gives ``m`` without running its tests (``--skip-judged``): the rule's kind and
    reason, its diff computed on a scratch copy of the module; None when no rule (or only an ``open`` one) covers it."""
    import difflib

    original, mutated = _mutated(m)
    if mutated is None:
        return None
    diff = "".join(difflib.unified_diff(original.splitlines(True), mutated.splitlines(True), m.module, m.module))
    rule = _equivalent(m, diff, rules)
    if rule is None or rule.get("kind") == "open":
        return None
    return Outcome(m, rule.get("kind", "equivalent"), 0.0, diff, rule["reason"])


def run_one(m: Mutant, copy: Path, tests: list[str], timeout: float, rules: list[dict[str, str]],
            skip_judged: bool = False) -> Outcome:
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_item import MutationSpec, TestOutcome, WorkerOutcome

    judged = _judged(m, rules) if skip_judged else None
    if judged is not None:
        return judged
    spec = MutationSpec(module_path=str(copy / m.module), operator_name=m.operator, operator_args={},
                        occurrence=m.occurrence, start_pos=(m.line, 0), end_pos=(m.line, 1))
    start = time.perf_counter()
    result = mutate_and_test([spec], _command(copy, tests), timeout)
    seconds = time.perf_counter() - start
    diff = (result.diff or "").replace(str(copy) + "/", "")
    if result.worker_outcome == WorkerOutcome.NO_TEST:
        return Outcome(m, "no-test", seconds)
    if result.test_outcome == TestOutcome.KILLED:  # cosmic-ray counts a run past the timeout as killed, output "timeout"
        return Outcome(m, "killed", seconds, diff, timed_out=result.output == "timeout")
    if result.test_outcome == TestOutcome.SURVIVED:
        rule = _equivalent(m, diff, rules)
        if rule is None:
            return Outcome(m, "survived", seconds, diff)
        if rule.get("kind") == "open":
            return Outcome(m, "survived", seconds, diff, rule["reason"], known=True)
        return Outcome(m, rule.get("kind", "equivalent"), seconds, diff, rule["reason"])
    return Outcome(m, "incompetent", seconds, diff, tail=(result.output or "")[-2000:])


#: a mutant's tests may take this many times the unmutated run of its group (measured in the same run) before the
#: timeout kills them: a kill by the timeout then means a mutant that hangs or slows its tests that much, not a loaded
#: machine (with --no-baseline the configured timeout alone applies, and the report says so)
TIMEOUT_FACTOR = 3.0


def baseline(copy: Path, cfg: dict[str, Any], groups: set[str]) -> dict[str, float]:
    """The seconds of each group's unmutated test run (which must pass)."""
    seconds = {}
    for group in cfg["group"]:
        if group["name"] in groups:
            start = time.perf_counter()
            proc = subprocess.run(_command(copy, group["tests"]), shell=True, capture_output=True, text=True)
            seconds[group["name"]] = time.perf_counter() - start
            if proc.returncode != 0:
                raise SystemExit(f"the unmutated tests of group {group['name']} fail:\n{proc.stdout[-3000:]}")
    return seconds


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "equivalent", "benign",
                                                                "incompetent", "no-test")}
    tested = counts["killed"] + counts["survived"]
    timed_out = sum(o.timed_out for o in outcomes)
    return {**counts, "timed_out": timed_out, "mutants": len(outcomes),
            "score": counts["killed"] / tested if tested else None,
            "score_by_failing_tests": (counts["killed"] - timed_out) / tested if tested else None}


def report(outcomes: list[Outcome], args: argparse.Namespace, wall: float, total: int) -> dict[str, Any]:
    commit = args.commit  # when the sources were copied: the run's own commit, whatever is committed while it runs
    groups = sorted({o.mutant.group for o in outcomes})
    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"), "commit": commit,
            "sample": args.sample, "seed": args.seed, "rerun": args.rerun,
            "changed_since": args.changed_since, "population": total, "wall_s": round(wall, 1),
            "workers": args.workers, "all": summary(outcomes),
            "groups": {g: summary([o for o in outcomes if o.mutant.group == g]) for g in groups},
            "survivors": [{**asdict(o.mutant), "diff": o.diff, "known": o.known, "reason": o.reason} for o in outcomes
                          if o.status == "survived"],
            "equivalent": [{**asdict(o.mutant), "kind": o.status, "reason": o.reason} for o in outcomes
                           if o.status in ("equivalent", "benign")],
            "incompetent": [{**asdict(o.mutant), "tail": o.tail[-500:]} for o in outcomes if o.status == "incompetent"],
            "timeout_s": args.timeout_s, "baseline_s": args.baseline_s, "skip_judged": args.skip_judged,
            "timed_out": [{**asdict(o.mutant), "diff": o.diff, "seconds": round(o.seconds, 1)} for o in outcomes
                          if o.timed_out],
            "seconds": [{"module": o.mutant.module, "line": o.mutant.line, "operator": o.mutant.operator,
                         "status": o.status, "seconds": round(o.seconds, 1)} for o in outcomes]}


def markdown(data: dict[str, Any]) -> str:
    a = data["all"]
    score = "n/a" if a["score"] is None else f"{100 * a['score']:.1f} %"
    which = ("every mutant" if not data["sample"] else f"a sample of {data['sample']} (seed {data['seed']})") \
        if not data.get("rerun") else f"the survivors and timeouts of {data['rerun']} again ({data['all']['mutants']} mutants)"
    lines = ["# Mutation run of the soundness core", "",
             f"{data['date']}, commit {data['commit'][:12]}, {data['wall_s']:.0f} s on {data['workers']} worker(s); "
             f"{which} of {data['population']}"
             + (f" (the mutants on lines changed since {data['changed_since']})" if data.get("changed_since") else "")
             + (f"; finished {data['finished']}." if data.get("finished") else "."),
             "",
             f"**Score {score}** (killed over killed and survived): {a['killed']} killed, {a['survived']} survived, "
             f"{a['equivalent']} equivalent (no behaviour can differ) and {a['benign']} benign (only the work done, a "
             f"memory check or a message's wording differs; no value, certificate or verdict), both listed with the "
             f"reason in bench/mutation_equivalent.toml; {a['incompetent']} incompetent (the mutant's tests could not "
             f"run).", ""]
    if a.get("timed_out"):
        how = (f"{TIMEOUT_FACTOR:g} times each group's unmutated run, measured in this run" if data.get("baseline_s")
               else "no baseline measured (--no-baseline): on a loaded machine a slow unmutated run times out too")
        lines += [f"{a['timed_out']} of the killed ran past the timeout (seconds per group {data.get('timeout_s')}; "
                  f"{how}) instead of failing a test: killed by failing tests alone, the score is "
                  f"{100 * a['score_by_failing_tests']:.1f} %. They are listed at the end.", ""]
    lines += ["| group | mutants | killed | survived | equivalent | benign | incompetent | score |",
             "|---|---|---|---|---|---|---|---|"]
    for g, s in data["groups"].items():
        share = "n/a" if s["score"] is None else f"{100 * s['score']:.1f} %"
        lines.append(f"| {g} | {s['mutants']} | {s['killed']} | {s['survived']} | {s['equivalent']} | {s['benign']} | "
                     f"{s['incompetent']} | {share} |")
    if data["survivors"]:
        lines += ["", "## Survivors", ""]
        for s in data["survivors"]:
            owed = f" (known, a test is owed: {s['reason']})" if s.get("known") else ""
            lines += [f"- `{s['module']}:{s['line']}` {s['operator']}{owed}", "", "```diff", s["diff"].strip(), "```", ""]
    if data.get("timed_out"):
        lines += ["", "## Killed by the timeout", ""]
        lines += [f"- `{t['module']}:{t['line']}` {t['operator']} ({t['seconds']:.0f} s): `{t['source'][:100]}`"
                  for t in data["timed_out"]]
    return "\n".join(lines) + "\n"


def _write(outcomes: list[Outcome], args: argparse.Namespace, wall: float, total: int, chosen: int) -> dict[str, Any]:
    """The report of the outcomes so far, written whole (a temporary file renamed over ``--out``): ``"finished"`` says
    how many of the chosen mutants it holds."""
    ordered = sorted(outcomes, key=lambda o: (o.mutant.group, o.mutant.module, o.mutant.line, o.mutant.operator))
    data = report(ordered, args, wall, total) | {"finished": f"{len(outcomes)} of {chosen}"}
    out = Path(args.out)
    for path, text in ((out, json.dumps(data, indent=1) + "\n"), (out.with_suffix(".md"), markdown(data))):
        scratch = path.with_name(path.name + ".part")
        scratch.write_text(text)
        scratch.replace(path)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=0, help="run a seeded random sample of this many mutants")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--group", action="append", help="only these groups (default: every group)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--timeout", type=float, default=None, help="seconds a mutant's tests may take")
    parser.add_argument("--rerun", metavar="REPORT", help="run again the survivors and the kills by timeout of an "
                        "earlier report (after new tests or equivalence rules, or on an idle machine)")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument("--changed-since", metavar="REV", help="only the mutants on lines the working tree changes "
                        "since git revision REV (a review's run: what an edit added, sampled with --sample)")
    parser.add_argument("--no-baseline", action="store_true",
                        help="skip the unmutated run of each group's tests (when the test suite itself just passed)")
    parser.add_argument("--skip-judged", action="store_true",
                        help="report the mutants an equivalence rule covers as the rule says, without running their "
                        "tests (a ratchet's speed; a full run runs them, so that a rule covering a mutant the tests "
                        "kill is seen)")
    parser.add_argument("--out", default=str(ROOT / "bench" / "mutation_report.json"))
    parser.add_argument("--fail-under", type=float, default=0.0, help="exit 1 when the score is below this fraction")
    args = parser.parse_args(argv)
    cfg = config()
    known = {g["name"] for g in cfg["group"]}
    if args.group and not set(args.group) <= known:
        parser.error(f"unknown group(s) {sorted(set(args.group) - known)}; groups: {', '.join(sorted(known))}")
    if args.sample < 0 or args.workers < 1:
        parser.error("--sample must be >= 0 and --workers >= 1")
    population = mutants(cfg, args.group)
    if args.changed_since:
        lines = changed_lines(args.changed_since, {m.module for m in population})
        population = [m for m in population if m.line in lines[m.module]]
    chosen = sample(population, args.sample, args.seed) if args.sample else population
    if args.rerun:
        chosen = survivors_of(json.loads(Path(args.rerun).read_text()), population)
    if args.list:
        for m in chosen:
            print(f"{m.group:12s} {m.module}:{m.line:<5d} {m.operator:48s} {m.source[:80]}")
        print(f"{len(chosen)} of {len(population)} mutants")
        return 0
    tests = {g["name"]: g["tests"] for g in cfg["group"]}
    timeout = args.timeout or float(cfg.get("timeout", 600))
    rules = equivalents()
    from tqdm import tqdm

    start = time.perf_counter()
    args.commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="attnbounds-mutation-") as folder:
        copies = [_copy(Path(folder) / f"w{k}") for k in range(args.workers)]
        measured = {} if args.no_baseline else baseline(copies[0], cfg, {m.group for m in chosen})
        limits = {g: max(timeout, TIMEOUT_FACTOR * measured.get(g, 0.0)) for g in tests}
        args.timeout_s = {g: round(limits[g]) for g in sorted({m.group for m in chosen})}
        args.baseline_s = {g: round(v, 1) for g, v in measured.items()} or None
        outcomes: list[Outcome] = []
        queue = list(chosen)
        with concurrent.futures.ThreadPoolExecutor(args.workers) as pool, \
                tqdm(total=len(chosen), desc="mutants", unit="mutant", file=sys.stderr) as bar:
            # one mutant per copy at a time: a copy's file is mutated in place while its tests run
            running: dict[concurrent.futures.Future[Outcome], Path] = {}
            free = list(copies)
            while queue or running:
                while queue and free:
                    m, c = queue.pop(0), free.pop()
                    running[pool.submit(run_one, m, c, tests[m.group], limits[m.group], rules, args.skip_judged)] = c
                done, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for fut in done:
                    free.append(running.pop(fut))
                    o = fut.result()
                    outcomes.append(o)
                    bar.update(1)
                    bar.set_postfix(killed=sum(o.status == "killed" for o in outcomes),
                                    survived=sum(o.status == "survived" for o in outcomes))
                    bar.write(f"{o.status}{' (timeout)' if o.timed_out else ''}: {o.mutant.module}:{o.mutant.line} "
                              f"{o.mutant.operator} ({o.seconds:.0f} s)", file=sys.stderr)
                    # every outcome is kept as it comes: a run stopped early leaves a report of what it finished
                    data = _write(outcomes, args, time.perf_counter() - start, len(population), len(chosen))
    data = _write(outcomes, args, time.perf_counter() - start, len(population), len(chosen))
    a = data["all"]
    print(f"{a['mutants']} mutants: {a['killed']} killed, {a['survived']} survived, {a['equivalent']} equivalent, "
          f"{a['benign']} benign, "
          f"{a['incompetent']} incompetent; score {a['score']}; {data['wall_s']} s; report {args.out}")
    return 0 if a["score"] is None or a["score"] >= args.fail_under else 1


if __name__ == "__main__":
    sys.exit(main())
