"""The relaxation of a statement: every instance of every length is a point of its relaxed space, with the same
margin.

Most quantities depend on an instance only through a few *distinguished tokens* (the token ``i`` of a per-token
relation, the token attaining a maximum, the two tokens of a Jacobian entry) and a few *totals* over all tokens
(``(1/L) sum_j F(l_j)``, ...). With ``t = 1/L`` in ``[0, 1/L_min]`` (``t = 0`` is the limit ``L -> oo``) a
statement's margin is then a function of

- ``t``, the parameters (``T``, ``a``, the normaliser's own, the statement's), each in its box;
- the distinguished tokens' coordinates (a logit, through a compactifying change of variable when logits are
  unbounded), under every *pattern* of which of them are the same token;
- the other ``L - k`` tokens, as any probability distribution on the token box: when the margin reads ``n``
  linearly independent functions of a token through totals, ``n`` atoms suffice on a connected box
  (Fenchel-Bunt; ``n + 1`` when constraints may disconnect it, Caratheodory), with weights on a simplex
  (stick-breaking coordinates).

Each quantity declares how it reads an instance in these terms: its ``relaxed`` form on its specification
(:mod:`attnbounds.theory.mathematics.quantities`), written against the vocabulary of
:mod:`attnbounds.theory.mathematics.quantities.relaxed` (here :class:`RelaxedInstance`). Each hypothesis says what it
means for the space (its ``relax`` rule, :class:`~attnbounds.theory.deciding.prover.space.Space`); a statement with a
hypothesis or a quantity that has no such rule is not relaxed (:class:`~attnbounds.theory.deciding.prover.space.Declined`,
with the reason), and keeps the search's verdict. :func:`relax` builds the statement's problems
(:class:`~attnbounds.theory.deciding.prover.problem.Problem`).

The map from instances to points (:mod:`~attnbounds.theory.deciding.prover.image`) is what the cross-check of forms
checks: the relaxed form evaluated at an instance's own point equals the quantity on that instance.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterator, Sequence

import sympy as sp

from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.hypotheses import NEED_PARAMETERS
from attnbounds.theory.mathematics.intervals import Unsupported, decimal_value, outward
from attnbounds.theory.mathematics.opaque import OAbs, OMax, OMin
from attnbounds.theory.mathematics.symbolic import differentiate
from attnbounds.theory.deciding.prover.problem import (Coordinate, Problem, _positive_factor, length_range,
                                                      strip_positive, t_sym)
from attnbounds.theory.deciding.prover.program import compile_program, run_rigorous
from attnbounds.theory.deciding.prover.space import (INF, NO_LOGIT, NO_SLOPE, Declined, LogFValues, Space, Token,
                                                     TokenModel, exact_floats, t_scaled)
from attnbounds.theory.mathematics.quantities import QUANTITIES, relaxed
from attnbounds.theory.mathematics.statement import Statement, conjuncts

#: roles a statement may distinguish (their patterns are enumerated: Bell numbers)
MAX_ROLES = 5
#: independent token functions the totals may read (atoms are that many, plus one when constrained)
MAX_MOMENTS = 6


class _NeedsSign(Declined):
    """A quantity's form is a bound of it, and the margin is not known to move the way that makes the bound sound."""


class _ReadsSlopes(Declined):
    """The log-F-values model met a slope ``(log F)'``: over every F, the model with slopes (:func:`relax`) reads it."""


#: what a quantity needs that makes it read no token (its relaxed form a function of the parameters alone: the heads'
#: p and H); a quantity needing none of it reads the weights (alpha_max needs nothing beyond them), and with no log F
#: fixed it ranges over every map, which no one model stands for
TOKEN_FREE = frozenset({"heads"})
#: why a statement that reads distinguished tokens (or points) and the top-N selection is declined
SELECTION_WITH_TOKENS = ("distinguished tokens and the top-N selection together over log F values alone (every F: "
                         "which side of the selection each token is on is relaxed only over a fixed log F)")


def _anchor(margin: sp.Expr, constraints: list[sp.Expr], tokens: list[Token], reference: Token | None
            ) -> tuple[sp.Expr, list[sp.Expr]]:
    """The log-F-values model's margin and constraints with ``reference``'s log F at 0 (None: at a point the caller
    places, no token's): sound when they read log F only through differences (a common shift ``c`` of every token's
    ``D`` cancels, as sympy's own simplification shows; else Declined), and when they read no logit or slope."""
    read = margin.free_symbols.union(*(con.free_symbols for con in constraints))
    if NO_LOGIT in read:
        raise Declined("the relation reads a logit, not only log F")
    if NO_SLOPE in read:
        raise _ReadsSlopes("the relation reads a slope (log F)', not only log F")
    c = sp.Symbol("_shift", real=True)
    shift = {tok.lam: tok.lam + c for tok in tokens}
    for expr in (margin, *constraints):
        if not _shift_free(expr.xreplace(shift), c):
            raise Declined("the relation reads log F itself, not only its differences")
    if reference is None:
        return margin, constraints
    zero = {reference.lam: sp.Integer(0)}
    return margin.xreplace(zero), [con.xreplace(zero) for con in constraints]


def _slope_scale(margin: sp.Expr, constraints: list[sp.Expr], tokens: list[Token], anchored: dict[str, Any]
                 ) -> sp.Rational | None:
    """Every F with its slopes free (:class:`LogFValues`): where the margin and every constraint are homogeneous in
    the slopes ``g`` of all tokens together (:func:`homogeneity_degree`), scaling every slope by ``1 / max |g|`` keeps
    each one's sign, so the slopes' box is ``[-1, 1]`` at no loss (written into ``anchored``'s ends). The margin's
    degree, or None (slopes unread, or no homogeneity shown: their box stays the whole line)."""
    slopes = {tok.g for tok in tokens if isinstance(tok.g, sp.Symbol) and tok.g != NO_SLOPE}
    if not slopes & margin.free_symbols.union(*(con.free_symbols for con in constraints)):
        return None
    degree = homogeneity_degree(margin, slopes)
    if degree is None or any(homogeneity_degree(con, slopes) is None for con in constraints):
        return None
    anchored["ends"] = {**anchored.get("ends", {}), **{g: (-1.0, 1.0) for g in slopes}}
    return degree


def homogeneity_degree(expr: sp.Expr, symbols: set[sp.Symbol]) -> sp.Rational | None:
    """The degree ``k`` with ``expr(c x) = c^k expr(x)`` for every ``c > 0``, ``x`` the ``symbols``, read from the
    expression's structure (sums of terms of one degree, products, rational powers, Abs, Min and Max of one degree,
    any other function of arguments free of the symbols), or None where the structure does not show one (sound, not
    complete: ``max(x, 0)`` is of degree 1 but not shown). :func:`_shift_free` reads a norm of totals of F through
    it: of degree 0 in a common factor of F."""
    if not expr.free_symbols & symbols:
        return sp.Integer(0)
    if expr in symbols:
        return sp.Integer(1)
    if isinstance(expr, sp.Mul):
        factors = [homogeneity_degree(a, symbols) for a in expr.args]
        return None if any(d is None for d in factors) else sp.Add(*factors)
    if isinstance(expr, sp.Pow):
        base = homogeneity_degree(expr.base, symbols)
        exponent = expr.exp
        if base is None or exponent.free_symbols & symbols or not exponent.is_Rational:
            return None
        return base * exponent  # (c^k x)^e = c^(k e) x^e for c > 0
    if isinstance(expr, (sp.Add, sp.Abs, sp.Min, sp.Max, OAbs, OMax, OMin)):
        terms = {homogeneity_degree(a, symbols) for a in expr.args}
        return terms.pop() if len(terms) == 1 and None not in terms else None
    return None


def _shift_free(expr: sp.Expr, c: sp.Symbol) -> bool:
    """Whether ``expr`` is free of ``c`` as sympy writes it, or once ``exp(D + c)`` is ``exp(D) E`` and the rational
    function in ``E = exp(c)`` is cancelled (a ratio of totals: ``E`` cancels between its numerator and denominator),
    or is of :func:`homogeneity_degree` 0 in ``E`` (norms of totals: ``sqrt(E^2 X) / (E Y)``)."""
    if not expr.has(c):
        return True
    E = sp.Dummy("E", positive=True)
    split = sp.expand_power_exp(expr.xreplace({c: sp.log(E)}))
    return homogeneity_degree(split, {E}) == 0 or not sp.cancel(sp.together(split)).has(E)  # the tree walk first


def _propagate_orders(coords: list[Coordinate], constraints: list[sp.Expr]) -> list[Coordinate]:
    """The coordinates' ends tightened by the constraints that order them: ``D >= 0`` (``-D >= 0``) is a lower
    (upper) end 0, ``D_x - D_y >= 0`` gives ``D_x`` at least ``D_y``'s lower end and ``D_y`` at most ``D_x``'s
    upper one (to a fixed point). Sound: no point satisfying the constraints is cut."""
    lo = {c.symbol: c.lo for c in coords}
    hi = {c.symbol: c.hi for c in coords}
    orders: list[tuple[sp.Symbol, sp.Symbol]] = []  # (x, y): x >= y
    for con in constraints:
        if isinstance(con, sp.Symbol) and con in lo:
            lo[con] = max(lo[con], 0.0)
        elif isinstance(-con, sp.Symbol) and -con in lo:
            hi[-con] = min(hi[-con], 0.0)
        elif isinstance(con, sp.Add) and len(con.args) == 2:
            pos = [a for a in con.args if isinstance(a, sp.Symbol)]
            neg = [-a for a in con.args if isinstance(-a, sp.Symbol)]
            if len(pos) == 1 and len(neg) == 1 and pos[0] in lo and neg[0] in lo:
                orders.append((pos[0], neg[0]))
    for _ in range(len(coords) + 1):
        changed = False
        for x, y in orders:
            if lo[y] > lo[x]:
                lo[x], changed = lo[y], True
            if hi[x] < hi[y]:
                hi[y], changed = hi[x], True
        if not changed:
            break
    return [dataclasses.replace(c, lo=lo[c.symbol], hi=hi[c.symbol]) if (lo[c.symbol], hi[c.symbol]) != (c.lo, c.hi)
            else c for c in coords]


def _extreme_of(role: "Role") -> str | None:
    """Whether a role or point stands for the largest ("max") or smallest ("min") log F on the box: its dominance
    ``dominates(r, k)`` is a positive (max) or negative (min) constant multiple of ``r.lam - k.lam`` for generic
    tokens; None for any other dominance (one that reads the slopes ``g``, the logits or the weights says nothing
    about log F, and taking it for an extreme would constrain every token's log F unsoundly)."""
    assert role.dominates is not None
    r_lam, k_lam, r_g, k_g, r_l, k_l = sp.symbols("_r_lam _k_lam _r_g _k_g _r_l _k_l", real=True)
    probe = sp.sympify(role.dominates(Token("r", [], r_l, r_lam, r_g), Token("k", [], k_l, k_lam, k_g)))
    ratio = sp.simplify(probe / (r_lam - k_lam))
    if not ratio.is_number:
        return None
    return "max" if ratio.is_positive else "min" if ratio.is_negative else None


