"""Each quantity against a straightforward loop over its definition in the paper."""

import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.mathematics import balls
from attnbounds.theory.mathematics import normalisers as nz
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.quantities import QUANTITIES, compute, interval, sphere_embeddings


def _instance(seed=0, B=3, L=6, N=2, d=3, **params):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(B, L)) * 1.5
    x = rng.normal(size=(B, L, d))
    return Instance.from_logits(logits, nz.softmax(0.7), x=x, N=N, **params)


def _naive(inst, b):
    a, x, N, L = inst.alpha[b], inst.x[b], inst.N, inst.L
    sel = sorted(np.argsort(-a, kind="stable")[:N])  # xi is reported in index order
    out = [i for i in range(L) if i not in sel]
    s = sum(a[j] * x[j] for j in sel)
    return a, x, sel, out, s


@pytest.mark.parametrize("N", [1, 2, 6])
def test_fixed_set_quantities_match_definitions(N):
    inst = _instance(N=N)
    for b in range(inst.B):
        a, x, sel, out, s = _naive(inst, b)
        assert compute("abar_N", inst)[b] == pytest.approx(sum(a[j] for j in sel), rel=1e-14)
        assert compute("max_norm", inst)[b] == pytest.approx(max(np.linalg.norm(x[j]) for j in sel), rel=1e-14)
        d1 = max((np.linalg.norm(x[i] - x[j]) for i in out for j in sel), default=0.0)
        assert compute("d_1", inst)[b] == pytest.approx(d1, rel=1e-12, abs=1e-300)
        r1 = sum(np.linalg.norm(a[i] * x[i] - s) for i in out)
        assert compute("dtilde_R1", inst)[b] == pytest.approx(r1, rel=1e-10, abs=1e-14)
        r2 = np.linalg.norm(sum((a[i] * x[i] for i in out), np.zeros(x.shape[1])) - s)
        assert compute("dtilde_R2", inst)[b] == pytest.approx(r2, rel=1e-10, abs=1e-14)


def test_expected_distance_by_enumeration_matches_loops():
    inst = _instance(L=5, N=2)
    for b in range(inst.B):
        a, x = inst.alpha[b], inst.x[b]
        r1, r2 = [], []
        for S in combinations(range(5), 2):
            s = sum(a[j] * x[j] for j in S)
            out = [i for i in range(5) if i not in S]
            r1.append(sum(np.linalg.norm(a[i] * x[i] - s) for i in out))
            r2.append(np.linalg.norm(sum(a[i] * x[i] for i in out) - s))
        assert compute("E_dtilde_R1", inst)[b] == pytest.approx(np.mean(r1), rel=1e-12)
        assert compute("E_dtilde_R2", inst)[b] == pytest.approx(np.mean(r2), rel=1e-12)
    lo, hi = interval("E_dtilde_R1", inst)
    assert np.array_equal(lo, hi)  # exact enumeration has no width


def test_monte_carlo_interval_contains_the_exact_value():
    inst = _instance(L=16, N=8, B=2, mc_draws=4000, seed=3)  # C(16,8) = 12870 > enumeration limit
    lo, hi = interval("E_dtilde_R1", inst)
    assert np.all(hi > lo)
    rng = np.random.default_rng(11)
    for b in range(inst.B):
        a, x = inst.alpha[b], inst.x[b]
        vals = []
        for _ in range(4000):
            S = rng.choice(16, 8, replace=False)
            s = (a[S, None] * x[S]).sum(0)
            out = np.setdiff1d(np.arange(16), S)
            vals.append(np.linalg.norm(a[out, None] * x[out] - s, axis=1).sum())
        assert lo[b] <= np.mean(vals) <= hi[b]


def test_jensen_term_and_gap_bound_match_definitions():
    inst = _instance(L=5, N=2)
    L, N = 5, 2
    rho = N / (L - 1)
    for b in range(inst.B):
        a, x = inst.alpha[b], inst.x[b]
        m = (a[:, None] * x).sum(0)
        J = (L - N) / L * sum(np.linalg.norm(a[i] * (1 + rho) * x[i] - rho * m) for i in range(L))
        assert compute("J_scaled_weighted", inst)[b] == pytest.approx(J, rel=1e-12)
        Jp = (L - N) / L * sum(np.linalg.norm((a[i] + rho) * x[i] - x.mean(0)) for i in range(L))
        assert compute("J_printed_mean", inst)[b] == pytest.approx(Jp, rel=1e-12)
        gap = 0.0
        for i in range(L):
            ys = np.array([a[j] * x[j] for j in range(L) if j != i])
            var = ((ys - ys.mean(0)) ** 2).sum(1).mean()
            gap += np.sqrt(N * (L - 1 - N) / (L - 2) * var)
        assert compute("jensen_gap_bound", inst)[b] == pytest.approx((L - N) / L * gap, rel=1e-10)


