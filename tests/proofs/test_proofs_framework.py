"""The checker cannot pass everything: broken identities, z3 goals, citations, conclusions and witnesses fail;
premises must be declared hypotheses of the targets, and the conclusion must follow from the steps (issue 14)."""

from dataclasses import replace

import numpy as np
import pytest
import sympy as sp

from attnbounds import proofs
from attnbounds.proofs.framework import (Assume, Cite, Conclude, Derivation, Identity, Prose, Psd, Sign, Witness, Z3,
                                         reals)
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax

a, b = sp.symbols("a b", nonnegative=True)
u, v = sp.symbols("u v")
abar_N, d_1, dtilde, jac, T, eps, R = reals("abar_N d_1 dtilde J_norm T eps R")


def test_identity_detects_a_wrong_identity():
    assert Identity("ok", (a + b) ** 2, a**2 + 2 * a * b + b**2).check()[0]
    ok, why = Identity("wrong", (a + b) ** 2, a**2 + b**2).check()
    assert not ok and "does not simplify to 0" in why


def test_identity_refuses_nonlinear_use_of_vectors():
    ok, why = Identity("(u + v)^2 is not a vector expression", (u + v) ** 2, u**2 + 2 * u * v + v**2,
                       vectors=(u, v)).check()
    assert not ok and "not linear" in why
    assert Identity("linear", a * (u - v) + a * v, a * u, vectors=(u, v)).check()[0]


def test_z3_proves_true_goals_and_reports_a_countermodel():
    assert Z3("AM-GM", sp.Le(a * b, ((a + b) / 2) ** 2)).check()[0]
    ok, why = Z3("false", sp.Le(a * b, a)).check()
    assert not ok and "countermodel" in why


def test_z3_ignores_sympy_assumptions():
    """A symbol declared positive is not a premise: a - b <= a needs b >= 0 stated."""
    goal = sp.Le(a - b, a, evaluate=False)  # sympy alone would call it True from the declaration
    assert not Z3("b >= 0 only assumed", goal).check()[0]
    assert Z3("b >= 0 given", goal, (sp.Ge(reals("b"), 0),)).check()[0]


def test_sign_and_psd():
    assert Sign("square", a**2 + 1, ">0").check()[0]
    assert not Sign("not signed", a - b).check()[0]
    assert Psd("psd", sp.Matrix([[1, 0], [0, 2]])).check()[0]
    assert not Psd("indefinite", sp.Matrix([[1, 2], [2, 1]])).check()[0]


def test_cite_checks_its_rule_and_side_conditions():
    assert Cite("triangle", "fine").check()[0]
    ok, why = Cite("wishful-thinking", "not a classical fact").check()
    assert not ok and "unknown classical fact" in why
    ok, why = Cite("triangle", "with a false side condition", (Z3("false", sp.Le(a, a - 1)),)).check()
    assert not ok and "side condition failed" in why


def test_prose_is_counted_not_checked():
    assert Prose("trust me").check() == (None, "prose only")


def _broken(derivation: Derivation, index: int, step) -> Derivation:
    steps = list(derivation.steps)
    steps[index] = step
    return replace(derivation, steps=tuple(steps))


def _index(derivation: Derivation, kind: type, **attrs) -> int:
    return next(k for k, s in enumerate(derivation.steps)
                if isinstance(s, kind) and all(getattr(s, n, None) == v for n, v in attrs.items()))


def test_a_wrong_identity_in_a_real_derivation_fails_its_replay():
    d = proofs.get("theorem1.fixed[R1,g1]")
    k = _index(d, Identity)
    wrong = replace(d.steps[k], rhs=d.steps[k].rhs + a * u)  # an extra term: no longer an identity
    rep = _broken(d, k, wrong).replay()
    assert not rep.ok and rep.result == "FAILED" and rep.failures[0].kind == "identity"


def test_a_prose_step_makes_a_derivation_proved_only_modulo_prose():
    d = proofs.get("theorem1.fixed[R1,g1]")
    k = _index(d, Identity)  # a vector identity: no scalar result the chain needs
    rep = _broken(d, k, Prose("the pairing identity, in words")).replay()
    assert rep.ok and not rep.complete and rep.result == "PROVED MODULO PROSE" and rep.prose == 1


def _conclude(relation, bindings=None, **kw):
    return Conclude(relation, bindings or {"dtilde": "dtilde_R1", "abar_N": "abar_N", "d_1": "d_1",
                                           "max_norm": "max_norm"}, **kw)


G1 = proofs.get("theorem1.fixed[R1,g1]").steps[-1].relation.rhs


