"""Certification in interval arithmetic: equality cases never refute, real violations (even by 1e-12) do.

Also checks the definition-level interval quantities against the float64 kernels on random
instances of every reading (two independent implementations must agree wherever the float
margin is clearly away from 0), the handling of ties, renormalised weights, expectations
(enumeration, every-configuration bounds, labelled Monte Carlo) and the mpmath fallback.
"""

import math
import zlib

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as hs

from attnbounds.theory.mathematics import balls as exact, families, normalisers as nm, registry
from attnbounds.theory.deciding.certify import BAND, Certificate, certify, decide
from attnbounds.theory.deciding.margins import relative_margins
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import backend
from attnbounds.theory.mathematics.quantities import QUANTITIES, ball_value
from attnbounds.theory.mathematics.statement import Citation, Statement
from attnbounds.theory.mathematics.statements import theorem1
from attnbounds.theory.mathematics.statements._symbols import T, dtilde, jac


def _equal_x(L: int, N: int, d: int, seed: int, logits=None) -> Instance:
    rng = np.random.default_rng(seed)
    x = np.broadcast_to(rng.standard_normal(d), (1, L, d)).copy()
    lg = rng.standard_normal((1, L)) * 2 if logits is None else np.asarray(logits, dtype=float)[None]
    return Instance.from_logits(lg, nm.softmax(1.0), x=x, N=N)


def _variant(offset: float, base: str = "theorem1.fixed[R1,g1]") -> Statement:
    """theorem1's g1 bound with the constant moved by ``offset`` times max_norm (false for offset < 0 at equality)."""
    s = registry.get(base)
    g1 = theorem1.GROUPING["g1"]
    mx = sp.Symbol("max_norm", nonnegative=True)
    return Statement(f"test-variant{offset}", "variant", sp.Le(dtilde, g1 + sp.Float(offset, 30) * mx),
                     Citation("test"), s.hypotheses, s.bindings)


# -- equality cases and tiny margins -------------------------------------------------------------------
@pytest.mark.parametrize("L, N", [(2, 1), (3, 1), (5, 2), (8, 3), (16, 5)])
def test_theorem1_equality_case_is_never_violated(L, N):
    for seed in range(5):
        inst = _equal_x(L, N, 3, seed)
        for sid in ("theorem1.fixed[R1,g1]", "theorem1.fixed[R1,g2,corrected]"):
            c = certify(sid, inst)
            assert c.status in ("holds", "inconclusive"), (sid, c)
            assert c.margin_lo <= 0 <= c.margin_hi or c.status == "holds"


@given(L=hs.integers(2, 12), data=hs.data())
@settings(max_examples=25)
def test_equality_case_property(L, data):
    N = data.draw(hs.integers(1, L))
    logits = data.draw(hs.lists(hs.sampled_from([-1.0, 0.0, 0.5, 3.0]) | hs.floats(-5, 5), min_size=L, max_size=L))
    inst = _equal_x(L, N, 2, 0, logits)
    assert decide("theorem1.fixed[R1,g1]", inst)[0] in ("holds", "inconclusive")


def test_hand_built_corollary3_violation_at_two_equal_logits():
    inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))
    for sid in ("corollary3[spectral]", "corollary3[frobenius]"):
        c = certify(sid, inst)
        assert c.status == "violated" and c.margin_hi < 0
        assert math.isclose(c.margin_lo, -0.25, rel_tol=1e-12)  # ||J|| = 1/(2T) against 1/(4T)
    for sid in ("corollary3[spectral,corrected]", "corollary3[frobenius,corrected]", "lemma2[sharp]"):
        assert certify(sid, inst).status in ("holds", "inconclusive")  # sharp: equality at L = 2


@pytest.mark.parametrize("offset", [-1e-12, -1e-15])
def test_tiny_violation_is_caught(offset):
    inst = _equal_x(6, 2, 3, 1)
    c = certify(_variant(offset), inst)
    assert c.status == "violated" and c.margin_hi < 0
    assert decide(_variant(offset), inst)[0] == "violated"
    assert certify(_variant(-offset), inst).status == "holds"


