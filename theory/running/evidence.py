"""The evidence of a reading (the middle stage of :func:`attnbounds.theory.running.verify.verify_statement`).

:func:`searched` runs the search (:class:`~attnbounds.theory.deciding.search.Search`) and writes what it did into the
record; :func:`gather` certifies its candidates in order until one is a certified violation (a deterministic
certificate preferred to a Monte Carlo one), asks the relaxation prover, describes a counterexample (its boundary,
an interior one, its limits along L) and the tightest instance (tightness, equality), and returns the
:class:`~attnbounds.theory.running.ladder.Findings` the ladder reads. A statement about a Python callable without
log F (not :attr:`~attnbounds.theory.mathematics.statement.Statement.certifiable`) is judged in float64 arithmetic
only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from attnbounds.theory.deciding.certify import Certificate, certify
from attnbounds.theory.deciding.parallel import Runner
from attnbounds.theory.deciding.search import Search, SearchResult
from attnbounds.theory.deciding.search.budget import CEILING, CEILING_GRACE_S
from attnbounds.theory.deciding.search.tracker import TIMING_KEYS, MethodSummary
from attnbounds.theory.io.builder import (CandidatePart, CounterexamplePart, FloatOnlyLength, FloatViolation,
                                          InteriorPart, LRangePart, RecordBuilder, TightnessPart, candidate_part)
from attnbounds.theory.io.serialize import instance_to_json
from attnbounds.theory.mathematics.callables import MAX_EXPANDED, Confirmer, other_weights
from attnbounds.theory.mathematics.errors import CallableFailed
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.statement import Statement
from attnbounds.theory.running.ladder import Findings, Refutation

if TYPE_CHECKING:
    from attnbounds.theory.deciding.prover import ProverResult

#: a certified violation: its rank among the candidates, the instance, its certificate
Chosen = tuple[int, Instance, Certificate]
#: a float violation of a statement about a callable must have a relative margin below this (clearly not rounding)
FLOAT_CLEAR = 1e-9


@dataclass(frozen=True)
class Reading:
    """One reading being decided: its statement and record, the search's budget and seed, the search, how many
    candidates are certified, the runner of its pieces, the torch function a declared log F must agree with
    (:class:`~attnbounds.theory.mathematics.callables.Confirmer`), the wall-clock deadline its searches share, the
    budget the relaxation prover's work is bought by (the search's when None), and the share of it the prover gets
    as a cross-check once a counterexample is certified."""

    st: Statement
    record: RecordBuilder
    budget_s: float
    seed: int
    search: Search
    max_candidates: int
    runner: Runner
    confirm: Confirmer | None
    deadline: float
    prover_budget_s: float | None = None
    cross_check: float = 1.0

    def run(self, *, budget_s: float, seed: int, interior: bool = False) -> SearchResult:
        """The search on this reading."""
        return self.search(self.st, budget_s=budget_s, seed=seed, progress=False, interior=interior,
                           runner=self.runner, deadline=self.deadline)


def searched(r: Reading) -> SearchResult:
    """The search's result, what it did written into the record (its clock under ``timing``). Raises
    :class:`~attnbounds.theory.mathematics.errors.AttnBoundsError` when no instance family provides what the
    statement asks for."""
    timing = r.record.timing
    t = time.perf_counter()
    try:
        res = r.run(budget_s=r.budget_s, seed=r.seed)
    finally:
        timing["search_s"] = time.perf_counter() - t
    timing["search.wall_s"] = float(res.wall_s)
    by_method: dict[str, MethodSummary] = {}
    for method, info in res.by_method.items():  # the clock's entries go to timing, the rest into the record
        clock = {k: v for k, v in info.items() if k in TIMING_KEYS and isinstance(v, (int, float))}
        timing.update({f"search.{method}.{k}": v for k, v in clock.items()})
        by_method[method] = cast(MethodSummary, {k: v for k, v in info.items() if k not in clock})
    part = r.record.search
    part["tried"], part["by_method"], part["L_range"] = int(res.tried), by_method, _L_range(by_method)
    if res.plan:
        part["plan"] = dict(res.plan)  # the fixed work the budget bought (deterministic)
    return res


def gather(r: Reading, res: SearchResult, proved_by: str | None, notes: list[str]) -> Findings:
    """What the search ``res``, the certificates and the provers found (module docstring), the record filled in;
    ``proved_by`` and ``notes``: what the derivation's replay found."""
    st, record = r.st, r.record
    t = time.perf_counter()
    # the tightest instance's certificate does not depend on what follows: it runs meanwhile on a cluster
    best_certificate = (r.runner.start(certify, [res.best], shared=st, label=f"certify {st.id}")
                        if res.best is not None and st.certifiable else None)
    # and the most extreme tie's, where float's 0 may hide a negative margin (read only if nothing else refutes)
    extreme = res.extreme_tie if res.extreme_tie is not None and res.extreme_tie is not res.best else None
    tie_certificate = (r.runner.start(certify, [extreme], shared=st, label=f"certify {st.id}: extreme tie")
                       if extreme is not None and st.certifiable else None)
    cands = _candidates(r, res)
    chosen, summaries = _certified(st, cands[:r.max_candidates])
    record.search["candidates"] = summaries
    if not st.certifiable:
        return _float_only_findings(r, res, cands, chosen, t)
    best_cert = None
    if chosen is None and best_certificate is not None and res.best is not None:  # the float search saw it hold:
        best_cert = best_certificate.results()[0]  # the certificate may not (an equality case, rounding hid one)
        if best_cert.status == "violated":
            summaries.append(candidate_part(len(cands), best_cert))
            chosen = (len(cands), res.best, best_cert)
    if chosen is None and tie_certificate is not None and extreme is not None:  # float's 0 where it saturates
        tie_cert = tie_certificate.results()[0]
        if tie_cert.status == "violated":
            summaries.append(candidate_part(len(cands), tie_cert))
            cands = [*cands, extreme]
            chosen = (len(cands) - 1, extreme, tie_cert)
            notes.append("the counterexample is the search's most extreme tie (a float margin of exactly 0 at the "
                         "largest |l| / T), certified below float64's resolution")
    prover_s = r.budget_s if r.prover_budget_s is None else r.prover_budget_s
    checking = chosen is not None and r.cross_check < 1  # refuted already: a proof would be a contradiction (ERROR)
    relaxed = _relaxation(st, prover_s * r.cross_check if checking else prover_s)  # PROVED for every L, or a
    if checking and relaxed.status != "declined":                                  # counterexample the search missed
        notes.append(f"a counterexample was certified, so the relaxation prover was a cross-check with "
                     f"{r.cross_check:g} of the budget")
    record.relaxation = relaxed.to_json()
    if chosen is None and relaxed.status == "refuted" and relaxed.counterexample is not None:
        chosen = _relaxation_counterexample(r, relaxed.counterexample, len(summaries))
        if chosen is not None:
            cands = [*cands, chosen[1]]
            notes.append("the counterexample was found by the relaxation prover (the search found none)")
    if chosen is not None:
        _counterexample(r, res, cands, summaries, chosen)
    if best_certificate is not None:
        best_cert = best_cert or best_certificate.results()[0]
        _tightest(r, res, best_cert, violated=chosen is not None)
    record.timing["certify_s"] = time.perf_counter() - t
    by_method = record.search["by_method"]
    relaxation_proved = relaxed.status == "proved"
    declared = (f" (for log F as declared: the torch function {r.confirm.declared.name!r} agreed with it on "
                f"{r.confirm.checked} instances, up to L = {r.confirm.longest})" if r.confirm is not None else "")
    tie = (f"the tightest instance found has a margin of 0 to within interval arithmetic (certified in "
           f"[{best_cert.margin_lo:.3g}, {best_cert.margin_hi:.3g}]): a strict inequality is false if it is exactly 0, "
           f"and that could not be decided" if best_cert is not None and best_cert.strict else None)
    shown = _fmt(_finite_or_none(res.best_ratio)) + (" (above 1 in float64 only: certified to hold there)"
                                                      if "float_only" in record.tightness else "")
    return Findings(
        what=_what(res, record.search["L_range"], seed=r.seed, budget_s=r.budget_s), tried=int(res.tried),
        applicable=_applicable(by_method), best=res.best is not None, notes=notes + _search_notes(by_method),
        errors=_errors(by_method), failures=_callable_failures(by_method),
        refutation=None if chosen is None else _refutation(r, chosen), proved_by=proved_by,
        relaxation=(relaxed.to_json()["rests_on"] if relaxation_proved else
                    f"the relaxation prover: {relaxed.status}: {relaxed.reason}"),
        relaxation_proved=relaxation_proved, declared=declared,
        undecided=[c for c in summaries if c["status"] == "inconclusive" and not c["equality"]], tie=tie, largest=shown)


