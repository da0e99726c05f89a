"""For every L beyond a threshold: a statement's margin along a growth (token-class instances that grow
with a parameter ``t >= 0``), as a closed form, its limit as ``t -> oo``, and a certificate.

A :class:`Growth` starts from one token-class instance (counts ``m``) and lets the counts grow as
``m + b t`` (``b``: which classes grow: the largest one, or all of them in proportion), so that
``L(t) = L + (sum b) t``; logits, token vectors and the selected classes stay as they are (the order
of the weights does not change with the counts, so the top-N classes stay the top-N classes).

The closed form comes from the quantities' own ``ball`` forms, run on
:class:`~attnbounds.theory.mathematics.symbolic.SymbolicOps`: numbers
that do not depend on ``t`` are arb balls (held as symbols ``_c0, _c1, ...``), everything that does is a
sympy expression in ``t``. Only quantities whose ball form reads the counts through ``ex.m``,
``ex.length`` and ``ex.size_N`` (``closed_form`` on their specification) take part.

The certificate: with ``u = 1 / (1 + t)`` in ``(0, 1]`` and ``p`` the order at which the margin vanishes
(``margin ~ c u^p``), ``G(u) = margin / u^p`` is evaluated in ball arithmetic in one sweep over the pieces
``[2^-(k+1), 2^-k]`` from ``u = 2^-80`` up (a piece whose enclosure straddles 0 bisected), as far as its sign
holds: ``G < 0`` on ``[2^-80, u0]`` certifies "violated for every ``t >= 1/u0 - 1``" up to ``t = 2^80 - 1``,
i.e. every ``L >= L0`` of the growth to about 10^24 (and every L beyond when ``[0, 2^-80]`` has the sign too),
rigorously (no sampling, no monotonicity assumption); ``G > 0`` likewise "holds". Nothing is claimed along the
growths of an instance outside the statement's hypotheses. The limit ``c`` (``p = 0``) or the leading
coefficient, estimated at the balls' midpoints (and not quoted where their ends move it), only guides ``p``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics import balls
from attnbounds.theory.mathematics.errors import AttnBoundsError, CannotCertify, InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import BallEvaluator, Unsupported
from attnbounds.theory.mathematics.quantities.spec import QUANTITIES, ball_value
from attnbounds.theory.mathematics.symbolic import SymbolicOps, Work, WorkLimit, differentiate, size, t
from attnbounds.theory.deciding.parallel import Runner
from attnbounds.theory.mathematics.statement import Statement, conjuncts

u = sp.Symbol("u", positive=True)
#: pieces of [2^-SWEEP_DEPTH, 1] the certificate may evaluate
MAX_PIECES = 2048
#: the sweep certifies a sign down to u = 2^-SWEEP_DEPTH (t = 2^80 - 1, about 1.2e24), then tries [0, 2^-80] too
SWEEP_DEPTH = 80
#: orders of vanishing tried for the margin (margin ~ c u^p)
MAX_ORDER = 3
#: interval work one growth's analysis may do: evaluations of distinct subexpressions (about 10 us each), so
#: the analysis is bounded the same way on every machine and in any thread (a record never depends on the clock)
WORK_LIMIT = 200_000
#: distinct subexpressions the margin's closed form may have before it is rewritten in u and differentiated
MAX_NODES = 10_000
#: the largest numerator or denominator (nodes of its tree, shared parts counted at every use) that is
#: expanded to cancel powers of u: sympy's expand walks the tree, not the shared form
MAX_EXPAND = 400


def _tree_larger(expr: sp.Expr, limit: int) -> bool:
    """Whether the tree of ``expr`` (every use of a shared part counted) has more than ``limit`` nodes."""
    stack, n = [expr], 0
    while stack:
        n += 1
        if n > limit:
            return True
        stack.extend(stack.pop().args)
    return False


#: how mpmath evaluates the opaque functions (numeric guidance only)
_MPMATH = {"OMax": max, "OMin": min, "OAbs": abs}


@dataclass(frozen=True)
class Growth:
    """Token-class instances growing with ``t >= 0``: counts ``m + b t`` from the instance ``base`` (B = 1)."""

    base: Instance
    growth: tuple[int, ...]
    name: str

    @property
    def counts(self) -> np.ndarray:
        return np.ones(self.base.K, dtype=np.int64) if self.base.counts is None else self.base.counts[0]

    def length(self, value: Any) -> Any:
        return int(self.counts.sum()) + sum(self.growth) * value

    def selected_growth(self) -> int:
        mask = self.base.mask[0] if self.base.N is not None else np.zeros(self.base.K, dtype=bool)
        return int(sum(b for b, s in zip(self.growth, mask) if s))

    def at(self, value: int) -> Instance:
        """The member at integer ``t = value`` (a float instance, for checks): the weights recomputed by the
        normaliser for the grown counts, as along the growth itself; weights given without one are kept."""
        counts = self.counts + np.asarray(self.growth, dtype=np.int64) * int(value)
        N = None if self.base.N is None else self.base.N + self.selected_growth() * int(value)
        base = self.base
        alpha = (base.alpha if base.logits is None or base.normaliser is None else
                 base.normaliser.weights(base.logits, counts=counts[None]))
        return Instance._build(alpha, base.logits, base.normaliser, base.x, base.q, base.k, N,
                               base.mask if N is not None else None, base.arrays, dict(base.params), counts[None])


def growths(inst: Instance) -> list[Growth]:
    """The growths through a single instance: its largest class grows; every class grows in proportion (one growth
    where the two agree: a single token, L copies of it)."""
    base = inst.take(0)
    counts = np.ones(base.K, dtype=np.int64) if base.counts is None else base.counts[0]
    present = counts > 0
    largest = int(np.argmax(np.where(present, counts, -1)))
    out = [Growth(base, tuple(int(k == largest) for k in range(base.K)),
                  f"the class of {int(counts[largest])} tokens (column {largest}) grows")]
    g = math.gcd(*[int(c) for c in counts[present]])
    step = tuple(int(c // g) if c > 0 else 0 for c in counts)
    if step != out[0].growth:
        out.append(Growth(base, step, "every class grows in proportion"))
    return out


def closed_form(statement: Statement) -> bool:
    """Whether every quantity of the statement has a closed form along growths of token classes."""
    return all(QUANTITIES[q].closed_form for q in statement.bindings.values())


def _growth_instance(growth: Growth, ops: SymbolicOps) -> balls.BallInstance:
    ex = balls.ball_instance(growth.base, ops)  # structure from the base; arithmetic below from t
    counts = growth.counts
    ex.cache["m"] = np.array([sp.Integer(int(c)) + b * t for c, b in zip(counts, growth.growth)], dtype=object)
    ex.cache["length"] = sp.Integer(int(counts.sum())) + sum(growth.growth) * t
    if growth.base.N is not None:
        ex.cache["size_N"] = sp.Integer(growth.base.N) + growth.selected_growth() * t
    n = growth.base.normaliser
    if ex.logits is not None and n is not None:  # recompute the weights with the growing counts
        ex.alpha = balls.weights_from_logits(ex, ex.logits)
        ex.alpha[~ex.present] = sp.Integer(0)
    return ex


@dataclass
class Margin:
    """One conjunct at one column: its margin ``rhs - lhs`` as a function of ``t``."""

    conjunct: int
    column: int
    expr: sp.Expr
    rhs: sp.Expr


def margins(statement: Statement, growth: Growth, ops: SymbolicOps) -> list[Margin]:
    """Every (conjunct, column) margin of the statement along the growth, as expressions in ``t``."""
    ex = _growth_instance(growth, ops)
    inst = statement.prepare(growth.base)
    for name, value in statement.defaults.items():
        if isinstance(value, str) and name not in growth.base.params:
            ex.params[name] = ball_value(value, ex)
    for name, value in inst.params.items():
        ex.params.setdefault(name, ops.decimal(float(value[0])))
    from attnbounds.theory.deciding.certify import ball_environment

    env, selected = ball_environment(statement, ex)
    weights = ex.m[ex.sel] if ex.mask is not None else None
    out = []
    for c, rel in enumerate(conjuncts(statement.relation)):
        kind = statement.token_kinds[c]
        evaluate = BallEvaluator(ops, {**env, **selected} if kind == "selected" else env, selected, weights)
        lhs = np.atleast_1d(np.asarray(evaluate(rel.lhs), dtype=object))
        rhs = np.atleast_1d(np.asarray(evaluate(rel.rhs), dtype=object))
        lhs, rhs = np.broadcast_arrays(lhs, rhs)
        columns: range | list[int] = range(lhs.shape[0])
        if kind == "tokens" and lhs.shape[0] == ex.K:
            columns = [k for k in columns if ex.counts[k] > 0]
        for k in columns:
            out.append(Margin(c, k if lhs.shape[0] > 1 else -1, sp.sympify(rhs[k] - lhs[k]), sp.sympify(rhs[k])))
    return out


@dataclass
class LimitResult:
    """What the analysis concluded along one growth (see :func:`analyse`)."""

    growth: str  # its description (the key 'family' of the record format)
    status: str  # "violated-for-all" / "-up-to", "holds-for-all" / "-up-to", "limit-only", "unsupported"
    L0: int | None = None
    L_max: int | None = None  # the certificate stops there ("-up-to"); None: every L >= L0
    limit: str = ""
    slack: float | None = None
    order: int | None = None
    detail: str = ""
    checked: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"family": self.growth, "status": self.status, "L0": self.L0, "L_max": self.L_max, "limit": self.limit,
                "relative_slack": self.slack, "order": self.order, "detail": self.detail}


def _order(expr: sp.Expr, ops: SymbolicOps) -> tuple[int, sp.Expr | None] | None:
    """``(p, c)`` with ``margin ~ c t^-p`` as ``t -> oo`` (``p`` in 0..MAX_ORDER), estimated numerically at the
    constants' midpoints (50 digits at t = 10^6, 10^9, 10^12, 10^15): it only guides the certificate's choice of
    ``p`` (a wrong guess makes the interval evaluation fail, never a wrong verdict). ``c`` is None where the
    constants' precision cannot show it: the value at t = 10^15 moves by more than a millionth of itself (or changes
    sign) when every constant goes to the lower or the upper end of its ball (a margin that cancels to below the
    constants' last digits, as at an equality case, leaves only rounding there)."""
    import mpmath

    ts = [mpmath.mpf(10) ** e for e in (6, 9, 12, 15)]
    with mpmath.workdps(50):
        try:
            values = _numeric(expr, ops, ts)
        except (ValueError, TypeError, ZeroDivisionError, OverflowError):
            return None
        if not all(mpmath.isfinite(v) for v in values):
            return None
        if all(v == 0 for v in values):
            return 0, sp.Integer(0)
        ratios = [abs(values[k + 1] / values[k]) if values[k] != 0 else mpmath.inf for k in range(3)]
        slopes = [-mpmath.log10(r) / 3 if r not in (0, mpmath.inf) else mpmath.inf for r in ratios]
        p = int(round(float(slopes[-1]))) if mpmath.isfinite(slopes[-1]) else None
        if p is None or not 0 <= p <= MAX_ORDER or abs(float(slopes[-1]) - p) > 0.05:
            return None
        try:
            ends = [_numeric(expr, ops, ts[-1:], at=side)[0] for side in ("lower", "upper")]
        except (ValueError, TypeError, ZeroDivisionError, OverflowError):
            return p, None
        if not all(mpmath.isfinite(v) and v * values[-1] > 0 and abs(v - values[-1]) <= abs(values[-1]) * 1e-6
                   for v in ends):
            return p, None
        c = values[-1] * mpmath.mpf(10) ** (15 * p)
        return p, sp.Float(str(c), 15)


def _numeric(expr: sp.Expr, ops: SymbolicOps, ts: list[Any], at: str = "mid") -> list[Any]:
    """``expr`` at each ``t`` in ``ts`` with the constants at their midpoints (``at`` "mid"), or each at the lower or
    the upper end of its ball, in mpmath (the expression is never rebuilt: sympy re-simplifies Min and Max when it
    substitutes into them, at exponential cost)."""
    import mpmath

    consts = list(ops.consts)
    fn = sp.lambdify([t, *consts], expr, modules=[_MPMATH, "mpmath"])
    balls_ = [ops.consts[c] if at == "mid" else getattr(ops.consts[c], at)() for c in consts]
    values = [mpmath.mpf(b.mid().str(40, radius=False)) for b in balls_]  # beyond the double range too
    return [mpmath.mpf(fn(v, *values)) for v in ts]


def _in_u(expr: sp.Expr, p: int) -> sp.Expr:
    """``margin(t = 1/u - 1) / u^p`` in a form regular at ``u = 0`` (as far as sympy can make it)."""
    g = expr.xreplace({t: 1 / u - 1}) / u**p
    g = sp.together(g)
    num, den = sp.fraction(g)
    if not den.free_symbols or _tree_larger(num, MAX_EXPAND) or _tree_larger(den, MAX_EXPAND):
        return g  # expanding a large quotient costs more than it can gain
    return sp.expand(num) / sp.expand(den)


def _sweep(G: sp.Expr, ops: SymbolicOps, work: Work | None = None, pieces: int = MAX_PIECES) -> tuple[int, Fraction, bool]:
    """``(sign, u0, to_zero)``: G certified > 0 (sign +1) or < 0 (-1) in ball arithmetic on all of ``[2^-SWEEP_DEPTH,
    u0]``, ``u0`` as large as one sweep reaches (0 and sign 0 when the first piece is undecided); ``to_zero``: the
    sign also holds on ``[0, 2^-SWEEP_DEPTH]`` (the limit itself; that needs G in a form regular at 0). The pieces
    ``[2^-(k+1), 2^-k]`` (a factor 2 apart: the margin changes on every scale of L) are taken once each, from the
    smallest u (the largest L) up, a piece whose enclosure straddles 0 bisected; the sweep stops at the first
    piece of the other sign, one still undecided at width ``1e-12 u`` or after ``pieces`` pieces, or when the work
    runs out: what it certified before stays certified."""
    arb = ops.arb
    env = {str(s): b for s, b in ops.consts.items()}
    dG = differentiate(G, u)
    cost = (size(G), size(G) + size(dG))  # natural enclosure; mean-value form

    def exact(x: Fraction) -> Any:
        return arb.rational(x.numerator, x.denominator)

    def sign_of(value: Any) -> int:
        if value is None or not arb.is_finite(value):
            return 0
        return 1 if arb.positive(value) else -1 if arb.negative(value) else 0

    def enclose(lo: Fraction, hi: Fraction) -> Any:
        """The natural enclosure of G on [lo, hi], or the mean-value form G(mid) + G'([lo, hi]) ([lo, hi] - mid)
        where that is tighter (it shrinks quadratically with the piece, the natural one only linearly)."""
        piece = arb.hull(exact(lo), exact(hi))
        if work is not None:
            work.spend(cost[0])
        try:
            natural = BallEvaluator(arb, {**env, "u": piece})(G)
        except (AttnBoundsError, ZeroDivisionError, ValueError):
            natural = None
        if sign_of(natural):
            return natural
        mid = exact((lo + hi) / 2)
        if work is not None:
            work.spend(cost[1])
        try:
            centred = BallEvaluator(arb, {**env, "u": mid})(G) + BallEvaluator(arb, {**env, "u": piece})(dG) * (piece - mid)
        except (AttnBoundsError, ZeroDivisionError, ValueError):
            return natural
        return centred

    edges = [Fraction(1, 2**k) for k in range(SWEEP_DEPTH, -1, -1)]  # increasing: 2^-SWEEP_DEPTH .. 1
    stack = list(zip(edges[:-1], edges[1:]))[::-1]  # popped smallest u first
    sign, reached, used = 0, Fraction(0), 0
    try:
        while stack and used < pieces:
            lo, hi = stack.pop()
            used += 1
            s = sign_of(enclose(lo, hi))
            if s and sign and s != sign:
                break
            if s:
                sign, reached = s, hi
                continue
            if hi - lo < Fraction(1, 10**12) * hi:
                break
            mid = (lo + hi) / 2
            stack += [(mid, hi), (lo, mid)]  # the lower half first: the sweep stays contiguous from below
        to_zero = bool(sign) and sign_of(enclose(Fraction(0), edges[0])) == sign
    except WorkLimit:
        to_zero = False
    return sign, reached, to_zero  # reached stays 0 until a piece has a sign


def analyse(statement: Statement, inst: Instance, *, violated: bool = True, bits: int = 128,
            work_limit: int = WORK_LIMIT, runner: Runner | None = None) -> list[LimitResult]:
    """The statement along each growth through ``inst`` (B = 1): for a violation, the smallest ``L0`` found
    such that it is certified violated for every ``L >= L0`` of the growth; for a tight instance, whether the
    bound holds on the whole growth and its relative slack in the limit. The growths are independent pieces of
    work for ``runner`` (:mod:`attnbounds.theory.deciding.parallel`; in-process by default)."""
    if inst.B != 1:
        raise InvalidArgument(f"analyse needs a single instance (B=1), got B={inst.B}")
    if not closed_form(statement):
        missing = sorted({q for q in statement.bindings.values() if not QUANTITIES[q].closed_form})
        return [LimitResult("", "unsupported", detail=f"no closed form along token classes for {', '.join(missing)}")]
    from attnbounds.theory.deciding.certify import certify

    if certify(statement, inst).status == "not-applicable":  # its growths keep the hypotheses it does not satisfy
        return [LimitResult(g.name, "unsupported", detail="the instance itself is outside the hypotheses (certified): "
                                                          "the members of its growths are not instances either")
                for g in growths(inst)]
    return (runner or Runner()).map(_growth_piece, growths(inst), shared=(statement, violated, bits, work_limit),
                                    label=f"limits {statement.id}")


def _unclaimed(statement: Statement, growth: Growth) -> str:
    """Why no violation along ``growth`` can be claimed ("" when it can): a hypothesis not known to hold at every
    member of the growth (the members would be NOT-APPLICABLE, not counterexamples), or weights given without a
    normaliser (they keep their values as the counts grow: the members are not attention instances at all)."""
    if growth.base.normaliser is None or growth.base.logits is None:
        return "the weights were given without a normaliser: they keep their values as the counts grow"
    for h in statement.hypotheses:
        if h.along_growths is None or not h.along_growths(growth.base):
            return f"the hypothesis {h.id!r} is not known to hold along it"
    return ""


def _length_cap(statement: Statement) -> int | None:
    """The largest L of the statement's range of L (None: no upper end)."""
    high = statement.ranges.get("L", (1, math.inf))[1]
    return int(math.floor(high)) if math.isfinite(high) else None


def _growth_piece(shared: tuple[Statement, bool, int, int], growth: Growth) -> LimitResult:
    statement, violated, bits, work_limit = shared
    ops = SymbolicOps(Work(work_limit))
    try:
        with ops.precision(bits):
            return _analyse_growth(statement, growth, ops, violated)
    except (CannotCertify, AttnBoundsError, NotImplementedError, RecursionError, TypeError, ValueError,
            ZeroDivisionError) as exc:
        return LimitResult(growth.name, "unsupported", detail=f"{type(exc).__name__}: {exc}"[:300])


def _analyse_growth(statement: Statement, growth: Growth, ops: SymbolicOps, violated: bool) -> LimitResult:
    """The sign of the statement's margins along ``growth``: "holds" needs every distinct (conjunct, column) margin
    certified >= 0 on the range, "violated" one margin certified < 0 there, with every hypothesis known to hold
    along the growth (:attr:`~attnbounds.theory.mathematics.hypotheses.Hypothesis.along_growths`) and within the
    statement's range of L."""
    unclaimed = _unclaimed(statement, growth)
    if violated and unclaimed:
        return LimitResult(growth.name, "unsupported", detail=f"no violation is claimed along the growth: {unclaimed}")
    L_cap = _length_cap(statement)
    ms = margins(statement, growth, ops)
    for m in ms:
        nodes = size(m.expr)
        if nodes > MAX_NODES:
            raise WorkLimit(f"the margin's closed form has {nodes} subexpressions and references (at most "
                            f"{MAX_NODES} are analysed)")
    at0 = [float(_numeric(m.expr, ops, [0])[0]) for m in ms]
    if not all(math.isfinite(v) for v in at0):
        raise Unsupported("the margin has no finite value at the instance itself (at its constants' midpoints)")
    worst = ms[int(np.argmin(at0))]
    order = _order(worst.expr, ops)
    if order is None:
        return LimitResult(growth.name, "unsupported", detail="sympy found no limit of the margin")
    p, c = order
    rhs_order = _order(worst.rhs, ops)
    slack = None
    if c is not None and rhs_order is not None and rhs_order[0] == p and rhs_order[1] not in (None, 0) \
            and c.is_finite:
        slack = float(c / sp.Abs(rhs_order[1]))
    size_text = "(size below the constants' precision)" if c is None else f"{sp.N(c, 6)}"
    leading = f"margin ~ {size_text} L^-{p}" if p else f"margin -> {size_text}"
    negative = c is not None and bool((c < 0) == True)  # noqa: E712 - a sympy truth value
    others = [m for m in {m.expr: m for m in ms}.values() if m.expr != worst.expr]  # each distinct margin once
    forms: dict[sp.Expr, sp.Expr] = {worst.expr: _in_u(worst.expr, p)}

    swept: dict[sp.Expr, tuple[int, Fraction, bool]] = {}

    def sweep(m: Margin) -> tuple[int, Fraction, bool]:
        if m.expr not in swept:
            if m.expr not in forms:  # dividing by u^p > 0 keeps the sign: p only makes the form regular at u = 0
                other = _order(m.expr, ops)
                forms[m.expr] = _in_u(m.expr, other[0] if other is not None else 0)
            swept[m.expr] = _sweep(forms[m.expr], ops, ops.work)
        return swept[m.expr]

    sign, u0, to_zero = sweep(worst)
    which = ""
    if sign > 0:  # the statement holds on the range only where every conjunct holds at every column
        for m in others:
            other, u_m, other_to_zero = sweep(m)
            if other <= 0:  # violated by that margin from its own start, or undecided
                sign, u0, to_zero = other, u_m, other_to_zero
                which = (f" of {conjuncts(statement.relation)[m.conjunct]}"
                         + (f" at column {m.column}" if m.column >= 0 else ""))
                break
            u0, to_zero = min(u0, u_m), to_zero and other_to_zero
    if sign != 0:
        t0 = math.ceil(1 / u0 - 1)  # u <= u0 is t >= 1/u0 - 1, exactly (u0 is a dyadic rational)
        L0 = int(growth.length(t0))
        L_max = None if to_zero else int(growth.length(2**SWEEP_DEPTH - 1))
        upto = "" if to_zero else f" up to L = {L_max:.3g} (the limit itself is sympy's, not certified)"
        if sign < 0 and unclaimed:
            return LimitResult(growth.name, "unsupported", limit=leading, slack=slack, order=p,
                               detail=f"the margin{which} is certified < 0 from L = {L0} on, but {unclaimed}")
        if sign < 0 and L_cap is not None:  # beyond the statement's range of L no instance is a counterexample
            if L0 > L_cap:
                return LimitResult(growth.name, "unsupported", limit=leading, slack=slack, order=p,
                                   detail=f"the margin{which} is certified < 0 only from L = {L0} on, beyond the "
                                          f"statement's range of L (up to {L_cap})")
            if L_max is None or L_max > L_cap:
                to_zero, L_max = False, L_cap
                upto = f" up to L = {L_cap} (the statement's range of L ends there)"
        what = "< 0" if sign < 0 else ">= 0"
        status = ("violated" if sign < 0 else "holds") + ("-for-all" if to_zero else "-up-to")
        return LimitResult(growth.name, status, L0=L0, L_max=L_max, limit=leading, slack=slack, order=p,
                           detail=f"the margin{which} is certified {what} for every t >= {t0} (L >= {L0}) of the "
                                  f"family{upto}")
    status = "limit-only"
    detail = ("the margin's limit lies below what its constants' precision shows (its value there moves with their last "
              "digits): not estimated, not certified" if c is None else
              "sympy's limit says the margin stays negative, but interval evaluation could not certify it"
              if negative else "sympy's limit says the margin tends to 0 (not certified)" if c == 0
              else "sympy's limit says the margin stays positive (not certified)")
    return LimitResult(growth.name, status, limit=leading, slack=slack, order=p, detail=detail)
