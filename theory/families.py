"""Seeded numpy generators of attention-instance batches, random and adversarial.

A :class:`Spec` fixes the structure (sizes, family names, scales); :func:`build` turns a spec and a
statement into an :class:`~attnbounds.theory.instance.Instance` batch holding exactly what the statement
needs (logits or query/keys, token vectors, sphere parameters, a finite-difference direction,
head parameters). Hypothesis strategies draw specs; the search draws many specs; both get
arrays built here from one seed, so a counterexample is reproducible from ``(spec, seed)``.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import numpy as np

from attnbounds.theory.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.instance import Instance, top_n_mask
from attnbounds.theory.normalisers import FAMILY, make
from attnbounds.theory.quantities import COSTS, QUANTITIES, Cost, sphere_embeddings
from attnbounds.theory.statement import Statement
from attnbounds.theory.validation import integer_in, positive


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
    normaliser_params: tuple[tuple[str, float], ...] = ()  # extra family parameters, e.g. (("b", 0.3),)
    M: float = 1.0
    delta_rel: float = 0.0  # delta as a fraction of the largest comfortably feasible separation
    r_rel: float = 1.0  # r as a multiple of M * abar_N
    eps: float = 1e-3
    p: float = 0.8
    H: int = 3
    mc_draws: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        integer_in("B", self.B, 1)
        integer_in("L", self.L, 1)
        integer_in("N", self.N, 1, self.L)
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
    """What one evaluation of the statement costs: its most expensive quantity's :class:`~attnbounds.theory.quantities.Cost`."""
    costs = [COSTS[QUANTITIES[q].cost] for q in statement.bindings.values()]
    return max(costs, key=lambda c: c.rank, default=COSTS["weights"])


def feasible_delta(L: int, d: int, M: float) -> float:
    """A separation comfortably achievable by L random points on the M-sphere in R^d (rejection works)."""
    # typical nearest-neighbour distance on the sphere shrinks like L^(-1/(d-1)); keep a safety factor
    return float(M * min(2.0, 0.5 * L ** (-2.0 / max(d - 1, 1))))


def build(statement: Statement, spec: Spec) -> Instance:
    """A batch for ``statement`` from ``spec``: everything it needs, reproducibly from ``spec.seed``."""
    rng = np.random.default_rng(spec.seed)
    need = needs(statement)
    normaliser = make(spec.normaliser, T=spec.T, **dict(spec.normaliser_params))
    kwargs: dict[str, Any] = {"N": spec.N}
    params: dict[str, Any] = {}
    arrays: dict[str, Any] = {}
    if "qk" in need:
        q = rng.standard_normal((spec.B, spec.d))
        k = rng.standard_normal((spec.B, spec.L, spec.d)) * np.exp(rng.uniform(-2, 2, (spec.B, spec.L, 1)))
        k = k * spec.logit_scale
        logits = np.einsum("bd,bld->bl", q, k)
        kwargs.update(q=q, k=k)
    else:
        logits = LOGIT_FAMILIES[spec.logits](rng, spec)
    alpha = normaliser.weights(logits)
    mask = top_n_mask(alpha, spec.N)
    if "x" in need:
        kwargs["x"] = EMBEDDING_FAMILIES[spec.embeddings](rng, spec, mask) * spec.x_scale
    if "sphere" in need:
        delta = spec.delta_rel * feasible_delta(spec.L, spec.d, spec.M)
        abar = np.where(mask, alpha, 0).sum(-1)
        params.update(M=spec.M, delta=delta, r=np.maximum(spec.r_rel * spec.M * abar, 1e-12), dim=spec.d,
                      mc_draws=spec.mc_draws, seed=spec.seed)
        kwargs["x"] = sphere_embeddings(rng, (spec.B,), spec.L, spec.d, np.full(spec.B, spec.M), np.full(spec.B, delta))
    if "fd" in need:
        v = rng.standard_normal((spec.B, spec.L))
        arrays["v"] = v / np.linalg.norm(v, axis=-1, keepdims=True)
        params["eps"] = spec.eps
    if "heads" in need:
        params.update(p=spec.p, H=spec.H)
    if "q" in kwargs:
        return Instance.from_qk(kwargs.pop("q"), kwargs.pop("k"), normaliser, arrays=arrays, **kwargs, **params)
    return Instance.from_logits(logits, normaliser, arrays=arrays, **kwargs, **params)


_NORMALISER_HYPOTHESES = {"softmax", "F-positive", "F-length-independent", "simplex"}


def admissible_normalisers(statement: Statement) -> list[str]:
    """Family members that satisfy the statement's hypotheses on the normaliser (computed, not listed).

    The ReLU normaliser is left out: its weights are undefined when every logit is <= 0.
    """
    return list(_admissible(tuple(h for h in statement.hypotheses if h.id in _NORMALISER_HYPOTHESES)))


@functools.lru_cache(maxsize=64)
def _admissible(checks: tuple) -> tuple[str, ...]:
    """The members passing ``checks`` (cached: sympy decides positivity, about 20 ms per call)."""
    out = []
    for name in FAMILY:
        if name == "relu":  # undefined when every logit is <= 0; sparsemax already gives zero weights
            continue
        inst = Instance.from_logits(np.ones((1, 2)), make(name))
        if all(bool(h(inst)[0]) for h in checks):
            out.append(name)
    return tuple(out)


def random_spec(rng: np.random.Generator, statement: Statement, *, B: int = 64, max_L: int = 64) -> Spec:
    """A random spec over every family, sizes and scales (the search's and the oracle's prior)."""
    L = int(rng.choice([1, 2, 3, 4, 5, 8, 16, 32, max_L])) if max_L >= 2 else 1
    L = max(L, 2 if "x" in needs(statement) or "sphere" in needs(statement) else 1)
    N = int(rng.integers(1, L + 1))
    d = int(rng.choice([1, 2, 3, 4, 8, 16]))
    if "sphere" in needs(statement):
        d = max(d, 2)
    return Spec(
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
    )