def test_xi_bounds_the_spread_on_separated_spheres():
    rng = np.random.default_rng(5)
    x = sphere_embeddings(rng, (4,), 6, 3, np.full(4, 2.0), np.full(4, 0.5))
    d2 = ((x[:, :, None] - x[:, None]) ** 2).sum(-1) + np.eye(6) * 9
    assert d2.min() >= 0.25 and np.allclose(np.linalg.norm(x, axis=-1), 2.0)
    inst = Instance.from_logits(rng.normal(size=(4, 6)), nz.softmax(), x=x, N=4, M=2.0, delta=0.5, r=1.0)
    xi = compute("xi", inst)
    for b in range(4):
        a, xb, sel, out, s = _naive(inst, b)
        for k, i in enumerate(sel):
            assert np.linalg.norm(s - a[i] * xb[i]) <= xi[b, i] * (1 + 1e-12)


def test_separable_counts_follow_the_definition():
    inst = _instance(L=6, N=3, r=0.5)
    for b in range(inst.B):
        a, x, sel, out, s = _naive(inst, b)
        inside = [np.linalg.norm(a[i] * x[i] - s) <= 0.5 for i in range(6)]
        relaxed = sum(inside[i] for i in sel)
        full = relaxed if not any(inside[j] for j in out) else 0
        assert compute("Ns_relaxed", inst)[b] == relaxed
        assert compute("Ns_full", inst)[b] == full


def test_separable_counts_take_any_leading_axes():
    """``_separable_counts`` counts over the last (token) axis for any leading axes, as its docstring says: a (2, 3)
    grid of configurations gives each one's own counts."""
    from attnbounds.theory.mathematics.quantities import theorem2

    rng = np.random.default_rng(11)
    L, d = 5, 3
    x = sphere_embeddings(rng, (6,), L, d, np.full(6, 1.0), np.full(6, 0.0))
    alpha = rng.dirichlet(np.ones(L))
    mask = np.array([True, True, False, True, False])
    r = np.linspace(0.2, 0.9, 6)
    for which in (0, 1):
        flat = theorem2._separable_counts(alpha[None], x, mask[None], r, np.ones(6), which)
        grid = theorem2._separable_counts(alpha[None, None], x.reshape(2, 3, L, d), mask[None, None],
                                          r.reshape(2, 3), np.ones((2, 3)), which)
        for f, g in zip(flat, grid):
            assert g.shape == (2, 3) and np.array_equal(g.ravel(), f), (which, f, g)


def test_each_row_of_a_batch_takes_the_sphere_expectation_in_its_own_dimension():
    """Two tokens of weight 1/2, the first selected, ``M = 1``, ``r = 1/2``: the other token is inside the ball
    (and N_s = 0) exactly when the angle of the two is below 60 degrees, probability 1/3 in R^2 and about 0 in R^200.
    Rows of one batch that differ only in ``dim`` each take their own dimension's expectation, as each does alone."""
    inst = Instance.from_weights([[0.5, 0.5]] * 2, N=1, M=1.0, delta=0.0, r=0.5, dim=np.array([2.0, 200.0]),
                                 mc_draws=2000, seed=3)
    batch = compute("E_Ns_full", inst)
    for b, want in ((0, 2 / 3), (1, 1.0)):
        alone = compute("E_Ns_full", inst.take([b]))[0]
        assert batch[b] == pytest.approx(want, abs=0.05) and alone == pytest.approx(want, abs=0.05), (b, batch, alone)


@pytest.mark.parametrize("L, delta, feasible", [(1, 5.0, True), (2, 1.9, True), (2, 2.0, False), (2, 2.5, False),
                                                (3, 1.7, True), (3, 2.0, False)])
def test_sphere_expectations_exist_only_where_the_separation_is_feasible(L: int, delta: float, feasible: bool) -> None:
    """Assumption 2 on the sphere of radius M = 1: two points are more than delta apart only for delta < 2 (three:
    delta < sqrt(3)); one point is always feasible. Beyond that the conditioned law does not exist, and the ball
    forms of E[N_s]/N refuse rather than enclose the expectation of nothing."""
    from attnbounds.theory.mathematics.intervals import Unsupported, backend
    from attnbounds.theory.mathematics.quantities import ball_value

    weights = [[1.0 / L] * L]
    inst = Instance.from_weights(weights, N=1, M=1.0, delta=delta, r=0.5, dim=3.0, mc_draws=64, seed=5)
    ops = backend("arb")
    for name in ("E_Ns_full", "E_Ns_relaxed"):
        with ops.precision(128):
            if feasible:
                ball = ball_value(name, balls.ball_instance(inst, ops))
                assert 0.0 <= ops.upper_float(ball) and ops.lower_float(ball) <= 1.0, (name, ops.text(ball))
            else:
                with pytest.raises(Unsupported, match="infeasible"):
                    ball_value(name, balls.ball_instance(inst, ops))


