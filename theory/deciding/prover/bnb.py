"""Interval branch and bound over a relaxed problem: every box of the relaxed space closed, or a negative one.

For one :class:`~attnbounds.theory.deciding.prover.problem.Problem` (prove ``core >= 0``, ``> 0`` when strict, on a box
where constraints ``c >= 0`` may hold) boxes are processed in batches:

1. the float tier (:func:`~attnbounds.theory.deciding.prover.program.run_float`) encloses the core, its partial
   derivatives and the constraints on every box of the batch (fast, and only a filter);
2. a box whose constraint is certainly negative holds no point of the space: *infeasible*;
3. a box whose core is certainly ``>= 0``: *closed* (natural enclosure); or, for a non-strict bound, a box of
   the root face where the core is ``q * c`` for a constraint ``c`` (exact algebra: the quotient cancels) and
   ``q >= 0``: *closed by the constraint* (``core >= 0`` wherever ``c >= 0``; an equality along the constraint's
   boundary, ``alpha_max >= 1/L`` at equal weights, closes no other way);
3b. a box whose points the constraints read as they are (no range kept from before a split of the ends, 4b) closes
   by a *multiplier*: ``r = core - lam * c_k`` with a rational ``lam >= 0`` chosen from the slopes at its centre
   (then ``core >= r`` at every point where ``c_k >= 0``), when ``r``'s mean-value bound is ``>= 0`` (``> 0`` when
   strict), or, for a strict bound on a box that reaches the limit t = 0, when ``r`` strictly grows in t there and
   its mean-value bound on the face t = 0 is ``>= 0`` (every real point, t > 0, then has ``r > 0``):
   ``alpha_max > 1/(2L)``, a strict bound approached only as L grows and only along ``alpha_max = 1/L``;
4. a box on which the core is monotone in some coordinates is *projected* onto the face where it is smallest
   (``core(x) >= core(face point)``); constraints keep reading the coordinate's range before the projection, so
   that nothing is discarded that a feasible point projects onto;
4b. a box on which the core is concave in a coordinate (affine in it, or its second derivative's rigorous enclosure
   ``<= 0``) is replaced by that coordinate's two ends, where its least value lies (``w E_1 + (1 - w) E_2``: a
   mixture's weight; the constraints keep reading the whole range);
5. else the mean-value form ``core(c) + grad(box) . (box - c)`` may close it;
6. a box reduced to a point is decided exactly there: arb at rising precision, sympy for an exact zero (an
   equality case: a non-strict bound holds there, a strict one fails);
6b. a narrow box holding a rational point ``p``, or beside one (within its own width: the splits may leave an
   equality point on a neighbour's side), where the core is exactly ``>= 0`` and no partial derivative points into
   the box spanned by both (an equality at a critical point: ``1/4 - a (1 - a)`` at ``a = 1/2`` in two coordinates)
   is closed by Taylor's theorem to second order on that span, ``core(x) >= core(p) + |x - p|^T M |x - p| / 2`` with
   ``M`` from the rigorous enclosure of the Hessian on it (``M_ii`` its lower ends, ``M_ij = -max |H_ij|``), when
   ``M`` is positive semidefinite (exact LDL^T over the rationals);
7. else it is split in two (the coordinate of largest width times derivative; unbounded coordinates first,
   geometrically).

Every claim of steps 2-6 is re-checked in rigorous interval arithmetic (arb balls, or ``mpmath.iv`` endpoint
intervals where a box is wide or unbounded) before it counts; a claim that does not survive sends the box to
step 7. A box whose core is certainly negative on a feasible box is a *candidate counterexample* (the caller
realises it as an instance and certifies it). The work is counted in operations (float: 1 per operation and
box, arb: 25, iv: 150), so the same problem explores the same boxes on every machine.

The boxes form a tree, recorded in preorder (:meth:`Tree.encode`): a certificate that :func:`replay` re-checks
from the record alone. The outcome is "proved" only when every leaf of the tree is a closed box (:data:`LEAVES`).
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import math
import zlib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.exact import sign_of
from attnbounds.theory.mathematics.exprparse import DOUBLE_MAX
from attnbounds.theory.mathematics.intervals import Unsupported, backend
from attnbounds.theory.mathematics.opaque import OAbs, OMax, OMin, Sign, Step, transparent
from attnbounds.theory.mathematics.symbolic import differentiate
from attnbounds.theory.deciding.prover.program import Program, compile_program, rigorous_signs, run_float, run_rigorous

if TYPE_CHECKING:
    from attnbounds.theory.deciding.prover.problem import Problem

INF = math.inf
#: boxes evaluated together by the float tier
BATCH = 256
#: relative work of one operation in each arithmetic, in units of one float operation on one box of a large batch
#: (measured on this 2-core machine under load: 40 ns; arb 0.5 us, mpmath.iv 6.4 us per operation), and the
#: float tier's overhead per operation and call (numpy on a small batch: 26 us)
COST = {"float": 1, "arb": 12, "mpmath.iv": 160}
FLOAT_CALL = 650
#: a box narrower than this (relative to its coordinate's scale) in every coordinate is not split further
MIN_WIDTH = 1e-13
#: precisions (bits) at which such a box's core is tried for a certain negative sign: a box's enclosure is as wide as
#: the box, which more bits than these do not narrow (a point's sign goes to :func:`sign_of`, up to 65536 bits)
BOX_PRECISIONS = (128, 512, 2048, 4096)
#: nodes the tree may hold (memory guard)
MAX_NODES = 400_000


@dataclass
class Node:
    """A box: ``lo``/``hi`` what the core is evaluated on, ``clo``/``chi`` what the constraints read (a projected
    coordinate keeps its range from before the projection)."""

    lo: np.ndarray
    hi: np.ndarray
    clo: np.ndarray
    chi: np.ndarray
    kind: str = "open"  # split / project / closed / constraint / multiplier / infeasible / point / negative / open / stuck
    detail: Any = None
    children: list["Node"] = field(default_factory=list)
    bound: float = -INF  # the core's certified lower bound on the box, for closed ones
    face: tuple[tuple[int, float], ...] = ()
    #: the float lower bound of the core on the parent box: boxes are taken lowest first (best first)
    priority: float = -INF
    #: on an open end (t = 0, a weight 0, T = 0: :meth:`Problem.open_end`, no instance there), reached by a projection
    #: along which the core strictly grows: every instance the box stands for then has a larger margin, so a strict
    #: bound needs only ``core >= 0`` here
    at_limit: bool = False


#: the largest expression (nodes) and the most symbols sympy is asked to factor on a face (factoring is
#: exponential in the symbols; a larger expression keeps the form it was built in)
MAX_FACTOR = 600
MAX_FACTOR_SYMBOLS = 5
#: work charged for building a face (sympy's substitution, factoring and differentiation), per node of the core
FACE_WORK = 2_000


def _rational_view(expr: sp.Expr, atoms: dict[sp.Basic, sp.Dummy]) -> sp.Expr:
    """``expr`` as a rational function: exponentials combined, and every maximal subexpression that is not a sum,
    product or integer power (a root, an opaque function, an exponential with large coefficients) one symbol of
    ``atoms`` (shared between the expressions viewed with the same dictionary)."""
    def atom(node: sp.Basic) -> sp.Basic:
        if node.is_Atom or isinstance(node, (sp.Add, sp.Mul)) or (isinstance(node, sp.Pow) and node.exp.is_Integer):
            return node.func(*[atom(a) for a in node.args]) if node.args else node
        if isinstance(node, sp.exp) and _small_exponent(node.args[0]):  # sympy factors in powers of exp(x)
            return node
        if node not in atoms:
            atoms[node] = sp.Dummy(f"q{len(atoms)}")
        return atoms[node]

    return atom(sp.powsimp(expr, combine="exp"))


def _forms(expr: sp.Expr, keep_denominator: bool = True) -> list[sp.Expr]:
    """Equal forms of one expression whose natural enclosures differ: as built, and factored over a common
    denominator (an even power or a square then shows its sign: ``1/4 - a (1 - a) = (2 a - 1)^2 / 4``).

    Factoring sees the expression as a rational function (:func:`_rational_view`); it is skipped when the expanded
    numerator or denominator would have more than :data:`MAX_TERMS` terms (sympy's dense polynomials), and a
    factored form is kept only when :func:`_equal` shows it equal."""
    out = [expr]
    if _size(expr) > MAX_FACTOR or not 0 < len(expr.free_symbols) <= MAX_FACTOR_SYMBOLS or expr.atoms(sp.Float):
        return out  # (a float coefficient would make sympy factor approximately: never)
    try:
        atoms: dict[sp.Basic, sp.Dummy] = {}
        num, den = sp.fraction(sp.together(_rational_view(expr, atoms)))
        if _terms(num) > MAX_TERMS or _terms(den) > MAX_TERMS or _dense(num) > MAX_DENSE or _dense(den) > MAX_DENSE:
            return out
        back = {d: n for n, d in atoms.items()}
        top, bottom = sp.factor(num), sp.factor(den)
        factored = (top / bottom).xreplace(back)
        # (with ``keep_denominator``) the numerator factored over the denominator as built (a product of the forms'
        # own denominators): sympy expands an irreducible denominator, t + (1 - t) (1 + log(1/t))^2 say, into terms
        # that cancel where they grow without bound (t -> 0), and the enclosure of the expansion is the whole line
        kept = (top / den).xreplace(back) if keep_denominator and bottom != den else None
    except (sp.PolynomialError, ValueError, TypeError, RecursionError, MemoryError):  # pragma: no cover - sympy's limits
        return out
    small = 4 * max(_size(expr), 1)
    if factored != expr and _size(factored) <= small and _equal(factored, expr):
        out.append(factored)
        # the same numerator over a denominator equal to the factored one (their difference expands to 0)
        if kept is not None and _size(kept) <= small and all(kept != f for f in out) \
                and _terms(bottom) <= MAX_TERMS and _terms(den) <= MAX_TERMS and sp.expand(bottom - den) == 0:
            out.append(kept)
    elif kept is not None and kept != expr and _size(kept) <= small and _equal(kept, expr):
        out.append(kept)
    return out


def _equal(a: sp.Expr, b: sp.Expr) -> bool:
    """Whether two forms are the same function, by exact algebra: viewed as rational functions of the same atoms
    (:func:`_rational_view`), ``num_a den_b - num_b den_a`` expands to 0; what the certificate's replay re-checks
    (:func:`check_faces`)."""
    try:
        atoms: dict[sp.Basic, sp.Dummy] = {}
        na, da = sp.fraction(sp.together(_rational_view(a, atoms)))
        nb, db = sp.fraction(sp.together(_rational_view(b, atoms)))
        return sp.expand(na * db - nb * da) == 0
    except (sp.PolynomialError, ValueError, TypeError, RecursionError, MemoryError):  # sympy's algebra failed
        return False


#: the most terms an expanded numerator or denominator may have to be factored
MAX_TERMS = 400


def _small_exponent(arg: sp.Expr) -> bool:
    """Whether ``exp(arg)`` may stay an exponential for sympy's factoring: its argument's numeric coefficients are
    small integers (sympy writes exp(2 x) as the square of exp(x): dense in that degree)."""
    coeffs = [t.as_coeff_Mul()[0] for t in sp.Add.make_args(sp.expand(arg))]  # sympy splits exp(a (x + y)) too
    return all(c.is_Integer and abs(int(c)) <= 4 for c in coeffs)


#: the largest dense representation (the product over generators of their degree plus one) sympy may build
MAX_DENSE = 20_000


def _dense(expr: sp.Expr) -> int:
    """The size of sympy's dense polynomial of ``expr``: the product over its generators (symbols and the other
    atoms) of the degree plus one, degrees bounded by a cheap walk (sums: the largest, products: the sum)."""
    def degrees(e: sp.Basic) -> dict[sp.Basic, int]:
        if isinstance(e, sp.Add):
            out: dict[sp.Basic, int] = {}
            for a in e.args:
                for g, d in degrees(a).items():
                    out[g] = max(out.get(g, 0), d)
            return out
        if isinstance(e, sp.Mul):
            out = {}
            for a in e.args:
                for g, d in degrees(a).items():
                    out[g] = out.get(g, 0) + d
            return out
        if isinstance(e, sp.Pow) and e.exp.is_Integer and int(e.exp) > 0:
            return {g: d * int(e.exp) for g, d in degrees(e.base).items()}
        if isinstance(e, sp.Pow) and isinstance(e.base, sp.exp) is False and e.exp.is_Integer:
            return {e: 1}
        if e.is_Number:
            return {}
        if isinstance(e, sp.exp):  # sympy writes exp(n x) as a power of exp(x): degree about n per term
            terms = sp.Add.make_args(sp.expand(e.args[0]))
            return {sp.exp(t.as_coeff_Mul()[1]): abs(int(t.as_coeff_Mul()[0])) if t.as_coeff_Mul()[0].is_Integer
                    else MAX_DENSE for t in terms}
        return {e: 1}

    size = 1
    for d in degrees(expr).values():
        size *= d + 1
        if size > MAX_DENSE:
            return size
    return size


def _terms(expr: sp.Expr) -> int:
    """An upper bound on the terms of ``expr`` expanded (sums add, products multiply, integer powers are
    multinomials), capped just above :data:`MAX_TERMS`: a cheap walk, before sympy expands anything."""
    cap = MAX_TERMS + 1
    if isinstance(expr, sp.Add):
        return min(cap, sum(_terms(a) for a in expr.args))
    if isinstance(expr, sp.Mul):
        out = 1
        for a in expr.args:
            out = min(cap, out * _terms(a))
        return out
    if isinstance(expr, sp.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
        n, k = int(expr.exp), _terms(expr.base)
        return min(cap, math.comb(k + n - 1, n)) if k < cap else cap
    return 1


def _size(expr: sp.Expr) -> int:
    return sum(1 for _ in sp.preorder_traversal(expr))


@dataclass
class Face:
    """The core on a face of the root box (some coordinates fixed at an end of their range, substituted exactly and
    simplified): its forms and their programs. Each partial derivative has two forms too (as differentiated, and
    factored): its enclosure is the intersection of theirs, so that a sign visible in the factored form (a product of
    factors of known sign) is seen on every box."""

    fixed: tuple[tuple[int, float], ...]
    forms: list[sp.Expr]
    enclose: Program  # every form, then both forms of each partial derivative
    form_programs: list[Program]
    grad: Program  # both forms of each partial derivative
    n: int
    partials: list[sp.Expr] = field(default_factory=list)  # of the first form, as differentiated
    #: the program of the first form's second derivatives (i <= j, row by row), built when a box first asks for it;
    #: None when they are too large
    _hessian: Program | None = None
    _hessian_built: bool = False
    #: rational points where the second-order closure held (tried first on the face's next boxes)
    critical: list[tuple[Fraction, ...]] = field(default_factory=list)
    _affine: dict[int, bool] = field(default_factory=dict)
    #: the program of the first form's second derivative in each coordinate (False: none, a kink or too large)
    _curvature: Program | bool | None = None
    #: per sorted tuple of coordinates, the program of every form's partial derivative along them (None: a kink or
    #: too large)
    _derivatives: dict[tuple[int, ...], Program | None] = field(default_factory=dict)

    def reads(self, syms: Sequence[sp.Symbol]) -> np.ndarray:
        """Which coordinates the first form reads."""
        free = self.forms[0].free_symbols
        return np.array([x in free for x in syms], dtype=bool)

    def affine(self, d: int, syms: Sequence[sp.Symbol]) -> bool:
        """Whether the first form is affine in coordinate ``d`` (its second derivative there is identically 0, as
        sympy writes it: ``w X + (1 - w) Y``) and reads it: its least value on a box is then at one of ``d``'s ends."""
        if d not in self._affine:
            self._affine[d] = syms[d] in self.forms[0].free_symbols and differentiate(self.partials[d], syms[d]) == 0
        return self._affine[d]

    def concave(self, syms: Sequence[sp.Symbol], lo: np.ndarray, hi: np.ndarray, work: list[int]) -> list[bool]:
        """Per coordinate, whether the first form is concave in it on the box: affine in it, or (a smooth form on a
        bounded box) the rigorous enclosure of its second derivative there is ``<= 0``. Its least value on the box is
        then at one of that coordinate's ends (a concave function lies above its chord)."""
        out = [self.affine(d, syms) for d in range(self.n)]
        if all(out) or not _bounded(lo, hi):
            return out
        if self._curvature is None:
            self._curvature = self._second_derivatives([(k, k) for k in range(self.n)], syms) or False
        if not isinstance(self._curvature, Program):
            return out
        free = self.forms[0].free_symbols
        wanted = [d for d, a in enumerate(out) if not a and syms[d] in free and hi[d] > lo[d]]
        if not wanted:
            return out
        # arb's balls put a rounding's worth above 0 where the value touches it ((y0 - y1)^2 times -8): endpoint
        # intervals next, when the balls show no concave coordinate and some upper end is within such a rounding
        second = _rigorous(self._curvature, lo, hi, work, lambda r_: any(r_[d][1] <= 0 for d in wanted) or all(
            r_[d][1] > CONCAVE_SLACK * max(abs(r_[d][0]), 1.0) for d in wanted))
        return [a or (d in wanted and second[d][1] <= 0) for d, a in enumerate(out)]

    def derivative(self, seq: tuple[int, ...], syms: Sequence[sp.Symbol], work: list[int]) -> Program | None:
        """The program of every form's partial derivative along the coordinates ``seq`` (sorted: mixed partials of a
        smooth function commute), as differentiated and factored (one function: the tightest of their enclosures
        holds; a form may be singular where another is not), or None across a kink or beyond :data:`MAX_HESSIAN`
        nodes; built once."""
        if seq not in self._derivatives:
            self._derivatives[seq] = None
            if not any(f.atoms(*KINKS) for f in self.forms):
                work[0] += FACE_WORK * sum(map(_size, self.forms)) * len(seq)
                raw = list(self.forms)
                for d in seq:
                    raw = [differentiate(r, syms[d]) for r in raw]
                entries = [g for r in raw for g in (_forms(r, keep_denominator=False) if r != 0 else [r])]
                if sum(map(_size, entries)) <= MAX_HESSIAN:
                    try:
                        self._derivatives[seq] = compile_program(entries, syms)
                    except Unsupported:
                        pass
        return self._derivatives[seq]

    def hessian(self, syms: Sequence[sp.Symbol], work: list[int]) -> Program | None:
        if not self._hessian_built:
            self._hessian_built = True
            if not self.forms[0].atoms(*KINKS) and _size(self.forms[0]) <= MAX_FACTOR:
                work[0] += FACE_WORK * self.n * _size(self.forms[0])
                self._hessian = self._second_derivatives([(i, j) for i in range(self.n) for j in range(i, self.n)],
                                                         syms)
        return self._hessian

    def _second_derivatives(self, pairs: Sequence[tuple[int, int]], syms: Sequence[sp.Symbol]) -> Program | None:
        """The program of the first form's second derivatives ``d^2 / dx_i dx_j`` for ``pairs``, or None: across a
        kink (|x|, max, min, a step), whose second derivative the chain rule would read as 0 (Taylor's theorem and a
        concavity need a core twice differentiable on the box), or beyond :data:`MAX_HESSIAN` nodes."""
        if self.forms[0].atoms(*KINKS):
            return None
        entries = [differentiate(self.partials[i], syms[j]) for i, j in pairs]
        if sum(map(_size, entries)) > MAX_HESSIAN:
            return None
        try:
            return compile_program(entries, syms)
        except Unsupported:
            return None

    @classmethod
    def build(cls, problem: Problem, fixed: tuple[tuple[int, float], ...], forms: list[sp.Expr] | None = None) -> "Face":
        syms = problem.symbols
        if forms is None:
            base = problem.core.xreplace({syms[d]: sp.Rational(Fraction(v)) for d, v in fixed})
            forms = _forms(base)
        raw = [differentiate(forms[0], x) for x in syms]
        alt = [(_forms(g, keep_denominator=False) + [g])[1] if g != 0 else g for g in raw]
        grads = [*raw, *alt]
        return cls(fixed, forms, compile_program([*forms, *grads], syms), [compile_program([f], syms) for f in forms],
                   compile_program(grads, syms), len(syms), raw)

    def gradient(self, values: Sequence[tuple[Any, Any]]) -> tuple[np.ndarray, np.ndarray]:
        """The partial derivatives' enclosures from the two forms' (``values`` as returned by the grad program)."""
        lo = np.array([max(values[d][0], values[self.n + d][0]) for d in range(self.n)], dtype=np.float64)
        hi = np.array([min(values[d][1], values[self.n + d][1]) for d in range(self.n)], dtype=np.float64)
        return lo, hi


