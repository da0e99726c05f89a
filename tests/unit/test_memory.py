"""Memory: a batch's size is estimated before it is allocated; chunked where the computation allows, refused
otherwise with the size, the limit and ATTNBOUNDS_MEMORY_GB named. Never a MemoryError, never the OOM killer.

Every refusal here happens before the first large array exists: the tests run in a few MB (``ru_maxrss``)."""

import resource

import numpy as np
import pytest

from attnbounds.theory.mathematics import memory
from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.quantities import compute
from attnbounds.theory.mathematics.quantities.theorem2 import sphere_embeddings

#: the resident memory a refused case may add (the instance itself is a few MB)
SLACK_MB = 200


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _refused(fn, *what: str) -> None:
    before = _rss_mb()
    with pytest.raises(InvalidArgument) as info:
        fn()
    message = str(info.value)
    for part in (*what, "GiB", "memory limit", "ATTNBOUNDS_MEMORY_GB"):
        assert part in message, message
    assert _rss_mb() - before < SLACK_MB


@pytest.fixture(scope="module")
def long_logits() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((1, 100_000))


@pytest.mark.parametrize("normaliser", ["sparsemax", "entmax15", "sigmoid", "softpick", "sa_softmax"])
@pytest.mark.parametrize("quantity", ["J_spectral", "J_frobenius", "J_row", "J_entry"])
def test_dense_jacobians_of_long_contexts_are_refused(long_logits, normaliser, quantity):
    inst = Instance.from_logits(long_logits, nm.make(normaliser, T=1.0))
    _refused(lambda: compute(quantity, inst), "100000 x 100000 Jacobian")


def test_reduced_jacobians_of_long_non_softmax_rows_are_refused():
    logits = np.random.default_rng(1).standard_normal((1, 30_000))
    inst = Instance.from_logits(logits, nm.make("softplus", T=1.0))  # (log F)' varies: no closed form
    _refused(lambda: compute("J_spectral", inst), "30000 x 30000 Jacobians")
    classes = Instance.from_logits(logits[:, :3], nm.make("softplus", T=1.0), counts=[[10**6, 10**6, 10**6]])
    assert np.isfinite(compute("J_spectral", classes)).all()  # the same context length as token classes: cheap


def test_pairwise_distances_of_long_contexts_are_refused(long_logits):
    x = np.random.default_rng(2).standard_normal((1, 100_000, 2))
    inst = Instance.from_logits(long_logits, nm.softmax(1.0), x=x, N=50_000)
    _refused(lambda: compute("d_1", inst), "d_1 over 100000 x 50000")
    _refused(lambda: compute("delta_min", inst), "delta_min over 100000 x 100000")


def test_sphere_sampling_refuses_a_separation_check_too_large():
    rng = np.random.default_rng(3)
    _refused(lambda: sphere_embeddings(rng, (2,), 50_000, 3, np.ones(2), np.full(2, 1e-3)), "separation of 50000")
    _refused(lambda: sphere_embeddings(rng, (10**6,), 1000, 16, np.ones(10**6), np.zeros(10**6)), "sphere points")
    assert sphere_embeddings(rng, (2,), 50_000, 3, np.ones(2), np.zeros(2)).shape == (2, 50_000, 3)  # no check needed


def test_expected_distance_over_many_subsets_is_chunked_not_refused(monkeypatch):
    """Half of a long context selected: sampled count vectors, summed a chunk of them at a time (the issue's
    N = 50000 case, scaled down), with the same value as in one piece."""
    from attnbounds.theory.mathematics.quantities import _float

    monkeypatch.setenv("ATTNBOUNDS_MEMORY_GB", "0.5")
    rng = np.random.default_rng(4)
    inst = Instance.from_logits(rng.standard_normal((1, 20_000)), nm.softmax(1.0), x=rng.standard_normal((1, 20_000, 2)),
                                N=10_000, mc_draws=600)  # 600 x 20000 numbers: three chunks
    before = _rss_mb()
    chunked = compute("E_dtilde_R1", inst)
    assert _rss_mb() - before < 600
    monkeypatch.setattr(_float, "CHUNK_ELEMENTS", 1 << 26)
    whole = compute("E_dtilde_R1", Instance.from_logits(inst.logits, nm.softmax(1.0), x=inst.x, N=10_000, mc_draws=600))
    assert np.allclose(chunked, whole, rtol=1e-12, atol=0)
    monkeypatch.setenv("ATTNBOUNDS_MEMORY_GB", "0.01")
    _refused(lambda: compute("E_dtilde_R1", inst.with_params(mc_draws=2000)), "sampled count vectors")


def test_enumerated_heads_are_capped_with_a_reason():
    inst = Instance.from_logits(np.zeros((1, 2)), nm.softmax(1.0), p=0.5, H=25)
    with pytest.raises(AttnBoundsError, match=r"in \[0, 20\], got H=25 \(the domain of coverage_enum"):
        compute("coverage_enum", inst)


def test_the_limit_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATTNBOUNDS_MEMORY_GB", "64")
    memory.check(32 * 2**30, "a large batch")
    for bad in ("lots", "-1", "0", "nan"):
        monkeypatch.setenv("ATTNBOUNDS_MEMORY_GB", bad)
        with pytest.raises(InvalidArgument, match="ATTNBOUNDS_MEMORY_GB"):
            memory.check(1, "anything")


def test_blas_runs_on_one_thread_inside_the_block_and_is_restored():
    """Searches and certificates hold numpy's BLAS to one thread (on a loaded machine OpenBLAS's threads spin: 16 SVDs
    of 128 x 128 took 10 s instead of 0.01 s)."""
    from attnbounds.theory.mathematics import memory

    blas = memory._openblas()
    if blas is None:
        pytest.skip("numpy's BLAS is not OpenBLAS here")
    before = blas[0]()
    with memory.blas_threads(1):
        assert blas[0]() == 1
    assert blas[0]() == before
