"""Derivations as sequences of machine-replayable steps whose results chain into the conclusion (issues 4, 14).

A :class:`Derivation` proves one or more registered statement readings (its ``targets``). Each step
states its ``result`` as a formula over the reals, and the replay keeps the results established so
far (the *facts*). A step may rely only on facts: every formula in its ``given`` (and, for a
:class:`Sign` or :class:`Psd` check, every sign that sympy assumes of its symbols) must follow from
the facts, by matching or by z3, or the step fails. Facts come from

- **premises**: :class:`Assume` reads a formula from a hypothesis of the targets. When the hypothesis
  has a formula (a parameter domain ``domain(eps)``: ``eps > 0``; ``L>=2``: ``L >= 2``), z3 checks
  that the premise follows from it; otherwise the premise is how the derivation reads the hypothesis
  (``alpha_i >= 0`` from ``simplex``) and is listed as such. A target lacking the hypothesis fails;
- **checked** steps: :class:`Identity` (sympy reduces ``lhs - rhs`` to 0 with every symbol a plain
  real; with ``vectors`` both sides must be linear in those symbols, which then stand for vectors of
  any real vector space), :class:`Z3` (``given => goal`` for all reals; z3 ignores sympy assumptions),
  :class:`Sign`, :class:`Psd`; one checked only at small sizes names them in ``sizes`` and is counted
  as **size-limited**;
- **cited** steps: :class:`Cite`, a named classical fact from :data:`CLASSICAL` applied here, whose
  side conditions (identities, z3 goals, sign checks) are replayed and whose ``result`` is taken on
  the citation;
- **prose**: :class:`Prose`, argued only in words (no result).

The final :class:`Conclude` checks that its derived relation follows from the facts (z3: the chain)
and that it implies each target's sympy relation (bindings, hypotheses, implication). A step may also
declare ``uses``: hypotheses it relies on in words; the conclusion fails for a target that does not
carry every one of them. A :class:`Witness` evaluates instances through ``Statement.evaluate`` that
attain (or approach) equality: it shows the bound cannot be improved, and fails loudly if an instance
violates it.

``Derivation.replay()`` returns a :class:`Replay`: ``ok`` (every non-prose step, the chain and the
witness replay) and ``complete`` (``ok`` and no prose step): PROVED versus proved modulo prose. Its
counts (checked, size-limited, cited with and without side conditions, prose) and its premises, each
with its hypothesis, are what a record says its PROVED rests on (:meth:`Replay.summary`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, Union, cast

import numpy as np
import sympy as sp

from attnbounds.proofs.z3bridge import prove, translatable
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.deciding.margins import relative_margin

#: Named classical facts a :class:`Cite` step may invoke (name -> statement).
CLASSICAL: dict[str, str] = {
    "triangle": "||u + v|| <= ||u|| + ||v|| for any norm (vectors, operator norms)",
    "reverse-triangle": "| ||u|| - ||v|| | <= ||u - v||",
    "homogeneity": "||c u|| = |c| ||u||",
    "norm-nonnegative": "||u|| >= 0 for any norm; a maximum of absolute values is >= 0",
    "cauchy-schwarz": "|<u, v>| <= ||u|| ||v||; (sum_i a_i b_i)^2 <= (sum a_i^2)(sum b_i^2)",
    "jensen": "f convex => f(E X) <= E f(X); f concave => E f(X) <= f(E X)",
    "markov": "X >= 0, t > 0 => P(X >= t) <= E[X] / t",
    "linearity-of-expectation": "E[sum_k c_k X_k] = sum_k c_k E[X_k]",
    "conditioning": "E[sum_i 1{A_i} Y_i] = sum_i P(A_i) E[Y_i | A_i]",
    "counting": "under the uniform law on N-subsets, P(event) = #subsets in the event / C(L, N), a number in [0, 1]",
    "complement": "P(not A) = 1 - P(A) when the probabilities of all outcomes sum to 1",
    "independence": "independent X, Y: E[X Y] = E[X] E[Y], P(A and B) = P(A) P(B)",
    "exchangeability": "a law invariant under permutations of x_1..x_L gives every pair (x_j, x_k), j != k, the "
                       "same joint law, hence the same E<x_j, x_k>",
    "termwise": "a_k <= b_k for every k => sum_k a_k <= sum_k b_k (also for expectations, maxima); a sum of "
                "non-negative terms is non-negative",
    "monotone-function": "f non-decreasing and a <= b => f(a) <= f(b)",
    "maximum": "max_k c_k >= c_j for every j, and the maximum is one of the c_j",
    "extreme-value": "a continuous function on a compact set attains its minimum and maximum",
    "bilinearity": "<sum_j a_j x_j, sum_k b_k y_k> = sum_{j,k} a_j b_k <x_j, y_k>; in particular "
                   "(sum_j u_j)(sum_k v_k) = sum_{j,k} u_j v_k for finite sums",
    "distributivity": "prod_{h=1}^H (u_h + v_h) = sum over the 2^H choices of one term per factor of their products",
    "quotient-rule": "d(u / v) = du / v - u dv / v^2",
    "mean-value": "||f(b) - f(a)|| <= ||b - a|| sup_{t in [a, b]} ||Df(t)||_2 for C^1 maps",
    "loewner": "A <= B in Loewner order => lambda_max(A) <= lambda_max(B); A >= 0 => ||A||_2 = lambda_max(A) >= 0",
    "spectral-le-frobenius": "||A||_2 <= ||A||_F",
    "submultiplicativity": "||A B||_2 <= ||A||_2 ||B||_2",
    "rank-one-norm": "||u v^T||_2 = ||u||_2 ||v||_2 and ||diag(v)||_2 = max_i |v_i|",
    "simplex-diameter": "two points of the probability simplex are at Euclidean distance at most sqrt(2): "
                        "||a - b||^2 = ||a||^2 + ||b||^2 - 2 <a, b> with ||a||^2 <= (sum_j a_j)^2 = 1 and <a, b> >= 0",
    "case-split": "a claim proved on each case of an exhaustive case split holds",
}

CATEGORY = {"identity": "checked", "z3": "checked", "conclusion": "checked", "cited": "cited",
            "prose": "prose", "witness": "checked", "premise": "premise"}


def real(expr: Any) -> Any:
    """``expr`` with every symbol replaced by a plain real symbol of the same name (sympy assumptions dropped)."""
    e = sp.sympify(expr)
    if isinstance(e, sp.MatrixBase):
        return e.applyfunc(real)
    return e.xreplace({s: sp.Symbol(s.name, real=True) for s in e.free_symbols if isinstance(s, sp.Symbol)})


def assumed_signs(expr: Any) -> tuple[sp.Basic, ...]:
    """The signs sympy assumes of ``expr``'s symbols, as formulas (``T > 0``, ``a >= 0``): premises to declare."""
    out: list[sp.Basic] = []
    for sym in sorted(sp.sympify(expr).free_symbols, key=str):
        if not isinstance(sym, sp.Symbol):
            continue
        if sym.is_positive:
            out.append(sp.Gt(real(sym), 0))
        elif sym.is_nonnegative:
            out.append(sp.Ge(real(sym), 0))
        elif sym.is_negative:
            out.append(sp.Lt(real(sym), 0))
        elif sym.is_nonpositive:
            out.append(sp.Le(real(sym), 0))
    return tuple(out)