def _candidates(r: Reading, res: SearchResult) -> list[Instance]:
    """The search's violations in the order they are certified: the shrunk, rounded one first (most readable), for a
    strict bound the shortest context next (its equality cases tie at margin 0: the likeliest exact one), and those
    the declared torch function can confirm before the others."""
    cands = list(res.violations)
    if any(r.st.strict) and res.shortest is not None:
        cands = [res.shortest, *(c for c in cands if c is not res.shortest)]
    if res.minimal is not None:
        cands = [res.minimal, *(c for c in cands if c is not res.minimal)]
    confirm = r.confirm
    if confirm is not None:  # the function must give the weights every candidate and tight instance carries
        confirm.check([*cands, res.best, *res.tight])
        cands.sort(key=lambda c: not confirm.reaches(c))
    return cands


def _relaxation(st: Statement, budget_s: float) -> ProverResult:
    """The relaxation prover's result on ``st`` (:mod:`attnbounds.theory.deciding.prover`), with work bought by the budget."""
    from attnbounds.theory.deciding import prover

    return prover.prove(st, work=prover.work_for(budget_s))


def _relaxation_counterexample(r: Reading, found: Instance, rank: int) -> Chosen | None:
    """The relaxation prover's counterexample, its certificate written beside the prover's result; it is chosen when
    the certificate confirms it."""
    cert = certify(r.st, found, 0)
    assert r.record.relaxation is not None
    r.record.relaxation["counterexample_certificate"] = candidate_part(rank, cert)
    if cert.status != "violated":
        return None
    if r.confirm is not None:  # the function must give the weights the counterexample carries
        r.confirm.check([found])
    return rank, found, cert


