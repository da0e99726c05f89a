"""PROVED for every L: interval branch and bound over a Caratheodory relaxation of a statement.

:func:`prove` relaxes a statement (:mod:`~attnbounds.theory.deciding.prover.relax`: ``t = 1/L``, distinguished tokens,
atoms for the other tokens), closes every box of every relaxed problem (:mod:`~attnbounds.theory.deciding.prover.bnb`), and
says:

- ``proved``: every box of every problem (each conjunct under each pattern of its distinguished tokens) is closed,
  each closure re-checked in rigorous interval arithmetic: the statement holds for every instance of every length
  within its hypotheses and ranges. The certificate (:meth:`ProverResult.to_json`) holds each problem, its
  coordinates and the tree of boxes, enough for :func:`replay` to re-check it from the record alone;
- ``refuted``: a box where the margin is negative, realised as a token-class instance (weights rounded to counts
  at a finite L), which the caller certifies the usual way;
- ``open``: the work ran out, or a box could not be decided (the reason says where);
- ``declined``: the statement has no relaxation (the reason says which hypothesis or quantity).

The work is counted in interval operations (:data:`~attnbounds.theory.deciding.prover.bnb.COST`), so the same statement
explores the same boxes on every machine.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from fractions import Fraction
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.instance import MAX_LENGTH, Instance
from attnbounds.theory.deciding.prover.bnb import (Node, Outcome, Programs, branch_and_bound, check_faces, decode,
                                                   entry_bytes, replay as replay_tree)
from attnbounds.theory.deciding.prover.program import compile_program, run_float, run_rigorous
from attnbounds.theory.deciding.prover.problem import Coordinate, Problem, t_sym
from attnbounds.theory.mathematics.intervals import outward
from attnbounds.theory.deciding.prover.relax import Relaxation, relax
from attnbounds.theory.deciding.prover.space import Declined
from attnbounds.theory.mathematics.statement import Statement

#: work units (:data:`bnb.COST`: 40 ns of float interval arithmetic each on this machine) the prover spends per
#: second of budget: about a quarter of that second
WORK_PER_SECOND = 6_000_000
#: the least work any statement gets (the smallest budgets still close easy statements)
MIN_WORK = 1_000_000
#: the relaxed problems any relaxation may build (the paper's readings and the quality sets keep at most 83, and build
#: within 90: checked by relaxing each with this quota), and
#: the work that pays for one more (a 7 s budget builds 90, a 20 s one 120)
MIN_PROBLEMS = 90
WORK_PER_PROBLEM = 1_000_000

METHOD = "relaxation"
RESTS_ON = "interval branch-and-bound over a Caratheodory relaxation"


@dataclass
class ProblemReport:
    """One problem's outcome, as the certificate records it."""

    problem: Problem
    outcome: Outcome
    programs: Programs

    def to_json(self) -> dict[str, Any]:
        p, o = self.problem, self.outcome
        faces = {repr(list(k)): [sp.srepr(f) for f in face.forms] for k, face in self.programs.faces.items()}
        out = {**problem_fields(p), "status": o.status, "boxes": o.boxes, "work": o.work,
               "closed": dict(sorted(o.closed.items())), "reason": o.reason, "faces": faces,
               "faces_as_limits": _open_ends_text(p)}
        if o.status == "proved":
            out["tree"] = o.tree.encode()
            out["tree_sha256"] = o.tree.digest()
        if o.unexplored is not None:
            left, bound, lo, hi = o.unexplored
            out["unexplored"] = {"boxes": left, "lowest_float_margin_bound": _j(bound),
                                 "box": {str(s): [_j(a), _j(b)] for s, a, b in zip(p.symbols, lo, hi)}}
        if o.tightest is not None:
            bound, lo, hi = o.tightest
            out["tightest"] = {"core_lower_bound": bound,
                               "box": {str(s): [_j(a), _j(b)] for s, a, b in zip(p.symbols, lo, hi)}}
        return out


def _open_ends_text(p: Problem) -> list[str]:
    """The faces of the problem's box that no instance reaches (:meth:`Problem.open_end` on the whole box), as the
    record lists them: ``t = 0 (L -> oo)``, ``T = 0``, ``b_r0 = 1``, ..."""
    lo, hi = [c.lo for c in p.coordinates], [c.hi for c in p.coordinates]
    return sorted(f"{c.symbol} = {lo[d] if side < 0 else hi[d]:g}" + (" (L -> oo)" if c.kind == "length" else "")
                  for d, c in enumerate(p.coordinates) for side in (-1, 1) if p.open_end(d, side, lo, hi))


def _j(x: float) -> float | str:
    return x if math.isfinite(x) else ("inf" if x > 0 else "-inf")


@dataclass
class ProverResult:
    """What :func:`prove` concluded (module docstring)."""

    status: str  # proved / refuted / open / declined
    reason: str
    reports: list[ProblemReport] = field(default_factory=list)
    counterexample: Instance | None = None
    work: int = 0
    relaxation: Relaxation | None = None

    @property
    def boxes(self) -> int:
        return sum(r.outcome.boxes for r in self.reports)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": METHOD, "status": self.status, "reason": self.reason, "work": self.work,
                               "boxes": self.boxes, "problems": [r.to_json() for r in self.reports]}
        if self.status == "proved":
            digest = hashlib.sha256("".join(r.outcome.tree.digest() for r in self.reports).encode()).hexdigest()
            out["boxes_sha256"] = digest
            out["rests_on"] = (f"{RESTS_ON}, {self.boxes} boxes in {len(self.reports)} problem(s), every closed box "
                               f"re-checked in arb / mpmath.iv interval arithmetic")
        if self.relaxation is not None:
            sp_ = self.relaxation.space
            out["reduction"] = {"normaliser": sp_.normaliser_text, "hypotheses read": sp_.understood,
                                "problems": [p.describe() for p in self.relaxation.problems]}
        return out


