"""``attnbounds.tighten``: the best constant of a bound, as a certified bracket.

For a relation monotone in one free constant (``"L*alpha_max <= C"``), :func:`tighten` returns the best constant as
a bracket ``[lower, upper]`` whose two sides each carry a record made by the same checks as
:func:`attnbounds.check`: on one side the bound is PROVED for every L (the relaxation prover), on the other it is
REFUTED with a counterexample certified in interval arithmetic. So the best constant lies in the bracket::

    import attnbounds
    t = attnbounds.tighten("L*alpha_max <= C", hypotheses=["softmax", "logits-bounded"], fixed={"T": 1, "a": 1})
    print(t)  # L*alpha_max <= C: best C in [7.3890532 (REFUTED), 7.3890575 (PROVED)], relative width 5.8e-07, ...
    t.lower, t.upper, t.proved, t.refuted, t.relative_width, t.checks, t.to_json()

Which side is which follows from the sign of ``d(margin)/dC`` (``margin = rhs - lhs`` of ``<=``), decided
symbolically with the statement's parameter domains and the quantities' signs: where the margin grows with C (an
upper bound such as ``expr <= C``) the bound is PROVED at ``upper`` and REFUTED at ``lower``; where it falls
(``expr >= C``) PROVED at ``lower`` and REFUTED at ``upper``. A relation whose margin has no sign sympy can decide
is refused (:class:`~attnbounds.theory.mathematics.errors.InvalidArgument`), never bisected blindly.

Every record is about exactly the constant it names: the statement is loaded once with C as a declared parameter
and each check substitutes a rational (a short decimal, :meth:`Statement.subs`), so the record's id reads
``id{C=7389056/1000000}`` and its relation holds that number exactly. The search (:func:`_search`) jumps rather than
bisects: a certified counterexample at C = c has a value of the bounded expression (the C at which its own margin
vanishes, found in float64 from the statement itself), a lower bound on the best constant for an upper bound; so
are the tightest instances of the other records. The next constant is tried just past the best such value, the
step growing geometrically while the guess is wrong, and only then is the bracket bisected (geometrically when
both sides have one sign). Seeded: the same seed and budget give the same checks and the same bracket.

A side that no check settled is None, and :attr:`TightenResult.reason` says why the search stopped: converged
(relative width <= ``rtol``), out of checks, a verdict only VERIFIED / UNDECIDED at some constant (the relaxation
prover declined the statement or ran out of work: the record's reason is quoted), a verdict not certified (a
Python callable normaliser), NOT-APPLICABLE or ERROR.
"""

from __future__ import annotations

import dataclasses
import html
import math
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import sympy as sp

from attnbounds.theory.io.records import Record
from attnbounds.theory.mathematics.errors import InvalidArgument

#: the relative width a bracket is narrowed to by default
DEFAULT_RTOL = 1e-6
#: the most checks one tighten runs by default (each is one :func:`attnbounds.check` at the budget)
DEFAULT_MAX_CHECKS = 40
#: consecutive checks without PROVED or REFUTED after which the search stops
MAX_STALLS = 3
#: the first relative step of an expanding search that has no instance value to start from (it grows 8-fold)
BLIND_STEP = 1e-3
#: significant digits a tried constant is written with at most
MAX_DIGITS = 17

Status = str  # "converged", "stopped"


