"""A user's own bounds and normalisers, from a TOML file (or a trusted Python file).

The same search, certification and record as the paper's readings apply to them
(``attnbounds verify --statements FILE [ID ...]``). The format, with a worked example, is in
``docs/user-bounds.md``; in short::

    [[statement]]
    id = "mine.jacobian"
    relation = "J_spectral <= 1/(2*T)"      # sympy, over quantity names and parameters
    hypotheses = ["softmax"]                 # ids from theory.hypotheses (and the paper's readings)
    citation = "My paper, Lemma 3"

    [[normaliser]]
    name = "cubic"
    log_F = "l/T - b*l**2"                   # log F(l) over l, L and the parameters
    params = { T = 1.0, b = 0.1 }

TOML text is never executed: expressions are tokenised and checked against the allowed names
(:mod:`attnbounds.theory.mathematics.exprparse`) before sympy parses them. A ``.py`` file is executed (it may define
``STATEMENTS``, a list of :class:`~attnbounds.theory.mathematics.statement.Statement`, and ``NORMALISERS``, a dict of
name -> constructor or :class:`~attnbounds.theory.mathematics.normalisers.RatioNormaliser`): use it only for files you trust.
"""

from __future__ import annotations

import contextlib
import keyword
import math
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import sympy as sp

from attnbounds.theory.io import atomic, selfcheck
from attnbounds.theory.mathematics.callables import Declared, same_normaliser
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.exprparse import FUNCTIONS, check_identifier, free_names, parse_expression
from attnbounds.theory.mathematics.normalisers import BUILTIN_NAMES, CONSTRUCTORS, L_sym, constructors_added, Normaliser, RatioNormaliser, l_sym, sigmoid, softplus
from attnbounds.theory.mathematics.quantities import QUANTITIES
from attnbounds.theory.mathematics.hypotheses import Hypothesis
from attnbounds.theory.mathematics.statement import Citation, Statement

#: instance parameters a statement may use without declaring them
PARAMETERS = ("L", "N", "T", "a", "r", "M", "delta", "eps", "p", "H", "kappa", "C_H")
_STATEMENT_KEYS = {"id", "title", "relation", "lhs", "rhs", "hypotheses", "where", "defaults", "parameters", "kind",
                   "expectation_over", "notes", "citation", "fixed", "ranges", "normaliser"}
_NORMALISER_KEYS = {"name", "log_F", "params"}
#: a normaliser given from Python (``attnbounds.check``) may also carry its torch function
_PYTHON_NORMALISER_KEYS = _NORMALISER_KEYS | {"torch"}
#: the largest statements file read, in bytes
MAX_FILE_BYTES = 1 << 20
#: seconds of CPU time that parsing and self-checking one statement or normaliser may take (:func:`time_limit`)
LOAD_SECONDS = 10.0
#: the wall-clock backstop of :func:`time_limit`, in multiples of its CPU seconds (a block that waits, not computes)
WAIT_FACTOR = 6.0
#: the index of a Sum over the selected tokens
INDEX = sp.Idx("i")
#: names a normaliser's log_F reads besides its parameters
_LOG_F_NAMES = frozenset({"l", "L", "softplus", "sigmoid"})


@dataclass
class UserBounds:
    """What a statements file declares."""

    path: str
    statements: list[Statement] = field(default_factory=list)
    normalisers: dict[str, Callable[..., Normaliser]] = field(default_factory=dict)

    def get(self, statement_id: str) -> Statement:
        for s in self.statements:
            if s.id == statement_id:
                return s
        raise InvalidArgument(f"{self.path}: no statement with id {statement_id!r}; it declares: "
                              f"{', '.join(s.id for s in self.statements) or 'none'}")


def hypothesis_catalogue() -> dict[str, Hypothesis]:
    """Every hypothesis a user may name: those of :mod:`attnbounds.theory.mathematics.hypotheses` and of the registered readings."""
    from attnbounds.theory.mathematics import hypotheses, registry

    out = {h.id: h for h in vars(hypotheses).values() if isinstance(h, Hypothesis)}
    for s in registry.all_statements():
        for h in s.hypotheses:
            out.setdefault(h.id, h)
    return out