def _may_divide(core: sp.Expr, con: sp.Expr, digits: int = 30) -> bool:
    """False only where ``core`` is certainly no multiple of ``con``: a multiple of it is 0 wherever ``con`` is, and at
    a seeded point of the other symbols, with one symbol ``x`` moved to a zero of ``con`` (exact where ``con`` is
    affine in it, else found numerically), the core is not 0 (far from it, numerically). Spares sympy's ``cancel``
    (seconds on a core of many exponentials and logarithms) a quotient that cannot be simple; True where the test
    says nothing (the quotient is then tried, as before)."""
    import random

    for x in sorted(con.free_symbols, key=str):
        rng = random.Random(0)
        point = {s_: sp.Float(rng.uniform(0.1, 0.9), digits) for s_ in sorted(core.free_symbols | con.free_symbols,
                                                                           key=str) if s_ != x}
        b = differentiate(con, x)
        try:
            if b != 0 and not b.has(x):
                x0 = sp.N(sp.cancel(x - con / b).xreplace(point), digits)
            else:
                x0 = sp.nsolve(transparent(con.xreplace(point)), x, sp.Float(0.5, digits), prec=digits)
            value = complex(sp.N(core.xreplace({**point, x: x0}), digits))
            scale = complex(sp.N(core.xreplace({**point, x: sp.Float(rng.uniform(0.1, 0.9), digits)}), digits))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError, ArithmeticError):
            continue
        if not (math.isfinite(abs(value)) and math.isfinite(abs(scale)) and complex(x0).imag == 0):
            continue
        return abs(value) <= 1e-20 * max(abs(scale), 1.0)
    return True


class Programs:
    """The compiled pieces of one problem: its faces (built as they are reached) and its constraints."""

    def __init__(self, problem: Problem, faces: dict[tuple[tuple[int, float], ...], list[sp.Expr]] | None = None):
        self.problem = problem
        self.constraints = compile_program(problem.constraints, problem.symbols) if problem.constraints else None
        #: (constraint, coordinate) pairs where the constraint reads the coordinate, and the program of their partial
        #: derivatives (a projection toward the side where such a constraint grows keeps every point feasible)
        self.pairs = [(k, d) for k, c in enumerate(problem.constraints) for d, x in enumerate(problem.symbols)
                      if x in c.free_symbols]
        self.constraint_grad = compile_program([differentiate(problem.constraints[k], problem.symbols[d]) for k, d in self.pairs],
                                               problem.symbols) if self.pairs else None
        self._given = dict(faces or {})
        self._quotients: dict[int, Program | None] = {}
        self._derivatives: dict[tuple[int, tuple[int, ...]], Program] = {}
        self.faces: dict[tuple[tuple[int, float], ...], Face] = {}
        lo, hi = _box(problem)
        self.ends = [(float(a), float(b)) for a, b in zip(lo, hi)]

    @classmethod
    def build(cls, problem: Problem) -> "Programs":
        return cls(problem)

    def quotient(self, k: int, work: list[int] | None = None) -> Program | None:
        """The program of ``core / constraint k`` when the quotient cancels to an expression no larger than the core
        (the core is then that multiple of the constraint), else None; built once."""
        if k not in self._quotients:
            core, con = self.problem.core, self.problem.constraints[k]
            q = None
            if max(_size(core), _size(con)) <= MAX_FACTOR and con != 0 and _may_divide(core, con):
                if work is not None:
                    work[0] += FACE_WORK * (_size(core) + _size(con))
                q = sp.cancel(sp.together(core / con))
                q = q if _size(q) <= _size(core) and not q.has(sp.zoo, sp.nan, sp.oo, -sp.oo) else None
            self._quotients[k] = compile_program([q], self.problem.symbols) if q is not None else None
        return self._quotients[k]

    def constraint_derivative(self, k: int, seq: tuple[int, ...]) -> Program:
        """The program of constraint ``k``'s partial derivative along the coordinates ``seq``; built once."""
        if (k, seq) not in self._derivatives:
            con = self.problem.constraints[k]
            for d in seq:
                con = differentiate(con, self.problem.symbols[d])
            self._derivatives[(k, seq)] = compile_program([con], self.problem.symbols)
        return self._derivatives[(k, seq)]

    def face(self, fixed: tuple[tuple[int, float], ...], work: list[int] | None = None) -> Face:
        if fixed not in self.faces:
            self.faces[fixed] = Face.build(self.problem, fixed, self._given.get(fixed))
            if work is not None:
                work[0] += FACE_WORK * _size(self.faces[fixed].forms[0])
        return self.faces[fixed]

    def child_face(self, fixed: tuple[tuple[int, float], ...], moves: list[tuple[int, float]]) -> tuple[tuple[int, float], ...]:
        """The face after fixing coordinates at values: those at an end of the root box join the face, unless the core
        is singular there (``1/T`` at ``T = 0``: the coordinate is then pinned numerically, in the parent's face)."""
        keep = dict(fixed)
        for d, v in moves:
            if v in self.ends[d] and math.isfinite(v):
                trial = tuple(sorted({**keep, d: v}.items()))
                base = self.problem.core.xreplace({self.problem.symbols[j]: sp.Rational(Fraction(x)) for j, x in trial})
                if not base.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
                    keep[d] = v
        return tuple(sorted(keep.items()))


