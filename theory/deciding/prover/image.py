"""An instance as a point of the relaxed space: what the cross-check of forms checks a quantity's relaxed form against.

The relaxation is sound because every instance of every length *is* a point of the relaxed space with the same
margin: ``t = 1/L``, each distinguished token one of the instance's tokens, the other tokens their own
distribution. :func:`relaxed_value` evaluates a quantity's ``relaxed`` form at such a point (the distinguished
tokens assigned to columns of a token-class instance, the others the remaining tokens with their counts), in
floating point; :func:`image_values` does so for every assignment. The cross-check of forms
(``tests/rigor/test_relaxed_forms.py``) asserts that the quantity's float value on the instance is attained at an
assignment that satisfies the distinguished tokens' constraints (the token of a maximum is a maximum).
"""

from __future__ import annotations

import contextlib
import itertools
from fractions import Fraction
from typing import Any, Callable, Iterator, NamedTuple, Sequence

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import Unsupported
from attnbounds.theory.mathematics.normalisers.ratio import log_F_map
from attnbounds.theory.deciding.prover.problem import t_sym
from attnbounds.theory.deciding.prover.relax import RelaxedInstance, Role
from attnbounds.theory.deciding.prover.space import Declined, Token
from attnbounds.theory.mathematics.quantities import QUANTITIES

#: assignments of distinguished tokens to columns tried at most per quantity
MAX_ASSIGNMENTS = 4096


#: decimal digits the relaxed forms are evaluated with (the features are exact doubles: no cancellation shows)
DIGITS = 90


def _float(x: Any) -> sp.Float:
    return sp.Float(float(x), DIGITS)


class _Model:
    """The features of an instance's columns (float, as sympy numbers)."""

    def __init__(self, inst: Instance, weights: bool):
        n = log_F_map(inst.normaliser)
        if inst.B != 1:
            raise InvalidArgument(f"the image of an instance reads one instance (B = 1), got B = {inst.B}")
        if n is None or inst.logits is None:
            raise InvalidArgument("the relaxed forms read a normaliser F / sum F (or an element-wise F) and logits")
        self.inst, self.weights = inst, weights
        self.lam = n.log_F_values(inst.logits, inst.L)[0]
        self.g = n.dlog_F_values(inst.logits, inst.L)[0]
        self.l = inst.logits[0]
        self.alpha = inst.alpha[0]

    def token(self, column: int, name: str) -> Token:
        w = _float(self.alpha[column]) if self.weights else None
        lam = sp.log(w) if w is not None else _float(self.lam[column])
        return Token(name, [], None if self.weights else _float(self.l[column]), lam, _float(self.g[column]), w)

    def monotone(self) -> int:
        return 0  # the image takes the extremes of F on [-a, a] themselves (points)


