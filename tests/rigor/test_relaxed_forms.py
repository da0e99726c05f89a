"""The relaxation prover's reduction against the quantities themselves (the cross-check of the relaxed forms).

Soundness of PROVED rests on one fact: every instance of every length is a point of the relaxed space with the same
margin. For each quantity with a ``relaxed`` form (:mod:`attnbounds.theory.deciding.prover`), on adversarial instances
(dense and token classes, L up to 10^6, T down to 1e-4, logits up to 1e3, interior extrema of F): the float value
is attained by the relaxed form at the instance's own point, with its distinguished tokens on columns that satisfy
their constraints (:func:`attnbounds.theory.deciding.prover.image.image_values`), and no such placement exceeds it
(an exact form that overstated its quantity somewhere would lose proofs: J_entry's off-diagonal entries); a form that is only an upper bound
of its quantity (``J_spectral``, Schur's test) reaches at least the float value at one placement. Softmax instances are checked in the
weights model too (distinguished tokens and the others given by their weights); there the weights sum to exactly 1,
so a relation polynomial in the weights relaxes to a polynomial (no total weight left to divide by).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics import strategies
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.hypotheses import SOFTMAX
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers.ratio import log_F_map
from attnbounds.theory.mathematics.quantities import QUANTITIES, compute, magnitude
from attnbounds.theory.deciding.prover.image import image_values, read_bounds
from attnbounds.theory.deciding.prover.relax import relax
from attnbounds.theory.running import api

RELAXED = sorted(name for name, q in QUANTITIES.items() if q.has("relaxed"))
#: relative agreement between the float value and the relaxed form at the instance (both from the same features)
RTOL = 1e-7
#: examples per quantity (the thorough profile draws many more)
EXAMPLES = 25 if settings.default.max_examples <= 30 else 200


#: absolute agreement, relative to the features' size (a quantity of exact value 0, as the Jacobian at L = 1, is a
#: cancellation of terms of that size: evaluated at 90 digits, a square root leaves about 1e-40 of them)
ATOL = 1e-30


def _close(value: float, candidates: list[float], scale: float) -> bool:
    return any(abs(value - c) <= RTOL * max(abs(value), scale) + ATOL * max(1.0, scale) for c in candidates)


@pytest.mark.parametrize("name", RELAXED)
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_the_float_value_is_attained_at_the_instances_point(name: str, data: st.DataObject) -> None:
    # a quantity of the query and keys (Delta_max: the logits' bound under logits-qk) on instances that have them
    inst = data.draw(strategies.adversarial_instance(max_L=6, batch=1, ratio_only=True, elementwise=True,
                                                     qk="qk" in QUANTITIES[name].needs, max_count=10**6))
    one = inst.take(0)
    assume(one.K <= 6)
    # an element-wise map (sigmoid attention) for the quantities whose relaxed form reads one (the others decline it)
    assume(QUANTITIES[name].elementwise or not one.normaliser.elementwise)
    try:
        with np.errstate(all="ignore"):
            value = np.asarray(compute(name, one))[0]
            scale = np.asarray(magnitude(name, one))[0]
    except AttnBoundsError:
        assume(False)
        return
    assume(np.all(np.isfinite(value)))
    n = log_F_map(one.normaliser)
    g = np.abs(n.dlog_F_values(one.logits, one.L)) if one.logits is not None else np.zeros(1)
    scale = np.maximum(scale, float(np.max(g, initial=0.0)) if np.all(np.isfinite(g)) else 0.0)
    # the weights model reads log(alpha): a weight that underflowed to 0 in float is not the instance's (positive) one
    positive = bool(np.all(one.alpha[0][one.present[0]] > 1e-300))
    models = [False, True] if bool(SOFTMAX(one)[0]) and positive else [False]
    for weights in models:
        found = image_values(name, one, weights=weights)
        if not found and weights:
            continue  # no reading in the weights model (max |l_i| under softmax: the logits are not fixed)
        side, bounds = read_bounds(name, one, weights=weights)
        if QUANTITIES[name].shape == "BL":  # per token: the value of column k at the distinguished token on k
            present = one.present[0]
            for k in np.flatnonzero(present):
                at_k = [v for place, v, ok in found if ok and place.get("i", (None,))[0] == k]
                tol_k = float(np.ravel(scale)[k] if np.ndim(scale) else scale)
                if side < 0:  # a lower bound (Delta_own >= |l_i|): at most the value, never above it
                    tol = RTOL * max(abs(float(value[k])), tol_k) + ATOL * max(1.0, tol_k)
                    assert at_k and max(at_k) <= float(value[k]) + tol, (name, weights, k, value[k], at_k)
                else:
                    assert not bounds, (name, bounds)  # no per-token quantity reads an upper bound of it (yet)
                    assert _close(float(value[k]), at_k, tol_k), (name, weights, k, value[k], at_k)
        elif side > 0:  # each upper bound: its largest placement is at least the quantity
            tol = RTOL * max(abs(float(value)), float(scale)) + ATOL * max(1.0, float(scale))
            for k, bound in enumerate(bounds):
                ok_values = [v for _, v, ok in image_values(name, one, weights=weights, bound=k) if ok]
                assert ok_values and max(ok_values) >= float(value) - tol, (name, bound, weights, float(value),
                                                                            ok_values[:6])
        else:  # an exact form: attained at one placement, and no placement that keeps the constraints exceeds it
            ok_values = [v for _, v, ok in found if ok]
            assert _close(float(value), ok_values, float(scale)), (name, weights, float(value), ok_values[:6])
            tol = RTOL * max(abs(float(value)), float(scale)) + ATOL * max(1.0, float(scale))
            assert max(ok_values) <= float(value) + tol, (name, weights, float(value), max(ok_values))


@pytest.mark.parametrize("logits, normaliser", [
    ([1.0, 1.0], nm.softmax(0.5)),  # two equal tokens: Schur's test is the norm itself, 1/(2T)
    ([0.3, -1.2, 2.0], nm.softmax(1.0)),
    ([0.3, -1.2, 2.0, 0.7], nm.exp_poly(0.1, 1.0)),
    ([0.5, 0.1, -0.4], nm.shifted_sigmoid(0.0, 2.0)),
], ids=["softmax-tie", "softmax", "exp_poly", "shifted_sigmoid"])
def test_schurs_bound_of_j_spectral_is_sqrt_of_the_largest_column_and_row_sums(logits: list[float],
                                                                                normaliser: nm.RatioNormaliser) -> None:
    """J_spectral's Schur reading at the instance's point is ``sqrt(||J||_1 ||J||_inf)`` of the dense Jacobian."""
    inst = Instance.from_logits(np.array([logits]), normaliser)
    side, bounds = read_bounds("J_spectral", inst)
    assert side == 1
    k = next(i for i, b in enumerate(bounds) if b.startswith("Schur's test"))
    a, g = inst.alpha[0], normaliser.dlog_F_values(inst.logits, inst.L)[0]
    J = np.abs((np.diag(a) - np.outer(a, a)) * g[None, :])  # |d alpha_i / d l_j|
    schur = float(np.sqrt(J.sum(0).max() * J.sum(1).max()))
    values = [v for _, v, ok in image_values("J_spectral", inst, bound=k) if ok]
    assert values and max(values) == pytest.approx(schur, rel=1e-12), (bounds[k], values, schur)
    if len(set(logits)) == 1 and len(logits) == 2:  # equal to the norm there: 1/(2T)
        assert max(values) == pytest.approx(float(compute("J_spectral", inst)[0]), rel=1e-12)


@pytest.mark.parametrize("relation", ["alpha_max*F_l2 <= 1", "F_l2 <= 1", "J_frobenius <= 1", "J_row <= 1"])
def test_the_weights_model_reads_the_total_weight_as_1_a_polynomial_relation_relaxes_to_a_polynomial(
        relation: str) -> None:
    """The others' atoms carry masses that sum to 1: a total the same for every atom (their weight) is that value,
    not a sum over the masses that only equals it."""
    st_ = api.statement(relation, hypotheses=["softmax"], id="weights.total").statements[0]
    for problem in relax(st_).problems:
        assert problem.core.is_polynomial(*problem.symbols), (relation, problem.core)


@pytest.mark.parametrize("name, pick", [("alpha_max", np.argmax), ("alpha_min", np.argmin), ("dF_max", np.argmax)])
@pytest.mark.parametrize("logits", [[0.3, -1.2, 2.0], [-0.5, 4.0, 1.0, -3.0]])
def test_a_placement_satisfies_a_maximums_constraints_only_on_the_maximums_token(name: str, pick: object,
                                                                                logits: list[float]) -> None:
    """The image oracle marks a placement of an extreme's token as allowed only where that token dominates every
    other (its constraints): at distinct logits, exactly the column of the largest (smallest) weight, whose value is
    the quantity; a placement anywhere else is a point outside the relaxed feasible set."""
    inst = Instance.from_logits(np.array([logits]), nm.softmax(1.0))
    column = int(pick(inst.alpha[0]))  # type: ignore[operator]
    found = image_values(name, inst)
    assert len(found) == len(logits)
    allowed = [place for place, _, ok in found if ok]
    assert [next(iter(place.values()))[0] for place in allowed] == [column], found
    assert [v for _, v, ok in found if ok] == pytest.approx([float(compute(name, inst)[0])], rel=1e-12)
