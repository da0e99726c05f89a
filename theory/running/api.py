"""``attnbounds.check`` and ``attnbounds.assert_bound``: a user's bound checked from Python, the same way as
``attnbounds verify --statements FILE``.

The arguments become the tables of a statements file (one ``[[statement]]``, and a ``[[normaliser]]`` when one
is given) and go through the same loading path (:func:`attnbounds.theory.io.userbounds.load_data`: parsing,
limits, the load-time self-check), then the same search, certification and record
(:func:`attnbounds.theory.running.verify.verify`)::

    import attnbounds
    r = attnbounds.check("J_spectral <= 1/(2*T)", hypotheses=["softmax"], budget=2)
    r.verdict, r.best_ratio, r.counterexample, r.cite()
    attnbounds.assert_bound("coverage_enum >= 0.99", fixed={"p": 0.8, "H": 3}, budget=1)

``normaliser`` may be the name of a built-in normaliser (``"softmax"``, ``"ssmax"``, ...), a
:class:`~attnbounds.theory.mathematics.normalisers.RatioNormaliser`, a table ``{"name", "log_F", "params"}`` as in a
statements file (plus ``"torch"``: the same map as a torch function, checked against ``log_F`` when loaded), or
a torch function ``fn(logits, T) -> weights`` alone. The statement is then about that normaliser only (the
hypothesis ``normaliser(<name>)``). A function without ``log_F`` has no interval version: a violation is REFUTED
in float arithmetic only (``Record.certified`` is False, the record holds ``"certified": false`` and the float
margin), a bound that holds is at most VERIFIED, and the hypotheses computed from ``log F`` (``softmax``,
``F-positive``, ``F-length-independent``) do not hold for it (NOT-APPLICABLE).

``budget`` and ``seed`` default to ``$ATTNBOUNDS_BUDGET`` and ``$ATTNBOUNDS_SEED`` when set, else to the defaults
of ``attnbounds verify`` (7 s, seed 0).
"""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.io.records import Record

#: the statement id of a check when none is given
DEFAULT_ID = "check"
#: columns shown per row of a counterexample table (longer rows are cut in the middle)
MAX_COLUMNS = 8