def _counterexample(r: Reading, res: SearchResult, cands: list[Instance], summaries: list[CandidatePart],
                    chosen: Chosen) -> None:
    """The record's counterexample: the instance and its certificate, the shortest violating context, an interior
    counterexample when it lies on a boundary of the hypotheses, the statement along L from there."""
    rank, cand, cert = chosen
    shrunk = res.minimal is not None and cand is res.minimal
    cx = r.record.counterexample = _counterexample_part(r.st, cand, cert, rank, shrunk)
    _shortest_violation(cx, r.st, cands, summaries, cand, res.shortest)
    at_limit = cand
    if cx["boundary"]:  # also look for a counterexample inside the hypotheses
        cx["interior"], inside = _interior_counterexample(r, cands, chosen)
        if inside is not None:
            at_limit = inside
            if r.confirm is not None:
                r.confirm.check([at_limit])
    cx["limit"] = _limits(r.st, at_limit, violated=True, runner=r.runner)


def _tightest(r: Reading, res: SearchResult, cert: Certificate, *, violated: bool) -> None:
    """The record's tightest instance with its certificate; without a counterexample, the statement along L from
    there, and whether lhs / rhs above 1 is rounding only."""
    assert res.best is not None
    tight = r.record.tightness = _tightness(res, cert)
    if violated:
        return
    tight["limit"] = _limits(r.st, res.best, violated=False, runner=r.runner)
    ratio = _finite_or_none(res.best_ratio)
    if ratio is not None and ratio > 1 and cert.status == "holds":  # re-checked: rounding, not excess
        tight["float_only"] = (
            f"lhs/rhs = {ratio!r} exceeds 1 in float64 only: the certificate of this instance says the bound "
            f"holds there (margin in [{cert.margin_lo_text}, {cert.margin_hi_text}])")


def _refutation(r: Reading, chosen: Chosen) -> Refutation:
    """REFUTED by the certified counterexample, or UNDECIDED when it lies beyond what a declared torch function can
    be evaluated on."""
    rank, cand, cert = chosen
    contradiction = (f"search candidate {rank} is a certified counterexample ({cert.method}, margin in "
                     f"[{cert.margin_lo:.6g}, {cert.margin_hi:.6g}])")
    confirm = r.confirm
    if confirm is not None and not confirm.reaches(cand):
        return Refutation("UNDECIDED", f"log_F = {confirm.declared().log_F} is certified violated only at L = "
                          f"{cand.L}, beyond the {MAX_EXPANDED} tokens the torch function {confirm.declared.name!r} "
                          f"can be evaluated on: a verdict about the function needs the function", contradiction)
    assert r.record.counterexample is not None
    return Refutation("REFUTED", _refuted(r.record.counterexample, cert), contradiction)


def _refuted(cx: CounterexamplePart, cert: Certificate) -> str:
    """What a certified counterexample is and where (its contexts, the boundary, the limits along L)."""
    kind = (f"a statistical counterexample (Monte Carlo interval at level {cert.level})" if cert.statistical
            else "a counterexample certified in exact arithmetic (an exact 0 decided by sympy, or a sign decided in "
            "balls at rising precision)" if cert.backend == "exact"
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


def _float_only_findings(r: Reading, res: SearchResult, cands: list[Instance], chosen: Chosen | None,
                         t: float) -> Findings:
    """The findings about a normaliser that cannot be certified (a Python callable without log F): a clear float
    violation refutes in float arithmetic only (``certified: false``, the float margin shown); nothing proves, so the
    ladder gives at most VERIFIED."""
    st, record, why = r.st, r.record, r.st.uncertified
    assert why is not None
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
        cx = record.counterexample = _counterexample_part(st, one, cert, rank, rank == 0 and res.minimal is not None)
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
        what=_what(res, record.search["L_range"], seed=r.seed, budget_s=r.budget_s), tried=int(res.tried),
        applicable=_applicable(by_method),
        best=res.best is not None, notes=_search_notes(by_method, unconfirmed), errors=_errors(by_method),
        failures=_callable_failures(by_method, unconfirmed), refutation=refutation, tie=tie,
        nothing="no violation in float64 arithmetic",
        largest=f"{_fmt(_finite_or_none(res.best_ratio))}{rounding} (not certified: {why})")


