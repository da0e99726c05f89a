"""Element-wise maps (``alpha_i = F(l_i)``, no sum: sigmoid attention) in the relaxation prover and in certification.

Ground truth outside the code under test: sigmoid attention's Jacobian is ``diag(sigmoid'(l_i / T) / T)``, written
here with numpy from its definition, and its weights ``sigmoid(l_i / T)``. The relaxed forms of the quantities that
say they read such a map (:attr:`Quantity.elementwise`) must give each quantity's value at the instance's own point
(the cross-check of forms, on fixed adversarial rows: ties, one token, saturated weights); the ball forms of the
Jacobian norms must enclose the dense norms, on dense rows and on token classes; a quantity that does not say so is
declined, never read through the quotient rule of F / sum F; and bounds true for softmax but false for sigmoid
attention are refuted, never proved.
"""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import sympy as sp

from attnbounds.theory.deciding.prover import prove, work_for
from attnbounds.theory.deciding.prover.image import image_values, read_bounds
from attnbounds.theory.deciding.prover.relax import relax
from attnbounds.theory.deciding.prover.space import Declined
from attnbounds.theory.mathematics import balls
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics.exact import sign_of
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import backend
from attnbounds.theory.mathematics.normalisers.symbolic import softplus
from attnbounds.theory.mathematics.quantities import QUANTITIES, ball_value, compute
from attnbounds.theory.running import api

ELEMENTWISE = sorted(name for name, q in QUANTITIES.items() if q.elementwise)
ROWS = [[0.3, -1.2, 2.0, 0.1], [0.5], [1.0, 1.0, -3.0], [40.0, -40.0, 0.0], [-0.2, 0.7]]
TEMPERATURES = [0.01, 0.7, 3.0]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _dense_jacobian(logits: np.ndarray, T: float) -> np.ndarray:
    """``diag(e^-x / (1 + e^-x)^2 / T)``, ``x = l / T``, at 50 digits (no cancellation in ``1 - sigmoid``)."""
    with mpmath.workdps(50):
        d = [mpmath.exp(-mpmath.mpf(v) / T) / (1 + mpmath.exp(-mpmath.mpf(v) / T)) ** 2 / T for v in logits]
        return np.diag([float(v) for v in d])


def test_sigmoid_attention_is_an_elementwise_map_with_its_log_F() -> None:
    n = nm.make("sigmoid", T=0.5)
    assert n.elementwise and n.has("relaxed")
    assert not any(isinstance(n, t) for t in (nm.RatioNormaliser,))
    l = np.array([-3.0, 0.0, 2.5])
    expr = n.log_F.subs(sp.Symbol("T", positive=True), sp.Rational(1, 2))
    values = [float(sp.exp(expr.subs(nm.l_sym, sp.Float(v, 30))).evalf(30)) for v in l]
    np.testing.assert_allclose(values, _sigmoid(l / 0.5), rtol=1e-14)


@pytest.mark.parametrize("T", TEMPERATURES)
@pytest.mark.parametrize("row", ROWS, ids=[f"row{k}" for k in range(len(ROWS))])
@pytest.mark.parametrize("name", ELEMENTWISE)
def test_each_elementwise_form_is_the_quantity_at_the_instances_point(name: str, row: list[float], T: float) -> None:
    """Exact forms: the float value is attained at a placement that keeps the constraints, none exceeds it."""
    inst = Instance.from_logits(np.array([row]), nm.make("sigmoid", T=T), a=float(np.max(np.abs(row))))
    value = np.asarray(compute(name, inst))[0]
    side, bounds = read_bounds(name, inst)
    assert (side, bounds) == (0, [])  # every form reads an element-wise map exactly
    found = image_values(name, inst)
    scale = max(float(np.max(np.abs(value))), 1e-300)
    if QUANTITIES[name].shape == "BL":
        for k in range(len(row)):
            at_k = [v for place, v, ok in found if ok and place["i"][0] == k]
            assert at_k and max(abs(v - value[k]) for v in at_k) <= 1e-12 * scale, (k, value[k], at_k)
        return
    ok_values = [v for _, v, ok in found if ok]
    assert ok_values and min(abs(v - float(value)) for v in ok_values) <= 1e-12 * scale, (float(value), ok_values)
    assert max(ok_values) <= float(value) + 1e-12 * scale, (float(value), max(ok_values))


@pytest.mark.parametrize("T", TEMPERATURES)
@pytest.mark.parametrize("row, counts", [([0.3, -1.2, 2.0], [1, 3, 2]), ([0.0, 5.0], [4, 1]), ([1.5], [3]),
                                         ([-0.4, 0.9, 0.2, -2.0], [1, 1, 1, 1])])
