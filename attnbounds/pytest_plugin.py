"""The attnbounds pytest plugin (registered through the ``pytest11`` entry point): the verdict table
printed at the end of a run, one line per statement reading.

An oracle test records what it saw (:class:`ReadingStats`) as a user property of its report; reports
travel from xdist workers to the controller with their user properties, so the controller, which
prints the table, aggregates every worker without temporary files. The verdict combines that record
with the test outcome:

- ``REFUTED``: the reading's certified counterexample file replayed as a violation (strict xfail);
- ``VIOLATED``: the search found a certified violation in this run (the test failed; refresh the
  counterexample files: ``python -m tests.oracle.refresh``);
- ``STALE``: the counterexample file no longer violates the reading (the test failed);
- ``SURVIVED``: no certified violation among the examples tried;
- ``ERROR``: the test failed for another reason (a bug).

Options (they set the defaults of ``attnbounds.check`` / ``attnbounds.assert_bound`` through the environment
variables those functions read when called without ``budget`` / ``seed``; xdist workers inherit them and
set them again from their own copy of the options):

- ``--attnbounds-budget SECONDS`` -> ``$ATTNBOUNDS_BUDGET``: a finite number of seconds in (0, 86400];
- ``--attnbounds-seed N`` -> ``$ATTNBOUNDS_SEED``: an integer >= 0.

A bad value (on the command line, or in the environment variable when the option is not given) is a usage
error naming it. The fixture ``attnbounds_settings`` returns the budget and seed in use.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import asdict, dataclass, field
from typing import Any

import pytest

PROPERTY = "attnbounds_reading"

#: environment variables read by ``attnbounds.check`` / ``assert_bound`` when called without budget / seed
BUDGET_ENV = "ATTNBOUNDS_BUDGET"
SEED_ENV = "ATTNBOUNDS_SEED"
#: the largest budget accepted, in seconds (a day, as everywhere in attnbounds)
MAX_BUDGET_S = 86400.0


@dataclass
class ReadingStats:
    """What one oracle test saw for one reading (plain values: they cross the xdist channel)."""

    id: str
    kind: str = "deterministic"
    examples: int = 0  # hypothesis examples (each a batch)
    instances: int = 0  # applicable instances evaluated
    not_applicable: int = 0  # instances outside the hypotheses (not evaluated)
    violated: int = 0  # certified violations
    inconclusive: int = 0  # margins the certifier could not sign (equality cases)
    unchecked: int = 0  # too close to call in float64, beyond the per-example certification budget
    worst_ratio: float = -math.inf  # max float lhs / rhs over decided instances (holds or violated) with rhs > 0
    worst_rel_margin: float = math.inf  # min float (rhs - lhs) / (|lhs| + |rhs|) over decided instances
    replay: str = ""  # status of the counterexample replay ("" when the reading has no file)
    counterexample: str = ""  # the counterexample file, if any
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def as_property(self) -> tuple[str, dict[str, Any]]:
        return PROPERTY, asdict(self)


def _verdict(row: dict[str, Any], outcome: str) -> str:
    if outcome == "xfailed" and row["replay"] == "violated":
        return "REFUTED"
    if row["replay"] and row["replay"] != "violated":
        return "STALE"
    if row["violated"]:
        return "VIOLATED"
    if outcome == "passed":
        return "SURVIVED" if row["instances"] else "NO-INSTANCES"
    return "ERROR"


def _fmt(value: float) -> str:
    if value in (math.inf, -math.inf):
        return "-" if value == -math.inf else "inf"
    return f"{value:.6g}"


#: when several tests report one reading, the row shows the most telling verdict (first in this order)
SEVERITY = ("ERROR", "STALE", "VIOLATED", "REFUTED", "SURVIVED", "NO-INSTANCES")


def _merge(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from the rows several tests reported for one reading (sums, extremes; order-independent
    because the caller passes them sorted by test id)."""
    if len(rows) == 1:
        return rows[0]
    out = dict(rows[0])
    for key in ("examples", "instances", "not_applicable", "violated", "inconclusive", "unchecked", "seconds"):
        out[key] = sum(r[key] for r in rows)
    out["worst_ratio"] = max(r["worst_ratio"] for r in rows)
    out["worst_rel_margin"] = min(r["worst_rel_margin"] for r in rows)
    out["counterexample"] = next((r["counterexample"] for r in rows if r["counterexample"]), "")
    out["replay"] = next((r["replay"] for r in rows if r["counterexample"]), rows[0]["replay"])
    out["notes"] = list(dict.fromkeys(note for r in rows for note in r["notes"]))
    return out