@dataclass(frozen=True)
class Step:
    """One check of a tighten: the constant (exact), its verdict, the prover's boxes, seconds, and the value of the
    bounded expression the check's instances gave (None where they gave none)."""

    constant: str
    value: float
    verdict: str
    boxes: int
    seconds: float
    why: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TightenResult:
    """The bracket of :func:`tighten` (module docstring).

    ``lower`` / ``upper``: the bracket's sides as floats (None when no check settled that side); ``lower_exact`` /
    ``upper_exact``: the same as exact rationals ``"p/q"``, the constants the records are about. ``proved`` /
    ``refuted``: the records (PROVED, and REFUTED with a certified counterexample); ``proved_side``: ``"upper"`` when
    the bound is PROVED at ``upper`` (an upper bound such as ``expr <= C``), ``"lower"`` otherwise. ``status``:
    ``"converged"`` (``relative_width <= rtol``) or ``"stopped"``, ``reason`` says why. ``checks``: checks run;
    ``boxes``: the relaxation prover's boxes over every check; ``seconds``: wall time; ``estimate``: the best value of
    the bounded expression seen at an instance (float64; a value the best constant is at least (upper bound) or at
    most (lower bound), not a certified one); ``steps``: every check in order."""

    relation: str
    constant: str
    proved_side: str
    lower: float | None
    upper: float | None
    lower_exact: str | None
    upper_exact: str | None
    proved: Record | None = field(repr=False)
    refuted: Record | None = field(repr=False)
    relative_width: float | None
    rtol: float
    status: Status
    reason: str
    checks: int
    boxes: int
    seconds: float
    estimate: float | None
    seed: int
    budget_s: float
    steps: tuple[Step, ...] = field(repr=False, default=())
    #: the constant nearest the best one on the PROVED side where a check said only VERIFIED (searched, nothing
    #: found, not proved), exact; None when there is none
    best_verified: str | None = None

    @property
    def converged(self) -> bool:
        return self.status == "converged"

    def _side(self, value: float | None, side: str) -> str:
        if value is None:
            return "?"
        verdict = "PROVED" if side == self.proved_side else "REFUTED"
        return f"{value:.9g} ({verdict})"

    def bracket_text(self) -> str:
        """``[lower, upper]`` with each side's verdict, ``?`` for a side no check settled."""
        return f"[{self._side(self.lower, 'lower')}, {self._side(self.upper, 'upper')}]"

    def __str__(self) -> str:
        width = "n/a" if self.relative_width is None else f"{self.relative_width:.2g}"
        return (f"{self.relation}: best {self.constant} in {self.bracket_text()}, relative width {width}, "
                f"{self.status} after {self.checks} checks in {self.seconds:.1f} s: {' '.join(self.reason.split())}")

    def _rows(self) -> list[tuple[str, str]]:
        width = "n/a" if self.relative_width is None else f"{self.relative_width:.3g}"
        return [("relation", self.relation), ("best constant", f"{self.constant} in {self.bracket_text()}"),
                ("exact sides", f"[{self.lower_exact or '?'}, {self.upper_exact or '?'}]"
                                + (f"; VERIFIED only (not proved) at {self.best_verified}" if self.best_verified else "")),
                ("relative width", f"{width} (target {self.rtol:g})"), ("status", f"{self.status}: {self.reason}"),
                ("PROVED record", "none" if self.proved is None else f"{self.proved.id} ({self.proved.content_hash[:16]})"),
                ("REFUTED record", "none" if self.refuted is None else f"{self.refuted.id} ({self.refuted.content_hash[:16]})"),
                ("work", f"{self.checks} checks, {self.boxes} prover boxes, {self.seconds:.1f} s "
                         f"(budget {self.budget_s:g} s per check, seed {self.seed})")]

    def _repr_markdown_(self) -> str:
        from attnbounds.theory.io.markdown import markdown_text

        lines = ["| | |", "|---|---|"]
        lines += [f"| {k} | {markdown_text(v)} |" for k, v in self._rows()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
                       f"{html.escape(v)}</td></tr>" for k, v in self._rows())
        return f"<table class='attnbounds-tighten'>{rows}</table>"

    def to_json(self) -> dict[str, Any]:
        """Everything, the two records in full (JSON-ready)."""
        return {"relation": self.relation, "constant": self.constant, "proved_side": self.proved_side,
                "lower": self.lower, "upper": self.upper, "lower_exact": self.lower_exact,
                "upper_exact": self.upper_exact, "relative_width": self.relative_width, "rtol": self.rtol,
                "status": self.status, "reason": self.reason, "checks": self.checks, "boxes": self.boxes,
                "seconds": self.seconds, "estimate": self.estimate, "seed": self.seed, "budget_s": self.budget_s,
                "best_verified": self.best_verified, "steps": [s.to_json() for s in self.steps],
                "proved": None if self.proved is None else self.proved.to_json(),
                "refuted": None if self.refuted is None else self.refuted.to_json()}


# -- the statement ----------------------------------------------------------------------------------------------
def _assumed(st: Any, constant: str, positive_constant: bool) -> tuple[sp.Basic, sp.Symbol]:
    """The relation with each symbol replaced by one carrying what is known of its sign (parameter domains,
    nonnegative quantities, fixed values), and the constant's symbol."""
    from attnbounds.theory.mathematics.hypotheses import domain_sign
    from attnbounds.theory.mathematics.quantities import QUANTITIES

    swap: dict[sp.Basic, sp.Basic] = {}
    target = None
    for sym in st.relation.free_symbols:
        name = str(sym)
        if name == constant:
            target = sp.Symbol(name, positive=True) if positive_constant else sp.Symbol(name, real=True)
            swap[sym] = target
        elif name in st.fixed:
            swap[sym] = sp.Rational(repr(float(st.fixed[name])))
        elif name in st.bindings:
            swap[sym] = sp.Symbol(name, nonnegative=True) if QUANTITIES[st.bindings[name]].nonnegative \
                else sp.Symbol(name, real=True)
        else:  # a parameter: what its domain says of its sign (hypotheses.DOMAINS)
            sign = domain_sign(name)
            swap[sym] = sp.Symbol(name, **{sign: True} if sign else {"real": True})
    assert target is not None
    return st.relation.xreplace(swap), target