def _parts(formula: sp.Basic) -> list[sp.Basic]:
    return list(formula.args) if isinstance(formula, sp.And) else [formula]


def _relevant(goal: sp.Basic, facts: Sequence[sp.Basic]) -> list[sp.Basic]:
    """The facts z3 can read that share symbols with the goal, transitively (the others cannot help)."""
    usable = [f for f in facts if translatable(f)]
    names = {str(s) for s in goal.free_symbols}
    chosen: list[sp.Basic] = []
    grew = True
    while grew:
        grew = False
        for f in usable:
            if f in chosen:
                continue
            fn = {str(s) for s in f.free_symbols}
            if fn & names or not fn:
                chosen.append(f)
                names |= fn
                grew = True
    return chosen


def established(formula: sp.Basic, facts: Sequence[sp.Basic]) -> tuple[bool, str]:
    """Whether ``formula`` follows from ``facts``: each conjunct is a fact (or a conjunct of one), or z3 proves it."""
    formula = real(formula)
    known = {p for f in facts for p in _parts(real(f))}
    for part in _parts(formula):
        if part in known or part is sp.true:
            continue
        if not translatable(part):
            return False, f"{part} is not a fact and z3 cannot read it"
        ok, why = prove(part, tuple(_relevant(part, [real(f) for f in facts])))
        if not ok:
            return False, f"{part} does not follow from the facts ({why})"
    return True, "follows from the facts"


