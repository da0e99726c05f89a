"""Exact JSON round trip of an :class:`~attnbounds.theory.mathematics.instance.Instance` (a counterexample must be replayable bit for bit).

Every float is written twice: ``hex`` (``float.hex``, the authoritative exact value) and ``values``
(the shortest decimal that reads back to the same double, for people). Arrays keep their shape as
nested lists. The normaliser is written by its constructor's name (``theory.normalisers.CONSTRUCTORS``; the key is called
``family`` in the format) and parameters,
or, for a user's own ratio normaliser, by name, ``log F`` (sympy text) and parameters. The stored
weights are the instance's own: they are read back as they are, not recomputed, so that a replay on
another machine (whose ``exp`` may differ in the last bit) sees the same instance.

Format (``"format": "attnbounds.instance", "version": 1``)::

    {"format", "version", "B", "L", "N", "normaliser", "alpha", "logits", "x", "q", "k",
     "selection", "params", "arrays", "counts", "classes", "exact_logits"}

``L`` is the number of tokens. A token-class instance (see :mod:`attnbounds.theory.mathematics.instance`) also has
``counts`` (the exact integer token count of each column) and ``classes`` (the number of columns), so ``L``
is the sum of each row of ``counts``; a dense instance has neither (its columns are its ``L`` tokens).
Files written before ``classes`` existed wrote the number of columns under ``L``; they are still read.
An instance with exact logits (:meth:`~attnbounds.theory.mathematics.instance.Instance.with_exact_logits`) also has
``exact_logits``: nested lists of ``"p/q"`` texts, each read as a fraction (never evaluated) and checked to round to
the stored float logit.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from fractions import Fraction
from typing import Any, cast

import numpy as np
import sympy as sp

from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import BUILTIN_NAMES, CONSTRUCTORS, L_sym, Normaliser, RatioNormaliser, l_sym, sigmoid, softplus

FORMAT = "attnbounds.instance"
VERSION = 1
_ARRAYS = ("alpha", "logits", "x", "q", "k")
#: an exact logit's text: an integer or a fraction of integers (at most this many digits each)
_RATIONAL = re.compile(r"-?[0-9]{1,4000}(/0{0,3999}[1-9][0-9]{0,3999})?")

_hex = np.frompyfunc(float.hex, 1, 1)
_unhex = np.frompyfunc(float.fromhex, 1, 1)


def float_to_json(value: Any) -> dict[str, Any]:
    """A float or float array as ``{"hex": ..., "values": ...}`` (nested lists keep the shape)."""
    arr = np.asarray(value, dtype=np.float64)
    values = arr.tolist()
    if not np.all(np.isfinite(arr)):
        values = np.vectorize(repr, otypes=[object])(arr).tolist()  # JSON has no inf/nan literals
    return {"hex": cast(np.ndarray, _hex(arr)).tolist() if arr.ndim else float.hex(float(arr)), "values": values}


def float_from_json(data: Any, where: str) -> np.ndarray:
    """Inverse of :func:`float_to_json`; ``hex`` wins, ``values`` alone is accepted (hand-written files)."""
    if not isinstance(data, dict) or not ({"hex", "values"} & set(data)):
        raise InvalidArgument(f"{where}: expected an object with 'hex' and/or 'values', got {data!r:.80}")
    try:
        if "hex" in data:
            arr = np.asarray(_unhex(np.asarray(data["hex"], dtype=object)), dtype=np.float64)
        else:
            arr = np.asarray(data["values"], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{where}: cannot read floats: {exc}") from None
    if "hex" in data and "values" in data:
        try:
            dec = np.asarray(data["values"], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidArgument(f"{where}: cannot read 'values': {exc}") from None
        if dec.shape != arr.shape or not np.array_equal(dec, arr, equal_nan=True):
            bad = "shapes differ" if dec.shape != arr.shape else f"first difference at {np.argwhere(dec != arr)[0].tolist()}"
            raise InvalidArgument(f"{where}: 'hex' and 'values' disagree ({bad}); edit one of them and delete the other")
    return arr


def _params_to_json(params: dict[str, Any]) -> dict[str, Any]:
    return {name: float_to_json(value) for name, value in sorted(params.items())}


def _params_from_json(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidArgument(f"{where}: expected an object of parameters, got {data!r:.80}")
    out = {}
    for name, value in data.items():
        arr = float_from_json(value, f"{where}.{name}")
        out[name] = float(arr) if arr.ndim == 0 else arr
    return out


def normaliser_to_json(normaliser: Normaliser | None) -> dict[str, Any] | None:
    """``{"family", "params"}`` (``family``: the constructor's name), or for a user's ratio normaliser ``{"family": "ratio", "name", "log_F", "params"}``."""
    if normaliser is None:
        return None
    name = getattr(normaliser, "name", None)
    params = dict(normaliser.params)
    if name in BUILTIN_NAMES:
        try:
            rebuilt = CONSTRUCTORS[name](**params)
        except (TypeError, AttnBoundsError):
            rebuilt = None
        same = type(rebuilt) is type(normaliser) and (
            not isinstance(normaliser, RatioNormaliser) or sp.srepr(cast(RatioNormaliser, rebuilt).log_F) == sp.srepr(normaliser.log_F))
        if same:
            return {"family": name, "params": _params_to_json(params)}
    if isinstance(normaliser, RatioNormaliser):
        return {"family": "ratio", "name": normaliser.name, "log_F": sp.sstr(normaliser.log_F, full_prec=True),
                "params": _params_to_json(params)}
    from attnbounds.theory.mathematics.callables import CallableNormaliser

    if isinstance(normaliser, CallableNormaliser):  # a Python function: its name only (the weights are stored)
        return {"family": "callable", "name": normaliser.name, "params": _params_to_json(params)}
    raise InvalidArgument(f"cannot serialise normaliser {normaliser!r}: it is neither built by a "
                          f"constructor ({', '.join(CONSTRUCTORS)}) nor a RatioNormaliser")


def normaliser_from_json(data: Any, where: str = "normaliser") -> Normaliser | None:
    """Inverse of :func:`normaliser_to_json`."""
    if data is None:
        return None
    if not isinstance(data, dict) or "family" not in data:
        raise InvalidArgument(f"{where}: expected an object with 'family', got {data!r:.80}")
    params = _params_from_json(data.get("params", {}), f"{where}.params")
    constructor = data["family"]  # the format's name for the constructor
    if constructor == "ratio":
        from attnbounds.theory.mathematics.exprparse import parse_expression

        names = {"l": l_sym, "L": L_sym, "softplus": softplus, "sigmoid": sigmoid,
                 **{p: sp.Symbol(p) for p in params}}
        log_F = parse_expression(data.get("log_F", ""), names, where=f"{where}.log_F")
        return RatioNormaliser(str(data.get("name", "custom")), log_F, params)
    if constructor == "callable":  # the function itself is not in the file: its weights are (None when not registered)
        from attnbounds.theory.mathematics.callables import CallableNormaliser

        made = CONSTRUCTORS[data["name"]](**params) if data.get("name") in CONSTRUCTORS else None
        return made if isinstance(made, CallableNormaliser) else None
    if constructor not in CONSTRUCTORS:
        raise InvalidArgument(f"{where}: unknown normaliser {constructor!r}; allowed: ratio, callable, "
                              f"{', '.join(CONSTRUCTORS)}")
    if not isinstance(params, dict):
        raise InvalidArgument(f"{where}: bad parameters {params!r}")
    try:
        return CONSTRUCTORS[constructor](**params)
    except TypeError as exc:
        raise InvalidArgument(f"{where}: bad parameters {sorted(params)} for normaliser {constructor!r}: {exc}") from None


def instance_to_json(inst: Instance) -> dict[str, Any]:
    """A JSON-ready dict holding every input of the batch exactly (see module docstring)."""
    if not isinstance(inst, Instance):
        raise InvalidArgument(f"instance_to_json needs a theory.instance.Instance, got {type(inst).__name__}")
    out: dict[str, Any] = {"format": FORMAT, "version": VERSION, "B": inst.B, "L": inst.L, "N": inst.N,
                           "normaliser": normaliser_to_json(inst.normaliser)}
    for name in _ARRAYS:
        value = getattr(inst, name)
        out[name] = None if value is None else float_to_json(value)
    out["selection"] = None if inst.selection is None else inst.selection.astype(bool).tolist()
    out["params"] = _params_to_json(inst.params)
    out["arrays"] = {name: float_to_json(value) for name, value in sorted(inst.arrays.items())}
    if inst.counts is not None:
        out["counts"] = [[int(c) for c in row] for row in inst.counts]
        out["classes"] = inst.K
    if inst.exact_logits is not None:
        out["exact_logits"] = [[str(v) for v in row] for row in inst.exact_logits]
    return out


def _exact_logits_from_json(data: Any, logits: np.ndarray | None) -> np.ndarray:
    """The ``exact_logits`` of an instance file as fractions, each checked to round to its stored float logit."""
    if logits is None:
        raise InvalidArgument("instance: 'exact_logits' without 'logits'")
    if not (isinstance(data, list) and all(isinstance(row, list) for row in data)
            and np.shape(np.asarray(data, dtype=object)) == logits.shape):
        raise InvalidArgument(f"exact_logits: expected nested lists of the logits' shape {logits.shape}")
    out = np.empty(logits.shape, dtype=object)
    for (b, j), text in np.ndenumerate(np.asarray(data, dtype=object)):
        if not (isinstance(text, str) and len(text) <= 8001 and _RATIONAL.fullmatch(text)):
            raise InvalidArgument(f"exact_logits[{b}][{j}]: expected an integer or a fraction 'p/q' as text, got "
                                  f"{text!r:.60}")
        value = Fraction(text)
        if float(value) != logits[b, j]:
            raise InvalidArgument(f"exact_logits[{b}][{j}] = {text:.60} does not round to the stored logit "
                                  f"{float(logits[b, j])!r}")
        out[b, j] = value
    return out


def instance_from_json(data: Any) -> Instance:
    """The instance written by :func:`instance_to_json`, bit for bit (weights as stored)."""
    if not isinstance(data, dict):
        raise InvalidArgument(f"an instance must be a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT or data.get("version") != VERSION:
        raise InvalidArgument(f"not an attnbounds instance: format={data.get('format')!r} version={data.get('version')!r}"
                              f" (want {FORMAT!r} version {VERSION})")
    unknown = set(data) - {"format", "version", "B", "L", "N", "normaliser", "selection", "params", "arrays", "counts",
                           "classes", "exact_logits", *_ARRAYS}
    if unknown:
        raise InvalidArgument(f"instance: unknown keys {sorted(unknown)}")
    if data.get("alpha") is None:
        raise InvalidArgument("instance: 'alpha' (the weights) is required")
    arrays = {name: (None if data.get(name) is None else float_from_json(data[name], name)) for name in _ARRAYS}
    alpha = arrays["alpha"]
    assert alpha is not None  # data["alpha"] is not None (checked above)
    if alpha.ndim != 2:
        raise InvalidArgument(f"alpha: expected shape (B, L), got {alpha.shape}")
    counts = data.get("counts")
    if counts is None and "classes" in data:
        raise InvalidArgument("instance: 'classes' without 'counts' (a dense instance has neither)")
    columns = data.get("classes", data.get("L"))  # files without 'classes' wrote the number of columns under L
    if (data.get("B"), columns) != alpha.shape:
        what = "B, classes" if "classes" in data else "B, L"
        raise InvalidArgument(f"instance: {what} = {data.get('B')}, {columns} disagree with alpha of shape {alpha.shape}")
    normaliser = normaliser_from_json(data.get("normaliser"))
    selection = data.get("selection")
    if selection is not None:
        selection = np.asarray(selection)
        if selection.dtype != bool:
            raise InvalidArgument(f"selection: expected nested lists of true/false, got dtype {selection.dtype}")
    extra = {name: float_from_json(value, f"arrays.{name}") for name, value in (data.get("arrays") or {}).items()}
    if counts is not None and not (isinstance(counts, list) and all(isinstance(r, list) and all(
            isinstance(c, int) and not isinstance(c, bool) for c in r) for r in counts)):
        raise InvalidArgument("counts: expected nested lists of whole numbers of tokens")
    try:
        count_array = None if counts is None else np.asarray(counts, dtype=np.int64)
    except OverflowError:
        raise InvalidArgument("counts: a class holds more tokens than an int64 counts") from None
    inst = Instance._build(alpha, arrays["logits"], normaliser, arrays["x"], arrays["q"], arrays["k"], data.get("N"),
                           selection, extra, _params_from_json(data.get("params") or {}, "params"),
                           count_array)
    if "classes" in data and data.get("L") != inst.L:
        raise InvalidArgument(f"instance: L = {data.get('L')!r} disagrees with its counts, which sum to {inst.L} tokens")
    if data.get("exact_logits") is not None:  # the stored weights stay as they are (module docstring)
        inst = dataclasses.replace(inst, exact_logits=_exact_logits_from_json(data["exact_logits"], inst.logits))
    return inst


# -- canonical JSON ------------------------------------------------------------------------------------
def canonical(value: Any) -> Any:
    """Plain JSON types only: dataclasses as dicts, numpy scalars and arrays converted, non-finite floats as strings."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, np.ndarray):
        return canonical(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else repr(v)
    if value is None or isinstance(value, str):
        return value
    raise InvalidArgument(f"cannot write {type(value).__name__} {value!r:.60} into a record")


def dumps(value: Any, *, indent: int | None = 2) -> str:
    """Deterministic JSON text: sorted keys, shortest round-trip floats, no NaN literals."""
    return json.dumps(canonical(value), sort_keys=True, indent=indent, ensure_ascii=False, allow_nan=False,
                      separators=(",", ":") if indent is None else (",", ": "))
