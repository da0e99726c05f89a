"""The relaxed space of a statement: what its hypotheses say about it (:class:`Space`, written by their ``relax``
rules, :class:`~attnbounds.theory.mathematics.quantities.relaxed.Space`) and its tokens (:class:`Token`) under the
space's normaliser and logit domain (:class:`TokenModel`, or the log-F-values model :class:`LogFValues`)."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import sympy as sp

from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.normalisers import (L_sym, Normaliser, RatioNormaliser, derivative, l_sym, sigmoid,
                                                      softplus)
from attnbounds.theory.deciding.prover.bnb import branch_and_bound
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem, length_range, strip_positive, t_sym
from attnbounds.theory.deciding.prover.program import exact_rational
from attnbounds.theory.mathematics.statement import Statement

INF = math.inf
#: work (operations) spent deciding whether log F is monotone in the logit
MONOTONE_WORK = 2_000_000
#: the temperatures a property of F is decided at when log F reads T otherwise than through l / T
PROPERTY_TEMPERATURES = tuple(2.0**k for k in range(-6, 7))


class Declined(AttnBoundsError):
    """The statement has no relaxation (a hypothesis or quantity the prover does not read, ...): the reason."""


@dataclass
class Token:
    """A token of the relaxed instance: its coordinates, logit ``l``, ``lam = log F(l)`` and ``g = (log F)'(l)``;
    in the weights model (softmax over unbounded logits) its ``weight`` itself, and no logit (``l`` None: softmax
    weights determine the logits only up to a common shift)."""

    name: str
    coordinates: list[Coordinate]
    l: sp.Expr | None
    lam: sp.Expr
    g: sp.Expr
    weight: sp.Expr | None = None

    @property
    def F(self) -> sp.Expr:
        return sp.exp(self.lam)


@dataclass
class Space:
    """What the statement's hypotheses say about the relaxed space (their ``relax`` rules write here)."""

    statement: Statement
    log_F: sp.Expr | None = None  # log F over l_sym, L_sym and parameter symbols
    normaliser_params: dict[str, float] = field(default_factory=dict)  # fixed values (T excluded)
    normaliser_text: str = ""
    name: str = "relaxed"
    bounded_logits: bool = False
    selection: bool = False
    min_length: int = 1
    boxes: dict[str, tuple[float, float]] = field(default_factory=dict)  # parameter boxes (closure)
    understood: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    pending: list[tuple[Callable[[Normaliser], bool], str, bool]] = field(default_factory=list)
    #: no hypothesis fixes log F and those about F say only what every point of the log-F-values model satisfies
    #: (F positive, independent of L): the relaxation ranges over every such F (:class:`LogFValues` alone)
    every_F: bool = False
    #: a normaliser whose weights reach every point of the closed simplex over unbounded logits (sparsemax,
    #: entmax-1.5: :attr:`~attnbounds.theory.mathematics.normalisers.Normaliser.reaches_simplex`), as its hypothesis
    #: says it; "" for none
    simplex: str = ""
    #: an alpha-entmax threshold map's ``q = alpha - 1`` (:attr:`Normaliser.threshold_power`): over logits in [-a, a]
    #: its weights are the bounded simplex, every two weights' q-th powers within ``2 q a / T``; None: the whole
    #: simplex only
    spread: Any = None
    #: the threshold map at a temperature (the bounded simplex's points realised as its logits), or None
    simplex_map: Callable[[float], Any] | None = None
    #: what bounds the logits: the parameter "a" (logits-bounded) or "keys" (logits-qk: a = Delta_max)
    logit_bound: str = ""
    #: an element-wise map (``alpha_i = F(l_i)``, no sum: :attr:`Normaliser.elementwise`): the map at a temperature
    elementwise: Callable[[float], Normaliser] | None = None

    # rules the hypotheses call -----------------------------------------------------------------------------
    def normaliser(self, log_F: sp.Expr, params: dict[str, float], text: str, name: str = "relaxed",
                   elementwise: Callable[[float], Normaliser] | None = None) -> None:
        """The weights come from ``F = exp(log_F)`` with these parameter values (``T`` free): ``F / sum F``, or, with
        ``elementwise`` (the map at a temperature), ``F`` itself."""
        log_F = sp.sympify(log_F)
        self.name = name
        if self.log_F is not None and (sp.simplify(self.log_F - log_F) != 0
                                       or (self.elementwise is None) != (elementwise is None)):
            self.problems.append(f"two normalisers ({self.normaliser_text}; {text})")
        self.elementwise = elementwise
        self.log_F = log_F
        self.normaliser_params = {k: float(v) for k, v in params.items() if k != "T"}
        self.normaliser_text = text
        self._bound("T", 0.0, INF)  # a temperature is > 0

    def make(self, T: float) -> Normaliser:
        """The universe's normaliser at temperature ``T`` (its other parameters at their values)."""
        assert self.log_F is not None
        if self.elementwise is not None:
            return self.elementwise(float(T))
        return RatioNormaliser(self.name, self.log_F, {**self.normaliser_params, "T": float(T)})

    def softmax(self) -> None:
        """``log F = l / T + c`` (the constant c cancels in the weights)."""
        T = sp.Symbol("T")
        if self.log_F is None:
            self.normaliser(l_sym / T, {}, "softmax, log F = l/T", name="softmax")
            return
        slope = sp.diff(self.log_F, l_sym)
        if l_sym in slope.free_symbols or sp.simplify(slope * T - 1) != 0 or self.elementwise is not None:
            self.problems.append(f"the statement's normaliser ({self.normaliser_text}) is not a softmax")

    def normaliser_property(self, holds: Callable[[Normaliser], bool], text: str, every_F: bool = False) -> None:
        """A property of F the prover checks on the universe's ``log F`` once it is known (it then holds on every
        instance); alone, with no hypothesis fixing log F, it ranges over every such F: relaxed (by the log-F-values
        model, whose points are the instances of every F with finite positive values) when ``every_F`` says the
        property holds at each such point, else not relaxed."""
        self.pending.append((holds, text, every_F))

    def whole_simplex(self, text: str, spread: Any = None, make: Callable[[float], Any] | None = None) -> None:
        """The weights are every point of the closed simplex (``text`` says whose): with no bound on the logits and
        nothing else said about F, a bound on the weights alone is one over the simplex itself, which the
        log-F-values model relaxes (every positive F at once; its closure holds the weights 0 these maps reach).
        With ``spread`` (an alpha-entmax map's ``q = alpha - 1``, :attr:`Normaliser.threshold_power`), over logits
        bounded by the parameter a too: the simplex with every two weights' q-th powers within ``2 q a / T``, whose
        points ``make`` (the map at a temperature) realises as logits."""
        self.simplex = text
        self.spread = spread
        self.simplex_map = make

    def check_properties(self) -> None:
        """Decide the pending properties on the universe's log F (after every hypothesis is read), or mark the space
        as ranging over every F (:attr:`every_F`) when none fixes it and each is one the log-F-values model keeps, or
        when the weights are the whole closed simplex (:meth:`whole_simplex`) and nothing else is said of them."""
        if self.simplex:
            bounded_ok = self.spread is not None and self.logit_bound == "a"
            if self.log_F is not None or (self.bounded_logits and not bounded_ok) or self.pending:
                self.problems.append(f"{self.simplex} only over unbounded logits, with nothing else said of F (here "
                                     f"{'the logits are bounded' if self.bounded_logits else 'F is said more of'})")
                return
            self.every_F = True
            where = (f"every point of the closed simplex whose weights' powers p^{self.spread} differ by at most "
                     f"{2 * self.spread} a / T" if self.bounded_logits else "every point of the closed simplex")
            self.normaliser(l_sym, {}, f"{where} ({self.simplex})", name="every-F")
            if not self.bounded_logits:
                self.spread = None  # no bound on the logits: the whole simplex
            return
        if self.log_F is None and self.pending and all(every for _, _, every in self.pending):
            self.every_F = True
            self.normaliser(l_sym, {}, "every F positive and independent of L (log F values only)", name="every-F")
            return
        for holds, text, _ in self.pending:
            if self.log_F is None:
                self.problems.append(f"'{text}' alone ranges over every such F (the prover reads one log F)")
            elif not all(holds(self.make(T)) for T in self._temperatures()):
                self.problems.append(f"the normaliser {self.normaliser_text} does not satisfy '{text}'")

    def _temperatures(self) -> tuple[float, ...]:
        """Where a property of F (each over every real logit) is decided, to hold at every temperature: at T = 1
        alone when log F reads T only through l / T (l -> T l maps F at T onto F at 1), else at each of
        :data:`PROPERTY_TEMPERATURES` (``log(l^2 + (T - 2)^2)`` is finite at T = 1, not at l = 0 when T = 2)."""
        assert self.log_F is not None
        return (1.0,) if t_scaled(self.log_F) else PROPERTY_TEMPERATURES

    def bound_logits(self, by: str = "a") -> None:
        """Every logit lies in ``[-a, a]``: ``a`` the statement's parameter (``by`` "a"), or (``by`` "keys", the logits
        are query-key products) ``a = Delta_max = ||q|| max_j ||k_j||``, which bounds every ``|<q, k_j>|`` by
        Cauchy-Schwarz: the instances of q and k are then among the relaxed points with that ``a``."""
        if self.bounded_logits and self.logit_bound != by:
            self.problems.append("two bounds of the logits (the parameter a and the keys' Delta_max)")
        if by == "keys":
            if "a" in self.statement.parameters():
                self.problems.append("the statement reads a parameter 'a', the name the relaxation gives the keys' "
                                     "bound Delta_max")
            self._bound("a", 0.0, INF)
        self.bounded_logits = True
        self.logit_bound = by

    def top_n(self) -> None:
        """The selection I_N holds N largest weights: two populations of tokens, every selected one at least as heavy
        as every other one."""
        self.selection = True

    def require_length(self, n: int) -> None:
        self.min_length = max(self.min_length, int(n))

    def parameter_formula(self, formula: sp.Basic) -> None:
        """A conjunction of bounds on one parameter (``T > 0``, ``1 <= N <= L``): the parameter's box."""
        parts = list(formula.args) if isinstance(formula, sp.And) else [formula]
        for rel in parts:
            if not isinstance(rel, sp.core.relational.Relational):
                self.problems.append(f"cannot read the bound {rel}")
                continue
            lhs, rhs = rel.lhs, rel.rhs
            if isinstance(rel, (sp.GreaterThan, sp.StrictGreaterThan)):
                lhs, rhs = rhs, lhs  # now lhs <= rhs
            if isinstance(rhs, sp.Symbol) and lhs.is_number:
                self._bound(str(rhs), float(lhs), INF)
            elif isinstance(lhs, sp.Symbol) and rhs.is_number:
                self._bound(str(lhs), -INF, float(rhs))
            elif isinstance(lhs, sp.Symbol) and isinstance(rhs, sp.Symbol) and {str(lhs), str(rhs)} == {"N", "L"}:
                continue  # N <= L: the selection's structure
            else:
                self.problems.append(f"cannot read the bound {rel}")

    def _bound(self, name: str, lo: float, hi: float) -> None:
        if name == "L":
            self.require_length(int(math.ceil(lo)))
            if hi < INF:
                self.boxes["L"] = (max(self.boxes.get("L", (1, INF))[0], lo), min(self.boxes.get("L", (1, INF))[1], hi))
            return
        old = self.boxes.get(name, (-INF, INF))
        self.boxes[name] = (max(old[0], lo), min(old[1], hi))