def test_conclusion_needs_a_bound_at_least_as_strong_as_the_statement():
    assert _conclude(sp.Le(dtilde, G1)).check_target("theorem1.fixed[R1,g1]", ())[0]
    ok, why = _conclude(sp.Le(dtilde, G1 + d_1)).check_target("theorem1.fixed[R1,g1]", ())
    assert not ok and "no derived inequality implies" in why
    # a stronger derived bound implies the statement (z3 orders them) only from facts that say abar_N d_1 >= 0
    stronger = _conclude(sp.Le(dtilde, G1 - abar_N * d_1))
    assert not stronger.check_target("theorem1.fixed[R1,g1]", ())[0]
    assert stronger.check_target("theorem1.fixed[R1,g1]", (), (sp.Ge(abar_N, 0), sp.Ge(d_1, 0)))[0]


def test_conclusion_checks_bindings_and_hypotheses():
    ok, why = _conclude(sp.Le(dtilde, G1), {"dtilde": "dtilde_R2", "abar_N": "abar_N", "d_1": "d_1",
                                             "max_norm": "max_norm"}).check_target("theorem1.fixed[R1,g1]", ())
    assert not ok and "bound to quantity 'dtilde_R1'" in why
    ok, why = _conclude(sp.Le(dtilde, G1)).check_target("theorem1.fixed[R1,g1]", ("softmax",))
    assert not ok and "does not state" in why


def test_a_step_using_an_unstated_hypothesis_fails_the_conclusion():
    d = proofs.get("lemma2[sharp]")
    rep = _broken(d, 0, Cite("triangle", "assumes softmax", uses=("softmax",))).replay()
    assert not rep.ok and any("does not state" in s.detail for s in rep.failures)


def test_a_violating_witness_fails_loudly():
    # the printed Corollary 3 bound 1/(4T) is below the spectral norm 1/(2T) at L = 2, equal logits
    w = Witness("tied logits", lambda: [Instance.from_logits(np.zeros((1, 2)), softmax(T=0.3))])
    ok, why = w.check_target("corollary3[spectral]")
    assert not ok and "VIOLATION" in why


def test_a_witness_that_does_not_attain_fails():
    w = Witness("distinct logits", lambda: [Instance.from_logits(np.array([[0.0, 3.0]]), softmax(T=1.0))])
    ok, why = w.check_target("corollary3[spectral,corrected]")
    assert not ok and "NOT attained" in why
    w = replace(w, mode="approached")
    assert not w.check_target("corollary3[spectral,corrected]")[0]


def test_a_derivation_must_end_with_a_conclusion():
    from attnbounds.theory.mathematics.errors import AttnBoundsError

    with pytest.raises(AttnBoundsError, match="final step"):
        Derivation("x", ("lemma1",), "no conclusion", (Prose("..."),))


def test_conclusion_with_facts():
    c = Conclude(sp.Le(jac, R), {"J_norm": "J_entry"})
    facts = (sp.Le(R * T, sp.Rational(1, 4)), sp.Gt(T, 0))
    assert c.check_target("corollary3[entry,corrected]", ("softmax",), facts)[0]
    assert not c.check_target("corollary3[entry,corrected]", ("softmax",), facts[:1])[0]  # T > 0 is needed
    assert not c.check_target("corollary3[entry,corrected]", ("softmax",), (sp.Le(R * T, sp.Rational(1, 2)), facts[1]))[0]


# -- issue 14: every premise declared, conclusions chained -----------------------------------------------
def test_the_conclusion_must_follow_from_the_steps():
    """Drop the mean-value step: the derived relation no longer follows from what remains."""
    d = proofs.get("corollary3[fd,corrected]")
    rep = replace(d, steps=tuple(s for s in d.steps if getattr(s, "rule", None) != "mean-value")).replay()
    assert not rep.ok and any("does not follow from the earlier steps" in f.detail for f in rep.failures)


def test_a_premise_must_come_from_a_hypothesis_or_an_earlier_step():
    """Without its eps > 0 premise the fd derivation fails: eps > 0 is not assumed from a symbol's declaration."""
    d = proofs.get("corollary3[fd,corrected]")
    rep = replace(d, steps=tuple(s for s in d.steps if getattr(s, "hypothesis", None) != "domain(eps)")).replay()
    assert not rep.ok and any("relies on eps > 0" in f.detail for f in rep.failures)


def test_a_premise_needs_the_hypothesis_on_the_target_and_follows_from_its_formula():
    ok, why, _ = Assume("eps > 0", sp.Gt(eps, 0), "domain(eps)").check_target("corollary3[spectral,corrected]")
    assert not ok and "does not state hypothesis" in why
    ok, why, checked = Assume("eps > 1", sp.Gt(eps, 1), "domain(eps)").check_target("corollary3[fd,corrected]")
    assert not ok and checked and "does not follow" in why
    ok, _, checked = Assume("eps >= 0", sp.Ge(eps, 0), "domain(eps)").check_target("corollary3[fd,corrected]")
    assert ok and checked