def test_tiny_violation_through_the_bound():
    # ||J||_2 = 1/(2T) at L = 2, equal logits: a bound 2e-12 below it is violated, 2e-12 above it holds
    s = registry.get("corollary3[spectral,corrected]")
    inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))
    for offset, expected in ((-2e-12, "violated"), (2e-12, "holds")):
        moved = Statement(f"test.moved{offset}", "moved", sp.Le(jac, (1 + sp.Float(offset, 30)) / (2 * T)),
                          Citation("test"), s.hypotheses, s.bindings)
        assert decide(moved, inst)[0] == expected


def test_a_temperature_other_than_the_normalisers_is_outside_the_domain():
    # the bound reads T from the instance, the Jacobian from the normaliser: 2e-12 apart is NOT-APPLICABLE
    for T_ in (1.0 + 2e-12, 1.0 - 2e-12):
        inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0), T=T_)
        assert decide("corollary3[spectral,corrected]", inst)[0] == "not-applicable"
        c = certify("corollary3[spectral,corrected]", inst)
        assert c.status == "not-applicable" and c.hypotheses["domain(T)"] == "fails (float check)"


def test_decide_batch_equality_and_violations():
    rng = np.random.default_rng(5)
    B, L, N = 60, 6, 2
    x = rng.standard_normal((B, L, 3))
    x[:30] = x[:30, :1]  # equality cases
    inst = Instance.from_logits(rng.standard_normal((B, L)), nm.softmax(1.0), x=x, N=N)
    status = decide("theorem1.fixed[R1,g1]", inst)
    assert set(status[:30]) <= {"holds", "inconclusive"} and set(status[30:]) == {"holds"}
    status = decide("theorem1.fixed[R1,g2]", inst)  # g2 is not homogeneous: fails on some of these
    st = registry.get("theorem1.fixed[R1,g2]")
    ev = st.evaluate(inst)
    clear = np.abs(relative_margins(st, inst, ev)) > 1e-6
    assert np.array_equal((status == "violated")[clear], (ev.margin < 0)[clear])
    assert (status == "violated").any()


def test_decide_a_batch_where_some_instances_are_not_applicable():
    """Each instance of a batch gets the status it gets alone, when a hypothesis fails on some of the batch (the
    float64 shortcut then reads only the applicable ones): holds, violated and not-applicable side by side."""
    from attnbounds.theory.running import api

    st = api.statement("alpha_max <= 0.6", hypotheses=["softmax", "logits-bounded"], id="mixed",
                       fixed={"a": 1.0, "T": 1.0}).statements[0]
    logits = np.array([[0.0, 0.0], [3.0, -3.0], [1.0, -1.0], [0.1, 0.0], [2.0, 0.0]])
    inst = Instance.from_logits(logits, nm.softmax(1.0), a=1.0)
    alone = [decide(st, inst.take(np.array([b])))[0] for b in range(inst.B)]
    assert alone == ["holds", "not-applicable", "violated", "holds", "not-applicable"]
    assert list(decide(st, inst)) == alone


@pytest.mark.parametrize("band", [0.0, BAND, 0.25])
def test_decide_takes_holds_from_float64_only_above_its_band(band):
    """An exact 0 of a strict bound's margin is a violation whatever the band, 0 included (the float64 shortcut
    needs a relative margin strictly above the band: at the band itself it certifies)."""
    from attnbounds.theory.running import api

    st = api.statement("alpha_max > 1/L", hypotheses=["softmax"], id="strict_mean").statements[0]
    inst = Instance.from_logits(np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]), nm.softmax(1.0))
    rel = np.asarray(relative_margins(st, st.prepare(inst), st.evaluate(st.prepare(inst)), pessimistic=True))
    assert rel[0] == 0.0 and rel[1] > 0.25  # equal logits: alpha_max = 1/4 exactly
    assert list(decide(st, inst, band=band)) == ["violated", "holds"]