@dataclass(frozen=True)
class StepResult:
    """The outcome of one replayed step. ``ok`` is None for prose (nothing to check).

    ``sizes``: the sizes a size-limited check ran at ("" when general); ``premise``: for a premise,
    ``{"premise", "hypothesis", "checked"}``; ``result``: the formula the step contributes to the chain.
    """

    kind: str
    text: str
    ok: bool | None
    detail: str = ""
    target: str | None = None  # the statement a premise, conclusion or witness check is about
    side_conditions: int = 0  # for a cited fact: how many of its side conditions were replayed
    sizes: str = ""
    premise: dict[str, Any] | None = None
    result: str = ""

    @property
    def category(self) -> str:
        if self.sizes and self.kind in ("identity", "z3"):
            return "size-limited"
        return CATEGORY[self.kind]


# -- checks usable as steps or as side conditions ------------------------------------------------
def _is_zero(diff: sp.Expr) -> bool:
    for simplify in (lambda e: e, sp.expand, sp.simplify, lambda e: sp.simplify(sp.combsimp(e))):
        try:
            if simplify(diff) == 0:
                return True
        except (TypeError, ValueError, NotImplementedError):  # combsimp on non-combinatorial input
            continue
    return False


@dataclass(frozen=True)
class Identity:
    """``lhs == rhs`` checked symbolically (scalars, or matrices entry by entry), every symbol a plain real.

    ``vectors`` are symbols that denote vectors: each side must be a polynomial of degree at most
    one in them (a linear combination with scalar coefficients), so that cancelling coefficients,
    as sympy does when it treats them as commuting scalars, proves the vector identity. ``sizes``
    names the sizes of a check made on explicit small objects (three tokens, ...): size-limited.
    Result: ``lhs = rhs`` for a scalar identity without vectors.
    """

    text: str
    lhs: sp.Basic
    rhs: sp.Basic
    vectors: tuple[sp.Symbol, ...] = ()
    uses: tuple[str, ...] = ()
    sizes: str = ""
    kind = "identity"

    @property
    def needs(self) -> tuple[sp.Basic, ...]:
        return ()

    @property
    def result(self) -> sp.Basic | None:
        if self.vectors or self.sizes or isinstance(self.lhs, sp.MatrixBase):
            return None
        return sp.Eq(real(self.lhs), real(self.rhs), evaluate=False)

    def check(self) -> tuple[bool, str]:
        sides = [list(x) if isinstance(x, sp.MatrixBase) else [x] for x in (real(self.lhs), real(self.rhs))]
        vectors = tuple(real(v) for v in self.vectors)
        if len(sides[0]) != len(sides[1]):
            return False, "the two sides have different shapes"
        for lhs, rhs in zip(*sides):
            for e in (lhs, rhs) if vectors else ():
                try:
                    degree = sp.Poly(sp.expand(e), *vectors).total_degree()
                except sp.PolynomialError:
                    return False, f"not polynomial in the vectors {self.vectors}: {e}"
                if degree > 1:
                    return False, f"not linear in the vectors {self.vectors} (degree {degree}): {e}"
            if not _is_zero(lhs - rhs):
                return False, f"difference does not simplify to 0: {sp.simplify(lhs - rhs)}"
        return True, "sympy: difference simplifies to 0" + (f" (checked for {self.sizes} only)" if self.sizes else "")


@dataclass(frozen=True)
class Z3:
    """``given => goal`` over the reals, proved by z3 (the negation is unsatisfiable); every formula in
    ``given`` must be a fact of the chain. Result: ``goal``."""

    text: str
    goal: sp.Basic
    given: tuple[sp.Basic, ...] = ()
    uses: tuple[str, ...] = ()
    sizes: str = ""
    kind = "z3"

    @property
    def needs(self) -> tuple[sp.Basic, ...]:
        return tuple(self.given)

    @property
    def result(self) -> sp.Basic | None:
        return None if self.sizes else real(self.goal)

    def check(self) -> tuple[bool, str]:
        return prove(real(self.goal), tuple(real(g) for g in self.given))