def test_a_formula_that_sympy_decides_on_construction_is_refused():
    """sp.Gt(T, 0) with T declared positive is already True: it would state nothing."""
    T_pos = sp.Symbol("T", positive=True)
    with pytest.raises(AttnBoundsError, match="evaluated to True"):
        Derivation("x", ("corollary3[entry,corrected]",), "collapsed premise",
                   (Assume("T > 0", sp.Gt(T_pos, 0), "domain(T)"), Conclude(sp.Le(jac, 1 / (4 * T)), {"J_norm": "J_entry"})))


def test_sign_steps_declare_the_signs_they_assume():
    """A Sign check on a positive symbol needs that sign as a fact of the chain."""
    T_pos = sp.Symbol("T", positive=True)
    step = Sign("1/T > 0", 1 / T_pos, ">0")
    assert step.check()[0] and [sp.sstr(n) for n in step.needs] == ["T > 0"]
    d = Derivation("x", ("corollary3[entry,corrected]",), "sign without premise",
                   (step, Conclude(sp.Le(jac, 1 / (4 * T)), {"J_norm": "J_entry"})))
    assert any("relies on T > 0" in f.detail for f in d.replay().failures)


def test_size_limited_checks_are_counted_apart():
    d = Derivation("x", ("corollary3[entry,corrected]",), "a size-limited identity",
                   (Identity("three tokens", a + b, b + a, sizes="three tokens"),
                    Z3("trivial", sp.Le(jac, jac, evaluate=False)),
                    Conclude(sp.Le(jac, jac, evaluate=False), {"J_norm": "J_entry"})))
    rep = d.replay()
    assert rep.size_limited == 1 and rep.summary()["size_limited_steps"] == ["three tokens [three tokens]"]
    assert rep.checked == 2  # the z3 step and the conclusion; the size-limited identity is not among them


SMALL_SIZE_STEPS_MADE_GENERAL = ("lemma2.sharp.loewner", "corollary3.softmax.frobenius", "corollary3.softmax.row",
                                 "theorem1.random.R1.jensen-gap", "multihead.independence")


@pytest.mark.parametrize("name", SMALL_SIZE_STEPS_MADE_GENERAL)
def test_jacobian_frobenius_psd_variance_and_multihead_steps_hold_for_every_size(name):
    """The Jacobian and Frobenius formulas, the PSD identity, the variance formula and the multi-head sum
    are checked for symbolic sizes: no step of these derivations is size-limited."""
    d = next(d for d in proofs.all_derivations() if d.name == name)
    assert d.replay().size_limited == 0


def test_the_sizes_left_are_named_in_the_record_summary():
    rep = proofs.replay("theorem2.upper[full,corrected]")
    assert rep.size_limited == 1 and "three vectors in R^3" in rep.summary()["size_limited_steps"][0]
    assert "checked only at the sizes named" in rep.rests_on()


def test_cited_facts_are_named_for_what_they_are():
    def rules(sid: str) -> set:
        return {getattr(s, "rule", None) for s in proofs.get(sid).steps}

    assert "exchangeability" in rules("theorem2.upper[full,corrected]")
    assert "symmetry" not in rules("theorem2.upper[full,corrected]")
    assert "simplex-diameter" in rules("corollary3[fd,corrected]") and "triangle" not in rules("corollary3[fd,corrected]")
    psd = [s for s in proofs.get("lemma2[sharp]").steps if "sum-of-squared-differences" in s.text]
    assert len(psd) == 1 and isinstance(psd[0], Z3)
    assert "cauchy-schwarz" not in {getattr(s, "rule", None) for s in proofs.get("lemma2[sharp]").steps
                                    if "alpha alpha^T) w" in s.text}


@pytest.mark.parametrize("derivation", proofs.all_derivations(), ids=lambda d: d.name)
def test_every_premise_is_a_hypothesis_of_every_target(derivation):
    from attnbounds.theory.mathematics import registry

    rep = derivation.replay()
    for target in derivation.targets:
        hyps = {h.id for h in registry.get(target).hypotheses}
        assert {p["hypothesis"] for p in rep.restrict(target).premises} <= hyps
        assert set(derivation.uses) <= hyps


def test_sample_sum_variance_formula_matches_enumeration():
    """The variance the jensen-gap derivation uses, N (n-N)/(n-1) sigma^2, against every N-subset enumerated."""
    from itertools import combinations

    rng = np.random.default_rng(0)
    for n in range(2, 7):
        for N in range(1, n + 1):
            y = rng.standard_normal(n)
            sums = np.array([y[list(c)].sum() for c in combinations(range(n), N)])
            sigma2 = (y**2).mean() - y.mean() ** 2
            want = N * (n - N) / (n - 1) * sigma2 * (n > 1)
            assert np.isclose(sums.var(), want, rtol=1e-12, atol=1e-12), (n, N)