# -- hypotheses ---------------------------------------------------------------------------------------
def test_exact_tie_is_a_valid_top_n():
    inst = Instance.from_logits(np.array([[1.0, 1.0, 1.0, -2.0]]), nm.softmax(0.7), x=np.ones((1, 4, 2)), N=2)
    c = certify("theorem1.fixed[R1,g1]", inst)
    assert c.hypotheses["top-N"] == "certified"


def test_wrong_selection_is_not_applicable():
    sel = np.array([[False, True, True]])
    inst = Instance.from_logits(np.array([[3.0, 0.0, 0.1]]), nm.softmax(1.0), x=np.ones((1, 3, 2)), selection=sel)
    c = certify("theorem1.fixed[R1,g1]", inst)
    assert c.status == "not-applicable" and c.hypotheses["top-N"] == "fails (certified)"


def test_structural_hypothesis_failure_is_not_applicable():
    inst = Instance.from_logits(np.array([[0.5, 1.0]]), nm.scalable_softmax(0.4, 1.0))
    assert certify("lemma1", inst).status == "not-applicable"
    assert decide("lemma1", inst)[0] == "not-applicable"


def test_given_weights_are_renormalised_onto_the_simplex():
    w = np.array([0.1, 0.2, 0.3, 0.4])
    w = w / w.sum()
    inst = Instance.from_weights(w[None], x=np.ones((1, 4, 2)), N=2)
    c = certify("theorem1.fixed[R1,g1]", inst)
    assert "renormalised" in c.weights and c.status in ("holds", "inconclusive")


# -- expectations ---------------------------------------------------------------------------------------
def test_corollary2_counterexample_is_enumerated_exactly():
    inst = Instance.from_logits(np.zeros((1, 6)), nm.softmax(1.0), x=np.ones((1, 6, 2)), N=1)
    c = certify("corollary2.i[R1]", inst)
    assert c.status == "violated" and c.method == "enumeration" and c.level is None
    assert certify("corollary2.i[R1,corrected]", inst).status in ("holds", "inconclusive")


def test_large_subset_count_is_a_labelled_statistical_check():
    rng = np.random.default_rng(0)
    inst = Instance.from_logits(rng.standard_normal((1, 30)), nm.softmax(1.0), x=rng.standard_normal((1, 30, 2)), N=6)
    c = certify("theorem1.random[R1,printed,mean]", inst)
    assert c.method == "hoeffding" and c.level == pytest.approx(1 - 1e-6) and c.statistical
    assert any("statistical" in n for n in c.notes)


def test_a_margin_the_every_configuration_bounds_leave_open_is_refined_by_monte_carlo_and_labelled() -> None:
    """Theorem 2's count at N = 3 depends on the sphere configuration: its every-configuration enclosure leaves the
    upper bound undecided, so certification refines it by sphere draws (Hoeffding, labelled statistical) and the
    bound holds there; a margin those bounds already decide (N = 2, deterministic) is not refined (arb, violated)."""
    inst = Instance.from_logits(np.array([[2.0, 1.0, 0.5, 0.0, -1.0]]), nm.softmax(1.0), N=3, M=1.0, delta=0.3,
                                r=0.7, dim=3)
    c = certify("theorem2.upper[relaxed]", inst)
    assert c.status == "holds" and c.method == "hoeffding" and c.statistical, c
    assert any("sphere draws" in n for n in c.notes), c.notes
    fixed = Instance.from_logits(np.array([[2.0, 1.0, 0.0, -1.0]]), nm.softmax(1.0), N=2, M=1.0, delta=0.3, r=0.7,
                                 dim=3)
    d = certify("theorem2.upper[relaxed]", fixed)
    assert d.status == "violated" and d.method == "arb" and not d.statistical, d


