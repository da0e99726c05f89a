"""The vectorised kernels of theory.quantities against straightforward loops over their definitions.

The kernels use Gram forms, closed forms of the Jacobian norms and a secular-equation solver;
here every one is compared with the textbook computation (explicit loops, the full Jacobian
matrix, mpmath at 60 digits where float64 itself would cancel), on random and on adversarial
instances (identical and near-identical vectors, a dominant token, underflowing weights).
"""

from itertools import combinations

import mpmath
import numpy as np
import pytest

from attnbounds.theory.mathematics import normalisers as nz
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.quantities import compute, interval
from attnbounds.theory.mathematics.quantities.jacobian import top_eigenvalue

EMBEDDINGS = ["gaussian", "identical", "near-identical", "dominant-token"]


def _instance(seed, kind, B=4, L=7, N=3, d=3, T=0.7, normaliser=None):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(B, L)) * 1.5
    x = rng.normal(size=(B, L, d))
    if kind == "identical":
        x = np.repeat(x[:, :1], L, axis=1)
    elif kind == "near-identical":
        x = np.repeat(x[:, :1], L, axis=1) + 1e-9 * rng.normal(size=(B, L, d))
    elif kind == "dominant-token":
        logits[:, 0] += 40.0
    return Instance.from_logits(logits, normaliser or nz.softmax(T), x=x, N=N)


def _loops(inst, b):
    a, x = inst.alpha[b], inst.x[b]
    sel = [i for i in range(inst.L) if inst.mask[b, i]]
    out = [i for i in range(inst.L) if not inst.mask[b, i]]
    s = sum((a[j] * x[j] for j in sel), np.zeros(x.shape[1]))
    return a, x, sel, out, s


def _close(fast, ref, scale):
    assert abs(fast - ref) <= 1e-12 * scale, (fast, ref, scale)


@pytest.mark.parametrize("kind", EMBEDDINGS)
@pytest.mark.parametrize("N", [1, 3, 7])
def test_fixed_set_kernels_match_loops(kind, N):
    inst = _instance(1, kind, N=N)
    fast = {q: compute(q, inst) for q in ("d_1", "dtilde_R1", "dtilde_R2", "max_norm")}
    for b in range(inst.B):
        a, x, sel, out, s = _loops(inst, b)
        scale = sum(np.linalg.norm(a[i] * x[i]) for i in range(inst.L)) + inst.L * np.linalg.norm(s) + 1.0
        _close(fast["d_1"][b], max((np.linalg.norm(x[i] - x[j]) for i in out for j in sel), default=0.0),
               np.abs(x).max())
        _close(fast["dtilde_R1"][b], sum(np.linalg.norm(a[i] * x[i] - s) for i in out), scale)
        _close(fast["dtilde_R2"][b], np.linalg.norm(sum((a[i] * x[i] for i in out), np.zeros(x.shape[1])) - s), scale)
        _close(fast["max_norm"][b], max(np.linalg.norm(x[j]) for j in sel), 1.0)


def test_gram_kernels_keep_relative_accuracy_when_vectors_nearly_coincide():
    # alpha_i x_i - s is ~1e-9 of the vectors: the Gram form alone would return noise of size 1e-8
    inst = _instance(2, "near-identical", N=1, L=2, B=6, T=1e6)
    for b in range(inst.B):
        a, x, sel, out, s = _loops(inst, b)
        exact = sum(np.linalg.norm(a[i] * x[i] - s) for i in out)
        assert compute("dtilde_R1", inst)[b] == pytest.approx(exact, rel=1e-6)
        assert compute("d_1", inst)[b] == pytest.approx(np.linalg.norm(x[0] - x[1]), rel=1e-6)


@pytest.mark.parametrize("kind", EMBEDDINGS)
def test_subset_expectations_match_enumeration_loops(kind):
    inst = _instance(3, kind, L=6, N=2)
    e1, e2 = interval("E_dtilde_R1", inst), interval("E_dtilde_R2", inst)
    np.testing.assert_array_equal(e1[0], e1[1])  # enumerated: exact, zero width
    for b in range(inst.B):
        y = inst.alpha[b][:, None] * inst.x[b]
        r1, r2 = [], []
        for S in combinations(range(inst.L), inst.N):
            s = y[list(S)].sum(0)
            r1.append(sum(np.linalg.norm(y[i] - s) for i in range(inst.L) if i not in S))
            r2.append(np.linalg.norm(y.sum(0) - 2 * s))
        scale = inst.L * np.abs(y).sum()
        _close(e1[0][b], np.mean(r1), scale)
        _close(e2[0][b], np.mean(r2), scale)


@pytest.mark.parametrize("kind", EMBEDDINGS)
def test_jensen_gap_bound_matches_loop(kind):
    inst = _instance(4, kind, L=6, N=2)
    L, N = inst.L, inst.N
    fast = compute("jensen_gap_bound", inst)
    for b in range(inst.B):
        y = inst.alpha[b][:, None] * inst.x[b]
        total = 0.0
        for i in range(L):
            rest = np.delete(y, i, axis=0)
            var = ((rest - rest.mean(0)) ** 2).sum(-1).mean()
            total += np.sqrt(N * (L - 1 - N) / (L - 2) * var)
        _close(fast[b], (L - N) / L * total, np.abs(y).sum() + 1e-300)


