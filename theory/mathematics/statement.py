"""A statement: one reading of one result of the paper, as a value you can print, compare and evaluate.

The inequality is a sympy relation (``sp.Le`` or an ``sp.And`` of them) over named quantities
(:mod:`attnbounds.theory.mathematics.quantities`) and instance parameters; the vectorised evaluator is generated from
that one expression (``lambdify`` plus a small rewrite of ``Sum`` over selected tokens), so the
printed formula and the numbers cannot drift apart.

Conventions: ``margin = rhs - lhs`` (``>= 0`` means the bound holds), ``ratio = lhs / rhs``.
Symbols bound to per-token quantities (``alpha_i``) make the relation hold "for all i": the
margin is the minimum over tokens. ``Sum(f(xi[i]), (i, 1, N))`` sums over the selected tokens.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, Literal, get_args

import mpmath
import numpy as np
import sympy as sp

from attnbounds.theory.mathematics import notation
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.exprparse import check_identifier
from attnbounds.theory.mathematics.hypotheses import (FIXED_HYPOTHESIS, NEED_PARAMETERS, RANGES_HYPOTHESIS, Hypothesis,
                                          domain_hypotheses, fixed_parameters, parameter_ranges)
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.quantities import QUANTITIES, compute, interval

ARXIV = "arXiv:2508.17821"
PAPER_VERSION = "v3 (5 Jun 2026)"


#: a record's verdict (README, "What the verdicts mean")
Verdict = Literal["PROVED", "VERIFIED", "REFUTED", "UNDECIDED", "NOT-APPLICABLE", "ERROR"]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)


@dataclass(frozen=True)
class Citation:
    """Where a statement comes from in the paper."""

    numbering: str  # e.g. "Theorem 1 (fixed top-N set)"
    arxiv: str = ARXIV
    version: str = PAPER_VERSION
    source: str = "paper.md; seed 002"

    def __str__(self) -> str:
        return f"{self.numbering}, {self.arxiv} {self.version}"


@dataclass(frozen=True)
class Evaluation:
    """Per-instance numbers of one statement on a batch (all arrays of shape ``(B,)``).

    ``margin_lo``/``margin_hi`` bracket the margin when the statement involves Monte Carlo
    estimates (equal to ``margin`` otherwise). ``applicable`` is False where a hypothesis fails;
    those instances are NOT-APPLICABLE and their numbers are NaN.
    """

    statement_id: str
    lhs: np.ndarray
    rhs: np.ndarray
    margin: np.ndarray
    margin_lo: np.ndarray
    margin_hi: np.ndarray
    applicable: np.ndarray
    failed_hypotheses: tuple[tuple[str, ...], ...]
    #: per instance, whether the conjunct deciding its margin is strict (``<``): a margin of exactly 0 violates it
    strict: np.ndarray | None = None

    @property
    def ratio(self) -> np.ndarray:
        """``lhs / rhs`` (``inf`` where rhs is 0 and lhs > 0; 1 where both vanish)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            r = self.lhs / self.rhs
        both0 = (self.lhs == 0) & (self.rhs == 0)
        return np.where(both0, 1.0, np.where(self.rhs == 0, np.where(self.lhs > 0, np.inf, -np.inf), r))

    @property
    def violated(self) -> np.ndarray:
        """Float64 verdict per instance: the whole margin interval is negative, or at most 0 for a strict
        conjunct (certify to be sure)."""
        if self.strict is None:
            return self.applicable & (self.margin_hi < 0)
        return self.applicable & ((self.margin_hi < 0) | (self.strict & (self.margin_hi <= 0)))

    def worst(self) -> int:
        """Index of the applicable instance with the smallest margin (-1 if none applies)."""
        m = np.where(self.applicable, self.margin_hi, np.inf)
        return int(np.argmin(m)) if np.isfinite(m).any() or np.any(self.applicable) else -1


