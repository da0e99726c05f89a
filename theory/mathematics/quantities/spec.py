"""One specification per quantity, with its implementations registered on it.

A :class:`Quantity` says what a named scalar of the paper is (definition, paper reference, shape),
what it reads from an instance (``needs``), whether it depends on the normaliser beyond the
weights, what one evaluation costs (its cost class in :data:`COSTS`, with the search's work rates), how
large the numbers it is computed from are (``magnitude``: the yardstick of rounding for the search and for
certification), and, for expectations, its Monte Carlo protocol. Its implementations register on it:

- ``float``: numpy, vectorised over the batch, for dense instances and token classes alike
  (columns with their counts; :mod:`attnbounds.theory.mathematics.instance`), the search's and the oracle's;
- ``ball``: interval arithmetic from the definition (:mod:`attnbounds.theory.mathematics.balls`), what certification trusts;
- ``torch``: differentiable, what gradient ascent climbs;
- ``relaxed``: the quantity on the relaxed space of :mod:`attnbounds.theory.mathematics.quantities.relaxed` (a few distinguished tokens
  and totals over all tokens, with ``t = 1/L``), a sympy expression: what the relaxation prover reads.

Search, certification, budgets and strategies read the specification; nothing else keeps a table
of quantities. ``tests/rigor/test_cross_check.py`` compares every implementation with every other.

Shapes: ``B`` (one value per instance), ``BL`` (per token: one value per column, "for all i"),
``BN`` (per selected token: one value per column, meaningful on the selected columns).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, TypeVar

import numpy as np

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.intervals import Unsupported

if TYPE_CHECKING:
    import sympy as sp
    from torch import Tensor

    from attnbounds.theory.mathematics.balls import BallInstance
    from attnbounds.theory.mathematics.instance import Instance
    from attnbounds.theory.mathematics.intervals import BallValue
    from attnbounds.theory.mathematics.quantities.relaxed import RelaxedInstance
    from attnbounds.theory.mathematics.quantities.torch_state import State

#: each backend's form, as registered (the decorators return the function unchanged)
FloatForm = TypeVar("FloatForm", bound=Callable[["Instance"], Any])
BallForm = TypeVar("BallForm", bound=Callable[["BallInstance"], "BallValue"])
TorchForm = TypeVar("TorchForm", bound=Callable[["State"], "Tensor"])
RelaxedForm = TypeVar("RelaxedForm", bound=Callable[["RelaxedInstance"], "sp.Expr"])

Shape = Literal["B", "BL", "BN"]
Backend = Literal["float", "ball", "torch", "relaxed"]
BACKENDS: tuple[Backend, ...] = ("float", "ball", "torch", "relaxed")
#: what an instance can carry: logits (and a normaliser), query/keys, token vectors x, a selection I_N,
#: sphere parameters (M, delta, r), a finite-difference direction and step, head parameters (p, H),
#: and "ratio" for a normaliser of the form F / sum F (its log F is read, not only the weights)
NEEDS = frozenset({"logits", "qk", "x", "selection", "sphere", "fd", "heads", "ratio"})


@dataclass(frozen=True)
class Cost:
    """A cost class: what one evaluation costs, the sizes that keep one test example cheap, and the search's work
    per second of budget (:mod:`attnbounds.theory.deciding.search.budget` turns a budget into counts through these rates).

    The rates are calibrated with ``python bench/calibrate.py`` on the reference machine (2 cores, one per search):
    about 0.8 of the measured whole-search rates (overheads included), so a search takes about its budget.
    """

    name: str
    rank: int  # a statement costs what its most expensive quantity costs
    doc: str
    test_L: int  # largest L a hypothesis example draws for it
    test_batch: int  # largest batch a hypothesis example draws for it
    batch: int  # instances per random batch (dense batches hold at most budget.TOKENS_PER_BATCH tokens)
    max_L: int  # longest dense sequence the random search draws (longer ones are token classes)
    random_per_s: float  # dense random batches per second of budget
    class_per_s: float  # token-class random batches per second of budget
    max_class_L: int  # longest token-class context at the default budget (it grows with the budget)
    gradient_per_s: float  # gradient starts (each a batch of ``gradient_batch``) per second
    gradient_batch: int
    gradient_steps: int
    gradient_max_L: int  # longest sequence drawn for fresh gradient starts
    targeted_per_s: float  # hypothesis examples per second
    shrink_per_s: float  # shrink evaluations per second
    refine_per_s: float  # Monte Carlo re-evaluations (with REFINE_DRAWS draws) of the tightest instances per second
    #: the share of a budget's random and class batches a statement about a Python callable gets (torch, batch by
    #: batch, and autograd Jacobians are slower than the generated numpy kernels the rates are measured on)
    callable_rate: float
    #: one dense instance's work grows as L^2 or more (a Jacobian's SVD), not as L: batches hold fewer rows
    quadratic: bool = False
    #: how the random search shapes its instances: ``"free"``; ``"enumerable"`` (few tokens and classes, so that
    #: the random N-subsets are enumerated exactly); ``"sampled"`` (few tokens, small dimension, Monte Carlo draws)
    draws: Literal["free", "enumerable", "sampled"] = "free"


#: cost classes, cheapest first; ``softmax-jacobian`` is no quantity's own class: a hypothesis fixing softmax makes
#: the Jacobian quantities closed forms (``Hypothesis.cheaper``)
COSTS: dict[str, Cost] = {c.name: c for c in (
    Cost("weights", 0, "weights and logits only: O(L)", test_L=4096, test_batch=16,
         batch=1024, max_L=4096, random_per_s=20.0, class_per_s=180.0, max_class_L=10**7, gradient_per_s=9.0,
         gradient_batch=128, gradient_steps=60, gradient_max_L=16, targeted_per_s=250.0, shrink_per_s=1000.0,
         refine_per_s=0.0, callable_rate=0.25),
    Cost("softmax-jacobian", 1, "Jacobian norms of softmax: closed forms in O(L)", test_L=96, test_batch=8,
         batch=1024, max_L=512, random_per_s=90.0, class_per_s=230.0, max_class_L=10**7, gradient_per_s=10.0,
         gradient_batch=128, gradient_steps=60, gradient_max_L=16, targeted_per_s=300.0, shrink_per_s=1500.0,
         refine_per_s=0.0, callable_rate=0.25),
    Cost("jacobian", 1, "Jacobian norms: O(L) closed forms, an SVD per instance when (log F)' varies", test_L=96,
         test_batch=8, batch=512, max_L=128, random_per_s=170.0, class_per_s=185.0, max_class_L=10**7,
         gradient_per_s=7.0, gradient_batch=128, gradient_steps=60, gradient_max_L=16, targeted_per_s=400.0,
         shrink_per_s=1000.0, refine_per_s=0.0, callable_rate=0.08, quadratic=True),
    Cost("tokens", 2, "token vectors: O(L d), O(L N d) for pairwise distances", test_L=128, test_batch=8,
         batch=256, max_L=256, random_per_s=45.0, class_per_s=160.0, max_class_L=10**7, gradient_per_s=6.0,
         gradient_batch=128, gradient_steps=60, gradient_max_L=16, targeted_per_s=300.0, shrink_per_s=1000.0,
         refine_per_s=0.0, callable_rate=0.25),
    Cost("subsets", 3, "expectations over random N-subsets, enumerated through class counts", test_L=24,
         test_batch=8, batch=64, max_L=10, random_per_s=230.0, class_per_s=70.0, max_class_L=10**7,
         gradient_per_s=6.0, gradient_batch=64, gradient_steps=60, gradient_max_L=8, targeted_per_s=250.0,
         shrink_per_s=1000.0, refine_per_s=0.0, callable_rate=0.25, draws="enumerable"),
    Cost("sphere", 4, "expectations over random sphere embeddings: Monte Carlo, token by token", test_L=12,
         test_batch=4, batch=8, max_L=6, random_per_s=55.0, class_per_s=0.0, max_class_L=6, gradient_per_s=0.0,
         gradient_batch=0, gradient_steps=0, gradient_max_L=16, targeted_per_s=130.0, shrink_per_s=25.0,
         refine_per_s=16.0, callable_rate=0.25, draws="sampled"),
)}


@dataclass(frozen=True)
class MonteCarlo:
    """How an expectation is computed: exactly when it can be, else by sampling with a Hoeffding interval.

    ``half-width = U sqrt(log(2 / beta) / (2 n))`` for ``n`` draws of a value that lies in an interval
    of length ``U`` (:func:`hoeffding_halfwidth`), ``beta`` the instance parameter ``mc_level``
    (default 1e-6); ``mc_draws`` (default 2000) and ``seed`` (default 0) set the sampling.
    """

    over: str  # what is random
    exact: str  # when the expectation is computed exactly instead
    range: str  # the deterministic bound U of the sampled value
    classes: str  # what happens for token classes


def hoeffding_halfwidth(U: Any, draws: int, level: float) -> Any:
    """``U sqrt(log(2 / level) / (2 draws))``: a two-sided Hoeffding half-width at level ``1 - level``."""
    return U * np.sqrt(np.log(2.0 / level) / (2.0 * draws))


def mc_settings(params: dict[str, np.ndarray]) -> tuple[int, int, float]:
    """``(draws, seed, level)`` from an instance's parameters (defaults 2000, 0, 1e-6)."""
    draws = int(params["mc_draws"][0]) if "mc_draws" in params else 2000
    seed = int(params["seed"][0]) if "seed" in params else 0
    level = float(params["mc_level"][0]) if "mc_level" in params else 1e-6
    if draws < 1 or not 0 < level < 1:
        raise InvalidArgument(f"mc_draws must be >= 1 and mc_level in (0, 1), got {draws}, {level}")
    return draws, seed, level