def test_theorem2_counts_that_do_not_depend_on_the_configuration():
    # N = 2: ||s - alpha_i x_i|| = alpha_other M on the sphere, so the relaxed count is deterministic
    inst = Instance.from_logits(np.array([[2.0, 1.0, 0.0, -1.0]]), nm.softmax(1.0), N=2, M=1.0, delta=0.3, r=0.7, dim=3)
    c = certify("theorem2.upper[relaxed]", inst)
    assert c.status == "violated" and c.method == "arb" and any("every configuration" in n for n in c.notes)
    # large r: every non-selected alpha_j x_j lies in the ball, so the full count is 0 for every configuration
    inst = Instance.from_logits(np.array([[2.0, 1.0, 0.0, -1.0]]), nm.softmax(1.0), N=1, M=1.0, delta=0.0, r=5.0, dim=3)
    assert certify("theorem2.lower[full]", inst).status == "violated"


def test_lemma1_constants_with_an_interior_extremum():
    # F = exp(l - 0.3 l^2) has its maximum inside [-a, a]; the bracketing must find it
    inst = Instance.from_logits(np.array([[-3.0, 0.5, 1.7, 3.0]]), nm.exp_poly(0.3, 1.0))
    ops = backend()
    with ops.precision(128):
        ex = exact.ball_instance(inst.with_params(a=3.0), ops)
        c1, c2 = ball_value("C_1", ex), ball_value("C_2", ex)
    lo, hi = inst.normaliser.log_F_range(3.0)
    fmin, fmax = math.exp(lo[0]), math.exp(hi[0])
    assert ops.upper_float(c1) - ops.lower_float(c1) < 1e-15  # a tight enclosure ...
    assert c1.overlaps(ops.num(fmin / fmax) * (1 + ops.num(1e-12) * ops.hull(ops.num(-1), ops.num(1))))  # ... of min/max
    assert c2.overlaps(ops.num(fmax / fmin) * (1 + ops.num(1e-12) * ops.hull(ops.num(-1), ops.num(1))))
    assert certify("lemma1", inst).status == "holds"


# -- two implementations agree ------------------------------------------------------------------------------
def test_every_quantity_has_an_interval_definition():
    missing = sorted(name for name, q in QUANTITIES.items() if not q.has("ball"))
    assert not missing, missing


@pytest.mark.parametrize("sid", registry.ids())
def test_certify_agrees_with_float_evaluator_away_from_zero(sid):
    s = registry.get(sid)
    rng = np.random.default_rng(zlib.crc32(sid.encode()))
    checked = 0
    for _ in range(4):
        spec = families.random_spec(rng, s, B=4, max_L=6).with_(mc_draws=300)
        try:
            inst = families.build(s, spec)
        except AttnBoundsError:
            continue
        ev = s.evaluate(inst)
        rel = relative_margins(s, inst, ev, pessimistic=True)
        for b in np.flatnonzero(ev.applicable):
            c = certify(s, inst, int(b))
            assert c.status in ("holds", "violated", "inconclusive", "not-applicable")
            checked += 1
            if c.statistical or s.kind == "expectation" and "E_Ns" in "".join(s.bindings.values()):
                # Monte Carlo on both sides: the certified and the float intervals must overlap
                if c.status in ("holds", "violated"):
                    assert c.margin_lo <= ev.margin_hi[b] + 1e-9 and ev.margin_lo[b] - 1e-9 <= c.margin_hi, (spec, c)
                continue
            hyp_doubt = any(v in ("undecided", "fails (certified)") for v in c.hypotheses.values())
            if rel[b] > 10 * BAND:
                assert c.status == "holds" or hyp_doubt, (spec, b, ev.margin[b], c)
            elif rel[b] < -10 * BAND:
                assert c.status == "violated" or hyp_doubt, (spec, b, ev.margin[b], c)
    assert checked > 0


# -- API, backends, speed knobs ---------------------------------------------------------------------------
def test_mpmath_fallback_agrees_with_arb():
    rng = np.random.default_rng(7)
    inst = Instance.from_logits(rng.standard_normal((1, 5)), nm.softplus_shift(0.2, 0.7), x=rng.standard_normal((1, 5, 2)),
                                N=2)
    for sid in ("theorem1.fixed[R2,g1]", "lemma2[two-term]", "theorem1.random[R1,scaled,weighted]"):
        a, b = certify(sid, inst), certify(sid, inst, backend_name="mpmath")
        assert b.backend == "mpmath" and a.status == b.status
        assert a.margin_lo <= b.margin_hi and b.margin_lo <= a.margin_hi