@dataclass
class Outcome:
    """What the branch and bound concluded on one problem."""

    status: str  # "proved", "negative" (a candidate box), "open" (work or boxes ran out), "stuck"
    tree: "Tree"
    work: int
    boxes: int
    closed: dict[str, int]
    negative: Node | None = None
    tightest: tuple[float, list[float], list[float]] | None = None  # (bound, lo, hi) of the closest closed box
    reason: str = ""
    #: when the work ran out: the boxes left, and the one whose parent's float lower bound of the core is lowest
    unexplored: tuple[int, float, list[float], list[float]] | None = None


class Tree:
    """The boxes explored, in preorder (the certificate)."""

    def __init__(self, root: Node, names: Sequence[str]):
        self.root = root
        self.names = list(names)

    def walk(self) -> Iterator[Node]:
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def encode(self) -> str:
        """Preorder tokens: ``S<d>:<point>`` split, ``P<d><+|-|<|>>...`` projection (``-``: onto the lower end; ``<``,
        ``>``: onto an open lower or upper end away from which the core strictly grows, :attr:`Node.at_limit`),
        ``C<method>`` closed, ``I<k>`` infeasible by constraint k, ``M<k>`` closed as a multiple of constraint k,
        ``L<k>:<p>/<q>`` closed by constraint k with the multiplier p/q (:func:`_by_multiplier`),
        ``E`` exact point, ``T<p_1>,...`` closed to second order around the rational point p, ``A<d>`` the two ends
        of coordinate d (the core concave in it on the box); zlib + base64."""
        out = []
        for node in self.walk():
            if node.kind == "split":
                d, point = node.detail
                out.append(f"S{d}:{float(point).hex()}")
            elif node.kind == "project":
                out.append("P" + ",".join(f"{d}{_SIDE_TEXT[side]}" for d, side in node.detail))
            elif node.kind == "closed":
                out.append("C" + str(node.detail))
            elif node.kind == "infeasible":
                out.append(f"I{node.detail}")
            elif node.kind == "constraint":
                out.append(f"M{node.detail}")
            elif node.kind == "multiplier":
                k, lam = node.detail
                out.append(f"L{k}:{lam.numerator}/{lam.denominator}")
            elif node.kind == "point":
                out.append("E")
            elif node.kind == "ends":
                out.append(f"A{node.detail}")
            elif node.kind == "taylor":
                out.append("T" + ",".join(f"{v.numerator}/{v.denominator}" for v in node.detail))
            else:
                out.append("O")
        blob = json.dumps(out, separators=(",", ":")).encode()
        return base64.b64encode(zlib.compress(blob, 9)).decode()

    def digest(self) -> str:
        return hashlib.sha256(self.encode().encode()).hexdigest()


def _box(problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([c.lo for c in problem.coordinates], dtype=np.float64)
    hi = np.array([c.hi for c in problem.coordinates], dtype=np.float64)
    return lo, hi


#: the narrowest box [0, h] of t = 1/L split further (L beyond 1e300: no instance is realised there)
TINY_T = 1e-300


def _split_point(lo: float, hi: float, limit: bool = False) -> float:
    """Where to cut ``[lo, hi]``: 0 or a power-of-two step into an unbounded side, the geometric mean of a
    positive range spanning decades, else the midpoint. On t = 1/L (``limit``) a box [0, h] is cut at ``h^2``
    (L at the square of ``1/h``: log log L steps, so that L of 10^13 is a few cuts away, not forty)."""
    if limit and lo == 0.0 and 0.0 < hi <= 0.5 and hi * hi > 0.0:
        return hi * hi
    if lo == -INF and hi == INF:
        return 0.0
    if hi == INF:  # (at most the largest double: 2 lo overflows beyond 9e307)
        return min(max(2.0 * lo, 1.0), DOUBLE_MAX) if lo >= 0 else min(0.0, lo / 2.0)
    if lo == -INF:
        return max(min(2.0 * hi, -1.0), -DOUBLE_MAX) if hi <= 0 else max(0.0, hi / 2.0)
    if lo > 0 and hi > 16 * lo:
        return math.sqrt(lo) * math.sqrt(hi)
    if hi < 0 and lo < 16 * hi:
        return -math.sqrt(-lo) * math.sqrt(-hi)
    return lo / 2.0 + hi / 2.0


def _rigorous(program: Program, lo: np.ndarray, hi: np.ndarray, work: list[int],
              accept: Callable[[list[tuple[float, float]]], bool] | None = None) -> list[tuple[float, float]]:
    """The outputs' enclosures on one box in rigorous arithmetic: arb balls first for a bounded box, then
    ``mpmath.iv`` endpoint intervals (tighter on wide boxes, exact at 0, and unbounded boxes) when ``accept`` does
    not take arb's answer; the intersection of both when both ran."""
    bounded = _bounded(lo, hi)
    out = None
    if bounded:
        work[0] += COST["arb"] * program.size
        out = run_rigorous(program, lo, hi, "arb")
        if accept is None or accept(out):
            return out
    work[0] += COST["mpmath.iv"] * program.size
    other = run_rigorous(program, lo, hi, "mpmath.iv")
    if out is None:
        return other
    return [(max(a[0], b[0]), min(a[1], b[1])) for a, b in zip(out, other)]


#: the sides of a projection onto an open lower (upper) end away from which the core strictly grows
#: (:attr:`Node.at_limit`); -1 and +1 are the plain ones
LIMIT, LIMIT_HIGH = -2, 2
_SIDE_TEXT = {-1: "-", 1: "+", LIMIT: "<", LIMIT_HIGH: ">"}
#: a float enclosure of the core within [-TINY, TINY] may be an underflow: its sign is read in rigorous arithmetic
TINY = 1e-280


def _blind(m_lo: float, m_hi: float) -> bool:
    """Whether the float tier's enclosure of the core shows nothing: the whole line (an overflow), or too close to 0
    to show a sign (an underflow)."""
    return (m_lo == -INF and m_hi == INF) or max(abs(m_lo), abs(m_hi)) <= TINY


def _bounded(lo: np.ndarray, hi: np.ndarray) -> bool:
    return bool(np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)))