def direction(st: Any, constant: str) -> tuple[int, bool]:
    """``(+1 or -1, whether only C > 0 was assumed)``: +1 when every conjunct's margin grows with the constant (the
    bound is easier for larger C: an upper bound), -1 when it falls. Raises naming the conjunct otherwise."""
    from attnbounds.theory.mathematics.statement import conjuncts

    for positive in (False, True):
        relation, c = _assumed(st, constant, positive)
        signs = set()
        undecided = None
        for rel in conjuncts(relation):
            margin = rel.gts - rel.lts
            if c not in margin.free_symbols:
                continue
            d = sp.simplify(sp.diff(margin, c))
            if d == 0:
                continue
            if d.is_nonnegative:  # weakly monotone is enough: the constants where the bound holds form a ray
                signs.add(1)
            elif d.is_nonpositive:
                signs.add(-1)
            else:
                undecided = (rel, d)
                break
        if undecided is None and not signs:
            raise InvalidArgument(f"tighten: the relation's margin does not depend on {constant} (its derivative in "
                                  f"{constant} is 0): there is no best constant to find")
        if undecided is None and len(signs) == 1:
            return signs.pop(), positive
        if undecided is None and len(signs) > 1:
            raise InvalidArgument(f"tighten: the relation is not monotone in {constant}: one conjunct's margin grows "
                                  f"with {constant}, another's falls; tighten each conjunct on its own")
    rel, d = undecided if undecided is not None else (relation, sp.S.Zero)
    raise InvalidArgument(f"tighten: cannot tell that the relation is monotone in {constant}: d(margin)/d{constant} "
                          f"of {sp.sstr(rel)} is {sp.sstr(d)}, whose sign sympy cannot decide from the parameters' "
                          f"domains and the quantities' signs (for every {constant}, nor for {constant} > 0); tighten "
                          f"needs a bound monotone in its constant, e.g. 'expr <= {constant}' or "
                          f"'expr <= {constant}/T'")


def check_constant(st: Any, constant: Any) -> str:
    """The constant's name, refused (:class:`InvalidArgument`) unless it is a free symbol of the relation that is
    neither a quantity, an instance parameter, nor fixed, ranged or defaulted."""
    _check_name(constant, None)
    free = sorted(str(s) for s in st.relation.free_symbols)
    if constant in st.bindings:
        raise InvalidArgument(f"tighten: constant {constant!r} is a quantity of the relation; the constant must be a "
                              f"name of your own (e.g. 'C' in 'L*alpha_max <= C')")
    for key in ("fixed", "defaults", "ranges"):
        if constant in getattr(st, key):
            raise InvalidArgument(f"tighten: constant {constant!r} is given in {key!r}; leave it free")
    if constant not in free:
        raise InvalidArgument(f"tighten: {constant!r} is not a free symbol of the relation {sp.sstr(st.relation)}; "
                              f"its free symbols: {', '.join(free) or 'none'}")
    return constant


def _check_name(constant: Any, relation: str | None) -> None:
    """Refuse a constant that cannot be the relation's free constant, before anything is parsed."""
    from attnbounds.theory.io.userbounds import PARAMETERS
    from attnbounds.theory.mathematics.exprparse import free_names
    from attnbounds.theory.mathematics.quantities import QUANTITIES

    if not isinstance(constant, str) or not constant.isidentifier():
        raise InvalidArgument(f"tighten: constant must be the name of a free symbol of the relation, e.g. 'C'; "
                              f"got {constant!r}")
    if constant in QUANTITIES:
        raise InvalidArgument(f"tighten: constant {constant!r} is a quantity; the constant must be a name of your own "
                              f"(e.g. 'C' in 'L*alpha_max <= C')")
    if constant in PARAMETERS:
        raise InvalidArgument(f"tighten: constant {constant!r} is an instance parameter ({', '.join(PARAMETERS)}: "
                              f"drawn by the search, the bound holds for all of them); name the constant otherwise, "
                              f"e.g. 'C'")
    if relation is not None:
        names = free_names(relation)
        if constant not in names:
            own = sorted(n for n in names if n not in QUANTITIES and n not in PARAMETERS)
            raise InvalidArgument(f"tighten: constant {constant!r} does not appear in the relation {relation!r}"
                                  + (f"; its own names: {', '.join(own)} (pass constant={own[0]!r})" if own else
                                     "; write the constant into the relation, e.g. 'L*alpha_max <= C'"))