def test_certificate_json_roundtrip_and_bad_input():
    inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0))
    c = certify("corollary3[spectral]", inst)
    data = c.to_json(timing=False)
    assert "seconds" not in data and data["status"] == "violated"
    back = Certificate.from_json(c.to_json())
    assert back == c
    with pytest.raises(AttnBoundsError, match="index"):
        certify("corollary3[spectral]", inst, 3)
    with pytest.raises(AttnBoundsError, match="unknown statement"):
        certify("corollary9", inst)
    with pytest.raises(AttnBoundsError, match="band"):
        decide("corollary3[spectral]", inst, band=-1)


def test_unsupported_expression_is_inconclusive_not_an_error():
    s = registry.get("corollary3[spectral]")
    odd = Statement("test-odd", "odd", sp.Le(sp.Symbol("J_norm"), sp.gamma(sp.Symbol("T"))), Citation("test"),
                    s.hypotheses, s.bindings)
    c = certify(odd, Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0)))
    assert c.status == "inconclusive" and "cannot certify" in c.notes[0]


def test_hypotheses_that_rounding_could_fool_are_rechecked_or_never_refute():
    from attnbounds.theory.mathematics.quantities import ball_value as value
    from attnbounds.theory.mathematics.hypotheses import Hypothesis, nonnegative_status

    base = registry.get("corollary3[spectral]")
    opaque = Hypothesis("mine", "a user's hypothesis, checked in float64 only", lambda inst: np.ones(inst.B, dtype=bool))
    st = Statement("test.opaque", "opaque", base.relation, Citation("test"), (*base.hypotheses, opaque), base.bindings)
    c = certify(st, Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0)))
    assert c.status == "inconclusive" and "mine" in c.notes[0] and c.margin_hi < 0
    # a hypothesis with a ball check (max_norm >= 1) is decided in balls, whatever its float check says
    fixed = registry.get("theorem1.fixed[R1,g2]")
    big = Hypothesis("max-norm>=1", "max_norm >= 1", lambda inst: np.ones(inst.B, dtype=bool),  # float says yes
                     ball=lambda ex, _: nonnegative_status(ex.ops, value("max_norm", ex) - ex.ops.num(1)))
    g2 = Statement("test.g2", "g2", fixed.relation, Citation("test"), (*fixed.hypotheses, big), fixed.bindings)
    for norm, expected in ((1 - 2.0**-53, "fails (certified)"), (1 + 2.0**-52, "certified")):
        x = np.zeros((1, 3, 2))
        x[..., 0] = norm
        c = certify(g2, Instance.from_logits(np.zeros((1, 3)), nm.softmax(1.0), x=x, N=1))
        assert c.hypotheses["max-norm>=1"] == expected


def test_equality_is_judged_against_the_terms_not_the_vanishing_sides():
    # N = L: E[dtilde_R2] = ||m|| exactly and the bound's right side is 0; tiny embeddings
    rng = np.random.default_rng(2)
    inst = Instance.from_logits(rng.standard_normal((1, 3)), nm.softmax(1.0), x=rng.standard_normal((1, 3, 2)) * 1e-100,
                                N=3)
    c = certify("corollary2.ii[R2,corrected]", inst)
    assert c.status in ("holds", "inconclusive") and (c.status == "holds" or c.equality())
    assert 1e-101 < c.scale < 1e-98