def _anchor_problem(b: "_Builder", margin: sp.Expr, constraints: list[sp.Expr], owners: list[str | None],
                    roles: list[Token], atoms: list[Token], selected: list[Token] | None = None,
                    role_selected: list[bool] | None = None) -> tuple[sp.Expr, list[sp.Expr], dict[str, Any]]:
    """:func:`_anchor` at the reference token: the token (or point) of the smallest log F when a role or point says
    which (every other ``D`` is then >= 0), else the first distinguished token, else the first atom. When a token or
    point of the largest log F is known too, it is ``Delta >= 0`` and every other token ``D = Delta sigma`` with
    ``sigma`` in [0, 1]: both extremes' constraints then hold by construction and are dropped. With the top-N
    ``selected`` atoms, log F is anchored at a threshold between the selected tokens and the others instead (the
    least selected log F, say): the selected ``D >= 0``, the others' ``D <= 0``, which is every selected token at
    least as heavy as every other; a distinguished token is on the side ``role_selected`` says. Returns the margin, the constraints and what the
    realisation needs: where the reference is (``("role", k)``, ``("atom", j)``, ``("point", "min")``,
    ``("threshold", 0)``), the bracket (the top and each token's sigma), the new coordinates and the ends."""
    points = list(b.points.values())
    if selected:
        if points:  # (a point with the selection is declined before: _problem)
            raise Declined(SELECTION_WITH_TOKENS)
        sides = role_selected or []
        if len(sides) != len(roles):
            raise Declined("distinguished tokens and the top-N selection: no side given for every token")
        if roles:  # at the first distinguished token (its weight and the totals then share one denominator): every
            # token of the other side is at most its log F (0) or at least it; the sides' order is the constraints'
            first = roles[0]
            margin, constraints = _anchor(margin, constraints, [*roles, *atoms, *selected], first)
            across = [*atoms, *(r for r, on in zip(roles, sides) if not on)] if sides[0] else \
                [*selected, *(r for r, on in zip(roles, sides) if on)]
            ends = {tok.lam: ((-INF, 0.0) if sides[0] else (0.0, INF)) for tok in across if tok is not first}
            return margin, constraints, {"reference": ("role", 0), "coordinates": [], "bracket": None, "ends": ends}
        margin, constraints = _anchor(margin, constraints, [*atoms, *selected], None)
        ends = {tok.lam: (0.0, INF) for tok in selected} | {tok.lam: (-INF, 0.0) for tok in atoms}
        return margin, constraints, {"reference": ("threshold", 0), "coordinates": [], "bracket": None, "ends": ends}

    def extreme(which: str) -> tuple[tuple[str, Any], Token, str] | None:
        for name, role in b.roles.items():
            if role.extreme == which and role.dominates is not None and _extreme_of(role) == which:
                tok = b.token_of_role[name]
                return ("role", roles.index(tok)), tok, name
        for role, p in points:
            if _extreme_of(role) == which:
                return ("point", which), p, role.name
        return None

    bottom, top = extreme("min"), extreme("max")
    if bottom is not None:
        ref, token, _ = bottom
    elif roles or atoms:
        ref, token = (("role", 0), roles[0]) if roles else (("atom", 0), atoms[0])
    else:
        raise Declined("no token to anchor log F at")
    everyone = [*roles, *atoms, *(p for _, p in points)]
    margin, constraints = _anchor(margin, constraints, everyone, token)
    out: dict[str, Any] = {"reference": ref, "coordinates": [], "bracket": None}
    if bottom is not None and top is not None:
        delta = top[1].lam if top[1] is not token else sp.Integer(0)
        sigmas: dict[sp.Symbol, sp.Symbol] = {}
        subs: dict[sp.Expr, sp.Expr] = {}
        for tok in everyone:
            if tok is token or tok is top[1]:
                continue
            sigma = sp.Symbol(f"sigma_{tok.name}", real=True)
            sigmas[tok.lam] = sigma
            subs[tok.lam] = delta * sigma
            out["coordinates"].append(Coordinate(sigma, 0.0, 1.0, "token", f"place of {tok.name}'s log F between "
                                                                          "the smallest and the largest"))
        keep = [k for k, owner in enumerate(owners) if owner not in (bottom[2], top[2])]
        margin = margin.xreplace(subs)
        constraints = [constraints[k].xreplace(subs) for k in keep]
        out["bracket"] = {"top": top[0], "sigma": sigmas}
        if isinstance(delta, sp.Symbol):
            out["ends"] = {delta: (0.0, INF)}
    return margin, constraints, out


# -- what a quantity's relaxed form reads ------------------------------------------------------------------------
@dataclass
class Role:
    """A token a quantity's relaxed form singles out (the maximum, the minimum, ...): its name and what makes it so."""
    name: str
    #: ``dominates(r, k) >= 0`` for every other token k: the constraint that makes r the token of a maximum
    dominates: Callable[[Token, Token], sp.Expr] | None = None
    #: "max" / "min": the quantity is the largest / smallest of its value at every token (its value at any other
    #: token is then a lower / upper bound of it)
    extreme: str | None = None


@dataclass
class _Total:
    symbol: sp.Symbol
    fn: Callable[[Token], sp.Expr]
    exclude: tuple[str, ...]
    selected: bool | None = None


class RelaxedInstance:
    """The relaxed instance a quantity's ``relaxed`` form reads
    (:class:`~attnbounds.theory.mathematics.quantities.relaxed.RelaxedInstance`), over a builder.

    ``t`` is ``1/L``; :meth:`param` a parameter; :meth:`role` a distinguished token (per-token quantities share the
    role ``i``; a quantity of one value per instance names its own, as ``rx.role("top", dominates=...)``);
    :meth:`total` ``(1/L) sum_j fn(token_j)`` over all tokens (or all but some roles); :meth:`weight` the weight
    ``alpha`` of a role.
    """

    def __init__(self, builder: "_Builder", namespace: str, quantity: str):
        self._b = builder
        self._ns = namespace
        self._quantity = quantity

    @property
    def t(self) -> sp.Expr:
        return t_sym

    def param(self, name: str) -> sp.Expr:
        return self._b.param(name)

    def role(self, name: str, *, dominates: Callable[[Token, Token], sp.Expr] | None = None,
             extreme: str | None = None) -> Token:
        """A distinguished token; ``dominates(r, k) >= 0`` (optional) must hold against every other token ``k``
        (the token of a maximum: ``lambda r, k: r.lam - k.lam``); ``extreme`` says whether the quantity is the
        largest ("max") or smallest ("min") of its value at every token."""
        full = f"{self._ns}.{name}" if self._ns else name
        return self._b.role(Role(full, dominates, extreme))

    def point(self, name: str, *, dominates: Callable[[Token, Token], sp.Expr]) -> Token:
        """A point of the token box that is not a token (where F attains its extremes on [-a, a], say): it is
        constrained against every token (``dominates(p, k) >= 0``), never counted among them."""
        return self._b.point(Role(name, dominates))

    def log_F_extremes(self, tokens_move: int = 0) -> tuple[sp.Expr, sp.Expr]:
        """``(min, max)`` of log F over the logit box ``[-a, a]``: at its ends when log F is monotone in the logit
        (certified); else, when the quantity moves by the sign ``tokens_move`` if the extremes over the tokens replace
        those over the box and the margin moves the other way with it (sound: the margin only decreases), the tokens
        of the smallest and largest log F; else two points of the box that are not tokens, constrained to be at most
        / at least every token's log F."""
        b = self._b
        if not b.space.bounded_logits:
            raise Declined("the extremes of F over [-a, a] need the hypothesis logits-bounded")
        side = b.model.monotone()
        if side:
            lo, hi = b.model.at_end(-side), b.model.at_end(side)
            return lo.lam, hi.lam
        if tokens_move and getattr(b, "margin_signs", {}).get(self._ns, 0) * tokens_move < 0:
            b.bounded_by_tokens = True
            top = b.role(Role("F.max", lambda p, k: p.lam - k.lam, "max"))
            bottom = b.role(Role("F.min", lambda p, k: k.lam - p.lam, "min"))
            return bottom.lam, top.lam
        top = self.point("F.max", dominates=lambda p, k: p.lam - k.lam)
        bottom = self.point("F.min", dominates=lambda p, k: k.lam - p.lam)
        return bottom.lam, top.lam

    @property
    def logit_bound(self) -> str:
        """What ``a`` is: "a" (the statement's parameter), "keys" (``Delta_max``, under ``logits-qk``), or ""."""
        return self._b.space.logit_bound

    def same(self, a: relaxed.RelaxedToken, b: relaxed.RelaxedToken) -> bool:
        return a is b

    def total(self, fn: Callable[[Token], sp.Expr], exclude: Sequence[relaxed.RelaxedToken] = (), *,
              selected: bool | None = None) -> sp.Expr:
        """``(1/L) sum_j fn(token_j)`` over every token (but ``exclude``), or over the selected ones (``selected``
        True) or the others (False) of the top-N selection."""
        return self._b.total(fn, tuple(tok.name for tok in exclude), selected)

    def weight(self, tok: relaxed.RelaxedToken) -> sp.Expr:
        """``alpha = F(l) / sum_j F(l_j) = t / total(F / F(l))`` (the ratio form: no large numbers), the token's
        weight itself in the weights model, ``F(l)`` itself for an element-wise map. With a common reference (the builder's ``common_reference``: the first
        token whose weight is read, ``r``) every weight is ``t (F(l) / F(l_r)) / total(F / F(l_r))``: one total, so
        that a margin combining several weights has one positive denominator to divide out (``8 alpha_min -
        alpha_max`` becomes ``8 - F(l_max) / F(l_min)`` over that total)."""
        if tok.weight is not None:
            return tok.weight
        if self.elementwise:
            return tok.F
        b = self._b
        b.weighted.setdefault(tok.name, tok)
        ref = next(iter(b.weighted.values())) if b.common_reference else tok
        return t_sym * sp.exp(tok.lam - ref.lam) / self.total(lambda other: sp.exp(other.lam - ref.lam))

    @property
    def elementwise(self) -> bool:
        """Whether the map is element-wise (``alpha_i = F(l_i)``: each weight is its token's F, no sum)."""
        return self._b.space.elementwise is not None

    def at_most(self, *bounds: str) -> int:
        return self._b.read_bound(self._quantity, bounds, 1)

    def at_least(self, *bounds: str) -> int:
        return self._b.read_bound(self._quantity, bounds, -1)


class _Builder:
    """One pass over a statement's quantities under one pattern of roles (see :func:`relax`)."""

    def __init__(self, space: Space, pattern: dict[str, int] | None, parameters: dict[str, sp.Expr],
                 param_coords: list[Coordinate], model: "TokenModel", aliases: dict[str, str] | None = None,
                 margin_signs: dict[str, int] | None = None, bound_choice: dict[str, int] | None = None,
                 common_reference: bool = False):
        self.space = space
        #: the tokens whose weight was read, in order, and whether every weight is read over the first one's F
        self.weighted: dict[str, relaxed.RelaxedToken] = {}
        self.common_reference = common_reference
        self.param_coords = param_coords
        self.pattern = dict(pattern or {})
        self.parameters = parameters
        self.roles: dict[str, Role] = {}
        self.tokens: dict[int, Token] = {}
        self.token_of_role: dict[str, Token] = {}
        self.totals: list[_Total] = []
        self.points: dict[str, tuple[Role, Token]] = {}
        self.model = model
        self.left: sp.Expr = sp.Integer(1)  # the weights model: the weight not given to a distinguished token
        self.aliases: dict[str, str] = dict(aliases or {})
        #: per quantity, the sign with which the margin moves with it (0: unknown), and whether a quantity was read
        #: with F's extremes over the tokens (the problem's margin is then at most the instance's)
        self.margin_signs: dict[str, int] = dict(margin_signs or {})
        self.bounded_by_tokens = False
        #: quantities read through a bound of their value, per side (+1: an upper bound, :meth:`at_most`; -1: a lower
        #: bound, :meth:`at_least`): "name (the inequality)"
        self.bounds_read: dict[int, list[str]] = {1: [], -1: []}
        #: per quantity read through bounds: which of them this builder reads (the relaxation's choice) and how
        #: many there are (what the discovery pass found)
        self.bound_choice: dict[str, int] = dict(bound_choice or {})
        self.bound_counts: dict[str, int] = {}

    def read_bound(self, qname: str, bounds: Sequence[str], side: int) -> int:
        """The quantity ``qname``'s form is a bound of it, one of ``bounds``: an upper bound (``side`` +1), sound only
        where the margin is nonincreasing in the quantity, or a lower bound (-1), sound only where it is nondecreasing
        (a proof with the bound then proves the statement). Which one to read."""
        if not qname or self.margin_signs.get(qname, 0) * side >= 0:
            which, grow = ("an upper", "grow") if side > 0 else ("a lower", "shrink")
            raise _NeedsSign(f"{qname or 'a per-token quantity'} is relaxed through {which} bound of it "
                             f"({'; '.join(bounds)}): that proves only bounds whose margin cannot {grow} with it "
                             f"({qname or 'it'} {'<=' if side > 0 else '>='} ...)")
        self.bound_counts[qname] = len(bounds)
        k = self.bound_choice.get(qname, 0)
        if f"{qname} ({bounds[k]})" not in self.bounds_read[side]:
            self.bounds_read[side].append(f"{qname} ({bounds[k]})")
        return k

    @property
    def inexact(self) -> bool:
        """Whether some quantity was read through a bound of it (F's extremes over the tokens, an upper or a lower
        bound): the problem's margin is then at most the instance's."""
        return self.bounded_by_tokens or any(self.bounds_read.values())

    def param(self, name: str) -> sp.Expr:
        if name not in self.parameters:
            raise Declined(f"the relaxation has no coordinate for the parameter {name!r}")
        return self.parameters[name]

    def role(self, role: Role) -> Token:
        if role.name in self.aliases:  # the quantity read at another distinguished token (a bound of it)
            return self.token_of_role[self.aliases[role.name]]
        if role.name in self.token_of_role:
            return self.token_of_role[role.name]
        self.roles[role.name] = role
        cls = self.pattern.setdefault(role.name, max(self.pattern.values(), default=-1) + 1)
        if cls not in self.tokens:
            if self.model.weights:
                self.tokens[cls], self.left = self.model.new_weighted(f"r{cls}", "role", self.left)
            else:
                self.tokens[cls] = self.model.new(f"r{cls}", "role")
        self.token_of_role[role.name] = self.tokens[cls]
        return self.tokens[cls]

    @contextlib.contextmanager
    def sealed(self) -> Iterator[None]:
        """While totals' bodies are evaluated: a body reads tokens and constants, never another total."""
        self._sealed = True
        try:
            yield
        finally:
            self._sealed = False

    def point(self, role: Role) -> Token:
        if role.name not in self.points:
            self.points[role.name] = (role, self.model.new(f"p{len(self.points)}", "point"))
        return self.points[role.name][1]

    def total(self, fn: Callable[[Token], sp.Expr], exclude: tuple[str, ...], selected: bool | None = None) -> sp.Expr:
        if getattr(self, "_sealed", False):
            raise Declined("a quantity's relaxed form takes a total inside a total's body: compute the inner total "
                           "first and read it as a constant")
        if selected is not None and not self.space.selection:
            raise Declined("a total over the selection, and no hypothesis says which tokens it holds (top-N)")
        sym = sp.Symbol(f"_total{len(self.totals)}", real=True)
        self.totals.append(_Total(sym, fn, exclude, selected))
        return sym


