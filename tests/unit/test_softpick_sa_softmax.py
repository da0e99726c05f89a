"""Softpick and Self-Adjusting Softmax: every form against the papers' formulas evaluated in 60-digit arithmetic, on
adversarial rows (huge logits at tiny T, all logits equal, a single token, exact zeros, logits below the double
range), the values defined at 0 / 0, the closed-form Jacobians against central differences in 400 digits, and the
capabilities the hypotheses read (neither map normalises, neither is F / sum F with F > 0).

The oracle is the formula written plainly (``mpmath``, no rescaling, no shortcut) at ``x = l / T`` rounded to doubles
as the kernels compute it (their input; the rounding of ``x`` itself is the kernels' budget in the cross-check of
forms, and below the smallest normal double it leaves ``x`` with absolute precision only): softpick
``relu(e^x - 1) / (sum |e^x - 1| + eps)``, Zuhri, Fuadi & Aji 2025 (arXiv:2504.20966); the normalised SA-Softmax
``(z - min(z_min, 0)) / (max(0, z_max) - min(z_min, 0)) * softmax(z)``, Zheng et al. 2025 (arXiv:2502.18277).
"""

from __future__ import annotations

from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from attnbounds.theory.mathematics import balls, families, hypotheses
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.exact import ExactOps
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import backend

torch = pytest.importorskip("torch")

MP = mpmath.mp.clone()
MP.dps = 400  # Jacobian entries down to 1e-160 of the weights: central differences at h = 1e-60 keep 180 digits

#: adversarial rows (every entry a double): huge and tiny logits, ties, exact zeros, one positive token
ROWS = [
    [1e3, -1e3, 999.9, 0.0],
    [-1e3, -1e3, -999.0, -1e3],
    [1e-300, 0.0, -1e-300, 5e-324],
    [0.0, 0.0, 0.0, 0.0],
    [0.7, 0.7, 0.7, 0.7],
    [-0.7, -0.7, -0.7, -0.7],
    [3.0, 0.0, 0.0, -2.0],
    [832.3, 832.3 + 1e-9, 832.3 - 1e-9, 832.3],
    [-5.0, 2.5, 2.5, -5.0],
]
TEMPERATURES = [1e-4, 1e-2, 0.3, 1.0, 1e3]


def _x(row: list[float], T: float) -> list[Any]:
    """``x = l / T`` rounded to doubles as the kernels compute it (their input), then exact."""
    return [MP.mpf(float(v)) for v in np.array(row) / T]


def softpick_exact(row: list[float], T: float, eps: float) -> list[Any]:
    u = [MP.expm1(x) for x in _x(row, T)]
    den = MP.fsum(abs(x) for x in u) + MP.mpf(eps)
    return [MP.mpf(0) if den == 0 else max(x, 0) / den for x in u]


def sa_exact(row: list[float], T: float) -> list[Any]:
    l = [MP.mpf(v) for v in row]  # the factor is scale-free: T cancels in it
    lo, hi = min(min(l), 0), max(max(l), 0)
    z = _x(row, T)
    e = [MP.exp(x - max(z)) for x in z]
    return [MP.mpf(0) if hi == lo else (v - lo) / (hi - lo) * p / MP.fsum(e) for v, p in zip(l, e)]


def softpick_reference(row: list[float], T: float, eps: float) -> list[float]:
    return [float(v) for v in softpick_exact(row, T, eps)]


def sa_reference(row: list[float], T: float) -> list[float]:
    return [float(v) for v in sa_exact(row, T)]


def _close(ours: np.ndarray, ref: list[float], rtol: float = 1e-12) -> None:
    np.testing.assert_allclose(ours, ref, rtol=rtol, atol=1e-300)
    assert all((o == 0) == (r == 0) for o, r in zip(ours, ref)), (ours, ref)  # exact zeros stay exact


# -- the float and torch forms against the formulas --------------------------------------------------------------
@pytest.mark.parametrize("T", TEMPERATURES)
@pytest.mark.parametrize("eps", [0.0, 1e-8, 1e-2])
def test_softpick_matches_the_formula(T: float, eps: float) -> None:
    n = nm.Softpick(T=T, epsilon=eps)
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        w = n.weights(np.array(ROWS))
    t = n.torch_weights(torch.tensor(ROWS, dtype=torch.float64)).numpy()
    for row, ours, theirs in zip(ROWS, w, t):
        ref = softpick_reference(row, T, eps)
        _close(ours, ref)
        _close(theirs, ref)