def _check_placement(expr: sp.Basic, quantity_of: dict[str, str], where: str, inside: bool = False) -> None:
    """Per-selected-token quantities (``xi[i]``) only inside ``Sum(..., (i, 1, N))``, the index ``i`` only as
    their index, and no per-token quantity (``alpha_i``) inside a Sum: what both evaluators read alike."""
    if isinstance(expr, sp.Sum):
        _check_placement(expr.function, quantity_of, where, inside=True)
        return
    if isinstance(expr, (sp.Indexed, sp.IndexedBase)):
        if not inside:
            raise InvalidArgument(f"{where}: the per-selected-token quantity {expr} may only appear inside "
                                  f"Sum(..., (i, 1, N)), as in Sum(xi[i], (i, 1, N))")
        return
    if expr == INDEX or (isinstance(expr, sp.Symbol) and expr.name == INDEX.name):
        raise InvalidArgument(f"{where}: the index i may only index a per-selected-token quantity inside a Sum, "
                              f"as in Sum(xi[i], (i, 1, N))")
    if inside and isinstance(expr, sp.Symbol) and expr.name in quantity_of \
            and QUANTITIES[quantity_of[expr.name]].shape == "BL":
        raise InvalidArgument(f"{where}: the per-token quantity {expr} cannot appear inside a Sum over the selected "
                              f"tokens (only per-selected-token quantities, per-instance quantities and parameters)")
    for arg in expr.args:
        _check_placement(arg, quantity_of, where, inside)


def _check_name(name: Any, where: str, reserved: frozenset[str] = frozenset()) -> None:
    """A name a file may declare: an identifier, not a keyword, a function or the Sum index."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise InvalidArgument(f"{where}: {name!r} is not a valid name (letters, digits and _, not a Python keyword)")
    check_identifier(name, where)
    if name in FUNCTIONS or name == INDEX.name or name in reserved:
        raise InvalidArgument(f"{where}: {name!r} is reserved (functions: {', '.join(sorted(FUNCTIONS))}; "
                              f"the Sum index i{'; ' + ', '.join(sorted(reserved)) if reserved else ''})")


def _where(path: str, k: int, sid: object) -> str:
    return f"{path}: statement #{k} ({sid!r})"


def _domain_problem(name: str, value: float) -> str | None:
    """Why ``value`` is outside the domain of parameter ``name`` (None when inside, or when it has no domain)."""
    from attnbounds.theory.mathematics.hypotheses import DOMAINS
    from attnbounds.theory.mathematics.instance import MAX_LENGTH
    from attnbounds.theory.mathematics.quantities.multihead import MAX_HEADS_ENUMERATED

    if name == "L":
        ok = value == int(value) and 1 <= value <= MAX_LENGTH
        return None if ok else f"L must be a whole number of tokens in [1, {MAX_LENGTH:.0e}]"
    if name == "H":
        ok = value == int(value) and 1 <= value <= MAX_HEADS_ENUMERATED
        return None if ok else f"the domain of H is: {DOMAINS['H'].text}"
    positive, nonnegative = ("T", "eps", "M", "r", "kappa", "C_H"), ("delta", "a")
    if (name in positive and not value > 0) or (name in nonnegative and not value >= 0) or (
            name == "p" and not 0 <= value <= 1):
        return f"the domain of {name} is: {DOMAINS[name].text}"
    if name in (*positive, *nonnegative) and value and not SCALES[0] <= abs(value) <= SCALES[1]:
        return (f"{name} = {value:g} is outside [{SCALES[0]:g}, {SCALES[1]:g}], where a search can be trusted: the "
                f"quantities (powers of {name}, weights, Jacobians) leave the normal double range beyond it, and a "
                f"float64 search could not tell a true bound from a false one there")
    return None


#: the magnitudes a fixed or ranged scale parameter (T, eps, M, r, kappa, C_H, delta, a) may take (0 aside)
SCALES = (1e-150, 1e150)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InvalidArgument(f"{where} must be a finite number, got {value!r}")
    return float(value)


def _subtable(table: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``table[key]`` (empty when absent), refused unless it is a table of what :data:`_WHAT` says."""
    value = table.get(key, {})
    if not isinstance(value, dict):
        raise InvalidArgument(f"{where}: key {key!r} must be a table of {_WHAT[key]}; got {value!r}")
    return value


