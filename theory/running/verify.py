"""Verdicts: search each reading for a counterexample, certify it, consult the proofs, write a record.

For each statement (:func:`verify_statement`):

1. the derivation in ``proofs/`` (when one exists) is replayed; it counts only if it replays
   ``ok`` and ``complete`` (no prose step);
2. the counterexample search (:func:`attnbounds.theory.deciding.search.search`) runs under the budget and seed;
3. its candidates are certified in order (:func:`attnbounds.theory.deciding.certify.certify`) until one is a
   certified violation, preferring a deterministic certificate to a Monte Carlo one;
4. the tightest instance found (largest lhs / rhs) is certified too (tightness, equality).

Verdicts: REFUTED (a certified counterexample), PROVED (a complete replayed derivation and no
counterexample), VERIFIED (searched with the budget, nothing found), UNDECIDED (a candidate that
cannot be certified either way and is not an equality case, internal errors of the search, no finite
margin on any applicable instance, or too little searched; the reason says what was tried),
NOT-APPLICABLE (no instance the search could build satisfies the hypotheses), ERROR (an internal
contradiction, e.g. a PROVED reading with a certified counterexample, or a crash; never hidden).
"""

from __future__ import annotations

import functools
import inspect
import math
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal, Mapping, cast

import numpy as np

from attnbounds.theory.mathematics.callables import (MAX_EXPANDED, Confirmer, LogFRefused, judged_by_callable, other_weights,
                                                     uncertified)
from attnbounds.theory.deciding.certify import Certificate, certify
from attnbounds.theory.mathematics.errors import AttnBoundsError, CallableFailed, InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.memory import blas_threads
from attnbounds.theory.deciding.parallel import Runner
from attnbounds.theory.io.builder import (CandidatePart, CounterexamplePart, FloatOnlyLength, FloatViolation, InteriorPart,
                                          LRangePart, RecordBuilder, Source, Timing, TightnessPart, candidate_part)
from attnbounds.theory.io.records import Record, Records
from attnbounds.theory.io.serialize import instance_to_json
from attnbounds.theory.mathematics.statement import Statement, Verdict

from attnbounds.theory.deciding.search.tracker import TIMING_KEYS, MethodSummary
from attnbounds.theory.deciding.search.budget import CEILING, CEILING_GRACE_S, DEFAULT_BUDGET_S, check_budget, deadline_s  # noqa: E402  (one default, re-exported)
#: candidates certified per reading at most
MAX_CANDIDATES = 16
#: fewer instances than this evaluated is "too little searched" (UNDECIDED)
MIN_TRIED = 100

SearchFn = Callable[..., Any]
ProverFn = Callable[[str], "tuple[str, Any] | None"]


def default_search() -> SearchFn:
    """:func:`attnbounds.theory.deciding.search.search` (imported when first needed)."""
    try:
        from attnbounds.theory.deciding.search import search
    except ImportError as exc:
        raise RuntimeError(f"the counterexample search (theory.search) cannot be imported: {exc}") from exc
    return search


def default_prover(statement_id: str) -> tuple[str, Any] | None:
    """``(derivation name, replay)`` from ``proofs/`` for this reading, or None."""
    try:
        from attnbounds import proofs
    except ImportError:
        return None
    try:
        derivation = proofs.get(statement_id)
    except AttnBoundsError:  # not a registered reading (a user's statement)
        return None
    if derivation is None:
        return None
    return derivation.name, proofs.replay(statement_id)


def _split_timing(by_method: Mapping[str, Any]) -> tuple[dict[str, MethodSummary], dict[str, float]]:
    """What each search method did (:class:`~attnbounds.theory.deciding.search.tracker.MethodSummary`) without its
    clock-dependent entries (:data:`~attnbounds.theory.deciding.search.tracker.TIMING_KEYS`), and those entries flattened for
    ``timing``."""
    clean: dict[str, MethodSummary] = {}
    timing: dict[str, float] = {}
    for method, info in by_method.items():
        if not isinstance(info, dict):
            raise TypeError(f"the search reported {type(info).__name__} for method {method!r}, not a MethodSummary")
        clock = {k: v for k, v in info.items() if k in TIMING_KEYS and isinstance(v, (int, float))}
        timing.update({f"search.{method}.{k}": v for k, v in clock.items()})
        clean[str(method)] = cast(MethodSummary, {str(k): v for k, v in info.items() if k not in clock})
    return clean, timing


