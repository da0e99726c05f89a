"""What every normaliser of paper eq. (3) carries: its forms, its capabilities, its parameters, and the registry.

A normaliser is a map from logits ``(B, L)`` to weights ``(B, L)``. Its **forms** (:data:`FORMS`) are the same map in
each arithmetic the suite computes in: ``float`` (numpy weights, :meth:`Normaliser.weights`), ``jacobian`` (the
closed-form ``d alpha / d l``), ``torch`` (differentiable weights), ``ball`` (the weights recomputed from the logits
in interval arithmetic: what certification trusts) and ``relaxed`` (the sympy ``log F`` the relaxation prover
reads: of ``alpha = F / sum F``, or of ``alpha_i = F(l_i)`` for an :attr:`Normaliser.elementwise` map). A form a map does not have is listed in :attr:`Normaliser.lacks` with the reason, never left to a fallback:
``tests/rigor/test_normaliser_forms.py`` checks every registered normaliser's forms against each other and fails on
a form that is neither there nor listed.

Its **capabilities** are attributes read instead of its name: :attr:`Normaliser.positive` and
:attr:`Normaliser.length_independent` (Lemma 1's hypotheses), :attr:`Normaliser.normalising`,
:attr:`Normaliser.needs_positive_logit` and :attr:`Normaliser.torch_classes`.

Its **parameters** (:class:`Param`, as ``scipy.stats`` puts ``_shape_info`` on a distribution) give each one's domain
(the constructor refuses a value outside it) and the range the tests and the search draw it from. A
:class:`NormaliserSpec` (name, parameters, reference) builds the normaliser from keyword parameters;
:data:`CONSTRUCTORS` maps each name to one (a user's statements file adds plain constructors, with no test ranges).
"""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Protocol

import numpy as np

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.intervals import Ball, Ops, Unsupported
from attnbounds.theory.mathematics.validation import as_float_array, nonnegative, positive

if TYPE_CHECKING:
    from torch import Tensor

#: each form of a normaliser and the attribute that implements it (``relaxed``: the ``log F`` the prover reads)
FORMS: dict[str, str] = {"float": "weights", "jacobian": "jacobian", "torch": "torch_weights", "ball": "ball_weights",
                         "relaxed": "log_F"}


@dataclass(frozen=True)
class Param:
    """One parameter of a normaliser: its default, its domain (``(0, inf)``, one value or one per instance, when
    ``positive``, ``[0, inf)`` when also ``closed``; else the real line, one value) and the range ``test`` the tests and
    the search draw it from (log-uniformly when ``log``); ``stress``, when given, a narrower range the cross-check of
    forms also draws from (half the time) because the kernels are hardest there."""

    name: str
    default: float
    test: tuple[float, float]
    log: bool
    positive: bool = True
    stress: tuple[float, float] | None = None
    #: with ``positive``: the domain includes its end 0, ``[0, inf)`` (softpick's ``epsilon``)
    closed: bool = False

    @property
    def domain(self) -> tuple[float, float]:
        """The domain's ends: ``(0, inf)`` (``[0, inf)`` when :attr:`closed`) or the real line."""
        return (0.0, math.inf) if self.positive else (-math.inf, math.inf)

    def check(self, value: Any) -> float | np.ndarray:
        """``value`` validated on the domain (:class:`InvalidArgument` naming the parameter otherwise)."""
        if not self.positive:
            return float(as_float_array(self.name, value, 0))
        return nonnegative(self.name, value) if self.closed else positive(self.name, value)


#: the temperature every built-in normaliser divides the logits by; drawn log-uniformly over ``[1e-4, 1e3]``
#: (the kernels are stable on it)
TEMPERATURE = Param("T", 1.0, (1e-4, 1e3), log=True)


class BallContext(Protocol):
    """What a ball form reads of the instance in balls (a :class:`~attnbounds.theory.mathematics.balls.BallInstance`,
    which imports this package): the backend, the float instance, its logits as balls and where they come from, the
    context length, the columns that hold tokens, and sums and shares weighted by the token counts."""

    @property
    def ops(self) -> Ops: ...
    @property
    def inst(self) -> Any: ...
    @property
    def logits(self) -> np.ndarray | None: ...
    @property
    def logit_source(self) -> str | None: ...
    @property
    def length(self) -> Ball: ...
    @property
    def present(self) -> np.ndarray: ...
    def weighted_total(self, values: np.ndarray, columns: np.ndarray | None = None) -> Any: ...
    def share(self, v: np.ndarray, total: Any) -> np.ndarray: ...