def conjuncts(relation: sp.Basic) -> list[sp.Rel]:
    """The conjuncts as ``lhs <= rhs`` or ``lhs < rhs`` (strict ones stay strict: an equality case violates them)."""
    parts = list(relation.args) if isinstance(relation, sp.And) else [relation]
    out = []
    for p in parts:
        if isinstance(p, (sp.LessThan, sp.StrictLessThan)):
            out.append(p)
        elif isinstance(p, (sp.GreaterThan, sp.StrictGreaterThan)):
            flip = sp.Lt if isinstance(p, sp.StrictGreaterThan) else sp.Le
            out.append(flip(p.rhs, p.lhs, evaluate=False))
        else:
            raise InvalidArgument(f"a statement must be an inequality or a conjunction of them, got {p}")
    return out


def is_strict(rel: sp.Basic) -> bool:
    """Whether a conjunct is a strict inequality (``<`` or ``>``)."""
    return isinstance(rel, (sp.StrictLessThan, sp.StrictGreaterThan))


def indexed_to_symbol(expr: sp.Expr) -> sp.Expr:
    """``expr`` with every per-token symbol ``x[i]`` read as the plain symbol ``x``."""
    return expr.replace(lambda e: isinstance(e, sp.Indexed), lambda e: sp.Symbol(str(e.base)))


def check_sums(expr: sp.Basic, where: str) -> None:
    """Every ``Sum`` must run over the selected tokens, ``(i, 1, N)``, with a single index (else InvalidArgument)."""
    for node in expr.atoms(sp.Sum):
        if len(node.limits) != 1:
            raise InvalidArgument(f"{where}: only single sums over the selected tokens are supported, got {node}")
        var, lo, hi = node.limits[0]
        if lo != 1 or str(hi) != "N" or str(var) != "i":
            raise InvalidArgument(f"{where}: a Sum must run over the selected tokens as Sum(body, (i, 1, N)); got "
                                  f"limits {node.limits[0]} in {node}")
        if node.function.atoms(sp.Sum):
            raise InvalidArgument(f"{where}: nested sums are not supported: {node}")


#: environment key of the weights of a Sum over the selected tokens: token counts on selected columns, 0 elsewhere
SELECTED_WEIGHTS = "__selected_weights__"


class Compiled:
    """``lambdify`` of one side of a relation; ``Sum(body, (i, 1, N))`` becomes the sum over the selected
    columns of ``body`` weighted by their token counts (so a body without per-token values counts N times)."""

    def __init__(self, expr: sp.Expr):
        self.sums: list[tuple[sp.Symbol, Callable[..., Any], tuple[str, ...]]] = []
        replace: dict[sp.Basic, sp.Symbol] = {}
        for k, node in enumerate(sorted(expr.atoms(sp.Sum), key=sp.default_sort_key)):
            body = indexed_to_symbol(node.function)
            names = tuple(sorted(str(s) for s in body.free_symbols if s not in node.variables))
            fn = sp.lambdify([sp.Symbol(n) for n in names], body, modules="numpy")
            dummy = sp.Symbol(f"_sum{k}")
            self.sums.append((dummy, fn, names))
            replace[node] = dummy
        main = expr.xreplace(replace)
        self.names = tuple(sorted(str(s) for s in main.free_symbols))
        self.fn = sp.lambdify([sp.Symbol(n) for n in self.names], main, modules="numpy")

    def __call__(self, env: dict[str, np.ndarray]) -> np.ndarray:
        local = dict(env)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for dummy, fn, names in self.sums:
                w = env[SELECTED_WEIGHTS]
                body = np.broadcast_to(np.asarray(fn(*(local[n] for n in names)), dtype=np.float64), w.shape)
                local[str(dummy)] = np.where(w > 0, body * w, 0.0).sum(-1, keepdims=True)
            return np.asarray(self.fn(*(local[n] for n in self.names)), dtype=np.float64)


def _outside_sums(expr: sp.Basic) -> set[str]:
    """Names of the symbols of ``expr`` that occur outside every ``Sum`` (a walk: rebuilding the expression
    with the sums replaced would evaluate it, and ``log(0)`` is not a real number)."""
    if isinstance(expr, sp.Sum):
        return set()
    if isinstance(expr, sp.Indexed):
        return {str(expr.base)}
    if isinstance(expr, sp.Symbol):
        return {str(expr)}
    return set().union(*(_outside_sums(a) for a in expr.args))


