"""Derivations as sequences of machine-replayable steps (issue 4).

A :class:`Derivation` proves one or more registered statement readings (its ``targets``). Its
steps fall in three categories, counted separately when replayed:

- **checked**: :class:`Identity` (sympy reduces ``lhs - rhs`` to 0; with ``vectors`` both sides
  must be linear in those symbols, which then stand for vectors of any real vector space),
  :class:`Z3` (``given => goal`` for all reals), and the final :class:`Conclude`, which connects
  the derived inequality to each target's sympy relation (bindings, hypotheses, implication);
- **cited**: :class:`Cite`, a named classical fact from :data:`CLASSICAL` whose side conditions
  (identities, z3 goals, sign checks) are replayed;
- **prose**: :class:`Prose`, argued only in words.

A step may declare ``uses``: ids of hypotheses it relies on. The conclusion fails for a target
that does not carry every one of them, so no hypothesis is assumed silently. A
:class:`Witness` evaluates instances through ``Statement.evaluate`` that attain (or approach)
equality: it shows the bound cannot be improved, and fails loudly if an instance violates it.

``Derivation.replay()`` returns a :class:`Replay`: ``ok`` (every non-prose step and the witness
replay) and ``complete`` (``ok`` and no prose step): PROVED versus proved modulo prose.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence, Union

import numpy as np
import sympy as sp

from attnbounds.proofs.z3bridge import prove
from attnbounds.theory.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.instance import Instance
from attnbounds.theory.margins import relative_margin

#: Named classical facts a :class:`Cite` step may invoke (name -> statement).
CLASSICAL: dict[str, str] = {
    "triangle": "||u + v|| <= ||u|| + ||v|| for any norm (vectors, operator norms)",
    "reverse-triangle": "| ||u|| - ||v|| | <= ||u - v||",
    "homogeneity": "||c u|| = |c| ||u||",
    "cauchy-schwarz": "|<u, v>| <= ||u|| ||v||; (sum_i a_i b_i)^2 <= (sum a_i^2)(sum b_i^2)",
    "jensen": "f convex => f(E X) <= E f(X); f concave => E f(X) <= f(E X)",
    "markov": "X >= 0, t > 0 => P(X >= t) <= E[X] / t",
    "linearity-of-expectation": "E[sum_k c_k X_k] = sum_k c_k E[X_k]",
    "conditioning": "E[sum_i 1{A_i} Y_i] = sum_i P(A_i) E[Y_i | A_i]",
    "counting": "under the uniform law on N-subsets, P(event) = #subsets in the event / C(L, N)",
    "independence": "independent X, Y: E[X Y] = E[X] E[Y], P(A and B) = P(A) P(B)",
    "symmetry": "a law invariant under x -> -x has mean 0",
    "termwise": "a_k <= b_k for every k => sum_k a_k <= sum_k b_k (also for expectations, maxima)",
    "monotone-function": "f non-decreasing and a <= b => f(a) <= f(b)",
    "extreme-value": "a continuous function on a compact set attains its minimum and maximum",
    "bilinearity": "<sum_j a_j x_j, sum_k b_k y_k> = sum_{j,k} a_j b_k <x_j, y_k>",
    "binomial-theorem": "sum_{k=0}^H C(H, k) p^k (1 - p)^(H - k) = (p + 1 - p)^H = 1",
    "quotient-rule": "d(u / v) = du / v - u dv / v^2",
    "mean-value": "||f(b) - f(a)|| <= ||b - a|| sup_{t in [a, b]} ||Df(t)||_2 for C^1 maps",
    "loewner": "A <= B in Loewner order => lambda_max(A) <= lambda_max(B); A >= 0 => ||A||_2 = lambda_max(A)",
    "spectral-le-frobenius": "||A||_2 <= ||A||_F",
    "submultiplicativity": "||A B||_2 <= ||A||_2 ||B||_2",
    "rank-one-norm": "||u v^T||_2 = ||u||_2 ||v||_2 and ||diag(v)||_2 = max_i |v_i|",
    "case-split": "a claim proved on each case of an exhaustive case split holds",
}

CATEGORY = {"identity": "checked", "z3": "checked", "conclusion": "checked", "cited": "cited",
            "prose": "prose", "witness": "checked"}


@dataclass(frozen=True)
class StepResult:
    """The outcome of one replayed step. ``ok`` is None for prose (nothing to check)."""

    kind: str
    text: str
    ok: bool | None
    detail: str = ""
    target: str | None = None  # the statement a conclusion or witness check is about
    side_conditions: int = 0  # for a cited fact: how many of its side conditions were replayed

    @property
    def category(self) -> str:
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
    """``lhs == rhs`` checked symbolically (scalars, or matrices entry by entry).

    ``vectors`` are symbols that denote vectors: each side must be a polynomial of degree at most
    one in them (a linear combination with scalar coefficients), so that cancelling coefficients,
    as sympy does when it treats them as commuting scalars, proves the vector identity.
    """

    text: str
    lhs: sp.Basic
    rhs: sp.Basic
    vectors: tuple[sp.Symbol, ...] = ()
    uses: tuple[str, ...] = ()
    kind = "identity"

    def check(self) -> tuple[bool, str]:
        sides = [list(x) if isinstance(x, sp.MatrixBase) else [x] for x in (self.lhs, self.rhs)]
        if len(sides[0]) != len(sides[1]):
            return False, "the two sides have different shapes"
        for lhs, rhs in zip(*sides):
            for e in (lhs, rhs) if self.vectors else ():
                try:
                    degree = sp.Poly(sp.expand(e), *self.vectors).total_degree()
                except sp.PolynomialError:
                    return False, f"not polynomial in the vectors {self.vectors}: {e}"
                if degree > 1:
                    return False, f"not linear in the vectors {self.vectors} (degree {degree}): {e}"
            if not _is_zero(lhs - rhs):
                return False, f"difference does not simplify to 0: {sp.simplify(lhs - rhs)}"
        return True, "sympy: difference simplifies to 0"


@dataclass(frozen=True)
class Z3:
    """``given => goal`` over the reals, proved by z3 (the negation is unsatisfiable)."""

    text: str
    goal: sp.Basic
    given: tuple[sp.Basic, ...] = ()
    uses: tuple[str, ...] = ()
    kind = "z3"

    def check(self) -> tuple[bool, str]:
        return prove(self.goal, self.given)


@dataclass(frozen=True)
class Sign:
    """``expr >= 0`` (or ``> 0``, ``<= 0``) decided by sympy's assumption system after simplification."""

    text: str
    expr: sp.Expr
    relation: str = ">=0"
    kind = "identity"

    def check(self) -> tuple[bool, str]:
        e = sp.simplify(self.expr)
        prop = {">=0": e.is_nonnegative, ">0": e.is_positive, "<=0": e.is_nonpositive}[self.relation]
        claim = f"{e} {self.relation[:-1]} 0"
        return (True, f"sympy: {claim}") if prop else (False, f"sympy cannot show {claim}")


