"""The attnbounds pytest plugin (registered through the ``pytest11`` entry point): the verdict table
printed at the end of a run, one line per statement reading.

An oracle test records what it saw (:class:`ReadingStats`) as a user property of its report; reports
travel from xdist workers to the controller with their user properties, so the controller, which
prints the table, aggregates every worker without temporary files. The verdict combines that record
with the test outcome:

- ``REFUTED``: the reading's certified counterexample file replayed as a violation (strict xfail);
- ``VIOLATED``: the search found a certified violation in this run (the test failed; refresh the
  counterexample files: ``python -m attnbounds.theory.counterexamples``);
- ``STALE``: the counterexample file no longer violates the reading (the test failed);
- ``SURVIVED``: no certified violation among the examples tried;
- ``ERROR``: the test failed for another reason (a bug).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

PROPERTY = "attnbounds_reading"


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


class VerdictTable:
    """Collects :class:`ReadingStats` from reports (any worker) and prints the table."""

    def __init__(self, config: Any):
        self.config = config
        self.rows: dict[str, dict[str, Any]] = {}
        self.outcomes: dict[str, str] = {}

    def pytest_runtest_logreport(self, report: Any) -> None:
        for name, value in getattr(report, "user_properties", ()):
            if name == PROPERTY:
                self.rows[value["id"]] = value
                if report.when == "call" or report.outcome != "passed":
                    self.outcomes[value["id"]] = self._outcome(report)

    @staticmethod
    def _outcome(report: Any) -> str:
        if hasattr(report, "wasxfail"):
            return "xfailed" if report.skipped else "xpassed"
        return report.outcome

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: Any) -> None:
        if not self.rows or hasattr(config, "workerinput"):
            return
        from hypothesis import settings

        from attnbounds.theory.registry import ids

        order = {sid: k for k, sid in enumerate(ids())}
        rows = sorted(self.rows.values(), key=lambda r: (order.get(r["id"], len(order)), r["id"]))
        head = ("reading", "verdict", "worst ratio", "min rel margin", "examples", "instances", "inconcl.", "unchecked",
                "n/a", "seconds")
        table = [head] + [
            (r["id"], _verdict(r, self.outcomes.get(r["id"], "failed")), _fmt(r["worst_ratio"]),
             _fmt(r["worst_rel_margin"]), str(r["examples"]), str(r["instances"]), str(r["inconclusive"]),
             str(r["unchecked"]), str(r["not_applicable"]), f"{r['seconds']:.1f}")
            for r in rows
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


def pytest_configure(config: Any) -> None:
    """Register the verdict table (once per process; the controller prints it)."""
    if not config.pluginmanager.has_plugin("attnbounds-verdicts"):
        config.pluginmanager.register(VerdictTable(config), "attnbounds-verdicts")