class Normaliser:
    """Base of every attention normaliser: a map from logits ``(B, L)`` to weights ``(B, L)`` (module docstring)."""

    name: str = "normaliser"

    #: the forms (:data:`FORMS`) this map has not, each with the reason; a map without a ``ball`` form is certified on
    #: an instance's given weights (renormalised onto the simplex when it is :attr:`normalising`)
    lacks: Mapping[str, str] = {}

    @property
    def params(self) -> dict[str, Any]:
        raise NotImplementedError

    #: True when the map has the form F / sum F with F > 0 (paper eq. 3 and Lemma 1).
    @property
    def positive(self) -> bool:
        return False

    #: True when F does not depend on the sequence length L (Lemma 1).
    @property
    def length_independent(self) -> bool:
        return False

    #: True when, over unbounded logits, the weights reach every point of the closed simplex at every L and T (weights
    #: 0 included): the relaxation prover then reads a bound on the weights alone as one over the simplex
    reaches_simplex: bool = False
    #: An alpha-entmax threshold map ``alpha_i = ((q l_i / T - tau)_+)^(1/q)``, ``q = alpha - 1`` (sparsemax: q = 1;
    #: entmax-1.5: q = 1/2; tau makes the weights sum to one): q, as a sympy rational. Over logits in [-a, a] its
    #: weights are exactly the points p of the closed simplex with ``p_i^q - p_j^q <= 2 q a / T`` for every pair
    #: (the relaxation prover's bounded simplex). None: not such a map
    threshold_power: Any = None
    #: True when the weights always sum to one.
    normalising: bool = True
    #: True when each weight is a function of its own logit alone, ``alpha_i = F(l_i)`` (sigmoid attention: no
    #: normalisation); the ``relaxed`` form ``log_F`` is then that function's log, and the relaxation prover reads each
    #: weight as ``F`` itself, in the quantities whose relaxed form says it can (:attr:`Quantity.elementwise`)
    elementwise: bool = False
    #: True when the weights are undefined unless some logit is > 0 (relu): the search draws the map only for a
    #: statement that names it
    needs_positive_logit: bool = False
    #: True when the torch form takes token classes (``counts``); False: dense logits only
    torch_classes: bool = True

    def has(self, form: str) -> bool:
        """Whether the map implements ``form`` (one of :data:`FORMS`)."""
        if form == "relaxed":
            return hasattr(self, FORMS[form])
        return getattr(type(self), FORMS[form]) is not getattr(Normaliser, FORMS[form])

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """Per-token weights ``(B, K)``; with ``counts`` column k stands for ``counts[:, k]`` equal tokens
        (``sum_k counts_k alpha_k = 1``), see :mod:`attnbounds.theory.mathematics.instance`."""
        raise NotImplementedError

    def jacobian(self, logits: Any) -> np.ndarray:
        """``J[b, i, j] = d alpha_i / d l_j``, closed form, shape ``(B, L, L)``."""
        raise NotImplementedError

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        """The same map in torch (differentiable), for autograd checks and gradient search."""
        raise NotImplementedError

    def ball_weights(self, ex: BallContext, logits: np.ndarray) -> np.ndarray:
        """The weights at ``logits`` (an object array of balls over the columns of ``ex``) in interval arithmetic."""
        raise Unsupported(f"{self!r} has no ball form and does not say why (Normaliser.lacks): nothing about its "
                          "weights is certified")

    def take(self, idx: np.ndarray) -> "Normaliser":
        """The normaliser restricted to the sub-batch ``idx`` (per-instance parameters are sliced)."""
        return self._with({k: (v[idx] if np.ndim(v) else v) for k, v in self.params.items()})

    def _with(self, params: dict[str, Any]) -> "Normaliser":
        return type(self)(**params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


#: what a map through a sort-based threshold (sparsemax, entmax) lacks, and why
THRESHOLD_LACKS: Mapping[str, str] = {
    "relaxed": "not of the form F / sum F: there is no log F for the relaxation prover to read"}


class SimplexMap(Normaliser):
    """A normaliser that is not of the form F / sum F with F > 0 (breaks Lemma 1 on purpose), with a temperature."""

    def __init__(self, T: Any = 1.0):
        self.T = TEMPERATURE.check(T)

    @property
    def params(self) -> dict[str, Any]:
        return {"T": self.T}


# -- helpers of the float forms ---------------------------------------------------------------------
def check_logits(logits: Any) -> np.ndarray:
    """Logits as a float ``(B, L)`` array (a vector is one row); :class:`InvalidArgument` naming a bad value."""
    arr = as_float_array("logits", logits, (1, 2))
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.shape[1] < 1:
        raise InvalidArgument(f"logits must have at least one token (L >= 1), got shape {arr.shape}")
    return arr


def multiplicity(logits: np.ndarray, counts: np.ndarray | None) -> np.ndarray:
    """Tokens per column as floats (ones when ``counts`` is None)."""
    return np.ones(logits.shape) if counts is None else np.asarray(counts, dtype=np.float64)


def length(logits: np.ndarray, counts: np.ndarray | None) -> int:
    """The context length L of a batch (every row's counts sum to it)."""
    return int(logits.shape[-1]) if counts is None else int(np.asarray(counts)[0].sum())


def column(value: Any) -> Any:
    """Broadcast a scalar or per-instance ``(B,)`` parameter against ``(B, L)`` arrays."""
    arr = np.asarray(value, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr[:, None]


def others(values: np.ndarray, extra: Any = 0.0) -> np.ndarray:
    """``sum_{j != i} values_j + extra`` for each column ``i`` of a ``(B, L)`` array of non-negative values: the sum
    less the column, except on each row's largest column, summed directly (``1 - alpha_i`` where ``alpha_i`` is
    nearly 1 without the cancellation of ``total - values_i``; elsewhere ``values_i <= total / 2``)."""
    rows = np.arange(values.shape[0])
    top = values.argmax(-1)
    extra = np.broadcast_to(np.asarray(extra, dtype=np.float64), (values.shape[0], 1))[:, 0]
    out = values.sum(-1, keepdims=True) + extra[:, None] - values
    rest = values.copy()
    rest[rows, top] = 0.0
    out[rows, top] = rest.sum(-1) + extra
    return out


def first_value(value: Any) -> float:
    """A parameter's value on a single instance (the first of a per-instance array), what a ball form reads."""
    return float(np.ravel(np.asarray(value, dtype=np.float64))[0])


# -- specifications and the registry -----------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class NormaliserSpec:
    """A normaliser's specification: its name, its parameters (:class:`Param`; the temperature among them) and its
    reference; calling it with keyword parameters builds the normaliser (unknown keywords: ``TypeError``)."""

    name: str
    parameters: tuple[Param, ...]
    reference: str

    def __call__(self, **params: Any) -> Normaliser:
        raise NotImplementedError

    @property
    def own(self) -> tuple[Param, ...]:
        """The parameters besides the temperature ``T``."""
        return tuple(p for p in self.parameters if p.name != "T")


@dataclass(frozen=True, eq=False)
class MapSpec(NormaliserSpec):
    """The specification of a map given by its class (:class:`Normaliser` subclass, whose methods are its forms)."""

    cls: type[Normaliser] = Normaliser

    def __call__(self, **params: Any) -> Normaliser:
        return self.cls(**params)


def map_spec(cls: type[Normaliser], reference: str, parameters: tuple[Param, ...] = (TEMPERATURE,)) -> MapSpec:
    """The specification of the map ``cls`` (named by ``cls.name``)."""
    return MapSpec(cls.name, parameters, reference, cls)


#: name -> constructor with keyword parameters, for CLI, strategies and user files: a :class:`NormaliserSpec` for the
#: built-in normalisers (:func:`register`); a statements file or a Python callable adds plain constructors for its
#: process (:func:`constructors_added`)
CONSTRUCTORS: dict[str, Callable[..., Normaliser]] = {}


def register(spec: NormaliserSpec) -> NormaliserSpec:
    """Add a specification under its name (names are unique)."""
    if spec.name in CONSTRUCTORS:
        raise InvalidArgument(f"a normaliser named {spec.name!r} is already registered")
    CONSTRUCTORS[spec.name] = spec
    return spec


def own_parameters(name: str) -> tuple[Param, ...]:
    """The parameters besides ``T`` of the normaliser built by ``name`` with their test ranges; none for a constructor
    without a specification (a user's: its parameters stay at their values)."""
    if name not in CONSTRUCTORS:
        raise InvalidArgument(f"unknown normaliser {name!r}; allowed: {', '.join(CONSTRUCTORS)}")
    made = CONSTRUCTORS[name]
    return made.own if isinstance(made, NormaliserSpec) else ()


@functools.lru_cache(maxsize=None)
def prototype(name: str) -> Normaliser:
    """The normaliser built by ``name`` at its default parameters: what its capabilities are read from."""
    return make(name)


def constructor_parameters(name: str) -> frozenset[str]:
    """The parameters of the normaliser built by ``name`` besides ``T`` (e.g. ``b`` of exp_poly)."""
    return frozenset(prototype(name).params) - {"T"}


@contextlib.contextmanager
def constructors_added(added: Mapping[str, Callable[..., Normaliser]]) -> Iterator[None]:
    """``added`` join (or replace names in) :data:`CONSTRUCTORS` inside the block only (the search draws them
    there); the constructors are restored afterwards."""
    before = dict(CONSTRUCTORS)
    CONSTRUCTORS.update(added)
    prototype.cache_clear()
    try:
        yield
    finally:
        CONSTRUCTORS.clear()
        CONSTRUCTORS.update(before)
        prototype.cache_clear()


def make(name: str, **params: Any) -> Normaliser:
    """Build a normaliser by its constructor's name (:data:`CONSTRUCTORS`)."""
    if name not in CONSTRUCTORS:
        raise InvalidArgument(f"unknown normaliser {name!r}; allowed: {', '.join(CONSTRUCTORS)}")
    return CONSTRUCTORS[name](**params)