def _named(table: dict[str, Any], key: str, where: str, reserved: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The sub-table ``table[key]`` of names a file declares (:func:`_check_name`), by name."""
    out = _subtable(table, key, where)
    for name in out:
        _check_name(name, f"{where}: key '{key}.{name}'", reserved)
    return out


#: what each sub-table of a statement or normaliser holds
_WHAT = {"where": 'symbol = "quantity"', "defaults": 'name = number or "quantity"',
         "fixed": "parameter = number, e.g. { p = 0.8, H = 2 }",
         "ranges": "parameter = [low, high], e.g. { L = [21, 1000000], T = [0.01, 10] }", "params": "name = number"}


def _fixed(table: dict[str, Any], where: str, allowed: set[str], defaults: dict[str, Any]) -> dict[str, float]:
    """``fixed = { p = 0.8, H = 2 }``: parameters the search never draws (validated against their domains)."""
    out = {}
    for name, value in _subtable(table, "fixed", where).items():
        key = f"{where}: key 'fixed.{name}'"
        check_identifier(str(name), key)
        if name == "L":
            raise InvalidArgument(f"{key}: L is each instance's length, not a parameter: give ranges = {{ L = [{value!r}, "
                                  f"{value!r}] }} to search a single length")
        if name not in allowed:
            raise InvalidArgument(f"{key}: unknown parameter {name!r}; parameters that can be fixed: "
                                  f"{', '.join(sorted(allowed))}")
        if name in defaults:
            raise InvalidArgument(f"{key}: {name!r} is also in 'defaults'; give it in one of them")
        v = _number(value, key)
        problem = _domain_problem(name, v)
        if problem:
            raise InvalidArgument(f"{key} = {value!r} is outside its domain: {problem}")
        out[str(name)] = v
    return out


def _ranges(table: dict[str, Any], where: str, fixed: dict[str, float]) -> dict[str, tuple[float, float]]:
    """``ranges = { L = [21, 1000000], T = [0.01, 10] }``: closed ranges the search draws within (validated)."""
    from attnbounds.theory.mathematics.families import RANGE_PARAMETERS

    out = {}
    for name, pair in _subtable(table, "ranges", where).items():
        key = f"{where}: key 'ranges.{name}'"
        check_identifier(str(name), key)
        if name not in RANGE_PARAMETERS:
            raise InvalidArgument(f"{key}: unknown parameter {name!r}; parameters with a range: "
                                  f"{', '.join(RANGE_PARAMETERS)}")
        if name in fixed:
            raise InvalidArgument(f"{key}: {name!r} is also fixed; give it in one of 'fixed' and 'ranges'")
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise InvalidArgument(f"{key} must be a pair [low, high], got {pair!r}")
        lo, hi = _number(pair[0], f"{key}[0]"), _number(pair[1], f"{key}[1]")
        if lo > hi:
            raise InvalidArgument(f"{key} = {list(pair)!r}: low {lo:g} is above high {hi:g}")
        for side, v in (("low", lo), ("high", hi)):
            problem = _domain_problem(name, v)
            if problem:
                raise InvalidArgument(f"{key} = {list(pair)!r}: the {side} end {v:g} is outside the domain: {problem}")
        out[str(name)] = (lo, hi)
    return out


def _exact(value: float) -> sp.Rational:
    """A parameter's value as the exact rational its shortest decimal form spells (``0.8`` is ``4/5``)."""
    return sp.Integer(int(value)) if value == int(value) else sp.Rational(repr(float(value)))


def _closed_claim(table: dict[str, Any], sid: str, where: str, fixed: dict[str, float], path: str) -> Statement:
    """A relation without a free symbol (fixed parameters substituted exactly): decided exactly, never searched."""
    for key in ("hypotheses", "ranges", "normaliser", "where", "defaults", "kind", "expectation_over"):
        if table.get(key):
            raise InvalidArgument(f"{where}: key {key!r}: the relation is a closed claim (no quantity, no free "
                                  f"parameter): it is decided exactly, with no instance for {key!r} to apply to")
    names = {name: _exact(v) for name, v in fixed.items()}
    if "relation" in table:
        relation = parse_expression(table["relation"], names, where=f"{where}: key 'relation'", relational=True, exact=True)
    else:
        relation = sp.Le(parse_expression(table["lhs"], names, where=f"{where}: key 'lhs'", exact=True),
                         parse_expression(table["rhs"], names, where=f"{where}: key 'rhs'", exact=True), evaluate=False)
    parts = list(relation.args) if isinstance(relation, sp.And) else [relation]
    if not all(isinstance(p, (sp.Le, sp.Ge, sp.Lt, sp.Gt)) for p in parts):
        raise InvalidArgument(f"{where}: key 'relation' must be an inequality (<=, >=, <, >) or a conjunction of them "
                              f"with &, got {relation}")
    citation = Citation(table.get("citation", f"user claim {sid}"), arxiv="", version="", source=path)
    try:
        return Statement(sid, table.get("title", sid), relation, citation, (), fixed=dict(fixed),
                         notes=table.get("notes", ""))
    except AttnBoundsError as exc:
        raise InvalidArgument(f"{where}: {exc}") from None


def _restriction(table: dict[str, Any], where: str, normalisers: dict[str, Callable[..., Normaliser]]
                 ) -> tuple[str, Callable[..., Normaliser]] | None:
    """The name and constructor of key 'normaliser' (a normaliser of this file or a built-in one), or None: the
    statement's hypothesis ``normaliser(<name>)``, at the values it fixes of the normaliser's parameters besides T."""
    name = table.get("normaliser")
    if name is None:
        return None
    if not isinstance(name, str) or (name not in normalisers and name not in BUILTIN_NAMES):
        raise InvalidArgument(f"{where}: key 'normaliser': unknown normaliser {name!r}; declared in this file: "
                              f"{', '.join(sorted(normalisers)) or 'none'}; built-in: {', '.join(sorted(BUILTIN_NAMES))}")
    return name, normalisers.get(name) or CONSTRUCTORS[name]


def _parse_statement(table: Any, k: int, path: str,
                     normalisers: dict[str, Callable[..., Normaliser]] | None = None) -> Statement:
    if not isinstance(table, dict):
        raise InvalidArgument(f"{path}: statement #{k} must be a table, got {type(table).__name__}")
    sid = table.get("id")
    where = _where(path, k, sid)
    if not isinstance(sid, str) or not sid.strip():
        raise InvalidArgument(f"{path}: statement #{k}: key 'id' must be a non-empty string, got {sid!r}")
    unknown = set(table) - _STATEMENT_KEYS
    if unknown:
        raise InvalidArgument(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(_STATEMENT_KEYS)}")
    aliases = _named(table, "where", where)
    for sym, q in aliases.items():
        if not isinstance(q, str) or q not in QUANTITIES:
            raise InvalidArgument(f"{where}: key 'where.{sym}': unknown quantity {q!r}; known: {', '.join(sorted(QUANTITIES))}")
    defaults = _named(table, "defaults", where)
    for name, value in defaults.items():
        if isinstance(value, str) and value not in QUANTITIES:
            raise InvalidArgument(f"{where}: key 'defaults.{name}': unknown quantity {value!r}")
        if not isinstance(value, (str, int, float)) or isinstance(value, bool) or (
                not isinstance(value, str) and not math.isfinite(value)):
            raise InvalidArgument(f"{where}: key 'defaults.{name}' must be a finite number or a quantity name, "
                                  f"got {value!r}")
    declared = table.get("parameters", [])
    if not isinstance(declared, list):
        raise InvalidArgument(f"{where}: key 'parameters' must be a list of names, got {declared!r}")
    for name in declared:
        _check_name(name, f"{where}: key 'parameters'")
    restrict = _restriction(table, where, dict(normalisers or {}))
    proto = None if restrict is None else restrict[1]()
    own_params = set() if proto is None else set(proto.params) - {"T"}
    fixed = _fixed(table, where, (set(PARAMETERS) - {"L", "N"}) | set(declared) | own_params, defaults)
    ranges = _ranges(table, where, fixed)
    texts = [table[key] for key in ("relation", "lhs", "rhs") if key in table]
    if texts and all(isinstance(t, str) for t in texts) and all(free_names(t) <= set(fixed) for t in texts) \
            and ("relation" in table) != ("lhs" in table or "rhs" in table):
        return _closed_claim(table, sid, where, fixed, path)
    # the names an expression may use: quantities (per-selected-token ones indexed), aliases, parameters
    # (every value is real: sympy then simplifies in linear time what it otherwise explores exponentially)
    names: dict[str, Any] = {"i": INDEX}
    quantity_of: dict[str, str] = {}
    for q, spec in QUANTITIES.items():
        names[q] = sp.IndexedBase(q, real=True) if spec.shape == "BN" else sp.Symbol(q, real=True)
        quantity_of[q] = q
    for sym, q in aliases.items():
        names[sym] = sp.IndexedBase(sym, real=True) if QUANTITIES[q].shape == "BN" else sp.Symbol(sym, real=True)
        quantity_of[sym] = q
    for p in (*PARAMETERS, *defaults, *declared, *fixed):
        if p in quantity_of and p not in defaults:
            continue
        names.setdefault(p, sp.Symbol(p, real=True))
    if "relation" in table:
        if "lhs" in table or "rhs" in table:
            raise InvalidArgument(f"{where}: give either 'relation' or 'lhs' and 'rhs', not both")
        relation = parse_expression(table["relation"], names, where=f"{where}: key 'relation'", relational=True)
    elif "lhs" in table and "rhs" in table:
        relation = sp.Le(parse_expression(table["lhs"], names, where=f"{where}: key 'lhs'"),
                         parse_expression(table["rhs"], names, where=f"{where}: key 'rhs'"))
    else:
        raise InvalidArgument(f"{where}: needs key 'relation' (e.g. \"dtilde_R1 <= 2*max_norm\") or keys 'lhs' and 'rhs'")
    if relation in (sp.true, sp.false):
        raise InvalidArgument(f"{where}: key 'relation' is {relation} whatever the values (sympy decides it from the "
                              f"formula alone: it evaluates to {relation} for every value of its quantities and "
                              f"parameters): there is nothing to verify")
    if not isinstance(relation, (sp.Le, sp.Ge, sp.Lt, sp.Gt, sp.And)):
        raise InvalidArgument(f"{where}: key 'relation' must be an inequality (<=, >=, <, >) or a conjunction of them "
                              f"with &, got {relation}")
    _check_placement(relation, {k: v for k, v in quantity_of.items() if k not in defaults}, f"{where}: key 'relation'")
    used = {str(s.base) if isinstance(s, sp.Indexed) else str(s) for s in relation.atoms(sp.Symbol, sp.Indexed)}
    used |= {str(b) for b in relation.atoms(sp.IndexedBase)}
    bindings = {s: quantity_of[s] for s in used if s in quantity_of and s not in defaults}
    if not bindings:
        raise InvalidArgument(f"{where}: the relation uses no quantity (known: {', '.join(sorted(QUANTITIES))})")
    catalogue = hypothesis_catalogue()
    hyp_ids = table.get("hypotheses", [])
    if not isinstance(hyp_ids, list):
        raise InvalidArgument(f"{where}: key 'hypotheses' must be a list of hypothesis ids")
    hyps = []
    for h in hyp_ids:
        if not isinstance(h, str) or h not in catalogue:
            raise InvalidArgument(f"{where}: key 'hypotheses': unknown hypothesis {h!r}; known: {', '.join(sorted(catalogue))}")
        hyps.append(catalogue[h])
    if restrict is not None and proto is not None:
        from attnbounds.theory.mathematics.callables import refuse_off_graph

        refuse_off_graph(bindings.values(), proto, f"{where}: key 'relation'")
        name, maker = restrict
        own_fixed = {k: v for k, v in fixed.items() if k in own_params}  # at the parameter values it fixes
        hyps.append(same_normaliser(name, maker(**own_fixed) if own_fixed else proto,
                                    maker if isinstance(maker, Declared) else None))
    estimate = any(QUANTITIES[q].estimate for q in bindings.values())
    kind = table.get("kind", "expectation" if estimate else "deterministic")
    if kind not in ("deterministic", "expectation"):
        raise InvalidArgument(f"{where}: key 'kind' must be 'deterministic' or 'expectation', got {kind!r}")
    for key in ("title", "notes", "citation", "expectation_over"):
        if key in table and not isinstance(table[key], str):
            raise InvalidArgument(f"{where}: key {key!r} must be a string")
    citation = Citation(table.get("citation", f"user bound {sid}"), arxiv="", version="", source=path)
    try:
        return Statement(sid, table.get("title", sid), relation, citation, tuple(hyps), bindings=bindings,
                         defaults=dict(defaults), kind=kind, expectation_over=table.get("expectation_over"),
                         notes=table.get("notes", ""), fixed=fixed, ranges=ranges)
    except AttnBoundsError as exc:
        raise InvalidArgument(f"{where}: {exc}") from None


def _parse_normaliser(table: Any, k: int, path: str, python: bool = False) -> tuple[str, Callable[..., Normaliser]]:
    if not isinstance(table, dict):
        raise InvalidArgument(f"{path}: normaliser #{k} must be a table, got {type(table).__name__}")
    name = table.get("name")
    where = f"{path}: normaliser #{k} ({name!r})"
    if not isinstance(name, str) or not name.isidentifier():
        raise InvalidArgument(f"{path}: normaliser #{k}: key 'name' must be an identifier, got {name!r}")
    check_identifier(name, f"{path}: normaliser #{k}: key 'name'")
    keys = _PYTHON_NORMALISER_KEYS if python else _NORMALISER_KEYS
    unknown = set(table) - keys
    if unknown:
        raise InvalidArgument(f"{where}: unknown keys {sorted(unknown)}; allowed: {sorted(keys)}")
    if name in BUILTIN_NAMES:
        raise InvalidArgument(f"{where}: name {name!r} is a built-in normaliser; choose another")
    fn = table.get("torch")
    if fn is not None and "log_F" not in table:  # a callable without log F: searched in float, never certified
        from attnbounds.theory.mathematics.callables import CallableNormaliser, check_callable

        extra = set(table.get("params", {}) or {}) - {"T"}
        if extra:
            raise InvalidArgument(f"{where}: key 'params': a callable normaliser without log_F takes only T (its other "
                                  f"parameters live in the function); got {sorted(extra)}")
        T0 = _number((table.get("params") or {}).get("T", 1.0), f"{where}: key 'params.T'")
        state = check_callable(fn, name, where)

        def make_callable(**overrides: Any) -> Normaliser:
            bad = set(overrides) - {"T"}
            if bad:
                raise InvalidArgument(f"normaliser {name!r} (a Python callable) has the parameter T only, got {sorted(bad)}")
            return CallableNormaliser(name, fn, overrides.get("T", T0), state)

        return name, make_callable
    defaults = {p: _number(v, f"{where}: key 'params.{p}'")
                for p, v in _named(table, "params", where, reserved=_LOG_F_NAMES).items()}
    defaults.setdefault("T", 1.0)
    names = {"l": l_sym, "L": L_sym, "softplus": softplus, "sigmoid": sigmoid, **{p: sp.Symbol(p) for p in defaults}}
    log_F = parse_expression(table.get("log_F", ""), names, where=f"{where}: key 'log_F'")

    def make(**overrides: Any) -> RatioNormaliser:
        bad = set(overrides) - set(defaults)
        if bad:
            raise InvalidArgument(f"normaliser {name!r} has parameters {sorted(defaults)}, got {sorted(bad)}")
        return RatioNormaliser(name, log_F, {**defaults, **overrides})

    try:
        make().weights([[0.0, 1.0]])
    except AttnBoundsError as exc:
        raise InvalidArgument(f"{where}: key 'log_F': {exc}") from None
    except Exception as exc:  # noqa: BLE001 - whatever sympy or numpy make of the user's formula
        raise InvalidArgument(f"{where}: key 'log_F' cannot be evaluated: {type(exc).__name__}: {exc}") from None
    selfcheck.check_normaliser(make(), f"{where}: key 'log_F'")
    if fn is not None:  # the callable must compute the weights log F defines (here, and in every verdict)
        from attnbounds.theory.mathematics.callables import Declared, ratio_from_callable

        return name, Declared(name, fn, make, ratio_from_callable(fn, make(), where))
    return name, make


@contextlib.contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Refuse (:class:`InvalidArgument`) what uses more than ``seconds`` of this process's CPU time in the block, or
    waits more than :data:`WAIT_FACTOR` times as long on the wall clock: a backstop behind the parser's size limits.
    CPU time, so that a loaded machine (other processes on its cores) does not refuse what an idle one accepts; the
    wall clock only for a block that waits instead of computing (a user's function blocked on a lock). It needs the
    main thread and free ``SIGPROF`` and ``SIGALRM`` (no other timer pending); elsewhere the block runs unbounded."""
    timers = ((signal.ITIMER_PROF, signal.SIGPROF, seconds, "used more than {:g} s of CPU time"),
              (signal.ITIMER_REAL, signal.SIGALRM, WAIT_FACTOR * seconds, "took longer than {:g} s"))
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and all(signal.getsignal(sig) in (signal.SIG_DFL, signal.SIG_IGN, None)
                      and signal.getitimer(timer) == (0.0, 0.0) for timer, sig, _, _ in timers))
    if not usable:
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _Expired(signum)

    previous = {sig: signal.signal(sig, expire) for _, sig, _, _ in timers}
    for timer, _, limit, _ in timers:
        signal.setitimer(timer, limit)
    try:
        yield
    except _Expired as exc:
        limit, said = next((limit, said) for _, sig, limit, said in timers if sig == exc.args[0])
        raise InvalidArgument(f"{what}: preparing it {said.format(limit)}; simplify it") from None
    finally:
        for timer, sig, _, _ in timers:
            signal.setitimer(timer, 0)
            signal.signal(sig, previous[sig])


class _Expired(BaseException):
    """Raised by :func:`time_limit`'s alarm (a BaseException, so that no ``except Exception`` swallows it)."""


def _tables(data: dict[str, Any], key: str, path: Path) -> list[Any]:
    tables = data.get(key, [])
    if not isinstance(tables, list):
        raise InvalidArgument(f"{path}: {key!r} must be an array of tables ([[{key}]]), got {type(tables).__name__}")
    return tables


def _parse_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(_read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"{path}: not valid TOML: {exc}") from None


def read_toml(path: str | Path) -> dict[str, Any]:
    """The tables of a ``.toml`` statements file as read, before any is checked (for a caller that amends a table, as
    ``attnbounds tighten`` declares its constant, and then calls :func:`load_data`)."""
    return _parse_toml(_checked_path(path))


def load_data(data: dict[str, Any], path: str, *, python: bool = False) -> UserBounds:
    """What a statements file declares, from its parsed tables (``{"statement": [...], "normaliser": [...]}``):
    the one loading path of ``--statements`` files and of :func:`attnbounds.check` (``python`` also allows a
    normaliser's ``torch`` function). ``path`` names the source in messages."""
    if not isinstance(data, dict):
        raise InvalidArgument(f"{path}: expected a table of [[statement]] and [[normaliser]], got {type(data).__name__}")
    unknown = set(data) - {"statement", "normaliser"}
    if unknown:
        raise InvalidArgument(f"{path}: unknown top-level keys {sorted(unknown)}; allowed: [[statement]], [[normaliser]]")
    out = UserBounds(str(path))
    # normalisers first: a statement's hypotheses may be checked on them
    for k, table in enumerate(_tables(data, "normaliser", Path(path))):
        with time_limit(LOAD_SECONDS, f"{path}: normaliser #{k}"):
            name, make = _parse_normaliser(table, k, str(path), python=python)
        if name in out.normalisers:
            raise InvalidArgument(f"{path}: normaliser {name!r} is declared twice")
        out.normalisers[name] = make
    with constructors_added(out.normalisers):
        for k, table in enumerate(_tables(data, "statement", Path(path))):
            with time_limit(LOAD_SECONDS, f"{path}: statement #{k}"):
                st = _parse_statement(table, k, str(path), out.normalisers)
                from attnbounds.theory.deciding.closed_claims import is_closed

                if not is_closed(st):
                    _selfchecked(st, _where(str(path), k, st.id))
            out.statements.append(st)
    return out


def _selfchecked(st: Statement, where: str) -> None:
    """Refuse a statement whose float and ball evaluations disagree, or whose hypotheses cannot be checked on the
    instances the search builds for it (:mod:`attnbounds.theory.io.selfcheck`)."""
    selfcheck.check(st, where)
    selfcheck.check_hypotheses(st, where)


def _read_text(path: Path) -> str:
    return atomic.read_text(path, "statements file", MAX_FILE_BYTES)


def _load_python(path: Path) -> UserBounds:
    import runpy

    try:
        namespace = runpy.run_path(str(path))
    except AttnBoundsError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's own code failed: say where, without a traceback
        raise InvalidArgument(f"statements file {str(path)!r} failed to run: {type(exc).__name__}: {exc}") from None
    out = UserBounds(str(path))
    for k, st in enumerate(namespace.get("STATEMENTS", [])):
        if not isinstance(st, Statement):
            raise InvalidArgument(f"{path}: STATEMENTS must hold theory.statement.Statement objects, got {type(st).__name__}")
        with time_limit(LOAD_SECONDS, f"{path}: STATEMENTS[{k}]"):
            _selfchecked(st, f"{path}: STATEMENTS[{k}] ({st.id!r})")
        out.statements.append(st)
    for name, value in dict(namespace.get("NORMALISERS", {})).items():
        if name in BUILTIN_NAMES:
            raise InvalidArgument(f"{path}: NORMALISERS: {name!r} is a built-in normaliser; choose another")
        if isinstance(value, RatioNormaliser):
            value = (lambda base: lambda **kw: base._with({**base.values, **kw}))(value)
        if not callable(value):
            raise InvalidArgument(f"{path}: NORMALISERS[{name!r}] must be a constructor or a RatioNormaliser")
        out.normalisers[name] = value
    return out


def _checked_path(path: str | Path) -> Path:
    """``path`` as a regular file, or InvalidArgument saying what it is instead."""
    p = Path(path)
    if not str(path):
        raise InvalidArgument("statements file: expected a path, got an empty string")
    if p.is_dir():
        raise InvalidArgument(f"statements file {str(path)!r} is a directory; give a .toml file")
    if not p.exists():
        raise InvalidArgument(f"statements file {str(path)!r} does not exist")
    if not p.is_file():
        raise InvalidArgument(f"statements file {str(path)!r} is not a regular file (a device, FIFO or socket)")
    return p


def load_statements(path: str | Path, *, register: bool = True) -> UserBounds:
    """Read a statements file (``.toml``, or ``.py`` for trusted files); ``register`` adds its
    normalisers to :data:`attnbounds.theory.mathematics.normalisers.CONSTRUCTORS`, so the search draws them too."""
    p = _checked_path(path)
    if p.suffix == ".toml":
        out = load_data(_parse_toml(p), str(p))
    elif p.suffix == ".py":
        out = _load_python(p)
    else:
        raise InvalidArgument(f"statements file {str(path)!r}: use a .toml file (or a trusted .py file)")
    from attnbounds.theory.mathematics import registry

    seen = set()
    for st in out.statements:
        if st.id in seen:
            raise InvalidArgument(f"{p}: statement id {st.id!r} is declared twice")
        if st.id in registry.ids():
            raise InvalidArgument(f"{p}: statement id {st.id!r} is a reading of the paper; choose another id")
        seen.add(st.id)
    if not out.statements and not out.normalisers:
        raise InvalidArgument(f"{p}: declares no [[statement]] and no [[normaliser]]")
    if register:
        for name, make in out.normalisers.items():
            CONSTRUCTORS[name] = make
    return out


def load_all(paths: list[str | Path] | tuple[str | Path, ...], *, register: bool = True) -> UserBounds:
    """Several statements files read together (``--statements A --statements B``): their statements and normalisers
    merged, as if one file declared them all; an id, or a normaliser name, declared in two files is refused.
    ``register`` as for :func:`load_statements` (a library call that adds them only for a while passes False)."""
    if not paths:
        raise InvalidArgument("statements files: expected at least one path")
    out: UserBounds | None = None
    for path in paths:
        one = load_statements(path, register=register)
        if out is None:
            out = one
            continue
        for st in one.statements:
            if any(st.id == s.id for s in out.statements):
                raise InvalidArgument(f"statement id {st.id!r} is declared in {out.path} and in {one.path}; ids must "
                                      f"be unique across the statements files")
        for name in one.normalisers:
            if name in out.normalisers:
                raise InvalidArgument(f"normaliser {name!r} is declared in {out.path} and in {one.path}; names must "
                                      f"be unique across the statements files")
        out = UserBounds(f"{out.path}, {one.path}", out.statements + one.statements, {**out.normalisers, **one.normalisers})
    assert out is not None
    return out