def _certified(st: Statement, cands: list[Instance]) -> tuple[Chosen | None, list[CandidatePart]]:
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


def _counterexample_part(st: Statement, cand: Instance, cert: Certificate, rank: int, shrunk: bool) -> CounterexamplePart:
    """A counterexample: the instance, its certificate, its rank among the candidates, its boundaries."""
    from attnbounds.theory.deciding.boundary import boundaries

    return CounterexamplePart(instance=instance_to_json(cand.take(0)), certificate=cert.to_json(timing=False),
                              statistical=cert.statistical, candidate_rank=rank, shrunk=shrunk, L=int(cand.L),
                              boundary=boundaries(cand.take(0), st.reads_selection)[0])


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


def _interior_counterexample(r: Reading, cands: list[Instance], chosen: Chosen) -> tuple[InteriorPart, Instance | None]:
    """A certified counterexample on no boundary of the hypotheses (what the record says, and the instance when one
    was found): among the other candidates first, else from a search that only counts interior violations (half the
    budget, the next seed)."""
    from attnbounds.theory.deciding.boundary import interior

    others = [c for k, c in enumerate(cands) if k != chosen[0] and bool(interior(c.take(0), r.st.reads_selection)[0])]
    found, _ = _certified(r.st, others[:r.max_candidates])
    tried = 0
    if found is None:
        res = r.run(budget_s=r.budget_s / 2, seed=r.seed + 1, interior=True)
        tried = int(res.tried)
        found, _ = _certified(r.st, ([res.minimal] if res.minimal is not None else [])
                              + list(res.violations)[:r.max_candidates])
    if found is None:
        return InteriorPart(found=False, tried=tried, reason=f"no interior counterexample among the candidates and "
                                                             f"{tried} more instances searched (seed + 1, half the budget)"), None
    rank, inst, cert = found
    cx = _counterexample_part(r.st, inst, cert, rank, False)
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


def _applicable(by_method: dict[str, MethodSummary]) -> int | None:
    """Instances satisfying the hypotheses, summed over methods that report it (None: none report)."""
    counts = [info["applicable"] for info in by_method.values() if "applicable" in info]
    return int(sum(counts)) if counts else None


def _errors(by_method: dict[str, MethodSummary]) -> dict[str, MethodSummary]:
    """The search methods that had internal errors."""
    return {m: info for m, info in by_method.items() if info.get("errors")}


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


def _what(res: SearchResult, L_range: LRangePart, *, seed: int, budget_s: float) -> str:
    """What was searched: how many instances, the seed, the budget, the contexts."""
    head = f"{int(res.tried)} instances searched (seed {seed}, budget {budget_s:g} s"
    return f"{head}; L from {L_range['all'][0]} to {L_range['all'][1]})" if L_range["all"] else f"{head})"


def _tightness(res: SearchResult, cert: Certificate | None) -> TightnessPart:
    """The tightest instance found (largest lhs / rhs), with its certificate when it has one."""
    assert res.best is not None
    return TightnessPart(best_ratio=_finite_or_none(res.best_ratio), best_margin=_finite_or_none(res.best_margin),
                         witness=instance_to_json(res.best.take(0)),
                         certificate=None if cert is None else cert.to_json(timing=False),
                         equality=None if cert is None else _attains(res.best_ratio, cert))


def _attains(ratio: float, cert: Certificate) -> bool:
    """Whether the tightest instance attains the bound: lhs/rhs is 1 to float precision and the certified margin
    may be 0: exactly 0 (both exact endpoints ``0``), or an enclosure around 0 that nothing decided. A margin whose
    sign was decided (the exact tier's sign of a nonzero margin, or an enclosure clear of 0), however small, as
    e^-43786 at a supremum approached but not attained, is no equality; nor is a degenerate instance where both
    sides vanish (its ratio is not 1)."""
    if not (math.isfinite(ratio) and abs(ratio - 1.0) <= 1e-9) or cert.statistical:
        return False
    if cert.margin_lo_text == "0" == cert.margin_hi_text:
        return True
    return cert.backend != "exact" and cert.margin_lo <= 0.0 <= cert.margin_hi


def _finite_or_none(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return x if not math.isnan(x) else None


def _fmt(x: float | None) -> str:
    return "n/a" if x is None or not math.isfinite(x) else f"{x:.4g}"
