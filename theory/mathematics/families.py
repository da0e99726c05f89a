"""Seeded numpy generators of attention-instance batches, random and adversarial.

A :class:`Spec` fixes the structure (sizes, family names, scales); :func:`build` turns a spec and a
statement into an :class:`~attnbounds.theory.mathematics.instance.Instance` batch holding exactly what the statement
needs (logits or query/keys, token vectors, sphere parameters, a finite-difference direction,
head parameters). Hypothesis strategies draw specs; the search draws many specs; both get
arrays built here from one seed, so a counterexample is reproducible from ``(spec, seed)``.

In this package a *family* is one of these generators (:data:`LOGIT_FAMILIES`, :data:`EMBEDDING_FAMILIES`,
:data:`CLASS_FAMILIES`); normalisers are built by their constructors
(:data:`~attnbounds.theory.mathematics.normalisers.CONSTRUCTORS`), and the limit analysis follows growths
(:class:`~attnbounds.theory.deciding.limits.Growth`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import numpy as np

from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.hypotheses import smallest_length
from attnbounds.theory.mathematics.instance import MAX_LENGTH, Instance, top_n_mask
from attnbounds.theory.mathematics.intervals import decimal_value, outward
from attnbounds.theory.mathematics.normalisers import CONSTRUCTORS, Normaliser, RatioNormaliser, constructor_parameters, make
from attnbounds.theory.mathematics.quantities import COSTS, QUANTITIES, Cost, sphere_embeddings
from attnbounds.theory.mathematics.statement import Statement
from attnbounds.theory.mathematics.validation import integer_in, positive


@dataclass(frozen=True)
class Spec:
    """The structure of a batch: sizes, family names and their scales (all plain values, JSON-able)."""

    B: int = 32
    L: int = 8
    N: int = 2
    d: int = 4
    logits: str = "gaussian"
    logit_scale: float = 1.0
    gap: float = 1e-3
    embeddings: str = "gaussian"
    x_scale: float = 1.0
    normaliser: str = "softmax"
    T: float = 1.0
    normaliser_params: tuple[tuple[str, float], ...] = ()  # the normaliser's parameters besides T, e.g. (("b", 0.3),)
    M: float = 1.0
    delta_rel: float = 0.0  # delta as a fraction of the largest comfortably feasible separation
    r_rel: float = 1.0  # r as a multiple of M * abar_N
    eps: float = 1e-3
    p: float = 0.8
    H: int = 3
    mc_draws: int = 200
    seed: int = 0
    K: int = 0  # token classes (0: a dense batch of L tokens)
    classes: str = "random"  # the class family (CLASS_FAMILIES) when K > 0
    small: int = 1  # tokens of the small group (one-vs-rest, extremes)
    fraction: float = 0.5  # share of the first group (two-level)

    def __post_init__(self) -> None:
        integer_in("B", self.B, 1)
        integer_in("L", self.L, 1, MAX_LENGTH)
        integer_in("N", self.N, 1, self.L)
        integer_in("K", self.K, 0, 64)
        if self.K and self.classes not in CLASS_FAMILIES:
            raise InvalidArgument(f"unknown class family {self.classes!r}; allowed: {', '.join(CLASS_FAMILIES)}")
        if self.K > self.L:
            raise InvalidArgument(f"K={self.K} token classes need L >= K tokens, got L={self.L}")
        integer_in("d", self.d, 1)
        integer_in("H", self.H, 1, 20)
        for name in ("T", "M", "x_scale", "eps", "logit_scale"):
            positive(name, getattr(self, name))
        if self.logits not in LOGIT_FAMILIES:
            raise InvalidArgument(f"unknown logit family {self.logits!r}; allowed: {', '.join(LOGIT_FAMILIES)}")
        if self.embeddings not in EMBEDDING_FAMILIES:
            raise InvalidArgument(f"unknown embedding family {self.embeddings!r}; allowed: {', '.join(EMBEDDING_FAMILIES)}")
        if not 0.0 <= self.delta_rel <= 1.0:
            raise InvalidArgument(f"delta_rel must be in [0, 1], got {self.delta_rel}")
        if not 0.0 <= self.p <= 1.0:
            raise InvalidArgument(f"p must be in [0, 1], got {self.p}")
        object.__setattr__(self, "normaliser_params", tuple((str(k), float(v)) for k, v in self.normaliser_params))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_(self, **changes: Any) -> "Spec":
        return replace(self, **changes)


# -- token classes: K classes of identical tokens with counts, L up to MAX_LENGTH ----------------------
def _split_counts(total: int, shares: np.ndarray) -> np.ndarray:
    """Counts ``(B, K)`` proportional to ``shares`` (rows), at least one token each, every row summing to
    ``total`` (which must be at least K)."""
    K = shares.shape[-1]
    raw = np.floor(shares / shares.sum(-1, keepdims=True) * (total - K)).astype(np.int64) + 1
    raw[:, -1] += total - raw.sum(-1)  # the last class takes the rounding
    return raw


def _levels(rng: np.random.Generator, s: Spec, normaliser: Normaliser, k: int) -> np.ndarray:
    """``k`` logit levels per row: extremes of F on ``[-a, a]`` (``a = logit_scale``: the endpoints and the
    interior critical points of log F) or uniform draws in ``[-a, a]``."""
    a = s.logit_scale
    points = [-a, a, 0.0]
    if isinstance(normaliser, RatioNormaliser):
        try:
            points += [float(c) for c in normaliser._critical_points if abs(c) <= a]
        except AttnBoundsError:
            pass
    pts = np.asarray(points)
    extreme = rng.choice(pts, size=(s.B, k))
    free = rng.uniform(-a, a, (s.B, k))
    return np.where(rng.random((s.B, 1)) < 0.7, extreme, free)


def class_counts_and_logits(rng: np.random.Generator, s: Spec, normaliser: Normaliser) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, logits)`` of a batch of ``s.K`` token classes (:data:`CLASS_FAMILIES`)."""
    K, B, L = s.K, s.B, s.L
    first = {"one-vs-rest": min(max(1, s.small), L - K + 1),
             "two-level": min(max(1, int(round(s.fraction * L))), L - K + 1)}.get(s.classes)
    if first is not None and K >= 2:  # a few tokens (or a share of them) against the rest
        counts = np.zeros((B, K), dtype=np.int64)
        counts[:, 0] = first
        counts[:, 1:] = _split_counts(L - first, np.ones((B, K - 1)))
        logits = _levels(rng, s, normaliser, K)
    elif s.classes in ("uniform", "near-uniform"):
        counts = _split_counts(L, np.ones((B, K)))
        logits = np.zeros((B, K)) if s.classes == "uniform" else rng.standard_normal((B, K)) * s.gap
    else:  # random shares and levels
        counts = _split_counts(L, rng.dirichlet(np.full(K, 0.5), size=B))
        logits = _levels(rng, s, normaliser, K)
    return counts, logits