# -- issue 14: hypotheses from the data, parameter domains, both sides of Theorem 2 --------------------------
def test_logits_that_are_not_q_dot_k_are_not_applicable():
    """Corollary 1 needs l_i = <q, k_i>; logits unrelated to the query and keys are outside it, not a counterexample."""
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((1, 3)), rng.standard_normal((1, 5, 3))
    inst = Instance.from_logits(rng.standard_normal((1, 5)) * 5, nm.softmax(1.0), q=q, k=k)
    c = certify("corollary1[delta=max-key]", inst)
    assert c.status == "not-applicable" and c.hypotheses["logits-qk"] == "fails (certified)"
    good = Instance.from_qk(q, k, nm.softmax(1.0))
    c = certify("corollary1[delta=max-key]", good)
    assert c.status == "holds" and c.hypotheses["logits-qk"] == "certified"


def test_logits_one_ulp_from_q_dot_k_are_decided_exactly():
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((1, 3)), rng.standard_normal((1, 4, 3))
    logits = np.einsum("bd,bld->bl", q, k)
    off = logits.copy()
    off[0, 0] = np.nextafter(off[0, 0], np.inf)
    inst = Instance.from_logits(off, nm.softmax(1.0), q=q, k=k)
    assert registry.get("corollary1[delta=max-key]").evaluate(inst).applicable.all()  # float: within rounding
    c = certify("corollary1[delta=max-key]", inst)  # balls: q . k_0 is not that double
    assert c.status == "not-applicable" and c.hypotheses["logits-qk"] == "fails (certified)"


def test_a_normaliser_named_softmax_is_softmax_only_if_its_log_F_is_l_over_T():
    T_ = sp.Symbol("T", positive=True)
    fake = nm.RatioNormaliser("softmax", 5 * nm.l_sym / T_, {"T": 1.0})
    inst = Instance.from_logits(np.zeros((1, 2)), fake)
    c = certify("corollary3[spectral,corrected]", inst)
    assert c.status == "not-applicable" and "softmax" in c.notes[0]
    shifted = nm.RatioNormaliser("anything", nm.l_sym / T_ + 3, {"T": 0.25})  # log F = l/T + c: softmax
    assert certify("corollary3[spectral,corrected]", Instance.from_logits(np.zeros((1, 2)), shifted)).status in (
        "holds", "inconclusive")


@pytest.mark.parametrize("eps", [-0.1, 0.0])
def test_finite_difference_step_outside_its_domain_is_not_applicable(eps):
    v = np.array([[1.0, -1.0]]) / np.sqrt(2)
    inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(0.5), eps=eps, arrays={"v": v})
    for sid in ("corollary3[fd,corrected]", "corollary3[fd]"):
        ev = registry.get(sid).evaluate(inst)
        assert not ev.applicable.any() and np.isnan(ev.margin).all() and "domain(eps)" in ev.failed_hypotheses[0]
        c = certify(sid, inst)
        assert c.status == "not-applicable" and c.hypotheses["domain(eps)"] == "fails (float check)"


def test_theorem2_certifies_a_sure_count_from_both_sides():
    """alpha = (0.7, 0.1, 0.1, 0.1), N = 1, r = 0.55: ||alpha_j x_j - s|| >= 0.7 M - 0.1 M > r for every non-selected
    j and s = alpha_1 x_1, so E[N_s]/N = 1 for every configuration, above the printed bound exp(-r^2/(16 M^2))."""
    inst = Instance.from_logits(np.log(np.array([[0.7, 0.1, 0.1, 0.1]])), nm.softmax(1.0), N=1, M=1.0, delta=0.3,
                                r=0.55, dim=3)
    c = certify("theorem2.upper[full]", inst)
    assert c.status == "violated" and not c.statistical and c.method == "arb"
    assert any("every configuration" in n for n in c.notes)
    assert math.isclose(c.margin_lo, math.exp(-0.55**2 / 16) - 1, rel_tol=1e-12)