def _applicable(by_method: dict[str, MethodSummary]) -> int | None:
    """Instances satisfying the hypotheses, summed over methods that report it (None: none report)."""
    counts = [info["applicable"] for info in by_method.values() if "applicable" in info]
    return int(sum(counts)) if counts else None


def _fmt(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.4g}"


def verify_statement(st: Statement, *, budget_s: float = DEFAULT_BUDGET_S, seed: int = 0, source: Source = "paper",
                     search: SearchFn | None = None, prover: ProverFn | None = None,
                     max_candidates: int = MAX_CANDIDATES, min_tried: int = MIN_TRIED,
                     runner: Runner | None = None, scheduler: str | None = None) -> Record:
    """The record of one statement (module docstring). Crashes become ERROR records, never silence.

    ``runner`` (:mod:`attnbounds.theory.deciding.parallel`, in-process by default) runs the independent pieces: the proof
    replay (overlapping the search), the default search's pieces, the tightest instance's certificate
    (overlapping the search for an interior counterexample) and the limit analysis' growths; the record does
    not depend on it. ``scheduler``: the name :func:`verify` ran it under, written to ``timing``."""
    start = time.perf_counter()
    timing: Timing = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if scheduler is not None:
        timing["scheduler"] = scheduler
    record = RecordBuilder.start(st, source, budget_s, seed, timing)
    decide = functools.partial(_decide, budget_s=budget_s, seed=seed, search=search, prover=prover or default_prover,
                               max_candidates=max_candidates, min_tried=min_tried, runner=runner or Runner())
    with blas_threads(1):  # certificates' linear algebra too (see memory.blas_threads)
        verdict, reason, record = _verdict(st, record, decide, source, budget_s, seed)
    timing["wall_s"] = time.perf_counter() - start
    return record.build(verdict, reason)


def _verdict(st: Statement, record: RecordBuilder, decide: Callable[..., tuple[Verdict, str]], source: Source,
             budget_s: float, seed: int) -> tuple[Verdict, str, RecordBuilder]:
    """The verdict and reason of :func:`verify_statement`, and the record they were found for (a new one when a
    declared ``log F`` is refused: the statement is then judged about the function alone). Crashes become ERROR,
    never silence."""
    from attnbounds.theory.deciding import closed_claims

    timing = record.timing
    try:
        if closed_claims.is_closed(st):  # nothing to search: decided exactly
            t = time.perf_counter()
            verdict, reason, record.closed_claim = closed_claims.decide(st)
            timing["decide_s"] = time.perf_counter() - t
        else:
            record.certified = uncertified(st) is None
            confirm = Confirmer.of(st)  # a normaliser declared with log F and its torch function
            try:
                if confirm is not None:
                    confirm.spread(seed)
                verdict, reason = decide(st, record, confirm=confirm)
                if confirm is not None:
                    record.callable_check = confirm.summary()
            except LogFRefused as refused:  # the verdict must hold for the function: judge it alone
                with judged_by_callable(st) as alone:
                    record = RecordBuilder.start(alone, source, budget_s, seed, timing)
                    record.certified = False
                    record.log_F_refused = {"normaliser": confirm.declared.name if confirm else None,
                                            "reason": str(refused)}
                    verdict, reason = decide(alone, record, confirm=None)
                if refused.failed and verdict == "VERIFIED":  # it fails on part of the range: not everything holds
                    verdict = "UNDECIDED"
                reason = (f"log_F refused for this run ({refused}); judged as the Python callable alone, without "
                          f"log_F: {reason}")
    except Exception as exc:  # an internal failure must show up in the record, not vanish
        verdict = "ERROR"
        reason = f"internal error while verifying: {type(exc).__name__}: {exc}"
        timing["traceback"] = traceback.format_exc(limit=8)
    return verdict, reason, record


def derivation_part(prover: ProverFn, statement_id: str) -> tuple[dict[str, Any] | None, str | None, list[str], float]:
    """``(record's proof field, derivation name if it proves the reading, notes, seconds)`` from ``prover`` (what a
    record's replay re-runs and compares too, :mod:`attnbounds.theory.running.replay`)."""
    t = time.perf_counter()
    found = prover(statement_id)
    if found is None:
        return None, None, [], time.perf_counter() - t
    name, rep = found
    proof = {"name": name, "result": rep.result, "ok": bool(rep.ok), "complete": bool(rep.complete), **rep.summary(),
             "sharp": rep.sharp}
    if rep.ok and rep.complete:
        return proof, name, [], time.perf_counter() - t
    note = (f"derivation {name} FAILED to replay ({len(rep.failures)} failing steps)" if not rep.ok else
            f"derivation {name} replays only modulo {rep.prose} prose steps, which does not count as a proof")
    return proof, None, [note], time.perf_counter() - t


