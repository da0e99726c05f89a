"""Certification: re-check one instance of a statement in interval arithmetic, and decide batches rigorously.

:func:`certify` takes the exact float inputs of one instance, recomputes the weights and every
quantity from its definition in balls (:mod:`attnbounds.theory.mathematics.balls`, python-flint ``arb`` at 128 bits by
default, ``mpmath.iv`` when flint is missing), checks the hypotheses that rounding could decide
(simplex, top-N with exact ties, bounded logits) in balls, and evaluates the statement's sympy
relation on the balls. The margin is ``rhs - lhs`` (minimum over conjuncts and, for per-token
symbols, over tokens). Status:

- ``violated``: the whole margin interval is below 0 and every hypothesis is certified to hold;
- ``holds``: the whole margin interval is at or above 0;
- ``inconclusive``: neither (a tie that cannot be decided, a quantity that cannot be bounded tightly
  enough); never a refutation.

An interval that stays around 0 at every precision up to :data:`MAX_BITS` goes to the exact tier: the same
ball forms on exact numbers (:class:`~attnbounds.theory.mathematics.exact.ExactOps`) and the margin's sign decided
by :func:`~attnbounds.theory.mathematics.exact.sign_of`, the decision the prover and closed claims use too. An
exact 0 holds a non-strict bound and violates a strict one (``backend == "exact"``); a form that needs a range
(a spectral norm's Gershgorin hull, a Monte Carlo interval) leaves the certificate inconclusive;
- ``not-applicable``: a hypothesis certainly fails on this instance.

Expectations are exact when enumerated (``method="enumeration"``) or bounded for every sphere
configuration; otherwise they come from Monte Carlo with a Hoeffding interval at level
``1 - mc_level`` (``method="hoeffding"``, ``level`` recorded): such a "violated" is a statistical
refutation and is labelled so.

:func:`decide` is the rigorous comparison for batches: margins clearly positive in float64 are
decided there, every other instance (negative, NaN, or within a relative band of 0) is certified.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, get_args

import numpy as np

from attnbounds.theory.mathematics import balls
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.exact import ExactOps
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.intervals import BallEvaluator, Ops, PrecisionLoss, Unsupported, backend
from attnbounds.theory.deciding.margins import relative_margins
from attnbounds.theory.mathematics.quantities.spec import QUANTITIES, ball_value
from attnbounds.theory.mathematics.quantities.theorem2 import refine_sphere
from attnbounds.theory.mathematics.statement import Statement, conjuncts

#: what a certificate says about the relation on its instance
Status = Literal["violated", "holds", "inconclusive", "not-applicable"]
STATUSES: tuple[Status, ...] = get_args(Status)
#: how a certificate reports a hypothesis it takes from its float check (Hypothesis.certification)
FLOAT_REPORT = {"exact": "float check", "float": "float check only (not certified)"}
#: default relative band of :func:`decide` (float margins above band * magnitude are "holds")
BAND = 1e-6
#: the ceiling of certification's precision doubling, in bits
MAX_BITS = 4096


@dataclass(frozen=True)
class Certificate:
    """The outcome of :func:`certify` for one instance (see module docstring for ``status``).

    ``margin_lo``/``margin_hi`` are doubles rounded outward from the certified interval
    (``*_text``: the exact endpoints in decimal); ``lhs``/``rhs`` are the balls at the worst
    conjunct and token, ``scale`` bounds their magnitude and that of the quantity values in that
    conjunct (the yardstick of :meth:`equality`); ``hypotheses`` says how each hypothesis was decided.
    """

    statement_id: str
    status: Status
    margin_lo: float
    margin_hi: float
    margin_lo_text: str
    margin_hi_text: str
    lhs: str
    rhs: str
    worst: dict[str, int]
    precision_bits: int
    backend: str
    method: str
    level: float | None
    weights: str
    hypotheses: dict[str, str]
    notes: tuple[str, ...]
    scale: float
    seconds: float = field(compare=False)
    #: a strict conjunct's margin may be exactly 0 (written only when True): an equality case refutes it, so an
    #: inconclusive certificate is then never "equality"
    strict: bool = False

    @property
    def violated(self) -> bool:
        return self.status == "violated"

    @property
    def statistical(self) -> bool:
        return self.method == "hoeffding"

    def equality(self, rel: float = 1e-15) -> bool:
        """Inconclusive only because the margin is 0 to within ``rel`` of the sides (a tight bound's
        equality case), not because of a statistical interval or an undecided hypothesis."""
        if self.status != "inconclusive" or self.statistical or self.strict or not math.isfinite(self.margin_lo):
            return False
        if any(v == "undecided" for v in self.hypotheses.values()):
            return False
        return max(-self.margin_lo, self.margin_hi) <= rel * max(self.scale, 1e-300)

    def to_json(self, timing: bool = True) -> dict[str, Any]:
        """A JSON-ready dict (``seconds`` left out when ``timing`` is False)."""
        out = asdict(self)
        out["notes"] = list(self.notes)
        for key in ("margin_lo", "margin_hi", "scale"):
            v = out[key]
            out[key] = v if math.isfinite(v) else repr(v)
        if not timing:
            out.pop("seconds")
        if not self.strict:
            out.pop("strict")
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Certificate":
        d = dict(data)
        d.setdefault("seconds", float("nan"))
        d.setdefault("scale", float("nan"))  # written before the field existed
        for key in ("margin_lo", "margin_hi", "scale"):
            d[key] = float(d[key])
        d["notes"] = tuple(d.get("notes", ()))
        return cls(**d)


def _statement(statement: Statement | str) -> Statement:
    from attnbounds.theory.mathematics.registry import resolve  # the registry imports every statement module: keep it lazy

    return resolve(statement)


# -- the relation on balls ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=512)
def _structure(st: Statement) -> tuple[tuple[str, ...], tuple[Any, ...], tuple[tuple[str, ...], ...]]:
    """The statement's free names, its conjuncts, and each conjunct's quantity symbols (cached)."""
    from attnbounds.theory.mathematics.statement import symbol_names

    conj = tuple(conjuncts(st.relation))
    terms = tuple(tuple(sorted(n for n in symbol_names(c) if n in st.bindings)) for c in conj)
    return tuple(sorted(st.symbols())), conj, terms


def ball_environment(st: Statement, ex: balls.BallInstance) -> tuple[dict[str, Any], dict[str, Any]]:
    """Balls of the statement's symbols: per-selected-token quantities (over the selected columns) apart."""
    env: dict[str, Any] = {}
    selected: dict[str, Any] = {}
    for name in _structure(st)[0]:
        qname = st.bindings.get(name)
        if qname is None:
            env[name] = ex.param(name)
        elif QUANTITIES[qname].shape == "BN":
            selected[name] = ball_value(qname, ex)
        else:
            env[name] = ball_value(qname, ex)
    return env, selected