def _to_sympy(value: float, digits: int) -> sp.Expr:
    """A float64 as an exact sympy number (infinities as ``oo``)."""
    if np.isinf(value):
        return sp.oo if value > 0 else -sp.oo
    return sp.Float(repr(value), digits)


def _to_mpf(value: sp.Expr) -> mpmath.mpf:
    if value in (sp.oo, sp.zoo):
        return mpmath.inf
    if value == -sp.oo:
        return -mpmath.inf
    return mpmath.mpf(str(sp.re(value)))


def symbol_names(expr: sp.Basic) -> set[str]:
    """The names of the symbols ``expr`` reads (an indexed ``x[i]`` by its base ``x``; a sum's own index left out)."""
    names = set()
    for node in sp.preorder_traversal(expr):
        if isinstance(node, sp.Indexed):
            names.add(str(node.base))
        elif isinstance(node, sp.Symbol):
            names.add(str(node))
    for node in expr.atoms(sp.Sum):
        names -= {str(v) for v in node.variables}
    return names


def _value(value: Any, names: dict[str, sp.Symbol], where: str) -> sp.Basic:
    """A value to substitute: a sympy expression or number as it is, text through the whitelisted parser (never
    ``sympify``, which runs text as Python)."""
    from attnbounds.theory.mathematics.exprparse import parse_expression

    if isinstance(value, sp.Basic):
        return value
    if isinstance(value, str):
        return parse_expression(value, names, where=where)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return sp.sympify(value)
    raise InvalidArgument(f"{where}: expected a number, a sympy expression or its text, got {type(value).__name__}")