@dataclass
class Group:
    """The instances of one conjunct under one pattern of its distinguished tokens: proved when one of the
    ``alternatives`` (relaxed problems of them all) closes."""

    conjunct: int
    pattern: str
    alternatives: list[Problem]


@dataclass
class Relaxation:
    """A statement's relaxation: for each conjunct, strategies tried in turn, each a list of groups that must all be
    proved (the first: quantities of a maximum on the margin's favourable side read at another distinguished token;
    the last: every distinguished token with its constraints)."""

    statement: Statement
    strategies: list[list[list[Group]]]  # per conjunct, its strategies
    space: Space
    notes: list[str] = field(default_factory=list)
    #: per conjunct, the strategies that end a family (the exact one; each bound's own last): each may spend its
    #: whole share of the work, the others a part of it
    final: list[set[int]] = field(default_factory=list)

    @property
    def problems(self) -> list[Problem]:
        return [p for per in self.strategies for strategy in per for g in strategy for p in g.alternatives]

    def describe(self) -> str:
        return "\n".join(p.describe() for p in self.problems)


def _partitions(items: list[str]) -> Iterator[dict[str, int]]:
    """Every set partition of ``items`` as item -> class index (classes numbered in order of first item)."""
    if not items:
        yield {}
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        classes = sorted(set(part.values()))
        for c in classes:  # join an existing class
            yield {first: c, **part}
        yield {first: len(classes), **part}  # or a class of its own


def _space(statement: Statement) -> Space:
    space = Space(statement)
    for h in statement.hypotheses:
        rule = h.relax
        if rule is None:
            raise Declined(f"the hypothesis {h.id!r} has no relaxation ({h.description})")
        rule(space)
        space.understood.append(h.id)
    space.check_properties()
    if space.problems:
        raise Declined("; ".join(space.problems))
    if space.log_F is None:
        if all(QUANTITIES[q].needs & TOKEN_FREE for q in statement.bindings.values()):
            space.softmax()  # no quantity reads a token (coverage of heads): any model of the tokens serves
        else:
            raise Declined("no normaliser of the form F / sum F is fixed by the hypotheses (softmax, or "
                           "normaliser(<name>) with a log F): the relaxation reads the weights through one log F")
    for name, value in statement.fixed.items():
        space.boxes[name] = (float(value), float(value))
    for name, (lo, hi) in statement.ranges.items():
        if name == "L":
            space.require_length(int(math.ceil(lo)))
            space.boxes["L"] = (float(lo), float(hi))
        else:  # the decimals the ends spell, rounded outward: [0.1, 0.5] holds 1/10, which float(0.1) exceeds (one
            old = space.boxes.get(name, (-INF, INF))  # value, [0.1, 0.1], as a fixed one)
            ends = ((float(lo), float(hi)) if decimal_value(lo) == decimal_value(hi)
                    else (outward(decimal_value(lo), -1), outward(decimal_value(hi), 1)))
            space.boxes[name] = (max(old[0], ends[0]), min(old[1], ends[1]))
    return space


#: the most whole numbers of heads a relaxation enumerates (one relaxation each)
MAX_HEAD_VALUES = 20


def _whole_heads(statement: Statement, space: Space) -> list[int] | None:
    """The whole numbers of heads ``H`` a statement ranges over, when a quantity's relaxed form reads ``H`` only as a
    fixed whole number (coverage: a sum of H + 1 terms), H is not fixed, and its box holds at most
    :data:`MAX_HEAD_VALUES` whole numbers (every instance's H is whole: coverage_enum has no value at another)."""
    if not any(QUANTITIES[q].needs & TOKEN_FREE for q in statement.bindings.values()):
        return None
    lo, hi = space.boxes.get("H", (-INF, INF))
    if lo == hi or not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    values = list(range(max(0, math.ceil(lo)), math.floor(hi) + 1))
    return values if 0 < len(values) <= MAX_HEAD_VALUES else None


def _parameter_coordinates(statement: Statement, space: Space) -> tuple[dict[str, sp.Expr], list[Coordinate]]:
    """A coordinate (or a fixed value) for every parameter the statement or its normaliser reads."""
    names = set(statement.parameters()) | {"T"} | set(statement.defaults)
    names |= {name for q in statement.bindings.values() for need in QUANTITIES[q].needs if need in TOKEN_FREE
              for name in NEED_PARAMETERS.get(need, ())}  # read by a quantity's relaxed form (coverage: p and H)
    if space.bounded_logits:
        names.add("a")
    names -= {"L", "N"}
    assert space.log_F is not None
    out: dict[str, sp.Expr] = {}
    coords: list[Coordinate] = []
    for name in sorted(names):
        default = statement.defaults.get(name)
        if default is not None and not isinstance(default, str) and name not in space.boxes:
            out[name] = _decimal(float(default))
            continue
        lo, hi = space.boxes.get(name, (-INF, INF))
        if lo > hi:
            raise Declined(f"the parameter {name} has an empty box [{lo:g}, {hi:g}]")
        if lo == hi:  # a fixed value
            out[name] = _decimal(lo)
            continue
        scale = _range_scale(statement, name, lo, hi)
        if scale is not None:  # the coordinate name / g on a box of exact ends
            g, lo, hi = scale
            sym = _symbol(f"{name}_over_{g.numerator}_{g.denominator}", lo,
                          _positive_domain(statement, name) or name == "T")
            out[name] = sp.Rational(g) * sym
            coords.append(Coordinate(sym, lo, hi, "parameter", f"the parameter {name} over {g} (its range's ends exact)"))
            continue
        sym = _symbol(name, lo, _positive_domain(statement, name) or name == "T")
        out[name] = sym
        coords.append(Coordinate(sym, lo, hi, "parameter", f"the parameter {name}"))
    for name, value in space.normaliser_params.items():
        out.setdefault(name, _decimal(value))
    if space.selection:  # N = 1 + rho (L - 1): every whole N in [1, L] for every L
        nu = sp.Symbol("nu", positive=True)  # > 0 on every instance (N >= 1): a factor of it divides out
        coords.append(Coordinate(nu, 0.0, 1.0, "parameter", "nu = N / L, the share of the selection (N >= 1: nu >= t)"))
        out["N"] = nu / t_sym
    a, T = out.get("a"), out.get("T")
    if space.bounded_logits and isinstance(a, sp.Symbol) and isinstance(T, sp.Symbol) and t_scaled(space.log_F):
        # F reads l / T = (a / T) u: one coordinate beta = a / T for both (a = beta T wherever a appears)
        ca = next(c for c in coords if c.symbol == a)
        cT = next(c for c in coords if c.symbol == T)
        beta = sp.Symbol("beta", nonnegative=True)
        lo_b = outward(Fraction(ca.lo) / Fraction(cT.hi), -1) if math.isfinite(cT.hi) else 0.0
        hi_b = INF if cT.lo <= 0 or not math.isfinite(ca.hi) else outward(Fraction(ca.hi) / Fraction(cT.lo), 1)
        coords = [c for c in coords if c.symbol != a] + [Coordinate(beta, lo_b, hi_b, "parameter", "beta = a / T")]
        out["a"] = beta * T
    return out, coords


def _range_scale(statement: Statement, name: str, lo: float, hi: float) -> tuple[Fraction, float, float] | None:
    """``(g, lo / g, hi / g)`` for a parameter whose box is its range, when an end of that range is a decimal no float
    holds (``T`` in ``[0.1, 0.5]``): ``g`` the largest rational dividing both ends, so that the coordinate ``name / g``
    has whole ends, doubles exactly (``[1, 5]``). The box rounded outward would hold values just outside the range,
    where a bound tight at its end fails; on ``name / g`` the end is a face where it is decided exactly. None where
    the ends are doubles already (the box is the range) or the box is not the range's."""
    if name not in statement.ranges:
        return None
    e_lo, e_hi = (decimal_value(v) for v in statement.ranges[name])
    if (Fraction(lo), Fraction(hi)) == (e_lo, e_hi) or (lo, hi) != (outward(e_lo, -1), outward(e_hi, 1)):
        return None
    g = Fraction(math.gcd(e_lo.numerator * e_hi.denominator, e_hi.numerator * e_lo.denominator),
                 e_lo.denominator * e_hi.denominator)
    if max(abs(e_lo / g), abs(e_hi / g)) >= 2**53:  # (g > 0: ends both 0 are doubles, returned above)
        return None
    return g, float(e_lo / g), float(e_hi / g)


def _symbol(name: str, lo: float, positive: bool) -> sp.Symbol:
    """A parameter's coordinate symbol, with the sign sympy may use when it simplifies (> 0, >= 0, real)."""
    if positive and lo >= 0:
        return sp.Symbol(name, positive=True)
    if lo >= 0:
        return sp.Symbol(name, nonnegative=True)
    return sp.Symbol(name, real=True)


def _exact(value: float) -> sp.Expr:
    """A double (a coordinate's end) as the exact rational it is."""
    return sp.Integer(int(value)) if float(value).is_integer() else sp.Rational(value)


def _decimal(value: float) -> sp.Expr:
    """A parameter's value (fixed, a default, a normaliser's) as the decimal it spells, as certification reads it
    (:func:`~attnbounds.theory.mathematics.intervals.decimal_value`)."""
    return sp.Rational(decimal_value(value))


def _relation_env(statement: Statement, builder: _Builder, conjunct: sp.Rel) -> dict[sp.Basic, sp.Expr]:
    env: dict[sp.Basic, sp.Expr] = {}
    aliased = {name.split(".", 1)[0] for name in builder.aliases}
    # in a fixed order (sympy's sets are not); a quantity read at another's token after that one
    for sym in sorted(conjunct.free_symbols, key=lambda s_: (statement.bindings.get(str(s_)) in aliased, str(s_))):
        name = str(sym)
        qname = statement.bindings.get(name)
        if qname is None:
            env[sym] = 1 / t_sym if name == "L" else builder.param(name)
            continue
        if "selection" in QUANTITIES[qname].needs and not builder.space.selection:
            raise Declined(f"{qname} reads the selection I_N, and no hypothesis says which tokens it holds (top-N)")
        q = QUANTITIES[qname]
        form: Callable[[relaxed.RelaxedInstance], sp.Expr] | None = q.forms.get("relaxed")
        if form is None:
            raise Declined(f"{qname} has no relaxed form: {q.why_not('relaxed')}")
        if q.shape == "BN":
            raise Declined(f"{qname} is a per-selected-token quantity (not relaxed yet)")
        if builder.space.elementwise is not None and not q.elementwise:
            raise Declined(f"{qname}'s relaxed form reads a map F / sum F, and {builder.space.normaliser_text} is "
                           "element-wise (alpha_i = F(l_i))")
        try:
            env[sym] = form(RelaxedInstance(builder, "" if q.shape == "BL" else qname, qname))
        except Unsupported as exc:
            raise Declined(f"{qname}: {exc}") from None
    return env


def _moments(bodies: list[sp.Expr], token_symbols: set[sp.Symbol]) -> list[sp.Expr]:
    """The distinct functions of a generic token that ``bodies`` are linear combinations of (raises Declined when a
    body does not split into constant times token function)."""
    found: list[sp.Expr] = []
    for body in bodies:
        expanded = sp.expand(sp.powsimp(body), power_exp=True, mul=True, multinomial=True, log=False,
                             power_base=False, deep=False)
        for term in sp.Add.make_args(expanded):
            # exp(lam_x - lam_r) = exp(lam_x) exp(-lam_r): a token function times a constant
            _, dep = sp.expand_power_exp(term).as_independent(*token_symbols, as_Add=False)
            if dep == 1:
                continue
            if not dep.free_symbols <= token_symbols:
                raise Declined(f"a total reads {body}, which does not split into a constant times a function of the "
                               f"token (the others' distribution is not captured by finitely many averages)")
            _, dep = dep.as_coeff_Mul()
            if not any(sp.simplify(dep - f) == 0 for f in found):
                found.append(dep)
    return found


def _slopes_read(b: "_Builder", env: dict[sp.Basic, sp.Expr]) -> None:
    """:class:`_ReadsSlopes` where the log-F-values model's relation reads a token's slope (its quantities or the
    bodies of their totals): found before any problem is built."""
    if not isinstance(b.model, LogFValues) or b.model.slopes:
        return
    probe = b.model.new("probe", "atom")
    with b.sealed():
        read = [*env.values(), *(tot.fn(probe) for tot in b.totals)]
    if any(NO_SLOPE in sp.sympify(e).free_symbols for e in read):
        raise _ReadsSlopes("the relation reads a slope (log F)', not only log F")


