"""The verdict table: merges what every worker reported and says REFUTED / VIOLATED / STALE / SURVIVED / ERROR."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from attnbounds.pytest_plugin import ReadingStats, VerdictTable


class _Terminal:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def section(self, title: str) -> None:
        self.lines.append(f"== {title}")

    def write_line(self, line: str) -> None:
        self.lines.append(line)


def _report(stats: ReadingStats, when: str = "call", outcome: str = "passed", **extra: Any) -> SimpleNamespace:
    return SimpleNamespace(user_properties=[stats.as_property()], when=when, outcome=outcome,
                           skipped=outcome == "skipped", **extra)


def test_table_merges_reports_and_derives_verdicts() -> None:
    table = VerdictTable(config=None)
    survived = ReadingStats("lemma1", examples=30, instances=240, worst_ratio=0.5, worst_rel_margin=0.3)
    refuted = ReadingStats("corollary1[delta=own-key]", instances=1, violated=1, replay="violated",
                           counterexample="theory/data/counterexamples/corollary1[delta=own-key].json")
    violated = ReadingStats("theorem1.fixed[R1,g2]", examples=3, instances=24, violated=1)
    stale = ReadingStats("theorem1.fixed[R2,g1]", replay="not violated", counterexample="x.json")
    crashed = ReadingStats("multihead", examples=2, instances=2)
    for report in (_report(survived), _report(survived, when="teardown"),  # teardown must not override the call
                   _report(refuted, outcome="skipped", wasxfail="refuted"), _report(violated, outcome="failed"),
                   _report(stale, outcome="failed"), _report(crashed, outcome="failed")):
        table.pytest_runtest_logreport(report)
    term = _Terminal()
    table.pytest_terminal_summary(term, 1, SimpleNamespace())
    text = "\n".join(term.lines)
    verdicts = {line.split()[0]: line.split()[1] for line in term.lines[3:8]}
    assert verdicts == {"lemma1": "SURVIVED", "corollary1[delta=own-key]": "REFUTED",
                        "theorem1.fixed[R1,g2]": "VIOLATED", "theorem1.fixed[R2,g1]": "STALE", "multihead": "ERROR"}
    assert "own-key].json: replayed as violated" in text and "1 REFUTED" in text and "0.5" in text


def test_no_table_without_oracle_reports_or_on_a_worker() -> None:
    table = VerdictTable(config=None)
    term = _Terminal()
    table.pytest_terminal_summary(term, 0, SimpleNamespace())
    assert term.lines == []
    table.pytest_runtest_logreport(_report(ReadingStats("lemma1", instances=1)))
    table.pytest_terminal_summary(term, 0, SimpleNamespace(workerinput={}))
    assert term.lines == []