def problems_for(work: int) -> int:
    """How many relaxed problems a relaxation may build on ``work`` (each is sympy's work, seconds for a large one,
    outside the branch and bound's count): at least :data:`MIN_PROBLEMS`, one per :data:`WORK_PER_PROBLEM` beyond."""
    return max(MIN_PROBLEMS, work // WORK_PER_PROBLEM)


def work_for(budget_s: float) -> int:
    """The prover's work for a budget of ``budget_s`` seconds (deterministic: the same on every machine)."""
    return max(MIN_WORK, int(WORK_PER_SECOND * float(budget_s)))


def prove(statement: Statement, *, work: int) -> ProverResult:
    """Relax ``statement`` and close its relaxed problems within ``work`` operations (module docstring). When a
    stronger statement proves it (:func:`_stronger`: without ``logits-bounded`` where no ``a`` is read; over every
    positive F where only the weights are read), each is tried first, on :data:`STRONGER_SHARE` of the work between
    them (their relaxations have fewer coordinates, and when true they usually close in a few boxes); a proof of one
    proves the statement, anything else says nothing about it, and the statement itself gets the rest of the work."""
    stronger = _stronger(statement)
    spent = 0
    for st, why in stronger:
        first = _prove(st, int(work * STRONGER_SHARE / len(stronger)))
        spent += first.work
        if first.status == "proved":
            first.reason += f" (for the stronger statement {why})"
            first.work = spent
            return first
    second = _prove(statement, max(work - spent, 0))
    second.work += spent
    return second


#: the part of the work the stronger statements (:func:`_stronger`) may spend first, between them
STRONGER_SHARE = 0.5


def _stronger(statement: Statement) -> list[tuple[Statement, str]]:
    """Statements whose proof proves ``statement``, each with what it drops: :func:`_without_restrictions`, and
    :func:`_over_the_simplex`."""
    out = []
    for st, why in ((_without_restrictions(statement), "without the hypothesis logits-bounded, which the relation does "
                                                      "not read"),
                    (_over_the_simplex(statement), "over every positive F: the relation reads the weights alone, and "
                                                   "the normaliser's are points of the simplex")):
        if st is not None:
            out.append((st, why))
    return out


def _without_restrictions(statement: Statement) -> Statement | None:
    """The statement without hypotheses that only restrict its instances, when it has some: ``logits-bounded`` when
    neither the relation nor its quantities read ``a`` (every instance of it is an instance without it)."""
    from attnbounds.theory.mathematics.hypotheses import LOGITS_BOUNDED, domain_hypothesis
    from attnbounds.theory.mathematics.quantities import QUANTITIES

    if LOGITS_BOUNDED not in statement.hypotheses or "a" in statement.symbols():
        return None
    if any(QUANTITIES[q].reads_logit_bound for q in statement.bindings.values()):
        return None
    return _without_a(statement, tuple(h for h in statement.hypotheses
                                       if h not in (LOGITS_BOUNDED, domain_hypothesis("a"))))


def _without_a(statement: Statement, hypotheses: tuple[Any, ...]) -> Statement:
    """``statement`` with these hypotheses, and without the logit bound ``a``'s default and fixed value (no hypothesis
    left reads it: a stronger statement's instances need none)."""
    import dataclasses

    return dataclasses.replace(statement, hypotheses=hypotheses,
                               defaults={k: v for k, v in statement.defaults.items() if k != "a"},
                               fixed={k: v for k, v in statement.fixed.items() if k != "a"})


def _over_the_simplex(statement: Statement) -> Statement | None:
    """The statement over every positive F (the hypothesis ``F-positive`` alone in place of the normaliser and the
    logits' bounds) when its relation reads the weights alone (quantities that need nothing but the weights and the
    selection, no logit bound) and its normaliser is softmax or another ``F / sum F`` with ``F > 0``: every instance
    of it is then an instance of the stronger one (its weights a point of the open simplex, which the log-F-values
    model ranges over). ``alpha_max*alpha_min <= 1/(4(L - 1))`` or ``abar_N >= N/L`` under softmax, whose own
    relaxation reads logits it does not need."""
    from attnbounds.theory.mathematics.hypotheses import (F_POSITIVE, LOGITS_BOUNDED, LOGITS_QK, SOFTMAX,
                                                          domain_hypothesis)
    from attnbounds.theory.mathematics.normalisers import RatioNormaliser
    from attnbounds.theory.mathematics.quantities import QUANTITIES

    if statement.kind != "deterministic" or "a" in statement.symbols() or not statement.bindings:
        return None
    if not all(QUANTITIES[q].needs <= {"selection"} and not QUANTITIES[q].normaliser and not QUANTITIES[q].F_extremes
               and not QUANTITIES[q].reads_logit_bound for q in statement.bindings.values()):
        return None
    fixing = [h for h in statement.hypotheses if h == SOFTMAX or h.names is not None]
    if not fixing or not all(h == SOFTMAX or (h.names is not None and isinstance(h.names.proto, RatioNormaliser)
                                              and h.names.proto.positive) for h in fixing):
        return None
    dropped = (SOFTMAX, LOGITS_BOUNDED, LOGITS_QK, domain_hypothesis("a"), F_POSITIVE)  # and every normaliser(...)
    return _without_a(statement, tuple(h for h in statement.hypotheses if h not in dropped and h.names is None)
                      + (F_POSITIVE,))


#: the part of its share a strategy other than a conjunct's last may spend (the last, exact one keeps the rest)
EARLY_SHARE = 0.25
#: the part of a group's share that the undivided twin of a problem whose core had factors of known sign divided out
#: (:func:`relax._with_unsigned`) may spend first: the twin exists for proofs the quotient's grouping hides, which
#: close in a few boxes; the quotient, which may need the work (an equality case closes in tens of boxes), gets the rest
TWIN_SHARE = 0.125


def _budgets(alternatives: list[Problem], share: int) -> Iterator[tuple[Problem, Callable[[int], int]]]:
    """The alternatives of a group in the order they are tried, each with its budget given the work the group has
    used so far: undivided twins and the common-reference twins (every weight over one token's F) first, each on
    :data:`TWIN_SHARE` of the share, then the others (fewest coordinates
    first) sharing what is left equally."""
    twins = [p for p in alternatives if p.realisation.get("common_reference")
             or any(q.unsigned is not None and p.core is q.unsigned[0] for q in alternatives)]
    rest = sorted((p for p in alternatives if not any(p is q for q in twins)), key=lambda p: len(p.coordinates))

    def probe(used: int) -> int:
        return max(int(share * TWIN_SHARE), 1)

    def part(k: int) -> Callable[[int], int]:  # at least half an equal part, whatever the twins overspent
        return lambda used: max((share - used) // (len(rest) - k), share // (2 * len(rest)), 1)

    for problem in twins:
        yield problem, probe
    for k, problem in enumerate(rest):
        yield problem, part(k)


def _prove(statement: Statement, work: int) -> ProverResult:
    try:
        rel = relax(statement, max_problems=problems_for(work))
    except Declined as exc:
        return ProverResult("declined", str(exc))
    except (AttnBoundsError, RecursionError, TypeError, ValueError, ArithmeticError) as exc:
        return ProverResult("declined", f"the relaxation could not be built: {type(exc).__name__}: {exc}"[:400])
    reports: list[ProblemReport] = []
    spent = 0
    remaining_groups = sum(len(per[-1]) for per in rel.strategies)
    #: a negative box of a problem whose margin only bounds the instance's (a quantity read through an upper bound of
    #: it, at another token, F's extremes over the tokens): realised, but the other strategies are tried first
    pending: tuple[str, ProblemReport, Instance] | None = None
    for c, per in enumerate(rel.strategies):
        proved_conjunct = False
        why = ""
        for k_strategy, strategy in enumerate(per):
            ok = True
            last = k_strategy in rel.final[c] if c < len(rel.final) else k_strategy == len(per) - 1
            for j, group in enumerate(strategy):
                # the work left, over the groups still to close: this strategy's from this one on and the other
                # conjuncts' (a group closed before leaves its share to those after it)
                share = max((work - spent) // max(remaining_groups - (j if last else 0), 1), 1)
                if not last:  # a strategy tried first leaves most of the work to those after it
                    share = max(int(share * EARLY_SHARE), 1)
                closed = False
                used = 0
                for problem, budget in _budgets(group.alternatives, share):
                    if problem.poles:  # no box closes across a pole: the lengths beside it are tried
                        why = f"conjunct {problem.conjunct}, {problem.pattern}: {_across_poles(problem)}"
                        inst = _beside_pole(problem, rel)
                        if inst is not None and problem.exact:  # certified by the caller
                            return ProverResult("refuted", why + "; violated beside its zero", reports, inst,
                                                work=spent, relaxation=rel)
                        continue
                    try:
                        programs = Programs.build(problem)
                        outcome = branch_and_bound(problem, budget(used), programs=programs)
                    except (AttnBoundsError, RecursionError, TypeError, ValueError, ArithmeticError) as exc:
                        why = f"{problem.pattern}: the branch and bound failed: {type(exc).__name__}: {exc}"[:400]
                        continue
                    spent += outcome.work
                    used += outcome.work
                    report = ProblemReport(problem, outcome, programs)
                    if outcome.status == "proved":
                        replayed, what = _replays(problem, outcome, programs)
                        if replayed:
                            reports.append(report)
                            closed = True
                            break
                        why = f"conjunct {problem.conjunct}, {problem.pattern}: its proof tree did not replay ({what})"
                        continue
                    why = f"conjunct {problem.conjunct}, {problem.pattern}: {outcome.reason}"
                    if outcome.status == "negative":
                        assert outcome.negative is not None
                        inst = realise(problem, rel, outcome.negative, programs)
                        if inst is not None and problem.exact:  # certified by the caller
                            return ProverResult("refuted", why, [*reports, report], inst, work=spent, relaxation=rel)
                        if inst is not None and pending is None:  # a bound's negative may be spurious
                            pending = (why, report, inst)
                if not closed:
                    ok = False
                    break
            if ok:
                proved_conjunct = True
                break
        remaining_groups -= len(per[-1])
        if not proved_conjunct:
            if pending is not None:
                return ProverResult("refuted", pending[0], [*reports, pending[1]], pending[2], work=spent,
                                    relaxation=rel)
            return ProverResult("open", why or "a group of the relaxation has no problem", reports, work=spent,
                                relaxation=rel)
    total = sum(r.outcome.boxes for r in reports)
    return ProverResult("proved", f"every box of {len(reports)} relaxed problem(s) closed ({total} boxes)", reports,
                        work=spent, relaxation=rel)


def _replays(problem: Problem, outcome: Outcome, programs: Programs) -> tuple[bool, str]:
    """Whether the tree of a "proved" outcome replays box by box from its tokens alone (what ``attnbounds prove
    --replay`` checks): a box the branch and bound lost or closed by a rule its replay refuses never counts as proved,
    whatever its bookkeeping said."""
    try:
        tokens = decode(outcome.tree.encode(), entry_bytes(len(problem.coordinates)) * outcome.boxes + 64)
        ok, what, _ = replay_tree(problem, tokens, programs=programs)
    except (AttnBoundsError, RecursionError, TypeError, ValueError, ArithmeticError) as exc:
        return False, f"{type(exc).__name__}: {exc}"[:200]
    return ok, what


# -- a negative box as an instance --------------------------------------------------------------------------------
#: how far into the open space a point of a closure face (t = 0, s = 0 or 1, ...) is moved, in turn
NUDGES = (1e-3, 1e-6, 1e-9, 1e-12, 1e-14)


def _candidates(problem: Problem, node: Node) -> list[np.ndarray]:
    """Points of the box to realise, inner ones first: its centre, then the corner nearest the smallest margin moved
    off the closure faces by each of :data:`NUDGES`."""
    lo, hi = node.lo.copy(), node.hi.copy()
    finite_lo = np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), hi - 1.0, 0.0))
    finite_hi = np.where(np.isfinite(hi), hi, finite_lo + 1.0)
    out = [finite_lo / 2 + finite_hi / 2]
    for nudge in NUDGES:
        p = out[0].copy()
        for d, c in enumerate(problem.coordinates):
            if p[d] <= c.lo:
                p[d] = _inside(c, -1, nudge)
            elif p[d] >= c.hi:
                p[d] = _inside(c, 1, nudge)
        out.append(p)
    return out