@dataclass(frozen=True)
class Sign:
    """``expr >= 0`` (or ``> 0``, ``<= 0``) decided by sympy's assumption system after simplification;
    the signs it assumes of the symbols (and ``given``) must be facts of the chain. Result: the sign."""

    text: str
    expr: sp.Expr
    relation: str = ">=0"
    given: tuple[sp.Basic, ...] = ()
    kind = "identity"
    sizes = ""

    @property
    def needs(self) -> tuple[sp.Basic, ...]:
        return (*assumed_signs(self.expr), *self.given)

    @property
    def result(self) -> sp.Basic:
        op = {">=0": sp.Ge, ">0": sp.Gt, "<=0": sp.Le}[self.relation]
        return op(real(self.expr), 0)

    def check(self) -> tuple[bool, str]:
        e = sp.simplify(self.expr)
        prop = {">=0": e.is_nonnegative, ">0": e.is_positive, "<=0": e.is_nonpositive}[self.relation]
        claim = f"{e} {self.relation[:-1]} 0"
        return (True, f"sympy: {claim}") if prop else (False, f"sympy cannot show {claim}")


@dataclass(frozen=True)
class Psd:
    """A symmetric symbolic matrix is positive semidefinite: every principal minor is >= 0 (sympy); the
    signs it assumes of the symbols must be facts of the chain. No scalar result."""

    text: str
    matrix: sp.Matrix
    kind = "identity"
    sizes = ""
    result = None

    @property
    def needs(self) -> tuple[sp.Basic, ...]:
        return assumed_signs(self.matrix)

    def check(self) -> tuple[bool, str]:
        from itertools import combinations

        n = self.matrix.shape[0]
        if not _is_zero_matrix(self.matrix - self.matrix.T):
            return False, "matrix is not symmetric"
        for size in range(1, n + 1):
            for idx in combinations(range(n), size):
                ok, why = Sign("minor", self.matrix.extract(list(idx), list(idx)).det()).check()
                if not ok:
                    return False, f"principal minor {idx}: {why}"
        return True, "sympy: every principal minor is >= 0"


def _is_zero_matrix(m: sp.Matrix) -> bool:
    return all(_is_zero(e) for e in m)


Check = Union[Identity, Z3, Sign, Psd]


@dataclass(frozen=True)
class Cite:
    """A named classical fact (:data:`CLASSICAL`) applied here, its ``result`` taken on the citation.

    Its side ``conditions`` are self-contained lemmas (each check states its own hypotheses) and are
    replayed; its ``given`` must be facts of the chain (the premises under which the fact applies).
    Both count as its checked side conditions.
    """

    rule: str
    text: str
    conditions: tuple[Check, ...] = ()
    uses: tuple[str, ...] = ()
    given: tuple[sp.Basic, ...] = ()
    result: sp.Basic | None = None
    kind = "cited"

    @property
    def sizes(self) -> str:
        return "; ".join(c.sizes for c in self.conditions if c.sizes)

    @property
    def needs(self) -> tuple[sp.Basic, ...]:
        return tuple(self.given)

    def check(self) -> tuple[bool, str]:
        if self.rule not in CLASSICAL:
            return False, f"unknown classical fact {self.rule!r}; known: {', '.join(sorted(CLASSICAL))}"
        for cond in self.conditions:
            ok, why = cond.check()
            if not ok:
                return False, f"side condition failed ({cond.text}): {why}"
        n = len(self.conditions)
        return True, f"{self.rule}: {CLASSICAL[self.rule]}" + (f"; {n} side condition(s) replayed" if n else "")


@dataclass(frozen=True)
class Prose:
    """A step argued only in words: counted, never checked, contributes no fact."""

    text: str
    uses: tuple[str, ...] = ()
    kind = "prose"
    sizes = ""
    needs: tuple[sp.Basic, ...] = ()
    result = None

    def check(self) -> tuple[bool | None, str]:
        return None, "prose only"