class _Quota:
    """How many relaxed problems one relaxation may still build (None: any number)."""

    def __init__(self, limit: int | None):
        self.limit, self.built = limit, 0

    def take(self) -> None:
        self.expect(1)
        self.built += 1

    def expect(self, more: int) -> None:
        """Declined where ``more`` problems beyond those built exceed the limit."""
        if self.limit is not None and self.built + more > self.limit:
            raise Declined(f"the relaxation needs more than {self.limit} relaxed problems (distinguished tokens' "
                           "patterns times the bounds read): more than this budget's work builds; a larger one may")


def relax(statement: Statement, *, atoms: int | None = None, max_problems: int | None = None,
          _quota: _Quota | None = None) -> Relaxation:
    """The relaxed problems of ``statement`` (one per conjunct and pattern of roles); :class:`Declined` says why not.
    ``atoms`` (the cross-check's) gives the others that many atoms instead of as many as the totals need;
    ``max_problems`` bounds how many problems are built (each is sympy's work: the prover's budget pays for them)."""
    quota = _quota or _Quota(max_problems)
    if statement.kind != "deterministic":
        raise Declined("an expectation over random draws (the relaxation reads deterministic quantities)")
    if statement.relation.atoms(sp.Sum):
        raise Declined("a sum over the selected tokens (not relaxed yet)")
    space = _space(statement)
    heads = _whole_heads(statement, space)
    if heads is not None:  # one relaxation per whole number of heads, every group of each to be closed
        parts = [relax(dataclasses.replace(statement, fixed={**statement.fixed, "H": float(h)}), atoms=atoms,
                       _quota=quota) for h in heads]
        n = len(conjuncts(statement.relation))
        return Relaxation(statement, [[[Group(g.conjunct, f"H = {h}: {g.pattern}", g.alternatives)
                                        for h, part in zip(heads, parts) for g in part.strategies[c][-1]]]
                                      for c in range(n)], space, final=[{0} for _ in range(n)])
    parameters, param_coords = _parameter_coordinates(statement, space)
    model = TokenModel(space, parameters, 1 / t_sym, param_coords)
    strategies: list[list[list[Group]]] = []
    final: list[set[int]] = []
    for c, conjunct in enumerate(conjuncts(statement.relation)):
        strict = isinstance(conjunct, sp.StrictLessThan)
        per: list[list[Group]] = []
        ends: set[int] = set()
        signs = _margin_signs(statement, conjunct)
        # first the tokens as their log F values alone (when the relation reads F only through ratios of its
        # values); then over logits, with F's extremes over the tokens where the margin allows it (when some quantity
        # reads them: a bound of the margin, its roles constrained among tokens only), then exactly
        plans: list[tuple[Any, dict[str, int]]] = [(model, signs), (model, {})]
        sloped: Any = None  # every F, where the relation reads the slopes too: each token's slope a coordinate
        if space.every_F:  # no log F is fixed: only its values, every F at once
            plans = [(LogFValues(model), signs), (LogFValues(model), {})]
            if not space.simplex:  # (a threshold map's Jacobian is no F'/F form)
                sloped = (model.with_free_slopes() if not space.bounded_logits and not space.selection
                          else LogFValues(model, slopes=True))
        elif not model.weights:
            plans.insert(0, (LogFValues(model), {}))
        for plan_model, margin_signs in plans:  # (the plans with slopes are appended where the relation reads them)
            discovery = _Builder(space, None, parameters, param_coords, plan_model, margin_signs=margin_signs)
            try:
                _slopes_read(discovery, _relation_env(statement, discovery, conjunct))
                if space.selection and not space.every_F and plan_model is not model and not discovery.tokens:
                    continue  # the selection alone: over the fixed log F, through a threshold where it is monotone
                if margin_signs and not discovery.inexact:
                    continue
                # each further choice among the bounds a quantity is read through: strategies of their own
                names = sorted(discovery.bound_counts)
                builders = [discovery]
                for combo in itertools.product(*(range(discovery.bound_counts[q]) for q in names)):
                    if any(combo):
                        other = _Builder(space, None, parameters, param_coords, plan_model, margin_signs=margin_signs,
                                         bound_choice=dict(zip(names, combo)))
                        try:
                            _relation_env(statement, other, conjunct)
                        except Declined:  # (a choice that does not read: the choices before it are kept)
                            break
                        builders.append(other)
                # each pattern of a builder's roles is a problem at least: more than the quota is declined before
                # sympy builds any of them
                quota.expect(sum(int(sp.bell(len(bd.roles))) for bd in builders if len(bd.roles) <= MAX_ROLES))
                for k, bd in enumerate(builders):
                    if k:
                        ends.add(len(per) - 1)
                    per += _strategies(statement, space, c, conjunct, strict, parameters, param_coords, plan_model,
                                       atoms, bd, quota)
            except _NeedsSign as exc:  # a form that is only a bound, and no margin sign says it may be read
                if not per and margin_signs is plans[-1][1]:  # the last plan: none read it
                    raise Declined(str(exc)) from None
            except Declined as exc:
                if isinstance(exc, _ReadsSlopes) and sloped is not None:
                    if plans[-1][0] is not sloped:
                        plans += [(sloped, signs), (sloped, {})]
                elif plan_model is model or space.every_F:
                    raise
        strategies.append(per)
        final.append(ends | {len(per) - 1})
    return Relaxation(statement, strategies, space, final=final)


def _strategies(statement: Statement, space: Space, c: int, conjunct: sp.Rel, strict: bool,
                parameters: dict[str, sp.Expr], param_coords: list[Coordinate], model: "TokenModel",
                atoms: int | None, discovery: "_Builder", quota: _Quota) -> list[list[Group]]:
    """The strategies of one conjunct with the roles ``discovery`` found: maxima on the margin's favourable side
    read at another distinguished token (when there are such), then every role with its constraints."""
    roles = list(discovery.roles)
    if len(roles) > MAX_ROLES:
        raise Declined(f"{len(roles)} distinguished tokens (at most {MAX_ROLES})")

    def build(pattern: dict[str, int], piece: tuple[float, float] | None, aliases: dict[str, str] | None = None,
              ranges: dict[sp.Symbol, tuple[float, float]] | None = None, common: bool = False,
              sides: dict[int, bool] | None = None) -> Problem:
        quota.take()
        return _problem(statement, space, c, conjunct, strict, pattern, parameters, param_coords, model, aliases,
                        atoms, discovery.margin_signs, discovery.bound_choice, ranges, common, piece, sides)

    def with_twins(pattern: dict[str, int], piece: tuple[float, float] | None,
                   ranges: dict[sp.Symbol, tuple[float, float]], problem: Problem,
                   aliases: dict[str, str] | None = None, sides: dict[int, bool] | None = None) -> list[Problem]:
        """The problem's alternatives: its undivided twin (:func:`_with_unsigned`) and, where it reads the weights
        of two tokens or more, the same problem with every weight over one token's F (one total)."""
        common = [] if problem.realisation.get("weighted", 0) < 2 else _with_unsigned(
            build(pattern, piece, aliases, ranges, True, sides))
        return common + _with_unsigned(problem) + eliminated(problem)

    def split(pattern: dict[str, int], piece: tuple[float, float] | None,
              ranges: dict[sp.Symbol, tuple[float, float]], sides: dict[int, bool] | None, depth: int = 0
              ) -> list[tuple[dict[sp.Symbol, tuple[float, float]], Problem]]:
        """The problem, or its parts on either side of a kink of the margin (:func:`_kink`), each part split again
        (at most :data:`MAX_KINK_DEPTH` times), each with the ranges it narrows."""
        problem = build(pattern, piece, None, ranges, sides=sides)
        cut = _kink(problem) if depth < MAX_KINK_DEPTH else None
        if cut is None:
            return [(ranges, problem)]
        x, v = cut
        co = next(co for co in problem.coordinates if co.symbol == x)
        return [*split(pattern, piece, {**ranges, x: (co.lo, v)}, sides, depth + 1),
                *split(pattern, piece, {**ranges, x: (v, co.hi)}, sides, depth + 1)]

    def side_choices(pattern: dict[str, int]) -> list[dict[int, bool] | None]:
        """Under the top-N selection, every assignment of the pattern's tokens to the selected side (True) or the
        others (False): each a problem of its own, all to be proved; else None."""
        if not space.selection or not pattern:
            return [None]
        classes = sorted(set(pattern.values()))
        return [dict(zip(classes, combo)) for combo in itertools.product((True, False), repeat=len(classes))]

    def pieces(pattern: dict[str, int]) -> list[tuple[float, float] | None]:
        """The pattern's ranges of L (:func:`_length_pieces`), each from the pattern's least length on: one token per
        class of the pattern (a piece holding no length for them would decline the relaxation, never be skipped)."""
        return _length_pieces(space, len(set(pattern.values())))

    per: list[list[Group]] = []
    favourable = _favourable(statement, conjunct, discovery)
    if favourable:  # quantities of a maximum read at the other distinguished tokens: no constraint, no extra token
        rest = [r for r in roles if r not in favourable]
        groups = []
        for pattern in _partitions(rest):
            choices = [dict(zip(favourable, combo)) for combo in _substitutes(favourable, pattern, discovery)]
            for piece in pieces(pattern):
                for sides in side_choices(pattern):
                    alternatives = [q for aliases in choices for q in with_twins(
                        pattern, piece, {}, build(pattern, piece, aliases, sides=sides), aliases, sides)]
                    groups.append(Group(c, _pattern_text(pattern, sides) + " (maxima read at a distinguished token)"
                                        + _piece_text(piece), alternatives))
        if all(g.alternatives for g in groups):
            per.append(groups)
    per.append([Group(c, _pattern_text(p, sides) + (f" ({_ranges_text(r)})" if r else "") + _piece_text(piece),
                      with_twins(p, piece, r, q, None, sides))
                for p in _partitions(roles) for piece in pieces(p) for sides in side_choices(p)
                for r, q in split(p, piece, {}, sides)])
    return per


def _length_pieces(space: Space, k: int) -> list[tuple[float, float] | None]:
    """The ranges of L a conjunct's problems stand for, with ``k`` distinguished tokens: the statement's (None) where
    ``t = 1/L`` is a float at both of its ends; else each end whose ``1/L`` no float holds (``1/3``, ``1/50``) a
    length of its own, where ``t`` is exact and no coordinate, and the lengths between. A box of ``t`` rounded
    outward (:func:`~attnbounds.theory.deciding.prover.problem.length_range`) holds lengths beyond such an end, where
    a bound tight at the end fails: one length apart, the end is decided exactly."""
    def no_float(n: int) -> bool:  # 1/n is no float
        return Fraction(float(1 / Fraction(n))) != 1 / Fraction(n)

    L_lo, L_hi = space.boxes.get("L", (1.0, INF))
    lo = math.ceil(max(L_lo, float(space.min_length), float(k), 1.0))
    hi = math.floor(L_hi) if math.isfinite(L_hi) else None
    if hi is not None and hi <= lo:
        return [None]
    out: list[tuple[float, float] | None] = []
    if no_float(lo):
        out.append((float(lo), float(lo)))
        lo += 1
    if hi is not None and hi >= lo and no_float(hi):
        out.append((float(hi), float(hi)))
        hi -= 1
    if not out:
        return [None]
    if hi is None or hi >= lo:
        out.append((float(lo), float(hi) if hi is not None else INF))
    return out


def _piece_text(piece: tuple[float, float] | None) -> str:
    if piece is None:
        return ""
    return f" (L = {piece[0]:g})" if piece[0] == piece[1] else f" (L in [{piece[0]:g}, {piece[1]:g}])"


def _pattern_text(pattern: dict[str, int], sides: dict[int, bool] | None = None) -> str:
    return "roles " + (", ".join(f"{r} = r{k}" for r, k in sorted(pattern.items())) if pattern else "none") + \
        _sides_text(sides)


def _sides_text(sides: dict[int, bool] | None) -> str:
    """Which tokens of a pattern are selected (top-N), as a problem's text says it."""
    if not sides:
        return ""
    chosen = [f"r{k}" for k, on in sorted(sides.items()) if on]
    return "; selected " + (", ".join(chosen) if chosen else "none of them")


def _favourable(statement: Statement, conjunct: sp.Rel, discovery: "_Builder") -> list[str]:
    """The distinguished tokens of maxima (minima) that the margin increases (decreases) with, linearly with a
    coefficient of certain sign whatever the values of the other quantities and parameters: reading such a quantity at
    any other token gives a margin no larger, so a proof with it proves the statement (several at once too: each
    coefficient keeps its sign at the others' substituted values). Only quantities with one distinguished token."""
    margin = conjunct.rhs - conjunct.lhs
    signs = _signed_symbols(statement, conjunct)
    out = []
    by_quantity: dict[str, list[Role]] = {}
    for role in discovery.roles.values():
        by_quantity.setdefault(role.name.split(".", 1)[0] if "." in role.name else "", []).append(role)
    for sym in sorted(conjunct.free_symbols, key=str):
        qname = statement.bindings.get(str(sym))
        roles = by_quantity.get(qname or "", []) if qname else []
        if len(roles) != 1 or roles[0].extreme not in ("max", "min") or roles[0].dominates is None:
            continue
        coef = sp.diff(margin, sym)
        if sp.diff(coef, sym) != 0:  # linear in the quantity
            continue
        coef = coef.xreplace(signs)
        if (roles[0].extreme == "max" and coef.is_nonnegative is True) or (
                roles[0].extreme == "min" and coef.is_nonpositive is True):
            out.append(roles[0].name)
    return out


