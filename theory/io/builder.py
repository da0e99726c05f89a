"""A record while its reading is being decided: every part typed, one builder, one check against the schema.

:class:`RecordBuilder` holds the parts of a verdict record (:data:`attnbounds.theory.io.records.SCHEMA`) as typed
fields: the statement and its hypotheses from the start (:meth:`RecordBuilder.start`), then what the proof replay,
the search, the certificates, the relaxation prover or the exact decision of a closed claim find. The parts are
:class:`~typing.TypedDict` s of the schema's objects, so a misspelt key or a value of the wrong type is a type error
(mypy), not a record that fails at the end. :meth:`RecordBuilder.build` adds the provenance (paper, software, git),
writes the verdict and reason, and returns the :class:`~attnbounds.theory.io.records.Record`, which checks itself
against the schema and hashes its content. Nothing else writes a record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

import sympy as sp

from attnbounds.theory.deciding.certify import Certificate
from attnbounds.theory.deciding.closed_claims import ClosedClaim
from attnbounds.theory.deciding.search.tracker import MethodSummary
from attnbounds.theory.io.records import PAPER, Record, git_state, software
from attnbounds.theory.mathematics.statement import PAPER_VERSION, Statement, Verdict

#: a JSON object written by another module's own ``to_json`` (an instance, a certificate, a limit, ...)
JSON = dict[str, Any]
#: where a statement comes from
Source = Literal["paper", "user"]


class CitationPart(TypedDict):
    numbering: str
    arxiv: str
    version: str


class StatementPart(TypedDict):
    """The statement as printed (``latex``, ``formula``), as sympy (``srepr``), its symbols and citation."""

    id: str
    title: str
    latex: str
    srepr: str
    formula: str
    where: dict[str, str]
    bindings: dict[str, str]
    defaults: dict[str, str | float]
    kind: str
    expectation_over: str | None
    notes: str
    citation: CitationPart
    source: Source
    fixed: NotRequired[dict[str, float]]
    ranges: NotRequired[dict[str, list[float]]]
    #: the normaliser a ``normaliser(<name>)`` hypothesis names, as :func:`serialize.normaliser_to_json` writes it,
    #: and whether a torch function was declared with it: what a replay rebuilds the hypothesis from
    normaliser: NotRequired[dict[str, Any]]


class HypothesisPart(TypedDict):
    id: str
    description: str


class CandidatePart(TypedDict):
    """One candidate's certificate, in the order they were certified (``search.candidates``)."""

    rank: int
    status: str
    method: str
    margin_lo: float
    margin_hi: float
    statistical: bool
    equality: bool
    why: NotRequired[str]  # no enclosure of the margin: why


class LRangePart(TypedDict):
    dense: list[int] | None
    classes: list[int] | None
    all: list[int] | None


class SearchPart(TypedDict):
    """What was searched: budget, seed, instances, what each method did, the candidates certified, the contexts."""

    budget_s: float
    seed: int
    tried: int
    by_method: dict[str, MethodSummary]
    candidates: list[CandidatePart]
    L_range: LRangePart
    plan: NotRequired[JSON]


class FloatViolation(TypedDict):
    lhs: float
    rhs: float
    margin: float
    relative_margin: float


class InteriorPart(TypedDict, total=False):
    """A certified counterexample on no boundary of the hypotheses (``counterexample.interior``)."""

    found: bool
    tried: int
    reason: str
    instance: JSON
    certificate: JSON
    statistical: bool
    candidate_rank: int
    shrunk: bool
    L: int
    boundary: list[str]


class FloatOnlyLength(TypedDict):
    L: int
    certificate: str
    note: str


class CounterexamplePart(TypedDict):
    """The counterexample of a REFUTED record: the instance, its certificate, where it lies."""

    instance: JSON
    certificate: JSON
    statistical: bool
    candidate_rank: int
    shrunk: bool
    L: int
    boundary: list[str]
    smallest_violating_L_seen: NotRequired[int]
    smallest_float_violation_L_seen: NotRequired[FloatOnlyLength]
    interior: NotRequired[InteriorPart]
    limit: NotRequired[list[JSON]]
    certified: NotRequired[bool]  # False: a float violation of a Python callable, not certified
    float: NotRequired[FloatViolation]
    note: NotRequired[str]


class TightnessPart(TypedDict):
    """The tightest instance found (largest lhs / rhs), its certificate and whether it attains the bound."""

    best_ratio: float | None
    best_margin: float | None
    witness: JSON | None
    certificate: JSON | None
    equality: bool | None
    limit: NotRequired[list[JSON]]
    float_only: NotRequired[str]


