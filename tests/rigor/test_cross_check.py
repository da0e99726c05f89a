"""The cross-check of forms: every quantity's implementations agree with each other on adversarial instances.

For every registered quantity (:mod:`attnbounds.theory.mathematics.quantities`):

- **float in ball**: the float form lies in the ball form's enclosure (arb, 128 bits, recomputed from
  the definition) up to a stated budget: ``ULPS`` units in the last place of the quantity's magnitude
  (its specification's model of the size of the numbers it is computed from) per column, times
  ``1 + s`` where ``s`` is the size of the exponents the weights are computed from (the weights carry a
  relative rounding error of about ``s`` ulps, which every quantity reading them inherits), and never
  less than that many units of the smallest normal double (below it, float has absolute precision only);
- **torch = float**: the torch form agrees with the float form to ``1e-9`` of that magnitude;
- **classes = tokens**: on token-class instances, the float form equals the float form on the same
  instance written out token by token (:meth:`Instance.expand`), and the ball form contains it too.

Instances come from :func:`attnbounds.theory.mathematics.strategies.adversarial_instance`: interior extrema of F,
near ties, one-hot rows, logits up to 1e3, graded rows (weights down to 1e-300 of the largest: tiny Jacobians),
T from 1e-8 (huge Jacobians) to 1e6, dense L up to 1024, token classes with counts up to 10^6. The counts of
Theorem 2 (:data:`COUNTS`) are step functions: float may count a token otherwise only where its distance lies
within rounding of the radius, and where none does both forms give the exact count (the ball's lower and upper
count equal). A quantity lacking a form fails :func:`test_every_quantity_has_every_form`
unless its specification lists it in :attr:`Quantity.lacks` with the reason.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.mathematics import balls, strategies
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import backend
from attnbounds.theory.mathematics.quantities import BACKENDS, COSTS, QUANTITIES, ball_value, compute, magnitude
from attnbounds.theory.mathematics.quantities import _float as qfloat

#: units in the last place of the magnitude allowed per column (K + 8 of them) between float and ball
ULPS = 64
EPS = 2.0**-52
TINY_NORMAL = 2.0**-1022
#: quantities whose float form is a Monte Carlo estimate: float and ball are compared as intervals
ESTIMATES = {name for name, q in QUANTITIES.items() if q.estimate}


def test_every_quantity_has_every_form() -> None:
    """A form a quantity lacks is listed in its specification with the reason (:attr:`Quantity.lacks`), and a form
    listed there does not exist (no stale reason)."""
    missing = {(name, b) for name, q in QUANTITIES.items() for b in BACKENDS if not q.has(b)}
    listed = {(name, b) for name, q in QUANTITIES.items() for b in q.lacks}
    assert missing <= listed, f"forms missing and not in the quantity's lacks: {sorted(missing - listed)}"
    assert listed <= missing, f"stale lacks entries (the form exists now): {sorted(listed - missing)}"
    assert all(why.strip() for q in QUANTITIES.values() for why in q.lacks.values())


def _max_L(name: str) -> int:
    return min(COSTS[QUANTITIES[name].cost].test_L, 1024)


def _instances(name: str, classes: bool) -> hs.SearchStrategy[Instance]:
    q = QUANTITIES[name]
    ratio = q.normaliser or "ratio" in q.needs or q.cost == "jacobian"
    max_count = 4096 if q.class_limit else 10**6
    return strategies.adversarial_instance(max_L=_max_L(name), classes=classes, ratio_only=ratio, batch=2,
                                           max_count=max_count, elementwise=q.cost == "jacobian")


def _float(name: str, inst: Instance) -> np.ndarray | None:
    try:
        with np.errstate(all="ignore"):
            return np.asarray(compute(name, inst))
    except AttnBoundsError:
        return None


def _ball(name: str, inst: Instance, b: int) -> object | None:
    """The ball form on instance ``b`` at the logits the float form reads: a ball instance takes the exact ``q . k``
    as its logits where the float ones are their rounding (a few ulps apart, which at T = 0.001 moves a Jacobian by
    1e-12), so ``q`` and ``k`` are dropped for quantities that do not read them."""
    ops = backend("arb")
    one = inst.take(b)
    if one.q is not None and "qk" not in QUANTITIES[name].needs:
        one = dataclasses.replace(one, q=None, k=None)
    try:
        with ops.precision(128):
            ex = balls.ball_instance(one, ops)
            return ex, ball_value(name, ex)
    except AttnBoundsError:
        return None


def _columns(name: str, inst: Instance, b: int, ex: balls.BallInstance) -> np.ndarray:
    """The float columns that the ball form's array covers (selected columns for per-selected-token quantities)."""
    return ex.sel if QUANTITIES[name].shape == "BN" else np.flatnonzero(inst.present[b])