@dataclass(frozen=True)
class Assume:
    """A premise read from the targets' hypothesis ``hypothesis``, as a formula of the derivation.

    For each target: the target must state the hypothesis; when the hypothesis has a ``formula`` (a
    parameter domain, ``L>=2``), z3 must derive ``premise`` from it (``checked``), otherwise the
    premise is how the derivation reads the hypothesis's description.
    """

    text: str
    premise: sp.Basic
    hypothesis: str
    kind = "premise"

    @property
    def result(self) -> sp.Basic:
        return real(self.premise)

    def check_target(self, statement_id: str) -> tuple[bool, str, bool]:
        """``(ok, detail, checked)`` for one target."""
        from attnbounds.theory.mathematics import registry

        stmt = registry.get(statement_id)
        hyp = next((h for h in stmt.hypotheses if h.id == self.hypothesis), None)
        if hyp is None:
            return False, f"{statement_id} does not state hypothesis {self.hypothesis!r}", False
        if hyp.formula is None:
            return True, f"read from hypothesis {hyp.id}: {hyp.description}", False
        ok, why = prove(self.result, (real(hyp.formula),))
        if ok:
            return True, f"follows from hypothesis {hyp.id}: {sp.sstr(hyp.formula)}", True
        return False, f"does not follow from hypothesis {hyp.id} ({sp.sstr(hyp.formula)}): {why}", True


def _conjuncts(relation: sp.Basic) -> list[tuple[sp.Expr, sp.Expr]]:
    parts = list(relation.args) if isinstance(relation, sp.And) else [relation]
    out = []
    for p in parts:
        if isinstance(p, (sp.LessThan, sp.StrictLessThan)):
            out.append((p.lhs, p.rhs))
        elif isinstance(p, (sp.GreaterThan, sp.StrictGreaterThan)):
            out.append((p.rhs, p.lhs))
        else:
            raise InvalidArgument(f"a conclusion must be an inequality or a conjunction of them, got {p}")
    return out


def _leq(a: sp.Expr, b: sp.Expr, facts: Sequence[sp.Basic], use_z3: bool) -> tuple[bool, str]:
    """Is ``a <= b``? Exact equality by sympy (plain reals), then (if ``use_z3``) z3 from the facts."""
    a, b = real(a), real(b)
    if _is_zero(a - b):
        return True, "equal"
    if not use_z3:
        return False, "not equal"
    goal = sp.Le(a, b)
    if not translatable(goal):
        return False, f"z3 cannot read {goal}"
    try:
        return prove(goal, tuple(_relevant(goal, [real(f) for f in facts])))
    except AttnBoundsError as exc:
        return False, str(exc)


@dataclass(frozen=True)
class Conclude:
    """The final step: the derived ``relation`` follows from the facts, and implies each target's relation.

    ``relation`` is written in the statement's symbols; ``definitions`` maps statement symbols (or
    ``Sum`` nodes, or subexpressions such as ``(1 - p)**H``) to the derivation's expressions and is
    applied to the target's relation. ``bindings`` says which quantity each bound symbol must denote
    (a tuple allows several); the target's bindings must agree. Every target conjunct ``lt <= rt``
    needs a derived conjunct ``ld <= rd`` with ``lt <= ld`` and ``rd <= rt`` (equal, or proved by z3
    from the facts).
    """

    relation: sp.Basic
    bindings: dict[str, str | tuple[str, ...]]
    definitions: dict[sp.Basic, sp.Basic] = field(default_factory=dict)
    text: str = ""
    kind = "conclusion"

    def check_chain(self, facts: Sequence[sp.Basic]) -> tuple[bool, str]:
        """Does ``relation`` follow from the facts (premises and step results)?"""
        ok, why = established(self.relation, facts)
        return (True, "the relation follows from the step results and premises") if ok else \
            (False, f"the relation does not follow from the earlier steps: {why}")

    def check_target(self, statement_id: str, uses: Iterable[str], facts: Sequence[sp.Basic] = ()) -> tuple[bool, str]:
        from attnbounds.theory.mathematics import registry

        try:
            stmt = registry.get(statement_id)
        except AttnBoundsError as exc:
            return False, str(exc)
        used = set(stmt.symbols())
        for sym, qname in stmt.bindings.items():
            if sym not in used:
                continue
            allowed = self.bindings.get(sym)
            allowed = (allowed,) if isinstance(allowed, str) else (allowed or ())
            if qname not in allowed:
                return False, f"{sym} is bound to quantity {qname!r}; the derivation proves it for {allowed or 'nothing'}"
        have = {h.id for h in stmt.hypotheses}
        missing = sorted(set(uses) - have)
        if missing:
            return False, f"steps use hypotheses {missing} that {statement_id} does not state"
        target = real(stmt.relation).xreplace({real(k): real(v) for k, v in self.definitions.items()})
        derived = _conjuncts(self.relation)
        for lt, rt in _conjuncts(target):
            reasons = []
            for use_z3, (ld, rd) in ((z, d) for z in (False, True) for d in derived):
                ok_l, why_l = _leq(lt, ld, facts, use_z3)
                ok_r, why_r = _leq(rd, rt, facts, use_z3) if ok_l else (False, "")
                if ok_l and ok_r:
                    break
                reasons.append(why_l if not ok_l else why_r)
            else:
                return False, f"no derived inequality implies {lt} <= {rt} ({'; '.join(reasons[len(derived):])})"
        return True, f"implies {statement_id}: {stmt.formula}"