def t_scaled(log_F: sp.Expr) -> bool:
    """Whether log F depends on the logit and T only through l / T (the logit coordinate then absorbs T)."""
    T = sp.Symbol("T")
    if T not in log_F.free_symbols and any(s.name == "T" for s in log_F.free_symbols):
        T = next(s for s in log_F.free_symbols if s.name == "T")
    z = sp.Dummy("z")
    scaled = log_F.xreplace({l_sym: z * T})
    return T not in sp.simplify(scaled).free_symbols


def _plain(expr: sp.Expr) -> sp.Expr:
    """Parameter symbols without assumptions (the relaxed space's coordinates are plain real symbols)."""
    return expr.xreplace({s: sp.Symbol(s.name, real=True) for s in expr.free_symbols
                          if isinstance(s, sp.Symbol) and s not in (l_sym, L_sym)})


class TokenModel:
    """A token's coordinates and features under the space's normaliser and logit domain.

    Bounded logits: ``l = a u`` with ``u`` in ``[-1, 1]``. Unbounded logits: ``l = S log(s / (1 - s))`` with ``s``
    in ``[0, 1]`` (``S = T`` when log F reads ``l / T`` only, else 1): a bounded change of variable, so that
    suprema approached as logits go to infinity are in the (closed) relaxed space; F's features are then
    simplified symbolically, so that they usually extend continuously to ``s = 0`` and ``s = 1``.
    """

    def __init__(self, space: Space, params: dict[str, sp.Expr], length: sp.Expr, boxes: list[Coordinate]):
        assert space.log_F is not None
        self.boxes = boxes
        self.space = space
        self.params = params
        self.length = length
        log_F = _plain(space.log_F)
        subs = {sp.Symbol(k, real=True): v for k, v in params.items()}
        self.log_F = exact_floats(log_F.xreplace(subs).xreplace({L_sym: length}))
        self.dlog_F = exact_floats(_plain(derivative(space.log_F, l_sym)).xreplace(subs).xreplace({L_sym: length}))
        self.scaled = t_scaled(space.log_F)
        self._monotone: int | None = None
        T = params.get("T", sp.Symbol("T"))
        slope = sp.diff(self.log_F, l_sym)
        #: softmax over unbounded logits: every point of the open simplex is the weights of some logits, so the
        #: tokens are their weights (roles by stick-breaking, the others as a mass-weighted distribution of weights)
        self.weights = (not space.bounded_logits and not space.selection and l_sym not in slope.free_symbols
                        and sp.simplify(slope * T - 1) == 0)
        #: every F over unbounded logits (:meth:`with_free_slopes`): the weights model with each token's slope
        #: ``g = (log F)'`` a coordinate of its own
        self.slopes = False
        self.T = T

    def with_free_slopes(self) -> "TokenModel":
        """Every F over unbounded logits, for a relation that reads the slopes: the weights are every point of the
        open simplex (F takes any positive values at distinct logits) and each token's slope is free of them (F takes
        any slopes there too; tied logits share both, a face), so the tokens are their weights, as for softmax
        (:attr:`weights`), each with a slope coordinate. A point is no instance of one F: nothing is realised."""
        other = copy.copy(self)
        other.weights, other.slopes = True, True
        return other

    def describe(self) -> str:
        if self.slopes:
            return ("every F over unbounded logits: the weights themselves and each token's slope (log F)' (every "
                    "point of the open simplex, every slope)")
        if self.weights:
            return ("softmax over unbounded logits: the weights themselves (distinguished tokens by stick-breaking, "
                    "the others as a mass-weighted distribution of their weights)")
        if self.space.bounded_logits:
            return "logits l = a u, u in [-1, 1]"
        return "logits l = " + ("T" if self.scaled else "") + " log(s / (1 - s)), s in [0, 1] (compactified)"

    def new_weighted(self, name: str, kind: str, left: sp.Expr) -> tuple[Token, sp.Expr]:
        """The weights model: a distinguished token taking the share ``b`` of the weight ``left`` not yet given out
        (``kind`` role), or an atom of the others (``kind`` atom: a weight ``left * y``, ``y`` the fraction of the
        others' total); returns the token and what is left."""
        if kind == "role":
            b = sp.Symbol(f"b_{name}", nonnegative=True)
            w, rest = left * b, left * (1 - b)
            coords = [Coordinate(b, 0.0, 1.0, kind, f"share of {name} in the weight left")]
        else:
            y = sp.Symbol(f"y_{name}", nonnegative=True)
            w, rest = left * y, left
            coords = [Coordinate(y, 0.0, 1.0, kind, f"weight of a token of {name} over the others' total")]
        g = _free_slope(name, kind, coords) if self.slopes else 1 / self.T
        return Token(name, coords, None, sp.log(w), g, w), rest

    def at_end(self, side: int) -> Token:
        """The token box's end ``l = +a`` (``side`` 1) or ``-a`` (-1), as a token without coordinates."""
        if not self.space.bounded_logits:
            raise Declined("the ends of the logit box are at infinity without logits-bounded")
        l = side * self.params["a"]
        return Token(f"end{'+' if side > 0 else '-'}", [], l, self.log_F.xreplace({l_sym: l}),
                     self.dlog_F.xreplace({l_sym: l}))

    def monotone(self) -> int:
        """+1 when log F increases with the logit on the whole box for every parameter value in ``boxes`` (certified
        by a small branch and bound on ``(log F)' >= 0``), -1 when it decreases, 0 otherwise."""
        if self._monotone is None:
            tok = self.new("mono", "role")
            self._monotone = 0
            for sign in (1, -1):
                core, _ = strip_positive(sign * tok.g)
                L_lo, L_hi = self.space.boxes.get("L", (1.0, INF))
                length = Coordinate(t_sym, *length_range(max(L_lo, 1.0), L_hi), "length",
                                    "t = 1/L")  # a length-aware F reads L
                coords = [*tok.coordinates, *(c for c in [*self.boxes, length] if c.symbol in core.free_symbols)]
                if not core.free_symbols <= {c.symbol for c in coords}:
                    continue
                problem = Problem("monotone", 0, "log F", coords, core, [], False, core, [], {}, 0, 0, {}, "")
                if branch_and_bound(problem, MONOTONE_WORK).status == "proved":
                    self._monotone = sign
                    break
        return self._monotone

    @property
    def span(self) -> tuple[float, float]:
        """The range of a token's coordinate (u over a, or the compactified s)."""
        return (-1.0, 1.0) if self.space.bounded_logits else (0.0, 1.0)

    def new(self, name: str, kind: str, within: tuple[sp.Expr, sp.Expr] | None = None) -> Token:
        """A token with its own coordinate; ``within = (lo, hi)`` (expressions of other coordinates) makes its
        coordinate ``lo + (hi - lo) sigma`` with ``sigma`` in [0, 1] its own (a token of one side of a threshold)."""
        bounded = self.space.bounded_logits
        base = sp.Symbol(f"{'u' if bounded else 's'}_{name}", real=True)
        if within is None:
            lo, hi = self.span
            coord = Coordinate(base, lo, hi, kind, f"logit of {name} over a" if bounded else
                               f"sigmoid of the logit of {name}" + (" over T" if self.scaled else ""))
            c: sp.Expr = base
        else:
            sigma = sp.Symbol(f"sigma_{name}", real=True)
            coord = Coordinate(sigma, 0.0, 1.0, kind, f"place of {name} between {within[0]} and {within[1]}")
            c = within[0] + (within[1] - within[0]) * sigma
        if bounded:
            l = self.params["a"] * c
            return Token(name, [coord], l, self.log_F.xreplace({l_sym: l}), self.dlog_F.xreplace({l_sym: l}))
        scale = self.params["T"] if self.scaled else sp.Integer(1)
        l = scale * sp.log(base / (1 - base))
        lam = _compact(self.log_F.xreplace({l_sym: l}), base).xreplace({base: c})
        g = _compact(self.dlog_F.xreplace({l_sym: l}), base).xreplace({base: c})
        return Token(name, [coord], l.xreplace({base: c}), lam, g)