def _decide(st: Statement, record: RecordBuilder, *, budget_s: float, seed: int,
            search: SearchFn | None, prover: ProverFn, max_candidates: int, min_tried: int,
            runner: Runner, confirm: Confirmer | None) -> tuple[Verdict, str]:
    """The verdict and reason of a statement that is not a closed claim (module docstring), ``record`` filled in.
    ``confirm``: the torch function a declared normaliser's verdicts must hold for (it raises
    :class:`~attnbounds.theory.mathematics.callables.LogFRefused` on the instances searched, before anything is certified)."""
    timing = record.timing
    replaying = runner.start(derivation_part, [st.id], shared=prover, label=f"proof {st.id}")

    def proof() -> tuple[str | None, list[str]]:
        record.proof, proved_by, notes, timing["proof_s"] = replaying.results()[0]
        return proved_by, notes

    if search is None:  # the default search runs its pieces on a cluster's runner too, all under one ceiling
        search = default_search()
        extra: dict[str, Any] = {} if runner.name == "none" else {"runner": runner}
        if "deadline" in inspect.signature(search).parameters:  # the reading's searches stop starting work then
            extra["deadline"] = time.time() + deadline_s(budget_s)
        search = functools.partial(search, **extra)
    t = time.perf_counter()
    try:
        res = search(st, budget_s=budget_s, seed=seed, progress=False)
    except AttnBoundsError as exc:  # the statement asks for something no instance family provides
        timing["search_s"] = time.perf_counter() - t
        proved_by, _ = proof()
        verdict: Verdict = "PROVED" if proved_by is not None else "UNDECIDED"
        return verdict, (f"the search could not run on this statement: {exc}"
                         + (f"; derivation {proved_by} replays completely" if proved_by else ""))
    timing["search_s"] = time.perf_counter() - t
    proved_by, notes = proof()
    if getattr(res, "wall_s", None) is not None:
        timing["search.wall_s"] = float(res.wall_s)
    by_method, method_timing = _split_timing(dict(res.by_method))
    timing.update(method_timing)
    search_part = record.search
    search_part["tried"], search_part["by_method"], search_part["L_range"] = int(res.tried), by_method, _L_range(by_method)
    if getattr(res, "plan", None):
        search_part["plan"] = dict(res.plan)  # the fixed work the budget bought (deterministic)

    t = time.perf_counter()
    float_only = uncertified(st)
    # the tightest instance's certificate does not depend on what follows: it runs meanwhile on a cluster
    best_certificate = runner.start(certify, [res.best], shared=st, label=f"certify {st.id}") \
        if res.best is not None and float_only is None else None
    minimal = getattr(res, "minimal", None)  # the shrunk, rounded counterexample: most readable, certify it first
    cands = _candidates(res.violations)
    shortest = getattr(res, "shortest", None)
    if any(st.strict) and shortest is not None:  # a strict bound's equality cases tie at margin 0: the shortest
        cands = [shortest, *(c for c in cands if c is not shortest)]  # context is the likeliest exact one
    if minimal is not None:
        cands = [minimal, *(c for c in cands if c is not minimal)]
    if confirm is not None:  # the function must give the weights every candidate and tight instance carries
        confirm.check([*cands, res.best, *getattr(res, "tight", [])])
        cands.sort(key=lambda c: not confirm.reaches(c))  # candidates the function can confirm first
    chosen, summaries = _certified(st, cands[:max_candidates])
    best_cert = None
    if chosen is None and best_certificate is not None:  # the float search saw it hold: the certificate may not
        best_cert = best_certificate.results()[0]  # (a strict bound's equality case, a violation rounding hid)
        if best_cert.status == "violated":
            summaries.append(candidate_part(len(cands), best_cert))
            chosen = (len(cands), res.best, best_cert)
    search_part["candidates"] = summaries
    relaxed = None
    if float_only is None:  # the relaxation prover: PROVED for every L, or a counterexample the search missed
        relaxed = _relaxation(st, budget_s)
        record.relaxation = relaxed.to_json()
        if chosen is None and relaxed.status == "refuted" and relaxed.counterexample is not None:
            cert = certify(st, relaxed.counterexample, 0)
            record.relaxation["counterexample_certificate"] = candidate_part(len(summaries), cert)
            if cert.status == "violated":
                if confirm is not None:  # the function must give the weights the counterexample carries
                    confirm.check([relaxed.counterexample])
                chosen = (len(summaries), relaxed.counterexample, cert)
                cands = [*cands, relaxed.counterexample]
                notes.append("the counterexample was found by the relaxation prover (the search found none)")
    if float_only is not None:
        return ladder(_float_only_findings(st, record, res, cands, chosen, float_only, seed=seed, budget_s=budget_s,
                                           t=t), min_tried)
    if chosen is not None:
        rank, cand, cert = chosen
        cx = record.counterexample = _counterexample_part(cand, cert, rank, minimal is not None and cand is minimal)
        _shortest_violation(cx, st, cands, summaries, cand, getattr(res, "shortest", None))
        at_limit = cand
        if cx["boundary"]:  # also look for a counterexample inside the hypotheses
            cx["interior"], inside = _interior_counterexample(st, cands, chosen, budget_s=budget_s, seed=seed,
                                                              search=search, max_candidates=max_candidates)
            if inside is not None:
                at_limit = inside
                if confirm is not None:
                    confirm.check([at_limit])
        cx["limit"] = _limits(st, at_limit, violated=True, runner=runner)
    if best_certificate is not None:
        best_cert = best_cert or best_certificate.results()[0]
        tight = record.tightness = _tightness(res, best_cert)
        if chosen is None:
            tight["limit"] = _limits(st, res.best, violated=False, runner=runner)
            ratio = _finite_or_none(res.best_ratio)
            if ratio is not None and ratio > 1 and best_cert.status == "holds":  # re-checked: rounding, not excess
                tight["float_only"] = (
                    f"lhs/rhs = {ratio!r} exceeds 1 in float64 only: the certificate of this instance says the bound "
                    f"holds there (margin in [{best_cert.margin_lo_text}, {best_cert.margin_hi_text}])")
    timing["certify_s"] = time.perf_counter() - t

    notes += _search_notes(by_method)
    refutation = None
    if chosen is not None:
        rank, cand, cert = chosen
        contradiction = (f"search candidate {rank} is a certified counterexample ({cert.method}, margin in "
                         f"[{cert.margin_lo:.6g}, {cert.margin_hi:.6g}])")
        if confirm is not None and not confirm.reaches(cand):
            refutation = Refutation("UNDECIDED", f"log_F = {confirm.declared().log_F} is certified violated only at "
                                    f"L = {cand.L}, beyond the {MAX_EXPANDED} tokens the torch function "
                                    f"{confirm.declared.name!r} can be evaluated on: a verdict about the function "
                                    f"needs the function", contradiction)
        else:
            refutation = Refutation("REFUTED", _refuted(cast(CounterexamplePart, record.counterexample), cert),
                                    contradiction)
    relaxation_proved = relaxed is not None and relaxed.status == "proved"
    relaxation = (relaxed.to_json()["rests_on"] if relaxation_proved and relaxed is not None else
                  f"the relaxation prover: {relaxed.status}: {relaxed.reason}" if relaxed is not None else "")
    declared = (f" (for log F as declared: the torch function {confirm.declared.name!r} agreed with it on "
                f"{confirm.checked} instances, up to L = {confirm.longest})" if confirm is not None else "")
    tie = (f"the tightest instance found has a margin of 0 to within interval arithmetic (certified in "
           f"[{best_cert.margin_lo:.3g}, {best_cert.margin_hi:.3g}]): a strict inequality is false if it is exactly 0, "
           f"and that could not be decided" if best_cert is not None and best_cert.strict else None)
    shown = _fmt(_finite_or_none(res.best_ratio)) + (" (above 1 in float64 only: certified to hold there)"
                                                      if "float_only" in record.tightness else "")
    findings = Findings(
        what=_what(res, record.search["L_range"], seed=seed, budget_s=budget_s), tried=int(res.tried),
        applicable=_applicable(by_method),
        best=res.best is not None, notes=notes, errors=_errors(by_method), failures=_callable_failures(by_method),
        refutation=refutation, proved_by=proved_by, relaxation=relaxation, relaxation_proved=relaxation_proved,
        declared=declared, undecided=[c for c in summaries if c["status"] == "inconclusive" and not c["equality"]],
        tie=tie, largest=shown)
    return ladder(findings, min_tried)


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
    errors: dict[str, Any]  # the search methods with internal errors
    failures: str | None  # what a callable normaliser failed on (:func:`_callable_failures`)
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
    """The verdict and reason (module docstring), one rung after another: a counterexample (ERROR when a prover
    proves the statement too), a complete derivation, a callable's failures, the relaxation prover, no applicable
    instance, search errors, candidates certified neither way, no finite margin, too little searched, a strict bound's
    undecided equality case, else VERIFIED."""
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