class _ImageBuilder:
    """What :class:`RelaxedInstance` reads, at an instance's own point (module docstring). ``assignment`` maps each
    distinguished token's role to ``(column, slot)``: roles with the same pair are the same token, different slots
    of one column different tokens of that class."""

    def __init__(self, inst: Instance, assignment: dict[str, tuple[int, int]], weights: bool, bound: int):
        self.inst = inst
        self.assignment = assignment
        self.model = _Model(inst, weights)
        keys = inst.q is not None and inst.k is not None  # logits-qk: a is the keys' bound Delta_max
        n = inst.normaliser
        self.space = type("Space", (), {"bounded_logits": "a" in inst.params or keys,
                                        "logit_bound": "keys" if keys else "a" if "a" in inst.params else "",
                                        "elementwise": (lambda T: n) if n is not None and n.elementwise else None})()
        self._keys_bound: float | None = None
        if keys:
            from attnbounds.theory.mathematics.quantities import compute

            self._keys_bound = float(np.asarray(compute("Delta_max", inst))[0])
        self.roles: dict[str, Role] = {}
        self.tokens: dict[tuple[int, int], Token] = {}
        self.bounds: list[str] = []
        self.side = 0
        self.bound = bound
        #: (what RelaxedInstance.weight records; a quantity's value at the instance has no common reference to take)
        self.weighted: dict[str, Any] = {}
        self.common_reference = False

    def read_bound(self, qname: str, bounds: Sequence[str], side: int) -> int:
        """Read the bound ``self.bound`` of ``bounds``, an upper one (``side`` +1: the image's value is then at least
        the quantity's at one placement) or a lower one (-1: at most it at every placement): :func:`read_bounds`."""
        self.bounds, self.side = list(bounds), side
        return self.bound

    def param(self, name: str) -> sp.Expr:
        if name == "a" and self._keys_bound is not None:  # the keys' bound of the logits (logits-qk)
            return _float(self._keys_bound)
        return _float(self.inst.param(name)[0])

    def role(self, role: Role) -> Token:
        self.roles.setdefault(role.name, role)
        key = self.assignment.get(role.name, (0, len(self.assignment) + len(self.roles)))
        if key not in self.tokens:
            self.tokens[key] = self.model.token(key[0], f"c{key[0]}s{key[1]}")
        return self.tokens[key]

    def point(self, role: Role) -> Token:
        n = log_F_map(self.inst.normaliser)
        assert n is not None
        lo, hi = n.log_F_range(self.inst.param("a"))
        probe = Token("probe", [], None, sp.Integer(0), sp.Integer(0))
        top = float(sp.N(role.dominates(Token("p", [], None, sp.Integer(1), sp.Integer(0)), probe))) > 0 \
            if role.dominates is not None else True  # dominating larger log F: the maximum
        return Token(role.name, [], None, _float(hi[0] if top else lo[0]), sp.Integer(0))

    @contextlib.contextmanager
    def sealed(self) -> Iterator[None]:
        yield

    def total(self, fn: Callable[[Token], sp.Expr], exclude: tuple[str, ...], selected: bool | None = None
              ) -> sp.Expr:
        """``(1/L) sum_j fn(token_j)``: the distinguished tokens, then every other token of each column (its count
        less the distinguished ones on it), each with its column's features; with ``selected``, over the N heaviest
        tokens (True) or the others (False) only."""
        counts = self.inst.counts[0] if self.inst.counts is not None else np.ones(self.inst.K, dtype=np.int64)
        if selected is not None:
            if self.tokens:
                raise Declined("distinguished tokens and the top-N selection together")
            N = int(self.inst.N if self.inst.N is not None else 0)
            chosen = np.zeros(len(counts), dtype=np.int64)
            left = N
            for col in np.argsort(-np.asarray(self.inst.alpha[0]), kind="stable"):
                chosen[col] = min(int(counts[col]), left)
                left -= int(chosen[col])
            counts = chosen if selected else counts - chosen
        used = np.zeros(len(counts), dtype=np.int64)
        total: sp.Expr = sp.Integer(0)
        for (col, _), tok in self.tokens.items():
            used[col] += 1
            if tok.name not in exclude:
                total += fn(tok)
        for col, c in enumerate(counts):
            if int(c) - int(used[col]) > 0:
                total += (int(c) - int(used[col])) * fn(self.model.token(col, f"c{col}"))
        return t_sym * total


def _discover(qname: str, inst: Instance, weights: bool, bound: int = 0) -> _ImageBuilder:
    """A discovery pass of the quantity's relaxed form (every role its own token): what it asks for."""
    b = _ImageBuilder(inst, {}, weights, bound)
    _form(qname)(RelaxedInstance(b, _namespace(qname), qname))  # type: ignore[arg-type]
    return b


def _roles(qname: str, inst: Instance, weights: bool, bound: int = 0) -> list[Role]:
    """The distinguished tokens the quantity's relaxed form asks for."""
    return list(_discover(qname, inst, weights, bound).roles.values())