CLASS_FAMILIES = ("one-vs-rest", "two-level", "uniform", "near-uniform", "random")


# -- logits -------------------------------------------------------------------------------------
def _gaussian(rng: np.random.Generator, s: Spec) -> np.ndarray:
    return rng.standard_normal((s.B, s.L)) * s.logit_scale


def _uniform(rng: np.random.Generator, s: Spec) -> np.ndarray:
    return rng.uniform(-s.logit_scale, s.logit_scale, (s.B, s.L))


def _near_tie(rng: np.random.Generator, s: Spec) -> np.ndarray:
    """The two largest logits differ by ``gap``; the others lie below."""
    lg = -np.abs(rng.standard_normal((s.B, s.L))) * s.logit_scale - s.gap
    lg[:, 0] = 0.0
    if s.L > 1:
        lg[:, 1] = -s.gap
    return _shuffle(rng, lg)


def _dominant(rng: np.random.Generator, s: Spec) -> np.ndarray:
    lg = rng.standard_normal((s.B, s.L)) * s.logit_scale
    lg[:, 0] += 10.0 * s.logit_scale
    return _shuffle(rng, lg)


def _equal(rng: np.random.Generator, s: Spec) -> np.ndarray:
    return np.full((s.B, s.L), s.logit_scale)


def _two_level(rng: np.random.Generator, s: Spec) -> np.ndarray:
    """N logits at ``+gap``, the other L - N at 0: a block of selected tokens barely above the rest."""
    lg = np.zeros((s.B, s.L))
    lg[:, : s.N] = s.gap
    return _shuffle(rng, lg * s.logit_scale)