def _refuted(cx: CounterexamplePart, cert: Certificate) -> str:
    """What a certified counterexample is and where (its contexts, the boundary, the limits along L)."""
    kind = (f"a statistical counterexample (Monte Carlo interval at level {cert.level})" if cert.statistical
            else f"a counterexample certified in {cert.backend} interval arithmetic ({cert.method})")
    where = f" at L = {cx['L']}"
    if cx["boundary"]:
        interior = cx.get("interior", InteriorPart())
        where += (f" on the boundary of the hypotheses ({', '.join(cx['boundary'])}); an interior one at L = "
                  f"{interior['L']}" if interior.get("found") else f" on the boundary of the hypotheses "
                  f"({', '.join(cx['boundary'])}); no interior one found")
    forall = [lim for lim in cx.get("limit", []) if lim["status"].startswith("violated")]
    if forall:
        best = min(forall, key=lambda lim: lim["L0"])
        where += (f"; violated for every L >= {best['L0']}" + ("" if best["status"].endswith("for-all")
                  else f" up to {best['L_max']:.3g}") + f" along '{best['family']}'")
    return f"{kind}{where}, margin in [{cert.margin_lo:.6g}, {cert.margin_hi:.6g}]"


def _what(res: Any, L_range: LRangePart, *, seed: int, budget_s: float) -> str:
    """What was searched: how many instances, the seed, the budget, the contexts."""
    head = f"{int(res.tried)} instances searched (seed {seed}, budget {budget_s:g} s"
    return f"{head}; L from {L_range['all'][0]} to {L_range['all'][1]})" if L_range["all"] else f"{head})"