@dataclass(eq=False)
class Quantity:
    """The specification of one named quantity (module docstring); register implementations with
    :meth:`float_form`, :meth:`ball_form`, :meth:`torch_form` and :meth:`relaxed_form`."""

    name: str
    shape: Shape
    description: str
    definition: str
    reference: str
    needs: frozenset[str]
    cost: str
    normaliser: bool = False
    #: the quantity is >= 0 on every instance (a weight, a norm, a largest absolute value): what the relaxation prover
    #: may assume of it when it decides the sign of a coefficient
    nonnegative: bool = False
    magnitude: Callable[["Instance"], np.ndarray] | None = None
    montecarlo: MonteCarlo | None = None
    class_limit: int | None = None  # longest token-class instance supported (None: any L)
    #: the ball form reads the counts only through ``ex.m``, ``ex.length`` and ``ex.size_N`` and decides no
    #: branch on a count-dependent value, so it gives a closed form along growing token classes
    #: (:mod:`attnbounds.theory.deciding.limits`; the others decide branches on count-dependent values, enumerate
    #: count vectors, sample, or bound eigenvalues from float eigenvectors)
    closed_form: bool = False
    #: the float form differentiates the normaliser with autograd (a Jacobian): a Python callable whose autograd
    #: Jacobian cannot be trusted is refused for it (:func:`attnbounds.theory.mathematics.callables.refuse_off_graph`)
    autograd: bool = False
    #: it reads the extremes of F on [-a, a], which move with the temperature: gradient ascent keeps T fixed
    F_extremes: bool = False
    #: its value reads the logits' bound ``a`` (the extremes of F on [-a, a], or the tightest such ``a``): a statement
    #: reading it is not the same statement without the hypothesis logits-bounded
    reads_logit_bound: bool = False
    #: its relaxed form reads an element-wise map (:attr:`Normaliser.elementwise`, ``alpha_i = F(l_i)``) too: it
    #: reads the weights through ``rx.weight`` and branches on ``rx.elementwise`` wherever it reads more (the
    #: quotient rule of F / sum F); a statement of an element-wise map reading any other quantity is not relaxed
    elementwise: bool = False
    #: forms it does not have, each with the reason (a missing form not listed here fails the forms test)
    lacks: Mapping[str, str] = field(default_factory=dict)
    forms: dict[str, Callable[..., Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.shape not in ("B", "BL", "BN"):
            raise InvalidArgument(f"quantity {self.name}: shape must be B, BL or BN, got {self.shape!r}")
        if self.cost not in COSTS:
            raise InvalidArgument(f"quantity {self.name}: cost must be one of {sorted(COSTS)}, got {self.cost!r}")
        self.needs = frozenset(self.needs)
        if not self.needs <= NEEDS:
            raise InvalidArgument(f"quantity {self.name}: unknown needs {sorted(self.needs - NEEDS)}; allowed {sorted(NEEDS)}")

    @property
    def estimate(self) -> bool:
        """True for expectations: the float form returns ``(value, half-width)``."""
        return self.montecarlo is not None

    def _register(self, backend: Backend, fn: Callable[..., Any]) -> None:
        if backend in self.forms:
            raise InvalidArgument(f"quantity {self.name} already has a {backend} implementation")
        self.forms[backend] = fn

    def float_form(self, fn: FloatForm) -> FloatForm:
        """Register ``fn(inst) -> (B,) / (B, K) array`` (``(value, half-width)`` for an estimate)."""
        self._register("float", fn)
        return fn

    def ball_form(self, fn: BallForm) -> BallForm:
        """Register ``fn(ex) -> ball`` (or an object array over columns) on a :class:`~attnbounds.theory.mathematics.balls.BallInstance`."""
        self._register("ball", fn)
        return fn

    def torch_form(self, fn: TorchForm) -> TorchForm:
        """Register ``fn(state) -> tensor`` on a :class:`~attnbounds.theory.mathematics.quantities.torch_state.State`."""
        self._register("torch", fn)
        return fn

    def relaxed_form(self, fn: RelaxedForm) -> RelaxedForm:
        """Register ``fn(rx) -> sympy expression`` on a :class:`~attnbounds.theory.mathematics.quantities.relaxed.RelaxedInstance`."""
        self._register("relaxed", fn)
        return fn

    def has(self, backend: Backend) -> bool:
        return backend in self.forms

    def why_not(self, backend: Backend) -> str:
        """Why the quantity has no ``backend`` form (its :attr:`lacks`), or a plain statement that it has none."""
        return self.lacks.get(backend, f"the quantity {self.name} has no {backend} form")

    def __repr__(self) -> str:
        return f"Quantity({self.name!r}, {self.shape}, cost={self.cost}, forms={sorted(self.forms)})"


QUANTITIES: dict[str, Quantity] = {}


def register(q: Quantity) -> Quantity:
    """Add a specification (names are unique)."""
    if q.name in QUANTITIES:
        raise InvalidArgument(f"a quantity named {q.name!r} is already registered")
    QUANTITIES[q.name] = q
    return q


#: reasons a form is missing that several quantities share (:attr:`Quantity.lacks`)
NO_RELAXED_VECTORS = 'token vectors x: a relaxation would give every token d coordinates (not built)'
NO_RELAXED_RANDOM = 'an expectation over random sphere embeddings or heads (the relaxation reads deterministic quantities)'
#: xi_i and C_i: deterministic in the selected weights, but one value per selected token, and the relaxation holds
#: the selected tokens as a distribution (atoms), not as tokens a relation may range over one by one
NO_RELAXED_PER_SELECTED = 'a per-selected-token quantity (the selected tokens are a distribution in the relaxation)'
NO_TORCH_COUNT = 'a count: piecewise constant in every input, no gradient for ascent to follow'
NO_TORCH_MC = 'a Monte Carlo mean of counts over random sphere draws: no gradient'


def define(name: str, shape: Shape, description: str, *, definition: str, reference: str, needs: Any,
           cost: str, **kwargs: Any) -> Quantity:
    """Create and register a :class:`Quantity` in one call."""
    return register(Quantity(name, shape, description, definition, reference, frozenset(needs), cost, **kwargs))


def spec(name: str) -> Quantity:
    """The specification of ``name``; the error lists the known names."""
    try:
        return QUANTITIES[name]
    except KeyError:
        raise InvalidArgument(f"unknown quantity {name!r}; known: {', '.join(sorted(QUANTITIES))}") from None


def _raw(name: str, inst: "Instance") -> Any:
    q = spec(name)
    key = "q:" + name
    if key not in inst._cache:
        if "float" not in q.forms:
            raise InvalidArgument(f"quantity {name!r} has no float implementation")
        if inst.counts is not None and q.class_limit is not None and inst.L > q.class_limit:
            from attnbounds.theory.mathematics.errors import NotApplicable

            raise NotApplicable(f"{name} has no exact token-class form; it is computed token by token up to "
                                f"L = {q.class_limit}, got L = {inst.L}")
        inst._cache[key] = q.forms["float"](inst)
    return inst._cache[key]


def compute(name: str, inst: "Instance") -> np.ndarray:
    """The value (point estimate for expectations) of quantity ``name`` on every instance."""
    out = _raw(name, inst)
    return out[0] if QUANTITIES[name].estimate else out


def interval(name: str, inst: "Instance") -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)`` enclosing the quantity (with the stated confidence for Monte Carlo estimates)."""
    out = _raw(name, inst)
    if QUANTITIES[name].estimate:
        mean, half = out
        return mean - half, mean + half
    return out, out


def ball_value(name: str, ex: "BallInstance") -> "BallValue":
    """Quantity ``name`` on the exact instance (cached): a ball, or an object array over columns."""
    q = QUANTITIES.get(name)
    if q is None or "ball" not in q.forms:
        raise Unsupported(f"quantity {name!r} has no interval implementation")
    if ex.inst.counts is not None and q.class_limit is not None and ex.L > q.class_limit:
        raise Unsupported(f"{name} has no exact token-class form beyond L = {q.class_limit}")
    key = "q:" + name
    if key not in ex.cache:
        ex.cache[key] = q.forms["ball"](ex)
    return ex.cache[key]


def magnitude(name: str, inst: "Instance") -> np.ndarray:
    """The size of the numbers quantity ``name`` is computed from (``|value|`` when the spec gives none):
    its float rounding error is a few units in the last place of this times the number of terms."""
    q = spec(name)
    value = np.abs(compute(name, inst))
    if q.magnitude is None:
        return value
    m = np.asarray(q.magnitude(inst), dtype=np.float64)
    if m.ndim == 1 and value.ndim == 2:
        m = m[:, None]
    return np.maximum(value, m)
