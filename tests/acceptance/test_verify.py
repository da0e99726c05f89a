"""Verdict logic: REFUTED needs a certified counterexample, PROVED a complete replay, contradictions are loud.

The search is replaced by ``_fakesearch`` (scripted candidates or a tiny seeded random search),
so these tests pin the verdict rules, not the search's strength.
"""

from dataclasses import dataclass

import numpy as np
import pytest
import sympy as sp

from tests._fakesearch import no_proof, random_search, scripted
from attnbounds.theory.mathematics import normalisers as nm, registry
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.io.records import Record
from attnbounds.theory.io.serialize import dumps
from attnbounds.theory.io.serialize import instance_from_json
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.running.verify import verify, verify_statement


@dataclass
class FakeReplay:
    ok: bool = True
    complete: bool = True
    checked: int = 3
    cited: int = 1
    prose: int = 0
    sharp: bool | None = True
    failures: tuple = ()

    @property
    def result(self) -> str:
        return "FAILED" if not self.ok else ("PROVED" if self.complete else "PROVED MODULO PROSE")

    def summary(self) -> dict:
        return {"checked": self.checked, "size_limited": 0, "cited": self.cited, "cited_unchecked": 0,
                "prose": self.prose, "size_limited_steps": [], "premises": [], "uses": [],
                "rests_on": f"{self.checked} checked steps, {self.cited} cited, {self.prose} prose; premises: none"}


def prover(**kw):
    return lambda sid: ("fake.derivation", FakeReplay(**kw))


def _equal_x() -> Instance:
    # all x equal: theorem1.fixed[R1,g1] holds with equality (float margin may be -2e-16)
    rng = np.random.default_rng(0)
    return Instance.from_logits(rng.standard_normal((1, 6)), nm.softmax(1.0), x=np.ones((1, 6, 3)) * 0.7, N=2)


def _violation() -> Instance:
    return Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))  # corollary3[spectral]: 1/2 > 1/4


def test_refuted_needs_a_certified_counterexample_that_replays():
    st = registry.get("corollary3[spectral]")
    rec = verify_statement(st, search=scripted([_violation()]), prover=no_proof)
    assert rec.verdict == "REFUTED" and rec.data["counterexample"]["certificate"]["status"] == "violated"
    replayed = instance_from_json(rec.data["counterexample"]["instance"])
    assert certify(st, replayed).status == "violated"  # the written instance is the counterexample, bit for bit


def test_float_false_alarm_at_an_equality_case_is_not_a_refutation():
    st = registry.get("theorem1.fixed[R1,g1]")
    inst = _equal_x()
    rec = verify_statement(st, search=scripted([inst], best=inst), prover=no_proof)
    assert rec.verdict == "VERIFIED", rec.reason
    assert rec.data["search"]["candidates"][0]["status"] in ("inconclusive", "holds")
    assert rec.data["tightness"]["equality"] is True


@pytest.mark.parametrize("expr, logits, T, equality", [
    ("alpha_max >= 1/2", [0.0, 0.0], 1.0, True),                  # exactly 0 in arb
    ("J_spectral <= 1/(2*T)", [0.0, 0.0], 1.0, True),             # |g| t = 1/2 at a tied top: exactly 0
    ("alpha_max <= 1/17", [1.0] * 17, 1.0, True),  # e / (17 e) in arb; 17 columns, beyond the exact tier: undecided
    ("alpha_max <= 1", [0.0, -3.0], 0.01, False),                 # 1 - alpha_max = e^-300 / (1 + e^-300) > 0, exactly
    ("J_frobenius <= 1/(2*T)", [29.116214014398796, 29.116214014398796, 0.0, -29.116214014398796],
     0.0006649947500516409, False)])                              # a margin of order e^-43786, decided exactly
def test_the_tightest_instance_is_an_equality_only_where_its_margin_may_be_zero(expr, logits, T, equality):
    """``tightness.equality``: lhs / rhs is 1 in float64 at all four, but a margin the exact tier decides is nonzero,
    however far below float64, is a supremum approached there, not attained (it once said equality to 1e-12)."""
    from attnbounds.theory.running import api

    st = api.statement(expr, hypotheses=["softmax"], id="tight").statements[0]
    inst = Instance.from_logits(np.array([logits]), nm.softmax(T))
    rec = verify_statement(st, search=scripted([], best=inst, ratio=1.0), prover=no_proof, source="user")
    assert rec.data["tightness"]["equality"] is equality, rec.data["tightness"]["certificate"]