def _errors(by_method: dict[str, MethodSummary]) -> dict[str, MethodSummary]:
    """The search methods that had internal errors."""
    return {m: info for m, info in by_method.items() if info.get("errors")}


def _search_notes(by_method: dict[str, MethodSummary], more: list[str] | None = None) -> list[str]:
    """What the search reports beside its findings: internal errors, a callable's failures, the ceiling's cuts."""
    notes = []
    errors = _errors(by_method)
    if errors:
        notes.append("search errors: " + "; ".join(
            f"{m}: {info['errors']} ({' | '.join(info.get('error_messages', [])[:2])})" for m, info in errors.items()))
    failures = _callable_failures(by_method, more)
    if failures:
        notes.append(failures)
    cut = {m: info["cut"] for m, info in by_method.items() if info.get("cut")}
    if cut:
        notes.append(f"the wall-clock ceiling ({CEILING:g} x the budget + {CEILING_GRACE_S:g} s) cut planned work: " +
                     ", ".join(f"{m}: {n} unit(s)" for m, n in cut.items()))
    return notes


def _tightness(res: Any, cert: Certificate | None) -> TightnessPart:
    """The tightest instance found (largest lhs / rhs), with its certificate when it has one."""
    return TightnessPart(best_ratio=_finite_or_none(res.best_ratio), best_margin=_finite_or_none(res.best_margin),
                         witness=instance_to_json(res.best.take(0)),
                         certificate=None if cert is None else cert.to_json(timing=False),
                         equality=None if cert is None else _attains(res.best_ratio, cert))


#: a float violation of a statement about a callable must have a relative margin below this (clearly not rounding)
FLOAT_CLEAR = 1e-9


