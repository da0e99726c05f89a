"""The checker cannot pass everything: broken identities, z3 goals, citations, conclusions and witnesses fail."""

from dataclasses import replace

import numpy as np
import pytest
import sympy as sp

from attnbounds import proofs
from attnbounds.proofs.framework import Cite, Conclude, Derivation, Identity, Prose, Psd, Sign, Witness, Z3
from attnbounds.theory.instance import Instance
from attnbounds.theory.normalisers import softmax
from attnbounds.theory.statements._symbols import abar_N, d_1, dtilde, jac, T

a, b = sp.symbols("a b", nonnegative=True)
u, v = sp.symbols("u v")


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


def test_a_wrong_identity_in_a_real_derivation_fails_its_replay():
    d = proofs.get("theorem1.fixed[R1,g1]")
    first = d.steps[0]
    assert isinstance(first, Identity)
    wrong = replace(first, rhs=first.rhs + a * u)  # an extra term: no longer an identity
    rep = _broken(d, 0, wrong).replay()
    assert not rep.ok and rep.result == "FAILED" and rep.failures[0].kind == "identity"


def test_a_prose_step_makes_a_derivation_proved_only_modulo_prose():
    d = proofs.get("theorem1.fixed[R1,g1]")
    rep = _broken(d, 1, Prose("the triangle inequality, in words")).replay()
    assert rep.ok and not rep.complete and rep.result == "PROVED MODULO PROSE" and rep.prose == 1


def _conclude(relation, bindings=None, **kw):
    return Conclude(relation, bindings or {"dtilde": "dtilde_R1", "abar_N": "abar_N", "d_1": "d_1",
                                           "max_norm": "max_norm"}, **kw)


G1 = proofs.get("theorem1.fixed[R1,g1]").steps[-1].relation.rhs


def test_conclusion_needs_a_bound_at_least_as_strong_as_the_statement():
    assert _conclude(sp.Le(dtilde, G1)).check_target("theorem1.fixed[R1,g1]", ())[0]
    ok, why = _conclude(sp.Le(dtilde, G1 + d_1)).check_target("theorem1.fixed[R1,g1]", ())
    assert not ok and "no derived inequality implies" in why
    # a stronger derived bound implies the statement (z3 orders them)
    assert _conclude(sp.Le(dtilde, G1 - abar_N * d_1)).check_target("theorem1.fixed[R1,g1]", ())[0]


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
    from attnbounds.theory.errors import AttnBoundsError

    with pytest.raises(AttnBoundsError, match="final step"):
        Derivation("x", ("lemma1",), "no conclusion", (Prose("..."),))


def test_conclusion_with_definitions_and_given_facts():
    rn = sp.Symbol("R", nonnegative=True)
    c = Conclude(sp.Le(jac, rn), {"J_norm": "J_entry"}, given=(sp.Le(rn * T, sp.Rational(1, 4)),))
    assert c.check_target("corollary3[entry,corrected]", ("softmax",))[0]
    c = Conclude(sp.Le(jac, rn), {"J_norm": "J_entry"}, given=(sp.Le(rn * T, sp.Rational(1, 2)),))
    assert not c.check_target("corollary3[entry,corrected]", ("softmax",))[0]