def _margin_signs(statement: Statement, conjunct: sp.Rel) -> dict[str, int]:
    """Per quantity of the conjunct, +1 (-1) when the margin is nondecreasing (nonincreasing) in it whatever the values
    of the others (the sign of its derivative certain under the symbols' signs), else 0."""
    margin = conjunct.rhs - conjunct.lhs
    signs = _signed_symbols(statement, conjunct)
    out: dict[str, int] = {}
    for sym in sorted(conjunct.free_symbols, key=str):
        qname = statement.bindings.get(str(sym))
        if qname is None:
            continue
        coef = sp.diff(margin, sym).xreplace(signs)
        sign = 1 if coef.is_nonnegative is True else -1 if coef.is_nonpositive is True else 0
        out[qname] = sign if out.get(qname, sign) == sign else 0
    return out


def _signed_symbols(statement: Statement, conjunct: sp.Rel) -> dict[sp.Symbol, sp.Symbol]:
    """The conjunct's symbols as symbols carrying the signs sympy may reason with: nonnegative quantities (their
    specifications say so), positive or nonnegative parameters (their domains); the others real."""
    out = {}
    for sym in conjunct.free_symbols:
        name = str(sym)
        qname = statement.bindings.get(name)
        if qname is not None:
            nonneg = QUANTITIES[qname].nonnegative
            out[sym] = sp.Symbol(name, nonnegative=True) if nonneg else sp.Symbol(name, real=True)
        elif name == "L":
            out[sym] = sp.Symbol(name, positive=True)
        else:
            out[sym] = sp.Symbol(name, positive=True) if _positive_domain(statement, name) else sp.Symbol(name, real=True)
    return out


def _against_mean(b: "_Builder", role: Role, tok: Token, k: int) -> sp.Expr | None:
    """The weights model: ``role``'s dominance over the mean weight of the other tokens, ``left / (L - k)``, as a
    constraint linear in the weights, ``w_r (1 - k t) - left t >= 0`` for a maximum of the log-weights (``<=`` for a
    minimum), or None.

    Sound and exact where the dominance reads another token through its log-weight alone, linearly (``r.lam -
    k.lam``): it then bounds each other weight on one side, a distribution of the others' weight ``left`` over
    ``L - k`` tokens within that bound exists exactly when their mean is within it (the mean of numbers on one
    side of a bound is on that side; all equal at the mean is such a distribution). Without it, a relaxation whose
    margin reads none of the others (``alpha_max >= 1/L``) leaves the largest weight below the mean."""
    if role.dominates is None:
        return None
    lam, g = sp.Symbol("_lam_mean", real=True), sp.Symbol("_g_mean", real=True)
    d = sp.expand(role.dominates(tok, Token("mean", [], None, lam, g if b.model.slopes else 1 / b.model.T,
                                            sp.exp(lam))))
    slope = sp.diff(d, lam)
    if not (slope.is_number and slope.is_nonzero) or sp.expand(d - slope * lam).has(lam) or d.has(g):
        return None  # (a dominance reading the other's slope says nothing of its weight alone: free slopes)
    bound = sp.exp(sp.expand(-(d - slope * lam) / slope))  # the dominance: other's weight <= bound (slope < 0)
    side = 1 if slope.is_negative else -1
    return sp.expand(side * (bound * (1 - k * t_sym) - b.left * t_sym))


def _ranges_text(ranges: dict[sp.Symbol, tuple[float, float]]) -> str:
    """The coordinate ranges a problem's part narrows, as its pattern and group name say them."""
    return ", ".join(f"{x} in [{lo:g}, {hi:g}]" for x, (lo, hi) in sorted(ranges.items(), key=str))


def _with_unsigned(problem: Problem) -> list[Problem]:
    """The problem, then (when factors of known sign were divided out of its core) the same problem with the core
    before that division, as an alternative: the quotient's single fraction can hide a monotonicity that the
    margin's own grouping shows (``w A + (1 - w) B`` expanded), and either proves the problem."""
    if problem.unsigned is None:
        return [problem]
    core, stripped = problem.unsigned
    return [problem, dataclasses.replace(problem, core=core, stripped=stripped, unsigned=None,
                                         poles=poles(core, problem.coordinates))]


def _substitutes(favourable: list[str], pattern: dict[str, int], discovery: "_Builder") -> Iterator[tuple[str, ...]]:
    """For each favourable role, a role of another quantity to read it at (one per class of the pattern)."""
    classes: dict[int, str] = {}
    for role, k in sorted(pattern.items()):
        classes.setdefault(k, role)
    targets = list(classes.values())
    if not targets:
        return iter(())
    return itertools.product(targets, repeat=len(favourable))