def test_equality_is_claimed_only_for_a_deterministic_inconclusive_margin_within_rounding_of_zero():
    """``Certificate.equality``: inconclusive, not statistical, not strict, every hypothesis decided, and both ends of
    the margin within ``rel`` of the sides' scale; any one of these missing and it is no equality case."""
    import dataclasses

    from attnbounds.theory.deciding.certify import Certificate

    base = Certificate("t", "inconclusive", -1e-17, 1e-17, "-1e-17", "1e-17", "1", "1", {}, 128, "arb", "arb", None,
                       "", {"softmax": "certified"}, (), 1.0, 0.0)
    assert base.equality()
    for change in ({"status": "holds"}, {"status": "violated"}, {"method": "hoeffding"}, {"strict": True},
                   {"margin_lo": -math.inf}, {"hypotheses": {"softmax": "undecided"}}, {"margin_lo": -1e-14},
                   {"margin_hi": 1e-14}, {"scale": 1e-3}):
        assert not dataclasses.replace(base, **change).equality(), change
    assert dataclasses.replace(base, margin_hi=1e-14).equality(rel=1e-13)  # the tolerance is relative to the scale
    assert dataclasses.replace(base, scale=1e3, margin_lo=-1e-13).equality()


@pytest.mark.parametrize("logits", [[3.0, 2.0, 1.0, 0.0, -1.0], [0.0] * 5, [1.0, 1.0, 0.5, -2.0, -2.0, 4.0]])
@pytest.mark.parametrize("bound", [sp.Rational(1, 4), sp.Rational(1, 100), sp.Rational(1, 2)])
def test_a_per_selected_token_relation_is_certified_on_every_selected_token(logits: list[float], bound: sp.Rational
                                                                            ) -> None:
    """A relation reading a per-selected-token quantity outside a sum (``C_i <= b`` for every selected i, built in
    Python: the statement files keep such quantities inside sums) is certified column by column over the selected
    tokens, as its float values say (none of them within 1e-3 of the bound)."""
    from attnbounds.theory.mathematics import hypotheses as hyp
    from attnbounds.theory.mathematics.quantities.spec import compute

    C = sp.Symbol("C", nonnegative=True)
    st = Statement("test.per-selected", "C_i at most b for every selected i", sp.Le(C, bound), Citation("test"),
                   (hyp.SIMPLEX, hyp.TOP_N), bindings={"C": "C_other"})
    assert st.token_kinds == ["selected"]
    inst = Instance.from_logits(np.array([logits]), nm.softmax(T=1.0), N=4)
    values = np.asarray(compute("C_other", inst), dtype=float)[inst.mask & inst.present]
    assert values.size == 4 and np.all(np.abs(values - float(bound)) > 1e-3), values
    assert certify(st, inst).status == ("violated" if np.any(values > float(bound)) else "holds"), values


def test_an_instance_outside_the_logit_hypotheses_is_not_applicable_certified() -> None:
    """A hypothesis certainly false on the instance makes the certificate not-applicable (never violated): logits
    given without q and k for ``l_i = <q, k_i>``, and a logit certainly outside ``[-a, a]`` for a fixed ``a``;
    inside the box the same statement is judged."""
    import attnbounds
    from attnbounds.theory.running import api

    logits = np.array([[3.0, 0.0, -1.0]])
    qk = certify(attnbounds.get("corollary1[delta=max-key]"), Instance.from_logits(logits, nm.softmax(T=1.0)))
    assert qk.status == "not-applicable" and qk.hypotheses["logits-qk"] == "fails (certified)", qk.hypotheses
    st = api.statement("alpha_max <= 0.5", hypotheses=["softmax", "logits-bounded"], fixed={"a": 1.0}).statements[0]
    out = certify(st, Instance.from_logits(logits, nm.softmax(T=1.0), a=1.0))
    assert out.status == "not-applicable" and out.hypotheses["logits-bounded"] == "fails (certified)", out.hypotheses
    inside = certify(st, Instance.from_logits(np.array([[0.5, 0.0, -1.0]]), nm.softmax(T=1.0), a=1.0))
    assert inside.status == "violated" and inside.hypotheses["logits-bounded"] == "certified", inside.hypotheses