def _sign(program: Program, lo: np.ndarray, hi: np.ndarray, work: list[int], bits: int = 128) -> int:
    """The core's certain sign on the box (-1, 1; 0 when unknown) from the rigorous values themselves, however far
    below the doubles: arb balls, then ``mpmath.iv`` endpoints where balls are too wide (only those when unbounded)."""
    for name in ("arb", "mpmath.iv") if _bounded(lo, hi) else ("mpmath.iv",):
        work[0] += COST[name] * program.size * max(bits // 128, 1)
        sign = rigorous_signs(program, lo, hi, name, bits)[0]
        if sign:
            return sign
    return 0


def _negative(program: Program, node: Node, work: list[int], precisions: Sequence[int] = (128,)) -> bool:
    """Whether the core is certainly negative on the box, in rigorous arithmetic at each of ``precisions`` in turn."""
    return any(_sign(program, node.lo, node.hi, work, bits) < 0 for bits in precisions)


def _limit_axis(problem: Problem) -> int | None:
    """The coordinate t = 1/L when its range reaches t = 0 (L -> oo: a limit, no instance), else None."""
    return next((d for d, c in enumerate(problem.coordinates) if c.kind == "length" and c.lo == 0.0), None)


def _grows(face: Face, lo: np.ndarray, hi: np.ndarray, d: int, slope: tuple[float, float], work: list[int],
           side: int) -> bool:
    """Whether the core strictly grows along coordinate ``d`` on the box away from its end ``side`` (-1: grows with
    ``d``, +1: falls with it), from the rigorous enclosure ``slope`` of its partial derivative: that end is positive
    (negative), or rounds to 0 while the rigorous value itself has the sign (a slope below the doubles' range) in
    either of the derivative's two forms."""
    bound = slope[0] if side < 0 else -slope[1]
    if bound > 0:
        return True
    if bound < 0 or not _bounded(lo, hi):
        return False
    work[0] += COST["arb"] * face.grad.size
    signs = rigorous_signs(face.grad, lo, hi, "arb")
    want = 1 if side < 0 else -1
    return signs[d] == want or signs[face.n + d] == want


def _onto_open_ends(problem: Problem, face: Face, node: Node, moves: list[tuple[int, int]],
                    slopes: tuple[np.ndarray, np.ndarray], limit_axis: int | None, work: list[int]
                    ) -> list[tuple[int, int]]:
    """A strict bound's projections: one onto an open end (:meth:`Problem.open_end`) away from which the core
    strictly grows becomes a limit (``LIMIT``, ``LIMIT_HIGH``: the face needs only ``core >= 0``, every instance
    lies off it where the core is larger); one onto t = 0 where the growth does not show yet is dropped while the
    box is wide (it shows on narrower boxes [0, h]: t + (1 - t) E loses its lower end on the whole range)."""
    out = []
    for d, side in moves:
        if problem.open_end(d, side, node.lo, node.hi):
            if _grows(face, node.lo, node.hi, d, (float(slopes[0][d]), float(slopes[1][d])), work, side):
                out.append((d, 2 * side))
                continue
            if d == limit_axis and node.hi[d] > TINY_T:
                continue
        out.append((d, side))
    return out


def _signed(enclosures: list[tuple[float, float]]) -> bool:
    """Whether every enclosure is finite and none straddles 0 (else :func:`_rigorous` asks endpoint intervals too)."""
    return _all_finite(enclosures) and not any(a < 0 < z for a, z in enclosures)


def _all_finite(enclosures: list[tuple[float, float]]) -> bool:
    return all(math.isfinite(a) and math.isfinite(b) for a, b in enclosures)


def _natural(program: Program, lo: np.ndarray, hi: np.ndarray, strict: bool, work: list[int]) -> float | None:
    """The core's certified lower bound on the box when its natural enclosure closes the box (``>= 0``, ``> 0``
    when strict), else None. A lower end that rounds to the double 0 closes a strict box when the rigorous value
    itself is positive (below the doubles' range)."""
    bound = _rigorous(program, lo, hi, work, lambda r_: _ok(r_[0][0], strict))[0][0]
    if _ok(bound, strict):
        return bound
    if strict and bound == 0.0 and _sign(program, lo, hi, work) > 0:
        return bound
    return None


def _ok(bound: float, strict: bool) -> bool:
    return bound > 0 if strict else bound >= 0


def _by_constraint(P: Programs, lo: np.ndarray, hi: np.ndarray, ks: Sequence[int], work: list[int]) -> int | None:
    """A constraint ``k`` among ``ks`` with ``core = q * c_k`` and ``q >= 0`` certified on the box (then ``core >= 0``
    at each of its points where ``c_k >= 0``), else None. Only for a box of the root face that the constraints read
    as it is (no projection)."""
    for k in ks:
        q = P.quotient(k, work)
        if q is None:
            continue
        work[0] += COST["float"] * q.size * (1 + FLOAT_CALL)
        if not run_float(q, lo[None], hi[None])[0][0][0] >= 0:
            continue
        if _rigorous(q, lo, hi, work, lambda r_: r_[0][0] >= 0)[0][0] >= 0:
            return k
    return None


#: the largest denominator of a constraint's multiplier (read from the slopes at a box's centre, rounded to a
#: simple fraction) and the most digits of its numerator and of its denominator that :func:`replay` reads
MULTIPLIER_DENOMINATOR = 1000
MULTIPLIER_DIGITS = 20
#: the precision of the arb arithmetic that combines rigorous enclosures (sums of products of doubles: exact)
ARB_BITS = 256
#: the most multipliers tried in rigorous arithmetic on one box (those the float tier ranks best)
MULTIPLIER_TRIES = 2


def _down(x: Any) -> float:
    """A double at most the arb ball ``x`` (``ArbOps.lower_float``; -inf for a ball that is not finite, NaN too)."""
    return backend("arb").lower_float(x) if x.is_finite() else -INF


def _up(x: Any) -> float:
    return -_down(-x)


def _constraint_slopes(P: Programs, k: int, values: Sequence[tuple[Any, Any]] | None) -> list[tuple[float, float]]:
    """Constraint ``k``'s partial derivatives per coordinate (exactly 0 where it does not read the coordinate), from
    the outputs of ``P.constraint_grad`` (None: no constraint reads any coordinate)."""
    out = [(0.0, 0.0)] * len(P.problem.symbols)
    for j, (kk, d) in enumerate(P.pairs):
        if kk == k and values is not None:
            out[d] = (float(values[j][0]), float(values[j][1]))
    return out


def _multiplier_closes(P: Programs, face: Face, k: int, lam: Fraction, lo: np.ndarray, hi: np.ndarray, strict: bool,
                       work: list[int]) -> bool:
    """Whether ``r = core - lam * c_k`` closes the bounded box ``B = [lo, hi]``, whose points constraint ``k`` reads
    as they are: at every feasible point ``c_k >= 0``, so ``core >= r`` when ``lam >= 0`` (rigorous arithmetic).

    ``r`` is smallest on the face ``F`` of ``B`` that fixes each coordinate along which ``r`` is monotone at the end
    where it is lower (its slopes' enclosures on ``B``); ``m`` is ``r``'s mean-value bound on ``F`` about ``F``'s
    centre. The box closes when ``m >= 0`` (``> 0`` when strict), or, strict, when ``m >= 0`` and ``r`` grows off an
    open end of a coordinate (:meth:`Problem.open_end`: no instance there) to some order
    (:func:`_grows_off_open_ends`: ``alpha_max > 1/(L + 1)`` grows like ``t^2`` off t = 0).
    """
    from flint import arb, ctx

    if lam < 0 or P.constraints is None or not _bounded(lo, hi):
        return False
    with ctx.workprec(ARB_BITS):
        return _residual_closes(P, face, k, arb(lam.numerator) / arb(lam.denominator), lo, hi, strict, work)


def _residual_closes(P: Programs, face: Face, k: int, mult: Any, lo: np.ndarray, hi: np.ndarray, strict: bool,
                     work: list[int]) -> bool:
    """:func:`_multiplier_closes` with the multiplier an arb ball ``mult``, in the working precision."""
    from flint import arb

    constraints = P.constraints
    assert constraints is not None

    def residual(core: tuple[float, float], con: tuple[float, float]) -> tuple[float, float]:
        """``core - lam con`` for enclosures of both, end by end (``lam >= 0``; a ball's 30-bit radius would
        widen an exact end)."""
        return _down(arb(core[0]) - mult * arb(con[1])), _up(arb(core[1]) - mult * arb(con[0]))

    def slopes(a: np.ndarray, z: np.ndarray) -> list[tuple[float, float]]:
        """``r``'s partial derivatives' enclosures on the box ``[a, z]`` (endpoint intervals too where the balls
        show a slope of no sign: balls widen ``1/(1 + t)^2`` on ``[0, 1]`` to ``[1/4, 2]``, and put a rounding's worth
        across 0 where a slope touches it)."""
        def read(values: list[tuple[float, float]], con: list[tuple[float, float]]) -> list[tuple[float, float]]:
            return [residual(g, h) for g, h in zip(_pairs(face.gradient(values)), con)]

        con = _constraint_slopes(P, k, None if P.constraint_grad is None
                                 else _rigorous(P.constraint_grad, a, z, work, _all_finite))
        return read(_rigorous(face.grad, a, z, work, lambda r_: not any(
            g0 < 0 < g1 for g0, g1 in read(r_, con))), con)

    def at(c: np.ndarray) -> tuple[float, float]:
        # the core's forms are one function: the tightest of their enclosures (a form may be singular at t = 0)
        ends = [_rigorous(program, c, c, work)[0] for program in face.form_programs]
        core = (max(a for a, _ in ends), min(z for _, z in ends))
        if not core[0] <= core[1]:
            return -INF, INF
        return residual(core, _rigorous(constraints, c, c, work)[k])

    r_slopes = slopes(lo, hi)
    f_lo, f_hi = _lowest_face(lo, hi, _ends_of(r_slopes))  # the face F where r is smallest
    # on F, r may be monotone in coordinates it was not monotone in on B: the face G fixing those too (each
    # projection keeps r's least value), its slopes read on G itself; r's bound is taken on G
    g_lo, g_hi, g_slopes = f_lo, f_hi, r_slopes
    for _ in range(len(lo)):
        if not np.any(g_hi > g_lo):
            break
        g_slopes = slopes(g_lo, g_hi)
        deeper = _lowest_face(g_lo, g_hi, _ends_of(g_slopes))
        if np.array_equal(deeper[0], g_lo) and np.array_equal(deeper[1], g_hi):
            break
        g_lo, g_hi = deeper
    c = g_lo / 2 + g_hi / 2
    bound = _mean_value_bound(at(c), g_slopes, g_lo, g_hi, c)
    if _ok(bound, strict):
        return True
    if not strict or bound < 0:
        return False
    # r >= 0 on B: r > 0 at every instance where r strictly grows off an open end (to any order)
    return _grows_off_open_ends(P, face, k, residual, lo, hi, (), 1, r_slopes, work)


#: how many derivatives deep a strict closure looks for growth off an open end (``r = b t``: 2, ``r = t^3``: 3; a gap
#: ``c/L^3`` of ``L alpha_max > 1 - c/L^3``: 4)
GROWTH_DEPTH = 4


def _grows_off_open_ends(P: Programs, face: Face, k: int,
                         residual: Callable[[tuple[float, float], tuple[float, float]], tuple[float, float]],
                         lo: np.ndarray, hi: np.ndarray, seq: tuple[int, ...], sign: int,
                         slopes: list[tuple[float, float]], work: list[int]) -> bool:
    """Whether ``g = sign * d^seq r`` (``r = core - lam c_k``; ``r`` itself for ``seq = ()``), known to be ``>= 0`` on
    the box ``B``, is ``> 0`` at every point of ``B`` off the open ends of the coordinates (:meth:`Problem.open_end`;
    every instance is such a point), given ``slopes``, the enclosures of ``g``'s partial derivatives on ``B``.

    It is where some coordinate ``d`` has an open end at which ``g`` grows into the box: ``h = dg/dx_d`` (``-dg/dx_d``
    at an upper end) is ``> 0`` on ``B``, or ``h >= 0`` on ``B`` and, recursively, ``h > 0`` off the open ends
    (:data:`GROWTH_DEPTH` derivatives at most). For a point x off the open ends, the segment from x's projection
    onto that end to x lies off the open ends but for its first point, so ``g(x) = g(end) + integral of h > g(end)
    >= 0``. ``r = b t / pi`` grows off ``b = 0`` like ``t``, which grows off ``t = 0``; ``r = t^3`` to third order;
    ``alpha_max > 1/(L + 1)`` at second order in t."""
    for d, (g0, g1) in enumerate(slopes):
        if not hi[d] > lo[d]:
            continue
        for side, h_lo in ((-1, g0), (1, -g1)):
            if not P.problem.open_end(d, side, lo, hi):
                continue
            if h_lo > 0:
                return True
            if not h_lo >= 0 or len(seq) + 1 >= GROWTH_DEPTH:
                continue
            inner, h_sign = tuple(sorted((*seq, d))), -sign if side > 0 else sign
            nxt = []
            for e in range(len(lo)):
                at = tuple(sorted((*inner, e)))
                program = face.derivative(at, P.problem.symbols, work)
                if program is None:
                    break
                # (endpoint intervals where the balls straddle 0: they put a rounding's worth below 6 sqrt(2) t at t = 0)
                ends = _rigorous(program, lo, hi, work, _signed)
                core = (max(a for a, _ in ends), min(z for _, z in ends))
                enc = residual(core, _rigorous(P.constraint_derivative(k, at), lo, hi, work, _signed)[0]) \
                    if core[0] <= core[1] else (-INF, INF)
                nxt.append(enc if h_sign > 0 else (-enc[1], -enc[0]))
            else:
                if _grows_off_open_ends(P, face, k, residual, lo, hi, inner, h_sign, nxt, work):
                    return True
    return False


def _lowest_face(lo: np.ndarray, hi: np.ndarray, slopes: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The face of the box ``[lo, hi]`` that fixes each coordinate along which a function with these slope
    enclosures (their lower and upper ends) is monotone at the end where it is lower: its least value on the box is
    on that face. The rigorous closure and the float filter that ranks its candidates both take it."""
    g_lo, g_hi = slopes
    return np.where((g_hi <= 0) & ~(g_lo >= 0), hi, lo), np.where(g_lo >= 0, lo, hi)


def _spread(slopes: tuple[np.ndarray, np.ndarray], lo: np.ndarray, hi: np.ndarray) -> float:
    """The float tier's mean-value estimate of how far a function with these slope enclosures moves from its value
    at the box's centre: ``sum_d max(|g0_d|, |g1_d|) (hi_d - lo_d) / 2`` over the coordinates the box leaves wide
    (a filter before the rigorous checks: NaN where a slope is)."""
    with np.errstate(all="ignore"):
        wide = hi > lo
        return float(np.sum(np.where(wide, np.maximum(np.abs(slopes[0]), np.abs(slopes[1])) * (hi - lo) / 2, 0.0)))


def _ends_of(pairs: Sequence[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Enclosures given a pair per coordinate as the arrays of their lower and upper ends."""
    return np.array([a for a, _ in pairs], dtype=float), np.array([z for _, z in pairs], dtype=float)


def _cancelling_multiplier(g: tuple[float, float], h: tuple[float, float]) -> Fraction | None:
    """The multiplier ``lam >= 0`` that makes the residual's slope ``g - lam h`` 0 at the enclosures' midpoints, as a
    simple fraction (None: no such finite, positive one)."""
    gm, hm = g[0] / 2 + g[1] / 2, h[0] / 2 + h[1] / 2
    if not (math.isfinite(gm) and math.isfinite(hm)) or hm == 0 or not gm / hm > 0 or not math.isfinite(gm / hm):
        return None
    lam = Fraction(gm / hm).limit_denominator(MULTIPLIER_DENOMINATOR)
    return lam if lam > 0 and len(str(lam.numerator)) <= MULTIPLIER_DIGITS else None


def _by_multiplier(P: Programs, face: Face, ks: Sequence[int], node: Node, grad: tuple[np.ndarray, np.ndarray],
                   strict: bool, limit_axis: int | None, work: list[int]) -> tuple[int, Fraction] | None:
    """A constraint ``k`` among ``ks`` and a multiplier ``lam`` with which :func:`_multiplier_closes` closes the box,
    else None. Candidates: per coordinate, the ``lam`` that cancels the slope of ``core - lam c_k`` along it (from the
    float enclosures ``grad`` of the core's slopes and of the constraint's), and the midpoints between consecutive
    ones, ranked by the float tier's estimate of the residual's bound on the face where it is smallest (as
    :func:`_residual_closes` takes it: the face of the box, then the face of that face by the slopes read there);
    the best :data:`MULTIPLIER_TRIES` are checked in rigorous arithmetic."""
    assert P.constraints is not None
    lo, hi = node.lo, node.hi
    # the box's open ends (a strict bound may close at >= 0 on a face there, the residual strictly growing off it)
    open_lo, open_hi = (np.array([strict and hi[d] > lo[d] and P.problem.open_end(d, side, lo, hi) for d in range(len(lo))])
                        for side in (-1, 1))

    def constraint_slopes(a: np.ndarray, z: np.ndarray) -> list[list[tuple[float, float]]] | None:
        """Per box of the batch, the float enclosures of every constraint slope (``P.pairs``) on it."""
        if P.constraint_grad is None:
            return None
        work[0] += COST["float"] * P.constraint_grad.size * (len(a) + FLOAT_CALL)
        out = run_float(P.constraint_grad, a, z)
        return [[(x[j], y[j]) for x, y in out] for j in range(len(a))]

    def residual(g: tuple[np.ndarray, np.ndarray], h: list[tuple[float, float]], lam: Fraction
                 ) -> tuple[np.ndarray, np.ndarray]:
        h_lo, h_hi = _ends_of(h)
        with np.errstate(all="ignore"):
            # (a rounding's worth each way: the float tier's slopes are outward-rounded, the rigorous ones tight)
            eps = 1e-9 * (np.maximum(np.abs(g[0]), np.abs(g[1])) + float(lam) * np.maximum(abs(h_lo), abs(h_hi)))
            return g[0] - float(lam) * h_hi + eps, g[1] - float(lam) * h_lo - eps

    cg = constraint_slopes(lo[None], hi[None])
    half = (hi - lo) / 2
    tried: list[tuple[int, Fraction, bool, np.ndarray, np.ndarray]] = []
    for k in ks:
        h = _constraint_slopes(P, k, None if cg is None else cg[0])
        found = sorted({lam for d in range(len(lo)) if half[d] > 0
                        for lam in [_cancelling_multiplier((float(grad[0][d]), float(grad[1][d])), h[d])] if lam is not None})
        # (and 0: the core alone, >= 0 on the box, where it grows off an open end a constraint's slope hides)
        for lam in sorted({Fraction(0), *found, *((a + z) / 2 for a, z in zip(found, found[1:]))}):
            r = residual(grad, h, lam)
            f_lo, f_hi = _lowest_face(lo, hi, r)
            # strictly growing off an open end the face fixes: the face needs only >= 0
            limit = bool(np.any((open_lo & (f_hi == lo) & (r[0] > 0)) | (open_hi & (f_lo == hi) & (r[1] < 0))))
            tried.append((k, lam, limit, f_lo, f_hi))
    if not tried:
        return None
    F_lo, F_hi = np.stack([x[3] for x in tried]), np.stack([x[4] for x in tried])
    work[0] += COST["float"] * face.grad.size * (len(tried) + FLOAT_CALL)
    on_face = run_float(face.grad, F_lo, F_hi)
    face_cg = constraint_slopes(F_lo, F_hi)
    centres, spreads = [], []
    for j, (k, lam, _, f_lo, f_hi) in enumerate(tried):  # the slopes on the face, and the face of the face
        g = face.gradient([(a[j], z[j]) for a, z in on_face])
        r = residual(g, _constraint_slopes(P, k, None if face_cg is None else face_cg[j]), lam)
        g_lo, g_hi = _lowest_face(f_lo, f_hi, r)
        spreads.append(_spread(r, g_lo, g_hi))
        centres.append(g_lo / 2 + g_hi / 2)
    centre_rows = np.stack(centres)
    work[0] += COST["float"] * (P.constraints.size + sum(program.size for program in face.form_programs)) \
        * (len(tried) + FLOAT_CALL)
    with np.errstate(invalid="ignore"):  # the best of the forms (one may be singular at t = 0)
        core_c = np.nanmax([run_float(program, centre_rows, centre_rows)[0][0] for program in face.form_programs], axis=0)
    cons_c = run_float(P.constraints, centre_rows, centre_rows)
    ranked: list[tuple[float, int, Fraction]] = []
    for j, (k, lam, limit, _, _) in enumerate(tried):
        with np.errstate(all="ignore"):
            score = float(core_c[j]) - float(lam) * float(cons_c[k][1][j]) - spreads[j]
        slack = 1e-9 * (abs(score) + spreads[j])  # a filter: the rigorous check decides
        reach = limit or (limit_axis is not None and open_lo[limit_axis] and centres[j][limit_axis] == 0.0)
        if math.isfinite(score) and (score > slack if strict and not reach else score >= -slack):
            ranked.append((-score, k, lam))
    for _, k, lam in sorted(ranked)[:MULTIPLIER_TRIES]:
        if _multiplier_closes(P, face, k, lam, lo, hi, strict, work):
            return k, lam
    return None


def _exact_point(core: sp.Expr, symbols: Sequence[sp.Symbol], point: np.ndarray | Sequence[Fraction]
                 ) -> tuple[int | None, str]:
    """The sign of ``core`` at a point of the closure (coordinates exact doubles or rationals; an infinite one: not
    decided)."""
    if not all(isinstance(v, Fraction) or math.isfinite(float(v)) for v in point):
        return None, "a point at infinity"
    values = {s: sp.Rational(v if isinstance(v, Fraction) else Fraction(float(v))) for s, v in zip(symbols, point)}
    try:
        value = core.xreplace(values)
    except (ZeroDivisionError, ValueError, TypeError):
        return None, "the core is not defined at the point"
    if value.free_symbols or value.has(sp.zoo, sp.nan, sp.oo, -sp.oo):
        return None, "the core is not a finite number at the point"
    return sign_of(value)


#: functions whose second derivative the chain rule reads wrong (0 almost everywhere, a jump or a point mass at the
#: kink): no second-order or concavity argument across them
KINKS = (OAbs, OMax, OMin, Step, Sign, sp.Abs, sp.Max, sp.Min, sp.Heaviside, sp.sign, sp.Piecewise, sp.floor, sp.ceiling)
#: a box narrower than this share of its coordinates' scale in every coordinate tries the second-order closure
TAYLOR_WIDTH = 2.0**-6
#: the most nodes the second derivatives of a face's core may have (beyond: no second-order closure on it)
MAX_HESSIAN = 20_000
#: a second derivative whose arb upper end is above this share of its size (or of 1) is not tried again in endpoint
#: intervals: more than a rounding's worth above 0
CONCAVE_SLACK = 1e-9
#: the largest denominator a rational critical point may have (the float minimiser, rounded to a simple fraction)
MAX_DENOMINATOR = 1000


def _psd(M: list[list[Fraction]]) -> bool:
    """Whether the symmetric rational matrix ``M`` is positive semidefinite: exact LDL^T (a zero pivot needs a zero
    column below it)."""
    A = [row[:] for row in M]
    n = len(A)
    for k in range(n):
        pivot = A[k][k]
        if pivot < 0:
            return False
        if pivot == 0:
            if any(A[i][k] != 0 for i in range(k + 1, n)):
                return False
            continue
        for i in range(k + 1, n):
            f = A[i][k] / pivot
            for j in range(k + 1, n):
                A[i][j] -= f * A[k][j]
    return True


def _second_order(problem: Problem, face: Face, p: Sequence[Fraction], lo: np.ndarray, hi: np.ndarray, strict: bool,
                  work: list[int], curved: dict[tuple[float, ...], bool] | None = None) -> int:
    """Whether Taylor's theorem to second order around the rational point ``p`` closes the box (step 6b of the module
    docstring), read on the smallest box holding both (``p`` may lie just beside it: an equality at a point the
    splits left on a neighbour's side): ``core(p)`` exactly ``>= 0`` (``> 0`` when strict), each partial derivative
    at ``p`` exactly 0 or pointing out of that box (``p`` on that side's end), and the Hessian bound ``M`` positive
    semidefinite on it (:func:`_curvature`; ``curved`` keeps its answers per box, for the next point). 1: it closes
    the box; -1: the core at ``p`` is exactly negative, or 0 under a strict bound (a counterexample point); 0:
    neither."""
    if len(p) != face.n:
        return 0
    ends = [(Fraction(float(a)), Fraction(float(z))) for a, z in zip(lo, hi)]
    if any(a == z != v for (a, z), v in zip(ends, p)):  # the box's fixed coordinates are p's
        return 0
    h_lo = np.array([float(a) if a <= v else _double_below(v) for (a, _), v in zip(ends, p)])
    h_hi = np.array([float(z) if v <= z else _double_above(v) for (_, z), v in zip(ends, p)])
    at_p = _at_point(problem, face, p, h_lo, h_hi, strict, work)
    if at_p <= 0:
        return at_p
    if curved is None:
        curved = {}
    key = (*h_lo.tolist(), *h_hi.tolist())
    if key not in curved:
        curved[key] = _curvature(problem, face, h_lo, h_hi, work)
    return 1 if curved[key] else 0


def _at_point(problem: Problem, face: Face, p: Sequence[Fraction], lo: np.ndarray, hi: np.ndarray, strict: bool,
              work: list[int]) -> int:
    """The first-order conditions of :func:`_second_order` at ``p``: 1 when they hold, -1 for a counterexample point,
    0 otherwise. Read from the rigorous enclosures of the core and its slopes on the doubles around ``p`` where those
    show a sign, else exactly (sympy: an equality, a slope that is exactly 0)."""
    syms = problem.symbols
    free = [d for d in range(face.n) if hi[d] > lo[d]]
    if not free or len(p) != face.n or not _bounded(lo, hi):
        return 0
    if any(not Fraction(float(lo[d])) <= p[d] <= Fraction(float(hi[d])) for d in range(face.n)):
        return 0
    if any(p[d] != Fraction(float(lo[d])) for d in range(face.n) if d not in free):
        return 0
    p_lo = np.array([_double_below(v) for v in p])
    p_hi = np.array([_double_above(v) for v in p])
    work[0] += COST["arb"] * face.enclose.size
    values = run_rigorous(face.enclose, p_lo, p_hi, "arb")
    k_forms = len(face.forms)
    slopes = face.gradient(values[k_forms:])

    def sign(expr: sp.Expr, low: float, high: float) -> int | None:
        if low > 0 or high < 0:
            return 1 if low > 0 else -1
        work[0] += FACE_WORK * _size(expr)
        return _exact_point(expr, syms, p)[0]

    s0 = sign(face.forms[0], max(a for a, _ in values[:k_forms]), min(z for _, z in values[:k_forms]))
    if s0 is None:
        return 0
    if s0 < 0 or (s0 == 0 and strict):
        return -1
    for d in free:
        at_lo, at_hi = p[d] == Fraction(float(lo[d])), p[d] == Fraction(float(hi[d]))
        if not (at_lo or at_hi) and (slopes[0][d] > 0 or slopes[1][d] < 0):
            return 0  # a slope of certain sign inside the box: the core falls toward one side
        g = sign(face.partials[d], float(slopes[0][d]), float(slopes[1][d]))
        if not (g == 0 or (g is not None and g > 0 and at_lo) or (g is not None and g < 0 and at_hi)):
            return 0
    return 1


def _curvature(problem: Problem, face: Face, lo: np.ndarray, hi: np.ndarray, work: list[int]) -> bool:
    """Whether ``|d|^T M |d| >= 0`` for every ``d`` with ``M`` from the Hessian's rigorous enclosure on the box
    (``M_ii`` its lower ends, ``M_ij = -max |H_ij|`` over the coordinates the box does not fix): then ``d^T H d >= 0``
    at every point of the box."""
    H = face.hessian(problem.symbols, work)
    if H is None:
        return False
    work[0] += COST["arb"] * H.size
    enc = run_rigorous(H, lo, hi, "arb")
    index = {}
    k = 0
    for i in range(face.n):
        for j in range(i, face.n):
            index[(i, j)] = index[(j, i)] = k
            k += 1
    free = [d for d in range(face.n) if hi[d] > lo[d]]
    M: list[list[Fraction]] = []
    for i in free:
        row = []
        for j in free:
            a, z = enc[index[(i, j)]]
            if not (math.isfinite(a) and math.isfinite(z)):
                return False
            row.append(Fraction(a) if i == j else -max(abs(Fraction(a)), abs(Fraction(z))))
        M.append(row)
    return _psd(M)


def _double_below(v: Fraction) -> float:
    f = float(v)
    return f if Fraction(f) <= v else math.nextafter(f, -INF)


def _double_above(v: Fraction) -> float:
    f = float(v)
    return f if Fraction(f) >= v else math.nextafter(f, INF)


#: the float minimiser's grids: at most this many points each, refined this many times
GRID_POINTS, GRID_LEVELS = 4096, 4


def _float_minimiser(face: Face, lo: np.ndarray, hi: np.ndarray, free: list[int], work: list[int]) -> np.ndarray:
    """The least point of the core's float midpoint values on nested grids over the free coordinates (up to 9
    points each, :data:`GRID_POINTS` in all, one float call per grid), each grid spanning the last one's two cells
    around its least point: resolution ``(hi - lo) / 2^9`` after :data:`GRID_LEVELS` grids in two coordinates. Only a
    guess (the candidates are decided exactly)."""
    best = lo / 2 + hi / 2
    if not free:
        return best
    per = int(max(3, min(9, GRID_POINTS ** (1 / len(free)))))
    half = (hi - lo) / 2
    program = face.form_programs[0]
    for _ in range(GRID_LEVELS):
        axes = [np.linspace(max(lo[d], best[d] - half[d]), min(hi[d], best[d] + half[d]), per) for d in free]
        points = np.tile(best, (per ** len(free), 1))
        for d, grid in zip(free, np.meshgrid(*axes, indexing="ij")):
            points[:, d] = grid.ravel()
        work[0] += COST["float"] * program.size * (len(points) + FLOAT_CALL)
        a, z = run_float(program, points, points)[0]
        with np.errstate(invalid="ignore"):
            value = np.where(np.isfinite(a) & np.isfinite(z), a / 2 + z / 2, np.inf)
        if not np.any(np.isfinite(value)):
            break
        best = points[int(np.argmin(value))]
        half = half * 2 / (per - 1)
    return best


def _critical_candidates(face: Face, lo: np.ndarray, hi: np.ndarray, work: list[int]) -> Iterator[tuple[Fraction, ...]]:
    """Rational points of the box where an equality at a critical point may lie, each once: the face's points that
    closed boxes before (no work), then the float minimiser of the core on the box (:func:`_float_minimiser`, paid
    for only when those fail) rounded to fractions of small denominator, then the box's centre
    and corners (dyadic: where splits put an end). Only points the replay reads back (:func:`_recordable`): a double
    far from 1 is a fraction of hundreds of digits, and a tree holding it would not replay from its record."""
    seen: set[tuple[Fraction, ...]] = set()

    def fresh(points: Iterable[tuple[Fraction, ...]]) -> Iterator[tuple[Fraction, ...]]:
        for p in points:
            if p not in seen and _recordable(p):
                seen.add(p)
                yield p

    ends = [(Fraction(float(a)), Fraction(float(z))) for a, z in zip(lo, hi)]
    yield from fresh([p for p in face.critical  # in the box, or within its width beside it
                      if all(2 * a - z <= v <= 2 * z - a for v, (a, z) in zip(p, ends))])
    free = [d for d in range(face.n) if hi[d] > lo[d]]
    mid = lo / 2 + hi / 2
    x = _float_minimiser(face, lo, hi, free, work)
    # the simplest fractions near the float minimiser first
    yield from fresh([tuple(Fraction(float(v)).limit_denominator(most) for v in x)
                      for most in (10, 100, MAX_DENOMINATOR)])
    out = [tuple(Fraction(float(v)) for v in mid)]
    if len(free) <= 3:
        for corner in np.ndindex(*(2,) * len(free)):
            q = mid.copy()
            for d, side in zip(free, corner):
                q[d] = hi[d] if side else lo[d]
            out.append(tuple(Fraction(float(v)) for v in q))
    yield from fresh(out)


def branch_and_bound(problem: Problem, work_limit: int, *, programs: Programs | None = None) -> Outcome:
    """Close every box of ``problem`` (module docstring) within ``work_limit`` operations."""
    P = programs or Programs.build(problem)
    lo, hi = _box(problem)
    root = Node(lo, hi, lo.copy(), hi.copy())
    tree = Tree(root, [str(s) for s in problem.symbols])
    queue = _Queue()
    queue.push(root)
    work = [0]
    boxes = 0
    closed: dict[str, int] = {}
    state: dict[str, Any] = {"tightest": None}
    n = len(problem.coordinates)
    scale = np.array([1.0 if not (math.isfinite(c.lo) and math.isfinite(c.hi)) else max(c.hi - c.lo, 1e-300)
                      for c in problem.coordinates])
    limit_axis = _limit_axis(problem)

    def outcome(status: str, reason: str, negative: Node | None = None) -> Outcome:
        if status in ("open", "stuck") and state.get("stuck"):
            status, reason = "stuck", f"{state['stuck']}; then {reason}"
        return Outcome(status, tree, work[0], boxes, closed, negative=negative, tightest=state["tightest"],
                       reason=reason, unexplored=queue.lowest() if status in ("open", "stuck") else None)

    def count(kind: str, node: Node, bound: float) -> None:
        closed[kind] = closed.get(kind, 0) + 1
        best = state["tightest"]
        if best is None or bound < best[0]:
            state["tightest"] = (bound, node.lo.tolist(), node.hi.tolist())

    while queue:
        if work[0] > work_limit:
            return outcome("open", f"the work limit ({work_limit:.3g} operations) ran out with {len(queue)} open boxes"
                           + _lowest_text(queue.lowest(), tree.names))
        if boxes > MAX_NODES:
            return outcome("open", f"more than {MAX_NODES} boxes")
        face_key, batch = queue.take(BATCH)  # one face's boxes, lowest first
        face = P.face(face_key, work)
        k_forms = len(face.forms)
        boxes += len(batch)
        LO = np.stack([nd.lo for nd in batch])
        HI = np.stack([nd.hi for nd in batch])
        work[0] += COST["float"] * face.enclose.size * (len(batch) + FLOAT_CALL)
        outs = run_float(face.enclose, LO, HI)
        cons = None
        if P.constraints is not None:
            work[0] += COST["float"] * P.constraints.size * (len(batch) + FLOAT_CALL)
            cons = run_float(P.constraints, np.stack([nd.clo for nd in batch]), np.stack([nd.chi for nd in batch]))
        with np.errstate(invalid="ignore"):  # -inf/2 + inf/2 where a coordinate is unbounded both ways: not taken
            mids = np.where(np.isfinite(LO) & np.isfinite(HI), LO / 2 + HI / 2, np.where(np.isfinite(LO), LO, HI))
        work[0] += COST["float"] * face.form_programs[0].size * (len(batch) + FLOAT_CALL)
        at_mid = run_float(face.form_programs[0], mids, mids)[0]
        new: list[Node] = []
        for b, node in enumerate(batch):
            node.face = face_key
            strict = problem.strict and not node.at_limit
            lows = [outs[f][0][b] for f in range(k_forms)]
            best_form = int(np.argmax(lows))
            m_lo, m_hi = lows[best_form], min(outs[f][1][b] for f in range(k_forms))
            g_lo, g_hi = face.gradient([(outs[k_forms + j][0][b], outs[k_forms + j][1][b]) for j in range(2 * n)])
            # (or its lower end underflows while some slope overflows: the doubles show neither the sign nor a
            # direction in which the core is monotone, e^-1600 + 1/(t + (1 - t) e^1600) on t in [0, 1/2], say)
            blind = _bounded(node.lo, node.hi) and (_blind(m_lo, m_hi) or (
                abs(m_lo) <= TINY and bool(np.any((g_lo == -INF) & (g_hi == INF)))))
            if blind:  # the doubles over- or underflow on this box: its enclosures in rigorous arithmetic instead
                r_box = _rigorous(face.enclose, node.lo, node.hi, work, _all_finite)
                lows = [r_box[f][0] for f in range(k_forms)]
                best_form = int(np.argmax(lows))
                m_lo, m_hi = lows[best_form], min(r_box[f][1] for f in range(k_forms))
                g_lo, g_hi = face.gradient(r_box[k_forms:])
            priority = m_lo if not math.isnan(m_lo) else -INF  # of the children this box may have
            # 2. infeasible
            certain: list[bool] = []
            if cons is not None:
                bad = [k for k in range(len(cons)) if cons[k][1][b] < 0]
                if bad:
                    r = _rigorous(P.constraints, node.clo, node.chi, work,  # type: ignore[arg-type]
                                  lambda r_: any(r_[k][1] < 0 for k in bad))
                    hit = next((k for k in bad if r[k][1] < 0), None)
                    if hit is not None:
                        node.kind, node.detail = "infeasible", hit
                        closed["infeasible"] = closed.get("infeasible", 0) + 1
                        continue
                certain = [bool(cons[k][0][b] >= 0) for k in range(len(cons))]
            feasible = all(certain)
            # 3. closed by the natural enclosure of one of the forms
            if _ok(m_lo, strict) or abs(m_lo) <= TINY:
                natural = _natural(face.form_programs[best_form], node.lo, node.hi, strict, work)
                if natural is not None:
                    node.kind, node.detail, node.bound = "closed", f"natural:{best_form}", natural
                    count("natural", node, natural)
                    continue
            if not strict and cons is not None and not face_key and np.array_equal(node.clo, node.lo) \
                    and np.array_equal(node.chi, node.hi) and m_lo < 0:
                k_by = _by_constraint(P, node.lo, node.hi, [k for k in range(len(cons)) if cons[k][0][b] < 0], work)
                if k_by is not None:
                    node.kind, node.detail, node.bound = "constraint", k_by, 0.0
                    count("constraint", node, 0.0)
                    continue
            # 3b. closed by a multiplier of a constraint the box does not certainly satisfy
            if cons is not None and not feasible and _bounded(node.lo, node.hi) \
                    and np.array_equal(node.clo, node.lo) and np.array_equal(node.chi, node.hi):
                ks = [k for k in range(len(cons)) if cons[k][0][b] < 0]
                multiplier = _by_multiplier(P, face, ks, node, (g_lo, g_hi), strict, limit_axis, work)
                if multiplier is not None:
                    node.kind, node.detail, node.bound = "multiplier", multiplier, 0.0
                    count("multiplier", node, 0.0)
                    continue
            # a candidate counterexample (where the doubles underflow, the rigorous values' own sign)
            if feasible and (m_hi < 0 or (blind and _negative(face.form_programs[0], node, work))):
                node.kind = "negative"
                return outcome("negative", "the float tier found a box of feasible points where the margin is negative",
                               node)
            width = node.hi - node.lo
            # 4. monotone: project onto the face where the core is smallest, along a coordinate whose undecided
            #    constraints all grow toward that face (the projection of a feasible point is then feasible)
            moves = [(d, -1 if g_lo[d] >= 0 else 1) for d in range(n)
                     if width[d] > 0 and (g_lo[d] >= 0 or g_hi[d] <= 0)
                     and math.isfinite(node.lo[d] if g_lo[d] >= 0 else node.hi[d])]
            if moves and cons is not None:
                cg = run_float(P.constraint_grad, node.clo[None], node.chi[None]) if P.constraint_grad is not None else []
                work[0] += COST["float"] * (P.constraint_grad.size if P.constraint_grad is not None else 0) * (1 + FLOAT_CALL)
                moves = [(d, side) for d, side in moves
                         if _feasible_move(P, d, side, certain, [(float(a[0]), float(z[0])) for a, z in cg])]
            if moves:
                claimed = list(moves)
                r_lo, r_hi = face.gradient(_rigorous(face.grad, node.lo, node.hi, work, lambda r_: all(
                    (face.gradient(r_)[0][d] >= 0 if side < 0 else face.gradient(r_)[1][d] <= 0) for d, side in claimed)))
                moves = [(d, side) for d, side in moves if (r_lo[d] >= 0 if side < 0 else r_hi[d] <= 0)]
                if moves and cons is not None and not _moves_keep_feasible(P, moves, node.clo, node.chi, work):
                    moves = []
                if limit_axis is not None and (limit_axis, -1) in moves and node.lo[limit_axis] == 0.0 \
                        and limit_axis not in dict(P.child_face(face_key, [(limit_axis, 0.0)])):
                    # the core has no value at t = 0 (log(1/t), exp(-1/sqrt(t)), ...): the point t = 0 could only be
                    # stuck there; splitting toward it (geometrically) reaches boxes [0, h] that close or refute
                    moves = [(d, side) for d, side in moves if d != limit_axis]
                if strict:
                    moves = _onto_open_ends(problem, face, node, moves, (r_lo, r_hi), limit_axis, work)
            if moves:
                child = Node(node.lo.copy(), node.hi.copy(), node.clo.copy(), node.chi.copy(),
                             at_limit=node.at_limit or any(abs(side) == 2 for _, side in moves))
                for d, side in moves:
                    v = node.lo[d] if side < 0 else node.hi[d]
                    child.lo[d] = child.hi[d] = child.clo[d] = child.chi[d] = v
                child.face = P.child_face(face_key, [(d, float(child.lo[d])) for d, _ in moves])
                node.kind, node.detail, node.children = "project", moves, [child]
                child.priority = priority
                new.append(child)
                continue
            # 4b. concave in a coordinate: the core's least value on the box is at one of that coordinate's two ends
            concave = face.concave(problem.symbols, node.lo, node.hi, work)
            unsure = {d for k, d in P.pairs if certain and not certain[k]}
            d_affine = next((d for d in range(n) if width[d] > 0 and math.isfinite(node.lo[d])
                             and math.isfinite(node.hi[d]) and concave[d] and d not in unsure), None)
            if d_affine is not None:
                node.kind, node.detail, node.children = "ends", d_affine, _ends(P, face_key, node, d_affine)
                for child in node.children:
                    child.priority = priority
                new.extend(node.children)
                continue
            # 6. a point: decide the core exactly there
            if not np.any(width > 0):
                sign, method = _exact_point(face.forms[0], problem.symbols, node.lo)
                if sign is not None and (sign > 0 or (sign == 0 and not strict)):
                    node.kind, node.detail = "point", method
                    count("point", node, 0.0 if sign == 0 else max(m_lo, 0.0))
                    continue
                if sign is not None and feasible:
                    node.kind = "negative"
                    what = "0 at an equality case of a strict bound" if sign == 0 else "negative"
                    return outcome("negative", f"the margin is {what} at a point ({method})", node)
                node.kind, node.detail = "stuck", method
                state.setdefault("stuck", f"a point where the margin could not be decided: {method} at "
                                 + ", ".join(f"{s_} = {v:.6g}" for s_, v in zip(tree.names, node.lo)))
                continue
            # 5. the mean-value form
            finite = np.isfinite(node.lo) & np.isfinite(node.hi)
            if np.all(finite) and np.all(np.isfinite(g_lo)) and np.all(np.isfinite(g_hi)):
                c = mids[b]
                if _ok(at_mid[0][b] - _spread((g_lo, g_hi), node.lo, node.hi), strict):
                    rc = _rigorous(face.form_programs[0], c, c, work)[0]
                    rg = _rigorous(face.grad, node.lo, node.hi, work,
                                   lambda r_: _ok(_mean_value_bound(rc, _pairs(face.gradient(r_)), node.lo, node.hi, c), strict))
                    bound = _mean_value_bound(rc, _pairs(face.gradient(rg)), node.lo, node.hi, c)
                    if _ok(bound, strict):
                        node.kind, node.detail, node.bound = "closed", "mean-value:0", bound
                        count("mean-value", node, bound)
                        continue
            # 6b. an equality at a critical point: the second-order closure
            read = face.reads(problem.symbols)  # coordinates the face's core does not read may stay wide
            if np.all(finite) and np.all((width <= TAYLOR_WIDTH * scale) | ~read) and work[0] <= work_limit:
                held: tuple[Fraction, ...] | None = None
                verdict, curved = 0, dict[tuple[float, ...], bool]()
                for p in _critical_candidates(face, node.lo, node.hi, work):
                    verdict = _second_order(problem, face, p, node.lo, node.hi, strict, work, curved)
                    if verdict:
                        held = p
                        break
                if held is not None and verdict > 0:
                    if held not in face.critical:
                        face.critical.append(held)
                    node.kind, node.detail, node.bound = "taylor", held, 0.0
                    count("second-order", node, 0.0)
                    continue
                if held is not None and feasible:
                    node.kind = "negative"
                    return outcome("negative", "the margin is negative, or 0 under a strict bound, at the rational "
                                   "point " + ", ".join(f"{s_} = {v}" for s_, v in zip(tree.names, held))
                                   + " (exact arithmetic)", node)
            # 7. split
            with np.errstate(invalid="ignore", over="ignore"):  # unbounded coordinates first, then width x slope
                slope = np.minimum(np.maximum(np.abs(g_lo), np.abs(g_hi)), 1e300)
                smear = np.where(np.isfinite(width), np.minimum(width * np.where(np.isnan(slope), 1.0, slope), 1e300), INF)
            wide = width > MIN_WIDTH * scale
            if limit_axis is not None:  # toward L -> oo the scale is t's own (t = 1/L): relative width
                wide[limit_axis] = width[limit_axis] > MIN_WIDTH * node.hi[limit_axis] and node.hi[limit_axis] > TINY_T
            smear = np.where(wide, smear, -1.0)
            d = int(np.argmax(smear))
            if smear[d] < 0:
                if feasible and _negative(face.form_programs[0], node, work, BOX_PRECISIONS):
                    node.kind = "negative"
                    return outcome("negative", "the margin is negative on a box too narrow to split (rigorous "
                                   "arithmetic at rising precision)", node)
                node.kind, node.detail = "stuck", "boxes too narrow to split"
                state.setdefault("stuck", "a box narrower than the split limit stayed undecided at " + ", ".join(
                    f"{s_} in [{a:.6g}, {z:.6g}]" for s_, a, z in zip(tree.names, node.lo, node.hi)))
                continue  # no proof now, but the other boxes may still hold a counterexample
            point = _split_point(float(node.lo[d]), float(node.hi[d]), limit=d == limit_axis)
            left = Node(node.lo.copy(), node.hi.copy(), node.clo.copy(), node.chi.copy(), face=face_key,
                        at_limit=node.at_limit)
            right = Node(node.lo.copy(), node.hi.copy(), node.clo.copy(), node.chi.copy(), face=face_key,
                         at_limit=node.at_limit)
            left.hi[d] = right.lo[d] = point
            if node.clo[d] == node.lo[d] and node.chi[d] == node.hi[d]:  # not projected: constraints follow the split
                left.chi[d] = right.clo[d] = point
            node.kind, node.detail, node.children = "split", (d, point), [left, right]
            new.extend((left, right))
            left.priority = right.priority = priority
        queue.push_all(new)
    if state.get("stuck"):
        return outcome("stuck", "every other box closed")
    unclosed = sum(not node.children and node.kind not in LEAVES for node in tree.walk())
    if unclosed:  # a box taken from the queue and never decided: no proof, whatever the rest says
        return outcome("open", f"{unclosed} box(es) of the tree were never closed (a fault of the prover)")
    return outcome("proved", "every box closed: " + ", ".join(f"{v} {k}" for k, v in sorted(closed.items())))


#: the kinds of node that close a box (a proof's leaves)
LEAVES = ("closed", "constraint", "multiplier", "infeasible", "point", "taylor")


def _lowest_text(lowest: tuple[int, float, list[float], list[float]] | None, names: Sequence[str]) -> str:
    """Where the unexplored box nearest a counterexample lies (by the float lower bound of the core on its parent)."""
    if lowest is None:
        return ""
    _, bound, lo, hi = lowest
    return (f" (the lowest float lower bound of the margin among them, {bound:.3g}, at "
            + ", ".join(f"{n} in [{a:.6g}, {z:.6g}]" for n, a, z in zip(names, lo, hi)) + ")")


class _Queue:
    """The open boxes. :meth:`take` gives a batch of one face's boxes, in turns: depth first (the newest boxes, as a
    stack: a dive reaches a counterexample's neighbourhood fast) and best first (the boxes whose parent's float lower
    bound of the core is lowest: no region is left for last because the dive went elsewhere)."""

    def __init__(self) -> None:
        self.stack: list[Node] = []  # newest first
        self.heap: list[tuple[float, int, Node]] = []
        self.taken: set[int] = set()
        self.count = 0
        self.turn = 0

    def __len__(self) -> int:
        return self.count - len(self.taken)

    def __bool__(self) -> bool:
        return len(self) > 0

    def push_all(self, nodes: list[Node]) -> None:
        self.stack[:0] = nodes
        for node in nodes:
            self.count += 1
            heapq.heappush(self.heap, (node.priority, -self.count, node))

    def push(self, node: Node) -> None:
        self.push_all([node])

    def take(self, size: int) -> tuple[tuple[tuple[int, float], ...], list[Node]]:
        self.turn += 1
        batch: list[Node] = []
        if self.turn % 2:  # depth first
            self.stack = [nd for nd in self.stack if id(nd) not in self.taken]
            face = self.stack[0].face
            batch = [nd for nd in self.stack if nd.face == face][:size]
        else:  # best first
            while id(self.heap[0][2]) in self.taken:
                heapq.heappop(self.heap)
            face = self.heap[0][2].face
            other: list[tuple[float, int, Node]] = []
            while self.heap and len(batch) < size:
                entry = heapq.heappop(self.heap)
                if id(entry[2]) in self.taken:
                    continue
                if entry[2].face == face:
                    batch.append(entry[2])
                else:
                    other.append(entry)
            for entry in other:
                heapq.heappush(self.heap, entry)
        self.taken.update(id(nd) for nd in batch)
        return face, batch

    def lowest(self) -> tuple[int, float, list[float], list[float]] | None:
        """``(boxes left, the lowest priority, that box's lo, hi)``, or None when no box is left."""
        while self.heap and id(self.heap[0][2]) in self.taken:
            heapq.heappop(self.heap)
        if not self.heap:
            return None
        priority, _, node = self.heap[0]
        return len(self), priority, node.lo.tolist(), node.hi.tolist()


def _ends(P: Programs, face_key: tuple[tuple[int, float], ...], node: Node, d: int) -> list[Node]:
    """The two children of a box whose core is concave (affine, say) in coordinate ``d``: ``d`` fixed at its lower,
    then its upper end. The constraints keep reading ``d``'s whole range (a feasible point of the box is in the constraint box of
    both children, so neither discards it). An open end (t = 0, a weight 0: :meth:`Problem.open_end`, no instance)
    needs only ``core >= 0`` under a strict bound (:attr:`Node.at_limit`), as ``core(lo) >= 0`` and ``core(hi) > 0``
    make a concave core ``> 0`` on ``(lo, hi]``; one end at most (both at ``>= 0`` would prove only ``>= 0``)."""
    out = []
    opened = next((side for side in (-1, 1) if P.problem.open_end(d, side, node.lo, node.hi)), 0)
    for side, v in ((-1, node.lo[d]), (1, node.hi[d])):
        child = Node(node.lo.copy(), node.hi.copy(), node.clo.copy(), node.chi.copy(),
                     at_limit=node.at_limit or side == opened)
        child.lo[d] = child.hi[d] = v
        child.face = P.child_face(face_key, [(d, float(v))])
        out.append(child)
    return out


def _pairs(bounds: tuple[np.ndarray, np.ndarray]) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in zip(*bounds)]


def _feasible_move(P: Programs, d: int, side: int, certain: list[bool], grads: list[tuple[float, float]]) -> bool:
    """Float filter: every constraint reading coordinate ``d`` is certainly satisfied on the box, or grows as the
    coordinate moves to the face (``side`` -1: its lower end)."""
    for j, (k, dd) in enumerate(P.pairs):
        if dd != d or certain[k]:
            continue
        lo, hi = grads[j]
        if not (hi <= 0 if side < 0 else lo >= 0):
            return False
    return True


def _moves_keep_feasible(P: Programs, moves: list[tuple[int, int]], clo: np.ndarray, chi: np.ndarray,
                         work: list[int]) -> bool:
    """Rigorously: for every projected coordinate, each constraint reading it is >= 0 on the constraint box or grows
    toward the face, so that the projection of a feasible point is feasible (and the face's constraints may be
    read on the face)."""
    if P.constraints is None:
        return True
    need = [(k, d, side) for d, side in moves for k, dd in P.pairs if dd == d]
    if not need:
        return True
    # (arb's answer is taken only when it decides: balls lose a box that reaches t = 0, endpoint intervals do not)
    values = _rigorous(P.constraints, clo, chi, work, lambda r_: all(r_[k][0] >= 0 for k, _, _ in need))
    todo = [(k, d, side) for k, d, side in need if not values[k][0] >= 0]
    if not todo:
        return True
    assert P.constraint_grad is not None
    index = {pair: j for j, pair in enumerate(P.pairs)}

    def grows(grads: list[tuple[float, float]]) -> bool:
        return all((grads[index[(k, d)]][1] <= 0 if side < 0 else grads[index[(k, d)]][0] >= 0) for k, d, side in todo)

    return grows(_rigorous(P.constraint_grad, clo, chi, work, grows))


def _mean_value_bound(rc: tuple[float, float], rg: list[tuple[float, float]], lo: np.ndarray, hi: np.ndarray,
                      c: np.ndarray) -> float:
    """A rigorous lower bound of ``core(c) + sum_d g_d (x_d - c_d)`` over the box: ``rc[0]`` plus, per coordinate, the
    least of the four products of the slope's and the offset's ends (each rounded down to a double), summed in arb:
    exact where the data are (a ball's radius, kept to 30 bits, would lose an exact 0)."""
    from flint import arb, ctx

    with ctx.workprec(ARB_BITS):
        total = arb(rc[0])
        for (g0, g1), a, z, m in zip(rg, lo, hi, c):
            if a == z:
                continue
            if not (math.isfinite(g0) and math.isfinite(g1)):
                return -INF
            total += arb(min(_down(arb(g) * (arb(float(e)) - arb(float(m)))) for g in (g0, g1) for e in (a, z)))
        return _down(total)


# -- replay -------------------------------------------------------------------------------------------------------
#: the most digits of a second-order point's denominator :func:`replay` reads (of its numerator: as many and a sign)
FRACTION_DIGITS = 40


def _recordable(point: Sequence[Fraction]) -> bool:
    """Whether a second-order point's fractions are ones :func:`_fractions` reads (at most :data:`FRACTION_DIGITS`
    digits each, numerator and denominator)."""
    return all(len(str(abs(v.numerator))) <= FRACTION_DIGITS and len(str(v.denominator)) <= FRACTION_DIGITS
               for v in point)


def entry_bytes(n: int) -> int:
    """The most bytes one box's entry takes in the inflated tree of a problem of ``n`` coordinates, its quotes and comma
    included: the longest entry :func:`replay` reads is a second-order point ``T<p_1>,...`` of ``n`` fractions of at
    most ``2 FRACTION_DIGITS + 2`` characters (a split takes 26 characters and its coordinate's digits, a projection
    at most ``n`` claims of those digits and 2 characters, any other entry fewer)."""
    return 3 + n * (2 * FRACTION_DIGITS + 3)


def decode(blob: str, max_bytes: int) -> list[str]:
    """The preorder tokens of :meth:`Tree.encode`'s ``blob``, inflated within ``max_bytes`` (a blob that inflates
    beyond is refused before it takes the memory); ValueError for anything that is not base64 of zlib of a JSON list
    of tokens."""
    import binascii

    try:
        packed = base64.b64decode(blob.encode("ascii"), validate=True)
        inflate = zlib.decompressobj()
        text = inflate.decompress(packed, max_bytes)
        if inflate.unconsumed_tail or not inflate.eof:
            raise ValueError(f"the tree inflates beyond {max_bytes} bytes or is truncated")
        tokens = json.loads(text.decode("ascii"))
    except (binascii.Error, UnicodeError, zlib.error) as exc:
        raise ValueError(f"the tree is not base64 of zlib of a JSON list: {type(exc).__name__}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"the tree is not base64 of zlib of a JSON list: {exc}") from None
    if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
        raise ValueError("the tree must be a list of box entries")
    return tokens


def replay(problem: Problem, tokens: Sequence[str], *, programs: Programs | None = None) -> tuple[bool, str, int]:
    """Re-check a tree from its preorder tokens (:meth:`Tree.encode`, inflated) alone: rebuild every box from the
    root box of ``problem`` by the recorded splits and projections, and re-check every claim (closed, infeasible,
    monotone, exact point) in rigorous arithmetic. Returns ``(ok, what failed or a summary, leaves checked)``; a
    token that names a coordinate, constraint or form the problem does not have fails the replay."""
    P = programs or Programs.build(problem)
    n = len(problem.coordinates)
    lo, hi = _box(problem)
    Box = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[tuple[int, float], ...], bool]
    stack: list[Box] = [(lo, hi, lo.copy(), hi.copy(), (), False)]
    work = [0]
    leaves = 0
    pos = 0
    while stack:
        if pos >= len(tokens):
            return False, "the encoding ends before every box is accounted for", leaves
        tok = tokens[pos]
        pos += 1
        b_lo, b_hi, c_lo, c_hi, fixed, at_limit = stack.pop()
        strict = problem.strict and not at_limit
        face = P.face(fixed)
        kind = tok[0]
        if kind == "S":
            d_text, point_text = tok[1:].split(":")
            d, point = int(d_text), float.fromhex(point_text)
            if not 0 <= d < n:
                return False, f"a split along coordinate {d}, which the problem does not have", leaves
            if not b_lo[d] < point < b_hi[d]:
                return False, f"a split of {problem.symbols[d]} at {point} outside its box", leaves
            left = (b_lo.copy(), b_hi.copy(), c_lo.copy(), c_hi.copy(), fixed, at_limit)
            right = (b_lo.copy(), b_hi.copy(), c_lo.copy(), c_hi.copy(), fixed, at_limit)
            left[1][d] = right[0][d] = point
            if c_lo[d] == b_lo[d] and c_hi[d] == b_hi[d]:
                left[3][d] = right[2][d] = point
            stack.extend([right, left])  # preorder: left first
        elif kind == "P":
            claims = [(int(part[:-1]), part[-1]) for part in tok[1:].split(",")]
            if not claims or any(not 0 <= d < n or side not in "+-<>" for d, side in claims) \
                    or len({d for d, _ in claims}) != len(claims):
                return False, f"a projection {tok[:40]!r} along coordinates the problem does not have", leaves
            if any(side in "<>" and not (strict and problem.open_end(d, -1 if side == "<" else 1, b_lo, b_hi))
                   for d, side in claims):
                return False, f"a projection onto a limit along {tok[:40]!r}, which is not an open end of a strict " \
                              "bound", leaves
            r = _pairs(face.gradient(_rigorous(face.grad, b_lo, b_hi, work, lambda r_: all(
                (face.gradient(r_)[0][d] >= 0 if side in "-<" else face.gradient(r_)[1][d] <= 0) for d, side in claims))))
            c_lo2, c_hi2 = b_lo.copy(), b_hi.copy()
            moves = []
            for part in tok[1:].split(","):
                d, side = int(part[:-1]), part[-1]
                if not (_grows(face, b_lo, b_hi, d, r[d], work, -1 if side == "<" else 1) if side in "<>"
                        else r[d][0] >= 0 if side == "-" else r[d][1] <= 0):
                    return False, f"the core is not monotone in {problem.symbols[d]} on a projected box", leaves
                v = b_hi[d] if side in "+>" else b_lo[d]
                if not math.isfinite(v):
                    return False, f"a projection onto an infinite end of {problem.symbols[d]}", leaves
                c_lo2[d] = c_hi2[d] = v
                moves.append((d, float(v)))
            if not _moves_keep_feasible(P, [(d, 1 if side in "+>" else -1) for d, side in claims], c_lo, c_hi, work):
                return False, "a projection along a coordinate whose constraints do not allow it", leaves
            k_lo, k_hi = c_lo.copy(), c_hi.copy()
            for d, v in moves:
                k_lo[d] = k_hi[d] = v
            stack.append((c_lo2, c_hi2, k_lo, k_hi, P.child_face(fixed, moves),
                          at_limit or any(side in "<>" for _, side in claims)))
        elif kind == "C":
            leaves += 1
            method, _, form = tok[1:].partition(":")
            k = int(form or 0)
            if not 0 <= k < len(face.forms):
                return False, f"a box closed by form {k}, which its face does not have", leaves
            if method == "natural":
                ok = _natural(face.form_programs[k], b_lo, b_hi, strict, work) is not None
            elif method == "mean-value":
                c = b_lo / 2 + b_hi / 2
                rc = _rigorous(face.form_programs[0], c, c, work)[0]
                rg = _rigorous(face.grad, b_lo, b_hi, work, lambda r_: _ok(
                    _mean_value_bound(rc, _pairs(face.gradient(r_)), b_lo, b_hi, c), strict))
                ok = _ok(_mean_value_bound(rc, _pairs(face.gradient(rg)), b_lo, b_hi, c), strict)
            else:
                return False, f"unknown closing method {method!r}", leaves
            if not ok:
                return False, f"a box closed by {method} does not re-check", leaves
        elif kind == "I":
            leaves += 1
            k = int(tok[1:])
            if not 0 <= k < len(problem.constraints):
                return False, f"a box said infeasible by constraint {k}, which the problem does not have", leaves
            if P.constraints is None or not _rigorous(P.constraints, c_lo, c_hi, work, lambda r_: r_[k][1] < 0)[k][1] < 0:
                return False, f"a box said infeasible by constraint {k} is not", leaves
        elif kind == "M":
            leaves += 1
            k = int(tok[1:])
            if not 0 <= k < len(problem.constraints):
                return False, f"a box closed by constraint {k}, which the problem does not have", leaves
            if strict or fixed or not (np.array_equal(c_lo, b_lo) and np.array_equal(c_hi, b_hi)):
                return False, "a box closed by a constraint where that rule does not apply (a strict bound, a face, " \
                              "or a projected box)", leaves
            if _by_constraint(P, b_lo, b_hi, [k], work) is None:
                return False, f"a box closed by constraint {k} does not re-check", leaves
        elif kind == "L":
            leaves += 1
            k_text, _, lam_text = tok[1:].partition(":")
            lam_read = _fractions(lam_text, 1)
            if not k_text.isdigit() or len(k_text) > MULTIPLIER_DIGITS or lam_read is None \
                    or any(len(part.lstrip("-")) > MULTIPLIER_DIGITS for part in lam_text.split("/")):
                return False, f"a multiplier closure {tok[:60]!r} that is not L<constraint>:<p>/<q>", leaves
            k, lam = int(k_text), lam_read[0]
            if not 0 <= k < len(problem.constraints):
                return False, f"a box closed by constraint {k}, which the problem does not have", leaves
            if lam < 0:
                return False, f"a negative multiplier {lam} of constraint {k} (it bounds the core from above)", leaves
            if not (np.array_equal(c_lo, b_lo) and np.array_equal(c_hi, b_hi)):
                return False, "a multiplier closure on a box whose constraints read a range kept from before (the " \
                              "ends of a concave coordinate)", leaves
            if not _multiplier_closes(P, face, k, lam, b_lo, b_hi, strict, work):
                return False, f"a box closed by constraint {k} with the multiplier {lam} does not re-check", leaves
        elif kind == "E":
            leaves += 1
            if np.any(b_hi > b_lo):
                return False, "an exact point that is not a point", leaves
            sign, method = _exact_point(face.forms[0], problem.symbols, b_lo)
            if sign is None or sign < 0 or (sign == 0 and strict):
                return False, f"an exact point does not re-check ({method})", leaves
        elif kind == "A":
            d_text = tok[1:]
            if not d_text.isdigit() or not 0 <= int(d_text) < n:
                return False, f"the two ends of coordinate {d_text[:20]!r}, which the problem does not have", leaves
            d = int(d_text)
            if not (b_hi[d] > b_lo[d] and math.isfinite(b_lo[d]) and math.isfinite(b_hi[d])):
                return False, f"the two ends of {problem.symbols[d]} on a box where it is a point or unbounded", leaves
            if not face.concave(problem.symbols, b_lo, b_hi, work)[d]:
                return False, f"the core is not concave in {problem.symbols[d]}: its two ends do not bound it", leaves
            node_ = Node(b_lo, b_hi, c_lo, c_hi, at_limit=at_limit)
            children = _ends(P, fixed, node_, d)
            stack.extend((c.lo, c.hi, c.clo, c.chi, c.face, c.at_limit) for c in reversed(children))
        elif kind == "T":
            leaves += 1
            centre = _fractions(tok[1:], n)
            if centre is None:
                return False, f"a second-order closure around {tok[1:60]!r}, not {n} fractions", leaves
            if _second_order(problem, face, centre, b_lo, b_hi, strict, work) <= 0:
                return False, "a box closed to second order does not re-check", leaves
        else:
            return False, f"an open box ({tok!r}) in the tree: it is not a proof", leaves
    if pos != len(tokens):
        return False, "the encoding has more entries than boxes", leaves
    return True, f"{leaves} leaves re-checked ({work[0]} operations)", leaves


def _fractions(text: str, n: int) -> tuple[Fraction, ...] | None:
    """``n`` fractions ``p/q`` separated by commas (each of at most :data:`FRACTION_DIGITS` digits), or None."""
    parts = text.split(",")
    if len(parts) != n:
        return None
    out = []
    for part in parts:
        num, slash, den = part.partition("/")
        if not slash or len(num) > FRACTION_DIGITS + 1 or len(den) > FRACTION_DIGITS or not den.isdigit() \
                or not num.lstrip("-").isdigit() or int(den) == 0:
            return None
        out.append(Fraction(int(num), int(den)))
    return tuple(out)


def check_faces(problem: Problem, faces: dict[tuple[tuple[int, float], ...], list[sp.Expr]]) -> str | None:
    """Why a face's forms are not the core on that face (exact algebra: their difference cancels to 0), or None."""
    syms = problem.symbols
    for fixed, forms in faces.items():
        base = problem.core.xreplace({syms[d]: sp.Rational(Fraction(v)) for d, v in fixed})
        for f in forms:
            if not _equal(f, base):
                return f"a form of the face {fixed} is not the core there: {f}"
    return None


__all__ = ["Outcome", "Programs", "Tree", "branch_and_bound", "replay", "Unsupported"]
