"""The oracle: one property test per statement reading of the paper.

Each hypothesis example draws a structure (:func:`attnbounds.theory.mathematics.strategies.specs`: sizes, families, scales,
a seed) that respects the reading's hypotheses, builds a batch with :func:`attnbounds.theory.mathematics.families.build`,
evaluates the whole batch with the generated evaluator, and decides the instances rigorously
(:func:`tests.oracle.check.check_batch`: decide's float test, then
:func:`attnbounds.theory.deciding.certify.certify` for the closest calls): a violation counts only when it is
certified (interval arithmetic from the exact float inputs), so a bound attained with equality is
never reported violated because of rounding, and a real violation by 1e-12 is not hidden by a
tolerance. The worst relative margin goes to ``hypothesis.target`` so the search climbs towards
violations.

Expectation readings: exact enumeration of the random subsets when there are at most 4096,
otherwise Monte Carlo with a Hoeffding interval; a violation needs the whole interval below the
bound. The level is family-wise over the run (Bonferroni, see
:func:`tests.oracle.check.mc_level`).

Refuted readings: a reading with a certified counterexample file (``theory/data/counterexamples``) is a
strict xfail naming that file, and the counterexample is replayed first through ``@example``; if it
no longer violates, the test fails (STALE). A certified violation found by the search in a reading
without a file fails the test (VIOLATED): run ``python -m tests.oracle.refresh``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sympy as sp
from hypothesis import example, given, settings

from attnbounds.theory.mathematics import families, registry, strategies
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import RatioNormaliser, l_sym, make
from attnbounds.theory.mathematics.statement import Statement, conjuncts

from attnbounds.pytest_plugin import ReadingStats
from attnbounds.theory.io.counterexamples import Counterexample
from attnbounds.theory.io.counterexamples import stored as stored_counterexample
from attnbounds.theory.io.counterexamples import recertify
from tests.oracle.check import CertifiedViolation, check_batch, mc_level


class StaleCounterexample(AssertionError):
    """A stored counterexample no longer certifies as a violation."""


def _param(statement: Statement) -> Any:
    cert = recertify(statement.id)
    if cert is None or cert.status != "violated":
        return pytest.param(statement.id, id=statement.id)  # no file, or a stale one (the test fails)
    reason = (f"refuted: certified counterexample theory/data/counterexamples/{statement.id}.json "
              f"(margin in [{float(cert.margin_lo):.6g}, {float(cert.margin_hi):.6g}])")
    return pytest.param(statement.id, id=statement.id,
                        marks=pytest.mark.xfail(strict=True, raises=CertifiedViolation, reason=reason))


def _run(statement: Statement, stats: ReadingStats) -> None:
    cx = stored_counterexample(statement.id)
    level = mc_level(settings.default.max_examples)

    def check(case: families.Spec | Instance) -> None:
        if isinstance(case, Instance):  # the stored counterexample, replayed as it is
            try:
                check_batch(statement, case, stats, targeting=False)
            except CertifiedViolation as found:
                stats.replay = "violated"
                c = found.certificate
                how = f"statistical ({c.method}, level {c.level})" if c.statistical else f"certified ({c.method})"
                stats.notes.append(f"replay {how}: margin in [{c.margin_lo_text}, {c.margin_hi_text}]")
                raise
            stats.replay = "not violated"
            raise StaleCounterexample(f"{cx.relpath} no longer violates {statement.id}; "
                                      "rerun python -m tests.oracle.refresh")
        inst = families.build(statement, case)
        if statement.kind == "expectation":
            inst = inst.with_params(mc_level=level)
        stats.examples += 1
        check_batch(statement, inst, stats)

    test = given(case=strategies.specs(statement))(check)
    if cx is not None:
        stats.counterexample = cx.relpath
        test = example(case=cx.instance)(test)
    test.hypothesis.inner_test._hypothesis_internal_add_digest = statement.id.encode()  # one database key per reading
    test()


@pytest.mark.parametrize("statement_id", [_param(s) for s in registry.all_statements()])
def test_reading(statement_id: str, request: pytest.FixtureRequest) -> None:
    """The reading survives the search, or (refuted readings) its certified counterexample replays."""
    statement = registry.get(statement_id)
    stats = ReadingStats(statement_id, statement.kind)
    start = time.perf_counter()
    try:
        _run(statement, stats)
    finally:
        stats.seconds = time.perf_counter() - start
        request.node.user_properties.append(stats.as_property())


# -- outside the hypotheses -------------------------------------------------------------------------
def _renormalised(inst: Instance, normaliser: Any) -> Instance:
    """The same logits, token vectors, selection and parameters under another normaliser."""
    return Instance.from_logits(inst.logits, normaliser, x=inst.x, N=inst.N, q=inst.q, k=inst.k,
                                selection=inst.selection, arrays=inst.arrays, **inst.params)


def _named_softmax(inst: Instance) -> Instance:
    """A normaliser named "softmax" whose log F is 5 l / T: the name does not make it softmax."""
    T = sp.Symbol("T", positive=True)
    return _renormalised(inst, RatioNormaliser("softmax", 5 * l_sym / T, {"T": inst.params["T"]}))


def _logits_not_from_qk(inst: Instance) -> Instance:
    """The same query and keys with logits that are not their products."""
    own = set(inst.normaliser.params)
    return Instance.from_logits(inst.logits + 0.5, inst.normaliser, x=inst.x, N=inst.N, q=inst.q, k=inst.k,
                                selection=inst.selection, arrays=inst.arrays,
                                **{k_: v for k_, v in inst.params.items() if k_ not in own})


def _bottom_n(inst: Instance) -> Instance:
    """Select the N smallest weights instead of the N largest."""
    order = np.argsort(inst.alpha, axis=-1, kind="stable")[:, : inst.N]
    mask = np.zeros(inst.alpha.shape, dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return Instance.from_logits(inst.logits, inst.normaliser, x=inst.x, N=inst.N, q=inst.q, k=inst.k,
                                selection=mask, arrays=inst.arrays, **inst.params)


#: hypothesis id -> (spec changes for the base instance, how to break the hypothesis on it)
BREAKERS: dict[str, tuple[dict[str, Any], Any]] = {
    "F-positive": ({}, lambda inst: _renormalised(inst, make("sparsemax", T=1.0))),
    "F-length-independent": ({}, lambda inst: _renormalised(inst, make("ssmax", T=1.0))),
    "softmax": ({}, _named_softmax),
    "logits-qk": ({}, _logits_not_from_qk),
    "simplex": ({}, lambda inst: _renormalised(inst, make("sigmoid", T=1.0))),
    "logits-bounded": ({}, lambda inst: inst.with_params(a=0.5 * np.abs(inst.logits).max(-1))),
    "top-N": ({}, _bottom_n),
    "L>=2": ({"L": 1, "N": 1}, lambda inst: inst),
    "assumptions-1-2": ({}, lambda inst: inst.with_params(delta=3 * inst.param("M"))),
    "domain(T)": ({}, lambda inst: inst.with_params(T=2 * inst.param("T"))),  # not the normaliser's temperature
    "domain(eps)": ({}, lambda inst: inst.with_params(eps=0.0)),
    "domain(H)": ({}, lambda inst: inst.with_params(H=2.5)),
    "domain(p)": ({}, lambda inst: inst.with_params(p=1.5)),
    "domain(M)": ({}, lambda inst: inst.with_params(M=-inst.param("M"))),
    "domain(delta)": ({}, lambda inst: inst.with_params(delta=-0.1 * inst.param("M"))),
    "domain(r)": ({}, lambda inst: inst.with_params(r=0.0)),
    "domain(a)": ({}, lambda inst: inst.with_params(a=-1.0)),
    "domain(kappa)": ({}, lambda inst: inst.with_params(kappa=0.0)),
    "domain(C_H)": ({}, lambda inst: inst.with_params(C_H=-16.0)),
    "unit-direction": ({}, lambda inst: Instance.from_logits(inst.logits, inst.normaliser, N=inst.N,
                                                             arrays={"v": 2 * inst.arrays["v"]}, **inst.params)),
}


def _base_spec(statement: Statement, **changes: Any) -> families.Spec:
    fields = dict(B=4, L=6, N=2, d=3, normaliser=families.admissible_normalisers(statement)[0], x_scale=2.0, seed=7)
    return families.Spec(**{**fields, **changes})


#: hypotheses no instance can break, with the reason (checked below)
UNBREAKABLE = {
    "domain(L)": "every instance has a token: Instance refuses an empty row",
    "domain(N)": "Instance refuses N outside [1, L]",
    "independent-heads": "by construction: the coverage enumerates the outcomes of independent heads",
}


def test_unbreakable_hypotheses_cannot_be_broken() -> None:
    from attnbounds.theory.mathematics.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        Instance.from_logits(np.zeros((1, 0)), make("softmax"))
    with pytest.raises(InvalidArgument, match="N must be an integer in"):
        Instance.from_logits(np.zeros((1, 3)), make("softmax"), N=4)
    heads = registry.get("multihead")
    inst = Instance.from_weights(np.full((1, 2), 0.5), p=0.3, H=2.0)
    assert heads.evaluate(inst).applicable.all()


@pytest.mark.parametrize("statement_id,hypothesis_id",
                         [(s.id, h.id) for s in registry.all_statements() for h in s.hypotheses])
def test_outside_a_hypothesis_the_reading_is_not_applicable(statement_id: str, hypothesis_id: str) -> None:
    """Break one hypothesis: the reading is NOT-APPLICABLE there (NaN, never silently evaluated, decided or certified)."""
    from attnbounds.theory.deciding.certify import certify, decide

    statement = registry.get(statement_id)
    if hypothesis_id in UNBREAKABLE:
        return
    assert hypothesis_id in BREAKERS, f"no instance breaking hypothesis {hypothesis_id!r}: add one to BREAKERS"
    changes, breaker = BREAKERS[hypothesis_id]
    base = families.build(statement, _base_spec(statement))
    assert statement.evaluate(base).applicable.all(), "the base instance must satisfy every hypothesis"
    broken = breaker(families.build(statement, _base_spec(statement, **changes)))
    ev = statement.evaluate(broken)
    assert not ev.applicable.any()
    assert all(hypothesis_id in failed for failed in ev.failed_hypotheses)
    assert np.isnan(ev.margin).all() and np.isnan(ev.lhs).all() and not ev.violated.any()
    assert set(decide(statement, broken)) == {"not-applicable"}
    assert certify(statement, broken, 0).status == "not-applicable"


def _lemma1_family(normaliser: Any, L: int) -> Instance:
    """One logit at +1, the others at -1: every logit in [-a, a] with a = 1."""
    logits = np.full((1, L), -1.0)
    logits[0, 0] = 1.0
    return Instance.from_logits(logits, normaliser)


def test_length_aware_normaliser_escapes_lemma1() -> None:
    """Scalable softmax (F depends on L): L * max alpha grows without bound, while softmax keeps it <= C2 = e^2."""
    from attnbounds.theory.deciding.certify import decide

    lemma1 = registry.get("lemma1")
    lengths = [2**k for k in range(1, 13)]
    ssmax = [_lemma1_family(make("ssmax", s=0.4, T=1.0), L) for L in lengths]
    softmax = [_lemma1_family(make("softmax", T=1.0), L) for L in lengths]
    scaled = np.array([L * inst.alpha.max() for L, inst in zip(lengths, ssmax)])
    assert np.all(np.diff(scaled) > 0) and scaled[-1] > 100 * scaled[0]  # ~ L^0.8: no constant C2 bounds it
    assert max(L * inst.alpha.max() for L, inst in zip(lengths, softmax)) <= np.exp(2.0)
    for inst in ssmax:
        ev = lemma1.evaluate(inst)
        assert not ev.applicable.any() and "F-length-independent" in ev.failed_hypotheses[0]
    for inst in softmax:
        assert "violated" not in set(decide(lemma1, inst))


@pytest.mark.parametrize("name", ["sparsemax", "relu", "entmax15"])
def test_zero_weights_escape_lemma1(name: str) -> None:
    """Sparse normalisers give exact zeros, so no C1 > 0 has C1 / L <= alpha_i; Lemma 1 does not apply to them."""
    lemma1 = registry.get("lemma1")
    logits = np.array([[4.0, 1.0, -0.5, -2.0, -3.0]])
    inst = Instance.from_logits(logits, make(name, T=1.0))
    assert inst.alpha.min() == 0.0 and np.isclose(inst.alpha.sum(), 1.0)
    ev = lemma1.evaluate(inst)
    assert not ev.applicable.any() and "F-positive" in ev.failed_hypotheses[0]


# -- rigorous comparison: equality is not a violation, 1e-12 is ---------------------------------------
def _shifted(statement: Statement, eps: sp.Expr) -> Statement:
    """The reading with every conjunct tightened by ``eps`` (``lhs + eps <= rhs``)."""
    parts = [sp.Le(c.lhs + eps, c.rhs) for c in conjuncts(statement.relation)]
    return Statement(f"{statement.id}{{-{eps}}}", statement.title, sp.And(*parts) if len(parts) > 1 else parts[0],
                     statement.citation, statement.hypotheses, statement.bindings, statement.defaults, statement.kind,
                     statement.expectation_over)


def _equality_cases() -> dict[str, Instance]:
    """Instances where a reading holds with equality in exact arithmetic."""
    ident = registry.get("theorem1.fixed[R1,g1]")
    tie = np.zeros((3, 2))
    return {
        # all token vectors equal: dtilde_R1 = ((L - N) abar - (1 - abar)) ||u|| = g1 exactly
        "theorem1.fixed[R1,g1]": families.build(ident, families.Spec(B=12, L=9, N=3, d=3, embeddings="identical",
                                                                     logits="gaussian", seed=1)),
        # the enumeration of the 2^H head outcomes sums to 1 - (1 - p)^H exactly
        "multihead": Instance.from_weights(np.ones((12, 1)), p=np.linspace(0.05, 0.95, 12), H=np.arange(1, 13) % 7 + 1),
        # two tied logits: d alpha_1 / d l_1 = alpha (1 - alpha) / T = 1 / (4T)
        "corollary3[entry,corrected]": Instance.from_logits(tie, make("softmax", T=np.array([1.0, 0.1, 3.0]))),
        # all logits 0, so a = 0: alpha_i = 1/5 = C1 / L = C2 / L (the float weights 0.2 are not 1/5)
        "lemma1": Instance.from_logits(np.zeros((3, 5)), make("exp_poly", b=0.1, T=1.0)),
    }


@pytest.mark.parametrize("statement_id", sorted(_equality_cases()))
def test_a_bound_attained_with_equality_is_not_reported_violated(statement_id: str) -> None:
    from attnbounds.theory.deciding.certify import decide

    statement, inst = registry.get(statement_id), _equality_cases()[statement_id]
    status = decide(statement, inst)
    assert "violated" not in set(status) and "not-applicable" not in set(status), status


@pytest.mark.parametrize("statement_id", sorted(_equality_cases()))
def test_a_violation_by_1e_12_is_reported(statement_id: str) -> None:
    from attnbounds.theory.deciding.certify import decide

    statement = _shifted(registry.get(statement_id), sp.Rational(1, 10**12))
    status = decide(statement, _equality_cases()[statement_id])
    assert set(status) == {"violated"}, status


# -- the replay of stored counterexamples ---------------------------------------------------------------
def _replaying(monkeypatch: pytest.MonkeyPatch, statement: Statement, inst: Instance) -> ReadingStats:
    fake = Counterexample(statement.id, Path("theory/data/counterexamples/fake.json"), inst, {})
    monkeypatch.setattr(sys.modules[__name__], "stored_counterexample", lambda statement_id: fake)
    return ReadingStats(statement.id)


def test_a_stored_counterexample_replays_as_the_expected_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    statement = registry.get("corollary3[entry]")  # two tied logits at T = 0.1: 1/(4T) = 2.5 > min(1/(4T), sqrt 2)
    stats = _replaying(monkeypatch, statement, Instance.from_logits(np.zeros((1, 2)), make("softmax", T=0.1)))
    with pytest.raises(CertifiedViolation):
        _run(statement, stats)
    assert stats.replay == "violated" and stats.examples == 0


def test_a_counterexample_that_stops_violating_fails_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    statement = registry.get("corollary3[entry]")
    stats = _replaying(monkeypatch, statement, Instance.from_logits(np.zeros((1, 2)), make("softmax", T=1.0)))
    with pytest.raises(StaleCounterexample, match="no longer violates"):
        _run(statement, stats)
    assert stats.replay == "not violated"
