"""The ladder: a reading's verdict and reason from what its evidence found (the last stage of
:func:`attnbounds.theory.running.verify.verify_statement`; :mod:`attnbounds.theory.running.evidence` gathers the
:class:`Findings`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from attnbounds.theory.deciding.search.tracker import MethodSummary
from attnbounds.theory.io.builder import CandidatePart
from attnbounds.theory.mathematics.statement import Verdict


@dataclass(frozen=True)
class Refutation:
    """A counterexample's rung of the ladder: REFUTED, or UNDECIDED when it cannot speak for the statement."""

    verdict: Literal["REFUTED", "UNDECIDED"]
    reason: str
    #: what the counterexample is, for the ERROR when a prover proves the statement too
    contradiction: str


@dataclass
class Findings:
    """What a reading's search, certificates and provers found: everything :func:`ladder` reads (the certified and
    the float-only paths build one each)."""

    what: str  # what was searched: instances, seed, budget, contexts
    tried: int
    applicable: int | None  # instances satisfying the hypotheses (None: no method reports it)
    best: bool  # an applicable instance gave a finite margin
    notes: list[str]  # said at the end of every reason: search errors, callable failures, the ceiling's cuts
    errors: dict[str, MethodSummary]  # the search methods with internal errors
    failures: str | None  # what a callable normaliser failed on
    refutation: Refutation | None = None
    proved_by: str | None = None  # the derivation that replays completely
    relaxation: str = ""  # what the relaxation prover said (empty: it did not run)
    relaxation_proved: bool = False
    declared: str = ""  # the torch function a relaxation proof about a declared log F speaks for
    undecided: list[CandidatePart] = field(default_factory=list)  # candidates certified neither way
    tie: str | None = None  # why an equality case of a strict bound leaves it undecided
    nothing: str = "no counterexample"  # what VERIFIED says was not found
    largest: str = ""  # the largest lhs / rhs found, as VERIFIED says it


def ladder(f: Findings, min_tried: int) -> tuple[Verdict, str]:
    """The verdict and reason (:mod:`attnbounds.theory.running.verify`), one rung after another: a counterexample
    (ERROR when a prover proves the statement too), a complete derivation, a callable's failures, the relaxation
    prover, no applicable instance, search errors, candidates certified neither way, no finite margin, too little
    searched, a strict bound's undecided equality case, else VERIFIED."""
    what, suffix = f.what, "".join(f"; {n}" for n in f.notes)
    relaxation = f"; {f.relaxation}" if f.relaxation else ""
    if f.refutation is not None:
        by = (f"derivation {f.proved_by}" if f.proved_by is not None else
              "the relaxation prover" if f.relaxation_proved else None)
        if by is not None:
            return "ERROR", f"internal contradiction: {by} proves the statement, but {f.refutation.contradiction}{suffix}"
        return f.refutation.verdict, f"{f.refutation.reason}; {what}{suffix}"
    if f.proved_by is not None:
        return "PROVED", (f"derivation {f.proved_by} replays completely{relaxation if f.relaxation_proved else ''}; no "
                          f"counterexample in {what}{suffix}")
    if f.failures:
        return "UNDECIDED", f"not every instance searched could be checked; {what}{suffix}{relaxation}"
    if f.relaxation_proved:
        return "PROVED", (f"proved for every L by the relaxation prover{f.declared}{relaxation}; no counterexample in "
                          f"{what}{suffix}")
    suffix += relaxation
    if f.tried > 0 and f.applicable == 0:
        return "NOT-APPLICABLE", f"no instance the search built satisfies the hypotheses; {what}{suffix}"
    if f.errors:
        return "UNDECIDED", (f"the search did not run as planned: {sum(i['errors'] for i in f.errors.values())} internal "
                             f"error(s) in {', '.join(f.errors)}; {what}{suffix}")
    if f.undecided:
        statuses = ", ".join(f"#{s['rank']} " + (f"margin [{s['margin_lo']:.3g}, {s['margin_hi']:.3g}]" if "why" not in s
                                                   else f"no certified margin ({s['why']})") + f" ({s['method']})"
                             for s in f.undecided[:4])
        return "UNDECIDED", (f"{len(f.undecided)} candidate(s) with a negative float margin could not be certified "
                             f"either way: {statuses}; {what}{suffix}")
    if f.applicable and not f.best:
        return "UNDECIDED", (f"none of the {f.applicable} applicable instances gave a finite margin (the relation "
                             f"evaluates to NaN on all of them): nothing was checked; {what}{suffix}")
    if f.tried < min_tried:
        return "UNDECIDED", f"too little searched: {what} (fewer than {min_tried}){suffix}"
    if f.tie is not None:
        return "UNDECIDED", f"{f.tie}; {what}{suffix}"
    return "VERIFIED", f"{f.nothing} in {what}; largest lhs/rhs found {f.largest}{suffix}"