Step = Union[Identity, Z3, Sign, Psd, Cite, Prose, Assume, Conclude]


@dataclass(frozen=True)
class Witness:
    """Instances showing the bound cannot be improved, evaluated through ``Statement.evaluate``.

    ``build()`` returns instance batches in order. ``attained``: every instance has relative
    margin (:func:`attnbounds.theory.deciding.margins.relative_margin`) within ``1e-9`` of 0. ``approached``: the relative
    margins decrease strictly and the last is below ``tol``. Any margin below ``-1e-9`` (a
    violation of a proved bound) fails the witness.
    """

    text: str
    build: Callable[[], Sequence[Instance]]
    mode: str = "attained"
    targets: tuple[str, ...] | None = None
    tol: float = 1e-2
    kind = "witness"

    def check_target(self, statement_id: str) -> tuple[bool, str]:
        from attnbounds.theory.mathematics import registry

        stmt = registry.get(statement_id)
        gaps = []
        for inst in self.build():
            ev = stmt.evaluate(inst)
            if not ev.applicable.all():
                return False, f"witness instance not applicable: hypotheses {ev.failed_hypotheses} fail"
            gaps.extend(np.asarray(relative_margin(ev.lhs, ev.rhs)).tolist())
        gaps_a = np.asarray(gaps)
        if not np.all(np.isfinite(gaps_a)):
            return False, f"non-finite margins {gaps}"
        if gaps_a.min() < -1e-9:
            return False, f"VIOLATION: relative margin {gaps_a.min():.3e} < 0 on a witness instance"
        shown = ", ".join(f"{g:.2e}" for g in gaps)
        if self.mode == "attained":
            ok = bool(np.all(np.abs(gaps_a) <= 1e-9))
            return ok, f"relative margins {shown} ({'attained' if ok else 'NOT attained'})"
        if self.mode == "approached":
            ok = bool(np.all(np.diff(gaps_a) < 0) and gaps_a[-1] <= self.tol)
            return ok, f"relative margins {shown} ({'approach 0' if ok else 'do NOT approach 0'})"
        return False, f"unknown witness mode {self.mode!r} (allowed: attained, approached)"