@pytest.mark.parametrize("dim", [2, 3, 16])
def test_sphere_expectations_at_a_structural_tie_enclose_the_exact_value(dim: int) -> None:
    """Weights ``[1, 0]``, the first token selected, ``r = M``: the context is ``x_1`` and the other token lies at
    distance exactly ``M = r`` from it for every draw, inside the closed ball, so ``N_s = 0`` (full) and ``1``
    (relaxed) surely. The float estimate's interval encloses those values though rounding puts some draws' distances
    on either side of r, and the ball form decides them exactly."""
    from attnbounds.theory.mathematics.intervals import backend
    from attnbounds.theory.mathematics.quantities import ball_value

    M = math.sqrt(1000.0)  # not a double's exact square root: distances round both ways
    inst = Instance.from_weights([[1.0, 0.0]], N=1, M=M, delta=0.0, r=M, dim=float(dim), mc_draws=256, seed=5)
    ops = backend("arb")
    for name, exact in (("E_Ns_full", 0.0), ("E_Ns_relaxed", 1.0)):
        lo, hi = interval(name, inst)
        assert lo[0] <= exact <= hi[0], (name, lo, hi)
        with ops.precision(128):
            ball = ball_value(name, balls.ball_instance(inst, ops))
        assert ops.lower_float(ball) == ops.upper_float(ball) == exact, (name, ball)


def test_jacobian_norms_and_finite_difference():
    inst = _instance(B=2, L=4)
    J = nz.softmax(0.7).jacobian(inst.logits)
    for b in range(2):
        assert compute("J_spectral", inst)[b] == pytest.approx(np.linalg.svd(J[b], compute_uv=False)[0])
        assert compute("J_row", inst)[b] == pytest.approx(max(np.linalg.norm(J[b][i]) for i in range(4)))
        assert compute("J_entry", inst)[b] == pytest.approx(np.abs(J[b]).max())
    v = np.ones((2, 4)) / 2
    fd = Instance.from_logits(inst.logits, nz.softmax(0.7), eps=1e-3, arrays={"v": v})
    w = nz.softmax(0.7)
    expect = np.linalg.norm(w.weights(inst.logits + 1e-3 * v) - w.weights(inst.logits), axis=-1) / 1e-3
    np.testing.assert_allclose(compute("g_fd", fd), expect)


def test_coverage_by_enumeration():
    inst = Instance.from_logits(np.zeros((2, 2)), nz.softmax(), p=np.array([0.8, 0.5]), H=np.array([3.0, 1.0]))
    np.testing.assert_allclose(compute("coverage_enum", inst), [1 - 0.2**3, 0.5])