def _problem(statement: Statement, space: Space, c: int, conjunct: sp.Rel, strict: bool, pattern: dict[str, int],
             parameters: dict[str, sp.Expr], param_coords: list[Coordinate], model: TokenModel,
             aliases: dict[str, str] | None = None, atoms_override: int | None = None,
             margin_signs: dict[str, int] | None = None, bound_choice: dict[str, int] | None = None,
             ranges: dict[sp.Symbol, tuple[float, float]] | None = None, common_reference: bool = False,
             lengths: tuple[float, float] | None = None, sides: dict[int, bool] | None = None) -> Problem:
    """One problem (:class:`Problem`); ``ranges`` narrows coordinates (a split at a kink, :func:`_kink`);
    ``common_reference``: every weight over one token's F (:meth:`RelaxedInstance.weight`); ``lengths``: the range of
    L it stands for, when not the statement's (:func:`_length_pieces`); ``sides``: under the top-N selection, which
    distinguished tokens (by class) are selected."""
    b = _Builder(space, pattern, parameters, param_coords, model, aliases, margin_signs, bound_choice,
                 common_reference)
    env = _relation_env(statement, b, conjunct)
    lhs, rhs = (exact_floats(_opaque(side.xreplace(env))) for side in (conjunct.lhs, conjunct.rhs))
    k = len(b.tokens)
    # the totals: t * (the roles not excluded) + (1 - k t) * (the atoms), atoms enough for the functions read
    lam_x, g_x, l_x = (sp.Symbol(f"_{n}_x", real=True) for n in ("lam", "g", "l"))
    if b.model.weights:  # a token is its weight exp(lam); g = 1/T for all (softmax) or its own (every F, slopes);
        # the weight itself sums to the others' total
        feature_token = Token("x", [], None, lam_x, g_x if b.model.slopes else 1 / b.model.T, sp.exp(lam_x))
    else:
        feature_token = Token("x", [], l_x, lam_x, g_x)  # a generic token with its features as plain symbols
    constrained = any(r.dominates for r in b.roles.values())
    with b.sealed():
        bodies = [tot.fn(feature_token) for tot in b.totals]
    token_features = {lam_x, g_x, l_x}
    moments = _moments(bodies, token_features)
    if b.model.weights:  # in mass-weighted terms exp(lam) is the constant 1: the total mass, not a moment
        moments = [m for m in moments if sp.simplify(m - sp.exp(lam_x)) != 0]
    if len(moments) > MAX_MOMENTS:
        raise Declined(f"the totals read {len(moments)} independent functions of a token (at most {MAX_MOMENTS})")
    # the others exist whenever a total reads them, even through a constant or (weights model) their mass alone
    n_atoms = max(1, len(moments) + (1 if constrained and moments else 0)) if moments or bodies else 0
    if atoms_override is not None:
        n_atoms = atoms_override
    elif _bounded_simplex(space, b) and bodies and len(moments) == 1 and sp.simplify(moments[0] - sp.exp(lam_x)) == 0:
        n_atoms = 1  # the totals read F alone: the others at their mean F keep every constraint (_spread_constraints)
    threshold: Coordinate | None = None
    side = 0
    selected_roles: dict[int, bool] = {}
    if space.selection:
        if b.tokens:  # each distinguished token on the side ``sides`` puts it (a problem per assignment, _strategies)
            if b.points or b.model.weights:
                raise Declined(SELECTION_WITH_TOKENS)
            if sides is None or set(sides) != set(b.tokens):
                raise Declined("distinguished tokens and the top-N selection: no side given for every token")
            selected_roles = dict(sides)
        # log F monotone in the logit (and no distinguished token): the selection is the tokens beyond a threshold
        side = 0 if b.tokens else b.model.monotone()
        n_atoms = max(n_atoms, 1) + (0 if side or atoms_override is not None else 1)
        if side:
            lo_c, hi_c = b.model.span
            threshold = Coordinate(sp.Symbol("theta", real=True), lo_c, hi_c, "parameter",
                                   "the threshold between the selected tokens and the others")
    if b.model.weights:
        atoms = [b.model.new_weighted(f"o{j}", "atom", b.left)[0] for j in range(n_atoms)]
    elif threshold is not None:  # the others below the threshold (above, when log F decreases)
        lo_c, hi_c = b.model.span
        span = (sp.Integer(int(lo_c)), threshold.symbol) if side > 0 else (threshold.symbol, sp.Integer(int(hi_c)))
        atoms = [b.model.new(f"o{j}", "atom", span) for j in range(n_atoms)]
    else:
        atoms = [b.model.new(f"o{j}", "atom") for j in range(n_atoms)]
    masses, sticks = _simplex(n_atoms, "w")
    sel_atoms: list[Token] = []
    sel_masses: list[sp.Expr] = []
    if space.selection:  # the selected tokens: a distribution of their own, each at least as heavy as every other
        if threshold is not None:
            lo_c, hi_c = b.model.span
            span = (threshold.symbol, sp.Integer(int(hi_c))) if side > 0 else (sp.Integer(int(lo_c)), threshold.symbol)
            sel_atoms = [b.model.new(f"s{j}", "atom", span) for j in range(n_atoms)]
        else:
            sel_atoms = [b.model.new(f"s{j}", "atom") for j in range(n_atoms)]
        sel_masses, sel_sticks = _simplex(n_atoms, "v")
        sticks = sticks + sel_sticks
    nu = parameters["N"] * t_sym if space.selection else None  # N / L
    role_tokens = dict(b.tokens)
    subs: dict[sp.Symbol, sp.Expr] = {}
    k_sel = sum(1 for on in selected_roles.values() if on)  # distinguished tokens on each side of the selection
    k_out = len(selected_roles) - k_sel
    with b.sealed():
        for tot in b.totals:
            excluded = set(tot.exclude)
            part_roles = sp.Add(*[tot.fn(tok) for tok in role_tokens.values() if tok.name not in excluded])
            if b.model.weights:  # (1/L) sum over tokens: an atom of mass m and weight w holds m * left / w tokens
                per_atom = [b.left / a.weight * tot.fn(a) for a in atoms]
                if per_atom and all(sp.simplify(x - per_atom[0]) == 0 for x in per_atom[1:]):
                    part_atoms = per_atom[0]  # the same for every atom: the masses sum to 1
                else:
                    part_atoms = sp.Add(*[m * x for m, x in zip(masses, per_atom)])
                subs[tot.symbol] = t_sym * (part_roles + part_atoms)
            elif nu is not None:  # N selected tokens (the share nu of all), L - N others; the distinguished ones first
                roles_on = {on: sp.Add(*[tot.fn(tok) for cls, tok in role_tokens.items()
                                         if tok.name not in excluded and selected_roles[cls] is on])
                            for on in (True, False)}
                part_sel = t_sym * roles_on[True] + (nu - k_sel * t_sym) * sp.Add(
                    *[m * tot.fn(a) for m, a in zip(sel_masses, sel_atoms)])
                part_out = t_sym * roles_on[False] + (1 - nu - k_out * t_sym) * sp.Add(
                    *[m * tot.fn(a) for m, a in zip(masses, atoms)])
                subs[tot.symbol] = part_sel if tot.selected else part_out if tot.selected is False else part_sel + part_out
            else:  # the others are L - k tokens: the share 1 - k t of all of them
                part_atoms = sp.Add(*[m * tot.fn(a) for m, a in zip(masses, atoms)])
                subs[tot.symbol] = t_sym * part_roles + (1 - k * t_sym) * part_atoms
    margin = _substitute(rhs - lhs, subs)
    constraints = []
    owners: list[str | None] = []  # the role or point each constraint says is extreme
    for role in b.roles.values():
        tok = b.token_of_role[role.name]
        for other in [*role_tokens.values(), *atoms, *sel_atoms]:
            if other is tok:
                continue
            if role.dominates is not None:
                constraints.append(_substitute(role.dominates(tok, other), subs))
                owners.append(role.name)
        mean = _against_mean(b, role, tok, k) if b.model.weights else None
        if mean is not None:
            constraints.append(mean)
            owners.append(role.name)
    for role, point in b.points.values():
        for other in [*role_tokens.values(), *atoms]:
            if role.dominates is not None:
                constraints.append(_substitute(role.dominates(point, other), subs))
                owners.append(role.name)
    if space.selection:
        constraints.append(parameters["N"] * t_sym - t_sym)  # N >= 1: nu >= t
        owners.append(None)
    if selected_roles:  # each selected distinguished token at least as heavy as every token of the other side, each
        for cls, tok in role_tokens.items():  # other one at most as heavy as every selected one
            if selected_roles[cls]:
                rivals = [*atoms, *(o for c_, o in role_tokens.items() if not selected_roles[c_])]
                constraints += [tok.lam - o.lam for o in rivals]
            else:
                constraints += [s_.lam - tok.lam for s_ in sel_atoms]
            owners += [None] * (len(constraints) - len(owners))
    if selected_roles:  # N = k_sel + rho (L - k), rho in [0, 1]: the selected distinguished tokens among the N, the
        # others among the L - N, each share a product of factors >= 0 on the box (nu - k_sel t = rho (1 - k t))
        rho, nu_sym = sp.Symbol("rho", nonnegative=True), sp.Symbol("nu", positive=True)
        to_rho = {nu_sym: k_sel * t_sym + rho * (1 - k * t_sym)}
        margin = margin.xreplace(to_rho)
        constraints = [con.xreplace(to_rho) for con in constraints]
        parameters = {**parameters, "N": sp.sympify(parameters["N"]).xreplace(to_rho)}
        param_coords = [pc for pc in param_coords if pc.symbol != nu_sym] + [Coordinate(
            rho, 0.0, 1.0, "parameter", "rho = (N - k_sel) / (L - k): the selection's share beyond its distinguished "
            "tokens")]
    every_F = isinstance(b.model, LogFValues)
    if _bounded_simplex(space, b):  # a threshold map over bounded logits
        if sel_atoms or b.points:
            raise Declined("a threshold map over bounded logits with the top-N selection or F's extremes (not relaxed)")
        top = next((b.token_of_role[name] for name, role in b.roles.items()
                    if role.extreme == "max" and role.dominates is not None and _extreme_of(role) == "max"), None)
        spread = _spread_constraints(space, parameters, list(role_tokens.values()), atoms, masses, top)
        constraints += spread
        owners += [None] * len(spread)
    # top-N: every selected token at least as heavy as the others (every F: through the threshold, below)
    for sel in sel_atoms if threshold is None and (not every_F or selected_roles) else ():
        for other in atoms:
            constraints.append(sel.lam - other.lam)
            owners.append(None)
    anchored: dict[str, Any] = {}
    if every_F:
        margin, constraints, anchored = _anchor_problem(b, margin, constraints, owners, list(role_tokens.values()),
                                                        atoms, sel_atoms,
                                                        [selected_roles[c_] for c_ in role_tokens] if selected_roles else None)
    if b.model.slopes:  # every F with its slopes: their box [-1, 1] where the margin is homogeneous in them
        anchored["slopes"] = _slope_scale(margin, constraints, [*role_tokens.values(), *atoms, *sel_atoms], anchored)
    L_lo, L_hi = lengths or space.boxes.get("L", (1.0, INF))
    L_lo = max(L_lo, float(space.min_length), float(k), 1.0)
    if L_lo > L_hi:
        raise Declined(f"no length L >= {L_lo:g} in the range of L")
    if L_lo == L_hi:  # one length: t = 1/L exactly, no coordinate (no float holds 1/3)
        exact_t = {t_sym: 1 / _exact(L_lo)}
        margin = margin.xreplace(exact_t)
        constraints = [con.xreplace(exact_t) for con in constraints]
    core, stripped = strip_positive(margin)
    constraints = [strip_positive(con)[0] for con in constraints]
    t_lo, t_hi = length_range(L_lo, L_hi)
    coords = [Coordinate(t_sym, t_lo, t_hi, "length", "t = 1/L")] if core.has(t_sym) or any(
        con.has(t_sym) for con in constraints) else []
    used = core.free_symbols | set().union(*(con.free_symbols for con in constraints))
    coords += [pc for pc in param_coords if pc.symbol in used]
    if threshold is not None and threshold.symbol in used:
        coords.append(threshold)
    for tok in role_tokens.values():
        coords += [co for co in tok.coordinates if co.symbol in used]
    for a in [*atoms, *sel_atoms]:
        coords += [co for co in a.coordinates if co.symbol in used]
    for _, point in b.points.values():
        coords += [co for co in point.coordinates if co.symbol in used]
    coords += [Coordinate(w, 0.0, 1.0, "weight", f"stick-breaking share {w}") for w in sticks if w in used]
    all_coords = [*coords, *(co for tok in [*role_tokens.values(), *atoms, *sel_atoms, *(p for _, p in b.points.values())]
                             for co in tok.coordinates if co.symbol not in {c.symbol for c in coords})]
    if anchored:
        coords += [co for co in anchored.get("coordinates", []) if co.symbol in used]
        ends = anchored.get("ends", {})
        coords = [dataclasses.replace(co, lo=max(co.lo, ends[co.symbol][0]), hi=min(co.hi, ends[co.symbol][1]))
                  if co.symbol in ends else co for co in coords]
        if every_F:
            coords = _propagate_orders(coords, constraints)
    known = {co.symbol for co in coords}
    unknown = used - known
    if unknown:
        raise Declined(f"the margin reads symbols with no coordinate: {', '.join(sorted(map(str, unknown)))}")
    if ranges:
        coords, all_coords = ([dataclasses.replace(co, lo=ranges[co.symbol][0], hi=ranges[co.symbol][1])
                               if co.symbol in ranges else co for co in cs] for cs in (coords, all_coords))
    signs: list[tuple[sp.Expr, int]] = []
    core = refine_abs(core, coords, signs)
    constraints = [refine_abs(con, coords, signs) for con in constraints]
    core, squared = rationalise_root(core, coords)
    unsigned = (core, [*stripped, *squared])
    core, signed = strip_signed(core, coords, strict, closed=bool(space.simplex))
    core, scaled = unit_multiplier(core, constraints)
    stripped = [*stripped, *squared, *signed, *scaled]
    # a sign used to drop an absolute value is part of the proof even when what it read simplified away: keep the
    # coordinates it reads, so that the certificate's replay can re-check it on their box
    fact_symbols = set().union(*(a.free_symbols for a, _ in signs)) if signs else set()
    coords += [c for c in all_coords if c.symbol in fact_symbols and c.symbol not in {k.symbol for k in coords}]
    names = {r: b.token_of_role[r].name for r in b.roles}
    text = "roles " + (", ".join(f"{r} = {tok}" for r, tok in sorted(names.items())) if names else "none")
    text += _sides_text(selected_roles)
    if b.aliases:
        text += "; " + ", ".join(f"{r} read at {target}" for r, target in sorted(b.aliases.items()))
    if b.bounded_by_tokens:
        text += "; F's extremes on [-a, a] bounded by the tokens'"
    if anchored.get("slopes") is not None:
        text += f"; slopes scaled to max |g| <= 1 (the margin is homogeneous of degree {anchored['slopes']} in them)"
    for side, which in ((1, "an upper"), (-1, "a lower")):
        if b.bounds_read[side]:
            text += f"; read through {which} bound: " + ", ".join(b.bounds_read[side])
    if ranges:
        text += "; " + _ranges_text(ranges)
    T = parameters["T"]  # every relaxation has one (_parameter_coordinates)
    logit = (lambda tok: T * tok.lam) if b.model.weights else (lambda tok: tok.l)
    realisation = {"roles": [logit(tok) for tok in role_tokens.values()], "atoms": [logit(a) for a in atoms],
                   "role_names": {r: [t_.name for t_ in role_tokens.values()].index(tok.name)
                                  for r, tok in b.token_of_role.items()},
                   "role_coordinates": [tok.coordinates[0].symbol for tok in role_tokens.values()],
                   "atom_coordinates": [a.coordinates[0].symbol for a in atoms], "sticks": sticks,
                   "slopes": ([tok.g for tok in role_tokens.values()], [a.g for a in atoms], anchored.get("slopes"))
                             if b.model.slopes else None,
                   "scale": T if model.scaled else sp.Integer(1),
                   "bounded": space.bounded_logits, "keys": space.logit_bound == "keys",
                   "selected_atoms": [logit(a) for a in sel_atoms], "selected_masses": sel_masses,
                   "N": parameters.get("N") if space.selection else None,
                   "role_selected": [selected_roles[cls] for cls in role_tokens] if selected_roles else None,
                   "others_logit": T * sp.log(b.left) if b.model.weights else None, "constrained": constrained,
                   "masses": masses, "weights_model": b.model.weights, "L_range": (L_lo, L_hi),
                   "atom_counts": [m / a.coordinates[0].symbol for m, a in zip(masses, atoms)] if b.model.weights else [],
                   "reference": anchored.get("reference"), "bracket": anchored.get("bracket"),
                   "points": [(p.coordinates[0].symbol, _extreme_of(role)) for role, p in b.points.values()],
                   "weighted": len(b.weighted), "common_reference": common_reference, "closed": bool(space.simplex)}
    return Problem(statement.id, c, text, coords, core, constraints, strict, margin, stripped, names, n_atoms,
                   len(moments), parameters, model.describe(), signs, not (b.aliases or b.inexact),
                   realisation, unsigned if signed else None, poles(core, coords))


#: the largest core (nodes) whose numerator is factored to find factors of known sign on the box
MAX_SIGNED = 600
#: the most times a problem is split at kinks of its margin (2^depth parts at most)
MAX_KINK_DEPTH = 2


def _kink(problem: Problem) -> tuple[sp.Symbol, float] | None:
    """Where an absolute value the root box leaves unresolved changes sign: a factor of its argument affine in one
    coordinate, ``c (x - v)`` with ``v`` a double strictly inside ``x``'s range, the other factors of certain sign
    on the box. Split there, each side resolves it (:func:`refine_abs`): a margin of ``|beta u|`` that is an
    identity on one side (``exp(beta + beta u) = exp(beta (1 + u))``) closes as such."""
    coords = problem.coordinates
    syms = [co.symbol for co in coords]
    box = {co.symbol: co for co in coords}
    for expr in [problem.core, *problem.constraints]:
        for node in sorted(expr.atoms(sp.Abs, OAbs), key=sp.default_sort_key):
            arg = node.args[0]
            if not arg.free_symbols <= set(syms):
                continue
            _, factors = sp.factor_list(arg)
            for j, (f, _) in enumerate(factors):
                if len(f.free_symbols) != 1:
                    continue
                x, = f.free_symbols
                if not f.is_polynomial(x):  # (a logarithm's argument: no affine factor)
                    continue
                poly = sp.Poly(f, x)
                if poly.degree() != 1:
                    continue
                a_, b_ = poly.all_coeffs()
                v = -b_ / a_
                if not (v.is_Rational and box[x].lo < float(v) < box[x].hi and sp.Rational(float(v)) == v):
                    continue
                others = sp.Mul(*[g**m for i, (g, m) in enumerate(factors) if i != j])
                if others.free_symbols and _box_sign(others, coords) == 0:
                    continue
                return x, float(v)
    return None


def lower_end(expr: sp.Expr, coords: list[Coordinate], depth: int = 2) -> float:
    """A certified lower end of ``expr`` on the root box of ``coords``: its enclosure's (``mpmath.iv``), or, where
    ``expr`` is affine in a bounded coordinate, the lesser of its lower ends at that coordinate's two ends (``t + (1 -
    t) X``, whose enclosure loses the dependency between ``t`` and ``1 - t``; at most ``depth`` coordinates deep)."""
    syms = [c.symbol for c in coords]
    if not expr.free_symbols <= set(syms):
        return -INF
    key = (expr, tuple((c.symbol, c.lo, c.hi) for c in coords), depth)
    if key in _LOWER_ENDS:
        return _LOWER_ENDS[key]
    try:
        bound = run_rigorous(compile_program([expr], syms), [c.lo for c in coords], [c.hi for c in coords],
                             "mpmath.iv")[0][0]
    except Unsupported:
        bound = -INF
    if not bound > 0 and depth > 0:
        for c in coords:  # affine in a coordinate: its smallest value is at one of the two ends
            if c.symbol in expr.free_symbols and math.isfinite(c.lo) and math.isfinite(c.hi) \
                    and differentiate(differentiate(expr, c.symbol), c.symbol) == 0:
                ends = [lower_end(expr.xreplace({c.symbol: _exact(v)}), coords, depth - 1) for v in (c.lo, c.hi)]
                bound = max(bound, min(ends))
                break
    if len(_LOWER_ENDS) > 4096:
        _LOWER_ENDS.clear()
    _LOWER_ENDS[key] = bound
    return bound


_LOWER_ENDS: dict[tuple[Any, ...], float] = {}