@dataclass(frozen=True)
class Replay:
    """The outcome of replaying one derivation (all of its targets)."""

    name: str
    targets: tuple[str, ...]
    steps: tuple[StepResult, ...]
    witness: tuple[StepResult, ...]
    seconds: float
    uses: tuple[str, ...] = ()  # the hypotheses the steps rely on, as premises or in words

    def _count(self, category: str) -> int:
        return sum(1 for s in self.steps if s.category == category)

    @property
    def checked(self) -> int:
        """Steps checked in general (sympy, z3, the conclusion), not counting size-limited ones."""
        return self._count("checked")

    @property
    def size_limited(self) -> int:
        """Steps checked only at the sizes they name (their own check, or a cited step's side condition)."""
        return sum(1 for s in self.steps if s.sizes)

    @property
    def cited(self) -> int:
        return self._count("cited")

    @property
    def prose(self) -> int:
        return self._count("prose")

    @property
    def cited_unchecked(self) -> int:
        """Cited classical facts applied without any replayed side condition (taken on the citation alone)."""
        return sum(1 for s in self.steps if s.category == "cited" and s.side_conditions == 0)

    @property
    def premises(self) -> list[dict[str, Any]]:
        """Every premise of the derivation, once: ``{"premise", "hypothesis", "checked"}``."""
        out: list[dict[str, Any]] = []
        for s in self.steps:
            if s.premise is not None and s.premise not in out:
                out.append(s.premise)
        return out

    @property
    def ok(self) -> bool:
        """Every checked and cited step, every premise, the chain and every witness check replay."""
        return all(s.ok for s in (*self.steps, *self.witness) if s.ok is not None)

    @property
    def complete(self) -> bool:
        """``ok`` with no prose step left: the reading is PROVED (not only modulo prose)."""
        return self.ok and self.prose == 0

    @property
    def sharp(self) -> bool | None:
        """True when a witness shows the bound attained or approached; None without a witness."""
        return None if not self.witness else all(bool(w.ok) for w in self.witness)

    @property
    def result(self) -> str:
        if not self.ok:
            return "FAILED"
        return "PROVED" if self.complete else "PROVED MODULO PROSE"

    @property
    def failures(self) -> list[StepResult]:
        return [s for s in (*self.steps, *self.witness) if s.ok is False]

    def summary(self) -> dict[str, Any]:
        """What a PROVED resting on this replay rests on: counts, size-limited steps, premises, a sentence
        saying so (:meth:`rests_on`) and the step list (category, text, ok); what a record stores under ``proof``."""
        return {"checked": self.checked, "size_limited": self.size_limited, "cited": self.cited,
                "cited_unchecked": self.cited_unchecked, "prose": self.prose,
                "size_limited_steps": [f"{s.text} [{s.sizes}]" for s in self.steps if s.sizes],
                "premises": self.premises, "uses": list(self.uses), "rests_on": self.rests_on(),
                "steps": [{"category": s.category, "text": s.text, "ok": s.ok} for s in self.steps]}

    def rests_on(self) -> str:
        """One sentence: the steps by kind and the premises by hypothesis."""
        def count(n: int, what: str) -> str:
            return f"{n} {what}{'' if n == 1 else 's'}"

        parts = [count(self.checked, "machine-checked step") + " (sympy identities and signs, z3 implications, the "
                 "conclusion following from the chained step results)",
                 count(self.cited, "cited classical fact") + f" ({self.cited - self.cited_unchecked} with replayed side "
                 f"conditions or premises, {self.cited_unchecked} on the citation alone)"]
        if self.size_limited:
            parts.append(count(self.size_limited, "step") + " checked only at the sizes named "
                         f"({'; '.join(s.sizes for s in self.steps if s.sizes)})")
        parts.append(count(self.prose, "prose step"))
        premises = [f"{p['premise']} ({'implied by' if p['checked'] else 'read from'} {p['hypothesis']})"
                    for p in self.premises]
        parts.append("premises: " + (", ".join(premises) if premises else "none"))
        in_words = [h for h in self.uses if h not in {p["hypothesis"] for p in self.premises}]
        if in_words:
            parts.append("hypotheses relied on in cited steps: " + ", ".join(in_words))
        return "; ".join(parts)

    def restrict(self, target: str) -> "Replay":
        """The replay as seen by one target: shared steps plus that target's premises, conclusion and witness checks."""
        if target not in self.targets:
            raise InvalidArgument(f"{self.name} does not prove {target}; it proves {', '.join(self.targets)}")
        keep = lambda rs: tuple(r for r in rs if r.target in (None, target))  # noqa: E731
        return Replay(self.name, (target,), keep(self.steps), keep(self.witness), self.seconds, self.uses)