@dataclass(frozen=True, eq=False)
class Statement:
    """One reading of one statement of the paper (see module docstring).

    Attributes: ``id`` (``result[reading]``), ``relation`` (sympy), ``bindings`` (symbol name ->
    quantity name; unbound symbols are instance parameters), ``hypotheses``, ``defaults``
    (parameter -> value, or quantity name to compute it from), ``kind`` (``deterministic`` or
    ``expectation``), ``expectation_over`` (what is random), ``citation`` and ``notes``.
    Every parameter the statement uses (:meth:`used_parameters`) that has a domain in
    :data:`attnbounds.theory.mathematics.hypotheses.DOMAINS` gets the hypothesis ``domain(<name>)`` appended.
    """

    id: str
    title: str
    relation: sp.Basic
    citation: Citation
    hypotheses: tuple[Hypothesis, ...] = ()
    bindings: dict[str, str] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    kind: str = "deterministic"
    expectation_over: str | None = None
    notes: str = ""
    fixed: dict[str, float] = field(default_factory=dict)
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in sorted({*symbol_names(self.relation), *self.bindings, *self.defaults, *self.fixed, *self.ranges}):
            check_identifier(str(name), f"statement {self.id}")
        for sym, qname in self.bindings.items():
            if qname not in QUANTITIES:
                raise InvalidArgument(f"statement {self.id}: symbol {sym} bound to unknown quantity {qname}")
        conjuncts(self.relation)
        check_sums(self.relation, f"statement {self.id}")
        if self.kind not in ("deterministic", "expectation"):
            raise InvalidArgument(f"statement {self.id}: kind must be 'deterministic' or 'expectation', got {self.kind!r}")
        if self.fixed and not any(h.id == FIXED_HYPOTHESIS for h in self.hypotheses):
            object.__setattr__(self, "hypotheses", (*self.hypotheses, fixed_parameters(self.fixed)))
        if self.ranges and not any(h.id == RANGES_HYPOTHESIS for h in self.hypotheses):
            object.__setattr__(self, "hypotheses", (*self.hypotheses, parameter_ranges(self.ranges)))
        have = {h.id for h in self.hypotheses}
        extra = tuple(h for h in domain_hypotheses(self.used_parameters()) if h.id not in have)
        if extra:
            object.__setattr__(self, "hypotheses", (*self.hypotheses, *extra))

    # -- printing --------------------------------------------------------------------------------
    @property
    def result(self) -> str:
        return self.id.split("[", 1)[0]

    @property
    def reading(self) -> str:
        return self.id[len(self.result) + 1: -1] if "[" in self.id else ""

    @property
    def latex(self) -> str:
        return sp.latex(self.relation)

    @property
    def formula(self) -> str:
        return sp.sstr(self.relation)

    def where(self) -> dict[str, str]:
        """What each bound symbol means: symbol -> quantity description."""
        return {sym: QUANTITIES[q].description for sym, q in sorted(self.bindings.items())}

    def describe(self) -> str:
        """A multi-line description: id, title, formula, where-clauses, hypotheses, expectation, citation."""
        lines = [f"{self.id}  ({self.citation})", f"  {self.title}", f"  formula:  {notation.text(self.relation)}"]
        lines += [f"    {sym} = {text}" for sym, text in self.where().items()]
        if self.defaults:
            lines.append("  defaults: " + ", ".join(f"{k} = {v}" for k, v in self.defaults.items()))
        lines += [f"  hypothesis {h.id}: {h.description}" for h in self.hypotheses]
        if self.expectation_over:
            lines.append(f"  expectation over: {self.expectation_over}")
        if self.notes:
            lines.append(f"  note: {self.notes}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return f"{self.id}: {self.formula}"

    def _identity(self) -> tuple[str, str]:
        """What equality compares: the id and the relation's srepr (computed once: the statement is frozen)."""
        key = self.__dict__.get("_identity_key")
        if key is None:
            key = (self.id, sp.srepr(self.relation))
            object.__setattr__(self, "_identity_key", key)
        return key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Statement) and self._identity() == other._identity()

    def __hash__(self) -> int:
        # the relation too: every statement given to attnbounds.check has the same id, and hashing by the id alone
        # made each cache lookup compare with every cached statement of that id (a 40-conjunct statement's
        # preparation went from 1.4 s to 10 s of CPU after the API's tests had filled the caches)
        return hash(self._identity())

    def __getstate__(self) -> dict[str, Any]:
        """The fields only: generated evaluators and other caches are rebuilt where the statement is used
        (pickled, they would carry generated code by value: 20 ms and 1 kB per statement)."""
        return {f.name: self.__dict__[f.name] for f in dataclasses.fields(self)}

    def __reduce_ex__(self, protocol: Any) -> Any:
        """A reading of the paper travels by id (a worker finds it in its own registry, with its evaluators
        already built by earlier pieces of work); any other statement by value."""
        lookup = self.__dict__.get("_by_id")
        if lookup is not None:
            return lookup, (self.id,)
        return super().__reduce_ex__(protocol)

    def travel_by_id(self, lookup: Callable[[str], "Statement"]) -> None:
        """Pickle this statement as ``lookup(self.id)`` (:mod:`attnbounds.theory.mathematics.registry` marks the paper's
        readings so; a copy made with ``dataclasses.replace`` travels by value)."""
        object.__setattr__(self, "_by_id", lookup)

    def symbols(self) -> set[str]:
        return set(self._symbols)

    @functools.cached_property
    def _symbols(self) -> frozenset[str]:  # walking the sympy tree costs ~1 ms: once per statement
        return frozenset(symbol_names(self.relation))

    def parameters(self) -> set[str]:
        """Names the instance must supply (or that ``defaults`` fill in)."""
        return {n for n in self.symbols() if n not in self.bindings}

    def used_parameters(self) -> set[str]:
        """Every parameter the statement reads: its own symbols, its defaults and fixed values, and those its
        quantities read (``M``, ``delta``, ``r`` for sphere expectations, ``eps`` for finite differences, ...)."""
        out = self.parameters() | set(self.defaults) | set(self.fixed) | (set(self.ranges) - {"L"})
        for qname in self.bindings.values():
            for need in QUANTITIES[qname].needs:
                out |= set(NEED_PARAMETERS.get(need, ()))
        return out

    @functools.cached_property
    def reads_selection(self) -> bool:
        """Whether the statement reads a top-N selection: ``N``, a quantity over the selected tokens, a sum over
        them, or the hypothesis top-N. Only then are ``N = L`` and a tie at the top-N boundary boundaries of its
        hypotheses (:mod:`attnbounds.theory.deciding.boundary`)."""
        from attnbounds.theory.mathematics.hypotheses import TOP_N

        return ("N" in self.used_parameters() or TOP_N in self.hypotheses or bool(self.relation.atoms(sp.Sum))
                or any("selection" in QUANTITIES[q].needs for q in self.bindings.values()))

    def subs(self, **values: Any) -> "Statement":
        """A variant with symbols replaced (e.g. a constant moved), under the id ``id{name=value,...}``."""
        by_name = {str(sym): sym for sym in self.relation.free_symbols}  # symbols carry assumptions
        unknown = sorted(set(values) - set(by_name))
        if unknown:
            raise InvalidArgument(f"{self.id} has no symbol {unknown[0]!r}; its symbols: {', '.join(sorted(by_name))}")
        new = self.relation.xreplace({by_name[k]: _value(v, by_name, f"{self.id}.subs({k}=...)") for k, v in values.items()})
        tag = ",".join(f"{k}={v}" for k, v in values.items())
        return dataclasses.replace(self, id=f"{self.id}{{{tag}}}", relation=new)

    # -- evaluation ------------------------------------------------------------------------------
    @functools.cached_property
    def _compiled(self) -> list[tuple[Compiled, Compiled]]:
        return [(Compiled(c.lhs), Compiled(c.rhs)) for c in conjuncts(self.relation)]

    @functools.cached_property
    def strict(self) -> tuple[bool, ...]:
        """Per conjunct, whether it is strict (``<``, ``>``): its margin must be positive, 0 violates it."""
        return tuple(is_strict(c) for c in conjuncts(self.relation))

    @functools.cached_property
    def uncertified(self) -> str | None:
        """Why nothing about this statement can be certified (a hypothesis names a Python callable without log F,
        which has no interval version), or None: asked once per statement (:attr:`certifiable`)."""
        for h in self.hypotheses:
            if h.names is not None and not h.names.certifiable:
                return (f"the normaliser {h.names.proto.name!r} is a Python callable without log F: it has no interval "
                        f"version, so a violation is found in float64 arithmetic only (not certified) and a bound that "
                        f"holds is at most VERIFIED")
        return None

    @property
    def certifiable(self) -> bool:
        """Whether a violation can be certified in interval arithmetic (else it is a float64 one only)."""
        return self.uncertified is None

    def prepare(self, inst: Instance) -> Instance:
        """The instance with missing parameters filled from ``fixed`` and ``defaults``."""
        missing = {}
        for name, value in {**self.defaults, **self.fixed}.items():
            if name not in inst.params:
                missing[name] = compute(value, inst) if isinstance(value, str) else value
        return inst.with_params(**missing) if missing else inst

    def env(self, inst: Instance, side: str) -> dict[str, np.ndarray]:
        """Every symbol's value on ``inst`` by name (``(B, 1)`` per instance, ``(B, K)`` per token; an estimate at
        ``side``: ``mid``, ``lo`` or ``hi`` of its interval), and the selected tokens' counts for the sums."""
        env: dict[str, np.ndarray] = {}
        for name in sorted(self.symbols()):
            qname = self.bindings.get(name)
            if qname is None:
                env[name] = inst.param(name)[:, None]
                continue
            if QUANTITIES[qname].estimate:
                lo, hi = interval(qname, inst)
                value = {"mid": compute(qname, inst), "lo": lo, "hi": hi}[side]
            else:
                value = compute(qname, inst)
            env[name] = value[:, None] if value.ndim == 1 else value
        if inst.N is not None:
            env[SELECTED_WEIGHTS] = np.where(inst.mask & inst.present, inst.multiplicity, 0.0)
        elif self.relation.atoms(sp.Sum):
            raise InvalidArgument(f"{self.id} sums over the selected tokens: pass N=... when building the instance")
        return env

    @functools.cached_property
    def token_kinds(self) -> list[str]:
        """Per conjunct, over which columns it must hold: 'selected' (a per-selected-token symbol outside the
        sums), 'tokens' (a per-token symbol), or 'none' (one value per instance)."""
        kinds = []
        for rel in conjuncts(self.relation):
            shapes = {QUANTITIES[self.bindings[n]].shape for n in _outside_sums(rel) if n in self.bindings}
            kinds.append("selected" if "BN" in shapes else "tokens" if "BL" in shapes else "none")
        return kinds

    def column_mask(self, inst: Instance, conjunct: int) -> np.ndarray | None:
        """The columns over which conjunct ``conjunct`` must hold ``(B, K)``, or None (one value per instance)."""
        kind = self.token_kinds[conjunct]
        if kind == "selected":
            return inst.mask & inst.present
        return inst.present if kind == "tokens" else None

    def check_hypotheses(self, inst: Instance) -> tuple[np.ndarray, tuple[tuple[str, ...], ...]]:
        results = [(h.id, h(inst)) for h in self.hypotheses]
        ok = np.ones(inst.B, dtype=bool)
        for _, r in results:
            ok &= r
        failed = ((),) * inst.B if ok.all() else tuple(tuple(hid for hid, r in results if not r[b]) for b in range(inst.B))
        return ok, failed

    def sides_from(self, values: dict[str, np.ndarray]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per conjunct ``(lhs, rhs)`` from given values instead of an instance (no hypothesis is checked): every
        symbol by name, ``(B, 1)`` per instance or ``(B, K)`` per token, and ``values[SELECTED_WEIGHTS]`` (token
        counts on the selected columns, 0 elsewhere) for the sums over ``I_N``."""
        return [(lhs(values), rhs(values)) for lhs, rhs in self._compiled]

    def sides(self, env: dict[str, np.ndarray], inst: Instance) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """Per conjunct ``(lhs, rhs, columns)``: both sides broadcast to ``(B, W)`` (W = 1 or the columns)
        and the mask of the columns where it must hold (None for one value per instance)."""
        B = inst.B
        out = []
        for c, (lhs_fn, rhs_fn) in enumerate(self._compiled):
            lhs, rhs = lhs_fn(env), rhs_fn(env)
            lhs, rhs = np.broadcast_arrays(np.atleast_2d(lhs).reshape(B, -1) if lhs.ndim else np.full((B, 1), lhs),
                                           np.atleast_2d(rhs).reshape(B, -1) if rhs.ndim else np.full((B, 1), rhs))
            cols = self.column_mask(inst, c)
            out.append((lhs, rhs, None if cols is None or lhs.shape[1] == 1 else cols))
        return out

    def _margins(self, env: dict[str, np.ndarray], inst: Instance
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per instance the sides and margin of the deciding conjunct (smallest margin; at a tie, a strict one),
        and whether that conjunct is strict."""
        B = inst.B
        best_m = np.full(B, np.inf)
        best_l = np.full(B, np.nan)
        best_r = np.full(B, np.nan)
        best_s = np.zeros(B, dtype=bool)
        for (lhs, rhs, cols), strict in zip(self.sides(env, inst), self.strict):
            with np.errstate(invalid="ignore"):
                m = rhs - lhs
            m = np.where(np.isnan(m) & (lhs == rhs), 0.0, m)
            key = np.where(np.isnan(m), -np.inf, m)
            if cols is not None:
                key = np.where(cols, key, np.inf)
            k = np.argmin(key, axis=-1)
            mk = np.take_along_axis(m, k[:, None], -1)[:, 0]
            # an undefined (NaN) conjunct decides: no later conjunct's margin replaces it
            better = (~(mk >= best_m) & ~np.isnan(best_m)) | (strict & (mk == best_m) & ~best_s)
            best_m = np.where(better, mk, best_m)
            best_l = np.where(better, np.take_along_axis(lhs, k[:, None], -1)[:, 0], best_l)
            best_r = np.where(better, np.take_along_axis(rhs, k[:, None], -1)[:, 0], best_r)
            best_s = np.where(better, strict, best_s)
        return best_l, best_r, best_m, best_s

    def evaluate(self, inst: Instance) -> Evaluation:
        """lhs, rhs, margin on every instance; NOT-APPLICABLE (NaN, ``applicable=False``) where a hypothesis fails."""
        if not isinstance(inst, Instance):
            raise InvalidArgument(f"evaluate needs a attnbounds.theory.mathematics.instance.Instance, got {type(inst).__name__}")
        inst = self.prepare(inst)
        ok, failed = self.check_hypotheses(inst)
        out = {k: np.full(inst.B, np.nan) for k in ("lhs", "rhs", "margin", "lo", "hi")}
        strict = np.zeros(inst.B, dtype=bool)
        idx = np.nonzero(ok)[0]
        if idx.size:
            sub = inst if idx.size == inst.B else inst.take(idx)
            lhs, rhs, margin, strict[idx] = self._margins(self.env(sub, "mid"), sub)
            if any(QUANTITIES[q].estimate for q in self.bindings.values()):
                m_a = self._margins(self.env(sub, "lo"), sub)[2]
                m_b = self._margins(self.env(sub, "hi"), sub)[2]
                lo, hi = np.minimum(m_a, m_b), np.maximum(m_a, m_b)
            else:
                lo = hi = margin
            for key, val in zip(("lhs", "rhs", "margin", "lo", "hi"), (lhs, rhs, margin, lo, hi)):
                out[key][idx] = val
        return Evaluation(self.id, out["lhs"], out["rhs"], out["margin"], out["lo"], out["hi"], ok, failed, strict)

    # -- high-precision reference ----------------------------------------------------------------
    def evaluate_sympy(self, inst: Instance, b: int, digits: int = 50) -> tuple[mpmath.mpf, mpmath.mpf, mpmath.mpf]:
        """(lhs, rhs, margin) of instance ``b`` from the sympy relation itself at ``digits`` digits.

        Quantity values are taken from the float64 quantity layer (exact as binary rationals); the
        formula is evaluated by sympy substitution, independently of the generated evaluator: a
        ``Sum`` over the selected tokens is expanded column by column with the columns' token counts.
        """
        inst = self.prepare(inst)
        env = self.env(inst, "mid")
        weights = env.get(SELECTED_WEIGHTS)
        best = None
        for c, rel in enumerate(conjuncts(self.relation)):
            cols = self.column_mask(inst, c)
            per_token = [n for n in _outside_sums(rel) if n in env and env[n].shape[1] > 1]
            columns = [t for t in range(inst.K) if cols is None or cols[b, t]] if per_token else [0]
            for t in columns:
                vals = {}
                for sym in rel.free_symbols:
                    if not isinstance(sym, sp.Symbol) or str(sym) not in env:
                        continue
                    v = env[str(sym)][b]
                    vals[sym] = _to_sympy(float(v[t if v.shape[0] > 1 else 0]), digits)
                sides = []
                for side in (rel.lhs, rel.rhs):
                    e = side
                    for node in e.atoms(sp.Sum):
                        assert weights is not None
                        terms = []
                        for k in np.flatnonzero(weights[b] > 0):
                            body = indexed_to_symbol(node.function)
                            sub = {s_: _to_sympy(float(env[str(s_)][b][k if env[str(s_)][b].shape[0] > 1 else 0]), digits)
                                   for s_ in body.free_symbols if str(s_) in env}
                            terms.append(sp.Integer(int(weights[b, k])) * body.xreplace(sub))
                        e = e.xreplace({node: sp.Add(*terms)})
                    sides.append(sp.N(e.xreplace(vals), digits))
                lhs_v, rhs_v = (_to_mpf(x_) for x_ in sides)
                m = rhs_v - lhs_v
                if best is None or m < best[2]:
                    best = (lhs_v, rhs_v, m)
        assert best is not None
        return best

    def _is_selected(self, name: str) -> bool:
        q = self.bindings.get(name)
        return q is not None and QUANTITIES[q].shape == "BN"