def user_statement(relation: str, constant: str, *, hypotheses: Iterable[str] = (),
                   fixed: Mapping[str, float] | None = None, ranges: Mapping[str, Any] | None = None,
                   defaults: Mapping[str, Any] | None = None, normaliser: Any = None, id: str | None = None) -> Any:
    """The :class:`~attnbounds.theory.io.userbounds.UserBounds` of :func:`tighten`'s arguments: as
    :func:`attnbounds.theory.running.api.statement`, with the constant declared as a parameter."""
    from attnbounds.theory.io import userbounds
    from attnbounds.theory.mathematics.exprparse import free_names
    from attnbounds.theory.running import api

    _check_name(constant, relation if isinstance(relation, str) else None)
    declare = [constant] if constant in free_names(relation) and constant not in userbounds.PARAMETERS else []
    return api.statement(relation, hypotheses=hypotheses, fixed=fixed, ranges=ranges, defaults=defaults,
                         normaliser=normaliser, id="tighten" if id is None else id, parameters=declare)


# -- values of the bounded expression at instances ----------------------------------------------------------------
def _root(margin: Callable[[float], float], c0: float, s: int) -> float | None:
    """The constant at which a monotone ``margin`` (growing with C when ``s`` is +1) changes sign, searched from
    ``c0`` in float64 (None when it does not within the double range)."""
    try:
        m0 = margin(c0)
    except Exception:  # noqa: BLE001 - an instance the statement cannot read at another constant: no estimate
        return None
    if not math.isfinite(m0):
        return None
    if m0 == 0:
        return c0
    way = s if m0 < 0 else -s  # toward the constant where the margin's sign flips
    scale = abs(c0) if c0 != 0 else 1.0
    inner, outer = c0, None
    for k in range(-40, 1100):
        trial = c0 + way * scale * 2.0 ** k
        try:
            m = margin(trial)
        except Exception:  # noqa: BLE001
            return None
        if not math.isfinite(m):
            return None
        if (m < 0) != (m0 < 0):
            outer = trial
            break
        inner = trial
        if k > 10 and abs(trial) > 1e300:
            return None
    if outer is None:
        return None
    for _ in range(200):
        mid = 0.5 * (inner + outer)
        if mid in (inner, outer):
            break
        if (margin(mid) < 0) == (m0 < 0):
            inner = mid
        else:
            outer = mid
    return 0.5 * (inner + outer)


def instance_value(st: Any, constant: str, inst: Any, c0: float, s: int) -> float | None:
    """The value of the constant at which ``inst`` (one instance) meets the bound with equality: for an upper bound
    the value of the bounded expression there (float64, from the statement's own evaluator)."""
    def margin(c: float) -> float:
        ev = st.evaluate(inst.with_params(**{constant: np.array([c])}))
        if not bool(ev.applicable[0]):
            return float("nan")
        return float(ev.margin[0])

    with np.errstate(all="ignore"):
        return _root(margin, c0, s)


def _instances(record: Record) -> list[Any]:
    """The counterexample and the tightest instance of a record, as instances (what can be read back)."""
    from attnbounds.theory.io.serialize import instance_from_json

    out = []
    for data in ((record.counterexample or {}).get("instance"), (record.data.get("tightness") or {}).get("witness")):
        if data is None:
            continue
        try:
            out.append(instance_from_json(data).take(0))
        except Exception:  # noqa: BLE001 - an instance that cannot be rebuilt gives no estimate
            continue
    return out


def _boxes(record: Record) -> int:
    rel = record.data.get("relaxation") or {}
    boxes = rel.get("boxes")
    return int(boxes) if isinstance(boxes, (int, float)) else 0