def _inside(c: Coordinate, side: int, nudge: float) -> float:
    """The end ``side`` (-1: lower, +1: upper) of coordinate ``c`` moved into its range by ``nudge`` times its width (1
    when unbounded); ``t``'s lower end to ``nudge`` itself (a length of ``1/nudge``)."""
    width = c.hi - c.lo if math.isfinite(c.hi - c.lo) else 1.0
    if side < 0:
        return c.lo + nudge * width if c.kind != "length" else max(c.lo, nudge)
    return c.hi - nudge * width


#: lengths tried, shortest first, when a negative point lies on the face t = 0 (L -> oo)
LENGTHS = tuple(10**k for k in range(1, 16))


def realise(problem: Problem, rel: Relaxation, node: Node, programs: Programs) -> Instance | None:
    """A token-class instance at a point of the negative box that violates the statement (None if none does): at
    the shortest length of :data:`LENGTHS` that still violates it when the box reaches L -> oo.

    The points whose float margins are negative come first (the caller certifies the instance); then every point
    again, each instance certified in interval arithmetic here: a float64 margin that rounds to 0 or to the wrong
    sign (weights below the doubles' range, an exact tie) says nothing."""
    point_program = compile_program([problem.core], problem.symbols)
    t_index = next((d for d, c in enumerate(problem.coordinates) if c.symbol == t_sym), None)
    points = []
    for p in _candidates(problem, node):
        if t_index is not None and node.lo[t_index] <= problem.coordinates[t_index].lo + 1e-12:
            points += [_with(p, t_index, 1.0 / L) for L in LENGTHS if problem.coordinates[t_index].lo <= 1.0 / L
                       <= problem.coordinates[t_index].hi]
        points.append(p)
    for certified in (False, True):
        for q in points:
            inst = _violating(problem, rel, point_program, q, certified)
            if inst is not None:
                return inst
    return None