@pytest.mark.parametrize("T", TEMPERATURES)
def test_sa_softmax_matches_the_formula(T: float) -> None:
    n = nm.SelfAdjustingSoftmax(T=T)
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        w = n.weights(np.array(ROWS))
    t = n.torch_weights(torch.tensor(ROWS, dtype=torch.float64)).numpy()
    for row, ours, theirs in zip(ROWS, w, t):
        ref = sa_reference(row, T)
        _close(ours, ref)
        _close(theirs, ref)


@settings(max_examples=60, deadline=None)
@given(data=hs.data())
def test_both_maps_match_the_formulas_on_drawn_rows(data: hs.DataObject) -> None:
    L = data.draw(hs.integers(1, 12))
    scale = data.draw(hs.sampled_from([1e-300, 1e-6, 1.0, 50.0, 1e3]))
    row = data.draw(hs.lists(hs.floats(-1.0, 1.0, allow_subnormal=False), min_size=L, max_size=L))
    row = [v * scale for v in row]
    T = data.draw(hs.sampled_from(TEMPERATURES))
    eps = data.draw(hs.sampled_from([0.0, 1e-12, 1e-8, 1e-2]))
    _close(nm.Softpick(T=T, epsilon=eps).weights(np.array([row]))[0], softpick_reference(row, T, eps), 1e-11)
    _close(nm.SelfAdjustingSoftmax(T=T).weights(np.array([row]))[0], sa_reference(row, T), 1e-11)


# -- the values at the edges -------------------------------------------------------------------------------------
def test_softpick_values_at_the_edges() -> None:
    assert np.array_equal(nm.Softpick(epsilon=0.0).weights([[0.0, 0.0, 0.0]]), np.zeros((1, 3)))  # 0 / 0 := 0
    assert np.array_equal(nm.Softpick().weights([[-1.0, -3.0, 0.0]]), np.zeros((1, 3)))  # no positive logit
    assert nm.Softpick(epsilon=0.0).weights([[2.0]])[0, 0] == 1.0  # one token, eps = 0
    x = 0.5
    np.testing.assert_allclose(nm.Softpick(epsilon=1e-2).weights([[x]])[0, 0], np.expm1(x) / (np.expm1(x) + 1e-2),
                               rtol=1e-15)
    w = nm.Softpick(epsilon=1e-8).weights([[40.0, 0.0, 0.0]])
    assert w.sum() == 1.0 and w[0, 1] == w[0, 2] == 0.0  # 1 - 1e-8 / (e^40 - 1 + 1e-8): not on the simplex
    assert 0 < 1 - softpick_exact([40.0, 0.0, 0.0], 1.0, 1e-8)[0] < 1e-25
    with pytest.raises(InvalidArgument, match="epsilon"):
        nm.Softpick(epsilon=-1e-8)


def test_sa_softmax_values_at_the_edges() -> None:
    n = nm.SelfAdjustingSoftmax()
    assert np.array_equal(n.weights([[0.0, 0.0]]), np.zeros((1, 2)))  # 0 / 0 := 0
    np.testing.assert_allclose(n.weights([[0.7, 0.7, 0.7]]), [[1 / 3] * 3], rtol=1e-15)  # all equal > 0: softmax
    assert np.array_equal(n.weights([[-0.7, -0.7]]), np.zeros((1, 2)))  # all equal < 0: factor 0
    assert n.weights([[3.0]])[0, 0] == 1.0 and n.weights([[-3.0]])[0, 0] == 0.0 and n.weights([[0.0]])[0, 0] == 0.0
    w = n.weights([[-2.0, 1.0, 0.5]])
    assert w[0, 0] == 0.0 and 0 < w.sum() < 1  # the least (negative) logit gets 0


@pytest.mark.parametrize("name", ["softpick", "sa_softmax"])
@pytest.mark.parametrize("T", [1e-4, 1.0])
def test_columns_without_tokens_play_no_part(name: str, T: float) -> None:
    """A column of count 0 holds no token: its logit (here the largest, or the least) changes no weight, in every
    form, and its own weight is 0."""
    n = nm.make(name, T=T)
    dense = np.array([[1.0, -2.0, 0.5]])
    reference = n.weights(np.repeat(dense, [2, 1, 3], axis=-1))[:, [0, 2, 3]]
    ops = backend("arb")
    for ghost in (900.0, -900.0, 0.0):
        logits = np.array([[1.0, ghost, -2.0, 0.5]])
        counts = np.array([[2, 0, 1, 3]])
        w = n.weights(logits, counts)
        assert w[0, 1] == 0.0
        np.testing.assert_allclose(w[:, [0, 2, 3]], reference, rtol=1e-13, atol=0)
        t = n.torch_weights(torch.tensor(logits), counts).numpy()
        np.testing.assert_allclose(t, w, rtol=1e-13, atol=0)
        with ops.precision(128):
            ex = balls.ball_instance(Instance.from_logits(logits, n, counts=counts), ops)
        for b, f in zip(ex.alpha, w[0]):
            assert ops.lower_float(b) <= f * (1 + 1e-15) and f * (1 - 1e-15) <= ops.upper_float(b)