def _same_weights_instance(n: nz.Normaliser, seed: int, L: int) -> Instance:
    """Logits ``q . k_i`` all +-1 (``q = e_1``), with every other input a quantity reads (token vectors on a sphere,
    a selection, the sphere, finite-difference and head parameters) drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    B, d, M, delta = 2, 3, 2.0, 0.3
    k = rng.normal(size=(B, L, d))
    k[..., 0] = rng.choice([-1.0, 1.0], size=(B, L))
    q = np.tile(np.eye(d)[0], (B, 1))
    x = sphere_embeddings(rng, (B,), L, d, np.full(B, M), np.full(B, delta))
    v = rng.normal(size=(B, L))
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    return Instance.from_qk(q, k, n, x=x, N=3, M=M, delta=delta, r=0.3, eps=1e-3, p=np.full(B, 0.6),
                            H=np.full(B, 3.0), mc_draws=200, seed=seed, arrays={"v": v})


@settings(max_examples=8, deadline=None)
@given(seed=hs.integers(0, 2**32 - 1), L=hs.integers(3, 7))
def test_a_quantity_not_declared_to_read_the_normaliser_is_the_same_for_normalisers_with_the_same_weights(seed, L):
    """``Quantity.normaliser`` false means the value depends on the normaliser only through its weights: on logits
    +-1, ``exp(l - b l^2) = exp(l - b)`` gives softmax's weights on the same logits, with another derivative
    ``d log F / dl = 1 - 2 b l`` (what the Jacobian norms read)."""
    soft, poly = (_same_weights_instance(n, seed, L) for n in (nz.softmax(1.0), nz.exp_poly(0.3, 1.0)))
    np.testing.assert_allclose(soft.alpha, poly.alpha, rtol=1e-14)
    for name, q in QUANTITIES.items():
        if not q.normaliser:
            np.testing.assert_allclose(compute(name, soft), compute(name, poly), rtol=1e-9, atol=1e-300, err_msg=name)


@settings(max_examples=60, deadline=None)
@given(logits=hs.lists(hs.floats(-3.0, 3.0), min_size=2, max_size=6), N=hs.integers(1, 5),
       M=hs.sampled_from([0.5, 1.0, 2.0]), spread=hs.sampled_from([0.0, 0.3, 0.6]),
       reach=hs.floats(0.05, 2.5), seed=hs.integers(0, 2**16))
@example(logits=[2.068, 0.221, -2.626, 2.844], N=3, M=2.0, spread=0.0, reach=0.7332, seed=0)  # outsiders undecided
@example(logits=[0.0, 0.0], N=1, M=2.0, spread=0.0, reach=0.75, seed=0)  # an outsider's distance up to alpha_j M + ||s||
def test_the_sphere_bounds_hold_every_sampled_configuration(logits: list[float], N: int, M: float, spread: float,
                                                             reach: float, seed: int) -> None:
    """The bounds on N_s valid for every configuration on the sphere (:func:`theorem2._sphere_bounds`, relaxed and
    full) hold each sampled configuration's count (both sides of its rounding): the ball form's exact value, and the
    interval the Monte Carlo refinement is intersected with, never cut off a count that occurs."""
    from attnbounds.theory.mathematics.intervals import backend
    from attnbounds.theory.mathematics.quantities import theorem2

    N, delta, r = min(N, len(logits)), spread * M, reach * M  # up to 6 points at least 0.6 M apart in R^3: feasible
    inst = Instance.from_logits(np.array([logits]), nz.softmax(1.0), N=N, M=M, delta=delta, r=r, dim=3.0)
    ops = backend("arb")
    with ops.precision(128):
        ex = balls.ball_instance(inst, ops)
        bounds = [theorem2._sphere_bounds(ex, which) for which in (0, 1)]
    x = sphere_embeddings(np.random.default_rng(seed), (64,), inst.L, 3, np.full(64, M), np.full(64, delta))
    for which, (lo, hi) in enumerate(bounds):
        c_lo, c_hi = theorem2._separable_counts(inst.alpha[0][None], x, inst.mask[0][None], np.full(64, r),
                                                np.full(64, M), which)
        assert lo <= c_lo.min() and c_hi.max() <= hi, (which, (lo, hi), sorted(set(c_lo)), sorted(set(c_hi)))


@pytest.mark.parametrize("draws", [1, 7, 256])
def test_a_count_sure_on_every_draw_has_exactly_that_mean(draws: int) -> None:
    """``r = 10`` on the sphere of radius ``M = 1`` (every distance at most 2): every selected token lies in the
    relaxed ball on every draw and none outside the full one, so the means of ``N_s / N`` over the draws are exactly
    1 and 0 whatever the draws (one draw more than ``mc_draws``, or one fewer, counted over ``mc_draws`` is not)."""
    inst = Instance.from_weights([[0.5, 0.3, 0.2]], N=2, M=1.0, delta=0.0, r=10.0, dim=3.0, mc_draws=draws, seed=5)
    assert compute("E_Ns_relaxed", inst)[0] == 1.0
    assert compute("E_Ns_full", inst)[0] == 0.0


def test_d_1_at_distances_whose_squares_are_subnormal_is_the_largest_distance() -> None:
    """Two tokens outside the selection at distances about 3e-162 from the selected one: their squared components
    are subnormal doubles, and the float sums of squares rank them the wrong way round (the farther one by 30 %
    computes as the nearer). The ball form must not screen pairs by such float distances: it encloses the exact
    largest distance (mpmath at 50 digits)."""
    import mpmath

    from attnbounds.theory.mathematics.intervals import backend
    from attnbounds.theory.mathematics.quantities import ball_value

    far, near = [1.562940128450518e-162, 2.5139137893894883e-162], [1.6250970262666975e-162, 1.6001207656683901e-162]
    x = np.array([[[0.0, 0.0], far, near]])
    assert np.sqrt((np.array(far) ** 2).sum()) < np.sqrt((np.array(near) ** 2).sum())  # float ranks them wrongly
    inst = Instance.from_weights([[0.6, 0.2, 0.2]], N=1, x=x)
    with mpmath.workdps(50):
        exact = float(mpmath.sqrt(mpmath.mpf(far[0]) ** 2 + mpmath.mpf(far[1]) ** 2))
    ops = backend("arb")
    with ops.precision(128):
        ball = ball_value("d_1", balls.ball_instance(inst, ops))
    assert ops.lower_float(ball) <= exact <= ops.upper_float(ball) * (1 + 1e-15), (ops.text(ball), exact)