def read_bounds(qname: str, inst: Instance, *, weights: bool = False) -> tuple[int, list[str]]:
    """The bounds of the quantity its relaxed form may read (the inequalities they rest on; ``bound=k`` of
    :func:`image_values` reads the k-th) and their side: +1 for upper bounds (for each, the largest of
    :func:`image_values` is at least the quantity, never below it), -1 for lower bounds (every placement's value is
    at most the quantity); ``(0, [])`` when the form is the quantity's value."""
    b = _discover(qname, inst, weights)
    return b.side, b.bounds


def _form(qname: str) -> Callable[[RelaxedInstance], sp.Expr]:
    form = QUANTITIES[qname].forms.get("relaxed")
    if form is None:
        raise InvalidArgument(f"{qname} has no relaxed form")
    return form


def _namespace(qname: str) -> str:
    return "" if QUANTITIES[qname].shape == "BL" else qname


def relaxed_value(qname: str, inst: Instance, assignment: dict[str, tuple[int, int]], *, weights: bool = False,
                  bound: int = 0) -> float:
    """The quantity's relaxed form at the instance's point with the distinguished tokens placed by ``assignment``
    (role -> (column, slot); B = 1)."""
    if inst.B != 1:
        raise InvalidArgument(f"relaxed_value needs one instance (B = 1), got B = {inst.B}")
    b = _ImageBuilder(inst, assignment, weights, bound)
    expr = _form(qname)(RelaxedInstance(b, _namespace(qname), qname))  # type: ignore[arg-type]
    value = sp.sympify(expr).xreplace({t_sym: sp.Rational(1, inst.L)})
    return float(sp.re(sp.N(value, DIGITS)))


def _dominates(role: Role, r: Token, k: Token) -> bool:
    assert role.dominates is not None
    value = sp.N(sp.sympify(role.dominates(r, k)), DIGITS)
    return bool(value.is_real and value >= 0)  # sympy's 0 is real: a tie dominates


def _patterns(names: list[str]) -> Iterator[list[int]]:
    """Every set partition of ``names``: the class of each name, classes numbered in order of first appearance."""
    def rec(k: int, classes: list[int], n: int) -> Iterator[list[int]]:
        if k == len(names):
            yield list(classes)
            return
        for c in range(n + 1):
            yield from rec(k + 1, [*classes, c], max(n, c + 1))

    yield from rec(0, [], 0)


def image_values(qname: str, inst: Instance, *, weights: bool = False, bound: int = 0
                 ) -> list[tuple[dict[str, tuple[int, int]], float, bool]]:
    """Every placement of the quantity's distinguished tokens (each pattern of them, each class on a column holding
    enough tokens), its relaxed value, and whether it satisfies the constraints (a maximum's token is a maximum)."""
    try:
        roles = _roles(qname, inst, weights, bound)
    except (Declined, Unsupported):  # the form has no reading in this model (logits under softmax weights)
        return []
    counts = inst.counts[0] if inst.counts is not None else np.ones(inst.K, dtype=np.int64)
    model = _Model(inst, weights)
    present = [j for j in range(inst.K) if counts[j] > 0]
    out: list[tuple[dict[str, tuple[int, int]], float, bool]] = []
    tried = 0
    for classes in _patterns([r.name for r in roles]):
        n = max(classes, default=-1) + 1
        for cols in itertools.product(present, repeat=n):
            tried += 1
            if tried > MAX_ASSIGNMENTS:
                return out
            if any(cols.count(c) > counts[c] for c in set(cols)):
                continue
            slot = {}
            place = {}
            for c in range(n):
                slot[c] = sum(1 for d in range(c) if cols[d] == cols[c])
            for r, c in zip(roles, classes):
                place[r.name] = (cols[c], slot[c])
            ok = True
            for r, c in zip(roles, classes):
                if r.dominates is not None:
                    mine = model.token(cols[c], "r")
                    ok = ok and all(_dominates(r, mine, model.token(j, "k")) for j in present)
            try:
                out.append((place, relaxed_value(qname, inst, place, weights=weights, bound=bound), ok))
            except (Declined, Unsupported):  # the form has no reading in this model (logits under softmax weights)
                return []
    return out