def test_proved_needs_a_complete_replay():
    st = registry.get("lemma2[sharp]")  # a derivation, and no relaxation (the slopes of every F)
    assert verify_statement(st, search=scripted([]), prover=prover()).verdict == "PROVED"
    rec = verify_statement(st, search=scripted([]), prover=prover(complete=False, prose=2))
    assert rec.verdict == "VERIFIED" and "prose" in rec.reason
    rec = verify_statement(st, search=scripted([]), prover=prover(ok=False, complete=False))
    assert rec.verdict == "VERIFIED" and "FAILED to replay" in rec.reason


@pytest.mark.parametrize("replay, cross_check, searched", [
    ({}, 0.3, 0.3 * 7), ({}, 1.0, 7.0), ({"complete": False, "prose": 2}, 0.3, 7.0),
    ({"ok": False, "complete": False}, 0.3, 7.0), (None, 0.3, 7.0)])
def test_a_replayed_derivation_makes_the_search_a_cross_check(monkeypatch, replay, cross_check, searched):
    """Only a derivation that replays completely shrinks the search to the share ``cross_check`` of the budget; the
    relaxation prover's work is bought by the whole budget either way, and the record says what the search had."""
    from attnbounds.theory.running import evidence

    seen: dict[str, float] = {}
    inner = scripted([])

    def search(st, *, budget_s, **kw):
        seen["search"] = budget_s
        return inner(st, budget_s=budget_s, **kw)

    real = evidence._relaxation
    monkeypatch.setattr(evidence, "_relaxation", lambda st, budget_s: (seen.update(prover=budget_s), real(st, 0.1))[1])
    rec = verify_statement(registry.get("lemma2[sharp]"), budget_s=7.0, search=search, cross_check=cross_check,
                           prover=no_proof if replay is None else prover(**replay))
    assert seen == {"search": pytest.approx(searched), "prover": 7.0}
    assert rec.data["search"]["budget_s"] == pytest.approx(searched)
    assert ("cross-check" in rec.reason) == (searched < 7.0), rec.reason


@pytest.mark.parametrize("cross_check", [0.3, 1.0])
def test_a_certified_counterexample_makes_the_relaxation_prover_a_cross_check(monkeypatch, cross_check):
    """Once the search's counterexample is certified the verdict is REFUTED whatever the prover finds (a proof would be
    an internal contradiction, ERROR), so the prover gets the share ``cross_check`` of the budget, and the reason
    says so; the search keeps the whole budget (it found the counterexample)."""
    from attnbounds.theory.running import evidence

    seen: dict[str, float] = {}
    inner = scripted([_violation()])

    def search(st, *, budget_s, **kw):
        seen.setdefault("search", budget_s)
        return inner(st, budget_s=budget_s, **kw)

    real = evidence._relaxation
    monkeypatch.setattr(evidence, "_relaxation", lambda st, budget_s: (seen.update(prover=budget_s), real(st, 0.1))[1])
    rec = verify_statement(registry.get("corollary3[spectral]"), budget_s=7.0, search=search, prover=no_proof,
                           cross_check=cross_check)
    assert rec.verdict == "REFUTED", rec.reason
    assert seen == {"search": 7.0, "prover": pytest.approx(7.0 * cross_check)}
    assert ("relaxation prover was a cross-check" in rec.reason) == (cross_check < 1), rec.reason


@pytest.mark.parametrize("share", [0, -0.5, 1.5, float("nan"), True, "0.3"])
def test_a_cross_check_share_outside_0_1_is_refused(share):
    with pytest.raises(AttnBoundsError, match="share of the budget in \\(0, 1\\]"):
        verify(["lemma1"], cross_check=share, search=scripted([]), prover=no_proof, progress=False)


def test_proof_contradicted_by_a_certified_counterexample_is_an_error():
    st = registry.get("corollary3[spectral]")
    rec = verify_statement(st, search=scripted([_violation()]), prover=prover())
    assert rec.verdict == "ERROR" and "internal contradiction" in rec.reason
    assert rec.data["counterexample"] is not None  # the evidence is kept