# -- constants --------------------------------------------------------------------------------------------------
def _rational(x: float, inside: tuple[Fraction | None, Fraction | None], slack: float) -> Fraction:
    """A short decimal near ``x`` (within ``slack``), strictly inside ``inside`` (an open interval, None: unbounded)."""
    lo, hi = inside
    best = Fraction(x)
    for digits in range(2, MAX_DIGITS + 1):
        q = Fraction(f"{x:.{digits}g}")
        if abs(float(q) - x) <= slack and (lo is None or q > lo) and (hi is None or q < hi):
            return q
    return best


def _text(q: Fraction) -> str:
    return str(q.numerator) if q.denominator == 1 else f"{q.numerator}/{q.denominator}"


def _relative_width(lo: Fraction, hi: Fraction) -> float:
    if lo == hi:
        return 0.0
    if lo == 0 or hi == 0 or (lo < 0) != (hi < 0):
        return math.inf
    return float(abs(hi - lo) / min(abs(lo), abs(hi)))


def _between(lo: Fraction, hi: Fraction) -> float:
    """A point strictly between ``lo < hi``: their geometric mean when both have one sign, else the mean."""
    a, b = float(lo), float(hi)
    if a > 0 and b > 0:
        return math.sqrt(a) * math.sqrt(b)
    if a < 0 and b < 0:
        return -math.sqrt(-a) * math.sqrt(-b)
    return 0.5 * (a + b)


# -- the search ---------------------------------------------------------------------------------------------------
@dataclass
class _State:
    s: int  # +1: PROVED at larger constants
    easy: Fraction | None = None  # best PROVED constant (the side where the bound holds)
    hard: Fraction | None = None  # best REFUTED constant
    proved: Record | None = None
    refuted: Record | None = None
    estimate: float | None = None  # best value seen of the threshold at an instance (on the threshold's hard side)
    guessed: float | None = None  # the estimate the last guesses were made from
    tried: dict[Fraction, str] = field(default_factory=dict)
    unsettled: list[Fraction] = field(default_factory=list)  # constants only VERIFIED / UNDECIDED
    no_proof: bool = False  # the relaxation prover declined the statement: no constant can be PROVED
    stalls: int = 0
    step: float = 0.0  # the current relative step of an expanding search

    def further(self, a: float, b: float) -> float:
        """Of ``a`` and ``b``, the one further toward the easy side."""
        return a if self.s * (a - b) >= 0 else b

    def better_estimate(self, v: float | None) -> None:
        if v is None or not math.isfinite(v):
            return
        if self.estimate is None or self.s * (v - self.estimate) > 0:
            self.estimate = v

    def near_tried(self, c: float, rtol: float) -> bool:
        return any(abs(float(t) - c) <= abs(c) * rtol / 16 for t in self.tried)


def _past(x: float, rel: float, s: int) -> float:
    """``x`` moved by ``rel`` (relative) toward the easy side (``s``: +1 when that is larger constants)."""
    return x + s * max(abs(x), 1e-300) * rel


def _next(state: _State, rtol: float, start: float | None) -> float | None:
    """The next constant to try (a float; :func:`_rational` makes it exact), None when there is none worth trying."""
    s = state.s
    est = state.estimate
    easy, hard = state.easy, state.hard
    if easy is None and hard is None and not state.unsettled:
        return start if start is not None else (est if est is not None else 1.0)
    if state.no_proof:  # only the refuted side can still move, and a VERIFIED just past the best instance value
        if est is None:
            return None
        for rel in (rtol / 4, -rtol / 4):
            c = _past(est, rel, s)
            if not state.near_tried(c, rtol) and (hard is None or s * (c - float(hard)) > 0):
                return c
        return None
    if (easy is None or hard is None) and est is None:  # no instance value to start from: wider steps
        state.step = max(state.step, BLIND_STEP)
    if easy is None:  # expand toward the easy side from the furthest point known not to be PROVED
        known = [float(q) for q in (hard, *state.unsettled) if q is not None] + ([est] if est is not None else [])
        far = known[0]
        for k in known[1:]:
            far = state.further(far, k)
        return _past(far, state.step, s)
    if hard is None:  # expand toward the hard side from the best instance value, else from the PROVED constant
        e = float(easy)
        base = est if est is not None and s * (e - est) > 0 else e
        if state.unsettled:  # a constant not PROVED lies between: go past it
            u = float(state.unsettled[-1])
            base = u if s * (base - u) > 0 else base
        return _past(base, -state.step, s)
    a, b = float(hard), float(easy)  # the threshold lies between
    if est is not None and est != state.guessed and s * (b - est) > 0:
        # a value at an instance: just before it the bound is false; just past it, PROVED when the search found the
        # extreme instance (a maximum attained at a few tokens)
        for rel in (rtol / 4, -rtol / 4):
            c = _past(est, rel, s)
            if s * (c - a) > 0 and s * (b - c) > 0 and not state.near_tried(c, rtol):
                return c
        state.guessed = est
    lo, hi = (hard, easy) if s > 0 else (easy, hard)
    cuts = sorted({lo, hi, *(u for u in state.unsettled if lo < u < hi)})
    pieces = [(cuts[k], cuts[k + 1]) for k in range(len(cuts) - 1)]
    widest = max(pieces, key=lambda p: _relative_width(p[0], p[1]) if _relative_width(p[0], p[1]) < math.inf
                 else float(p[1] - p[0]) * 1e300)
    return _between(*widest)