def _float_only_findings(st: Statement, record: RecordBuilder, res: Any, cands: list[Instance], chosen: Any, why: str,
                         *, seed: int, budget_s: float, t: float) -> Findings:
    """The findings about a normaliser that cannot be certified (a Python callable without log F): a clear float
    violation refutes in float arithmetic only (``certified: false``, the float margin shown); nothing proves, so the
    ladder gives at most VERIFIED."""
    record.certified = False
    found = None
    unconfirmed: list[str] = []  # candidates the callable did not give the same weights again
    for rank, cand in enumerate(cands):
        one = cand.take(0)
        try:  # the callable again, on the same logits: the violation must be its own, every time
            again = one.normaliser.weights(one.logits, one.counts) if one.logits is not None and one.normaliser else None
            ev = st.evaluate(one)
        except CallableFailed as exc:
            unconfirmed.append(f"re-evaluating candidate {rank}: {exc}")
            continue
        differs = None if again is None else other_weights(again, one.alpha, one.counts)
        if differs is not None:
            unconfirmed.append(f"candidate {rank} (L = {one.L}): the callable returned other weights on the same "
                               f"logits (largest difference {differs:.3g})")
            continue
        lhs, rhs, margin = float(ev.lhs[0]), float(ev.rhs[0]), float(ev.margin_hi[0])
        rel = margin / (abs(lhs) + abs(rhs)) if (abs(lhs) + abs(rhs)) > 0 else margin
        if bool(ev.applicable[0]) and rel < -FLOAT_CLEAR:
            found = (rank, one, lhs, rhs, margin, rel)
            break
    if res.best is not None:
        record.tightness = _tightness(res, None)
    record.timing["certify_s"] = time.perf_counter() - t
    by_method = record.search["by_method"]
    refutation = None
    if found is not None:
        rank, one, lhs, rhs, margin, rel = found
        cert = chosen[2] if chosen is not None and chosen[0] == rank else certify(st, one, 0)
        cx = record.counterexample = _counterexample_part(one, cert, rank, rank == 0 and getattr(res, "minimal", None)
                                                          is not None)
        cx["statistical"], cx["certified"] = False, False
        cx["float"] = FloatViolation(lhs=lhs, rhs=rhs, margin=margin, relative_margin=rel)
        cx["note"] = ("NOT certified: " + why + "; the certificate above (if any) is about the float weights the "
                      "callable returned, not about the callable")
        refutation = Refutation("REFUTED", f"violated in float64 arithmetic only, NOT certified ({why}): at L = "
                                f"{one.L}, lhs = {lhs:.6g}, rhs = {rhs:.6g}, float margin rhs - lhs = {margin:.6g} "
                                f"(relative {rel:.3g})", f"candidate {rank} violates it in float64 arithmetic")
    rounding = (f"; {len(cands)} float violation(s) within rounding (relative margin above -{FLOAT_CLEAR:g}: equality "
                f"cases, not counterexamples)" if cands else "")
    tie = (f"{len(cands)} float violation(s) within rounding (relative margin above -{FLOAT_CLEAR:g}): a strict "
           f"inequality is false at an equality case, which float arithmetic cannot tell from rounding (not certified: "
           f"{why})" if cands and any(st.strict) else None)
    return Findings(
        what=_what(res, record.search["L_range"], seed=seed, budget_s=budget_s), tried=int(res.tried),
        applicable=_applicable(by_method),
        best=res.best is not None, notes=_search_notes(by_method, unconfirmed), errors=_errors(by_method),
        failures=_callable_failures(by_method, unconfirmed), refutation=refutation, tie=tie,
        nothing="no violation in float64 arithmetic",
        largest=f"{_fmt(_finite_or_none(res.best_ratio))}{rounding} (not certified: {why})")


def _relaxation(st: Statement, budget_s: float) -> Any:
    """The relaxation prover's result on ``st`` (:mod:`attnbounds.theory.deciding.prover`), with work bought by the budget."""
    from attnbounds.theory.deciding import prover

    return prover.prove(st, work=prover.work_for(budget_s))


def _callable_failures(by_method: dict[str, MethodSummary], more: list[str] | None = None) -> str | None:
    """What a user's callable normaliser failed on during the search (and ``more`` failures seen afterwards), or None."""
    failed = {m: info for m, info in by_method.items() if info.get("callable_failures")}
    n = sum(int(info["callable_failures"]) for info in failed.values()) + len(more or [])
    if not n:
        return None
    messages = [m for info in failed.values() for m in info.get("callable_failure_messages", [])[:2]] + list(more or [])
    where = ", ".join(f"{m}: {info['callable_failures']}" for m, info in failed.items())
    return (f"the callable normaliser failed {n} time(s) ({where or 'when re-evaluated'}): {' | '.join(messages[:3])}; "
            f"those instances were not checked")


def _certified(st: Statement, cands: list[Instance]) -> tuple[tuple[int, Instance, Certificate] | None, list[CandidatePart]]:
    """The first candidate certified violated (deterministic preferred to statistical), and every certificate tried."""
    chosen = statistical = None
    summaries = []
    for rank, cand in enumerate(cands):
        cert = certify(st, cand, 0)
        summaries.append(candidate_part(rank, cert))
        if cert.status == "violated" and not cert.statistical:
            chosen = (rank, cand, cert)
            break
        if cert.status == "violated" and statistical is None:
            statistical = (rank, cand, cert)
    return chosen or statistical, summaries