def test_candidates_that_cannot_be_certified_leave_it_undecided():
    base = registry.get("corollary3[spectral]")
    odd = Statement("test.odd", "odd", sp.Le(sp.Symbol("J_norm"), sp.gamma(sp.Symbol("T")) / 8), Citation("test"),
                    base.hypotheses, base.bindings)
    rec = verify_statement(odd, search=scripted([_violation()]), prover=no_proof, source="user")
    assert rec.verdict == "UNDECIDED" and "could not be certified" in rec.reason


def test_too_little_search_and_no_applicable_instance():
    st = registry.get("lemma2[sharp]")  # a derivation, and no relaxation (the slopes of every F)
    rec = verify_statement(st, search=scripted([], tried=5), prover=no_proof)
    assert rec.verdict == "UNDECIDED" and "too little" in rec.reason
    rec = verify_statement(st, search=scripted([], tried=500, applicable=0), prover=no_proof)
    assert rec.verdict == "NOT-APPLICABLE"


def test_a_crash_becomes_an_error_record():
    def broken(statement, **kw):
        raise RuntimeError("boom")

    rec = verify_statement(registry.get("multihead"), search=broken, prover=no_proof)
    assert rec.verdict == "ERROR" and "boom" in rec.reason and "traceback" in rec.data["timing"]


def test_statistical_refutation_is_labelled():
    st = registry.get("theorem1.random[R1,printed,mean]")
    rng = np.random.default_rng(1)
    inst = Instance.from_logits(rng.standard_normal((1, 30)), nm.softmax(1.0), x=rng.standard_normal((1, 30, 2)) + 3,
                                N=6)
    assert st.evaluate(inst).margin_hi[0] < 0
    rec = verify_statement(st, search=scripted([inst]), prover=no_proof)
    assert rec.verdict == "REFUTED" and rec.data["counterexample"]["statistical"] is True
    assert "statistical" in rec.reason


def test_same_seed_and_budget_give_identical_records_apart_from_timing():
    ids = ["theorem1.fixed[R1,g2]", "corollary3[spectral,corrected]"]
    a = verify(ids, budget_s=1, seed=3, progress=False, search=random_search, prover=no_proof)
    b = verify(ids, budget_s=1, seed=3, progress=False, search=random_search, prover=no_proof)
    for ra, rb in zip(a, b):
        da = {k: v for k, v in ra.data.items() if k != "timing"}
        db = {k: v for k, v in rb.data.items() if k != "timing"}
        assert dumps(da) == dumps(db) and ra.content_hash == rb.content_hash
        assert "search.random.seconds" in ra.data["timing"]  # clock fields moved out of the hashed part
    c = verify(ids[:1], budget_s=1, seed=4, progress=False, search=random_search, prover=no_proof)
    assert c[0].content_hash != a[0].content_hash


def test_bad_input_raises_before_running():
    calls = []

    def search(statement, **kw):
        calls.append(statement.id)
        return scripted([])(statement, **kw)

    with pytest.raises(AttnBoundsError, match="unknown statement id"):
        verify(["multihead", "no-such-reading"], search=search, progress=False)
    for bad in (-1, 0, float("nan"), "7"):
        with pytest.raises(AttnBoundsError, match="budget"):
            verify(["multihead"], budget_s=bad, search=search, progress=False)
    with pytest.raises(AttnBoundsError, match="seed"):
        verify(["multihead"], seed=-2, search=search, progress=False)
    assert calls == []


def test_records_are_valid_and_every_reading_gets_one():
    ids = registry.ids()[:6]
    recs = verify(ids, budget_s=1, search=scripted([]), prover=no_proof, progress=False)
    assert [r.id for r in recs] == ids
    for r in recs:
        assert isinstance(Record.from_json(r.to_json()), Record)


def test_search_that_cannot_build_instances_is_undecided_not_an_error():
    def refuses(statement, **kw):
        raise AttnBoundsError("no instance family provides quantity 'foo'")

    rec = verify_statement(registry.get("multihead"), search=refuses, prover=no_proof)
    assert rec.verdict == "UNDECIDED" and "could not run" in rec.reason
    assert verify_statement(registry.get("multihead"), search=refuses, prover=prover()).verdict == "PROVED"