def _search(st: Any, constant: str, s: int, run: Callable[[Any], Record], *, rtol: float, max_checks: int,
            start: float | None, positive: bool, progress: Callable[[str], None] | None
            ) -> tuple[_State, list[Step], str, str, int]:
    """The checks of :func:`tighten` (module docstring): ``(state, steps, status, reason, boxes)``."""
    state = _State(s=s, step=max(rtol / 4, 1e-12))
    steps: list[Step] = []
    boxes = 0
    reason = ""
    while True:
        if state.easy is not None and state.hard is not None:
            width = _relative_width(min(state.easy, state.hard), max(state.easy, state.hard))
            if width <= rtol:
                return state, steps, "converged", f"relative width {width:.3g} <= {rtol:g}", boxes
        if len(steps) >= max_checks:
            return state, steps, "stopped", (f"the work ran out: {max_checks} checks (max_checks) run"
                                             + (f"; {reason}" if reason else "")), boxes
        if state.stalls >= MAX_STALLS:
            return state, steps, "stopped", f"{MAX_STALLS} checks in a row neither PROVED nor REFUTED; {reason}", boxes
        x = _next(state, rtol, start)
        if x is None:
            return state, steps, "stopped", reason or "no constant left worth a check", boxes
        if positive and x <= 0:
            x = min([v for v in (float(state.easy or 0), float(state.hard or 0)) if v > 0] or [2.0]) / 2
        lo = state.hard if s > 0 else state.easy
        hi = state.easy if s > 0 else state.hard
        q = _rational(x, (lo, hi), abs(x) * rtol / 64)
        if q in state.tried or (positive and q <= 0):
            return state, steps, "stopped", (f"no new constant to try between the bracket's sides (at {_text(q)})"
                                             + (f"; {reason}" if reason else "")), boxes
        t = time.perf_counter()
        record = run(sp.Rational(q.numerator, q.denominator))
        seconds = time.perf_counter() - t
        verdict = record.verdict
        state.tried[q] = verdict
        n_boxes = _boxes(record)
        boxes += n_boxes
        for inst in _instances(record):
            state.better_estimate(instance_value(st, constant, inst, float(q), s))
        why = ""
        stop = None
        if verdict == "PROVED":
            if state.easy is None or s * (q - state.easy) < 0:
                state.easy, state.proved = q, record
            state.stalls = 0
            if state.hard is None and steps:  # an expansion toward the refuted side that did not reach it
                state.step *= 8
        elif verdict == "REFUTED" and record.certified:
            if state.hard is None or s * (q - state.hard) > 0:
                state.hard, state.refuted = q, record
            state.stalls = 0
            if state.easy is None and steps:
                state.step *= 8
        else:
            why = record.reason
            rel = record.data.get("relaxation") or {}
            declined = rel.get("status") == "declined" or not rel
            if verdict == "REFUTED":  # a Python callable without log F: a float64 violation only
                stop = (f"at {constant} = {_text(q)} the violation is float64 only (a Python callable normaliser "
                        f"without log_F): nothing can be certified")
            elif verdict in ("NOT-APPLICABLE", "ERROR"):
                stop = f"at {constant} = {_text(q)} the check says {verdict}: {why}"
            else:
                state.unsettled.append(q)
                if declined:
                    state.no_proof = True
                    reason = (f"no constant can be PROVED: the relaxation prover declined the statement "
                              f"({rel.get('reason', 'no relaxation')}); at {constant} = {_text(q)} the verdict is only "
                              f"{verdict} (searched, nothing found), so the {'upper' if s > 0 else 'lower'} side is "
                              f"open")
                else:
                    state.stalls += 1
                    reason = f"the verdict at {constant} = {_text(q)} is only {verdict}: {why}"
                if state.easy is None or state.hard is None:
                    state.step *= 8
        steps.append(Step(_text(q), float(q), verdict, n_boxes, seconds, why[:300]))
        if progress is not None:
            lo_, hi_ = (state.hard, state.easy) if s > 0 else (state.easy, state.hard)
            progress(f"tighten: check {len(steps)}: {constant} = {float(q):.10g} {verdict} ({seconds:.1f} s, "
                     f"{n_boxes} boxes); bracket [{'?' if lo_ is None else f'{float(lo_):.10g}'}, "
                     f"{'?' if hi_ is None else f'{float(hi_):.10g}'}]")
        if stop is not None:
            return state, steps, "stopped", stop, boxes