#: lengths tried on each side of a zero of a divisor that may change sign (the integers nearest it first)
BESIDE_POLE = 2


def _across_poles(problem: Problem) -> str:
    """Why a problem with :attr:`Problem.poles` closes no box."""
    return (f"the margin may divide by 0 inside the relaxed space ({', '.join(map(str, problem.poles))} "
            f"{'has' if len(problem.poles) == 1 else 'have'} no certain sign there)")


def _beside_pole(problem: Problem, rel: Relaxation) -> Instance | None:
    """A violating instance at a length next to a zero of one of the problem's divisors (:attr:`Problem.poles`) that
    read ``t`` alone: their real zeros ``t*`` in the range of ``t`` give lengths ``1/t*``; at the
    :data:`BESIDE_POLE` integers on each side of each, the root box's centre and its corners moved into the box by
    each of :data:`NUDGES` are realised, every point in float64 first, then the first :data:`BESIDE_POLE_CERTIFIED`
    certified (``alpha_max <= 1 + 10^-6/((L - 1000.5) (L - 999.5))``: false at L = 1000 only, between its two poles,
    where the largest weight exceeds ``1 - 4 10^-6``)."""
    t_index = next((d for d, c in enumerate(problem.coordinates) if c.symbol == t_sym), None)
    if t_index is None:
        return None
    c = problem.coordinates[t_index]
    zeros: list[complex] = []
    for divisor in problem.poles:
        if divisor.free_symbols != {t_sym}:
            continue
        try:
            zeros += [complex(z) for z in sp.Poly(sp.numer(sp.together(divisor)), t_sym).nroots(n=30)]
        except (sp.PolynomialError, sp.polys.polyerrors.PolificationFailed, TypeError, ValueError, ArithmeticError):
            continue
    lengths = sorted({L for z in zeros if abs(z.imag) <= 1e-12 * max(abs(z.real), 1.0) and c.lo <= z.real <= c.hi
                      and z.real > 0 for k in range(BESIDE_POLE)
                      for L in (math.floor(1 / z.real) - k, math.ceil(1 / z.real) + k)
                      if 1 <= L <= MAX_LENGTH and c.lo <= 1.0 / L <= c.hi})
    if not lengths:
        return None
    others = [d for d in range(len(problem.coordinates)) if d != t_index][:MAX_CORNER_AXES]
    lo = np.array([k.lo for k in problem.coordinates], dtype=float)
    hi = np.array([k.hi for k in problem.coordinates], dtype=float)
    centre = _candidates(problem, Node(lo, hi, lo.copy(), hi.copy()))[0]
    shapes = [centre]
    for nudge in NUDGES:
        for corner in itertools.product((-1, 1), repeat=len(others)):
            p = centre.copy()
            for d, side in zip(others, corner):
                p[d] = _inside(problem.coordinates[d], side, nudge)
            if np.all(np.isfinite(p)):
                shapes.append(p)
    program = compile_program([problem.core], problem.symbols)
    points = [_with(p, t_index, 1.0 / L) for L in lengths for p in shapes]
    for certified in (False, True):
        for q in points[:BESIDE_POLE_CERTIFIED] if certified else points:
            inst = _violating(problem, rel, program, q, certified)
            if inst is not None:
                return inst
    return None