@dataclass(frozen=True)
class Derivation:
    """A named proof of the readings ``targets``; the last step is a :class:`Conclude`."""

    name: str
    targets: tuple[str, ...]
    title: str
    steps: tuple[Step, ...]
    witness: Witness | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        if not self.steps or not isinstance(self.steps[-1], Conclude):
            raise InvalidArgument(f"derivation {self.name}: the final step must be a Conclude")
        if not self.targets:
            raise InvalidArgument(f"derivation {self.name}: no target statement")
        for step in self.steps:
            for formula in _formulas(step):
                if isinstance(formula, sp.logic.boolalg.BooleanAtom):
                    raise InvalidArgument(f"derivation {self.name}: a formula of step {getattr(step, 'text', '')!r} "
                                          f"evaluated to {formula} when built; write it with plain real symbols "
                                          "(sympy assumptions decide such comparisons silently)")

    @property
    def uses(self) -> tuple[str, ...]:
        """Hypothesis ids the steps rely on (in words, or as premises)."""
        out: list[str] = []
        for s in self.steps:
            for h in (*getattr(s, "uses", ()), *((s.hypothesis,) if isinstance(s, Assume) else ())):
                if h not in out:
                    out.append(h)
        return tuple(out)

    def replay(self) -> Replay:
        start = time.perf_counter()
        results: list[StepResult] = []
        facts: list[sp.Basic] = []
        ok: bool | None
        for step in self.steps[:-1]:
            if isinstance(step, Assume):
                for target in self.targets:
                    try:
                        ok, detail, checked = step.check_target(target)
                    except AttnBoundsError as exc:
                        ok, detail, checked = False, str(exc), False
                    results.append(StepResult("premise", step.text, ok, detail, target, result=sp.sstr(step.result),
                                              premise={"premise": sp.sstr(step.result), "hypothesis": step.hypothesis,
                                                       "checked": checked}))
                facts.append(step.result)
                continue
            # steps before the last are not Conclude (a Conclude there would fail here, as before)
            step = cast(Union[Identity, Z3, Sign, Psd, Cite, Prose], step)
            try:
                ok, detail = step.check()
                if ok is not False:
                    for need in step.needs:
                        covered, why = established(need, facts)
                        if not covered:
                            ok, detail = False, f"relies on {sp.sstr(real(need))}, which no premise or earlier step " \
                                                f"establishes ({why})"
                            break
            except AttnBoundsError as exc:
                ok, detail = False, str(exc)
            result = step.result
            checks = len(getattr(step, "conditions", ())) + (len(step.needs) if isinstance(step, Cite) else 0)
            results.append(StepResult(step.kind, step.text, ok, detail, side_conditions=checks,
                                      sizes=step.sizes, result="" if result is None else sp.sstr(result)))
            if result is not None:
                facts.append(result)
        final = self.steps[-1]
        assert isinstance(final, Conclude)
        try:
            chain_ok, chain_detail = final.check_chain(facts)
        except AttnBoundsError as exc:
            chain_ok, chain_detail = False, str(exc)
        for target in self.targets:
            try:
                ok, detail = final.check_target(target, self.uses, facts) if chain_ok else (False, chain_detail)
            except AttnBoundsError as exc:
                ok, detail = False, str(exc)
            results.append(StepResult("conclusion", final.text or f"conclude {target}", ok,
                                      f"{chain_detail}; {detail}" if chain_ok else detail, target,
                                      result=sp.sstr(final.relation)))
        witness: list[StepResult] = []
        if self.witness is not None:
            for target in self.witness.targets or self.targets:
                try:
                    ok, detail = self.witness.check_target(target)
                except AttnBoundsError as exc:
                    ok, detail = False, str(exc)
                witness.append(StepResult("witness", self.witness.text, ok, detail, target))
        return Replay(self.name, self.targets, tuple(results), tuple(witness), time.perf_counter() - start, self.uses)


def _formulas(step: Step) -> list[Any]:
    """The formulas a step states or relies on (premise, goal, given, result, relation)."""
    out: list[Any] = []
    for name in ("premise", "goal", "relation"):
        if hasattr(step, name):
            out.append(getattr(step, name))
    out += list(getattr(step, "given", ()))
    if isinstance(step, Cite) and step.result is not None:
        out.append(step.result)
    return out


def reals(names: str) -> Any:
    """Plain real symbols (``sp.symbols(names, real=True)``): what every formula of a derivation is built from."""
    return sp.symbols(names, real=True)


def vector(name: str, dim: int) -> sp.Matrix:
    """A column vector of ``dim`` real symbolic components ``name_1..name_dim``."""
    return sp.Matrix(sp.symbols(f"{name}_1:{dim + 1}", real=True))