def check_arguments(budget: float | None, seed: int | None, rtol: Any, max_checks: Any, start: Any
                    ) -> tuple[float, int]:
    """The budget and seed of every check (:func:`attnbounds.theory.running.api.budget_and_seed`); raises
    :class:`InvalidArgument` for a bad budget, seed, ``rtol``, ``max_checks`` or ``start``."""
    from attnbounds.theory.running.api import budget_and_seed

    budget_s, seed_ = budget_and_seed(budget, seed)
    if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 0 < rtol < 1:
        raise InvalidArgument(f"tighten: rtol must be a number in (0, 1), e.g. 1e-6; got {rtol!r}")
    if isinstance(max_checks, bool) or not isinstance(max_checks, int) or not 1 <= max_checks <= 10_000:
        raise InvalidArgument(f"tighten: max_checks must be a whole number in [1, 10000]; got {max_checks!r}")
    if start is not None and (isinstance(start, bool) or not isinstance(start, (int, float))
                              or not math.isfinite(start)):
        raise InvalidArgument(f"tighten: start must be a finite number (a first guess of the constant); got {start!r}")
    return budget_s, seed_


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def tighten_statement(st: Any, constant: str, *, budget: float | None = None, seed: int | None = None,
                      rtol: float = DEFAULT_RTOL, max_checks: int = DEFAULT_MAX_CHECKS, start: float | None = None,
                      normalisers: Mapping[str, Any] | None = None, relation_text: str | None = None,
                      progress: bool | Callable[[str], None] = False) -> TightenResult:
    """:func:`tighten` on a loaded statement whose relation has the free symbol ``constant`` (what ``attnbounds
    tighten --statements FILE ID`` runs)."""
    from attnbounds.theory.io.cachedir import hypothesis_home
    from attnbounds.theory.mathematics.normalisers import constructors_added
    from attnbounds.theory.running.verify import verify

    began = time.perf_counter()
    budget_s, seed_ = check_arguments(budget, seed, rtol, max_checks, start)
    check_constant(st, constant)
    s, positive = direction(st, constant)
    if positive and start is not None and start <= 0:
        raise InvalidArgument(f"tighten: the relation is monotone in {constant} only for {constant} > 0; start must "
                              f"be > 0, got {start!r}")
    say: Callable[[str], None] | None = None
    if callable(progress):
        say = progress
    elif progress:
        say = _stderr
    hypothesis_home()

    def run(value: sp.Rational) -> Record:
        one = st.subs(**{constant: value})
        with constructors_added(dict(normalisers or {})):
            return verify(None, budget_s=budget_s, seed=seed_, progress=False, statements=[one],
                          scheduler="none" if normalisers else None)[0]

    with constructors_added(dict(normalisers or {})):
        state, steps, status, reason, boxes = _search(st, constant, s, run, rtol=rtol, max_checks=max_checks,
                                                      start=start, positive=positive, progress=say)
    lo_q, hi_q = (state.hard, state.easy) if s > 0 else (state.easy, state.hard)
    width = None if lo_q is None or hi_q is None else _relative_width(lo_q, hi_q)
    if status == "stopped" and width is not None and width == math.inf:
        reason += "; the bracket straddles or touches 0, where a relative width is not defined"
    if state.proved is None and state.refuted is None and status != "stopped":
        status = "stopped"
    if positive:
        reason += f" (monotone for {constant} > 0 only: constants tried are > 0)"
    verified = [Fraction(step.constant) for step in steps if step.verdict == "VERIFIED"]
    verified = [q for q in verified if (state.hard is None or s * (q - state.hard) > 0)
                and (state.easy is None or s * (state.easy - q) > 0)]
    nearest = min(verified, key=lambda q: s * q) if verified else None
    return TightenResult(
        relation=relation_text or sp.sstr(st.relation), constant=constant,
        proved_side="upper" if s > 0 else "lower",
        lower=None if lo_q is None else float(lo_q), upper=None if hi_q is None else float(hi_q),
        lower_exact=None if lo_q is None else _text(lo_q), upper_exact=None if hi_q is None else _text(hi_q),
        proved=state.proved, refuted=state.refuted, relative_width=width, rtol=float(rtol), status=status,
        reason=reason, checks=len(steps), boxes=boxes, seconds=time.perf_counter() - began,
        estimate=state.estimate, seed=seed_, budget_s=budget_s, steps=tuple(steps),
        best_verified=None if nearest is None else _text(nearest))