#: the most points beside a pole certified whatever their float margins say, and the most coordinates whose corners
#: are tried there (2 ** MAX_CORNER_AXES corners a nudge)
BESIDE_POLE_CERTIFIED = 32
MAX_CORNER_AXES = 6


def _with(p: np.ndarray, d: int, value: float) -> np.ndarray:
    q = p.copy()
    q[d] = value
    return q


def _violating(problem: Problem, rel: Relaxation, program: Any, p: np.ndarray, certified: bool) -> Instance | None:
    """The instance at ``p`` when its relaxed and its own float margins are negative; with ``certified``, when
    certification says it is violated (whatever the float margins say)."""
    if not certified and not run_float(program, p[None], p[None])[0][1][0] < 0:
        return None
    values = {s: float(v) for s, v in zip(problem.symbols, p)}
    try:
        inst = _instance(problem, rel, values)
    except (AttnBoundsError, TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None
    if inst is None:
        return None
    if certified:
        from attnbounds.theory.deciding.certify import certify

        for exact in (False, True):  # the logits at a bound a no double is: the double below it, else a itself
            try:
                one = inst if not exact else _instance(problem, rel, values, exact=True)
                if one is not None and certify(rel.statement, one, 0).status == "violated":
                    return one
            except (AttnBoundsError, TypeError, ValueError, ZeroDivisionError, OverflowError):
                continue
        return None
    try:  # an instance the statement cannot read (a parameter the weaker statement of prove() dropped): none
        ev = rel.statement.evaluate(inst)
    except AttnBoundsError:
        return None
    return inst if bool(ev.applicable[0]) and bool(ev.margin_hi[0] < 0) else None


def _number(expr: sp.Expr, values: dict[sp.Symbol, float]) -> float:
    return float(sp.N(sp.sympify(expr).xreplace({s: sp.Float(v, 30) for s, v in values.items()}), 30))


def _instance(problem: Problem, rel: Relaxation, values: dict[sp.Symbol, float], exact: bool = False
              ) -> Instance | None:
    """The instance at a point: L from t, each distinguished token one token, each atom a class of tokens. A logit
    at a bound ``a`` that no double is (``1/10``) is the double below it; with ``exact``, ``a`` itself, as an exact
    logit (None where that is the float instance)."""
    st, space = rel.statement, rel.space
    info = problem.realisation
    if info.get("reference") is not None and space.simplex_map is None:  # log F values: F need not take them
        return None  # (LogFValues), but a threshold map's bounded simplex is its weights (below)
    if info.get("slopes") is not None:  # every F with its slopes: a point is no instance of one F
        return None
    values = dict(values)
    for expr in problem.parameters.values():  # a parameter the core does not read (T scaled out, say): any value in
        for sym in sp.sympify(expr).free_symbols:  # its range (1 where it may be)
            name, g = problem.parameter_of(sym)  # (name / g on a range of decimal ends, rounded inward)
            lo, hi = space.boxes.get(name, (-math.inf, math.inf))
            lo, hi = (lo if not math.isfinite(lo) else outward(Fraction(lo) / g, 1),
                      hi if not math.isfinite(hi) else outward(Fraction(hi) / g, -1))
            values.setdefault(sym, min(max(1.0, lo), hi))
    t = values.get(t_sym)
    L_lo, L_hi = info["L_range"]
    if t is None and L_lo == L_hi:  # one length: t is exact in the core, no coordinate
        t = values[t_sym] = 1.0 / L_lo
    if t is None or t <= 0:
        L = int(min(max(L_lo, 1e6 if t is None else MAX_LENGTH), L_hi))
    else:
        L = int(min(max(round(1.0 / t), L_lo), L_hi, MAX_LENGTH))
    k = len(info["roles"])
    if L < k:
        return None
    if info.get("reference") is not None:
        return _bounded_simplex_instance(problem, rel, values, L)
    logits = [_number(l, values) for l in info["roles"]]
    counts = [1] * k
    others = L - k
    masses = [max(_number(m, values), 0.0) for m in info["masses"]]
    if info["weights_model"]:  # each atom: about mass / weight tokens (of its share of the others' weight)
        for l_expr, n_expr in zip(info["atoms"], info["atom_counts"]):
            c = int(min(round(_number(n_expr, values)), MAX_LENGTH // max(len(info["atoms"]), 1)))
            if c > 0:
                logits.append(_number(l_expr, values))
                counts.append(c)
        if not info["atoms"] and info["others_logit"] is not None and (t is None or others > 0):
            # the margin reads only the others' total weight: the L - k others share it (L is the point's), or, where
            # the margin does not read L, many small ones when a distinguished token must dominate them
            n = others if t is not None else 1000 if info["constrained"] else 1
            try:
                logits.append(_number(info["others_logit"], values) - float(values.get(sp.Symbol("T", positive=True), 1.0)) * math.log(n))
            except (TypeError, ValueError):
                pass
            else:
                counts.append(n)
    elif info["N"] is not None:  # the top-N selection: N tokens, the selected distinguished ones and the selected
        N = int(min(max(round(_number(info["N"], {**values, t_sym: 1.0 / L})), 1), L))  # atoms'; the rest the others
        on = info.get("role_selected") or []
        k_sel = sum(1 for side in on if side)
        if N < k_sel or L - N < len(on) - k_sel:
            return None
        for atom_logits, atom_masses, total in ((info["selected_atoms"], info["selected_masses"], N - k_sel),
                                                (info["atoms"], info["masses"], L - N - (len(on) - k_sel))):
            for l_expr, c in zip(atom_logits, _counts([max(_number(m, values), 0.0) for m in atom_masses], total)):
                if c > 0:
                    logits.append(_number(l_expr, values))
                    counts.append(int(c))
    elif others > 0 and masses:
        for l_expr, c in zip(info["atoms"], _counts(masses, others)):
            if c > 0:
                logits.append(_number(l_expr, values))
                counts.append(int(c))
    elif others > 0:
        return None
    if not all(math.isfinite(x) for x in logits):
        return None
    a_exact = _rational_a(problem)
    exact_logits: list[Fraction] | None = None
    if space.bounded_logits and a_exact is not None and not info.get("keys"):  # |l| <= a = 1/10: float(1/10) exceeds
        bound = outward(a_exact, -1)  # it, so the logits at +-a are realised at the double below, or, ``exact``, at
        logits = [min(max(v, -bound), bound) for v in logits]  # +-a itself as exact logits (an equality no double is)
        if exact:
            if bound == a_exact or not any(abs(v) == bound for v in logits):
                return None  # the same instance as the float one
            exact_logits = [a_exact if v == bound else -a_exact if v == -bound else Fraction(v) for v in logits]
    elif exact:
        return None
    params = {name: _number(expr, values) for name, expr in problem.parameters.items()
              if name not in st.defaults or not isinstance(st.defaults[name], str)}
    T = params.pop("T", 1.0)
    normaliser = space.make(T)
    extra: dict[str, Any] = {k_: v for k_, v in params.items() if k_ not in normaliser.params and k_ != "N"
             and k_ in st.parameters() | set(st.fixed)}
    N_ = N if info["N"] is not None else None
    if info.get("keys"):  # logits-qk: l_j = <q, k_j> with q = e_1, the roles' keys along q (||q|| ||k_j|| = |l_j|, the
        # least Cauchy-Schwarz allows), the others' of norm a (the keys' bound Delta_max)
        a = _number(problem.parameters["a"], values)
        keys = [[l, 0.0] if j < k else [l, math.sqrt(max(a * a - l * l, 0.0))] for j, l in enumerate(logits)]
        inst = Instance.from_qk(np.array([[1.0, 0.0]]), np.array([keys]), normaliser, counts=np.array([counts]), N=N_,
                                **extra)
    elif exact_logits is not None:  # each column's exact logit by its double (a top-N split reorders the columns)
        floats = [float(v) for v in exact_logits]
        inst = Instance.from_logits(np.array([floats]), normaliser, counts=np.array([counts]), N=N_, **extra)
        assert inst.logits is not None
        by_double = dict(zip(floats, exact_logits))
        inst = inst.with_exact_logits([[by_double[float(v)] for v in inst.logits[0]]])
    else:
        inst = Instance.from_logits(np.array([logits]), normaliser, counts=np.array([counts]), N=N_, **extra)
    # the statement's fixed values and defaults too (a bound of the logits the core does not read, say)
    return st.prepare(inst)


def _rational_a(problem: Problem) -> Fraction | None:
    """The logits' bound ``a`` as the exact rational the problem reads (``1/10``), or None where it is not one."""
    a = sp.sympify(problem.parameters.get("a", sp.nan))
    return Fraction(int(a.p), int(a.q)) if a.is_Rational else None


def _bounded_simplex_instance(problem: Problem, rel: Relaxation, values: dict[sp.Symbol, float], L: int
                              ) -> Instance | None:
    """A point of a threshold map's bounded simplex (:func:`~attnbounds.theory.deciding.prover.relax._spread_constraints`)
    as logits: the weights ``p`` from the tokens' log F values (each atom a class, its tokens in proportion to its
    mass), then ``l_j = T (p_j^q - min p^q) / q - a``, which the map takes back to ``p`` (the map's threshold at
    ``-a``'s), each in ``[-a, a]`` where the point keeps the spread (clipped, the caller certifies)."""
    space, info = rel.space, problem.realisation
    if space.simplex_map is None or space.spread is None or info.get("bracket") or info["points"] or info["N"] is not None:
        return None
    k = len(info["role_coordinates"])
    D = [values.get(s, 0.0) for s in info["role_coordinates"]]
    counts = [1] * k
    for sym, c in zip(info["atom_coordinates"], _counts([max(_number(m, values), 0.0) for m in info["masses"]], L - k)):
        if c > 0:
            D.append(values.get(sym, 0.0))
            counts.append(c)
    d = np.array(D, dtype=float)
    if np.any(np.isnan(d)) or np.all(d == -np.inf):
        return None
    # D = -oo: a weight 0; D = +oo (over a least weight's token, the closure): the only weights that are not 0
    F = (d == np.inf).astype(float) if np.any(d == np.inf) else np.exp(d - d.max())
    p = F / float((F * np.array(counts)).sum())
    q = float(space.spread)
    st = rel.statement
    params = {name: _number(expr, values) for name, expr in problem.parameters.items()
              if name not in st.defaults or not isinstance(st.defaults[name], str)}
    T, a = params.pop("T", 1.0), params.get("a", math.nan)
    if not (math.isfinite(a) and a > 0 and math.isfinite(T) and T > 0):
        return None
    a_exact = _rational_a(problem)  # a = 1/10: its double exceeds it, the logits stay below
    bound = outward(a_exact, -1) if a_exact is not None else a
    h = p**q
    logits = np.clip(T * (h - h.min()) / q - a, -bound, bound)
    normaliser = space.simplex_map(T)
    extra: dict[str, Any] = {k_: v for k_, v in params.items() if k_ not in normaliser.params and k_ != "N"
                             and k_ in st.parameters() | set(st.fixed)}
    inst = Instance.from_logits(logits[None], normaliser, counts=np.array([counts]), **extra)
    return st.prepare(inst)


def _counts(masses: list[float], total: int) -> list[int]:
    """Whole token counts in proportion to ``masses`` summing to ``total`` (largest remainders). Masses past the
    doubles (inf) share the tokens alike, an undefined (nan) or negative one counts as none, and all-zero masses as
    equal ones."""
    if total <= 0 or not masses:
        return [0] * len(masses)
    m = np.array(masses, dtype=float)
    m = np.where(m > 0, m, 0.0)
    if np.isposinf(m).any():
        m = np.isposinf(m).astype(float)
    m = m / m.max() if m.max() > 0 else np.ones_like(m)  # the largest 1: neither the sum nor a share under/overflows
    raw = m / m.sum() * total
    n = np.floor(raw).astype(np.int64)
    for j in np.argsort(-(raw - n))[: total - int(n.sum())]:
        n[j] += 1
    return [int(c) for c in n]


# -- replay from a record -----------------------------------------------------------------------------------------
#: the fields of a recorded problem that must equal those of the problem the replay rebuilds from the statement
PROBLEM_FIELDS = ("conjunct", "pattern", "coordinates", "model", "atoms", "totals", "strict", "stripped", "signs",
                  "margin", "core", "constraints")


def problem_fields(p: Problem) -> dict[str, Any]:
    """What a certificate says of one problem besides its tree: its coordinates with their root box, its core,
    constraints and the facts it rests on (as JSON)."""
    return {"conjunct": p.conjunct, "pattern": p.pattern, "coordinates": [c.to_json() for c in p.coordinates],
            "model": p.model, "atoms": p.atoms, "totals": p.moments, "strict": p.strict, "stripped": list(p.stripped),
            "signs": [[sp.srepr(a), k] for a, k in p.signs], "margin": sp.srepr(p.margin), "core": sp.srepr(p.core),
            "constraints": [sp.srepr(c) for c in p.constraints]}


def _same(a: Any, b: Any) -> bool:
    """JSON equality (1 and 1.0 alike, as JSON reads them; booleans apart from numbers)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return float(a) == float(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _difference(recorded: dict[str, Any], built: list[Problem]) -> str:
    """Why a recorded problem is none of the rebuilt ones: the first field in which it differs from the rebuilt
    problem of the same conjunct and pattern that it comes closest to."""
    same_place = [p for p in built if _same(recorded.get("conjunct"), p.conjunct) and recorded.get("pattern") == p.pattern]
    if not same_place:
        have = sorted({f"conjunct {p.conjunct}, {p.pattern}" for p in built})
        return (f"the statement's relaxation has no problem of conjunct {recorded.get('conjunct')!r}, pattern "
                f"{str(recorded.get('pattern'))[:120]!r} (it has: {'; '.join(have)[:400]})")
    best = max(same_place, key=lambda p: sum(_same(recorded.get(f), v) for f, v in problem_fields(p).items()))
    fields = problem_fields(best)
    for f in PROBLEM_FIELDS:
        if not _same(recorded.get(f), fields[f]):
            if f == "coordinates" and isinstance(recorded.get(f), list):
                for c_rec, c_built in zip(recorded[f], fields[f]):
                    if not _same(c_rec, c_built):
                        return (f"its coordinate {c_built['name']} is {str(c_rec)[:160]}; the statement's relaxation "
                                f"has {c_built}")
            return (f"its {f} is {str(recorded.get(f))[:160]!r}; the statement's relaxation has "
                    f"{str(fields[f])[:160]!r}")
    return "it differs from every problem of the statement's relaxation"


def replay(statement: Statement, certificate: Any) -> tuple[bool, str]:
    """Re-derive and re-check a ``relaxation`` certificate of ``statement`` (never trusting the certificate's own
    problems): this version's relaxation of the statement is rebuilt (and, as :func:`prove` may, of the stronger
    statement without hypotheses that only restrict its instances); every recorded problem must be one of the rebuilt
    problems field for field (its coordinates with their root box, core, constraints, signs), every conjunct must be
    covered (a strategy of it whose every group has a recorded problem), and every recorded tree must re-check box by
    box in rigorous interval arithmetic on the rebuilt problem (faces checked equal to the core by exact algebra).

    Returns ``(ok, what was re-checked or why not)``; a certificate of the wrong shape raises
    :class:`~attnbounds.theory.mathematics.errors.InvalidArgument` naming the field."""
    problems = _check_shape(certificate)
    tried = []
    for st, stronger in ((statement, ""), *_stronger(statement)):
        try:
            rel = relax(st)
        except Declined as exc:
            tried.append(f"the statement has no relaxation now: {exc}")
            continue
        except (AttnBoundsError, RecursionError, TypeError, ValueError, ArithmeticError) as exc:
            tried.append(f"the statement's relaxation cannot be built: {type(exc).__name__}: {exc}"[:400])
            continue
        ok, why = _replay_relaxation(rel, certificate, problems)
        if ok:
            return True, why + (f" (of the stronger statement {stronger})" if stronger else "")
        tried.append(why)
    return False, " / ".join(tried)


def _check_shape(certificate: Any) -> list[dict[str, Any]]:
    """The certificate's problems, after checking the types of what the replay reads (InvalidArgument otherwise)."""
    def bad(field_: str, want: str, got: Any) -> InvalidArgument:
        return InvalidArgument(f"relaxation.{field_} must be {want}, got {str(got)[:80]!r} ({type(got).__name__})")

    if not isinstance(certificate, dict):
        raise bad("", "an object", certificate)
    if certificate.get("status") != "proved":
        raise InvalidArgument(f"relaxation.status is {str(certificate.get('status'))[:40]!r}: only a proved certificate "
                              f"is replayed")
    problems = certificate.get("problems")
    if not isinstance(problems, list) or not problems:
        raise bad("problems", "a non-empty list of problems", problems)
    if not isinstance(certificate.get("boxes_sha256"), str):
        raise bad("boxes_sha256", "a string", certificate.get("boxes_sha256"))
    for k, pj in enumerate(problems):
        if not isinstance(pj, dict):
            raise bad(f"problems[{k}]", "an object", pj)
        for name, kind, want in (("tree", str, "a string"), ("faces", dict, "an object"), ("coordinates", list, "a list"),
                                 ("constraints", list, "a list"), ("signs", list, "a list"), ("pattern", str, "a string"),
                                 ("boxes", int, "a whole number")):
            if not isinstance(pj.get(name), kind) or isinstance(pj.get(name), bool):
                raise bad(f"problems[{k}].{name}", want, pj.get(name))
        for key, forms in pj["faces"].items():
            if not isinstance(forms, list) or not all(isinstance(f, str) for f in forms):
                raise bad(f"problems[{k}].faces[{key!r}]", "a list of expressions", forms)
    return problems


def _replay_relaxation(rel: Relaxation, certificate: dict[str, Any], problems: list[dict[str, Any]]) -> tuple[bool, str]:
    built = rel.problems
    keyed = [(problem_fields(p), p) for p in built]
    closed: set[int] = set()
    digests = []
    leaves = 0
    for k, pj in enumerate(problems):
        recorded = {f: pj.get(f) for f in PROBLEM_FIELDS}
        problem = next((p for fields, p in keyed if _same(recorded, fields)), None)
        where = f"problem {k} ({str(pj.get('pattern'))[:80]})"
        if problem is None:
            return False, f"{where} is not a problem of the statement's relaxation: {_difference(recorded, built)}"
        faces = _faces(pj, problem, where)
        why = _check_core(problem) or check_faces(problem, faces)
        if why:
            return False, f"{where}: {why}"
        try:
            tokens = _tree(pj, len(problem.coordinates), where)
            ok, what, n = replay_tree(problem, tokens, programs=Programs(problem, faces))
        except (ValueError, TypeError, IndexError, KeyError, ArithmeticError, RecursionError, AttnBoundsError) as exc:
            raise InvalidArgument(f"relaxation.problems[{k}].tree is malformed: {type(exc).__name__}: {exc}"[:300]) from None
        if not ok:
            return False, f"{where}: {what}"
        leaves += n
        closed.add(id(problem))
        digests.append(hashlib.sha256(pj["tree"].encode()).hexdigest())
    for c, per in enumerate(rel.strategies):
        if not any(all(any(id(p) in closed for p in g.alternatives) for g in strategy) for strategy in per):
            missing = [g for g in per[-1] if not any(id(p) in closed for p in g.alternatives)]
            return False, (f"conjunct {c} is not covered: no proved problem for "
                           f"{'; '.join(g.pattern for g in missing)[:300]} (the relaxation needs every pattern of a "
                           f"strategy proved)")
    if hashlib.sha256("".join(digests).encode()).hexdigest() != certificate.get("boxes_sha256"):
        return False, "the hash of the box lists differs from the certificate's"
    return True, f"{len(problems)} problem(s) of the statement's relaxation re-checked, {leaves} closed boxes"


def _faces(pj: dict[str, Any], problem: Problem, where: str) -> dict[tuple[tuple[int, float], ...], list[sp.Expr]]:
    """The recorded faces (read with :func:`~attnbounds.theory.mathematics.srepr.parse_srepr`; :func:`check_faces`
    then checks each equal to the core on its face)."""
    from attnbounds.theory.mathematics.srepr import parse_srepr

    n = len(problem.coordinates)
    out = {}
    for key, forms in pj["faces"].items():
        try:
            fixed = tuple((int(d), float(v)) for d, v in _literal(key))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
            raise InvalidArgument(f"{where}: the face key {str(key)[:80]!r} is not a list of (coordinate, value) pairs: "
                                  f"{exc}"[:300]) from None
        if not all(0 <= d < n and math.isfinite(v) for d, v in fixed):
            raise InvalidArgument(f"{where}: the face {str(key)[:80]!r} fixes a coordinate the problem does not have")
        out[fixed] = [parse_srepr(f, where=f"{where}: face {key}") for f in forms]
    return out


def _tree(pj: dict[str, Any], n: int, where: str) -> list[str]:
    """The recorded tree's tokens (:func:`bnb.decode`) for a problem of ``n`` coordinates, inflated within
    :func:`bnb.entry_bytes` bytes a recorded box, at most ``bnb.MAX_NODES`` boxes, and as many as the recorded box
    count."""
    from attnbounds.theory.deciding.prover.bnb import MAX_NODES

    boxes = pj["boxes"]
    if not 0 < boxes <= MAX_NODES:
        raise InvalidArgument(f"{where}: boxes = {boxes}; a tree holds 1 to {MAX_NODES} boxes")
    try:
        tokens = decode(pj["tree"], entry_bytes(n) * boxes + 64)
    except ValueError as exc:
        raise InvalidArgument(f"{where}: {exc} ({boxes} boxes recorded)"[:300]) from None
    if len(tokens) != boxes:
        raise InvalidArgument(f"{where}: the tree must be a list of {boxes} box entries (the recorded box count)")
    return tokens


def _literal(text: str) -> list[Any]:
    import ast

    if len(text) > 10_000:
        raise ValueError("too long")
    value = ast.literal_eval(text)
    if not isinstance(value, list):
        raise ValueError(f"a face key must be a list, got {text!r}")
    return value


def _check_core(problem: Problem) -> str | None:
    """Why the core is not the margin up to the stripped positive factors and the certified signs, or None (a core
    that may divide by 0 on its box closes no box: a tree for it is refused)."""
    if problem.poles:
        return _across_poles(problem)
    box_lo = [c.lo for c in problem.coordinates]
    box_hi = [c.hi for c in problem.coordinates]
    syms = problem.symbols
    for arg, k in problem.signs:
        if not arg.free_symbols <= set(syms):
            return f"a sign fact reads symbols outside the coordinates: {arg}"
        (a, b), = run_rigorous(compile_program([arg], syms), box_lo, box_hi, "mpmath.iv")
        if not (a >= 0 if k > 0 else b <= 0):
            return f"the sign of {arg} is not certain on the box"
    return None


__all__ = ["Declined", "ProverResult", "problem_fields", "prove", "realise", "replay", "work_for"]