def test_a_non_normalising_map_is_on_the_simplex_exactly_where_its_weights_sum_to_exactly_one() -> None:
    """Sigmoid attention's weights sum to 1 only at some logits: at two logits 0 (1/2 + 1/2) the simplex hypothesis is
    certified and the bound judged; at ``(l, -l)`` the sum ``sigmoid(l) + sigmoid(-l)`` is 1 too, an identity of exp
    that no ball decides (it straddles 1 at every precision): the exact tier certifies it and the bound is judged
    there (violated, or holding); at (2, 1), or a hair off ``(l, -l)``, it certainly fails: not-applicable."""
    from attnbounds.theory.running import api

    st = api.statement("alpha_max <= 0.4", hypotheses=["simplex"]).statements[0]
    sig = nm.make("sigmoid")
    on = certify(st, Instance.from_logits(np.array([[0.0, 0.0]]), sig))
    assert on.status == "violated" and on.hypotheses["simplex"] == "certified", on.hypotheses
    weak = api.statement("alpha_max <= 0.99", hypotheses=["simplex"]).statements[0]
    for l in (1.0, 0.375, 3.0):
        tied = certify(st, Instance.from_logits(np.array([[l, -l]]), sig))
        assert tied.status == "violated" and tied.hypotheses["simplex"].startswith("certified"), (l, tied)
        assert tied.backend == "exact" and not any("could not be certified" in n for n in tied.notes), tied
        assert certify(weak, Instance.from_logits(np.array([[l, -l]]), sig)).status == "holds"
    near = certify(st, Instance.from_logits(np.array([[1.0, -1.0 - 2.0**-40]]), sig))
    assert near.status == "not-applicable" and near.hypotheses["simplex"] == "fails (certified)", near
    off = certify(st, Instance.from_logits(np.array([[2.0, 1.0]]), sig))
    assert off.status == "not-applicable" and off.hypotheses["simplex"] == "fails (certified)", off.hypotheses


def test_a_hypothesis_undecided_beside_a_tight_margin_is_decided_at_higher_precision() -> None:
    """Two logits 0 and 1e-300 differ far below 128 bits: both the top-N hypothesis (is the selected weight the larger?)
    and the margin of ``abar_N >= 1/2`` (about -+2.5e-301) straddle 0 there. Precision doubles until both are
    decided (about 1000 bits): with the smaller logit selected the hypothesis certainly fails (not-applicable, not
    inconclusive), with the larger one selected it holds and so does the bound."""
    from attnbounds.theory.running import api

    st = api.statement("abar_N >= 1/2", hypotheses=["softmax", "top-N"]).statements[0]
    selected = np.array([[True, False]])
    wrong = certify(st, Instance.from_logits(np.array([[0.0, 1e-300]]), nm.softmax(T=1.0), N=1, selection=selected))
    assert wrong.status == "not-applicable" and wrong.hypotheses["top-N"] == "fails (certified)", wrong
    right = certify(st, Instance.from_logits(np.array([[1e-300, 0.0]]), nm.softmax(T=1.0), N=1, selection=selected))
    assert right.status == "holds" and right.hypotheses["top-N"] == "certified" and right.precision_bits >= 1024, right


def test_certification_works_from_53_bits_and_refuses_fewer_naming_the_bound() -> None:
    """Precision starts at any width from a double's 53 bits up to ``max_bits``: 53 itself is allowed (a margin far
    from 0 is decided there), 52 and a ceiling below the start are refused with a message naming both."""
    from attnbounds.theory.mathematics.errors import InvalidArgument
    from attnbounds.theory.running import api

    st = api.statement("alpha_max <= 1", hypotheses=["softmax"]).statements[0]
    inst = Instance.from_logits(np.array([[1.0, 0.0]]), nm.softmax(T=1.0))
    assert certify(st, inst, precision_bits=53).status == "holds"
    for bits, ceiling in ((52, 4096), (128, 64)):
        with pytest.raises(InvalidArgument, match=f"need 53 <= precision_bits <= max_bits, got {bits}, {ceiling}"):
            certify(st, inst, precision_bits=bits, max_bits=ceiling)