def rationalise_root(core: sp.Expr, coords: list[Coordinate]) -> tuple[sp.Expr, list[str]]:
    """``A - B sqrt(Q)`` with ``A >= 0`` and ``B >= 0`` on the whole root box has the sign of ``A^2 - B^2 Q`` (and is
    0 where it is: both sides are nonnegative), so the root goes: ``1/(2T) - J_frobenius`` becomes a rational
    function, whose equality cases sympy can factor. Returns the core and what was done (nothing where the core is
    not of that shape or a sign is not certain)."""
    terms = sp.Add.make_args(core)

    def root_of(term: sp.Expr) -> sp.Expr | None:
        roots = [f for f in sp.Mul.make_args(term) if isinstance(f, sp.Pow) and f.exp == sp.Rational(1, 2)]
        return roots[0] if len(roots) == 1 else None

    with_root = [term for term in terms if root_of(term) is not None]
    if len(with_root) != 1 or len(terms) < 2:
        return core, []
    term = with_root[0]
    root = root_of(term)
    assert root is not None
    coeff = term / root
    rest = core - term
    if not (lower_end(rest, coords) >= 0 and lower_end(-coeff, coords) >= 0):
        return core, []
    return rest**2 - coeff**2 * root.base, [f"sqrt({root.base}) squared ({rest} >= 0 and {-coeff} >= 0 on the box)"]


def strip_signed(core: sp.Expr, coords: list[Coordinate], strict: bool, closed: bool = True
                 ) -> tuple[sp.Expr, list[str]]:
    """The core divided by the factors of its numerator whose rigorous lower end on the whole root box is ``> 0``, or
    ``>= 0`` when the bound is not strict (``core = f r`` with ``f >= 0`` is ``>= 0`` wherever ``r`` is), and by its
    denominator where that is ``> 0`` on the box: ``t (1 - t) (e^2 E - c) / D`` leaves ``e^2 E - c``, whose equality
    cases no longer extend along t. Returns the core and the factors divided out. The problem's margin is unchanged
    (its value at an instance is the instance's): where a nonnegative factor is 0 the margin is 0, so a negative box
    of the core there is only a candidate, certified by the caller as every candidate is. The identity holds by
    construction (sympy's together and factor are exact on the rational view of the core); :func:`_same_function`
    checks it at a few points, else the core is kept. ``closed``: an infinite end of a coordinate may stand for
    instances (the closed simplex of sparsemax, whose weight 0 is ``D = -oo``); else no instance lies there (log F
    values of a positive F, a parameter's infinite end) and a denominator positive at every instance goes on an
    unbounded box too."""
    from attnbounds.theory.deciding.prover.bnb import MAX_DENSE, MAX_TERMS, _dense, _rational_view, _size, _terms

    if _size(core) > MAX_SIGNED or not coords:
        return core, []
    try:
        atoms: dict[sp.Basic, sp.Dummy] = {}
        num, den = sp.fraction(sp.together(_rational_view(core, atoms)))
        if _terms(num) > MAX_TERMS or _dense(num) > MAX_DENSE or _terms(den) > MAX_TERMS:
            return core, []
        back = {d: n for n, d in atoms.items()}
        factors = [f.xreplace(back) for f in sp.Mul.make_args(sp.factor(num))]
        den = den.xreplace(back)
    except (sp.PolynomialError, ValueError, TypeError, RecursionError, MemoryError):  # pragma: no cover - sympy
        return core, []
    known = {c.symbol for c in coords}

    def low_end(expr: sp.Expr) -> float:
        return lower_end(expr, coords)

    keep, gone, nonnegative = [], [], []
    for f in factors:
        if f.is_number or not f.free_symbols <= known:
            keep.append(f)
            continue
        for sign in (1, -1):  # a factor of known sign either way (t - 1 <= 0): its sign stays with the core
            bound = low_end(sign * f)
            if bound == 0 and low_end(-sign * f) >= 0:  # 0 on the whole box (a tie the constraints force): the
                keep.append(f)  # margin is 0 there, and the core keeps the factor that says so
                break
            if bound > 0 or (not strict and bound >= 0):
                gone.append(sign * f)
                keep.append(sp.Integer(sign))
                nonnegative.append(not bound > 0)
                break
        else:
            keep.append(f)
    rest = sp.Mul(*keep)

    den_positive = den.free_symbols <= known and all(_positive_at_instances(f, coords) for f in sp.Mul.make_args(den))
    bounded = not closed or all(math.isfinite(c.lo) and math.isfinite(c.hi) for c in coords
                                if c.symbol in den.free_symbols)
    if not gone and not (den_positive and den != 1 and _size(rest) <= _size(core)
                         and (_singular_at_an_end(core, coords) or (bounded and rest.free_symbols < core.free_symbols))):
        return core, []  # (a positive denominator alone goes where the core has no value at an end, 1/(1/t - 1/pi),
        # or holds coordinates the numerator does not read (the others' logits and shares: the sign does not depend
        # on them) on a bounded box: an infinite end stands for instances (sparsemax's weight 0 at D = oo) where the
        # denominator has no value and the margin is 0; and the numerator is no larger than the core: not where it
        # multiplies out exp(-(1/t - 1000)^2/200))
    if not rest.free_symbols and not den_positive:  # nothing left to decide but the denominator's sign
        return core, []
    out = rest if den_positive else rest / den
    if not _same_function(out * sp.Mul(*gone) / (den if den_positive else 1), core, coords):
        return core, []
    return out, [f"{f} ({'>= 0' if nonneg else '> 0'} on the box)" for f, nonneg in zip(gone, nonnegative)] + (
        [f"1/({den}) (> 0 at every instance of the box)"] if den_positive and den != 1 else [])


def _positive_at_instances(f: sp.Expr, coords: list[Coordinate]) -> bool:
    """``f > 0`` at every point of the root box of ``coords`` an instance stands for: its lower end on the box is
    > 0, or it is ``p + r`` with ``p`` a sum of terms positive there (products of factors positive wherever the space
    is open, ``t``, ``exp``, ..., or > 0 on the whole box) and ``r >= 0`` on the box (``t + (1 - t) S``: 0 only at
    t = 0, no instance)."""
    known = {c.symbol for c in coords}
    if f.is_number:
        return bool(f > 0)
    if not f.free_symbols <= known:
        return False
    if lower_end(f, coords) > 0:
        return True
    pos = [a for a in sp.Add.make_args(f)
           if all(_positive_factor(x) or (x.free_symbols <= known and lower_end(x, coords) > 0)
                  for x in sp.Mul.make_args(a))]
    return bool(pos) and lower_end(f - sp.Add(*pos), coords) >= 0


def poles(core: sp.Expr, coords: list[Coordinate]) -> list[sp.Expr]:
    """The divisors of ``core`` (the bases of its negative powers) that may change sign on the root box (none: each
    one is ``>= 0`` or ``<= 0`` on the whole box, rigorously). The prover's monotone projections need the core not to jump
    from one infinity to the other inside a box: ``t/(1 - sqrt(2) t^3) - t`` grows on both sides of its pole at
    ``t = 2^(-1/6)`` and is negative beyond it (``alpha_min <= 1/(L - sqrt(2)/L^2)`` at L = 1), which a projection onto
    ``t = 0`` never sees. A divisor of one sign may touch 0 (the relaxation's totals vanish at corners of the box, or
    at ``t = 0``): the core then tends to one infinity on both sides, which no monotone function does."""
    return [base for base in _divisors(core) if not _one_sign(base, coords)]


#: the most problems :func:`eliminated` derives from one
MAX_ELIMINATED = 2


def eliminated(problem: Problem) -> list[Problem]:
    """The problem with a coordinate ``x`` eliminated through a constraint ``c_k >= 0``: where the core and ``c_k`` are
    affine in ``x``, ``core = lam c_k + r`` with ``lam = (d core/dx) / (d c_k/dx)`` and ``r`` free of ``x``; with
    ``lam >= 0`` on the whole root box (rigorously; finite there too where an infinite end may be an instance), ``core >= r`` at every point where ``c_k >= 0``, so
    ``r >= 0`` (``> 0``) proves the problem. Tight where the extreme lies on the constraint's boundary along a curve:
    ``alpha_max alpha_min <= 1/(4 (L - 1))`` is an equality at ``alpha_min = (1 - alpha_max)/(L - 1)``, alpha_max = 1/2,
    for every L, which no constant multiplier closes; eliminating alpha_min's share leaves
    ``t (1 - 2 b)^2 / (4 (1 - t))``. Not exact (``r`` bounds the margin from below): a negative box is no
    counterexample. At most :data:`MAX_ELIMINATED`, after the problem itself."""
    core = problem.core
    if problem.poles or not problem.constraints or not _size_ok(core):
        return []
    coords = problem.coordinates
    known = {co.symbol for co in coords}
    # lam finite on the whole box where an infinite end may be an instance (the closed simplex: lam c_k there is no
    # number); elsewhere every instance is a finite point, where lam is finite
    closed = problem.realisation.get("closed", True)
    out: list[Problem] = []
    for k, con in enumerate(problem.constraints):
        if any(sp.expand(con + other) == 0 for other in problem.constraints[k + 1:]):  # c_k = 0: x substituted
            for c in coords:
                x = c.symbol
                b = differentiate(con, x) if x in con.free_symbols and x in core.free_symbols else sp.Integer(0)
                if b == 0 or b.has(x) or not b.free_symbols <= known or not (
                        lower_end(b, coords) > 0 or lower_end(-b, coords) > 0):
                    continue
                value = sp.cancel(x - con / b)
                rest = sp.factor(sp.cancel(core.xreplace({x: value})))
                if rest.has(x) or not _size_ok(rest) or poles(rest, coords):
                    continue
                kept = [e for e in (sp.cancel(other.xreplace({x: value})) for other in problem.constraints) if e != 0]
                out.append(dataclasses.replace(
                    problem, core=rest, constraints=kept, exact=False, unsigned=None, poles=[],
                    stripped=[*problem.stripped, f"{x} = {value} (constraints {k} and its negation: {con} = 0)"]))
                break
            continue
        for c in coords:
            x = c.symbol
            if x not in core.free_symbols or x not in con.free_symbols or not _size_ok(con):
                continue
            for u, form, cleared in _generators(x, core, coords, closed):  # affine in x, or in exp(x)
                a, b = (differentiate(e, u) for e in (form, con.xreplace({sp.exp(x): u}) if u != x else con))
                if a.has(x) or b.has(x) or a.has(u) or b.has(u) or b == 0:
                    continue
                lam = sp.cancel(a / b)
                if lam.has(x) or not lam.free_symbols <= known or not lower_end(lam, coords) >= 0 \
                        or (closed and not math.isfinite(lower_end(-lam, coords))):
                    continue
                rest = sp.cancel(cleared - lam * con)
                if rest.has(x) or not _size_ok(rest):
                    continue
                rest = sp.factor(rest)
                if poles(rest, coords) or not _same_function(rest + lam * con, cleared, coords):
                    continue
                what = "" if cleared is core else f"the core times its denominator ({cleared} >= 0 for it), "
                out.append(dataclasses.replace(
                    problem, core=rest, exact=False, unsigned=None, poles=[],
                    stripped=[*problem.stripped, f"{what}{lam} * ({con}) (>= 0 at every instance: "
                                                 f"{'exp(' + str(x) + ')' if u != x else x} eliminated through "
                                                 f"constraint {k})"]))
                if len(out) == MAX_ELIMINATED:
                    return out
                break
    return out


def _generators(x: sp.Symbol, core: sp.Expr, coords: list[Coordinate], closed: bool
                ) -> list[tuple[sp.Symbol, sp.Expr, sp.Expr]]:
    """Where :func:`eliminated` looks for a core affine in a coordinate: ``(u, the core in u, the core it proves)``,
    first ``x`` itself, then ``u = exp(x)`` (a log F value's coordinate) in the core times its denominator where that
    is certainly positive on the root box (the core's sign unchanged: ``3/4 - t / (t + (1 - t) e^D)`` becomes
    ``(3/4) (t + (1 - t) e^D) - t``), and finite there too where an infinite end may be an instance (``closed``: the
    closed simplex, whose weight 0 is ``D = oo`` over the least weight's token; ``t / (t + (1 - t) e^D)`` is 0 there,
    and times its denominator it would be ``t``)."""
    out: list[tuple[sp.Symbol, sp.Expr, sp.Expr]] = [(x, core, core)]
    if not core.has(sp.exp(x)):
        return out
    num, den = sp.fraction(sp.together(core))
    if not den.is_number and not (lower_end(den, coords) > 0
                                  and (not closed or math.isfinite(lower_end(-den, coords)))):
        return out
    if den.is_number and not den.is_positive:
        return out
    u = sp.Dummy(f"exp_{x}", positive=True)
    cleared = num if not den.is_number else core
    form = cleared.xreplace({sp.exp(x): u})
    return out if form.has(x) else [*out, (u, form, cleared)]


def _divisors(expr: sp.Expr) -> list[sp.Expr]:
    """The bases of ``expr``'s negative powers that are not numbers, in sympy's sort order."""
    return [p.base for p in sorted(expr.atoms(sp.Pow), key=sp.default_sort_key)
            if p.exp.is_negative and not p.base.is_number]


