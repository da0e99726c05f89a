"""The ``attnbounds`` command: a thin layer over public functions.

Subcommands: ``list``, ``verify``, ``search``, ``cite``, ``table``, ``report``, ``prove``, ``empirical``.
Exit codes: 0 when the run completed (whatever the verdicts), 2 on bad input, 1 on internal error, 130 when
interrupted (Ctrl-C), start-up included.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any

from attnbounds.theory.errors import AttnBoundsError, InvalidArgument


def cmd_list(args: argparse.Namespace) -> int:
    from attnbounds.theory import registry

    statements = registry.all_statements()
    if args.ids:
        statements = [registry.get(i) for i in args.ids]
    for s in statements:
        if args.short:
            print(f"{s.id:48s} {s.formula}")
        else:
            print(s.describe())
            print()
    return 0


def _user_bounds(args: argparse.Namespace) -> Any:
    if getattr(args, "statements", None) is None:
        return None
    from attnbounds.theory import userbounds

    return userbounds.load_all(args.statements)


def _statement(statement_id: str, user: Any) -> Any:
    from attnbounds.theory import registry

    if user is not None and any(s.id == statement_id for s in user.statements):
        return user.get(statement_id)
    return registry.get(statement_id)


def _print_table(records: list) -> None:
    rows = [("id", "verdict", "best lhs/rhs", "tried", "time")]
    for r in records:
        ratio = r.best_ratio
        rows.append((r.id, r.verdict, "n/a" if ratio is None else f"{ratio:.6g}", str(r.tried), f"{r.wall_s:.1f}s"))
    widths = [max(len(row[k]) for row in rows) for k in range(5)]
    for n, row in enumerate(rows):
        print("  ".join(cell.ljust(w) if k < 2 else cell.rjust(w) for k, (cell, w) in enumerate(zip(row, widths))))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _search_home() -> None:
    """Keep hypothesis' files (its constants and character caches) in the attnbounds cache, not in the folder
    the command runs from."""
    from hypothesis.configuration import set_hypothesis_home_dir

    from attnbounds.empirical.cachedir import cache_dir

    set_hypothesis_home_dir(cache_dir("hypothesis"))


def cmd_verify(args: argparse.Namespace) -> int:
    from attnbounds.theory import atomic, parallel
    from attnbounds.theory import records as rec
    from attnbounds.theory.verify import _check_budget, verify

    _check_budget(args.budget, args.seed)
    parallel.parse(args.scheduler)  # a bad scheduler is refused before anything runs
    if args.json is not None:  # refuse an unusable output path now, not after the search
        atomic.check_target(args.json, "--json")
    user = _user_bounds(args)
    _search_home()
    records = verify(args.ids or None, budget_s=args.budget, seed=args.seed, progress=not args.quiet,
                     statements=None if user is None else user.statements, scheduler=args.scheduler)
    _stop_if_interrupted()
    if args.json is not None:
        rec.save(args.json, records)
    _print_table(records)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    print("\n" + ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())) + (f"; records written to {args.json}" if args.json else ""))
    errors = [r for r in records if r.verdict == "ERROR"]
    for r in errors:
        print(f"attnbounds: ERROR in {r.id}: {r.reason}", file=sys.stderr)
    return 1 if errors else 0


def cmd_search(args: argparse.Namespace) -> int:
    import json

    from attnbounds.theory import parallel
    from attnbounds.theory.certify import certify
    from attnbounds.theory.records import dumps
    from attnbounds.theory.serialize import instance_to_json
    from attnbounds.theory.verify import _check_budget, default_search

    _check_budget(args.budget, args.seed)
    parallel.parse(args.scheduler)
    st = _statement(args.id, _user_bounds(args))
    _search_home()
    with parallel.runner(args.scheduler) as run:
        res = default_search()(st, budget_s=args.budget, seed=args.seed, progress=not args.quiet,
                               **({"runner": run} if run.name != "none" else {}))
    print(f"{st.id}: {st.formula}")
    print(f"searched {res.tried} instances in {res.wall_s:.1f} s (seed {res.seed}, budget {res.budget_s:g} s)")
    for method, info in res.by_method.items():
        summary = {k: v for k, v in info.items() if k != "by_L"}  # the per-L rows are for records and reports
        print(f"  {method}: {json.dumps(summary, default=str, sort_keys=True)}")
    print(f"best lhs/rhs {res.best_ratio}, best margin {res.best_margin}; float violations: {len(res.violations)}")
    shown = [("violating", v) for v in list(res.violations)[:1]] or ([("tightest", res.best)] if res.best is not None else [])
    for label, inst in shown:
        cert = certify(st, inst, 0)
        print(f"\n{label} instance: certificate {cert.status} ({cert.method}, {cert.precision_bits} bits), "
              f"margin in [{cert.margin_lo:.6g}, {cert.margin_hi:.6g}], lhs {cert.lhs}, rhs {cert.rhs}")
        text = dumps(instance_to_json(inst.take(0)))
        print(text if len(text) < 6000 else text[:6000] + "\n... (truncated; use `attnbounds verify --json` for the full record)")
    return 0


def cmd_cite(args: argparse.Namespace) -> int:
    from attnbounds.theory import records as rec
    from attnbounds.theory.verify import verify

    user = _user_bounds(args)
    if args.records:
        found = [r for r in rec.load(args.records) if r.id == args.id]
        if not found:
            raise InvalidArgument(f"no record for {args.id!r} in {args.records}")
        record = found[0]
    else:
        st = _statement(args.id, user)
        is_user = user is not None and st in user.statements
        _search_home()
        record = verify([args.id], budget_s=args.budget, seed=args.seed, progress=not args.quiet,
                        statements=user.statements if is_user else None, scheduler=args.scheduler)[0]
    print(record.cite())  # the sentence, the paper's BibTeX, CITATION.cff, the record's hash
    return 1 if record.verdict == "ERROR" else 0


def cmd_table(args: argparse.Namespace) -> int:
    from attnbounds.theory import records as rec

    records = rec.load(args.records)
    if args.readme:
        rec.update_readme(args.readme, records)
        print(f"verdict table of {len(records)} records written into {args.readme}")
    else:
        print(rec.verdict_table(records))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from attnbounds.theory.report import write_report

    page = write_report(args.records, args.out)
    print(f"report written to {page}")
    return 0


#: subcommands whose own parser takes every argument after the name
DELEGATED = {"prove": "attnbounds.proofs.cli", "empirical": "attnbounds.empirical.cli"}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnbounds", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("list", help="print every statement reading with formula and hypotheses")
    p.add_argument("ids", nargs="*", help="only these ids")
    p.add_argument("--short", action="store_true", help="one line per reading")
    p.set_defaults(func=cmd_list)
    from attnbounds.theory.search.budget import CEILING, CEILING_GRACE_S, MAX_BUDGET_S
    from attnbounds.theory.verify import DEFAULT_BUDGET_S

    def common(p: argparse.ArgumentParser, budget_help: str) -> None:
        p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                       help=f"{budget_help}; at most {MAX_BUDGET_S:g}; it buys calibrated work, not seconds (a loaded "
                            f"2-core machine searched up to 1.3x the budget, a whole reading took up to 6x), and a "
                            f"reading's searches stop at {CEILING:g} x the budget + {CEILING_GRACE_S:g} s")
        p.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
        p.add_argument("--statements", metavar="FILE", action="append",
                       help="a user's statements file (.toml, or a trusted .py); given several times, the files are "
                            "read together (an id or a normaliser name declared twice is refused)")
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        p.add_argument("--scheduler", metavar="SCHED", default=None,
                       help="where the work runs: none (in this process), processes:N (N local worker processes) or "
                            "tcp://HOST:PORT (a running `dask scheduler`); default $ATTNBOUNDS_SCHEDULER or none. "
                            "Records are the same whichever runs them (apart from timing)")

    p = sub.add_parser("verify", help="search, certify and prove every reading (or the given ids); write records")
    p.add_argument("ids", nargs="*", help="only these ids (default: every reading, or the file's statements)")
    common(p, f"search budget per reading in seconds (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--json", metavar="PATH", help="write the records, a JSON array, to PATH (atomically; a regular "
                   "file or a new path, symlinks followed; checked before the search)")
    p.set_defaults(func=cmd_verify)
    p = sub.add_parser("search", help="run the counterexample search on one reading and show what it found")
    p.add_argument("id")
    common(p, f"search budget in seconds (default {DEFAULT_BUDGET_S:g})")
    p.set_defaults(func=cmd_search)
    p = sub.add_parser("cite", help="a sentence, the paper's BibTeX and the record hash for one reading")
    p.add_argument("id")
    common(p, f"search budget when no --records file is given (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--records", metavar="PATH", help="take the record from this file (written by verify --json)")
    p.set_defaults(func=cmd_cite)
    p = sub.add_parser("table", help="the markdown verdict table of a records file (written by verify --json)")
    p.add_argument("records", metavar="RECORDS", help="a records file written by `attnbounds verify --json`")
    p.add_argument("--readme", metavar="PATH", help="replace the generated table in this document instead of printing")
    p.set_defaults(func=cmd_table)
    p = sub.add_parser("report", help="a static HTML page (and PNG figures) of a records file, viewable offline")
    p.add_argument("records", metavar="RECORDS", help="a records file written by `attnbounds verify --json`")
    p.add_argument("--out", metavar="DIR", required=True,
                   help="the folder to write index.html and fig-NNN.png into (new or existing; files written atomically)")
    p.set_defaults(func=cmd_report)
    sub.add_parser("prove", help="replay the machine-checked derivations (see `attnbounds prove --help`)")
    sub.add_parser("empirical", help="run the paper's experiments on a GPT-2-family model (see `attnbounds empirical --help`)")
    return parser


#: commands whose search runs torch (gradient ascent): torch is loaded at start-up for them
_TORCH_COMMANDS = {"verify", "search", "cite"}


def _load_numerical_stack(torch: bool) -> None:
    """Import numpy, sympy (and torch) with Ctrl-C held back until they are loaded, then honoured: an interrupt
    inside a C extension's initialisation aborts the process (torch's pybind11 code) or surfaces as an
    ImportError (numpy), never as a clean KeyboardInterrupt."""
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum)) if _handles_ctrl_c() else None
    try:
        import numpy  # noqa: F401
        import sympy  # noqa: F401

        if torch:
            try:
                import torch as _  # noqa: F401
            except ImportError:  # the search then runs without gradient ascent
                pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if held:
        _INTERRUPTS.extend(held)
        raise KeyboardInterrupt


def _run(argv: list[str]) -> int:
    if argv and argv[0] in DELEGATED:  # their own parsers see every option, including the leading ones
        import importlib

        return importlib.import_module(DELEGATED[argv[0]]).main(argv[1:])
    _load_numerical_stack(torch=bool(argv) and argv[0] in _TORCH_COMMANDS)
    args = build_parser().parse_args(argv)
    return args.func(args)


#: Ctrl-C presses noted while :func:`main` runs (see :func:`_interrupt`)
_INTERRUPTS: list[int] = []


def _interrupt(signum: int, frame: Any) -> None:
    """Python's Ctrl-C behaviour (KeyboardInterrupt), noting that it happened: an interrupt that lands in a C
    extension's import surfaces as another exception (numpy raises ImportError), and is still an interrupt."""
    _INTERRUPTS.append(signum)
    raise KeyboardInterrupt