def _extreme(rng: np.random.Generator, s: Spec) -> np.ndarray:
    return rng.choice([-1e3, 1e3, 999.0, -999.0, 0.0], size=(s.B, s.L))


def _shuffle(rng: np.random.Generator, a: np.ndarray) -> np.ndarray:
    return np.take_along_axis(a, np.argsort(rng.random(a.shape), axis=-1), axis=-1)


LOGIT_FAMILIES: dict[str, Callable[[np.random.Generator, Spec], np.ndarray]] = {
    "gaussian": _gaussian, "uniform": _uniform, "near-tie": _near_tie, "dominant": _dominant,
    "equal": _equal, "two-level": _two_level, "extreme": _extreme,
}


# -- token vectors (may depend on which tokens are selected) -----------------------------------
def _unit(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    g = rng.standard_normal(shape)
    return g / np.linalg.norm(g, axis=-1, keepdims=True)


def _x_gaussian(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    return rng.standard_normal((s.B, s.L, s.d))


def _x_sphere(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    return _unit(rng, (s.B, s.L, s.d)) * s.M


def _x_clustered(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    centres = rng.standard_normal((s.B, 2, s.d))
    which = rng.integers(0, 2, (s.B, s.L))
    return np.take_along_axis(centres, which[..., None], 1) + 1e-2 * rng.standard_normal((s.B, s.L, s.d))


def _x_identical(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    return np.repeat(rng.standard_normal((s.B, 1, s.d)), s.L, axis=1)


def _x_near_identical(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    return _x_identical(rng, s, mask) + 1e-7 * rng.standard_normal((s.B, s.L, s.d))


def _x_antipodal(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    u = rng.standard_normal((s.B, (s.L + 1) // 2, s.d))
    return np.concatenate([u, -u], axis=1)[:, : s.L]


def _x_outliers(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    x = rng.standard_normal((s.B, s.L, s.d))
    x[:, rng.integers(0, s.L)] *= 100.0
    return x


def _x_split(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    """Selected tokens all at u, non-selected all at ``c u`` with a random signed factor c."""
    u = rng.standard_normal((s.B, 1, s.d))
    c = rng.choice([-3.0, -1.0, 0.0, 0.5, 2.0], size=(s.B, 1, 1))
    return np.where(mask[..., None], u, c * u)


def _x_split_sphere(rng: np.random.Generator, s: Spec, mask: np.ndarray) -> np.ndarray:
    """Unit-sphere variant of split: selected at u, non-selected at -u or an orthogonal w."""
    u = _unit(rng, (s.B, 1, s.d))
    w = _unit(rng, (s.B, 1, s.d))
    other = np.where(rng.random((s.B, 1, 1)) < 0.5, -u, w)
    return np.where(mask[..., None], u, other) * s.M


EMBEDDING_FAMILIES: dict[str, Callable[[np.random.Generator, Spec, np.ndarray], np.ndarray]] = {
    "gaussian": _x_gaussian, "sphere": _x_sphere, "clustered": _x_clustered, "identical": _x_identical,
    "near-identical": _x_near_identical, "antipodal": _x_antipodal, "outliers": _x_outliers,
    "split": _x_split, "split-sphere": _x_split_sphere,
}


# -- what a statement needs ------------------------------------------------------------------------
def needs(statement: Statement) -> set[str]:
    """What the statement's quantities read from an instance (their specifications' ``needs``:
    'qk', 'x', 'sphere', 'fd', 'heads', 'selection', 'ratio', 'logits')."""
    out: set[str] = set()
    for q in statement.bindings.values():
        out |= QUANTITIES[q].needs
    return out


def cost(statement: Statement) -> Cost:
    """What one evaluation of the statement costs (its cost class): its most expensive quantity's
    :class:`~attnbounds.theory.mathematics.quantities.Cost`, made cheaper by its hypotheses (``Hypothesis.cheaper``: softmax makes
    the Jacobian norms closed forms)."""
    costs = [COSTS[QUANTITIES[q].cost] for q in statement.bindings.values()]
    out = max(costs, key=lambda c: c.rank, default=COSTS["weights"])
    for h in statement.hypotheses:
        out = COSTS[h.cheaper.get(out.name, out.name)]
    return out


def feasible_delta(L: int, d: int, M: float) -> float:
    """A separation comfortably achievable by L random points on the M-sphere in R^d (rejection works)."""
    # typical nearest-neighbour distance on the sphere shrinks like L^(-1/(d-1)); keep a safety factor
    return float(M * min(2.0, 0.5 * L ** (-2.0 / max(d - 1, 1))))


def logit_bound(statement: Statement) -> float | None:
    """The statement's fixed logit bound ``a`` as the largest double at or below the decimal it spells (the double
    0.1 exceeds 1/10; the one below it does not), None without a positive fixed ``a``."""
    a = statement.fixed.get("a")
    return outward(decimal_value(a), -1) if a is not None and a > 0 else None


def build(statement: Statement, spec: Spec) -> Instance:
    """A batch for ``statement`` from ``spec``: everything it needs, reproducibly from ``spec.seed``; token
    classes when ``spec.K > 0``; the statement's fixed parameters as given (never drawn)."""
    rng = np.random.default_rng(spec.seed)
    need = needs(statement)
    fixed = dict(statement.fixed)
    a = logit_bound(statement)
    spec = spec.with_(**{f: fixed[f] for f in ("T", "M", "p", "eps") if f in fixed},
                      **({"H": int(fixed["H"])} if "H" in fixed else {}), **({"logit_scale": a} if a is not None else {}))
    own = {k: v for k, v in spec.normaliser_params}
    own.update({k: fixed[k] for k in fixed if k in constructor_parameters(spec.normaliser)})
    normaliser = make(spec.normaliser, T=spec.T, **own)
    classes = spec.K > 0
    cols = spec.K if classes else spec.L
    counts = None
    kwargs: dict[str, Any] = {"N": spec.N}
    params: dict[str, Any] = {k: v for k, v in fixed.items() if k not in normaliser.params}
    arrays: dict[str, Any] = {}
    shape = spec.with_(L=cols, N=1, K=0)  # what the per-column array builders read
    if classes:
        counts, logits = class_counts_and_logits(rng, spec, normaliser)
        kwargs["counts"] = counts
    else:
        logits = LOGIT_FAMILIES[spec.logits](rng, spec)
    if "qk" in need:  # keys per column scaled so that q . k reproduces the drawn logits' spread
        q = rng.standard_normal((spec.B, spec.d))
        k = rng.standard_normal((spec.B, cols, spec.d)) * np.exp(rng.uniform(-2, 2, (spec.B, cols, 1)))
        k = k * spec.logit_scale
        kwargs.update(q=q, k=k)
        logits = np.einsum("bd,bld->bl", q, k)
    bound = next((h.logit_bound for h in statement.hypotheses if h.logit_bound in fixed), None)
    if bound is not None and "qk" not in need:
        logits = np.clip(logits, -fixed[bound], fixed[bound])
    mult = np.ones((spec.B, cols)) if counts is None else counts.astype(np.float64)
    alpha = normaliser.weights(logits, counts=counts)
    from attnbounds.theory.mathematics.instance import split_top_n

    mask = top_n_mask(alpha, spec.N) if counts is None else split_top_n(alpha, counts, spec.N)[1][:, :cols]
    if "x" in need:
        kwargs["x"] = EMBEDDING_FAMILIES[spec.embeddings](rng, shape, mask) * spec.x_scale
    if "sphere" in need:
        delta = spec.delta_rel * feasible_delta(spec.L, spec.d, spec.M)
        abar = (np.where(mask, alpha, 0) * mult).sum(-1)
        params.update(M=spec.M, delta=delta, r=np.maximum(spec.r_rel * spec.M * abar, 1e-12), dim=spec.d,
                      mc_draws=spec.mc_draws, seed=spec.seed)
        params.update({k: v for k, v in fixed.items() if k in ("M", "delta", "r")})
        if not classes:
            kwargs["x"] = sphere_embeddings(rng, (spec.B,), spec.L, spec.d, np.full(spec.B, spec.M),
                                            np.full(spec.B, delta))
    if "fd" in need:
        v = rng.standard_normal((spec.B, cols))
        arrays["v"] = v / np.sqrt((mult * v * v).sum(-1, keepdims=True))
        params["eps"] = spec.eps
    if "heads" in need:
        params.update(p=spec.p, H=spec.H)
    if "q" in kwargs:
        return Instance.from_qk(kwargs.pop("q"), kwargs.pop("k"), normaliser, arrays=arrays, **kwargs, **params)
    return Instance.from_logits(logits, normaliser, arrays=arrays, **kwargs, **params)


def admissible_normalisers(statement: Statement) -> list[str]:
    """The normalisers (names in :data:`~attnbounds.theory.mathematics.normalisers.CONSTRUCTORS`) that satisfy the statement's hypotheses on the normaliser (computed, not listed), and the
    statement's own normaliser when it names one (a ``normaliser(<name>)`` hypothesis: :mod:`attnbounds.theory.mathematics.callables`).

    A normaliser whose weights need a positive logit (ReLU) is left out unless the statement names it: they are
    undefined when every logit is <= 0.
    """
    checks = tuple(h for h in statement.hypotheses if h.names is not None)
    # a statement about one normaliser draws it whatever its other hypotheses say (they then fail on the instances:
    # NOT-APPLICABLE, never assumed); otherwise the normalisers satisfying those on the normaliser (its form or weights)
    checks = checks or tuple(h for h in statement.hypotheses if h.normaliser is not None)
    fixed = tuple(sorted((k, float(np.ravel(np.asarray(v, dtype=np.float64))[0])) for k, v in statement.fixed.items()
                         if np.size(v) == 1))
    out = list(_admissible(checks, tuple(CONSTRUCTORS.items()), fixed))
    if not out:
        raise InvalidArgument(f"{statement.id}: no normaliser satisfies its hypotheses on the normaliser "
                              f"({', '.join(h.id for h in checks) or 'none'}); normalisers: {', '.join(CONSTRUCTORS)}")
    return out


@functools.lru_cache(maxsize=64)
def _admissible(checks: tuple, constructors: tuple, fixed: tuple = ()) -> tuple[str, ...]:
    """The names of ``constructors`` (the items of :data:`CONSTRUCTORS`: a user's file may add some) passing ``checks``, each built
    with the statement's ``fixed`` values of its own parameters, as the search draws it (cached: sympy decides
    positivity, about 20 ms per call)."""
    out = []
    restricted = any(h.names is not None for h in checks)
    for name, _ in constructors:
        try:
            own = {k: v for k, v in fixed if k in constructor_parameters(name)}
            normaliser = make(name, **own)
            if normaliser.needs_positive_logit and not restricted:  # undefined when every logit is <= 0
                continue
            inst = Instance.from_logits(np.ones((1, 2)), normaliser)
        except AttnBoundsError:
            continue
        try:
            if all(bool(h(inst)[0]) for h in checks):
                out.append(name)
        except AttnBoundsError:
            continue
    return tuple(out)


def log_length(rng: np.random.Generator, lo: int, hi: int) -> int:
    """A length in ``[lo, hi]``, log-uniform (with the small ones, ``lo`` and ``hi`` themselves likely)."""
    if hi <= lo:
        return lo
    u = rng.random()
    if u < 0.1:
        return lo
    if u < 0.2:
        return hi
    return int(min(hi, max(lo, round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))))


def selection_size(rng: np.random.Generator, L: int) -> int:
    """N in ``[1, L]``: small (1..8), a fraction of L (0.06 L as in the paper's critical top-N), L - 1, L, or log-uniform."""
    choice = rng.integers(0, 5)
    if choice == 0:
        return int(rng.integers(1, min(L, 8) + 1))
    if choice == 1:
        return int(min(L, max(1, round(float(rng.choice([0.01, 0.06, 0.25, 0.5])) * L))))
    if choice == 2:
        return int(max(1, L - int(rng.integers(0, 2))))
    return log_length(rng, 1, L)


#: how often each class family is drawn (the extremes of long contexts first)
CLASS_WEIGHTS = {"one-vs-rest": 0.35, "two-level": 0.25, "random": 0.2, "uniform": 0.1, "near-uniform": 0.1}


def random_spec(rng: np.random.Generator, statement: Statement, *, B: int = 64, max_L: int = 64,
                classes: bool = False, stratum: tuple[int, int] | None = None) -> Spec:
    """A random spec over every family, sizes and scales (the search's and the oracle's prior): dense with
    L log-uniform up to ``max_L``, or (``classes``) up to six token classes with L log-uniform up to
    ``max_L``; ``stratum = (j, n)`` draws log L from the j-th of n equal slices of its range instead
    (successive batches then cover every scale of L)."""
    need = needs(statement)
    lo = max(smallest_length(statement.hypotheses), 2 if "x" in need or "sphere" in need else 1)
    K = 0
    family = str(rng.choice(list(CLASS_WEIGHTS), p=list(CLASS_WEIGHTS.values())))
    if classes:
        K = int(rng.choice([2, 2, 3, 4, 6])) if family in ("one-vs-rest", "two-level") else int(rng.integers(1, 7))
        lo = max(lo, K)
    hi = max(lo, max_L)
    ranges = statement.ranges
    if "L" in ranges:  # the statement's range of lengths (whole numbers): draw inside it
        L_lo, L_hi = int(math.ceil(ranges["L"][0])), int(math.floor(ranges["L"][1]))
        if classes:
            K = max(1, min(K, L_hi))
        lo = max(lo, L_lo)
        hi = max(lo, min(hi, L_hi))
    if stratum is not None and hi > lo:
        j, n = stratum
        u = (j % n + rng.random()) / n
        L = int(min(hi, max(lo, round(math.exp(math.log(lo) + u * (math.log(hi + 1) - math.log(lo)))))))
    else:
        L = log_length(rng, lo, hi)
    N = selection_size(rng, L)
    d = int(rng.choice([1, 2, 3, 4, 8, 16]))
    if "sphere" in needs(statement):
        d = max(d, 2)
    return within_ranges(rng, statement, Spec(
        B=B, L=L, N=N, d=d,
        logits=str(rng.choice(list(LOGIT_FAMILIES))),
        logit_scale=float(10 ** rng.uniform(-3, 2)),
        gap=float(10 ** rng.uniform(-9, 0)),
        embeddings=str(rng.choice(list(EMBEDDING_FAMILIES))),
        x_scale=float(10 ** rng.uniform(-6, 3)),
        normaliser=str(rng.choice(admissible_normalisers(statement))),
        T=float(10 ** rng.uniform(-4, 3)),
        M=float(10 ** rng.uniform(-2, 2)),
        delta_rel=float(rng.uniform(0, 1)),
        r_rel=float(10 ** rng.uniform(-2, 1.5)),
        eps=float(10 ** rng.uniform(-6, 1)),
        p=float(rng.uniform(0, 1)),
        H=int(rng.integers(1, 8)),
        seed=int(rng.integers(0, 2**31)),
        K=K, classes=family,
        small=int(rng.choice([1, 1, 1, 2, 3, 8])), fraction=float(rng.choice([0.5, 0.1, 0.01, 0.9, 0.001])),
    ))


#: parameters a statement may give a range for (``ranges = { L = [lo, hi], T = [lo, hi] }``): those the search draws
RANGE_PARAMETERS = ("L", "T", "p", "H", "eps", "M")


#: the share of draws taken at each end of a parameter's range (bounds are often tight exactly at an end: a thin band
#: beside it, T within 1e-3 of its least value, is missed by uniform draws)
END_SHARE = 0.25


def _draw_in(rng: np.random.Generator, lo: float, hi: float, log: bool) -> float:
    """A value in ``[lo, hi]``: either end with probability :data:`END_SHARE` each, else uniform (in log if ``log``)."""
    if hi <= lo:
        return float(lo)
    end = rng.uniform()
    if end < 2 * END_SHARE:
        return float(lo if end < END_SHARE else hi)
    if log and lo > 0:
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    return float(rng.uniform(lo, hi))


def within_ranges(rng: np.random.Generator, statement: Statement, spec: Spec) -> Spec:
    """``spec`` with the parameters the statement gives ranges for redrawn inside them (T, eps, M log-uniform, p
    uniform, each at an end of its range in half the draws; H a whole number), and L (with N and the classes)
    brought into the range of lengths."""
    ranges = statement.ranges
    if not ranges:
        return spec
    changes: dict[str, Any] = {}
    for name, log in (("T", True), ("eps", True), ("M", True), ("p", False)):
        if name in ranges:
            changes[name] = _draw_in(rng, *ranges[name], log)
    if "H" in ranges:
        changes["H"] = int(rng.integers(int(math.ceil(ranges["H"][0])), int(math.floor(ranges["H"][1])) + 1))
    if "L" in ranges:
        L = min(max(spec.L, int(math.ceil(ranges["L"][0]))), int(math.floor(ranges["L"][1])))
        changes.update(L=L, N=min(spec.N, L), K=min(spec.K, L))
    return spec.with_(**changes)
