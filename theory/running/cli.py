"""The ``attnbounds`` command: a thin layer over public functions.

Subcommands: ``list``, ``verify``, ``search``, ``cite``, ``tighten``, ``profile``, ``table``, ``report``, ``prove``, ``empirical``; their help
(:data:`DESCRIPTION`, :data:`EXAMPLES`, :data:`EXIT_CODES`) is plain text. Exit codes: 0 when the run completed
(whatever the verdicts), 2 on bad input, 1 on internal error (or a replayed counterexample that did not reproduce),
130 when interrupted (Ctrl-C), start-up included. Everything printed for people goes through
:func:`attnbounds.theory.io.terminal.printable` (a user's ids and titles cannot send terminal escapes).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from attnbounds.theory.io.cachedir import hypothesis_home
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.io.terminal import printable


def _say(*parts: Any, file: Any = None) -> None:
    """``print`` for people: control characters escaped (:func:`printable`)."""
    print(printable(" ".join(str(p) for p in parts)), file=file or sys.stdout)


def cmd_list(args: argparse.Namespace) -> int:
    from attnbounds.theory.mathematics import notation, registry

    statements = registry.all_statements()
    if args.ids:
        statements = [registry.get(i) for i in args.ids]
    for s in statements:
        if args.short:
            _say(f"{s.id:48s} {notation.text(s.relation)}")
        else:
            _say(s.describe())
            _say()
    return 0


def _user_bounds(args: argparse.Namespace) -> Any:
    if getattr(args, "statements", None) is None:
        return None
    from attnbounds.theory.io import userbounds

    return userbounds.load_all(args.statements)


def _users(statement_id: str, user: Any) -> Any:
    """The statement ``statement_id`` of the ``--statements`` file, or None (no file, or not one of its ids)."""
    if user is not None and any(s.id == statement_id for s in user.statements):
        return user.get(statement_id)
    return None


def _statement(statement_id: str, user: Any) -> Any:
    from attnbounds.theory.mathematics import registry

    return _users(statement_id, user) or registry.get(statement_id)


def _print_table(records: list) -> None:
    rows = [("id", "verdict", "best lhs/rhs", "tried", "time")]
    for r in records:
        ratio = r.best_ratio
        rows.append((printable(r.id, lines=False), r.verdict, "n/a" if ratio is None else f"{ratio:.6g}", str(r.tried),
                     f"{r.wall_s:.1f}s"))
    widths = [max(len(row[k]) for row in rows) for k in range(5)]
    for n, row in enumerate(rows):
        _say("  ".join(cell.ljust(w) if k < 2 else cell.rjust(w) for k, (cell, w) in enumerate(zip(row, widths))))
        if n == 0:
            _say("  ".join("-" * w for w in widths))


#: the fewest readings for which ``verify`` starts local workers by itself (starting them takes seconds)
AUTO_READINGS = 8


def _registry_ids() -> list[str]:
    from attnbounds.theory.mathematics import registry

    return registry.ids()


def default_scheduler(given: str | None, readings: int) -> str | None:
    """``verify``'s scheduler: the one given, else ``$ATTNBOUNDS_SCHEDULER``, else one local worker per core
    (``processes:N``) when the machine has more than one core and at least :data:`AUTO_READINGS` readings run, else
    none (in this process). The records are the same either way."""
    from attnbounds.theory.mathematics.memory import cores

    if given is not None or os.environ.get("ATTNBOUNDS_SCHEDULER", "").strip():
        return given
    return f"processes:{cores()}" if cores() > 1 and readings >= AUTO_READINGS else None


def cmd_verify(args: argparse.Namespace) -> int:
    from attnbounds.theory.deciding import parallel
    from attnbounds.theory.io import atomic
    from attnbounds.theory.io import records as rec
    from attnbounds.theory.deciding.search.budget import check_share
    from attnbounds.theory.running.verify import check_arguments, verify

    check_arguments(args.budget, args.seed)
    check_share(args.cross_check, "--cross-check")
    parallel.parse(args.scheduler)  # a bad scheduler is refused before anything runs
    if args.json is not None:  # refuse an unusable output path now, not after the search
        atomic.check_target(args.json, "--json")
    user = _user_bounds(args)
    hypothesis_home()
    readings = len(args.ids) if args.ids else len(user.statements) if user is not None else len(_registry_ids())
    records = verify(args.ids or None, budget_s=args.budget, seed=args.seed, progress=not args.quiet,
                     statements=None if user is None else user.statements,
                     scheduler=default_scheduler(args.scheduler, readings), cross_check=args.cross_check)
    _stop_if_interrupted()
    if args.json is not None:
        rec.save_records(args.json, records)
    _print_table(records)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.verdict] = counts.get(r.verdict, 0) + 1
    _say("\n" + ", ".join(f"{v}: {n}" for v, n in sorted(counts.items())) + (f"; records written to {args.json}" if args.json else ""))
    errors = [r for r in records if r.verdict == "ERROR"]
    for r in errors:
        _say(f"attnbounds: ERROR in {printable(r.id, lines=False)}: {r.reason}", file=sys.stderr)
    return 1 if errors else 0


def cmd_search(args: argparse.Namespace) -> int:
    import json

    if args.replay is not None:
        return _replay(args)
    from attnbounds.theory.deciding import parallel
    from attnbounds.theory.mathematics import notation
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.io.serialize import dumps
    from attnbounds.theory.io.serialize import instance_to_json
    from attnbounds.theory.running.verify import check_arguments, default_search

    check_arguments(args.budget, args.seed)
    parallel.parse(args.scheduler)
    st = _statement(args.id, _user_bounds(args))
    hypothesis_home()
    with parallel.runner(args.scheduler) as run:
        res = default_search()(st, budget_s=args.budget, seed=args.seed, progress=not args.quiet, runner=run)
    _say(f"{printable(st.id, lines=False)}: {notation.text(st.relation)}")
    _say(f"searched {res.tried} instances in {res.wall_s:.1f} s (seed {res.seed}, budget {res.budget_s:g} s)")
    for method, info in res.by_method.items():
        summary = {k: v for k, v in info.items() if k != "by_L"}  # the per-L rows are for records and reports
        _say(f"  {method}: {json.dumps(summary, default=str, sort_keys=True)}")
    _say(f"best lhs/rhs {res.best_ratio}, best margin {res.best_margin}; float violations: {len(res.violations)}")
    shown = [("violating", v) for v in list(res.violations)[:1]] or ([("tightest", res.best)] if res.best is not None else [])
    for label, inst in shown:
        cert = certify(st, inst, 0)
        _say(f"\n{label} instance: certificate {cert.status} ({cert.method}, {cert.precision_bits} bits), "
             f"margin in [{cert.margin_lo:.6g}, {cert.margin_hi:.6g}], lhs {cert.lhs}, rhs {cert.rhs}")
        text = dumps(instance_to_json(inst.take(0)))
        _say(text if len(text) < 6000 else text[:6000] + "\n... (truncated; use attnbounds verify --json for the full record)")
    return 0


def _find_record(path: str, statement_id: str) -> Any:
    """The record of ``statement_id`` in the records file ``path`` (every record is read and checked)."""
    from attnbounds.theory.io import records as rec

    found = None
    for record in rec.iter_records(path):
        if found is None and record.id == statement_id:
            found = record
    if found is None:
        raise InvalidArgument(f"no record for {statement_id!r} in {path}")
    return found


def _replay(args: argparse.Namespace) -> int:
    """``search ID --replay RECORDS``: :func:`attnbounds.theory.running.replay.replay_instances` on the record of ID
    (its statement rebuilt from the record, or the ``--statements`` file's), every line printed; exit 0 when the
    counterexample and the tightest instance give the recorded results, 1 when not."""
    from attnbounds.theory.running.replay import replay_instances

    record = _find_record(args.replay, args.id)
    out = replay_instances(record, _users(args.id, _user_bounds(args)), source=args.replay)
    for line in out.lines:
        _say(line)
    return 0 if out.ok else 1


def cmd_cite(args: argparse.Namespace) -> int:
    from attnbounds.theory.running.verify import verify

    user = _user_bounds(args)
    if args.records:  # a record from a file is replayed before it is cited: a forged verdict is not quoted
        from attnbounds.theory.running.replay import replay_record

        record = _find_record(args.records, args.id)
        checked = replay_record(record, _users(args.id, user))
        if not checked.ok:
            _say(f"attnbounds cite: the record of {printable(args.id, lines=False)} does not replay, so it is not "
                 f"cited: {checked.what}", file=sys.stderr)
            return 1
    else:
        st = _statement(args.id, user)
        is_user = user is not None and st in user.statements
        hypothesis_home()
        record = verify([args.id], budget_s=args.budget, seed=args.seed, progress=not args.quiet,
                        statements=user.statements if is_user else None, scheduler=args.scheduler)[0]
    _say(record.cite())  # the sentence, the paper's BibTeX, CITATION.cff, the record's hash
    return 1 if record.verdict == "ERROR" else 0


def cmd_tighten(args: argparse.Namespace) -> int:
    """``tighten ID --statements FILE [--constant C]``: the best constant of one statement as a certified bracket
    (:func:`attnbounds.theory.running.tighten.tighten_statement`); progress on stderr, the result on stdout."""
    from attnbounds.theory.io import atomic
    from attnbounds.theory.io.records import write_json
    from attnbounds.theory.running.tighten import load_for_tighten, tighten_statement
    from attnbounds.theory.running.verify import check_arguments

    check_arguments(args.budget, args.seed)
    if args.json is not None:  # refuse an unusable output path now, not after the checks
        atomic.check_target(args.json, "--json")
    user, st = load_for_tighten(args.statements, args.id, args.constant)
    result = tighten_statement(st, args.constant, budget=args.budget, seed=args.seed, rtol=args.rtol,
                               max_checks=args.max_checks, start=args.start, normalisers=user.normalisers,
                               progress=not args.quiet)
    _stop_if_interrupted()
    if args.json is not None:
        write_json(args.json, result.to_json())
    _say(str(result))
    if args.json is not None:
        _say(f"result and records written to {args.json}")
    return 1 if any(step.verdict == "ERROR" for step in result.steps) else 0


def _params(items: list[str] | None) -> dict[str, float]:
    """``--param NAME=VALUE`` options as a dict (:class:`InvalidArgument` naming a malformed one)."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise InvalidArgument(f"--param expects NAME=NUMBER (e.g. s=0.5), got {item!r}") from None
    return out


def cmd_profile(args: argparse.Namespace) -> int:
    """``profile NORMALISER`` / ``profile --compare [NAME ...]``: which of the paper's limits a normaliser escapes
    (:mod:`attnbounds.theory.running.profile`); progress on stderr, the table on stdout."""
    from attnbounds.theory.io import atomic
    from attnbounds.theory.io.records import write_json
    from attnbounds.theory.running import profile as prof

    if args.json is not None:
        atomic.check_target(args.json, "--json")
    if not args.compare and len(args.normalisers) != 1:
        raise InvalidArgument("profile: give one normaliser (or --compare with several, or none for the default list); "
                              f"known: {', '.join(prof.known_names())}")
    kwargs: dict[str, Any] = dict(a=args.a, T=args.T, budget=args.budget, seed=args.seed, rtol=args.rtol,
                                  max_checks=args.max_checks, progress=not args.quiet, rows=args.rows or None)
    if args.statements:
        kwargs["statements"] = args.statements
    params = _params(args.param)
    if params:
        kwargs["params"] = params
    if args.compare:
        result: Any = prof.compare(args.normalisers or None, **kwargs)
        profiles = list(result.profiles)
        text = result.markdown()
    else:
        result = prof.profile(args.normalisers[0], **kwargs)
        profiles = [result]
        text = str(result)
    _stop_if_interrupted()
    _say(text)
    if args.json is not None:
        write_json(args.json, result.to_json())
        _say(f"profile written to {args.json}")
        for p, path in zip(profiles, prof.plot_paths(args.json, [p.normaliser for p in profiles])):
            _say(p.write_plot(path))
    return 1 if any(r.verdict == "ERROR" for p in profiles for r in p.rows) else 0


def cmd_table(args: argparse.Namespace) -> int:
    from attnbounds.theory.io import records as rec

    if args.profile is not None and not args.erratum:
        raise InvalidArgument("table: --profile goes with --erratum (the alternatives are part of the erratum)")
    if args.erratum:
        text = rec.erratum_table(rec.iter_records(args.records))
        if args.profile is not None:
            from attnbounds.theory.io import profiles

            text += "\n\n" + profiles.markdown(profiles.load(args.profile))
    else:
        text = rec.verdict_table(rec.iter_records(args.records))  # read one record at a time: only the rows are kept
    if args.readme:
        rec.update_readme(args.readme, text, erratum=args.erratum)
        _say(f"{'erratum' if args.erratum else 'verdict table'} of {args.records} written into {args.readme}")
    else:
        _say(text)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from attnbounds.theory.io import records
    from attnbounds.theory.io.report import write_report

    profile = None
    if args.profile is not None:
        from attnbounds.theory.io import profiles

        profile = profiles.load(args.profile)
    page = write_report(records.iter_records(args.records), args.out, name=Path(args.records).name,
                        progress=not args.quiet, profile=profile)
    _say(f"report written to {page}")
    return 0


#: subcommands whose own parser takes every argument after the name
DELEGATED = {"prove": "attnbounds.proofs.cli", "empirical": "attnbounds.empirical.cli"}


DESCRIPTION = """\
Check the statements of "Limitations of Normalization in Attention Mechanism" (Mudarisov, Burtsev, Petrova,
State; arXiv:2508.17821), every reading of each one, and your own bounds: a seeded counterexample search,
certification in interval arithmetic and machine-replayed proofs give each a verdict (PROVED, VERIFIED,
REFUTED, UNDECIDED, NOT-APPLICABLE), written down as a citable record."""

EXAMPLES = """\
examples:
  attnbounds list --short                      every reading, one line each
  attnbounds list lemma1                       one reading: formula, symbols, hypotheses
  attnbounds verify lemma1 'corollary3[spectral]'
                                               the verdicts of two readings (quote ids with brackets)
  attnbounds verify --json records.json        every reading (several minutes), records written
  attnbounds verify --statements mine.toml     your own bound or normaliser (docs/user-bounds.md)
  attnbounds report records.json --out site    an HTML page of the records: site/index.html
  attnbounds table records.json --erratum      what holds and what does not, in Markdown
  attnbounds search 'corollary3[spectral]' --replay records.json
                                               re-certify the counterexample a record holds
  attnbounds cite lemma1 --records records.json
                                               a sentence to cite, the paper's BibTeX, the record's hash
  attnbounds tighten --statements mine.toml mine.bound --constant C
                                               the best constant of your bound, as a certified bracket
  attnbounds profile --compare softmax ssmax sparsemax --json profile.json
                                               which of the paper's limits each normaliser escapes"""

EXIT_CODES = """\
exit codes:
  0    done, whatever the verdicts (a REFUTED reading is a result, not a failure)
  1    an internal error (an ERROR record), or a replayed counterexample that did not reproduce
  2    bad input: an unknown option, id, file or value (the message names it)
  130  interrupted (Ctrl-C); nothing is written"""

#: what ``--budget`` buys (the search plans a fixed amount of work from it: :mod:`attnbounds.theory.deciding.search.budget`)
BUDGET_HELP = ("calibrated seconds of search per reading (default {default:g}, at most {most:g}): the budget buys a fixed "
               "amount of work (random batches, gradient starts, targeted examples, shrinking), measured to take about "
               "that long on the reference machine (2 cores, one per search), so a seed and a budget give the same "
               "records on every machine; a slower or busier machine takes longer (measured on a loaded 2-core machine: "
               "a search up to 1.3x the budget, a whole reading up to 6x). A wall-clock ceiling bounds the worst "
               "case: a reading's searches start no planned work later than {ceiling:g} x the budget + {grace:g} s, "
               "and the record counts what it cut (search.by_method[m].cut, named in the reason).")


def _parser(sub: Any, name: str, help: str, description: str, examples: str = "") -> argparse.ArgumentParser:
    """A subcommand's parser, its help as plain text (examples kept as written)."""
    epilog = f"examples:\n{examples}\n\n{EXIT_CODES}" if examples else EXIT_CODES
    return sub.add_parser(name, help=help, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def _bracket_options(p: argparse.ArgumentParser, budget: float, rtol: float, max_checks: int, checks: str) -> None:
    """The options of a command made of tightens (``tighten``, ``profile``): each check's budget and seed, the
    bracket's relative width, the most checks (``checks`` says of what)."""
    p.add_argument("--budget", type=float, default=budget, metavar="S",
                   help=f"budget of each check, as for verify (default {budget:g})")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="random seed of every check (default 0)")
    p.add_argument("--rtol", type=float, default=rtol, metavar="R",
                   help=f"the relative width to narrow each bracket to, in (0, 1) (default {rtol:g})")
    p.add_argument("--max-checks", type=int, default=max_checks, metavar="K", help=f"{checks} (default {max_checks})")


def build_parser() -> argparse.ArgumentParser:
    import attnbounds

    parser = argparse.ArgumentParser(prog="attnbounds", description=DESCRIPTION,
                                     epilog=f"{EXAMPLES}\n\n{EXIT_CODES}\n\nEvery command has its own --help.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"attnbounds {attnbounds.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    p = _parser(sub, "list", "print every reading with its formula, symbols and hypotheses",
                "Print the readings of the paper's statements: formula (as the paper writes it), what each symbol "
                "means, the hypotheses, what an expectation is over.",
                "  attnbounds list --short\n  attnbounds list lemma1 'theorem1.fixed[R1,g1]'")
    p.add_argument("ids", nargs="*", help="only these ids")
    p.add_argument("--short", action="store_true", help="one line per reading")
    p.set_defaults(func=cmd_list)
    from attnbounds.theory.deciding.search.budget import CEILING, CEILING_GRACE_S, CROSS_CHECK_SHARE, MAX_BUDGET_S
    from attnbounds.theory.running.verify import DEFAULT_BUDGET_S

    def common(p: argparse.ArgumentParser, when: str = "") -> None:
        p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                       help=when + BUDGET_HELP.format(default=DEFAULT_BUDGET_S, most=MAX_BUDGET_S, ceiling=CEILING,
                                                      grace=CEILING_GRACE_S))
        p.add_argument("--seed", type=int, default=0, metavar="N", help="random seed (default 0)")
        p.add_argument("--statements", metavar="FILE", action="append",
                       help="a user's statements file (.toml, or a trusted .py); given several times, the files are "
                            "read together (an id or a normaliser name declared twice is refused)")
        p.add_argument("--quiet", action="store_true", help="no progress bars")
        p.add_argument("--scheduler", metavar="SCHED", default=None,
                       help="where the work runs: none (in this process), processes:N (N local worker processes) or "
                            "tcp://HOST:PORT (a running dask scheduler); default $ATTNBOUNDS_SCHEDULER, else for verify one "
                            f"worker per core when {AUTO_READINGS} or more readings run, else none. "
                            "Records are the same whichever runs them (apart from timing)")

    p = _parser(sub, "verify", "search, certify and prove every reading (or the given ids); write records",
                "Search, certify and prove readings, print a verdict table and write the records (--json).",
                "  attnbounds verify lemma1\n  attnbounds verify --json records.json --scheduler processes:2\n"
                "  attnbounds verify --statements examples/user_bounds.toml")
    p.add_argument("ids", nargs="*", help="only these ids (default: every reading, or the file's statements)")
    common(p)
    p.add_argument("--json", metavar="PATH", help="write the records, a JSON array, to PATH (atomically; a regular "
                   "file or a new path, symlinks followed; checked before the search)")
    p.add_argument("--cross-check", type=float, default=CROSS_CHECK_SHARE, metavar="F",
                   help=f"share of the budget (0 < F <= 1, default {CROSS_CHECK_SHARE:g}) of what only cross-checks a "
                        "verdict: the search of a reading whose derivation in proofs/ replays completely (its verdict "
                        "is the proof's), and the relaxation prover once a counterexample is certified (either "
                        "contradicting the verdict would be an ERROR); 1 gives them the whole budget")
    p.set_defaults(func=cmd_verify)
    p = _parser(sub, "search", "run the counterexample search on one reading, or replay a record's counterexample",
                "Run the search on one reading and show what each method tried and found; with --replay, re-certify "
                "the counterexample (or the tightest instance) a records file holds for it.",
                "  attnbounds search lemma1 --budget 2\n  attnbounds search 'corollary3[spectral]' --replay records.json")
    p.add_argument("id")
    common(p)
    p.add_argument("--replay", metavar="RECORDS", help="re-certify the counterexample of ID's record in this records "
                   "file instead of searching (exit 0 when it reproduces, 1 when not)")
    p.set_defaults(func=cmd_search)
    p = _parser(sub, "cite", "a sentence, the paper's BibTeX and the record's hash for one reading",
                "Print a sentence a paper can use, the paper's BibTeX and the record's content hash.",
                "  attnbounds cite lemma1 --records records.json\n  attnbounds cite lemma1 --budget 2")
    p.add_argument("id")
    common(p, "without --records: ")
    p.add_argument("--records", metavar="PATH", help="take the record from this file (written by verify --json)")
    p.set_defaults(func=cmd_cite)
    from attnbounds.theory.running.tighten import DEFAULT_MAX_CHECKS, DEFAULT_RTOL

    import textwrap

    p = _parser(sub, "tighten", "the best constant of one of your bounds, as a certified bracket",
                textwrap.fill("For a statement of a statements file monotone in one free constant (e.g. relation = "
                "\"L*alpha_max <= C\"), find the best constant as a bracket [lower, upper]: on one side the bound is "
                "PROVED for every L, on the other REFUTED with a certified counterexample (both records are in --json). "
                "The constant is substituted exactly (a rational) in every check; each check is an attnbounds verify "
                "of the statement at that constant. It stops at a relative width of --rtol, or says why it stopped "
                "(checks ran out, a verdict only VERIFIED or UNDECIDED, ...); a side no check settled is shown as ?. "
                              "Each check costs about its budget or more: --budget 0.5 to 1 is often enough.", 110),
                "  attnbounds tighten --statements mine.toml mine.lemma1 --constant C\n"
                "  attnbounds tighten --statements mine.toml mine.lemma1 --budget 1 --json bracket.json")
    p.add_argument("id", help="the statement's id in the statements file")
    p.add_argument("--statements", metavar="FILE", action="append", required=True,
                   help="the statements file declaring ID (a .toml file, or a trusted .py); the constant need not be "
                        "listed in the statement's 'parameters'")
    p.add_argument("--constant", metavar="NAME", default="C",
                   help="the free constant of the relation to tighten (default C)")
    _bracket_options(p, DEFAULT_BUDGET_S, DEFAULT_RTOL, DEFAULT_MAX_CHECKS, "the most checks to run, in [1, 10000]")
    p.add_argument("--start", type=float, default=None, metavar="X", help="a first guess of the constant")
    p.add_argument("--json", metavar="PATH", help="write the result and both records as JSON to PATH (atomically)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_tighten)
    from attnbounds.theory.running import profile as prof

    p = _parser(sub, "profile", "which of the paper's limits a normaliser escapes, each row certified or saying why not",
                textwrap.fill("For logits in [-a, a] at temperature T: the best constants of L*alpha_max <= C and "
                "L*alpha_min >= C over every L, whether alpha_max can stay above a constant as L grows, the top-N mass "
                "(L*abar_N <= C*N, Theorem 1's part about the normaliser alone), and the best "
                "constants of the Jacobian's entry, row, Frobenius and spectral norms (as C/T over every T where that "
                "is PROVED, else at the given T), each a tighten (PROVED on one side, REFUTED on the other) or saying "
                "why a side is open. --compare prints one Markdown table side by side (no names: the built-in "
                "alternatives in the registry; the missing ones are named). --json writes everything (every record) "
                "and a PNG per normaliser next to it: alpha_max of the worst logits against L with the certified C/L.",
                110),
                "  attnbounds profile softmax\n"
                "  attnbounds profile ssmax --param s=0.5 -a 2 -T 0.5\n"
                "  attnbounds profile mine --statements mine.toml       a [[normaliser]] of your file\n"
                "  attnbounds profile --compare softmax ssmax sparsemax --json profile.json")
    p.add_argument("normalisers", nargs="*", metavar="NORMALISER",
                   help="a built-in normaliser (softmax, ssmax, sparsemax, entmax15, sigmoid, ...) or a [[normaliser]] "
                        "of --statements")
    p.add_argument("--compare", action="store_true", help="profile every NORMALISER (default: the built-in "
                   "alternatives) and print one table side by side")
    p.add_argument("--statements", metavar="FILE", action="append", help="a statements file declaring the normaliser")
    p.add_argument("-a", type=float, default=prof.DEFAULT_A, metavar="A",
                   help=f"the logit bound: every logit in [-A, A] (default {prof.DEFAULT_A:g})")
    p.add_argument("-T", type=float, default=prof.DEFAULT_T, metavar="T",
                   help=f"the temperature (default {prof.DEFAULT_T:g})")
    p.add_argument("--param", action="append", metavar="NAME=VALUE",
                   help="a parameter of the normaliser besides T (e.g. s=0.5 for ssmax); repeatable")
    p.add_argument("--rows", nargs="+", metavar="ROW", help=f"only these rows ({', '.join(prof.ROW_KEYS)})")
    _bracket_options(p, prof.DEFAULT_BUDGET, prof.DEFAULT_RTOL, prof.DEFAULT_MAX_CHECKS, "the most checks of one row")
    p.add_argument("--json", metavar="PATH", help="write the profile(s) with every record as JSON to PATH, and a PNG "
                   "per normaliser next to it (PATH's stem.NAME.png)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=cmd_profile)
    p = _parser(sub, "table", "the Markdown verdict table (or erratum) of a records file",
                "Print the Markdown verdict table of a records file (one row per record), or with --erratum the "
                "erratum (per result of the paper: what it prints, the readings that hold and fail, the corrected "
                "forms).",
                "  attnbounds table records.json\n  attnbounds table records.json --erratum\n"
                "  attnbounds table records.json --readme README.md")
    p.add_argument("records", metavar="RECORDS", help="a records file written by attnbounds verify --json")
    p.add_argument("--erratum", action="store_true", help="the erratum instead of the verdict table")
    p.add_argument("--readme", metavar="PATH", help="replace the generated table between its markers in this "
                   "document instead of printing it")
    p.add_argument("--profile", metavar="PROFILE", help="with --erratum: add the paper's explanation of the "
                   "alternatives, each claim with the rows of this profile file (attnbounds profile --json) that bear "
                   "on it, and the profiles side by side")
    p.set_defaults(func=cmd_table)
    p = _parser(sub, "report", "a static HTML page (and PNG figures) of a records file, viewable offline",
                "Write a static HTML page of a records file: the erratum, a summary, then per record its verdict and "
                "why, the statement and the paper's, the counterexample and how to replay it, the proof, the search "
                "with a plot, the record's JSON.",
                "  attnbounds report records.json --out site")
    p.add_argument("records", metavar="RECORDS", help="a records file written by attnbounds verify --json")
    p.add_argument("--out", metavar="DIR", required=True,
                   help="the folder to write index.html and fig-NNN.png into: a new one, or one a report wrote (it is "
                        "replaced whole when the page is done; Ctrl-C leaves it as it was)")
    p.add_argument("--profile", metavar="PROFILE", help="show this profile file (attnbounds profile --json) after "
                   "the erratum, the paper's explanation of the alternatives linked to the rows that bear on it")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_report)
    sub.add_parser("prove", help="replay the machine-checked derivations (see attnbounds prove --help)")
    sub.add_parser("empirical", help="run the paper's experiments on a GPT-2-family model (see attnbounds empirical --help)")
    return parser


#: commands whose search runs torch (gradient ascent): torch is loaded at start-up for them
_TORCH_COMMANDS = {"verify", "search", "cite", "tighten", "profile"}


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
        from attnbounds.theory.mathematics.memory import tune_allocator

        tune_allocator()
        code = int(_run(sys.argv[1:] if argv is None else list(argv)) or 0)
        _stop_if_interrupted()
        return code
    except AttnBoundsError as exc:
        _say(f"attnbounds: error: {exc}", file=sys.stderr)
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
        _say(f"attnbounds: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def console_main() -> int:
    """The ``attnbounds`` command: :func:`main`, and after an interrupt (130) an exit without the interpreter's
    finalisation. Everything the run wrote was completed or removed before main returned; a native library that the
    interrupt caught half-initialised (an import cut short) can abort the finalisation ("Fatal Python error ...
    finalizing") and turn 130 into a crash."""
    code = main()
    if code == 130:
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(130)
    return code


if __name__ == "__main__":
    sys.exit(console_main())