def test_the_ball_jacobian_norms_enclose_the_dense_diagonal_norms(row: list[float], counts: list[int], T: float
                                                                   ) -> None:
    """Token classes expanded to their tokens: ``J = diag(sigmoid'(l / T) / T)``; its entry, row, spectral and
    Frobenius norms from numpy, against the ball forms of the class instance (a class of several tokens too)."""
    tokens = np.repeat(np.array(row), counts)
    J = _dense_jacobian(tokens, T)
    dense = {"J_entry": np.abs(J).max(), "J_row": np.linalg.norm(J, axis=1).max(),
             "J_spectral": np.linalg.norm(J, 2), "J_frobenius": np.linalg.norm(J)}
    inst = Instance.from_logits(np.array([row]), nm.make("sigmoid", T=T), counts=np.array([counts]))
    ops = backend("arb")
    with ops.precision(128):
        ex = balls.ball_instance(inst.take(0), ops)
        for name, want in dense.items():
            ball = ball_value(name, ex)
            lo, hi = ops.lower_float(ball), ops.upper_float(ball)
            slack = 1e-13 * max(want, 1e-300)
            assert lo - slack <= want <= hi + slack, (name, want, lo, hi)


@pytest.mark.parametrize("relation, hypotheses", [
    ("J_frobenius <= 1", []),
    ("abar_N <= 1", ["top-N"]),
    ("F_l2 <= 1", []),
])
def test_a_quantity_whose_relaxed_form_does_not_read_elementwise_maps_is_declined(relation: str,
                                                                                 hypotheses: list[str]) -> None:
    st = api.statement(relation, hypotheses=hypotheses, normaliser="sigmoid", id="ew.declined").statements[0]
    with pytest.raises(Declined, match="element-wise|reads"):
        relax(st)


@pytest.mark.parametrize("relation", [
    "alpha_max >= 1/L",  # every normalising map: the weights sum to 1
    "L*alpha_min <= 1",
    "alpha_max + (L - 1)*alpha_min <= 1",
    "alpha_max <= 1/2 + 1e-9",  # sigmoid(l) > 1/2 for every l > 0
    "J_entry <= 1/(8*T)",  # sigmoid'(0) / T = 1 / (4 T)
])
def test_bounds_false_for_sigmoid_attention_are_never_proved(relation: str) -> None:
    st = api.statement(relation, normaliser="sigmoid", fixed={"T": 1.0}, id="ew.false").statements[0]
    assert prove(st, work=work_for(5.0)).status != "proved"
    record = api.check(relation, normaliser="sigmoid", fixed={"T": 1.0}, budget=5.0, seed=0, id="ew.false")
    assert record.verdict == "REFUTED", (relation, record.verdict, record.reason)


@pytest.mark.parametrize("relation, fixed", [
    ("alpha_max <= 1/(1 + exp(-2))", {"T": 1.0, "a": 2.0}),  # sigmoid(a / T), attained at l = a: an equality
    ("J_row <= alpha_max/T", {"T": 0.5}),  # row i: a_i (1 - a_i) / T <= a_i / T
    ("J_spectral <= 1/(4*T)", {"T": 2.0}),
    ("alpha_min > 0", {"T": 1.0}),
])
def test_true_bounds_on_sigmoid_attention_are_proved(relation: str, fixed: dict[str, float]) -> None:
    hypotheses = ["logits-bounded"] if "a" in fixed else []
    st = api.statement(relation, hypotheses=hypotheses, normaliser="sigmoid", fixed=fixed, id="ew.true").statements[0]
    result = prove(st, work=work_for(10.0))
    assert result.status == "proved", (relation, result.reason)


def test_an_equality_of_the_stable_kernels_is_decided_exactly() -> None:
    """``e sigmoid(1)^-1 - e - 1 = e (1 + e^-1) - e - 1 = 0``: the kernels written as the functions they are."""
    value = sp.E * sp.exp(softplus(-1)) - sp.E - 1
    assert sign_of(value)[0] == 0
    assert sign_of(value + sp.exp(-2000))[0] == 1


@pytest.mark.parametrize("name", ["dF_max", "dF_l2", "g_absmax"])
def test_lemma_2s_quantities_refuse_an_elementwise_map_in_balls(name: str) -> None:
    """They read F over its sum, which an element-wise map has not: Unsupported (nothing certified), not a crash."""
    from attnbounds.theory.mathematics.intervals import Unsupported

    inst = Instance.from_logits(np.array([[0.3, -1.2]]), nm.make("sigmoid", T=0.7))
    ops = backend("arb")
    with ops.precision(128), pytest.raises(Unsupported):
        ball_value(name, balls.ball_instance(inst, ops))