@dataclass
class _Margin:
    ball: Any
    lhs: Any
    rhs: Any
    conjunct: int
    token: int
    scale: float = 0.0  # the magnitude of the worst conjunct's sides and quantity values
    violated: bool = False  # some conjunct certainly fails (margin < 0, or <= 0 for a strict one)
    holds: bool = False  # every conjunct certainly holds (margin >= 0, or > 0 for a strict one)
    strict_open: bool = False  # a strict conjunct's margin may be exactly 0: no equality case can hold it


def conjunct_balls(st: Statement, c: int, ops: Ops, env: dict[str, Any], selected: dict[str, Any],
                   weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Both sides of conjunct ``c`` on balls, broadcast to one length: 1, the columns (a per-token
    relation) or the selected columns (a per-selected-token one). ``env`` holds the balls of the
    parameters and quantities, ``selected`` those of the per-selected-token quantities over the
    selected columns, ``weights`` the selected columns' token counts."""
    kind = st.token_kinds[c]
    rel = _structure(st)[1][c]
    evaluate = BallEvaluator(ops, {**env, **selected} if kind == "selected" else env, selected, weights)
    lhs, rhs = evaluate(rel.lhs), evaluate(rel.rhs)
    lhs_a, rhs_a = np.broadcast_arrays(np.atleast_1d(np.asarray(lhs, dtype=object)),
                                       np.atleast_1d(np.asarray(rhs, dtype=object)))
    return lhs_a, rhs_a


def _margin(st: Statement, ex: balls.BallInstance) -> _Margin:
    ops = ex.ops
    env, selected = ball_environment(st, ex)
    weights = ex.m[ex.sel] if ex.mask is not None else None
    lows, highs, worst = [], [], None
    violated, holds, strict_open = False, True, False
    _, conjuncts, terms = _structure(st)
    for c in range(len(conjuncts)):
        kind = st.token_kinds[c]
        strict = st.strict[c]
        lhs_a, rhs_a = conjunct_balls(st, c, ops, env, selected, weights)
        columns: range | list[int] = range(lhs_a.shape[0])
        if kind == "tokens" and lhs_a.shape[0] == ex.K:
            columns = [t for t in columns if ex.counts[t] > 0]
        for t in columns:
            m = rhs_a[t] - lhs_a[t]
            if not ops.is_finite(m):
                raise PrecisionLoss(f"the margin is not finite (conjunct {c}, token {t}): lhs {ops.text(lhs_a[t])}, "
                                  f"rhs {ops.text(rhs_a[t])}")
            lows.append(ops.lower(m))
            highs.append(ops.upper(m))
            fails = not ops.positive(highs[-1]) if strict else ops.negative(highs[-1])
            keeps = ops.positive(lows[-1]) if strict else ops.nonnegative(lows[-1])
            violated, holds = violated or fails, holds and keeps
            strict_open = strict_open or (strict and not fails and not keeps)
            if worst is None or ops.positive(worst[0] - highs[-1]):
                worst = (highs[-1], _Margin(m, lhs_a[t], rhs_a[t], c, t if lhs_a.shape[0] > 1 else -1))
    assert worst is not None
    lo = ops.minimum(np.array(lows, dtype=object))
    hi = ops.minimum(np.array(highs, dtype=object))
    out = worst[1]
    out.ball = ops.hull(lo, hi)
    out.violated, out.holds, out.strict_open = violated, holds, strict_open
    values = [out.lhs, out.rhs, *(v for n in terms[out.conjunct] for v in np.ravel(np.asarray(
        env.get(n, selected.get(n)), dtype=object)))]
    out.scale = max(ops.upper_float(ops.abs(v)) for v in values)
    return out


def _relative_width(ops: Ops, m: _Margin) -> float:
    return (ops.upper_float(m.ball) - ops.lower_float(m.ball)) / max(m.scale, 1e-300)


def certify(statement: Statement | str, inst: Instance, index: int = 0, *, precision_bits: int = 128,
            max_bits: int = MAX_BITS, backend_name: str | None = None) -> Certificate:
    """Re-check instance ``index`` of ``inst`` against ``statement`` in interval arithmetic (module docstring).

    Precision doubles from ``precision_bits`` up to ``max_bits`` while the answer is inconclusive
    and the margin interval is wider than ``2**(-bits/4)`` relative to the sides (precision lost
    to cancellation); an interval that is tight but straddles 0 (an equality case) stops at once and goes to the
    exact tier (:func:`_exact`): the margin computed exactly and its sign decided by
    :func:`~attnbounds.theory.mathematics.exact.sign_of`, so that an exact 0 holds a non-strict bound and violates a
    strict one (``backend`` "exact" in the certificate).
    """
    start = time.perf_counter()
    st = _statement(statement)
    if not isinstance(inst, Instance):
        raise InvalidArgument(f"certify needs a theory.instance.Instance, got {type(inst).__name__}")
    if not isinstance(index, (int, np.integer)) or not -inst.B <= index < inst.B:
        raise InvalidArgument(f"index must be an integer in [0, {inst.B}), got {index!r}")
    if precision_bits < 53 or max_bits < precision_bits:
        raise InvalidArgument(f"need 53 <= precision_bits <= max_bits, got {precision_bits}, {max_bits}")
    ops = backend(backend_name)
    one = inst.take(int(index))
    defaulted = frozenset(n for n, v in st.defaults.items() if n not in one.params and isinstance(v, str))
    one = st.prepare(one)
    _, failed = st.check_hypotheses(one)
    failed_ids = set(failed[0])
    hyp_report = {h.id: "" if h.ball is not None else h.construction or FLOAT_REPORT[h.certification]
                  for h in st.hypotheses}
    float_only = [h.id for h in st.hypotheses if h.certification == "float"]
    base: dict[str, Any] = dict(statement_id=st.id, weights="", worst={"conjunct": -1, "token": -1}, level=None)

    def finish(status: Status, bits: int, m: _Margin | None, ex: balls.BallInstance | None, notes: list[str],
               method: str, ops: Ops = ops) -> Certificate:
        if m is None:
            nan = float("nan")
            lo_f = hi_f = scale = nan
            lo_t = hi_t = lhs = rhs = "nan"
            worst = base["worst"]
        else:
            scale = m.scale
            lo_f, hi_f = ops.lower_float(m.ball), ops.upper_float(m.ball)
            lo_t, hi_t = ops.endpoint_text(ops.lower(m.ball), 25), ops.endpoint_text(ops.upper(m.ball), 25)
            lhs, rhs = ops.text(m.lhs, 25), ops.text(m.rhs, 25)
            worst = {"conjunct": m.conjunct, "token": m.token}
        return Certificate(st.id, status, lo_f, hi_f, lo_t, hi_t, lhs, rhs, worst, bits, ops.name, method,
                           None if ex is None else ex.level, "" if ex is None else ex.weights, dict(hyp_report),
                           tuple(notes + ([] if ex is None else ex.notes)), scale, time.perf_counter() - start,
                           strict=m is not None and m.strict_open and status == "inconclusive")

    def exactly(bits: int, relabel: list[str], notes: list[str]) -> Certificate | None:
        """The exact tier's certificate (:func:`_exact`; the hypotheses ``relabel`` said certified by it), None
        where it decides nothing."""
        decided = _exact(st, one, defaulted, bits)
        if decided is None:
            return None
        exact_status, m_exact, ex_exact, exact_notes = decided
        for hid in relabel:
            hyp_report[hid] = "certified (exactly)"
        return finish(exact_status, bits, m_exact, ex_exact, notes + exact_notes, "exact", ex_exact.ops)

    structural = failed_ids - {h.id for h in st.hypotheses if h.ball is not None}
    if structural:
        for hid in structural:
            hyp_report[hid] = "fails (float check)"
        return finish("not-applicable", precision_bits, None, None, [f"hypotheses fail: {sorted(structural)}"], ops.name)

    bits = precision_bits
    while True:
        notes: list[str] = []
        with ops.precision(bits):
            try:
                ex = balls.ball_instance(one, ops)
                for name in defaulted:
                    ex.params[name] = ball_value(st.defaults[name], ex)
                statuses = {h.id: h.ball(ex, defaulted) for h in st.hypotheses if h.ball is not None}
                for hid, s in statuses.items():
                    hyp_report[hid] = {True: "certified", False: "fails (certified)", None: "undecided"}[s]
                if any(s is False for s in statuses.values()):
                    return finish("not-applicable", bits, None, ex, [], _method(ops, ex))
                m = _margin(st, ex)
                if not m.violated and not m.holds:
                    # undecided by the every-configuration bounds: Monte Carlo (statistical, labelled)
                    if refine_sphere(ex):
                        m = _margin(st, ex)
            except Unsupported as exc:
                if isinstance(exc, PrecisionLoss) and bits * 2 <= max_bits:
                    bits *= 2
                    continue
                if isinstance(exc, PrecisionLoss) and not float_only:  # a tie no precision resolves (a column of a
                    # threshold map exactly at its threshold): exactly, every hypothesis with the margin
                    out = exactly(bits, [h.id for h in st.hypotheses if h.ball is not None], [f"at {bits} bits: {exc}"])
                    if out is not None:
                        return out
                return finish("inconclusive", bits, None, None, [f"cannot certify: {exc}"], ops.name)
            undecided = [hid for hid, s in statuses.items() if s is None]
            status: Status
            unproved: list[str] = []  # (not said once the exact tier certifies the hypotheses)
            if m.violated:
                status = "violated"
                if undecided or float_only:
                    status = "inconclusive"
                    unproved.append(f"the margin is negative but hypotheses {undecided + float_only} could not be "
                                    f"certified")
            elif m.holds:
                status = "holds"
            else:
                status = "inconclusive"
                notes.append("the margin interval contains 0" + (" (a strict inequality is false if it is exactly 0)"
                                                                 if m.strict_open else ""))
            statistical = "hoeffding" in ex.methods
            wide = _relative_width(ops, m) > 2.0 ** (-bits / 4)  # precision lost to cancellation
            if status == "inconclusive" and not statistical and bits * 2 <= max_bits and (undecided or wide):
                bits *= 2  # (or a hypothesis undecided: a near tie)
                continue
            if (status == "inconclusive" and not statistical and not float_only
                    and (undecided or not wide)):  # tight around 0, or a hypothesis at its boundary: an equality case?
                out = exactly(bits, undecided, notes)
                if out is not None:
                    return out
            return finish(status, bits, m, ex, notes + unproved, _method(ops, ex))


#: the most columns (token classes or tokens) the exact tier expands: its expressions grow with them
EXACT_MAX_COLUMNS = 16


def _exact(st: Statement, one: Instance, defaulted: frozenset[str], bits: int
           ) -> tuple[Status, _Margin, balls.BallInstance, list[str]] | None:
    """The status of an instance whose interval margin straddles 0, decided exactly (:class:`ExactOps`): the
    margin computed from the same ball forms on exact numbers and its sign decided by
    :func:`~attnbounds.theory.mathematics.exact.sign_of`; None when a form needs a range, a sign cannot be decided,
    the instance has more than :data:`EXACT_MAX_COLUMNS` columns or carries vectors (``x``, ``q``, ``k``: sums of
    squares of 53-bit rationals grow beyond what sympy decides in reasonable time)."""
    if one.K > EXACT_MAX_COLUMNS or one.x is not None or one.q is not None or one.k is not None:
        return None
    exact = ExactOps()
    try:  # every value here is an exact sympy number: a float flag sympy raises inside numpy's object loops
        with exact.precision(bits), np.errstate(all="ignore"):  # (e^43786 sized as a float) says nothing about it
            ex = balls.ball_instance(one, exact)
            for name in defaulted:
                ex.params[name] = ball_value(st.defaults[name], ex)
            if any(h.ball(ex, defaulted) is not True for h in st.hypotheses if h.ball is not None):
                return None
            m = _margin(st, ex)
    except (Unsupported, InvalidArgument, ArithmeticError, TypeError, ValueError, RecursionError):
        return None
    if ex.methods & {"hoeffding"}:
        return None
    zero = exact.sign(m.ball) == 0
    what = ("the margin is exactly 0 (an equality case" + (": the strict inequality fails there)" if m.violated
                                                          else ": the bound holds with equality)")
            if zero else "the margin's sign was decided exactly")
    if m.violated:
        return "violated", m, ex, [what]
    if m.holds:
        return "holds", m, ex, [what]
    return None


def _method(ops: Ops, ex: balls.BallInstance) -> str:
    if "hoeffding" in ex.methods:
        return "hoeffding"
    if "enumeration" in ex.methods:
        return "enumeration"
    return ops.name


# -- batches -----------------------------------------------------------------------------------------
def decide(statement: Statement | str, inst: Instance, *, band: float = BAND, **certify_kwargs: Any) -> np.ndarray:
    """Per-instance status (:data:`STATUSES`) for a batch: float64 where the margin is far above 0, else :func:`certify`.

    An instance is decided "holds" in float64 when its relative margin (:mod:`attnbounds.theory.deciding.margins`;
    the lower end of the Monte Carlo interval for expectations) exceeds ``band``; "not-applicable" when a
    hypothesis fails in float64; everything else, including every negative margin, goes through
    :func:`certify`, so "violated" is always certified and an equality case is never reported violated
    because of rounding.
    """
    st = _statement(statement)
    if not isinstance(inst, Instance):
        raise InvalidArgument(f"decide needs a attnbounds.theory.mathematics.instance.Instance, got {type(inst).__name__}")
    if not (isinstance(band, (int, float)) and 0 <= band < 1):
        raise InvalidArgument(f"band must be a number in [0, 1), got {band!r}")
    prepared = st.prepare(inst)
    ok, _ = st.check_hypotheses(prepared)
    out = np.full(inst.B, "not-applicable", dtype=object)
    app = np.flatnonzero(ok)
    if len(app) == 0:
        return out
    sub = prepared if len(app) == inst.B else prepared.take(app)  # one instance object: quantities computed once
    rel = np.asarray(relative_margins(st, sub, st.evaluate(sub), pessimistic=True))
    clear = np.isfinite(rel) & (rel > band)
    out[app[clear]] = "holds"
    for b in app[~clear]:
        out[b] = certify(st, inst, int(b), **certify_kwargs).status
    return out
