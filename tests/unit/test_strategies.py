"""The strategies keep their promises: ranges, separations, bounded logits, hypotheses of every reading."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as hs

from attnbounds.theory.mathematics import families, registry, strategies
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS, Normaliser

few = settings(max_examples=min(settings.default.max_examples, 15))


@given(strategies.temperatures())
def test_temperatures_stay_in_range(T: float) -> None:
    assert strategies.T_RANGE[0] <= T <= strategies.T_RANGE[1]


@given(hs.data())
def test_lengths_and_selection_sizes(data: hs.DataObject) -> None:
    lo = data.draw(hs.integers(1, strategies.MAX_LENGTH))
    hi = data.draw(hs.integers(lo, strategies.MAX_LENGTH))
    L = data.draw(strategies.lengths(lo, hi))
    assert lo <= L <= hi
    assert 1 <= data.draw(strategies.selection_sizes(L)) <= L


def test_lengths_reach_both_ends() -> None:
    for end in (1, strategies.MAX_LENGTH):
        assert find(strategies.lengths(), lambda L, end=end: L == end, settings=settings(database=None)) == end
    with pytest.raises(AttnBoundsError, match="min_L"):
        strategies.lengths(5, 4)


@given(strategies.sphere_embeddings())
def test_sphere_embeddings_are_on_the_sphere_and_separated(drawn: tuple[np.ndarray, float, float]) -> None:
    x, M, delta = drawn
    L, d = x.shape[1:]
    assert np.allclose(np.linalg.norm(x, axis=-1), M, rtol=1e-12)
    assert 0 <= delta <= families.feasible_delta(L, d, M)
    if L > 1:
        i, j = np.triu_indices(L, 1)
        assert np.linalg.norm(x[:, i] - x[:, j], axis=-1).min() >= delta


def test_sphere_embeddings_refuse_an_infeasible_separation() -> None:
    with pytest.raises(AttnBoundsError, match="feasible"):
        strategies.sphere_embeddings(L=50, d=2, M=1.0, delta=1.5).example()


@given(strategies.queries_keys())
def test_queries_keys_bound_every_logit(qka: tuple[np.ndarray, np.ndarray, float]) -> None:
    q, k, a = qka
    logits = np.einsum("bd,bld->bl", q, k)
    assert np.all(np.abs(logits) <= a)
    reach = np.linalg.norm(q, axis=-1) * np.linalg.norm(k, axis=-1).max(-1)
    assert np.allclose(reach, a, rtol=1e-12)  # one key per row at the full norm


@given(hs.floats(1e-12, 1.0), hs.integers(2, 64), strategies.seeds())
def test_near_tie_logits_have_the_chosen_gap(gap: float, L: int, seed: int) -> None:
    lg = families.LOGIT_FAMILIES["near-tie"](np.random.default_rng(seed), families.Spec(B=3, L=L, N=1, gap=gap))
    top = -np.sort(-lg, axis=-1)
    assert np.all(top[:, 0] - top[:, 1] == gap)


@given(strategies.dominant_logits(batch=4, L=16))
def test_dominant_logits_have_one_dominant_entry(lg: np.ndarray) -> None:
    top = -np.sort(-lg, axis=-1)
    assert np.all(top[:, 0] > top[:, 1])


@given(hs.sampled_from(sorted(families.EMBEDDING_FAMILIES)), hs.data())
def test_embedding_families_are_what_they_say(family: str, data: hs.DataObject) -> None:
    x = data.draw(strategies.embeddings(batch=3, L=6, d=3, family=family, scale=1.0))
    assert x.shape == (3, 6, 3) and np.all(np.isfinite(x))
    if family == "identical":
        assert np.all(x == x[:, :1])
    if family == "near-identical":
        assert np.abs(x - x[:, :1]).max() < 1e-5
    if family == "antipodal":
        assert np.allclose(x[:, :3], -x[:, 3:])
    if family == "clustered":  # two tight clusters: every token within 0.2 of token 0 or of the token farthest from it
        far = np.linalg.norm(x - x[:, :1], axis=-1).argmax(-1)
        to_far = np.linalg.norm(x - x[np.arange(3), far][:, None], axis=-1)
        assert np.all(np.minimum(np.linalg.norm(x - x[:, :1], axis=-1), to_far) < 0.2)


def test_outliers_are_one_gaussian_token_made_100_times_longer() -> None:
    spec = families.Spec(B=5, L=7, N=2, d=3)
    mask = np.zeros((5, 7), dtype=bool)
    plain = families.EMBEDDING_FAMILIES["gaussian"](np.random.default_rng(3), spec, mask)
    loud = families.EMBEDDING_FAMILIES["outliers"](np.random.default_rng(3), spec, mask)
    ratio = np.linalg.norm(loud, axis=-1) / np.linalg.norm(plain, axis=-1)
    assert np.allclose(np.sort(ratio, axis=-1)[:, -1], 100.0, rtol=1e-12)
    assert np.all(np.sort(ratio, axis=-1)[:, :-1] == 1.0)


@given(hs.data())
def test_top_n_sets_break_ties_at_random_and_stay_top_n(data: hs.DataObject) -> None:
    alpha = np.array([[0.25, 0.25, 0.25, 0.25], [0.4, 0.2, 0.2, 0.2]])
    mask = data.draw(strategies.top_n_sets(alpha, 2))
    assert np.all(mask.sum(-1) == 2) and mask[1, 0]
    inst = Instance.from_weights(alpha, N=2, selection=mask)
    assert np.all(inst.is_top_n)


def test_top_n_sets_reach_every_tied_choice() -> None:
    alpha = np.full((1, 4), 0.25)
    seen = set()

    @settings(max_examples=60, derandomize=True, database=None)
    @given(strategies.top_n_sets(alpha, 2))
    def collect(mask: np.ndarray) -> None:
        seen.add(tuple(np.flatnonzero(mask[0])))

    collect()
    assert len(seen) >= 3


@given(hs.integers(1, 40).flatmap(lambda L: hs.tuples(hs.just(L), strategies.random_subsets(5, L))))
def test_random_subsets_pick_n_tokens(drawn: tuple[int, np.ndarray]) -> None:
    L, mask = drawn
    assert mask.shape == (5, L) and len(set(mask.sum(-1))) == 1 and 1 <= mask.sum(-1)[0] <= L


@given(hs.data())
def test_normalisers_come_from_the_family(data: hs.DataObject) -> None:
    n = data.draw(strategies.normalisers())
    assert isinstance(n, Normaliser) and n.name in CONSTRUCTORS and n.name != "relu"
    w = n.weights(np.linspace(-1, 1, 5)[None])
    assert np.all(np.isfinite(w))


@pytest.mark.parametrize("statement_id", registry.ids())
def test_attention_instance_satisfies_every_hypothesis(statement_id: str) -> None:
    statement = registry.get(statement_id)

    @few
    @given(strategies.attention_instance(statement))
    def check(inst: Instance) -> None:
        ok, failed = statement.check_hypotheses(statement.prepare(inst))
        assert ok.all(), f"{statement_id}: the strategy produced instances outside {set(sum(failed, ()))}"
        assert inst.B <= strategies.size_limits(statement)[1]
        assert inst.L <= strategies.size_limits(statement)[0]

    check()


@few
@given(strategies.attention_instance(selection="any"))
def test_attention_instance_without_a_statement_serves_every_reading(inst: Instance) -> None:
    for statement in registry.all_statements():
        if inst.q is None and {"Delta_own", "Delta_max"} & set(statement.bindings.values()):
            continue  # Corollary 1 needs the query and keys: drawn half the time
        ev = statement.evaluate(inst)
        assert ev.lhs.shape == (inst.B,)


@few
@given(strategies.specs(registry.get("theorem1.fixed[R1,g1]")))
def test_build_is_reproducible_from_the_spec(spec: families.Spec) -> None:
    s = registry.get("theorem1.fixed[R1,g1]")
    a, b = families.build(s, spec), families.build(s, spec)
    assert np.array_equal(a.logits, b.logits) and np.array_equal(a.x, b.x)


def test_size_limits_cover_long_sequences() -> None:
    assert strategies.size_limits(registry.get("lemma1"))[0] == strategies.MAX_LENGTH
    assert strategies.size_limits(registry.get("theorem2.upper[full]"))[0] <= 16