__all__ = ["image_values", "read_bounds", "relaxed_value"]


#: a weight 0 of a threshold map in the image: the closed simplex's D = -oo read at the log of this weight instead
#: (finite where sympy evaluates the constraints term by term; below every weight a tie could read)
TINY_WEIGHT = 1e-300


# -- a statement's relaxed problems at an instance's point --------------------------------------------------------
def problem_image(problem: Any, inst: Instance, columns: list[int], slope_top: float
                  ) -> dict[sp.Symbol, float | Fraction] | None:
    """The point of ``problem`` (built with one atom per column that keeps tokens besides the distinguished ones) that
    is the instance ``inst`` (B = 1) with the problem's distinguished tokens on ``columns`` (one per token of its
    pattern), or None when that placement is not one of this problem's (too few tokens on a column, another number
    of other columns). ``slope_top``: what the slopes are divided by (:func:`slope_scale`'s scale)."""
    info = problem.realisation
    L_lo, L_hi = info["L_range"]
    if not L_lo <= inst.L <= L_hi:  # a problem of another range of L (an end length of its own, say)
        return None
    counts = inst.counts[0] if inst.counts is not None else np.ones(inst.K, dtype=np.int64)
    rest = counts.astype(np.int64).copy()
    for c in columns:
        rest[c] -= 1
    if np.any(rest < 0) or len(columns) != len(info["role_coordinates"]):
        return None
    others = [c for c in range(inst.K) if rest[c] > 0]
    if len(others) != len(info["atom_coordinates"]):
        return None
    values: dict[sp.Symbol, float | Fraction] = {}
    k, L = len(columns), inst.L
    for coord in problem.coordinates:
        if coord.kind == "length":
            values[coord.symbol] = 1.0 / L
        elif coord.kind == "parameter":
            name = str(coord.symbol)
            name, g = problem.parameter_of(coord.symbol)
            values[coord.symbol] = (float(inst.param("a")[0]) / float(inst.param("T")[0]) if name == "beta"
                                    else float(inst.param(name)[0]) / float(g))
    assert inst.logits is not None
    logits, alpha = inst.logits[0], inst.alpha[0]
    if info["weights_model"]:  # the shares in exact rationals of the weights over their exact total, so that a
        # share that takes all that is left (the last distinguished token of an instance with no others) is 1 exactly
        exact = [Fraction(float(x)) for x in alpha]
        total = sum((int(m) * x for m, x in zip(counts, exact)), Fraction(0))
        exact = [x / total for x in exact] if total > 0 else exact
        left_q = Fraction(1)
        for sym, c in zip(info["role_coordinates"], columns):  # (kept exact: a share next to 1 rounds to 1)
            values[sym] = exact[c] / left_q if left_q > 0 else 0.0
            left_q -= exact[c]
        masses = [rest[c] * exact[c] / left_q for c in others] if left_q > 0 else [0.0] * len(others)
        for sym, c in zip(info["atom_coordinates"], others):
            values[sym] = exact[c] / left_q if left_q > 0 else 0.0
    elif info.get("reference") is not None:  # log F values over the reference token's (LogFValues)
        n = log_F_map(inst.normaliser)
        if n is not None:
            lam = n.log_F_values(inst.logits, inst.L)[0]
        elif inst.normaliser is not None and inst.normaliser.reaches_simplex:  # the simplex: the weights are F, a
            lam = np.log(np.maximum(alpha, TINY_WEIGHT))  # weight 0 (D = -oo, the closure) at a finite D below it
        else:
            return None
        kind, where = info["reference"]
        if n is None and (info["points"] or kind == "point"):  # F's extremes: none without a log F
            return None
        extremes = n.log_F_range(inst.param("a")) if n is not None and (info["points"] or kind == "point") \
            else (np.zeros(1), np.zeros(1))  # read only at points
        ref = (float(lam[columns[where]]) if kind == "role" else float(lam[others[where]]) if kind == "atom"
               else float(extremes[0][0]))
        for sym, c in zip(info["role_coordinates"], columns):
            values[sym] = float(lam[c]) - ref
        for sym, c in zip(info["atom_coordinates"], others):
            values[sym] = float(lam[c]) - ref
        for sym, which in info["points"]:
            if which is None:  # a point that is neither extreme of log F: where it lies is not computed here
                return None
            values[sym] = float(extremes[1 if which == "max" else 0][0]) - ref
        if info.get("bracket"):  # every token between the smallest and the largest: D = Delta sigma
            kind, where = info["bracket"]["top"]
            top = (values[info["role_coordinates"][where]] if kind == "role" else
                   float(extremes[1][0]) - ref)
            for d, sigma in info["bracket"]["sigma"].items():
                if d in values:
                    values[sigma] = values[d] / top if top > 0 else 0.0
        masses = [rest[c] / (L - k) for c in others] if L > k else [0.0] * len(others)
    elif info.get("points"):  # the extremes of F on [-a, a] over logits: where F attains them is not computed here
        return None
    else:
        scale = float(sp.N(sp.sympify(info["scale"]).xreplace({s_: v for s_, v in values.items()}
                                                               | {sp.Symbol("T", positive=True): float(inst.param("T")[0])})))

        def coordinate(c: int) -> float:
            if info["bounded"]:
                a = float(inst.param("a")[0])
                return float(logits[c]) / a if a > 0 else 0.0
            z = float(logits[c]) / scale
            return float(1.0 / (1.0 + np.exp(-z))) if z >= 0 else float(np.exp(z) / (1.0 + np.exp(z)))

        for sym, c in zip(info["role_coordinates"], columns):
            values[sym] = coordinate(c)
        for sym, c in zip(info["atom_coordinates"], others):
            values[sym] = coordinate(c)
        masses = [rest[c] / (L - k) for c in others] if L > k else [0.0] * len(others)
    if info.get("slopes") is not None:  # every F with free slopes: g = (log F)', over max |g| where scaled
        n = log_F_map(inst.normaliser)
        if n is None:
            return None
        g = n.dlog_F_values(inst.logits, inst.L)[0]
        role_slopes, atom_slopes, _ = info["slopes"]
        for sym, c in [*zip(role_slopes, columns), *zip(atom_slopes, others)]:
            values[sym] = float(g[c]) / slope_top
    left: Any = Fraction(1) if all(isinstance(m, Fraction) for m in masses) else 1.0
    for w, m in zip(info["sticks"], masses):
        values[w] = m / left if left > 0 else 0.0
        left -= m
    return values


