"""Hypothesis strategies for attention instances: use them in your own property tests.

Strategies draw STRUCTURE with hypothesis (sizes, family names, scales, a seed) and build the
arrays with numpy from that seed through :mod:`attnbounds.theory.mathematics.families`: drawing large float arrays
element by element is slow and yields arrays with a handful of distinct values, while a drawn
seed gives realistic arrays and still shrinks (towards small sizes, the first family, seed 0).

Building blocks (each a hypothesis ``SearchStrategy``):

- :func:`log_uniform`, :func:`temperatures` (log-uniform over ``[1e-4, 1e3]``), :func:`lengths`
  (``1..4096``), :func:`selection_sizes` (``N`` in ``1..L``), :func:`seeds`;
- :func:`normalisers` (the built-in and registered normalisers, with their own parameters over the test ranges
  their specifications give, filtered by a statement's hypotheses);
- :func:`logits` (every family of :data:`attnbounds.theory.mathematics.families.LOGIT_FAMILIES`), :func:`near_tie_logits`
  (the two largest at a chosen gap), :func:`dominant_logits`, :func:`queries_keys` (logits bounded
  by ``a`` through Cauchy-Schwarz);
- :func:`embeddings` (every family of :data:`attnbounds.theory.mathematics.families.EMBEDDING_FAMILIES`: Gaussian, sphere,
  clustered, (nearly) identical, antipodal pairs, large-norm outliers, split),
  :func:`sphere_embeddings` (uniform on the M-sphere with a guaranteed minimum separation);
- :func:`top_n_sets` (N largest weights, ties broken at random), :func:`random_subsets`;
- :func:`specs` (a :class:`~attnbounds.theory.mathematics.families.Spec` sized for a statement) and
  :func:`attention_instance` composing all of the above into an :class:`~attnbounds.theory.mathematics.instance.Instance`.

Example (decide rigorously: a float ``lhs > rhs`` at an equality case is rounding, not a violation)::

    from hypothesis import given
    from attnbounds.theory.mathematics import registry, strategies
    from attnbounds.theory.deciding.certify import decide

    lemma1 = registry.get("lemma1")

    @given(strategies.attention_instance(lemma1))
    def test_lemma1(inst):
        assert "violated" not in set(decide(lemma1, inst))
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as hs

from attnbounds.theory.mathematics import families
from attnbounds.theory.mathematics.errors import InvalidArgument, NotApplicable
from attnbounds.theory.mathematics.families import EMBEDDING_FAMILIES, LOGIT_FAMILIES, Spec
from attnbounds.theory.mathematics.hypotheses import smallest_length
from attnbounds.theory.mathematics.instance import Instance, top_n_mask
from attnbounds.theory.mathematics.normalisers import (CONSTRUCTORS, TEMPERATURE, Normaliser, Param, RatioNormaliser,
                                                       make, own_parameters, prototype)
from attnbounds.theory.mathematics.quantities import COSTS, sphere_embeddings as _rejection_sphere
from attnbounds.theory.mathematics.statement import Statement

__all__ = [
    "T_RANGE", "MAX_LENGTH", "log_uniform", "temperatures", "lengths", "selection_sizes", "seeds",
    "normaliser_names", "normaliser_params", "normalisers", "logits", "near_tie_logits", "dominant_logits",
    "queries_keys", "embeddings", "sphere_embeddings", "top_n_sets", "random_subsets", "size_limits",
    "specs", "attention_instance", "token_counts", "adversarial_instance",
]

#: temperatures are drawn log-uniformly over this range (normaliser kernels are stable on it)
T_RANGE = TEMPERATURE.test
#: the largest sequence length any strategy draws
MAX_LENGTH = 4096
#: embedding dimensions drawn (small ones make ties and collinearity likely)
DIMENSIONS = (1, 2, 3, 4, 8, 16, 64)


# -- scalars --------------------------------------------------------------------------------------
def log_uniform(lo: float, hi: float) -> hs.SearchStrategy[float]:
    """Floats in ``[lo, hi]`` (``0 < lo <= hi``) uniform in ``log10`` (hypothesis favours the ends)."""
    if not (0 < lo <= hi and math.isfinite(hi)):
        raise InvalidArgument(f"log_uniform needs 0 < lo <= hi < inf, got lo={lo!r}, hi={hi!r}")
    a, b = math.log10(lo), math.log10(hi)
    return hs.floats(a, b, allow_nan=False).map(lambda e: min(max(10.0**e, lo), hi))


def temperatures(lo: float = T_RANGE[0], hi: float = T_RANGE[1]) -> hs.SearchStrategy[float]:
    """Softmax temperatures, log-uniform over ``[lo, hi]`` (default ``[1e-4, 1e3]``)."""
    return log_uniform(lo, hi)


def lengths(min_L: int = 1, max_L: int = MAX_LENGTH) -> hs.SearchStrategy[int]:
    """Sequence lengths in ``[min_L, max_L]``: small ones, powers of two (and neighbours), any."""
    if not 1 <= min_L <= max_L:
        raise InvalidArgument(f"lengths needs 1 <= min_L <= max_L, got min_L={min_L}, max_L={max_L}")
    special = sorted({v for k in range(13) for v in (2**k - 1, 2**k, 2**k + 1) if min_L <= v <= max_L} | {max_L})
    return hs.one_of(hs.integers(min_L, min(max_L, min_L + 15)), hs.sampled_from(special), hs.integers(min_L, max_L))


def selection_sizes(L: int) -> hs.SearchStrategy[int]:
    """``N`` in ``1..L``, with the edge cases ``1``, ``L - 1`` and ``L`` likely."""
    if L < 1:
        raise InvalidArgument(f"selection_sizes needs L >= 1, got L={L}")
    return hs.one_of(hs.sampled_from(sorted({1, max(L - 1, 1), L})), hs.integers(1, L))


def seeds() -> hs.SearchStrategy[int]:
    """Seeds for ``numpy.random.default_rng``."""
    return hs.integers(0, 2**32 - 1)


# -- normalisers ------------------------------------------------------------------------------------
def _drawable() -> list[str]:
    """The normalisers drawn without a statement naming one: all but those whose weights need a positive logit."""
    return [n for n in CONSTRUCTORS if not prototype(n).needs_positive_logit]


def _admissible(statement: Statement | None) -> tuple[str, ...]:
    if statement is None:
        return tuple(_drawable())
    names = tuple(families.admissible_normalisers(statement))
    if not names:
        raise InvalidArgument(f"no normaliser satisfies the hypotheses of {statement.id}")
    return names


def normaliser_names(statement: Statement | None = None) -> hs.SearchStrategy[str]:
    """Names of the normalisers satisfying ``statement``'s hypotheses on the normaliser (if None: all but those whose
    weights need a positive logit, relu)."""
    return hs.sampled_from(_admissible(statement))


def _values(p: Param, lo: float, hi: float) -> hs.SearchStrategy[float]:
    return log_uniform(lo, hi) if p.log else hs.floats(lo, hi)


def normaliser_params(name: str) -> hs.SearchStrategy[tuple[tuple[str, float], ...]]:
    """The parameters of normaliser ``name`` other than ``T`` (e.g. ``b`` of exp_poly), over their test ranges
    (:class:`~attnbounds.theory.mathematics.normalisers.Param`)."""
    parts = [_values(p, *p.test).map(lambda v, k=p.name: (k, v))  # type: ignore[misc]  # lambda with loop-bound default
             for p in own_parameters(name)]
    return hs.tuples(*parts)


@hs.composite
def normalisers(draw: hs.DrawFn, statement: Statement | None = None,
                T: hs.SearchStrategy[float] | None = None) -> Normaliser:
    """A :class:`~attnbounds.theory.mathematics.normalisers.Normaliser`: name, temperature and its own parameters."""
    name = draw(normaliser_names(statement))
    return make(name, T=draw(T if T is not None else temperatures()), **dict(draw(normaliser_params(name))))


# -- arrays from a drawn seed ----------------------------------------------------------------------
def _spec(**fields: Any) -> Spec:
    """A Spec whose N is valid for any L (array builders below ignore what they do not use)."""
    fields.setdefault("N", 1)
    return Spec(**fields)


@hs.composite
def logits(draw: hs.DrawFn, batch: int = 8, L: int | None = None, family: str | None = None,
           scale: float | None = None, gap: float | None = None) -> np.ndarray:
    """Logits ``(batch, L)`` from one of :data:`~attnbounds.theory.mathematics.families.LOGIT_FAMILIES` (drawn when None)."""
    L = draw(lengths(1, 64)) if L is None else L
    family = draw(hs.sampled_from(sorted(LOGIT_FAMILIES))) if family is None else family
    scale = draw(log_uniform(1e-3, 1e2)) if scale is None else scale
    gap = draw(log_uniform(1e-12, 1.0)) if gap is None else gap
    spec = _spec(B=batch, L=L, logits=family, logit_scale=scale, gap=gap)
    return LOGIT_FAMILIES[family](np.random.default_rng(draw(seeds())), spec)


def near_tie_logits(batch: int = 8, L: int | None = None, gap: float | None = None) -> hs.SearchStrategy[np.ndarray]:
    """Logits whose two largest entries differ by exactly ``gap`` (drawn log-uniform in [1e-12, 1] when None)."""
    return logits(batch, L, "near-tie", gap=gap)


def dominant_logits(batch: int = 8, L: int | None = None, scale: float | None = None) -> hs.SearchStrategy[np.ndarray]:
    """Logits with one entry ``10 * scale`` above Gaussian noise: one weight takes almost all the mass."""
    return logits(batch, L, "dominant", scale=scale)


def _bounded_qk(rng: np.random.Generator, batch: int, L: int, d: int, a: float) -> tuple[np.ndarray, np.ndarray]:
    """Query ``(batch, d)`` and keys ``(batch, L, d)`` with ``||q|| ||k_i|| <= a (1 - 4 (d + 2) u)``."""
    shrink = 1 - 4 * (d + 2) * np.finfo(float).eps
    q = rng.standard_normal((batch, d))
    k = rng.standard_normal((batch, L, d))
    target = a * shrink * 10.0 ** rng.uniform(-2, 0, (batch, L))
    target[np.arange(batch), rng.integers(0, L, batch)] = a * shrink
    scale = target / (np.linalg.norm(q, axis=-1, keepdims=True) * np.maximum(np.linalg.norm(k, axis=-1), 1e-300))
    return q, k * scale[..., None]


@hs.composite
def queries_keys(draw: hs.DrawFn, batch: int = 8, L: int | None = None, d: int | None = None,
                 a: float | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """``(q (batch, d), k (batch, L, d), a)`` with every logit ``|q . k_i| <= a``.

    Guarantee: each key is rescaled so that ``||q|| ||k_i|| <= a (1 - 4 (d + 2) u)`` (``u`` the unit
    roundoff); Cauchy-Schwarz bounds the exact logit by that, and the shrink factor absorbs the
    rounding of the norms, the rescaling and the float dot product. Key norms spread over two
    decades, one key per row at the full norm, so the longest key differs from the others
    (Corollary 1's two readings).
    """
    L = draw(lengths(1, 64)) if L is None else L
    d = draw(hs.sampled_from(DIMENSIONS)) if d is None else d
    a = draw(log_uniform(1e-3, 1e2)) if a is None else a
    q, k = _bounded_qk(np.random.default_rng(draw(seeds())), batch, L, d, a)
    return q, k, float(a)


@hs.composite
def embeddings(draw: hs.DrawFn, batch: int = 8, L: int | None = None, d: int | None = None,
               family: str | None = None, scale: float | None = None, mask: np.ndarray | None = None) -> np.ndarray:
    """Token vectors ``(batch, L, d)`` from one of :data:`~attnbounds.theory.mathematics.families.EMBEDDING_FAMILIES`.

    The adversarial families: ``clustered`` (two tight clusters), ``identical`` and
    ``near-identical`` (all tokens equal up to 1e-7), ``antipodal`` (pairs ``u, -u``), ``outliers``
    (one token 100x longer), ``split`` / ``split-sphere`` (selected tokens at one point, the others
    at another; uses ``mask``, the selected set, drawn at random when None).
    """
    if mask is not None:
        batch, L = mask.shape
    L = draw(lengths(1, 64)) if L is None else L
    d = draw(hs.sampled_from(DIMENSIONS)) if d is None else d
    family = draw(hs.sampled_from(sorted(EMBEDDING_FAMILIES))) if family is None else family
    scale = draw(log_uniform(1e-6, 1e3)) if scale is None else scale
    rng = np.random.default_rng(draw(seeds()))
    if mask is None:
        mask = _random_masks(rng, batch, L, int(rng.integers(1, L + 1)))
    return EMBEDDING_FAMILIES[family](rng, _spec(B=batch, L=L, d=d, embeddings=family), mask) * scale


def _min_pairwise_distance(x: np.ndarray) -> np.ndarray:
    """Smallest ``||x_i - x_j||`` over pairs, from the differences themselves (not the Gram form)."""
    L = x.shape[-2]
    if L < 2:
        return np.full(x.shape[:-2], np.inf)
    i, j = np.triu_indices(L, 1)
    return np.linalg.norm(x[..., i, :] - x[..., j, :], axis=-1).min(-1)


#: relative safety margin of the rejection sampler over the requested separation
SEPARATION_SAFETY = 1e-9


@hs.composite
def sphere_embeddings(draw: hs.DrawFn, batch: int = 4, L: int | None = None, d: int | None = None,
                      M: float | None = None, delta: float | None = None) -> tuple[np.ndarray, float, float]:
    """``(x (batch, L, d), M, delta)``: points uniform on the sphere of radius M, pairwise ``>= delta``.

    Only feasible separations are drawn: ``delta = u * feasible_delta(L, d, M)`` with ``u`` in
    ``[0, 1]`` (:func:`attnbounds.theory.mathematics.families.feasible_delta`, where rejection accepts comfortably); an
    explicit ``delta`` above that raises. How the separation is guaranteed: rejection sampling
    (:func:`attnbounds.theory.mathematics.quantities.sphere_embeddings`, which is exactly Assumptions 1-2, the uniform law
    conditioned on the separation) run at ``delta (1 + 1e-9)``, so that the rounding of its Gram-form
    distances cannot accept a pair closer than ``delta``; every accepted batch is then re-checked
    with distances computed from the differences ``x_i - x_j`` directly.
    """
    L = draw(lengths(1, 64)) if L is None else L
    d = draw(hs.sampled_from([v for v in DIMENSIONS if v >= 2])) if d is None else d
    M = draw(log_uniform(1e-2, 1e2)) if M is None else M
    top = families.feasible_delta(L, d, M)
    if delta is None:
        delta = draw(hs.floats(0.0, 1.0)) * top
    elif not 0 <= delta <= top:
        raise InvalidArgument(f"delta={delta!r} is not a comfortably feasible separation for L={L}, d={d}, "
                              f"M={M!r}: allowed 0 <= delta <= {top!r} (theory.families.feasible_delta)")
    rng = np.random.default_rng(draw(seeds()))
    x = _rejection_sphere(rng, (batch,), L, d, np.full(batch, M), np.full(batch, delta * (1 + SEPARATION_SAFETY)))
    if np.any(_min_pairwise_distance(x) < delta):
        raise InvalidArgument("sphere_embeddings: a pair closer than delta survived rejection (rounding); report this")
    return x, float(M), float(delta)


def _random_masks(rng: np.random.Generator, batch: int, L: int, N: int) -> np.ndarray:
    order = np.argsort(rng.random((batch, L)), axis=-1)[:, :N]
    mask = np.zeros((batch, L), dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask


@hs.composite
def random_subsets(draw: hs.DrawFn, batch: int, L: int, N: int | None = None) -> np.ndarray:
    """Boolean masks ``(batch, L)`` of uniform random N-subsets (N drawn in 1..L when None)."""
    N = draw(selection_sizes(L)) if N is None else N
    if not 1 <= N <= L:
        raise InvalidArgument(f"random_subsets needs 1 <= N <= L, got N={N}, L={L}")
    return _random_masks(np.random.default_rng(draw(seeds())), batch, L, N)


@hs.composite
def top_n_sets(draw: hs.DrawFn, alpha: np.ndarray, N: int) -> np.ndarray:
    """Masks of N largest weights per row of ``alpha`` ``(B, L)``, ties broken at random (all are valid I_N)."""
    alpha = np.asarray(alpha, dtype=np.float64)
    if alpha.ndim != 2 or not 1 <= N <= alpha.shape[1]:
        raise InvalidArgument(f"top_n_sets needs alpha of shape (B, L) and 1 <= N <= L, got {alpha.shape}, N={N}")
    rng = np.random.default_rng(draw(seeds()))
    order = np.lexsort((rng.random(alpha.shape), -alpha), axis=-1)[:, :N]
    mask = np.zeros(alpha.shape, dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask


# -- specs and instances ----------------------------------------------------------------------------
#: a batch holds at most this many tokens in all (B * L), so long sequences come in small batches
TOKEN_BUDGET = 1 << 14


def size_limits(statement: Statement | None) -> tuple[int, int]:
    """``(max_L, max_batch)`` keeping one example of ``statement`` cheap: its cost class's test sizes
    (:data:`attnbounds.theory.mathematics.quantities.COSTS`, read from its quantities' specifications)."""
    c = families.cost(statement) if statement is not None else COSTS["subsets"]
    return min(c.test_L, MAX_LENGTH), c.test_batch


def _needs(statement: Statement | None) -> set[str]:
    return families.needs(statement) if statement is not None else {"x", "sphere", "fd", "heads"}


@hs.composite
def specs(draw: hs.DrawFn, statement: Statement | None = None, *, batch: int | None = None,
          max_L: int | None = None) -> Spec:
    """A :class:`~attnbounds.theory.mathematics.families.Spec` for ``statement``: only the fields it uses are drawn.

    Sizes respect :func:`size_limits` unless ``batch`` / ``max_L`` are given; the batch shrinks for
    long sequences (``B * L <= TOKEN_BUDGET``). Normalisers satisfy the statement's hypotheses on
    the normaliser; the smallest length the hypotheses allow (:attr:`~attnbounds.theory.mathematics.hypotheses.Hypothesis.min_L`)
    is drawn to hold; other hypotheses are left to filtering
    (:func:`attention_instance` keeps the instances where every hypothesis holds).
    """
    need = _needs(statement)
    lim_L, lim_B = size_limits(statement)
    max_L = lim_L if max_L is None else max_L
    batch = lim_B if batch is None else batch
    shortest = 2 if statement is None or "x" in need else smallest_length(statement.hypotheses)
    L = draw(lengths(min(shortest, max_L), max_L))
    f: dict[str, Any] = {"L": L, "N": draw(selection_sizes(L)), "B": max(1, min(batch, TOKEN_BUDGET // L))}
    f["normaliser"] = name = draw(normaliser_names(statement))
    f["normaliser_params"] = draw(normaliser_params(name))
    f["T"] = draw(temperatures())
    f["logit_scale"] = draw(log_uniform(1e-3, 1e2))
    if "qk" in need or "x" in need or "sphere" in need:
        f["d"] = draw(hs.sampled_from([v for v in DIMENSIONS if v >= 2] if "sphere" in need else DIMENSIONS))
    if "qk" not in need:
        f["logits"] = draw(hs.sampled_from(list(LOGIT_FAMILIES)))
        if f["logits"] in ("near-tie", "two-level"):
            f["gap"] = draw(log_uniform(1e-12, 1.0))
    if "x" in need:
        f["embeddings"] = draw(hs.sampled_from(list(EMBEDDING_FAMILIES)))
        f["x_scale"] = draw(log_uniform(1e-6, 1e3))
    if "sphere" in need:
        f.update(M=draw(log_uniform(1e-2, 1e2)), r_rel=draw(log_uniform(1e-2, 10**1.5)),
                 delta_rel=draw(hs.floats(0.0, 1.0)),
                 mc_draws=draw(hs.sampled_from([256, 1024])))
    if "fd" in need:
        f["eps"] = draw(log_uniform(1e-8, 10.0))
    if "heads" in need:
        f.update(p=draw(hs.floats(0.0, 1.0)), H=draw(hs.integers(1, 10)))
    f["seed"] = draw(seeds())
    return Spec(**f)


def _build_any(spec: Spec, selection: np.ndarray | None, with_qk: bool) -> Instance:
    """An instance carrying everything any statement reads (logits, x, sphere, fd and head parameters).

    With ``with_qk`` the logits are ``q . k_i`` with ``|l_i| <= logit_scale`` (:func:`queries_keys`).
    """
    rng = np.random.default_rng(spec.seed)
    normaliser = make(spec.normaliser, T=spec.T, **dict(spec.normaliser_params))
    q = k = None
    if with_qk:
        q, k = _bounded_qk(rng, spec.B, spec.L, spec.d, spec.logit_scale)
        lg = np.einsum("bd,bld->bl", q, k)
    else:
        lg = LOGIT_FAMILIES[spec.logits](rng, spec)
    mask = top_n_mask(normaliser.weights(lg), spec.N) if selection is None else selection
    x = EMBEDDING_FAMILIES[spec.embeddings](rng, spec, mask) * spec.x_scale
    v = rng.standard_normal((spec.B, spec.L))
    abar = np.where(mask, normaliser.weights(lg), 0.0).sum(-1)
    return Instance.from_logits(
        lg, normaliser, x=x, N=spec.N, q=q, k=k, selection=selection,
        arrays={"v": v / np.linalg.norm(v, axis=-1, keepdims=True)},
        M=spec.M, delta=spec.delta_rel * families.feasible_delta(spec.L, spec.d, spec.M),
        r=np.maximum(spec.r_rel * spec.M * abar, 1e-12), dim=spec.d, mc_draws=spec.mc_draws, seed=spec.seed,
        eps=spec.eps, p=spec.p, H=spec.H)


@hs.composite
def attention_instance(draw: hs.DrawFn, statement: Statement | None = None, *, batch: int | None = None,
                       max_L: int | None = None, selection: str = "top-N") -> Instance:
    """An :class:`~attnbounds.theory.mathematics.instance.Instance` batch for ``statement`` (or for any statement when None).

    With a statement, the instance holds exactly what it needs (:func:`attnbounds.theory.mathematics.families.build`) and
    satisfies its hypotheses (instances where one fails are dropped from the batch; with
    ``selection="random"`` nothing is dropped). Without one, it carries logits (half the time from
    a query and keys), token vectors, sphere parameters (``M``, ``delta``, ``r``), a
    finite-difference direction and head parameters. ``selection``: ``"top-N"`` (the N largest
    weights), ``"random"`` (a uniform random N-subset, which generally breaks the top-N hypothesis)
    or ``"any"`` (either, drawn).
    """
    if selection not in ("top-N", "random", "any"):
        raise InvalidArgument(f"selection must be 'top-N', 'random' or 'any', got {selection!r}")
    spec = draw(specs(statement, batch=batch, max_L=max_L))
    if selection == "any":
        selection = draw(hs.sampled_from(["top-N", "random"]))
    mask = None
    if selection == "random":
        mask = draw(random_subsets(spec.B, spec.L, spec.N))
    if statement is None:
        return _build_any(spec, mask, draw(hs.booleans()))
    inst = families.build(statement, spec)
    inst = inst if mask is None else replace(inst, selection=mask, _cache={})
    if selection == "random":
        return inst  # random subsets are for expectation statements and for breaking top-N on purpose
    ok, _ = statement.check_hypotheses(statement.prepare(inst))
    assume(ok.any())
    return inst if ok.all() else inst.take(np.flatnonzero(ok))


# -- instances for any quantity: the inputs of the cross-check of forms ------------------------------------------------
#: logit families the cross-check of forms draws (each with the scales that stress a kernel)
ADVERSARIAL_LOGITS = ("gaussian", "near-tie", "dominant", "equal", "extreme", "two-level")


@hs.composite
def token_counts(draw: hs.DrawFn, K: int, max_count: int = 10**6, batch: int = 1) -> np.ndarray:
    """Token counts ``(batch, K)`` of K classes, log-uniform in ``[1, max_count]`` (some rows with a class of
    count 0, padding), every row summing to the same L (the first row's counts, permuted per row)."""
    rng = np.random.default_rng(draw(seeds()))
    base = np.maximum(1, np.round(10 ** rng.uniform(0, math.log10(max_count), K))).astype(np.int64)
    if K > 1 and draw(hs.booleans()):
        base[int(rng.integers(0, K))] = 0  # padding: a class without tokens
        if base.sum() == 0:
            base[0] = 1
    return np.stack([rng.permutation(base) for _ in range(batch)])


@hs.composite
def adversarial_instance(draw: hs.DrawFn, *, max_L: int = 1024, classes: bool | None = None, batch: int = 3,
                         ratio_only: bool = False, qk: bool | None = None, max_count: int = 10**6,
                         elementwise: bool = False) -> Instance:
    """An instance carrying what every quantity reads (logits or query/keys, x, N, sphere parameters ``M``,
    ``delta``, ``r``, a finite-difference direction ``v`` and step ``eps``, head parameters ``p``, ``H``,
    Lemma 1's ``a``), drawn to stress the kernels: interior extrema of F (exp_poly with a large b), near
    ties down to 1e-12, one-hot rows, logits up to 1e3, graded rows (weights down to 1e-300 of the largest: tiny
    Jacobians), T from 1e-8 (huge Jacobians) to 1e6, dense L up to ``max_L``; with
    ``classes`` (drawn when None), K <= 6 token classes with counts up to ``max_count``. ``ratio_only``: maps
    ``F / sum F`` only, and with ``elementwise`` the element-wise maps with a log F too (sigmoid attention).
    """
    rng = np.random.default_rng(draw(seeds()))
    if classes is None:
        classes = draw(hs.booleans())
    if classes:
        K = draw(hs.integers(1, 6))
        counts = draw(token_counts(K, max_count, batch))
        L = int(counts[0].sum())
    else:
        K = L = draw(hs.one_of(hs.integers(1, 8), hs.sampled_from(sorted({v for v in (16, 31, 64, 127, 256, 1024)
                                                                         if v <= max_L}) or [1])))
        counts = None
    names = [n for n in _drawable() if not ratio_only or isinstance(prototype(n), RatioNormaliser)
             or (elementwise and prototype(n).elementwise and prototype(n).has("relaxed"))]
    if classes:  # the cross-check of forms compares the torch form too
        names = [n for n in names if prototype(n).torch_classes] or names
    name = draw(hs.sampled_from(names))
    params = dict(draw(normaliser_params(name)))
    for p in own_parameters(name):
        if p.stress is not None and draw(hs.booleans()):
            params[p.name] = draw(_values(p, *p.stress))  # where the kernels are hardest (exp_poly: F's maximum inside)
    T = draw(hs.one_of(temperatures(), hs.sampled_from([1e-8, 1e-4, 1e-2, 1.0, 1e3, 1e6])))
    normaliser = make(name, T=T, **params)
    family = draw(hs.sampled_from(ADVERSARIAL_LOGITS))
    scale = draw(hs.one_of(log_uniform(1e-3, 1e3), hs.sampled_from([1e3, 832.3, 1.0])))
    gap = draw(log_uniform(1e-12, 1.0))
    spec = _spec(B=batch, L=K, N=1, logits=family, logit_scale=scale, gap=gap)
    lg = np.clip(LOGIT_FAMILIES[family](rng, spec), -1e3, 1e3)
    depth = draw(hs.sampled_from([0.0, 0.0, 0.0, 50.0, 160.0, 350.0, 600.0, 700.0]))
    if depth:  # graded: the other tokens' F down to exp(-depth) of the top one (weights, Jacobians of 1e-20 to 1e-300)
        lg = np.clip(lg.max(-1, keepdims=True) - T * depth * rng.random(lg.shape) ** 0.5, -1e3, 1e3)
    d = draw(hs.sampled_from([1, 2, 3, 5]))
    use_qk = draw(hs.booleans()) if qk is None else qk
    q = k = None
    if use_qk:
        q, k = _bounded_qk(rng, batch, K, d, min(scale, 1e3))
        lg = np.einsum("bd,bkd->bk", q, k)
    N = draw(hs.integers(1, L)) if L < 64 else draw(hs.one_of(hs.integers(1, 8), hs.integers(1, L)))
    x_family = draw(hs.sampled_from(sorted(EMBEDDING_FAMILIES)))
    mask = np.zeros((batch, K), dtype=bool)
    mask[:, : max(1, min(K, N))] = True
    x = EMBEDDING_FAMILIES[x_family](rng, _spec(B=batch, L=K, d=d, embeddings=x_family), mask) * draw(log_uniform(1e-3, 1e3))
    v = rng.standard_normal((batch, K))
    mult = np.ones((batch, K)) if counts is None else counts.astype(np.float64)
    v = v / np.sqrt((mult * v * v).sum(-1, keepdims=True))
    M = draw(log_uniform(1e-2, 1e2))
    dim = max(d, 2)
    extra = dict(M=M, delta=draw(hs.floats(0.0, 1.0)) * families.feasible_delta(L, dim, M) if L <= 4096 else 0.0,
                 r=draw(log_uniform(1e-3, 10.0)) * M, dim=dim, mc_draws=64, seed=int(rng.integers(0, 2**31)),
                 eps=draw(log_uniform(1e-8, 10.0)), p=draw(hs.floats(0.0, 1.0)), H=draw(hs.integers(0, 12)))
    extra["a"] = float(np.max(np.abs(lg))) * (1 + draw(hs.sampled_from([0.0, 0.5])))
    try:
        if use_qk:
            return Instance.from_qk(q, k, normaliser, x=x, N=N, counts=counts, arrays={"v": v}, **extra)
        return Instance.from_logits(lg, normaliser, x=x, N=N, counts=counts, arrays={"v": v}, **extra)
    except NotApplicable:
        from hypothesis import reject

        reject()