def test_candidates_may_come_as_one_batch():
    st = registry.get("corollary3[spectral]")
    batch = Instance.from_logits(np.array([[0.0, 0.0], [0.0, 5.0]]), nm.softmax(1.0))
    rec = verify_statement(st, search=scripted(batch), prover=no_proof)
    assert rec.verdict == "REFUTED" and rec.data["counterexample"]["candidate_rank"] == 0


def test_a_candidate_the_certifier_cannot_decide_is_never_verified():
    """Inconclusive certificates that are not equality cases make the verdict UNDECIDED, whatever the reason."""
    from attnbounds.theory.mathematics.hypotheses import Hypothesis

    base = registry.get("corollary3[spectral]")
    mine = Hypothesis("mine", "a hypothesis only float can check", lambda inst: np.ones(inst.B, dtype=bool))
    uncertified = Statement("test.float-only", "float-only hypothesis", base.relation, Citation("test"),
                            (*base.hypotheses, mine), base.bindings)
    rec = verify_statement(uncertified, search=scripted([_violation()], best=_violation()), prover=no_proof)
    assert rec.verdict == "UNDECIDED" and "could not be certified" in rec.reason
    assert rec.data["search"]["candidates"][0]["status"] == "inconclusive"
    odd = Statement("test.unsupported", "unsupported", sp.Le(sp.Symbol("J_norm"), sp.Si(sp.Symbol("T"))), Citation("t"),
                    base.hypotheses, base.bindings)
    rec = verify_statement(odd, search=scripted([_violation(), _violation()]), prover=no_proof)
    assert rec.verdict == "UNDECIDED" and "2 candidate(s)" in rec.reason


def test_no_finite_margin_anywhere_is_undecided_not_verified():
    st = registry.get("lemma2[sharp]")  # a derivation, and no relaxation (the slopes of every F)
    rec = verify_statement(st, search=scripted([], best=None, tried=5000, applicable=4000), prover=no_proof)
    assert rec.verdict == "UNDECIDED" and "finite margin" in rec.reason


def test_budgets_beyond_a_day_are_refused_before_anything_runs():
    for bad in (86400.5, 1e300, 1e308, float("inf")):
        with pytest.raises(AttnBoundsError, match="at most a day"):
            verify(["multihead"], budget_s=bad, search=scripted([]), progress=False)
    assert verify(["multihead"], budget_s=86400, search=scripted([]), prover=no_proof, progress=False)[0].verdict


# -- records say what is certified and what is float only (issue 19, item 7) --------------------------------------
def _alpha_max_at_most(c: float) -> Statement:
    a = sp.Symbol("alpha_max", real=True)
    return Statement("mine.alpha-max", "alpha_max bounded", sp.Le(a, c), Citation("mine"), bindings={"alpha_max": "alpha_max"})


def test_the_smallest_violating_length_counts_certified_violations_only():
    st = _alpha_max_at_most(0.5)
    real = Instance.from_logits(np.r_[5.0, np.zeros(49)][None], nm.softmax(1.0))  # L = 50: alpha_max ~ 0.75
    tie = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))  # L = 2: alpha_max = 1/2 exactly, holds
    rec = verify_statement(st, search=scripted([real], best=real, shortest=tie), prover=no_proof)
    cx = rec.data["counterexample"]
    assert rec.verdict == "REFUTED" and cx["smallest_violating_L_seen"] == 50
    assert cx["smallest_float_violation_L_seen"]["L"] == 2
    assert cx["smallest_float_violation_L_seen"]["certificate"] == "holds"
    # a shorter float violation the certificate confirms counts
    short = Instance.from_logits(np.array([[3.0, 0.0, 0.0]]), nm.softmax(1.0))
    rec = verify_statement(st, search=scripted([real], best=real, shortest=short), prover=no_proof)
    assert rec.data["counterexample"]["smallest_violating_L_seen"] == 3
    assert "smallest_float_violation_L_seen" not in rec.data["counterexample"]