def _check_float_in_ball(name: str, inst: Instance) -> int:
    value = _float(name, inst)
    if value is None:
        return 0
    ops = backend("arb")
    mag = np.asarray(magnitude(name, inst))
    spread = 1 + qfloat.masked_max(qfloat.exponent_size(inst), inst.present, 0.0)
    checked = 0
    for b in range(inst.B):
        got = _ball(name, inst, b)
        if got is None:
            continue
        ex, ball = got
        if name in ESTIMATES:  # Monte Carlo on either side: the intervals overlap (to the budget when both are exact)
            lo, hi = compute_interval(name, inst)
            b_lo, b_hi = ops.lower_float(ball), ops.upper_float(ball)
            slack = ULPS * (inst.K + 8) * spread[b] * (EPS * mag[b] + TINY_NORMAL)
            assert lo[b] <= b_hi + slack and b_lo - slack <= hi[b], f"{name}: float [{lo[b]}, {hi[b]}] vs ball {ball}"
            checked += 1
            continue
        if isinstance(ball, np.ndarray):  # over every column (BL), or over the selected ones (BN)
            cols = _columns(name, inst, b, ex)
            at = (lambda j, c: c) if QUANTITIES[name].shape == "BL" else (lambda j, c: j)
            pairs = [(ball[at(j, c)], value[b, c], mag[b, c] if mag.ndim == 2 else mag[b]) for j, c in enumerate(cols)]
        else:
            pairs = [(ball, value[b], mag[b])]
        budget_units = ULPS * (inst.K + 8) * spread[b]
        for bl, f, m in pairs:
            if not ops.is_finite(bl) or not np.isfinite(f):
                assert not (ops.is_finite(bl) and np.isfinite(m) and m < 1e300), f"{name}: float {f} vs ball {bl}"
                continue
            slack = budget_units * (EPS * m + TINY_NORMAL)
            lo, hi = ops.lower_float(bl), ops.upper_float(bl)
            if name in COUNTS and _radius_tie(inst, b):
                continue  # a count is a step function: at a distance within rounding of r, float may count otherwise
            if name in COUNTS:  # no distance near r: 128 bits classify every token, the count is exact
                assert lo == hi == f, f"{name}: float count {f!r}, ball [{lo!r}, {hi!r}] (instance {b})"
            assert lo - slack <= f <= hi + slack, (
                f"{name}: float {f!r} is outside the ball [{lo!r}, {hi!r}] by more than {budget_units} ulps of the "
                f"magnitude {m!r} (instance {b}, L={inst.L}, K={inst.K}, normaliser {inst.normaliser!r})")
            checked += 1
    return checked


#: step functions of the instance (counts of tokens within distance r of the context): exact in balls, and equal
#: in float except where a distance lies within rounding of r
COUNTS = ("Ns_relaxed", "Ns_full")


def _radius_tie(inst: Instance, b: int) -> bool:
    """Whether some token's float distance to the context lies within 1e-12 of the radius r (instance ``b``)."""
    d = qfloat.dist_to_context(inst)[b][inst.present[b]]
    r = float(inst.param("r")[b])
    return bool(np.any(np.abs(d - r) <= 1e-12 * np.maximum(np.abs(d), r)))