#: what a token of the log-F-values model has instead of a logit and a slope: a relation that reads one declines
NO_LOGIT, NO_SLOPE = sp.Symbol("_no_logit", real=True), sp.Symbol("_no_slope", real=True)


class LogFValues:
    """The tokens as their values ``lam = log F`` alone, each a real coordinate ``D`` (what it exceeds a reference
    token's by, :func:`_anchor`): for a relation that reads F only through ratios of its values (the weights, Lemma
    1's C_1 and C_2), every instance is a point (``D`` its log F's differences, the extremes of F on [-a, a] free
    points beyond the tokens'), so a proof holds for every F, monotone or not. Ties are ``D = 0``, faces of the
    space. A point is not realised as logits (F need not be onto the reals): a negative box refutes nothing here."""

    weights = False
    scaled = False

    def __init__(self, model: TokenModel, slopes: bool = False):
        self.T = model.T
        self.space = model.space
        #: every F (no log F fixed): each token's slope ``g = (log F)'`` is a coordinate of its own too, free of its
        #: log F (a smooth positive F takes any values and slopes at distinct logits; tied logits share both, a face)
        self.slopes = slopes

    def describe(self) -> str:
        return ("log F values: each token its log F over a reference token's (F read through ratios only)"
                + (" and its slope (log F)'" if self.slopes else ""))

    def monotone(self) -> int:
        return 0  # the extremes of F on [-a, a] are free points (or the tokens')

    def at_end(self, side: int) -> Token:
        raise Declined("the ends of the logit box in the log-F-values model")

    def new(self, name: str, kind: str, within: tuple[sp.Expr, sp.Expr] | None = None) -> Token:
        if within is not None:
            raise Declined("a token beyond a threshold in the log-F-values model")
        d = sp.Symbol(f"D_{name}", real=True)
        coordinates = [Coordinate(d, -INF, INF, kind, f"log F of {name} over the reference token's")]
        g = _free_slope(name, kind, coordinates) if self.slopes else NO_SLOPE
        return Token(name, coordinates, NO_LOGIT, d, g)


