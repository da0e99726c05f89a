"""The batched kernels of every query row against the float forms of the theory quantities (ties included)."""

from __future__ import annotations

import numpy as np
import pytest

from attnbounds.empirical import kernels
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.quantities import compute


def _rows(concentration: float, R: int = 5, T: int = 40, d: int = 6, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Causal weights ``(R, T, T)`` (ties in some rows) and token vectors ``(R, T, d)``."""
    rng = np.random.default_rng(seed)
    A = np.zeros((R, T, T))
    for t in range(T):
        A[:, t, : t + 1] = rng.dirichlet(np.full(t + 1, concentration), size=R)
    A[0, :, :] = np.tril(np.ones((T, T))) / np.arange(1, T + 1)[:, None]  # uniform rows: every weight tied
    A[1, 20, :4] = A[1, 20, 4]  # ties at the top-N boundary, broken towards the lower index
    A[1, 20, :21] /= A[1, 20, :21].sum()
    x = rng.standard_normal((R, T, d))
    x[2, 5] = x[2, 3]  # two equal token vectors: delta = 0
    return A, x


@pytest.mark.parametrize("concentration", [0.05, 1.0, 50.0])
@pytest.mark.parametrize("ell", [2, 7, 21, 40])
def test_scan_and_d1_equal_the_float_forms(concentration: float, ell: int) -> None:
    A, x = _rows(concentration)
    t = ell - 1
    batch = kernels.Batch(A[:, t, :ell].copy(), x[:, :ell].copy())
    record = kernels.Record(x)
    Ns = np.array([1, 2, 3, 5, 10, 20, 39])
    scan = kernels.scan(batch, Ns)
    d1 = kernels.d_1(batch, record, Ns)
    for k, N in enumerate(Ns):
        if N >= ell:
            assert all(np.isnan(scan[name][:, k]).all() for name in kernels.SCAN_NAMES) and np.isnan(d1[:, k]).all()
            continue
        inst = Instance.from_weights(batch.alpha, x=x[:, :ell], N=int(N))
        for name in kernels.SCAN_NAMES:
            np.testing.assert_allclose(scan[name][:, k], compute(name, inst), rtol=1e-10, atol=1e-13,
                                       err_msg=f"{name} N={N} l={ell}")
        np.testing.assert_allclose(d1[:, k], compute("d_1", inst), rtol=1e-12, err_msg=f"d_1 N={N} l={ell}")


def test_a_batch_reading_its_record_agrees_with_one_computing_per_row() -> None:
    """The record's per-token numbers (squared norms, prefix sums, transposed vectors) serve a row as its own would."""
    A, x = _rows(1.0, T=40, d=6)
    record = kernels.Record(x)
    Ns = np.array([1, 3, 10, 20])
    for ell in (2, 9, 33):
        alone = kernels.Batch(A[:, ell - 1, :ell].copy(), x[:, :ell].copy())
        shared = kernels.Batch(A[:, ell - 1, :ell].copy(), x[:, :ell], record)
        np.testing.assert_array_equal(shared.xx, alone.xx)
        np.testing.assert_array_equal(shared.mean, alone.mean)
        np.testing.assert_allclose(shared.mean, x[:, :ell].mean(1), rtol=1e-14)
        got, ref = kernels.scan(shared, Ns), kernels.scan(alone, Ns)
        for name in kernels.SCAN_NAMES:
            np.testing.assert_allclose(got[name], ref[name], rtol=1e-12, atol=1e-15, err_msg=name)


def test_a_scan_at_some_N_gives_the_numbers_of_a_full_scan() -> None:
    A, x = _rows(1.0, T=40, d=6)
    Ns = np.array([1, 2, 3, 5, 10, 20, 39])
    wanted = np.array([True, False, True, False, False, True, True])
    for ell in (3, 21, 40):
        full = kernels.scan(kernels.Batch(A[:, ell - 1, :ell].copy(), x[:, :ell].copy()), Ns)
        some = kernels.scan(kernels.Batch(A[:, ell - 1, :ell].copy(), x[:, :ell].copy()), Ns, wanted)
        for name in kernels.SCAN_NAMES:
            np.testing.assert_array_equal(some[name][:, wanted], full[name][:, wanted], err_msg=name)
            assert np.isnan(some[name][:, ~wanted]).all()


def test_closest_pairs_equal_delta_min() -> None:
    _, x = _rows(1.0)
    sphere = x / np.linalg.norm(x, axis=-1, keepdims=True)
    record = kernels.Record(sphere)
    delta = record.closest_pairs
    assert np.isinf(delta[:, 0]).all()
    for ell in (2, 3, 6, 17, 40):
        inst = Instance.from_weights(np.full((5, ell), 1.0 / ell), x=sphere[:, :ell])
        np.testing.assert_allclose(delta[:, ell - 1], compute("delta_min", inst), rtol=1e-12, atol=1e-15)
    assert delta[2, 5] == 0.0  # the equal pair, from token 6 on


@pytest.mark.parametrize("concentration", [0.05, 1.0])
def test_separation_and_xi_equal_the_float_forms(concentration: float) -> None:
    A, x = _rows(concentration)
    sphere = 2.0 * x / np.linalg.norm(x, axis=-1, keepdims=True)
    ell = 33
    batch = kernels.Batch(A[:, ell - 1, :ell].copy(), sphere[:, :ell].copy())
    delta = kernels.Record(sphere).closest_pairs[:, ell - 1]
    Ns = np.array([1, 4, 16, 32, 40])
    sep = kernels.separation(batch, Ns, 2.0)
    compared = 0
    for k, N in enumerate(Ns):
        if N >= ell:
            assert np.isnan(sep["r"][:, k]).all()
            continue
        inst = Instance.from_weights(batch.alpha, x=sphere[:, :ell], N=int(N), M=2.0, delta=delta)
        r = compute("r_paper", inst)
        np.testing.assert_allclose(sep["r"][:, k], r, rtol=1e-12)
        inst = inst.with_params(r=r)
        dist = compute("context_distance", inst)
        # a selected token at the ball's edge within rounding is in or out depending on summation order: rows
        # without one must agree exactly
        clear = np.all(~inst.mask | (np.abs(dist - r[:, None]) > 1e-12 * r[:, None]), axis=1)
        compared += int(clear.sum())
        for name in ("Ns_relaxed", "Ns_full"):
            np.testing.assert_array_equal(sep[name][clear, k], compute(name, inst)[clear], err_msg=f"{name} N={N}")
        np.testing.assert_array_equal(sep["inside"][clear, k], (inst.mask & (dist <= r[:, None]))[clear])
        ref = compute("xi", inst)  # (R, ell): values on the selected tokens
        got = kernels.xi(batch.a_sorted[:, :N], 2.0, delta)
        np.testing.assert_allclose(got, np.take_along_axis(ref, batch.order[:, :N], axis=1), rtol=1e-12, atol=1e-15)
    assert compared >= 5


def test_g_fd_equals_the_float_form() -> None:
    rng = np.random.default_rng(4)
    logits = rng.standard_normal((6, 30)) * 8
    logits[0] = 0.0
    v = rng.standard_normal((6, 30))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    T, eps = np.array([1e-3, 0.05, 1.0, 30.0]), np.array([1e-3, 0.1, 10.0])
    g = kernels.g_fd(logits, v, T, eps)
    for i, t in enumerate(T):
        for j, e in enumerate(eps):
            inst = Instance.from_logits(logits, softmax(T=t), arrays={"v": v}, eps=e)
            np.testing.assert_allclose(g[:, i, j], compute("g_fd", inst), rtol=1e-11, atol=1e-14)


@pytest.mark.parametrize("rows", [1, 2, 3])
def test_kernels_chunked_by_rows_give_the_numbers_of_the_whole_batch(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The passes over (rows x N x tokens) arrays run on chunks of rows (:data:`kernels.CHUNK_ELEMENTS`: one, two,
    three rows at once); every number is the whole batch's, bit for bit, with or without a record."""
    A, x = _rows(1.0, R=7, T=40, d=6)
    sphere = x / np.linalg.norm(x, axis=-1, keepdims=True)
    Ns = np.array([1, 3, 10, 20, 39])
    rng = np.random.default_rng(5)
    logits = 8.0 * rng.standard_normal((7, 40))
    logits[3, :20] = 0.0
    v = rng.standard_normal((7, 40))
    T, eps = np.array([1e-3, 0.05, 1.0, 30.0]), np.array([1e-3, 0.1, 10.0])

    def run() -> list[np.ndarray]:
        out = []
        for ell in (2, 21, 40):
            for record in (None, kernels.Record(x), kernels.Record(sphere, transposed_copy=False)):
                xs = x if record is None else record.x
                batch = kernels.Batch(A[:, ell - 1, :ell].copy(), xs[:, :ell], record)
                out += [*kernels.scan(batch, Ns).values(), *kernels.separation(batch, Ns, 1.0).values()]
            out.append(kernels.g_fd(logits[:, :ell], v[:, :ell], T, eps))
        return out

    monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", 1 << 40)
    whole = run()
    monkeypatch.setattr(kernels, "CHUNK_ELEMENTS", rows * T.size * 4 * 40)  # g_fd's rows of 40 tokens: `rows` a chunk
    assert len(kernels.row_chunks(7, T.size * 4 * 40)) == -(-7 // rows)
    for got, ref in zip(run(), whole, strict=True):
        np.testing.assert_array_equal(got, ref)


def test_one_thread_runs_torch_on_one_thread_and_restores_it_after_an_error() -> None:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match="inside"):
            with kernels.one_thread():
                assert torch.get_num_threads() == 1
                raise RuntimeError("inside")
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_a_non_selected_token_at_the_context_vector_takes_the_exact_path() -> None:
    """A token outside the top N whose ``alpha_i x_i`` equals ``s_N`` has distance 0, whose Gram form cancels: the
    compiled loops recompute it from the vectors (the radius of Theorem 2's ball is then exactly 0) and agree with
    the float forms."""
    rng = np.random.default_rng(7)
    x = 1e3 * rng.standard_normal((3, 6, 4)) + rng.standard_normal((3, 6, 4))
    x[:, 3] = x[:, 0]  # token 3 repeats token 0 with the same weight: a_3 x_3 = s_1
    a = np.full((3, 6), 1.0 / 6)  # all tied: token 0 is first in weight order
    batch = kernels.Batch(a.copy(), x.copy())
    Ns = np.array([1, 2])
    scan, sep = kernels.scan(batch, Ns), kernels.separation(batch, Ns, 1.0)
    for k, N in enumerate(Ns):
        inst = Instance.from_weights(batch.alpha, x=x, N=int(N))
        for name in ("dtilde_R1", "dtilde_R2", "J_scaled_weighted"):
            np.testing.assert_allclose(scan[name][:, k], compute(name, inst), rtol=1e-12, err_msg=name)
        np.testing.assert_allclose(sep["r"][:, k], compute("r_paper", inst), rtol=1e-12, atol=1e-12)
    assert (sep["r"][:, 0] == 0.0).all() and (sep["Ns_relaxed"][:, 0] == 1.0).all()


def test_a_nan_token_makes_its_row_nan_and_leaves_the_others() -> None:
    A, x = _rows(1.0, R=4, T=24, d=3)
    x = x.copy()
    x[1, 4] = np.nan
    ell = 12
    clean = kernels.Batch(A[[0, 2, 3], ell - 1, :ell].copy(), x[[0, 2, 3], :ell].copy())
    batch = kernels.Batch(A[:, ell - 1, :ell].copy(), x[:, :ell].copy())
    Ns = np.array([1, 3, 5])
    got, ref = kernels.scan(batch, Ns), kernels.scan(clean, Ns)
    for name in ("dtilde_R1", *kernels.J_NAMES):
        assert np.isnan(got[name][1]).all(), name
        np.testing.assert_array_equal(got[name][[0, 2, 3]], ref[name], err_msg=name)
    sep = kernels.separation(batch, Ns, 1.0)
    assert np.isnan(sep["r"][1]).all() and (sep["Ns_relaxed"][1] == 0).all()
    assert np.isnan(kernels.d_1(batch, kernels.Record(x), Ns)[1]).all()


def test_g_fd_of_tiny_differences_does_not_underflow() -> None:
    """At a low temperature the two softmax vectors differ by about 1e-170 per entry, whose squares underflow: the
    norm is taken scaled by the largest difference, as the float form takes it."""
    logits = np.array([[0.0, -0.4, -0.45, -5.0]])
    v = np.array([[0.0, 1.0, 0.0, 0.0]])
    T, eps = np.array([1e-3]), np.array([1e-3])
    g = kernels.g_fd(logits, v, T, eps)
    inst = Instance.from_logits(logits, softmax(T=1e-3), arrays={"v": v}, eps=1e-3)
    ref = compute("g_fd", inst)
    assert 0.0 < ref[0] < 1e-150
    np.testing.assert_allclose(g[:, 0, 0], ref, rtol=1e-10)


def test_the_N_may_come_in_any_order() -> None:
    """The context vectors are running sums over ascending N; N asked in another order (or twice) get the numbers
    of their own N, not those of their position (the context vectors bit for bit; what BLAS multiplies in another
    row of the same product, to rounding)."""
    A, x = _rows(0.05, R=4, T=30, d=5)
    sphere = x / np.linalg.norm(x, axis=-1, keepdims=True)
    ell = 30
    batch = kernels.Batch(A[:, ell - 1, :ell].copy(), sphere[:, :ell].copy())
    ascending, shuffled = np.array([1, 4, 4, 16]), np.array([16, 4, 1, 4])
    at = [int(np.flatnonzero(ascending == N)[0]) for N in shuffled]
    for kernel in (lambda Ns: kernels.scan(batch, Ns), lambda Ns: kernels.separation(batch, Ns, 1.0)):
        ref, got = kernel(ascending), kernel(shuffled)
        for name, values in got.items():
            np.testing.assert_allclose(values, ref[name][:, at], rtol=1e-14, atol=0.0, err_msg=name)
    S, abar = batch.context(shuffled)
    S_ref, abar_ref = batch.context(ascending)
    np.testing.assert_array_equal(S, S_ref[:, at])
    np.testing.assert_array_equal(abar, abar_ref[:, at])