def test_the_specified_defaults() -> None:
    assert nm.Softpick().params == {"T": 1.0, "epsilon": 1e-8} == nm.make("softpick").params
    assert nm.SelfAdjustingSoftmax().params == {"T": 1.0}
    assert nm.Softpick(epsilon=0.0).epsilon == 0.0  # the domain eps >= 0 holds its end


# -- the Jacobians against central differences in 400 digits ----------------------------------------------------
def _central_difference(reference: Any, row: list[float], h: str = "1e-60") -> np.ndarray:
    L = len(row)
    J = np.zeros((L, L))
    step = MP.mpf(h)
    for j in range(L):
        up = [MP.mpf(v) + (step if k == j else 0) for k, v in enumerate(row)]
        down = [MP.mpf(v) - (step if k == j else 0) for k, v in enumerate(row)]
        J[:, j] = [float((a - b) / (2 * step)) for a, b in zip(reference(up), reference(down))]
    return J


def _softpick_mp(T: float, eps: float) -> Any:
    def f(row: list[Any]) -> list[Any]:
        u = [MP.expm1(v / MP.mpf(T)) for v in row]
        den = MP.fsum(abs(x) for x in u) + MP.mpf(eps)
        return [max(x, 0) / den for x in u]
    return f


def _sa_mp(T: float) -> Any:
    def f(row: list[Any]) -> list[Any]:
        z = [v / MP.mpf(T) for v in row]
        lo, hi = min(min(z), 0), max(max(z), 0)
        e = [MP.exp(x - max(z)) for x in z]
        return [(x - lo) / (hi - lo) * p / MP.fsum(e) for x, p in zip(z, e)]
    return f


#: rows away from the kinks (no logit at 0, unique least and largest logits)
SMOOTH = [[0.3, -1.2, 2.0, 0.8, -0.4], [9.0, 0.1, -0.2, 0.5, -3.0], [-0.5, -1.5, -0.1, -2.0, -0.3],
          [0.2, 0.4, 0.1, 0.3, 0.25], [40.0, -35.0, 12.5, 39.0, 1.0]]