def _handles_ctrl_c() -> bool:
    """Whether main may take over Ctrl-C: the main thread, and Python's default handler (or ours) in place."""
    return threading.current_thread() is threading.main_thread() and \
        signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _interrupt)


def _stop_if_interrupted() -> None:
    """Raise KeyboardInterrupt if Ctrl-C was pressed, even if what it interrupted swallowed it (an import that
    turned it into an ImportError, a reading whose record then says ERROR): no output from an interrupted run."""
    if _INTERRUPTS:
        raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    _INTERRUPTS.clear()
    previous = None
    try:  # everything, start-up included: an interrupt while the heavy modules load exits 130 too
        if _handles_ctrl_c():
            previous = signal.signal(signal.SIGINT, _interrupt)
        from attnbounds.theory.memory import tune_allocator

        tune_allocator()
        code = int(_run(sys.argv[1:] if argv is None else list(argv)) or 0)
        _stop_if_interrupted()
        return code
    except AttnBoundsError as exc:
        print(f"attnbounds: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("attnbounds: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # an internal error: say so, with where it happened
        if _INTERRUPTS:
            print("attnbounds: interrupted", file=sys.stderr)
            return 130
        import traceback

        traceback.print_exc(limit=6, file=sys.stderr)
        print(f"attnbounds: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    sys.exit(main())