def test_a_tightest_ratio_above_one_on_a_holding_bound_is_labelled_float_only():
    st = _alpha_max_at_most(0.75)
    tight = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))  # alpha_max = 1/2: the bound holds
    rec = verify_statement(st, search=scripted(best=tight, ratio=1.00000025, margin=-1e-7), prover=no_proof)
    assert rec.verdict == "VERIFIED"
    tightness = rec.data["tightness"]
    assert tightness["certificate"]["status"] == "holds" and tightness["best_ratio"] == 1.00000025
    assert "exceeds 1 in float64 only" in tightness["float_only"]
    assert "above 1 in float64 only" in rec.reason
    rec = verify_statement(st, search=scripted(best=tight, ratio=0.67, margin=0.3), prover=no_proof)
    assert "float_only" not in rec.data["tightness"]


def test_a_tightest_instance_certified_violated_refutes_even_when_float_saw_no_violation():
    st = _alpha_max_at_most(0.75)
    hidden = Instance.from_logits(np.array([[2.0, 0.0]]), nm.softmax(1.0))  # alpha_max ~ 0.88: violated
    rec = verify_statement(st, search=scripted(best=hidden, ratio=0.99, margin=0.01), prover=no_proof)
    assert rec.verdict == "REFUTED" and rec.data["counterexample"]["certificate"]["status"] == "violated"


@pytest.mark.parametrize("T", [1e-140, 3e-90, 1e90, 1e140])
def test_a_false_jacobian_bound_at_an_extreme_temperature_is_refuted_with_finite_certified_margins(T):
    import attnbounds

    for relation in ("J_spectral <= 0.2/T", "J_frobenius <= 0.3/T"):
        r = attnbounds.check(relation, hypotheses=["softmax"], fixed={"T": T}, budget=0.5)
        assert r.verdict == "REFUTED" and r.certified, r.reason
        cert = r.counterexample["certificate"]
        assert np.isfinite(cert["margin_lo"]) and np.isfinite(cert["margin_hi"]) and cert["margin_hi"] < 0


@pytest.mark.parametrize("T", [5e-324, 1e-200, 1.7e308])
def test_temperatures_where_float64_cannot_decide_are_refused_when_loaded(T):
    import attnbounds

    with pytest.raises(AttnBoundsError, match=r"outside \[1e-150, 1e\+150\], where a search can be trusted"):
        attnbounds.check("J_spectral <= 0.2/T", hypotheses=["softmax"], fixed={"T": T}, budget=0.5)
    with pytest.raises(AttnBoundsError, match="where a search can be trusted"):
        attnbounds.check("alpha_max <= 0.9", ranges={"T": [1.0, T]} if T > 1 else {"T": [T, 1.0]}, budget=0.5)


def test_the_wall_clock_ceiling_cuts_what_is_left_and_says_so(monkeypatch):
    from attnbounds.theory.deciding.search import budget

    monkeypatch.setattr(budget, "CEILING", 0.0)
    monkeypatch.setattr(budget, "CEILING_GRACE_S", 0.0)  # the ceiling has passed when the search starts
    rec = verify(["lemma1"], budget_s=0.3, progress=False)[0]
    cut = {m: i["cut"] for m, i in rec.data["search"]["by_method"].items() if i.get("cut")}
    assert cut.get("random", 0) > 0 and "the wall-clock ceiling" in rec.reason
    assert rec.verdict in ("PROVED", "UNDECIDED")  # lemma1 is proved; the search itself did next to nothing
    assert rec.data["search"]["tried"] < 100


def test_a_candidate_without_any_certified_margin_is_undecided_saying_why_never_nan():
    st = Statement("mine.entmax", "entmax Jacobian", sp.Le(sp.Symbol("J_spectral", real=True), 0.01), Citation("mine"),
                   bindings={"J_spectral": "J_spectral"})
    inst = Instance.from_logits(np.array([[0.0, 1.0, 2.0]]), nm.Entmax15(T=1.0))  # no ball form for its Jacobian
    rec = verify_statement(st, search=scripted([inst], best=inst), prover=no_proof)
    assert rec.verdict == "UNDECIDED" and "nan" not in rec.reason
    assert "no certified margin (cannot certify: Jacobian quantities are certified for normalisers F / sum F" in rec.reason
