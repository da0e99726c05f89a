"""Verdicts: search each reading for a counterexample, certify it, consult the proofs, write a record.

For each statement (:func:`verify_statement`), in three stages:

1. orchestration (here): a closed claim is decided exactly; otherwise the derivation in ``proofs/`` (when one
   exists) is replayed first (a fraction of a second); it counts only if it replays ``ok`` and ``complete`` (no prose
   step), and then the search is a cross-check with :data:`~attnbounds.theory.deciding.search.budget.CROSS_CHECK_SHARE`
   of the budget (``cross_check``; the relaxation prover keeps the whole budget), as the relaxation prover is once
   a counterexample is certified; crashes become ERROR records;
2. evidence (:mod:`attnbounds.theory.running.evidence`): the counterexample search
   (:class:`~attnbounds.theory.deciding.search.Search`, by default :func:`attnbounds.theory.deciding.search.search`)
   runs under the budget and seed; its candidates are certified in order
   (:func:`attnbounds.theory.deciding.certify.certify`) until one is a certified violation, preferring a
   deterministic certificate to a Monte Carlo one; the relaxation prover runs; the tightest instance found (largest
   lhs / rhs) is certified too (tightness, equality);
3. the ladder (:mod:`attnbounds.theory.running.ladder`): the verdict and reason from what was found.

Verdicts: REFUTED (a certified counterexample), PROVED (a complete replayed derivation and no
counterexample), VERIFIED (searched with the budget, nothing found), UNDECIDED (a candidate that
cannot be certified either way and is not an equality case, internal errors of the search, no finite
margin on any applicable instance, or too little searched; the reason says what was tried),
NOT-APPLICABLE (no instance the search could build satisfies the hypotheses), ERROR (an internal
contradiction, e.g. a PROVED reading with a certified counterexample, or a crash; never hidden).
"""

from __future__ import annotations

import functools
import time
import traceback
from typing import Any, Callable, Iterable

from attnbounds.theory.deciding.parallel import Runner
from attnbounds.theory.deciding.search import Search
from attnbounds.theory.deciding.search.budget import DEFAULT_BUDGET_S as DEFAULT_BUDGET_S  # one default, re-exported
from attnbounds.theory.deciding.search.budget import CROSS_CHECK_SHARE, check_budget, check_share, deadline_s
from attnbounds.theory.io.builder import RecordBuilder, Source, Timing
from attnbounds.theory.io.records import Record, Records
from attnbounds.theory.mathematics.callables import Confirmer, LogFRefused, judged_by_callable
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.memory import blas_threads
from attnbounds.theory.mathematics.statement import Statement, Verdict
from attnbounds.theory.running import evidence
from attnbounds.theory.running.ladder import ladder

#: candidates certified per reading at most
MAX_CANDIDATES = 16
#: fewer instances than this evaluated is "too little searched" (UNDECIDED)
MIN_TRIED = 100

ProverFn = Callable[[str], "tuple[str, Any] | None"]


def default_search() -> Search:
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


def verify_statement(st: Statement, *, budget_s: float = DEFAULT_BUDGET_S, seed: int = 0, source: Source = "paper",
                     search: Search | None = None, prover: ProverFn | None = None,
                     max_candidates: int = MAX_CANDIDATES, min_tried: int = MIN_TRIED,
                     runner: Runner | None = None, scheduler: str | None = None,
                     cross_check: float = CROSS_CHECK_SHARE) -> Record:
    """The record of one statement (module docstring). Crashes become ERROR records, never silence.

    ``runner`` (:mod:`attnbounds.theory.deciding.parallel`, in-process by default) runs the independent pieces: the
    default search's pieces, the tightest instance's certificate (overlapping the search for an interior
    counterexample) and the limit analysis' growths (the proof replays first, here: the search's budget depends on
    it); the record does not depend on it. ``scheduler``: the name :func:`verify` ran it under, written to
    ``timing``. ``cross_check``: the share of ``budget_s`` the search gets when the derivation replays completely,
    and the relaxation prover once a counterexample is certified (module docstring)."""
    start = time.perf_counter()
    timing: Timing = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if scheduler is not None:
        timing["scheduler"] = scheduler
    record = RecordBuilder.start(st, source, budget_s, seed, timing)
    check_share(cross_check)
    decide = functools.partial(_decide, budget_s=budget_s, seed=seed, search=search, prover=prover or default_prover,
                               max_candidates=max_candidates, min_tried=min_tried, runner=runner or Runner(),
                               cross_check=cross_check)
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
            record.certified = st.certifiable
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
            search: Search | None, prover: ProverFn, max_candidates: int, min_tried: int,
            runner: Runner, confirm: Confirmer | None, cross_check: float) -> tuple[Verdict, str]:
    """The verdict and reason of a statement that is not a closed claim (module docstring), ``record`` filled in:
    the derivation's replay, the evidence (:mod:`attnbounds.theory.running.evidence`; the search gets the share
    ``cross_check`` of the budget when the derivation replays completely), the ladder
    (:mod:`attnbounds.theory.running.ladder`). ``confirm``: the torch function a declared normaliser's verdicts must
    hold for (it raises :class:`~attnbounds.theory.mathematics.callables.LogFRefused` on the instances searched,
    before anything is certified)."""
    record.proof, proved_by, notes, record.timing["proof_s"] = derivation_part(prover, st.id)
    search_s = budget_s
    if proved_by is not None and cross_check < 1:
        search_s = budget_s * cross_check
        record.search["budget_s"] = search_s
        notes.append(f"the derivation replays, so the search was a cross-check with {cross_check:g} of the budget "
                     f"{budget_s:g} s (the relaxation prover had all of it)")
    # the default search runs its pieces on a cluster's runner too; a reading's searches share one ceiling
    reading = evidence.Reading(st, record, search_s, seed, search or default_search(), max_candidates, runner, confirm,
                               deadline=time.time() + deadline_s(search_s), prover_budget_s=budget_s,
                               cross_check=cross_check)
    try:
        res = evidence.searched(reading)
    except AttnBoundsError as exc:  # the statement asks for something no instance family provides
        verdict: Verdict = "PROVED" if proved_by is not None else "UNDECIDED"
        return verdict, (f"the search could not run on this statement: {exc}"
                         + (f"; derivation {proved_by} replays completely" if proved_by else ""))
    return ladder(evidence.gather(reading, res, proved_by, notes), min_tried)