def slope_scale(problem: Any, inst: Instance) -> tuple[float, float]:
    """Where a problem's slopes are scaled to ``max |g| <= 1`` (every F, a margin homogeneous of degree ``k`` in them,
    :func:`~attnbounds.theory.deciding.prover.relax._slope_scale`): the instance's ``max |g|`` (1 where every slope is
    0) and ``k``, so that the point's margin times ``max |g|^k`` is the instance's; else ``(1.0, 0)``."""
    slopes = problem.realisation.get("slopes")
    n = log_F_map(inst.normaliser)
    if slopes is None or slopes[2] is None or n is None or inst.logits is None:
        return 1.0, 0.0
    counts = inst.counts[0] if inst.counts is not None else np.ones(inst.K, dtype=np.int64)
    top = float(np.max(np.abs(n.dlog_F_values(inst.logits, inst.L)[0][counts > 0])))
    return (top, float(slopes[2])) if top > 0 else (1.0, 0.0)


def _satisfied(constraint: sp.Expr, subs: dict[sp.Symbol, sp.Float]) -> bool:
    """``constraint >= 0`` at the point, evaluated at 90 digits from exact doubles: a tie is 0 to about 1e-80 of the
    size of its terms, a violation is not (relative: features as small as 1e-35 have squares of 1e-70)."""
    terms = sp.Add.make_args(sp.expand(constraint)) if constraint.is_Add else (constraint,)
    values = [sp.re(sp.N(term.xreplace(subs), DIGITS)) for term in terms]
    return bool(sum(values) >= -sp.Float("1e-60", DIGITS) * max(sum(abs(v) for v in values), sp.Float("1e-300")))