def _mp_jacobian(logits, T):
    l = [mpmath.mpf(float(v)) / mpmath.mpf(T) for v in logits]
    top = max(l)
    e = [mpmath.exp(v - top) for v in l]
    a = [v / sum(e) for v in e]
    n = len(a)
    # 1 - a_j as the sum of the other weights: exact at 60 digits even when a_j = 1 - 1e-300
    rest = [sum(e[:j] + e[j + 1:]) / sum(e) for j in range(n)]
    return mpmath.matrix([[a[i] * (rest[j] if i == j else -a[j]) / mpmath.mpf(T) for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("case", range(24))
def test_softmax_jacobian_norms_match_60_digit_reference(case):
    mpmath.mp.dps = 60
    rng = np.random.default_rng(case)
    L = int(rng.integers(1, 7))
    T = float(10 ** rng.uniform(-3, 1))
    pool = [-1e3, 1e3, 999.0, -999.0, 0.0, 0.5, 1e-3]
    logits = rng.choice(pool, size=(1, L)) if case % 2 else rng.normal(size=(1, L)) * 10 ** rng.uniform(-3, 1)
    inst = Instance.from_logits(logits, nz.softmax(T))
    J = _mp_jacobian(logits[0], T)
    ref = {
        "J_spectral": max((abs(v) for v in mpmath.eigsy(J)[0]), default=0) if L > 1 else 0,
        "J_frobenius": mpmath.sqrt(sum(J[i, j] ** 2 for i in range(L) for j in range(L))),
        "J_row": max(mpmath.sqrt(sum(J[i, j] ** 2 for j in range(L))) for i in range(L)),
        "J_entry": max(abs(J[i, j]) for i in range(L) for j in range(L)),
    }
    for name, value in ref.items():
        # the weights themselves carry a relative error of about |l / T| * 1e-16
        tol = 1e-12 + 4e-16 * np.abs(logits).max() / T
        assert compute(name, inst)[0] == pytest.approx(float(value), rel=tol, abs=1e-300), name


@pytest.mark.parametrize("name", ["softplus", "exp_poly", "shifted_sigmoid", "ssmax"])
def test_ratio_jacobian_norms_match_the_full_matrix(name):
    rng = np.random.default_rng(5)
    n = nz.make(name, T=0.8)
    inst = Instance.from_logits(rng.normal(size=(6, 5)) * 2, n)
    J = n.jacobian(inst.logits)
    np.testing.assert_allclose(compute("J_spectral", inst), np.linalg.norm(J, ord=2, axis=(1, 2)), rtol=1e-10)
    np.testing.assert_allclose(compute("J_frobenius", inst), np.linalg.norm(J, axis=(1, 2)), rtol=1e-10)
    np.testing.assert_allclose(compute("J_row", inst), np.linalg.norm(J, axis=2).max(-1), rtol=1e-10)
    np.testing.assert_allclose(compute("J_entry", inst), np.abs(J).max(axis=(1, 2)), rtol=1e-10)


def test_top_eigenvalue_matches_eigvalsh_including_ties_and_zero_weights():
    rng = np.random.default_rng(6)
    rows = [rng.dirichlet(np.ones(5)) for _ in range(20)]
    rows += [np.array([0.5, 0.5, 0, 0, 0]), np.array([1.0, 0, 0, 0, 0]), np.full(5, 0.2),
             np.array([0.4, 0.4, 0.1, 0.1, 0.0])]
    a = np.array(rows)
    r = 1.0 - a
    ref = [np.linalg.eigvalsh(np.diag(row) - np.outer(row, row)).max() for row in a]
    np.testing.assert_allclose(top_eigenvalue(a, r, np.ones_like(a)), ref, rtol=1e-12, atol=1e-16)


def test_l2_quantities_do_not_underflow():
    # weights and derivatives near 1e-288: their squares underflow, the norms must not
    inst = Instance.from_logits(np.array([[999.0, -999.0, -999.0]]), nz.shifted_sigmoid(T=1.5))
    g = inst.normaliser.dlog_F_values(inst.logits)
    assert 0 < compute("dF_l2", inst)[0] == pytest.approx(np.hypot.reduce((inst.alpha * g)[0]), rel=1e-12)
    J = inst.normaliser.jacobian(inst.logits)[0]
    assert 0 < compute("J_frobenius", inst)[0] == pytest.approx(np.hypot.reduce(J.ravel()), rel=1e-12)


def test_coverage_matches_the_closed_form_for_every_head_count():
    p = np.array([0.8, 0.1, 0.5, 0.99, 0.8])
    H = np.array([3, 1, 7, 2, 5])
    inst = Instance.from_weights(np.full((5, 2), 0.5), p=p, H=H)
    np.testing.assert_allclose(compute("coverage_enum", inst), 1 - (1 - p) ** H, rtol=1e-13)


def test_fixed_set_kernels_hold_when_the_squares_overflow():
    # ||x||^2 overflows at 1e160: the Gram forms cannot rank or measure these pairs, the direct differences can
    base = _instance(5, "gaussian", N=2)
    big = 1e160
    inst = Instance.from_logits(base.logits, nz.softmax(0.7), x=base.x * big, N=2)
    d_1, dtilde = compute("d_1", inst), compute("dtilde_R1", inst)
    for b in range(inst.B):
        a, x, sel, out, s = _loops(base, b)  # the same instance at scale 1
        assert d_1[b] / big == pytest.approx(max(np.linalg.norm(x[i] - x[j]) for i in out for j in sel), rel=1e-12)
        assert dtilde[b] / big == pytest.approx(sum(np.linalg.norm(a[i] * x[i] - s) for i in out), rel=1e-12)