@dataclass(frozen=True)
class Psd:
    """A symmetric symbolic matrix is positive semidefinite: every principal minor is >= 0 (sympy)."""

    text: str
    matrix: sp.Matrix
    kind = "identity"

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
    """A named classical fact (:data:`CLASSICAL`) applied here; its side ``conditions`` are replayed."""

    rule: str
    text: str
    conditions: tuple[Check, ...] = ()
    uses: tuple[str, ...] = ()
    kind = "cited"

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
    """A step argued only in words: counted, never checked."""

    text: str
    uses: tuple[str, ...] = ()
    kind = "prose"

    def check(self) -> tuple[bool | None, str]:
        return None, "prose only"


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


def _leq(a: sp.Expr, b: sp.Expr, given: tuple[sp.Basic, ...], use_z3: bool) -> tuple[bool, str]:
    """Is ``a <= b``? Exact equality by sympy, then sympy's sign, then (if ``use_z3``) z3 under ``given``."""
    if _is_zero(a - b):
        return True, "equal"
    if sp.simplify(b - a).is_nonnegative:
        return True, "sympy sign"
    if not use_z3:
        return False, "sympy cannot order them"
    try:
        return prove(sp.Le(a, b), given)
    except AttnBoundsError as exc:
        return False, str(exc)


