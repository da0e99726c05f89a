"""The oracle's check of one batch, and a hypothesis search for certified violations built on it.

A test instrument, shared by the property tests (``tests/oracle/test_oracle.py``) and the counterexample refresh
(:mod:`tests.oracle.refresh`), so that a stored counterexample is found by exactly the check the tests replay.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, assume, given, settings, target
from hypothesis import seed as hypothesis_seed

from attnbounds.theory.mathematics import families, registry, strategies
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.io.serialize import instance_to_json
from attnbounds.theory.deciding.margins import relative_margin, relative_margins
from attnbounds.theory.mathematics.statement import Evaluation, Statement

def register_profiles(database_dir: str | None = None) -> None:
    """Register the hypothesis profiles of the oracle (select one with ``--hypothesis-profile`` or
    ``ATTNBOUNDS_PROFILE``):

    - ``ci``: derandomised, no example database, bounded examples, so a run is reproducible and its
      verdicts cannot come from examples saved by an earlier run;
    - ``thorough``: random seeds, many examples, an example database (``database_dir``, default
      ``.hypothesis/examples``; failures are replayed first next time) and targeting.
    """
    import os

    from hypothesis.database import DirectoryBasedExampleDatabase

    common: dict[str, Any] = dict(deadline=None, print_blob=True, suppress_health_check=(HealthCheck.too_slow, HealthCheck.data_too_large))
    settings.register_profile("ci", derandomize=True, database=None, max_examples=30,
                              phases=(Phase.explicit, Phase.generate, Phase.target, Phase.shrink), **common)
    settings.register_profile("thorough", max_examples=400, phases=tuple(Phase), **common,
                              database=DirectoryBasedExampleDatabase(database_dir or os.path.join(".hypothesis",
                                                                                                  "examples")))


#: at most this many instances per batch go through interval certification (most negative float margin first)
CERTIFY_PER_EXAMPLE = 8
#: family-wise probability that any Monte Carlo check of a test run reports a false violation
MC_FAMILY_LEVEL = 1e-3


class CertifiedViolation(AssertionError):
    """An instance the certifier found violating the reading (the expected failure of a refuted one)."""

    spec: dict[str, Any]  # set by the property test: the (shrunk) structure that produced it
    def __init__(self, statement: Statement, inst: Instance, index: int, certificate: Any):
        self.statement, self.instance, self.index, self.certificate = statement, inst.take(index), index, certificate
        c = certificate
        kind = f"statistical ({c.method}, level {c.level})" if c.statistical else f"certified ({c.method})"
        super().__init__(
            f"{statement.id}: {kind} violation on instance {index} of {inst.B}: margin rhs - lhs in "
            f"[{c.margin_lo_text}, {c.margin_hi_text}], lhs {c.lhs}, rhs {c.rhs}\n{statement.formula}\n"
            f"instance (theory.serialize): {json.dumps(instance_to_json(self.instance))}")


def mc_level(max_examples: int) -> float:
    """Per-interval level of the Monte Carlo checks of a test run: Bonferroni over every interval it can build.

    Each expectation reading evaluates at most ``max_examples + 1`` batches (the generated examples
    and the replay) of at most ``max_batch`` instances, one interval each, before its first
    violation stops the search; so the probability that any interval of the run misses its true
    value, hence that any reported Monte Carlo violation is false, is at most :data:`MC_FAMILY_LEVEL`.
    """
    expectation = [s for s in registry.all_statements() if s.kind == "expectation"]
    max_batch = max(strategies.size_limits(s)[1] for s in expectation)
    return MC_FAMILY_LEVEL / (len(expectation) * (max_examples + 1) * max_batch)


def decide_budgeted(statement: Statement, inst: Instance, ev: Evaluation) -> tuple[np.ndarray, dict[int, Any]]:
    """Per-instance status as :func:`attnbounds.theory.deciding.certify.decide` gives it, with a budget on certification.

    Relative margins clearly above 0 (``> BAND`` at the lower end of a Monte Carlo interval, decide's own
    test) are "holds"; of the others, the :data:`CERTIFY_PER_EXAMPLE` with the most negative margin relative
    to the magnitude are certified, the rest are "unchecked" (counted, never a verdict either way).
    Returns the statuses and the certificates by instance index.
    """
    from attnbounds.theory.deciding.certify import BAND, certify

    status = np.full(inst.B, "not-applicable", dtype=object)
    app = np.flatnonzero(ev.applicable)
    if not app.size:
        return status, {}
    rel = np.asarray(relative_margins(statement, inst, ev, pessimistic=True))[app]
    rel = np.where(np.isfinite(rel), rel, -np.inf)
    clear = rel > BAND
    status[app[clear]] = "holds"
    pending = app[~clear][np.argsort(rel[~clear], kind="stable")]
    certificates = {int(b): certify(statement, inst, int(b)) for b in pending[:CERTIFY_PER_EXAMPLE]}
    for b, cert in certificates.items():
        status[b] = cert.status
    status[pending[CERTIFY_PER_EXAMPLE:]] = "unchecked"
    return status, certificates


def record(stats: Any, ev: Evaluation, status: np.ndarray, certified: np.ndarray) -> None:
    """Add one batch to a :class:`attnbounds.pytest_plugin.ReadingStats` (ratios over decided instances only).

    Ratios and relative margins are float64; where a certificate proved the bound holds, they are
    clipped to what it proves (ratio <= 1, margin >= 0), since the float numbers there are rounding.
    """
    ok = ev.applicable
    stats.instances += int(ok.sum())
    stats.not_applicable += int((~ok).sum())
    stats.violated += int((status == "violated").sum())
    stats.inconclusive += int((status == "inconclusive").sum())
    stats.unchecked += int((status == "unchecked").sum())
    decided = (status == "holds") | (status == "violated")  # ratios of undecided near-equalities are rounding noise
    if not decided.any():
        return
    lhs, rhs = ev.lhs[decided], ev.rhs[decided]
    proved = (certified & (status == "holds"))[decided]
    rel = relative_margin(lhs, rhs)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(rhs > 0, lhs / rhs, -np.inf)
    rel = np.where(proved, np.maximum(rel, 0.0), rel)
    ratio = np.where(proved, np.minimum(ratio, 1.0), ratio)
    if not np.isnan(ratio).all():  # both sides infinite or undefined: no ratio, no margin to report
        stats.worst_ratio = max(stats.worst_ratio, float(np.nanmax(ratio)))
    if not np.isnan(rel).all():
        stats.worst_rel_margin = min(stats.worst_rel_margin, float(np.nanmin(rel)))


def check_batch(statement: Statement, inst: Instance, stats: Any = None, *, targeting: bool = True,
                want: str = "any") -> tuple[Evaluation, np.ndarray]:
    """Evaluate a batch, decide it rigorously, report to ``hypothesis.target``; raise on a certified violation.

    ``want``: ``"any"`` raises on any certified violation; ``"deterministic"`` only on one whose
    certificate is not statistical (Monte Carlo). Instances outside the hypotheses are not
    evaluated; a batch with none inside is rejected (``hypothesis.assume``) when ``targeting``.
    """
    ev = statement.evaluate(inst)
    status, certificates = decide_budgeted(statement, inst, ev)
    if stats is not None:
        record(stats, ev, status, np.isin(np.arange(inst.B), list(certificates)))
    if targeting:
        assume(ev.applicable.any())
        rel = np.asarray(relative_margin(ev.lhs, ev.rhs))[ev.applicable]
        rel = rel[np.isfinite(rel)]
        if rel.size:
            target(float(-rel.min()), label="relative violation -relative_margin(lhs, rhs)")
    hits = [(c.margin_hi, b, c) for b, c in certificates.items()
            if c.status == "violated" and (want == "any" or not c.statistical)]
    if hits:
        _, b, cert = min(hits, key=lambda h: (h[2].statistical, h[0]))
        raise CertifiedViolation(statement, inst, b, cert)
    return ev, status


def hypothesis_search(statement: Statement, *, max_examples: int, seed: int | None, want: str = "any",
                      level: float = 1e-9) -> CertifiedViolation | None:
    """Search :func:`attnbounds.theory.mathematics.strategies.specs` for a certified violation, shrunk by hypothesis; None if none.

    ``seed=None`` derandomises (the ``ci`` profile's search, exactly); otherwise a seeded random
    search. Expectation statements use Monte Carlo level ``level`` per interval.
    """
    def check(spec: families.Spec) -> None:
        inst = families.build(statement, spec)
        if statement.kind == "expectation":
            inst = inst.with_params(mc_level=level)
        try:
            check_batch(statement, inst, want=want)
        except CertifiedViolation as exc:
            exc.spec = spec.to_dict()  # the (shrunk) structure that produced it, for the record
            raise

    config = settings(max_examples=max_examples, derandomize=seed is None, database=None, deadline=None,
                      phases=(Phase.generate, Phase.target, Phase.shrink), verbosity=Verbosity.quiet,
                      suppress_health_check=tuple(HealthCheck), print_blob=False)
    test = config(given(spec=strategies.specs(statement))(check))
    if seed is not None:
        test = hypothesis_seed(seed)(test)
    test.hypothesis.inner_test._hypothesis_internal_add_digest = statement.id.encode()  # type: ignore[attr-defined]  # set by @given
    try:
        test()
    except CertifiedViolation as found:
        return found
    return None