def _free_slope(name: str, kind: str, coordinates: list[Coordinate]) -> sp.Symbol:
    """Every F: a token's slope ``(log F)'`` as a coordinate of its own (appended to ``coordinates``), on the whole line
    until the relaxation scales the slopes (``relax._slope_scale``)."""
    g = sp.Symbol(f"G_{name}", real=True)
    coordinates.append(Coordinate(g, -INF, INF, kind, f"slope (log F)' at {name}"))
    return g


def _compact(expr: sp.Expr, s: sp.Symbol) -> sp.Expr:
    """``expr`` at ``l = S log(s/(1-s))``, simplified so that it is finite at s = 0, 1 where it can be: sigmoid
    and softplus of the logit become rational in s."""
    rewritten = expr.replace(lambda e: isinstance(e, sigmoid), lambda e: e.rewrite(sp.exp)) \
                    .replace(lambda e: isinstance(e, softplus), lambda e: e.rewrite(sp.log))
    out = sp.simplify(sp.powsimp(sp.expand_log(rewritten, force=True), force=True))
    return out


def exact_floats(expr: sp.Expr) -> sp.Expr:
    """Every float of the relation as the exact rational it is (what certification reads: 0.026 is the double
    nearest 0.026), so that the prover's algebra is exact."""
    return expr.xreplace({f: sp.Rational(exact_rational(f)) for f in expr.atoms(sp.Float)})


__all__ = ["Declined", "LogFValues", "Space", "Token", "TokenModel", "exact_floats", "t_scaled"]