@dataclass(frozen=True)
class Conclude:
    """The final step: the derived ``relation`` implies each target statement's relation.

    ``relation`` is written in the statement's symbols; ``definitions`` maps statement symbols (or
    ``Sum`` nodes) to the derivation's expressions and is applied to the target's relation.
    ``bindings`` says which quantity each bound symbol must denote (a tuple allows several); the
    target's bindings must agree. Every target conjunct ``lt <= rt`` needs a derived conjunct
    ``ld <= rd`` with ``lt <= ld`` and ``rd <= rt`` (proved by sympy, or by z3 from ``given``: results
    of earlier steps or facts true by definition, never a hypothesis the target does not state).
    """

    relation: sp.Basic
    bindings: dict[str, str | tuple[str, ...]]
    definitions: dict[sp.Basic, sp.Basic] = field(default_factory=dict)
    given: tuple[sp.Basic, ...] = ()
    text: str = ""
    kind = "conclusion"

    def check_target(self, statement_id: str, uses: Iterable[str]) -> tuple[bool, str]:
        from attnbounds.theory import registry

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
        facts = self.given
        target = stmt.relation.xreplace(self.definitions)
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


Step = Union[Identity, Z3, Sign, Psd, Cite, Prose, Conclude]


@dataclass(frozen=True)
class Witness:
    """Instances showing the bound cannot be improved, evaluated through ``Statement.evaluate``.

    ``build()`` returns instance batches in order. ``attained``: every instance has relative
    margin (:func:`attnbounds.theory.margins.relative_margin`) within ``1e-9`` of 0. ``approached``: the relative
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
        from attnbounds.theory import registry

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

    def _count(self, category: str) -> int:
        return sum(1 for s in self.steps if s.category == category)

    @property
    def checked(self) -> int:
        return self._count("checked")

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
    def ok(self) -> bool:
        """Every checked and cited step, and every witness check, replays."""
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

    def restrict(self, target: str) -> "Replay":
        """The replay as seen by one target: shared steps plus that target's conclusion and witness checks."""
        if target not in self.targets:
            raise InvalidArgument(f"{self.name} does not prove {target}; it proves {', '.join(self.targets)}")
        keep = lambda rs: tuple(r for r in rs if r.target in (None, target))  # noqa: E731
        return Replay(self.name, (target,), keep(self.steps), keep(self.witness), self.seconds)


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

    @property
    def uses(self) -> tuple[str, ...]:
        """Hypothesis ids the steps rely on."""
        out: list[str] = []
        for s in self.steps:
            for h in getattr(s, "uses", ()):
                if h not in out:
                    out.append(h)
        return tuple(out)

    def replay(self) -> Replay:
        start = time.perf_counter()
        results: list[StepResult] = []
        for step in self.steps[:-1]:
            try:
                ok, detail = step.check()
            except AttnBoundsError as exc:
                ok, detail = False, str(exc)
            results.append(StepResult(step.kind, step.text, ok, detail,
                                      side_conditions=len(getattr(step, "conditions", ()))))
        final = self.steps[-1]
        assert isinstance(final, Conclude)
        for target in self.targets:
            try:
                ok, detail = final.check_target(target, self.uses)
            except AttnBoundsError as exc:
                ok, detail = False, str(exc)
            results.append(StepResult("conclusion", final.text or f"conclude {target}", ok, detail, target))
        witness: list[StepResult] = []
        if self.witness is not None:
            for target in self.witness.targets or self.targets:
                try:
                    ok, detail = self.witness.check_target(target)
                except AttnBoundsError as exc:
                    ok, detail = False, str(exc)
                witness.append(StepResult("witness", self.witness.text, ok, detail, target))
        return Replay(self.name, self.targets, tuple(results), tuple(witness), time.perf_counter() - start)


def vector(name: str, dim: int) -> sp.Matrix:
    """A column vector of ``dim`` real symbolic components ``name_1..name_dim``."""
    return sp.Matrix(sp.symbols(f"{name}_1:{dim + 1}", real=True))