def check_arguments(budget_s: Any, seed: Any) -> None:
    """Raise :class:`~attnbounds.theory.mathematics.errors.InvalidArgument` for a bad budget or seed (before anything runs)."""
    check_budget(budget_s)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidArgument(f"seed must be an integer >= 0, got {seed!r}")


#: this many readings are tasks of their own on any cluster: each then also runs its certification, limit
#: analysis and proof replay (seconds, serial) on a worker, which outweighs sharding each search across more workers
READINGS_AS_TASKS = 8


def verify(ids: Iterable[str] | None = None, *, budget_s: float = DEFAULT_BUDGET_S, seed: int = 0, progress: bool = True,
           statements: Iterable[Statement] | None = None, search: Search | None = None,
           prover: ProverFn | None = None, scheduler: str | None = None,
           cross_check: float = CROSS_CHECK_SHARE) -> Records:
    """Records for the readings ``ids`` (default: every registered reading) plus ``statements`` (a user's own).

    ``search`` and ``prover`` default to :func:`attnbounds.theory.deciding.search.search` and ``proofs``; they can be
    replaced (tests, other searches: a :class:`~attnbounds.theory.deciding.search.Search`). Unknown ids and bad budgets raise before anything runs.
    ``cross_check``: the share of the budget a reading's search gets when its derivation replays completely, and its
    relaxation prover once a counterexample is certified.

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
    check_share(cross_check)
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
            order = sorted(range(len(todo)), key=lambda i: -_cost_rank(todo[i][0]))  # the costliest first: no long tail
            tasks = [(todo[i][0], todo[i][1], budget_s, seed, search, prover, run.name, cross_check) for i in order]
            done = run.map(_verify_task, tasks, label="verify", progress=progress)
            out = [done[order.index(i)] for i in range(len(todo))]
        else:
            out = _verify_here(todo, budget_s=budget_s, seed=seed, progress=progress, search=search, prover=prover,
                               runner=run, cross_check=cross_check)
    return Records(out)  # a list that Jupyter shows as the report


def _cost_rank(st: Statement) -> int:
    """How costly a reading's search is: the rank of its costliest quantity's cost class (sphere expectations last)."""
    from attnbounds.theory.mathematics.quantities import QUANTITIES
    from attnbounds.theory.mathematics.quantities.spec import COSTS

    return max((COSTS[QUANTITIES[q].cost].rank for q in st.bindings.values()), default=0)


def _verify_task(args: tuple[Statement, Source, float, int, Search | None, ProverFn | None, str, float]) -> Record:
    st, source, budget_s, seed, search, prover, scheduler, cross_check = args
    return verify_statement(st, budget_s=budget_s, seed=seed, source=source, search=search, prover=prover,
                            scheduler=scheduler, cross_check=cross_check)


def _verify_here(todo: list[tuple[Statement, Source]], *, budget_s: float, seed: int, progress: bool,
                 search: Search | None, prover: ProverFn | None, runner: Runner, cross_check: float) -> list[Record]:
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
                                        runner=runner, scheduler=runner.name, cross_check=cross_check))
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return out