@pytest.mark.parametrize("T", [0.05, 1.0, 7.0])
def test_jacobians_match_central_differences(T: float) -> None:
    for row in SMOOTH:
        for eps in (0.0, 1e-3):
            n = nm.Softpick(T=T, epsilon=eps)
            np.testing.assert_allclose(n.jacobian(np.array([row]))[0], _central_difference(_softpick_mp(T, eps), row),
                                       rtol=1e-9, atol=1e-300)
        n = nm.SelfAdjustingSoftmax(T=T)
        np.testing.assert_allclose(n.jacobian(np.array([row]))[0], _central_difference(_sa_mp(T), row),
                                   rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("name", ["softpick", "sa_softmax"])
@pytest.mark.parametrize("T", [1e-4, 1.0, 1e3])
def test_jacobians_match_autograd_on_adversarial_rows(name: str, T: float) -> None:
    n = nm.make(name, T=T)
    rows = np.array([[1e3, -1e3, 999.9, 5.0], [3.0, 0.5, -2.0, 1.0], [-3.0, -0.5, -2.0, -1.0], [1e-3, -2e-3, 3e-3, 4e-3]])
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        J = n.jacobian(rows)
    auto = np.stack([torch.autograd.functional.jacobian(lambda z: n.torch_weights(z[None])[0],
                                                        torch.tensor(r, dtype=torch.float64)).numpy() for r in rows])
    assert np.all(np.isfinite(J))
    np.testing.assert_allclose(J, auto, rtol=1e-9, atol=1e-12 * np.abs(auto).max())


# -- the ball forms enclose the 60-digit values, and decide the edges exactly ------------------------------------
@pytest.mark.parametrize("name", ["softpick", "sa_softmax"])
@pytest.mark.parametrize("T", [1e-4, 0.3, 1e3])
def test_ball_forms_enclose_the_formula(name: str, T: float) -> None:
    """The balls hold the exact values at the exact ``l / T`` (not the rounded one) and are tight; an exact 0 is
    exactly 0."""
    ops = backend("arb")
    for row in ROWS + [[2.0]]:
        n = nm.make(name, T=T)
        x = [MP.mpf(v) / MP.mpf(repr(T)) for v in row]  # T is the decimal it prints as (0.3 is 3/10)
        if name == "softpick":
            u = [MP.expm1(v) for v in x]
            den = MP.fsum(abs(v) for v in u) + MP.mpf(repr(float(n.params["epsilon"])))
            exact = [max(v, 0) / den for v in u]
        else:
            lo, hi = min(min(x), 0), max(max(x), 0)
            e = [MP.exp(v - max(x)) for v in x]
            exact = [MP.mpf(0) if hi == lo else (v - lo) / (hi - lo) * p / MP.fsum(e) for v, p in zip(x, e)]
        with ops.precision(128):
            ex = balls.ball_instance(Instance.from_logits(np.array([row]), n), ops)
        for b, r in zip(ex.alpha, exact):
            lo_, hi_ = ops.lower_float(b), ops.upper_float(b)
            assert lo_ <= float(r) <= hi_, (row, ops.text(b), r)
            assert hi_ - lo_ <= 4 * 2.0**-52 * abs(float(r)) + 1e-300, f"{name}: {ops.text(b)} is not tight"
            if r == 0:
                assert ops.exact(b) and hi_ == 0.0, (row, ops.text(b))  # exact zeros stay exact


def test_ball_form_of_softpick_with_eps_zero_at_zero_logits() -> None:
    ops = backend("arb")
    with ops.precision(128):
        ex = balls.ball_instance(Instance.from_logits(np.zeros((1, 3)), nm.Softpick(epsilon=0.0)), ops)
    assert all(ops.exact(b) and ops.upper_float(b) == 0.0 for b in ex.alpha)


# -- capabilities and the hypotheses they feed ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["softpick", "sa_softmax"])
def test_capabilities(name: str) -> None:
    n = nm.make(name)
    assert not n.normalising and not n.positive and n.length_independent
    assert not n.needs_positive_logit and n.torch_classes
    assert set(n.lacks) == {"relaxed"}
    inst = Instance.from_logits(np.array([[1.0, -2.0, 0.5]]), n)
    assert not hypotheses.F_POSITIVE(inst)[0] and not hypotheses.SOFTMAX(inst)[0]


def test_the_simplex_hypothesis_in_balls_rejects_what_float_cannot_tell() -> None:
    """Softpick's weights at one huge logit sum to 1 in doubles (the deficit eps / (e^40 - 1) is below rounding): the
    float hypothesis admits the instance, the exact re-check in balls refuses it (never a counterexample)."""
    ops = backend("arb")

    def in_balls(inst: Instance) -> bool | None:
        with ops.precision(128):
            return hypotheses.SIMPLEX.ball(balls.ball_instance(inst, ops), frozenset())

    inst = Instance.from_logits(np.array([[40.0, 0.0]]), nm.Softpick(epsilon=1e-8))
    assert hypotheses.SIMPLEX(inst)[0] and in_balls(inst) is False
    # SA-Softmax at equal positive logits is softmax itself: on the simplex, exactly
    inst = Instance.from_logits(np.array([[0.7, 0.7, 0.7]]), nm.SelfAdjustingSoftmax())
    assert hypotheses.SIMPLEX(inst)[0] and in_balls(inst) is not False  # 3 x [1/3 +/- r]: undecided in arb,
    assert hypotheses.SIMPLEX.ball(balls.ball_instance(inst, ExactOps()), frozenset()) is True  # exactly 1 exactly
    inst = Instance.from_logits(np.array([[0.7, -0.7, 0.1]]), nm.SelfAdjustingSoftmax())
    assert not hypotheses.SIMPLEX(inst)[0] and in_balls(inst) is False


def test_statements_on_the_normaliser_form_do_not_draw_them() -> None:
    """Lemma 1's hypotheses (F positive, F independent of L) and softmax's are computed from the map: neither map is
    admissible for a reading that needs them."""
    from attnbounds.theory.mathematics.registry import all_statements

    for st in all_statements():
        names = {h.id for h in st.hypotheses}
        if names & {"F-positive", "softmax"}:
            admitted = families.admissible_normalisers(st)
            assert "softpick" not in admitted and "sa_softmax" not in admitted, st.id