def _counterexample_part(cand: Instance, cert: Certificate, rank: int, shrunk: bool) -> CounterexamplePart:
    """A counterexample: the instance, its certificate, its rank among the candidates, its boundaries."""
    from attnbounds.theory.deciding.boundary import boundaries

    return CounterexamplePart(instance=instance_to_json(cand.take(0)), certificate=cert.to_json(timing=False),
                              statistical=cert.statistical, candidate_rank=rank, shrunk=shrunk, L=int(cand.L),
                              boundary=boundaries(cand.take(0))[0])


def _shortest_violation(cx: CounterexamplePart, st: Statement, cands: list[Instance], summaries: list[CandidatePart],
                        chosen: Instance, shortest: Instance | None) -> None:
    """``cx``'s ``smallest_violating_L_seen``: the shortest context of a *certified* violation (the counterexample,
    the candidates certified violated, and the search's shortest float violation when its certificate confirms it);
    a shorter float violation that the certificate does not confirm is ``smallest_float_violation_L_seen``,
    labelled."""
    Ls = [chosen.L] + [cands[s["rank"]].L for s in summaries if s["status"] == "violated" and s["rank"] < len(cands)]
    if shortest is not None and shortest.L < min(Ls):
        cert = certify(st, shortest, 0)
        if cert.status == "violated":
            Ls.append(shortest.L)
        else:
            cx["smallest_float_violation_L_seen"] = FloatOnlyLength(
                L=int(shortest.L), certificate=cert.status,
                note="a float64 violation at this length that interval arithmetic does not confirm (rounding or an "
                     "equality case): not a counterexample")
    cx["smallest_violating_L_seen"] = int(min(Ls))


def _interior_counterexample(st: Statement, cands: list[Instance], chosen: tuple[int, Instance, Certificate], *,
                             budget_s: float, seed: int, search: SearchFn,
                             max_candidates: int) -> tuple[InteriorPart, Instance | None]:
    """A certified counterexample on no boundary of the hypotheses (what the record says, and the instance when one
    was found): among the other candidates first, else from a search that only counts interior violations (half the
    budget, the next seed)."""
    from attnbounds.theory.deciding.boundary import interior

    others = [c for k, c in enumerate(cands) if k != chosen[0] and bool(interior(c.take(0))[0])]
    found, _ = _certified(st, others[:max_candidates])
    tried = 0
    if found is None:
        try:
            res = search(st, budget_s=budget_s / 2, seed=seed + 1, progress=False, interior=True)
        except TypeError:  # a replacement search without the interior option
            return InteriorPart(found=False, reason="the search in use cannot restrict itself to interior instances"), None
        tried = int(res.tried)
        minimal = getattr(res, "minimal", None)
        found, _ = _certified(st, ([minimal] if minimal is not None else []) + _candidates(res.violations)[:max_candidates])
    if found is None:
        return InteriorPart(found=False, tried=tried, reason=f"no interior counterexample among the candidates and "
                                                             f"{tried} more instances searched (seed + 1, half the budget)"), None
    rank, inst, cert = found
    cx = _counterexample_part(inst, cert, rank, False)
    return InteriorPart(found=True, tried=tried, instance=cx["instance"], certificate=cx["certificate"],
                        statistical=cx["statistical"], candidate_rank=rank, shrunk=False, L=cx["L"],
                        boundary=cx["boundary"]), inst


def _limits(st: Statement, inst: Instance, *, violated: bool, runner: Runner) -> list[dict[str, Any]]:
    """The statement along the growths of token classes through ``inst`` (:mod:`attnbounds.theory.deciding.limits`)."""
    from attnbounds.theory.deciding import limits

    return [r.to_json() for r in limits.analyse(st, inst.take(0), violated=violated, runner=runner)]


def _L_range(by_method: dict[str, MethodSummary]) -> LRangePart:
    """The contexts searched: dense (``random``, ``gradient``, ``targeted``...), token classes, and all of them."""
    def span(methods: list[str]) -> list[int] | None:
        spans = [by_method[m]["L_range"] for m in methods if m in by_method and "L_range" in by_method[m]]
        return [min(s[0] for s in spans), max(s[1] for s in spans)] if spans else None

    return LRangePart(dense=span([m for m in by_method if m != "classes"]), classes=span(["classes"]),
                      all=span(list(by_method)))


def _candidates(violations: Any) -> list[Instance]:
    """Single-instance candidates, from a list of instances or one batch."""
    if isinstance(violations, Instance):
        return [violations.take(i) for i in range(violations.B)]
    return list(violations or [])