def tighten(relation: str, constant: str = "C", *, hypotheses: Iterable[str] = (),
            fixed: Mapping[str, float] | None = None, ranges: Mapping[str, Any] | None = None,
            defaults: Mapping[str, Any] | None = None, normaliser: Any = None, budget: float | None = None,
            seed: int | None = None, id: str | None = None, rtol: float = DEFAULT_RTOL,
            max_checks: int = DEFAULT_MAX_CHECKS, start: float | None = None,
            progress: bool | Callable[[str], None] = False) -> TightenResult:
    """The best value of ``constant`` in ``relation`` as a certified bracket (module docstring).

    The keyword arguments are :func:`attnbounds.check`'s (``budget`` and ``seed`` per check); besides them:
    ``rtol``, the relative width to narrow the bracket to (default 1e-6); ``max_checks``, the most checks run (the
    work limit, default 40); ``start``, a first guess of the constant (default: 1, or what the first instances
    say); ``progress``, True for one line per check on stderr (or a function taking the line). Bad input raises
    :class:`~attnbounds.theory.mathematics.errors.InvalidArgument` naming the value and what is allowed: a constant
    that is not a free symbol of the relation, a relation not monotone in it, a bad budget, rtol or max_checks."""
    check_arguments(budget, seed, rtol, max_checks, start)
    user = user_statement(relation, constant, hypotheses=hypotheses, fixed=fixed, ranges=ranges, defaults=defaults,
                          normaliser=normaliser, id=id)
    return tighten_statement(user.statements[0], constant, budget=budget, seed=seed, rtol=rtol,
                             max_checks=max_checks, start=start, normalisers=user.normalisers,
                             relation_text=relation, progress=progress)


def load_for_tighten(paths: list[str], statement_id: str, constant: str) -> Any:
    """The statement ``statement_id`` of the statements files ``paths`` (and their normalisers), with ``constant``
    declared as a parameter when the file's relation reads it without declaring it (a ``.toml`` file; a ``.py`` file
    must declare it itself)."""
    from pathlib import Path

    from attnbounds.theory.io import userbounds
    from attnbounds.theory.mathematics.exprparse import free_names

    data: dict[str, Any] = {"statement": [], "normaliser": []}
    found = None
    ids: list[str] = []
    for path in paths:
        p = Path(path)
        if p.suffix != ".toml":
            user = userbounds.load_statements(p, register=False)
            ids += [s.id for s in user.statements]
            if any(s.id == statement_id for s in user.statements):
                return user, user.get(statement_id)
            continue
        parsed = userbounds.read_toml(p)
        normalisers = parsed.get("normaliser", [])
        if isinstance(normalisers, list):
            data["normaliser"] += normalisers
        for table in parsed.get("statement", []) if isinstance(parsed.get("statement", []), list) else []:
            if isinstance(table, dict):
                ids.append(str(table.get("id")))
                if table.get("id") == statement_id and found is None:
                    found = dict(table)
    if found is None:
        raise InvalidArgument(f"tighten: no statement with id {statement_id!r} in {', '.join(map(str, paths))}; "
                              f"the files declare: {', '.join(ids) or 'none'}")
    texts = [str(found[k]) for k in ("relation", "lhs", "rhs") if isinstance(found.get(k), str)]
    _check_name(constant, " <= ".join(texts) if texts else None)
    declared = found.get("parameters", [])
    if isinstance(declared, list) and any(constant in free_names(t) for t in texts) and constant not in declared \
            and constant not in userbounds.PARAMETERS:
        found["parameters"] = [*declared, constant]
    data["statement"] = [found]
    user = userbounds.load_data(data, ", ".join(map(str, paths)))
    return user, user.statements[0]


__all__ = ["tighten", "tighten_statement", "TightenResult", "Step", "direction", "check_constant", "check_arguments"]