class Placement(NamedTuple):
    """One relaxed problem's margin at one placement of its distinguished tokens on an instance's columns."""

    value: float
    ok: bool  # the placement satisfies the problem's constraints
    exact: bool  # the problem's margin is the instance's (else at most it)
    key: tuple[int, int, int, int]  # (conjunct, strategy, group, alternative) in the relaxation


def relaxed_margins(statement: Any, inst: Instance) -> list[Placement]:
    """Every relaxed problem's margin at every placement of its distinguished tokens on the instance's columns: the
    cross-check of forms of :func:`attnbounds.theory.deciding.prover.relax.relax` as a whole. The smallest satisfying margin of the
    exact problems is the instance's; a strategy that bounds it (a maximum read at another token, F's extremes over
    the tokens) is sound when one of its groups has, in every alternative, a satisfying margin at most the
    instance's. One instance (B = 1)."""
    if inst.B != 1:
        raise InvalidArgument(f"relaxed_margins needs one instance (B = 1), got B = {inst.B}")
    counts = inst.counts[0] if inst.counts is not None else np.ones(inst.K, dtype=np.int64)
    out: list[Placement] = []
    for n_atoms in range(0, inst.K + 1):
        for key, problem in _relaxed(statement, n_atoms):
            k = len(problem.realisation["role_coordinates"])
            top, degree = slope_scale(problem, inst)
            for columns in itertools.product(range(inst.K), repeat=k):
                point = problem_image(problem, inst, list(columns), top)
                if point is None or any(counts[c] == 0 for c in columns):
                    continue
                for sym in problem.margin.free_symbols - set(point):  # a parameter divided out of the core
                    name, g = problem.parameter_of(sym)
                    point[sym] = float(inst.param(name)[0]) / float(g)
                subs = {s_: sp.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else sp.Float(v, DIGITS)
                        for s_, v in point.items()}
                value = float(sp.re(sp.N(problem.margin.xreplace(subs), DIGITS))) * top**degree
                ok = all(_satisfied(con, subs) for con in problem.constraints)
                out.append(Placement(value, ok, problem.exact, key))
    return out


_RELAXED: dict[tuple[Any, ...], list[tuple[tuple[int, int, int, int], Any]]] = {}


def _relaxed(statement: Any, atoms: int) -> list[tuple[tuple[int, int, int, int], Any]]:
    """The statement's relaxed problems with ``atoms`` atoms, each with its place in the relaxation (kept: building
    them is sympy's work)."""
    from attnbounds.theory.deciding.prover.relax import relax

    key = (statement.id, sp.srepr(statement.relation), tuple((h.id, h.description) for h in statement.hypotheses),
           repr(sorted(statement.fixed.items())), repr(sorted(statement.ranges.items())),  # (one id may name several
           repr(sorted(statement.defaults.items())), atoms)  # statements)
    if key not in _RELAXED:
        _RELAXED[key] = [((c, s_, g, a), problem)
                         for c, per in enumerate(relax(statement, atoms=atoms).strategies)
                         for s_, strategy in enumerate(per) for g, group in enumerate(strategy)
                         for a, problem in enumerate(group.alternatives)]
    return _RELAXED[key]