def _attains(ratio: float, cert: Any) -> bool:
    """Whether the tightest instance attains the bound: lhs/rhs is 1 to float precision and the certified
    margin is 0 to 1e-12 of the sides' scale (a degenerate instance where both sides vanish is not an
    equality case: its ratio is not 1)."""
    if not (math.isfinite(ratio) and abs(ratio - 1.0) <= 1e-9) or cert.statistical:
        return False
    return cert.margin_lo <= 0.0 <= cert.margin_hi or max(abs(cert.margin_lo), abs(cert.margin_hi)) <= 1e-12 * cert.scale


def _finite_or_none(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if not math.isnan(x) else None


def check_arguments(budget_s: Any, seed: Any) -> None:
    """Raise :class:`~attnbounds.theory.mathematics.errors.InvalidArgument` for a bad budget or seed (before anything runs)."""
    check_budget(budget_s)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgument(f"seed must be an integer >= 0, got {seed!r}")


#: this many readings are tasks of their own on any cluster: each then also runs its certification, limit
#: analysis and proof replay (seconds, serial) on a worker, which outweighs sharding each search across more workers
READINGS_AS_TASKS = 8


def verify(ids: Iterable[str] | None = None, *, budget_s: float = DEFAULT_BUDGET_S, seed: int = 0, progress: bool = True,
           statements: Iterable[Statement] | None = None, search: SearchFn | None = None,
           prover: ProverFn | None = None, scheduler: str | None = None) -> Records:
    """Records for the readings ``ids`` (default: every registered reading) plus ``statements`` (a user's own).

    ``search`` and ``prover`` default to :func:`attnbounds.theory.deciding.search.search` and ``proofs``; they can be
    replaced (tests, other searches). Unknown ids and bad budgets raise before anything runs.

    ``scheduler`` (:mod:`attnbounds.theory.deciding.parallel`: ``none``, ``processes:N``, ``tcp://HOST:PORT``; default
    ``$ATTNBOUNDS_SCHEDULER`` or ``none``): with at least as many readings as workers (or
    :data:`READINGS_AS_TASKS`), each reading is a task; with fewer, the readings run here one after another and
    each search's pieces are the tasks (one hard reading uses the whole cluster). A script that starts local
    workers (``processes:N``) needs the ``if __name__ == "__main__":`` guard: Dask spawns fresh interpreters. Either way the records are the same as in-process, apart from
    ``timing`` (which names the scheduler).
    """
    from attnbounds.theory.deciding import parallel
    from attnbounds.theory.mathematics import registry

    check_arguments(budget_s, seed)
    extra = list(statements or [])
    user_ids = {s.id for s in extra}
    if ids is None:
        chosen = [] if extra else registry.all_statements()
    else:
        chosen = [s for s in extra if s.id in set(ids)] + [registry.get(i) for i in ids if i not in user_ids]
        extra = []
    todo: list[tuple[Statement, Source]] = [(s, "user" if s.id in user_ids else "paper") for s in [*chosen, *extra]]
    with parallel.runner(scheduler) as run:
        if run.workers > 1 and len(todo) >= min(run.workers, READINGS_AS_TASKS):
            tasks = [(st, source, budget_s, seed, search, prover, run.name) for st, source in todo]
            out = run.map(_verify_task, tasks, label="verify", progress=progress)
        else:
            out = _verify_here(todo, budget_s=budget_s, seed=seed, progress=progress, search=search, prover=prover,
                               runner=run)
    return Records(out)  # a list that Jupyter shows as the report


def _verify_task(args: tuple[Statement, Source, float, int, SearchFn | None, ProverFn | None, str]) -> Record:
    st, source, budget_s, seed, search, prover, scheduler = args
    return verify_statement(st, budget_s=budget_s, seed=seed, source=source, search=search, prover=prover,
                            scheduler=scheduler)


def _verify_here(todo: list[tuple[Statement, Source]], *, budget_s: float, seed: int, progress: bool,
                 search: SearchFn | None, prover: ProverFn | None, runner: Runner) -> list[Record]:
    """The readings one after another, here; the pieces of each (:func:`verify_statement`) run on ``runner``."""
    out = []
    bar = None
    if progress:
        from tqdm.auto import tqdm

        from attnbounds.theory.io.terminal import printable

        bar = tqdm(total=len(todo), desc="verify", unit="reading")
    try:
        for st, source in todo:
            if bar is not None:
                bar.set_postfix_str(printable(st.id, lines=False))
            out.append(verify_statement(st, budget_s=budget_s, seed=seed, source=source, search=search, prover=prover,
                                        runner=runner, scheduler=runner.name))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return out