def _one_sign(expr: sp.Expr, coords: list[Coordinate], depth: int = 2) -> int:
    """1 (-1) when ``expr`` is certainly ``>= 0`` (``<= 0``) wherever it has a value on the root box of ``coords``,
    else 0: its rigorous enclosure, else its structure (a sum of terms of one sign, a product of factors of known
    signs, a power of a nonnegative base or an even power, ``exp``), else its factored form (``1 - s (1 - u) - u`` is
    ``(1 - s)(1 - u)``, which intervals alone do not see)."""
    if expr.is_number:
        return 1 if expr >= 0 else -1 if expr <= 0 else 0
    if not expr.free_symbols <= {c.symbol for c in coords}:
        return 0
    if lower_end(expr, coords) >= 0:
        return 1
    if lower_end(-expr, coords) >= 0:
        return -1
    if isinstance(expr, sp.exp):
        return 1
    if isinstance(expr, sp.Pow):
        base = _one_sign(expr.base, coords, depth)
        even = expr.exp.is_integer and expr.exp.is_even
        return 1 if even or base > 0 else -1 if base < 0 and expr.exp.is_integer else 0
    if isinstance(expr, sp.Mul):
        signs = [_one_sign(f, coords, depth) for f in expr.args]
        return 0 if 0 in signs else math.prod(signs)
    if isinstance(expr, sp.Add):
        term_signs = {_one_sign(a, coords, depth) for a in expr.args}
        if term_signs in ({1}, {-1}):
            return term_signs.pop()
        if depth > 0 and _size_ok(expr):
            factored = sp.factor(expr)
            if factored != expr:
                return _one_sign(factored, coords, depth - 1)
    return 0


def _size_ok(expr: sp.Expr) -> bool:
    """Whether ``expr`` is small enough to factor (:data:`MAX_SIGNED` nodes)."""
    from attnbounds.theory.deciding.prover.bnb import _size

    return _size(expr) <= MAX_SIGNED


def _singular_at_an_end(expr: sp.Expr, coords: list[Coordinate]) -> bool:
    """Whether a power of ``expr`` divides by 0 where one coordinate is at a finite end of its range (``1/t`` at
    ``t = 0``; sympy would read ``1/(1/t - 1/pi)`` there as 0)."""
    return any(base.xreplace({c.symbol: _exact(end)}) == 0
               for base in _divisors(expr) for c in coords for end in (c.lo, c.hi) if math.isfinite(end))


def unit_multiplier(core: sp.Expr, constraints: list[sp.Expr]) -> tuple[sp.Expr, list[str]]:
    """The core divided by a positive irrational number ``q`` such that ``core = q c_k + r`` for a constraint
    ``c_k >= 0`` with ``r`` of fewer terms than the core: ``pi (t - b) + b t`` (``alpha_min < 1/(L - 1/pi)``) becomes
    ``(t - b) + b t / pi``, which the closure by a multiplier of ``c_k`` (a simple fraction, here 1) closes where the
    multiplier ``pi`` has no fraction close enough. Division by a positive number keeps the sign; the first
    constraint (in order) that shortens the core is taken. Returns the core and the factor divided out (none: the
    core as it was)."""
    symbols = sorted(core.free_symbols | set().union(*(con.free_symbols for con in constraints)), key=str)

    def coefficients(expr: sp.Expr) -> dict[sp.Expr, sp.Expr]:
        """``{monomial: its number}`` of the expanded ``expr`` (``pi t`` is ``{t: pi}``)."""
        out: dict[sp.Expr, sp.Expr] = {}
        for term in sp.Add.make_args(_expand_polynomial(expr)):
            number, monomial = term.as_independent(*symbols, as_Add=False)
            out[monomial] = out.get(monomial, sp.Integer(0)) + number
        return out

    if not symbols or not constraints:
        return core, []
    terms = coefficients(core)
    for con in constraints:
        for monomial, c in coefficients(con).items():
            q = sp.nsimplify(terms.get(monomial, 0) / c) if monomial in terms else None
            if q is None or not q.is_number or q.is_positive is not True or q.is_rational is not False:
                continue
            if len(sp.Add.make_args(_expand_polynomial(core - q * con))) < len(terms):
                return sp.expand(core / q), [f"{q} (> 0)"]
    return core, []


def _expand_polynomial(expr: sp.Expr) -> sp.Expr:
    """``expr`` expanded as a polynomial in its non-polynomial parts (functions, roots), which are held unexpanded:
    sympy's deep expansion of a Jacobian norm's core (sums of exponentials under a square root) ran for minutes."""
    held: dict[sp.Dummy, sp.Expr] = {}

    def hold(e: sp.Expr) -> sp.Expr:
        if e.is_Atom:
            return e
        if e.is_Add or e.is_Mul or (e.is_Pow and e.exp.is_Integer):
            return e.func(*(hold(a) for a in e.args))
        d = sp.Dummy()
        held[d] = e
        return d

    return sp.expand(hold(expr)).xreplace(held)


def _same_function(a: sp.Expr, b: sp.Expr, coords: list[Coordinate], digits: int = 40) -> bool:
    """Whether ``a`` and ``b`` agree at three seeded points inside the box (to ``digits // 2`` digits): a check of an
    identity built by exact algebra (:func:`strip_signed`), against a slip in its construction."""
    import random

    rng = random.Random(0)
    for _ in range(3):
        point = {}
        for c in coords:
            lo = c.lo if math.isfinite(c.lo) else (min(c.hi, 0.0) - 10.0)
            hi = c.hi if math.isfinite(c.hi) else (max(c.lo, 0.0) + 10.0)
            point[c.symbol] = sp.Float(lo + (hi - lo) * rng.uniform(0.1, 0.9), digits)
        try:
            va, vb = (complex(sp.N(e.xreplace(point), digits)) for e in (a, b))
        except (TypeError, ValueError, ZeroDivisionError):
            return False
        if not (math.isfinite(abs(va)) and abs(va - vb) <= 10.0 ** (-digits // 2) * max(1.0, abs(va), abs(vb))):
            return False
    return True


def _opaque(expr: sp.Expr) -> sp.Expr:
    """sympy's Min, Max and Abs as the opaque functions (:mod:`attnbounds.theory.mathematics.opaque`): they have derivatives the
    prover can differentiate, and sympy does not re-simplify them at every rebuild."""
    def nest(fn: Any, args: tuple[sp.Expr, ...]) -> sp.Expr:
        out = args[0]
        for a in args[1:]:
            out = fn(out, a)
        return out

    expr = expr.replace(lambda e: isinstance(e, sp.Min), lambda e: nest(OMin, e.args))
    expr = expr.replace(lambda e: isinstance(e, sp.Max), lambda e: nest(OMax, e.args))
    return expr.replace(lambda e: isinstance(e, sp.Abs), lambda e: OAbs(e.args[0]))


def _box_sign(expr: sp.Expr, coords: list[Coordinate]) -> int:
    """1 (-1) when ``expr`` is certainly ``>= 0`` (``<= 0``) on the box of ``coords`` (``mpmath.iv``), else 0."""
    syms = [c.symbol for c in coords]
    if not expr.free_symbols <= set(syms):
        return 0
    try:
        (a, b), = run_rigorous(compile_program([expr], syms), [c.lo for c in coords], [c.hi for c in coords],
                               "mpmath.iv")
    except (AttnBoundsError, TypeError, ValueError):
        return 0
    return 1 if a >= 0 else -1 if b <= 0 else 0


def refine_abs(expr: sp.Expr, coords: list[Coordinate], signs: list[tuple[sp.Expr, int]]) -> sp.Expr:
    """``|x| = x`` or ``-x`` where the sign of ``x`` on the whole box is certain (rigorous interval arithmetic,
    ``mpmath.iv``): sympy cannot know that a coordinate in [0, 1] makes ``|b - 1| = 1 - b``, and the factored
    forms the prover tries need it. Each replacement is appended to ``signs`` (the certificate re-checks it)."""

    def fix(node: sp.Expr) -> sp.Expr:
        arg = node.args[0]
        k = _box_sign(arg, coords)
        if k:
            signs.append((arg, k))
            return arg if k > 0 else -arg
        return node

    return expr.replace(lambda e: isinstance(e, (sp.Abs, OAbs)), fix)


def _spread_constraints(space: Space, parameters: dict[str, sp.Expr], roles: list[Token], atoms: list[Token],
                        masses: list[sp.Expr], top: Token | None) -> list[sp.Expr]:
    """The bounded simplex of an alpha-entmax map (:attr:`Space.spread`, ``q = alpha - 1 <= 1``): ``p_i^q - p_j^q <=
    2 q a / T`` for every ordered pair of tokens, each weight ``p = t F / S`` with ``S = t sum_j F_j`` over a
    reference token's F (``F = exp(lam - lam_ref)``); times ``S^q > 0``: ``2 q a S^q / T - t^q (F_i^q - F_j^q) >=
    0``. With a token ``top`` of the largest weight (a role that dominates every token) the pairs from it imply the
    others, each then raised to the power ``1/q`` where that is whole (both sides >= 0: ``F_top = 1 >= F_j``), and so
    does, for the others as a whole, their mean: ``F_top^q - (mean F)^q <= mean (F_top^q - F^q)``
    (``x^q`` is concave), an implied constraint the atoms' own do not give one at a time. An atom of no mass is no
    token, and its constraints still hold at some value of its log F (any token's): every instance stays a point.
    Where the totals read F alone, one atom at the others' mean F is every instance (:func:`_problem`): the totals
    are kept, a dominance ``F_o <= F_r`` or ``>=`` holds for the mean as for each, and so does every pair's
    constraint, the mean's q-th power lying between the least F^q and the mean of the F^q (concavity)."""
    q = sp.sympify(space.spread)
    if not (q.is_positive and (q - 1).is_nonpositive):
        raise Declined(f"a threshold map with q = alpha - 1 = {q} outside (0, 1]")
    tokens = [*roles, *atoms]
    ref = top if top is not None else tokens[0]
    share = 1 - len(roles) * t_sym  # the others are L - k tokens
    others = sp.Add(*[m * sp.exp(a.lam - ref.lam) for m, a in zip(masses, atoms)])
    total = t_sym * sp.Add(*[sp.exp(r.lam - ref.lam) for r in roles]) + share * others
    power = {tok.name: sp.exp(q * (tok.lam - ref.lam)) for tok in tokens}
    bound = 2 * q * sp.sympify(parameters["a"]) / sp.sympify(parameters["T"])
    pairs = [(i, j) for i in tokens for j in tokens if i is not j and (top is None or i is top)]
    m = 1 / q
    if top is not None and m.is_integer:  # F_top^q - F_j^q >= 0 (the top dominates): raised to the power 1/q,
        out = [bound**m * total - t_sym * (1 - power[j.name]) ** m for _, j in pairs]  # affine in t: collected,
        if len(atoms) > 1:  # t appears once (an enclosure over a range of t is then tight)
            out.append(bound**m * total - t_sym * (1 - others**q) ** m)
        return [sp.collect(sp.expand(con), t_sym) for con in out]
    out = [bound * total**q - t_sym**q * (power[i.name] - power[j.name]) for i, j in pairs]
    if top is not None and len(atoms) > 1:
        out.append(bound * total**q - t_sym**q * (1 - others**q))
    return out


def _bounded_simplex(space: Space, b: "_Builder") -> bool:
    """Whether the problem ranges over the bounded simplex of a threshold map (:func:`_spread_constraints`)."""
    return isinstance(b.model, LogFValues) and space.spread is not None and space.bounded_logits


def _simplex(n: int, name: str) -> tuple[list[sp.Expr], list[sp.Symbol]]:
    """``n`` masses on the simplex by stick-breaking (``n - 1`` coordinates in [0, 1]: a cube, no constraint)."""
    sticks = [sp.Symbol(f"{name}_{j}", real=True) for j in range(max(n - 1, 0))]
    masses: list[sp.Expr] = []
    left: sp.Expr = sp.Integer(1)
    for stick in sticks:
        masses.append(left * stick)
        left = left * (1 - stick)
    if n:
        masses.append(left)
    return masses, sticks


def _substitute(expr: sp.Expr, subs: dict[sp.Symbol, sp.Expr]) -> sp.Expr:
    """Replace total placeholders until none is left (a total's body may read another total)."""
    for _ in range(len(subs) + 1):
        new = expr.xreplace(subs)
        if new == expr:
            return new
        expr = new
    return expr


def _positive_domain(statement: Statement, sym: sp.Symbol | str) -> bool:
    """Whether the statement's hypotheses make this parameter > 0 (its domain formula)."""
    for h in statement.hypotheses:
        formula = getattr(h, "formula", None)
        if formula is None or getattr(h, "relax", None) is None:
            continue
        parts = list(formula.args) if isinstance(formula, sp.And) else [formula]
        for rel in parts:
            if isinstance(rel, sp.StrictGreaterThan) and str(rel.lhs) == str(sym) and rel.rhs.is_number and rel.rhs >= 0:
                return True
            if isinstance(rel, sp.StrictLessThan) and str(rel.rhs) == str(sym) and rel.lhs.is_number and rel.lhs >= 0:
                return True
    return False


__all__ = ["Group", "Relaxation", "RelaxedInstance", "Role", "homogeneity_degree", "relax"]