class VerdictTable:
    """Collects :class:`ReadingStats` from reports (any worker, in any order) and prints the table.

    Reports are keyed by (test id, reading): under xdist they arrive in whatever order the workers finish, so
    nothing depends on that order; several tests reporting one reading are merged (:func:`_merge`, the most
    telling verdict of :data:`SEVERITY`)."""

    def __init__(self, config: Any):
        self.config = config
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}
        self.outcomes: dict[tuple[str, str], str] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY:
                key = (str(getattr(report, "nodeid", "")), value["id"])
                self.rows[key] = value
                if report.when == "call" or report.outcome != "passed":  # a test's reports come in order
                    self.outcomes[key] = self._outcome(report)

    @staticmethod
    def _outcome(report: Any) -> str:
        if hasattr(report, "wasxfail"):
            return "xfailed" if report.skipped else "xpassed"
        return report.outcome

    def merged(self) -> list[tuple[dict[str, Any], str]]:
        """``(row, verdict)`` per reading, in registry order (then by id)."""
        from attnbounds.theory.mathematics.registry import ids

        by_id: dict[str, list[tuple[str, dict[str, Any], str]]] = {}
        for (nodeid, sid), row in sorted(self.rows.items()):
            verdict = _verdict(row, self.outcomes.get((nodeid, sid), "failed"))
            by_id.setdefault(sid, []).append((nodeid, row, verdict))
        order = {sid: k for k, sid in enumerate(ids())}
        out = []
        for sid in sorted(by_id, key=lambda i: (order.get(i, len(order)), i)):
            entries = by_id[sid]
            verdict = min((v for _, _, v in entries), key=lambda v: SEVERITY.index(v) if v in SEVERITY else -1)
            out.append((_merge([row for _, row, _ in entries]), verdict))
        return out

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: Any) -> None:
        if not self.rows or hasattr(config, "workerinput"):
            return
        from hypothesis import settings

        merged = self.merged()
        rows = [r for r, _ in merged]
        head = ("reading", "verdict", "worst ratio", "min rel margin", "examples", "instances", "inconcl.", "unchecked",
                "n/a", "seconds")
        table = [head] + [
            (r["id"], verdict, _fmt(r["worst_ratio"]),
             _fmt(r["worst_rel_margin"]), str(r["examples"]), str(r["instances"]), str(r["inconclusive"]),
             str(r["unchecked"]), str(r["not_applicable"]), f"{r['seconds']:.1f}")
            for r, verdict in merged
        ]
        widths = [max(len(line[k]) for line in table) for k in range(len(head))]
        tr = terminalreporter
        tr.section(f"attnbounds verdicts (hypothesis profile {settings.get_current_profile_name()!r})")
        for k, line in enumerate(table):
            tr.write_line("  ".join(cell.ljust(w) if j < 2 else cell.rjust(w) for j, (cell, w) in
                                    enumerate(zip(line, widths))))
            if k == 0:
                tr.write_line("  ".join("-" * w for w in widths))
        counts: dict[str, int] = {}
        for line in table[1:]:
            counts[line[1]] = counts.get(line[1], 0) + 1
        tr.write_line(", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
        for r in rows:
            if r["counterexample"]:
                how = "; ".join(r["notes"]) or f"replayed as {r['replay'] or 'not reached'}"
                tr.write_line(f"{r['id']}: {r['counterexample']}: {how}")
            else:
                for note in r["notes"]:
                    tr.write_line(f"{r['id']}: {note}")


# -- budget and seed --------------------------------------------------------------------------------
def parse_budget(text: str) -> float:
    """A budget in seconds: a finite number in (0, :data:`MAX_BUDGET_S`] (ValueError naming the problem)."""
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= MAX_BUDGET_S:
        raise ValueError(f"expected a finite number of seconds in (0, {MAX_BUDGET_S:g}], got {text!r}")
    return value


def parse_seed(text: str) -> int:
    """A seed: a whole number >= 0 written in decimal (ValueError naming the problem)."""
    raw = str(text).strip()
    if not raw.isascii() or not raw.isdigit():
        raise ValueError(f"expected an integer >= 0, got {text!r}")
    return int(raw)


def _option_type(parse: Any) -> Any:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as exc:  # argparse names the option: "argument --attnbounds-budget: ..."
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__.replace("parse_", "")
    return convert


@dataclass(frozen=True)
class AttnboundsSettings:
    """The budget and seed ``attnbounds.check`` / ``assert_bound`` use when called without them in this run.

    ``budget_s`` / ``seed`` are None when neither the option nor the environment variable sets them (the
    functions' own defaults apply); ``source`` says where each came from (``option``, ``environment``, ``default``).
    """

    budget_s: float | None
    seed: int | None
    source: dict[str, str] = field(default_factory=dict)


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("attnbounds", "attnbounds (budget and seed of attnbounds.check / assert_bound)")
    group.addoption("--attnbounds-budget", metavar="SECONDS", type=_option_type(parse_budget), default=None,
                    help=f"default search budget of attnbounds.check / assert_bound in seconds, in (0, {MAX_BUDGET_S:g}] "
                         f"(sets ${BUDGET_ENV})")
    group.addoption("--attnbounds-seed", metavar="N", type=_option_type(parse_seed), default=None,
                    help=f"default seed of attnbounds.check / assert_bound, an integer >= 0 (sets ${SEED_ENV})")


_SETTINGS_KEY = "_attnbounds_settings"
_SAVED_KEY = "_attnbounds_saved_env"


def _settings(config: Any) -> AttnboundsSettings:
    """The settings from the options, else from the environment (validated: a bad value is a usage error)."""
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for name, option, env, parse in (("budget_s", "attnbounds_budget", BUDGET_ENV, parse_budget),
                                      ("seed", "attnbounds_seed", SEED_ENV, parse_seed)):
        given = getattr(config.option, option, None)
        if given is not None:
            values[name], source[name] = given, "option"
        elif os.environ.get(env) is not None:
            try:
                values[name] = parse(os.environ[env])
            except ValueError as exc:
                raise pytest.UsageError(f"${env}: {exc}") from None
            source[name] = "environment"
        else:
            values[name], source[name] = None, "default"
    return AttnboundsSettings(values["budget_s"], values["seed"], source)


def _export(config: Any, settings: AttnboundsSettings) -> None:
    """Set the environment variables from the options (remembering what was there, restored at unconfigure)."""
    saved: dict[str, str | None] = {}
    for env, value, origin in ((BUDGET_ENV, settings.budget_s, settings.source.get("budget_s")),
                               (SEED_ENV, settings.seed, settings.source.get("seed"))):
        if origin == "option":
            saved[env] = os.environ.get(env)
            os.environ[env] = repr(value) if isinstance(value, float) else str(value)
    setattr(config, _SAVED_KEY, saved)


@pytest.fixture(scope="session")
def attnbounds_settings(pytestconfig: Any) -> AttnboundsSettings:
    """The budget and seed attnbounds.check / assert_bound use in this run (see :class:`AttnboundsSettings`)."""
    found = getattr(pytestconfig, _SETTINGS_KEY, None)
    return found if found is not None else _settings(pytestconfig)


def pytest_configure(config: Any) -> None:
    """Validate and export the budget and seed (controller and xdist workers alike); register the verdict table
    (once per process; the controller prints it)."""
    settings = _settings(config)
    _export(config, settings)
    setattr(config, _SETTINGS_KEY, settings)
    if not config.pluginmanager.has_plugin("attnbounds-verdicts"):
        config.pluginmanager.register(VerdictTable(config), "attnbounds-verdicts")


def pytest_unconfigure(config: Any) -> None:
    """Put the environment variables back as they were (an in-process run, such as pytester's, leaves no trace)."""
    for env, value in getattr(config, _SAVED_KEY, {}).items():
        if value is None:
            os.environ.pop(env, None)
        else:
            os.environ[env] = value