class LogFRefusedPart(TypedDict):
    normaliser: str | None
    reason: str


#: the clock's entries of a record (``timing``): kept out of the content hash
Timing = dict[str, float | str | None]


def statement_part(st: Statement, source: Source) -> StatementPart:
    """The record's ``statement``: the reading as printed, as sympy, its symbols, defaults and citation."""
    out = StatementPart(
        id=st.id, title=st.title, latex=st.latex, srepr=sp.srepr(st.relation), formula=st.formula, where=st.where(),
        bindings=dict(sorted(st.bindings.items())),
        defaults={k: (v if isinstance(v, str) else float(v)) for k, v in sorted(st.defaults.items())},
        kind=st.kind, expectation_over=st.expectation_over, notes=st.notes,
        citation=CitationPart(numbering=st.citation.numbering, arxiv=st.citation.arxiv, version=st.citation.version),
        source=source)
    if st.fixed:  # parameters the search never draws: as given
        out["fixed"] = {k: float(v) for k, v in sorted(st.fixed.items())}
    if st.ranges:  # the ranges the search draws within
        out["ranges"] = {k: [float(lo), float(hi)] for k, (lo, hi) in sorted(st.ranges.items())}
    named = next((h.names for h in st.hypotheses if h.names is not None), None)
    if named is not None:  # a user's normaliser: its definition, so that a replay can rebuild the statement
        from attnbounds.theory.io.serialize import normaliser_to_json

        out["normaliser"] = {**(normaliser_to_json(named.proto) or {}), "torch": named.declared is not None}
    return out


def candidate_part(rank: int, cert: Certificate) -> CandidatePart:
    """What ``search.candidates`` (and a relaxation's counterexample) says of one certificate."""
    out = CandidatePart(rank=rank, status=cert.status, method=cert.method, margin_lo=cert.margin_lo,
                        margin_hi=cert.margin_hi, statistical=cert.statistical, equality=cert.equality())
    if not (math.isfinite(cert.margin_lo) and math.isfinite(cert.margin_hi)):  # no margin at all: say why
        out["why"] = "; ".join(cert.notes)[:300] or "no enclosure of the margin"
    return out


def no_tightness() -> TightnessPart:
    """``tightness`` before anything was found."""
    return TightnessPart(best_ratio=None, best_margin=None, witness=None, certificate=None, equality=None)


@dataclass
class RecordBuilder:
    """The parts of one record while its reading is decided (module docstring). Optional parts left ``None`` are
    not written; ``certified`` is written only when False (nothing certified: a Python callable)."""

    statement: StatementPart
    hypotheses: list[HypothesisPart]
    search: SearchPart
    timing: Timing
    proof: JSON | None = None
    counterexample: CounterexamplePart | None = None
    tightness: TightnessPart = field(default_factory=no_tightness)
    certified: bool = True
    relaxation: JSON | None = None
    log_F_refused: LogFRefusedPart | None = None
    callable_check: JSON | None = None
    closed_claim: ClosedClaim | None = None

    @classmethod
    def start(cls, st: Statement, source: Source, budget_s: float, seed: int, timing: Timing) -> "RecordBuilder":
        """A record of ``st`` before anything is decided (``timing``: the clock's entries, shared)."""
        return cls(statement=statement_part(st, source),
                   hypotheses=[HypothesisPart(id=h.id, description=h.description) for h in st.hypotheses],
                   search=SearchPart(budget_s=float(budget_s), seed=int(seed), tried=0, by_method={}, candidates=[],
                                     L_range=LRangePart(dense=None, classes=None, all=None)),
                   timing=timing)

    def build(self, verdict: Verdict, reason: str) -> Record:
        """The record: these parts, the provenance, the verdict and reason (checked against the schema, hashed)."""
        optional = {"relaxation": self.relaxation, "log_F_refused": self.log_F_refused,
                    "callable_check": self.callable_check, "closed_claim": self.closed_claim}
        return Record.build(
            id=self.statement["id"], statement=self.statement, hypotheses=self.hypotheses,
            paper={**PAPER, "version": PAPER_VERSION}, proof=self.proof, counterexample=self.counterexample,
            tightness=self.tightness, search=self.search, software=dict(software()), git=dict(git_state()),
            verdict=verdict, reason=reason, timing=self.timing,
            **({} if self.certified else {"certified": False}),
            **{k: v for k, v in optional.items() if v is not None})