def compute_interval(name: str, inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    from attnbounds.theory.mathematics.quantities import interval

    return interval(name, inst)


def _check_torch(name: str, inst: Instance) -> int:
    if not QUANTITIES[name].has("torch"):
        return 0
    torch = pytest.importorskip("torch")
    from attnbounds.theory.mathematics.quantities.torch_state import state_of

    value = _float(name, inst)
    if value is None or name in ESTIMATES and "E_dtilde" not in name:
        return 0
    if name in ESTIMATES:
        from attnbounds.theory.mathematics.quantities import _subsets

        m = tuple(int(c) for c in (inst.counts[0] if inst.counts is not None else np.ones(inst.K, dtype=int)))
        if inst.counts is not None and np.any(inst.counts != inst.counts[:1]) or not _subsets.enumerable(m, inst.N):
            return 0
    try:
        with torch.no_grad():
            got = QUANTITIES[name].forms["torch"](state_of(inst)).numpy()
    except AttnBoundsError:
        return 0
    mag = np.asarray(magnitude(name, inst))
    cols = inst.present if QUANTITIES[name].shape == "BL" else (inst.mask & inst.present) if \
        QUANTITIES[name].shape == "BN" else np.ones(inst.B, dtype=bool)
    ok = np.isfinite(value) & cols & np.isfinite(mag) & (mag < 1e290)
    with np.errstate(invalid="ignore"):  # inf - inf outside ``ok``
        diff = np.abs(np.where(ok, got - value, 0.0))
    spread = 1 + qfloat.masked_max(qfloat.exponent_size(inst), inst.present, 0.0)
    spread = spread[:, None] if diff.ndim == 2 else spread
    # the torch forms steer the search only: 1e-9 of the magnitude per unit of the weights' exponent size (their
    # weights come from torch's own softmax); torch norms add 1e-300 under square roots (finite gradients at
    # 0) and LAPACK's singular values of matrices near the underflow range are not relatively accurate: 1e-100 absolute
    assert np.all(diff <= 1e-9 * spread * np.where(ok, mag, 0.0) + 1e-100), (
        f"{name}: torch and float differ by {diff.max()!r} (magnitude {np.max(np.where(ok, mag, 0))!r})")
    return int(ok.sum())


#: examples per test: the profile's (30 in ``ci``, 400 in ``thorough``), at most 12 in the default run
_SETTINGS = settings(max_examples=min(settings.default.max_examples, 12)
                     if settings.get_current_profile_name() == "ci" else settings.default.max_examples,
                     deadline=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("name", sorted(QUANTITIES))
@_SETTINGS
@given(data=hs.data())
def test_float_lies_in_the_ball_and_torch_agrees(name: str, data: hs.DataObject) -> None:
    inst = data.draw(_instances(name, classes=False), label="dense instance")
    checked = _check_float_in_ball(name, inst) + _check_torch(name, inst)
    assume(checked > 0)


@pytest.mark.parametrize("name", sorted(QUANTITIES))
@_SETTINGS
@given(data=hs.data())
def test_token_classes_equal_their_tokens(name: str, data: hs.DataObject) -> None:
    inst = data.draw(_instances(name, classes=True), label="class instance")
    value = _float(name, inst)
    assume(value is not None)
    checked = _check_float_in_ball(name, inst) + _check_torch(name, inst)
    if inst.L <= 256 and name not in ESTIMATES:
        dense = inst.expand()
        want = _float(name, dense)
        assert want is not None, f"{name}: the expanded instance is refused where the class instance is not"
        mag = np.asarray(magnitude(name, inst))
        if value.ndim == 2:  # per column: compare each class with any one of its tokens
            reps = [np.repeat(np.arange(inst.K), inst.counts[b]) for b in range(inst.B)]
            first = np.stack([np.searchsorted(r, np.arange(inst.K)).clip(0, inst.L - 1) for r in reps])
            want = np.take_along_axis(want, first, 1)
            keep = inst.present if QUANTITIES[name].shape == "BL" else inst.present & inst.mask
        else:
            keep = np.ones(inst.B, dtype=bool)
        keep = keep & np.isfinite(value) & np.isfinite(mag)
        diff = np.abs(np.where(keep, value - want, 0.0))
        allowed = ULPS * (inst.L + 8) * EPS * np.where(keep, mag, 0.0)
        assert np.all(diff <= allowed), f"{name}: classes {value} vs tokens {want}"
        checked += 1
    assume(checked > 0)


@pytest.mark.parametrize("name", ["E_dtilde_R1", "E_dtilde_R2"])
def test_subset_expectations_in_torch_take_each_rows_class_counts(name):
    """Token-class rows split at the top-N boundary have counts that differ from row to row (here the top two
    tokens come from one class in row 0 and from two classes in row 1): the torch form reads each row's own."""
    torch = pytest.importorskip("torch")
    from attnbounds.theory.mathematics.normalisers import softmax
    from attnbounds.theory.mathematics.quantities.torch_state import state_of

    x = np.array([[[1.0, 0.0], [0.0, 2.0], [-1.0, 1.0]]] * 2)
    inst = Instance.from_logits(np.array([[3.0, 2.0, 1.0], [1.0, 3.0, 2.0]]), softmax(1.0), x=x, N=2,
                                counts=[[3, 1, 2], [3, 1, 2]])
    assert len({tuple(row) for row in inst.counts}) == 2
    with torch.no_grad():
        got = QUANTITIES[name].forms["torch"](state_of(inst)).numpy()
    assert np.allclose(got, compute(name, inst), rtol=1e-12, atol=0)


def _graded_exp_poly(rng: np.random.Generator) -> Instance | None:
    """exp_poly with one dominant token and the others' log F 40 to 650 below it, on either side of F's maximum:
    Jacobians of 1e-17 down to 1e-280 whose diagonal a_k - a_k^2 cancels in float (the weight rounds to 1)."""
    from attnbounds.theory.mathematics.normalisers import exp_poly

    b, T, K = 10 ** rng.uniform(-2, 0), 10 ** rng.uniform(-2, 1), int(rng.integers(2, 6))
    top = (1 + 0.3 * rng.standard_normal()) / (2 * b * T)
    level = top / T - b * top * top
    others = []
    for _ in range(K - 1):
        target = level - rng.uniform(40, 650)
        disc = 1 / T**2 - 4 * b * target  # b l^2 - l/T + target = 0
        others.append((1 / T + rng.choice([-1.0, 1.0]) * np.sqrt(disc)) / (2 * b))
    try:
        return Instance.from_logits(np.array([[top, *others]]), exp_poly(b=b, T=T))
    except AttnBoundsError:
        return None


def test_the_spectral_norm_of_tiny_exp_poly_jacobians_lies_in_its_ball():
    """The slip the graded draws found: the float spectral norm of such Jacobians came out 19 to 31 % low (the
    diagonal a_k (1 - a_k) was computed as a_k - a_k^2 = 0); it is now in the ball to the cross-check's budget."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(60):
        inst = _graded_exp_poly(rng)
        if inst is not None and compute("J_spectral", inst)[0] > 0:
            checked += _check_float_in_ball("J_spectral", inst)
    assert checked >= 30


@pytest.mark.parametrize("name", ["xi", "C_other"])
@pytest.mark.parametrize("logits", [[-540.96325147, -573.10372455], [-700.0, -20.0, -740.0]],
                         ids=["two tokens, weights 1e-235 and 1e-249", "one dominant weight, another of 1e-321"])
def test_xi_and_C_i_of_weights_far_below_1e_154_lie_in_their_balls(name: str, logits: list[float]) -> None:
    """Sigmoid attention's weights need not sum to 1: at weights of 1e-235 and 1e-249 ``xi_i`` (``M P_i`` here) is
    1e-249, and its error bound squared ``(M + delta)^2 abar^2`` underflowed to 0, as did ``P_i^2``: the float form
    gave 0 with no tolerance (found by the thorough profile). ``P_i`` is not ``total - alpha_i`` either, whose
    digits cancel when one weight dominates."""
    from attnbounds.theory.mathematics.normalisers import SigmoidAttention

    K = len(logits)
    inst = Instance.from_logits(np.array([logits]), SigmoidAttention(T=1.0), x=np.eye(K)[None], N=K, M=1.0,
                                delta=0.0, r=1.0, dim=K, mc_draws=20)
    assert _check_float_in_ball(name, inst) == K  # every selected column
    if name == "xi":  # delta = 0: xi_i = M P_i, the other weights' sum
        a = inst.alpha[0].tolist()
        others = [math.fsum(a[:i] + a[i + 1:]) for i in range(K)]
        assert _float(name, inst)[0].tolist() == pytest.approx(others, rel=1e-12)


@pytest.mark.parametrize("name", ["xi", "C_other"])
@pytest.mark.parametrize("N", [1, 2, 3, 4, 5])
def test_the_torch_forms_of_the_selected_tokens_spread_agree_at_every_selection_size(name: str, N: int) -> None:
    """``C_i = sum over pairs of the other selected tokens alpha_j alpha_k`` is 0 with fewer than two others
    (N <= 2) and not from N = 3 on; ``xi_i`` reads it. The torch form (which the search's gradient steers by) equals
    the float form at every N from 1 to L, not only at the sizes the random draws happen to pick."""
    from attnbounds.theory.mathematics.normalisers import softmax

    logits = np.array([[0.3, -1.2, 2.0, 0.7, -0.4]])
    inst = Instance.from_logits(logits, softmax(1.0), x=np.eye(5)[None], N=N, M=1.0, delta=0.1, r=1.0, dim=5,
                                mc_draws=20)
    assert _check_torch(name, inst) == N
    if name == "C_other" and N >= 3:
        assert np.all(_float(name, inst)[0][inst.mask[0]] > 0)