def _env_number(name: str, kind: type) -> Any:
    text = os.environ.get(name)
    if text is None or not text.strip():
        return None
    try:
        value = kind(text)
    except ValueError:
        raise InvalidArgument(f"${name} must be {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    return value


def budget_and_seed(budget: float | None, seed: int | None) -> tuple[float, int]:
    """The budget and seed of a check: the arguments, else ``$ATTNBOUNDS_BUDGET`` / ``$ATTNBOUNDS_SEED``, else the
    defaults of ``attnbounds verify``; validated as there."""
    from attnbounds.theory.running.verify import DEFAULT_BUDGET_S, check_arguments

    if budget is None:
        budget = _env_number("ATTNBOUNDS_BUDGET", float)
    if seed is None:
        seed = _env_number("ATTNBOUNDS_SEED", int)
    budget = DEFAULT_BUDGET_S if budget is None else budget
    seed = 0 if seed is None else seed
    if isinstance(budget, bool) or not isinstance(budget, (int, float)):
        raise InvalidArgument(f"budget must be a number of seconds, got {budget!r}")
    check_arguments(float(budget), seed)
    return float(budget), int(seed)


def _identifier(text: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in text).strip("_") or "callable"
    return name if name.isidentifier() else f"f_{name}"


def _normaliser_tables(normaliser: Any) -> tuple[dict[str, Any] | None, str | None]:
    """``(normaliser table or None, the name the statement is restricted to or None)``."""
    from attnbounds.theory.mathematics.normalisers import BUILTIN_NAMES, CONSTRUCTORS, Normaliser, RatioNormaliser

    if normaliser is None:
        return None, None
    if isinstance(normaliser, str):
        return None, normaliser
    if isinstance(normaliser, RatioNormaliser):
        if normaliser.name in BUILTIN_NAMES:
            proto = CONSTRUCTORS[normaliser.name]()
            if isinstance(proto, RatioNormaliser) and proto.log_F == normaliser.log_F:
                return None, normaliser.name  # its parameters besides T are fixed by statement()
            raise InvalidArgument(f"normaliser: {normaliser.name!r} is the name of a built-in normaliser with another "
                                  f"log F; give yours another name")
        import sympy as sp

        values = {k: float(np.asarray(v).ravel()[0]) for k, v in normaliser.values.items()}
        return {"name": normaliser.name, "log_F": sp.sstr(normaliser.log_F, full_prec=True), "params": values}, \
            normaliser.name
    if isinstance(normaliser, Normaliser):
        name = getattr(normaliser, "name", "")
        if name in BUILTIN_NAMES:
            return None, name
        raise InvalidArgument(f"normaliser: {normaliser!r} is neither built-in nor a RatioNormaliser; pass its torch "
                              f"function fn(logits, T) -> weights instead")
    if isinstance(normaliser, Mapping):
        table = dict(normaliser)
        fn = table.get("torch")
        if "name" not in table and fn is not None:
            table["name"] = _identifier(getattr(fn, "__name__", "callable"))
        name = table.get("name")
        if isinstance(name, str) and name in BUILTIN_NAMES:
            raise InvalidArgument(f"normaliser: name {name!r} is a built-in normaliser; choose another (or pass the "
                                  f"string {name!r} to use the built-in one)")
        return table, name if isinstance(name, str) else None
    if callable(normaliser):
        name = _identifier(getattr(normaliser, "__name__", "callable"))
        if name in BUILTIN_NAMES:
            name = f"{name}_user"
        return {"name": name, "torch": normaliser}, name
    raise InvalidArgument(f"normaliser must be None, a built-in name ({', '.join(sorted(BUILTIN_NAMES))}), a RatioNormaliser, "
                          f"a table {{'name', 'log_F', 'params', 'torch'}} or a torch function fn(logits, T) -> "
                          f"weights; got {type(normaliser).__name__}")


def _table(relation: Any, hypotheses: Any, fixed: Any, ranges: Any, defaults: Any, id: str | None) -> dict[str, Any]:
    if not isinstance(relation, str):
        raise InvalidArgument(f"relation must be a string such as 'J_spectral <= 1/(2*T)', got {type(relation).__name__}")
    if isinstance(hypotheses, str):
        hypotheses = [hypotheses]
    if not isinstance(hypotheses, Iterable):
        raise InvalidArgument(f"hypotheses must be a list of hypothesis ids, got {hypotheses!r}")
    table: dict[str, Any] = {"id": DEFAULT_ID if id is None else id, "relation": relation, "hypotheses": list(hypotheses)}
    for key, value in (("fixed", fixed), ("ranges", ranges), ("defaults", defaults)):
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise InvalidArgument(f"{key} must be a dict, e.g. "
                                  f"{ {'fixed': {'p': 0.8, 'H': 2}, 'ranges': {'L': [21, 10**6]}, 'defaults': {'kappa': 1.0}}[key]}, "
                                  f"got {value!r}")
        table[key] = {k: (list(v) if key == "ranges" and isinstance(v, tuple) else v) for k, v in value.items()}
    return table


def statement(relation: str, *, hypotheses: Iterable[str] = (), fixed: Mapping[str, float] | None = None,
              ranges: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None,
              normaliser: Any = None, id: str | None = None, parameters: Iterable[str] = ()) -> Any:
    """The :class:`~attnbounds.theory.io.userbounds.UserBounds` of a check (its one statement and its normaliser);
    ``parameters``: names of the relation declared as parameters of the statement (a constant left free)."""
    from attnbounds.theory.io import userbounds
    from attnbounds.theory.mathematics.normalisers import Normaliser

    table = _table(relation, hypotheses, fixed, ranges, defaults, id)
    if parameters:
        table["parameters"] = list(parameters)
    ntable, name = _normaliser_tables(normaliser)
    if name is not None:
        table["normaliser"] = name
    if ntable is None and isinstance(normaliser, Normaliser):  # a built-in one with its own values: T is drawn,
        own = {k: float(np.asarray(v).ravel()[0]) for k, v in normaliser.params.items() if k != "T"}  # the rest fixed
        table["fixed"] = {**own, **table.get("fixed", {})}
    data: dict[str, Any] = {"statement": [table]}
    if ntable is not None:
        data["normaliser"] = [ntable]
    return userbounds.load_data(data, "attnbounds.check", python=True)


def check(relation: str, *, hypotheses: Iterable[str] = (), fixed: Mapping[str, float] | None = None,
          ranges: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None, normaliser: Any = None,
          budget: float | None = None, seed: int | None = None, id: str | None = None) -> Record:
    """Search, certify and record ``relation`` as ``attnbounds verify --statements`` would (module docstring).

    ``relation``: a bound over quantities and parameters (``"J_spectral <= 1/(2*T)"``), or a closed claim
    (``"1 - (1 - 0.8)**2 >= 0.99"``, decided exactly). ``hypotheses``: ids (``attnbounds list``,
    docs/user-bounds.md). ``fixed``: parameters the search never draws (``{"p": 0.8, "H": 2}``). ``ranges``: closed
    ranges it draws within (``{"L": [21, 10**6], "T": [0.01, 10]}``). ``defaults``: values of further names.
    ``normaliser``: see the module docstring. Returns the :class:`~attnbounds.theory.io.records.Record`:
    ``.verdict`` (PROVED / VERIFIED / REFUTED / UNDECIDED / NOT-APPLICABLE / ERROR; for a callable normaliser
    without ``log_F`` REFUTED means violated in float arithmetic, not certified: see ``.certified``),
    ``.counterexample``, ``.best_ratio``, ``.reason``, ``.to_json()``, ``.cite()``. Bad input raises
    :class:`~attnbounds.theory.mathematics.errors.InvalidArgument` naming the value and what is allowed.
    """
    from attnbounds.theory.mathematics.normalisers import constructors_added
    from attnbounds.theory.running.verify import verify

    from attnbounds.theory.io.cachedir import hypothesis_home

    budget_s, seed_ = budget_and_seed(budget, seed)
    hypothesis_home()  # hypothesis' files in the attnbounds cache, never in the folder the check runs from
    user = statement(relation, hypotheses=hypotheses, fixed=fixed, ranges=ranges, defaults=defaults,
                     normaliser=normaliser, id=id)
    with constructors_added(user.normalisers):
        return verify(None, budget_s=budget_s, seed=seed_, progress=False, statements=user.statements,
                      scheduler="none" if user.normalisers else None)[0]


def _cells(values: Any, fmt: Callable[[float], str] = lambda v: f"{v:.6g}") -> str:
    arr = np.asarray(values, dtype=np.float64).ravel()
    cells = [fmt(float(v)) for v in arr]
    if len(cells) > MAX_COLUMNS:
        half = MAX_COLUMNS // 2
        cells = cells[:half] + [f"... ({len(cells) - MAX_COLUMNS} more)"] + cells[-half:]
    return "[" + ", ".join(cells) + "]"


def counterexample_table(record: Record) -> str:
    """The counterexample of a REFUTED record as a small table: L (and N, the token classes' counts), parameters,
    logits, weights, lhs, rhs and the margin (long rows cut in the middle)."""
    from attnbounds.theory.io.serialize import float_from_json

    d = record.data
    cx = d.get("counterexample")
    rows: list[tuple[str, str]] = []
    if cx is None:
        closed = d.get("closed_claim")
        if closed is None:
            return "(no counterexample in the record)"
        for c in closed["conjuncts"]:  # the conjuncts that fail, both sides exactly and in decimals
            if c["status"] == "violated":
                rows += [("relation", c["relation"]), ("lhs", f"{c['lhs']} = {c['lhs_decimal']}"),
                         ("rhs", f"{c['rhs']} = {c['rhs_decimal']}"), ("margin", f"{c['margin']} = rhs - lhs, exact")]
        return _format(rows or [("relation", "no conjunct fails")])
    inst = cx["instance"]
    counts = inst.get("counts")
    rows.append(("L", str(cx["L"]) + ("" if not counts else f" tokens in {len(counts[0])} classes")))
    if inst.get("N") is not None:
        rows.append(("N", str(inst["N"])))
    if counts:
        rows.append(("class counts", _cells(counts[0], lambda v: f"{v:.0f}")))
    for name, value in sorted((inst.get("params") or {}).items()):
        rows.append((name, _cells(float_from_json(value, name))))
    normaliser = inst.get("normaliser") or {}
    if normaliser:
        rows.append(("normaliser", str(normaliser.get("name", normaliser.get("family")))))
    for key in ("logits", "alpha"):
        if inst.get(key) is not None:
            rows.append(("weights" if key == "alpha" else key, _cells(float_from_json(inst[key], key)[0])))
    if cx.get("certified", True) is False:
        f = cx["float"]
        rows += [("lhs", f"{f['lhs']:.10g} (float64)"), ("rhs", f"{f['rhs']:.10g} (float64)"),
                 ("margin", f"{f['margin']:.6g} = rhs - lhs, float64 only: NOT certified")]
    else:
        c = cx["certificate"]
        rows += [("lhs", c["lhs"]), ("rhs", c["rhs"]),
                 ("margin", f"[{c['margin_lo_text']}, {c['margin_hi_text']}] = rhs - lhs, certified "
                            f"({c['backend']}, {c['precision_bits']} bits)")]
    return _format(rows)


def _format(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def assert_bound(relation: str, *, hypotheses: Iterable[str] = (), fixed: Mapping[str, float] | None = None,
                 ranges: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None,
                 normaliser: Any = None, budget: float | None = None, seed: int | None = None,
                 allow_undecided: bool = False, id: str | None = None) -> Record:
    """:func:`check`, then raise :class:`AssertionError` unless the bound held: on REFUTED (certified, or in float
    arithmetic only for a callable normaliser: the message says which) with the counterexample as a table; on
    UNDECIDED or NOT-APPLICABLE with the reason, unless ``allow_undecided``; always on ERROR. Returns the record."""
    record = check(relation, hypotheses=hypotheses, fixed=fixed, ranges=ranges, defaults=defaults,
                   normaliser=normaliser, budget=budget, seed=seed, id=id)
    v = record.verdict
    if v == "REFUTED":
        how = ("decided exactly" if record.data.get("closed_claim") else "certified counterexample" if record.certified
               else "violated in float64 arithmetic (NOT certified)")
        raise AssertionError(f"{relation}: REFUTED ({how})\n{counterexample_table(record)}\n{record.reason}")
    if v == "ERROR" or (v in ("UNDECIDED", "NOT-APPLICABLE") and not allow_undecided):
        raise AssertionError(f"{relation}: {v}: {record.reason}")
    return record


__all__ = ["check", "assert_bound", "counterexample_table", "budget_and_seed"]
