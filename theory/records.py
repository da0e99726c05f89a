"""Verdict records: one JSON object per reading, the thing a user cites.

A record holds the verdict (:data:`VERDICTS`), the statement as printed and as sympy ``srepr``,
its hypotheses, for a derivation what it rests on (``proof``: steps checked in general, checked only
at named sizes, cited with and without replayed side conditions, prose, and every premise with the
hypothesis it comes from), the counterexample with exact values and its certificate, the tightest instance
found (best ratio ``lhs / rhs`` and its witness), the search budget and seed, library versions,
the git commit and the paper version. Everything that depends on the clock lives in the ``timing``
sub-object; the ``content_hash`` is the sha256 of the canonical JSON of the rest, so the same seed
and budget give byte-identical records apart from ``timing``. :data:`SCHEMA` documents the format
(a JSON Schema), :func:`validate` checks a record against it. Files are written atomically.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import platform
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from attnbounds.theory import atomic
from attnbounds.theory.errors import InvalidArgument

FORMAT = "attnbounds.record"
VERSION = 1
VERDICTS = ("PROVED", "VERIFIED", "REFUTED", "UNDECIDED", "NOT-APPLICABLE", "ERROR")

PAPER = {
    "title": "Limitations of Normalization in Attention Mechanism",
    "authors": ["Timur Mudarisov", "Mikhail Burtsev", "Tatiana Petrova", "Radu State"],
    "arxiv": "arXiv:2508.17821",
    "bibtex_key": "mudarisov2025limitations",
}
BIBTEX = """@article{mudarisov2025limitations,
  title         = {Limitations of Normalization in Attention Mechanism},
  author        = {Mudarisov, Timur and Burtsev, Mikhail and Petrova, Tatiana and State, Radu},
  journal       = {arXiv preprint arXiv:2508.17821},
  year          = {2025},
  eprint        = {2508.17821},
  archivePrefix = {arXiv},
  primaryClass  = {cs.LG},
  url           = {https://arxiv.org/abs/2508.17821}
}"""

_NULL = {"type": "null"}
_STR = {"type": "string"}
_NUM = {"type": ["number", "string"]}  # non-finite floats are written as strings
_OBJ = {"type": "object"}

#: JSON Schema (draft 2020-12 subset) of a record; :func:`validate` implements the subset used.
SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "attnbounds verdict record",
    "type": "object",
    "required": ["format", "version", "id", "verdict", "reason", "statement", "hypotheses", "paper", "proof",
                 "counterexample", "tightness", "search", "software", "git", "content_hash", "timing"],
    "additionalProperties": False,
    "properties": {
        "format": {"enum": [FORMAT]},
        "version": {"enum": [VERSION]},
        "id": _STR,
        "verdict": {"enum": list(VERDICTS)},
        "reason": _STR,
        "statement": {
            "type": "object",
            "required": ["id", "title", "latex", "srepr", "formula", "where", "bindings", "defaults", "kind",
                         "expectation_over", "notes", "citation", "source"],
            "additionalProperties": False,
            "properties": {
                "id": _STR, "title": _STR, "latex": _STR, "srepr": _STR, "formula": _STR,
                "where": {"type": "object", "additionalProperties": _STR},
                "bindings": {"type": "object", "additionalProperties": _STR},
                "defaults": _OBJ, "kind": {"enum": ["deterministic", "expectation"]},
                "expectation_over": {"type": ["string", "null"]}, "notes": _STR,
                "citation": {"type": "object", "required": ["numbering", "arxiv", "version"]},
                "source": {"enum": ["paper", "user"]},
                "fixed": _OBJ, "ranges": _OBJ,
            },
        },
        "certified": {"type": "boolean"},
        "log_F_refused": {"type": "object", "required": ["normaliser", "reason"]},
        "callable_check": {"type": "object", "required": ["normaliser", "instances", "longest_L"]},
        "closed_claim": {"type": "object", "required": ["conjuncts"]},
        "hypotheses": {"type": "array", "items": {"type": "object", "required": ["id", "description"],
                                                  "properties": {"id": _STR, "description": _STR}}},
        "paper": {"type": "object", "required": ["title", "arxiv", "version", "bibtex_key"]},
        "proof": {"anyOf": [_NULL, {
            "type": "object",
            "required": ["name", "result", "ok", "complete", "checked", "size_limited", "cited", "cited_unchecked", "prose",
                         "size_limited_steps", "premises", "rests_on"],
            "properties": {"checked": {"type": "integer"}, "size_limited": {"type": "integer"},
                           "cited": {"type": "integer"}, "cited_unchecked": {"type": "integer"},
                           "prose": {"type": "integer"}, "size_limited_steps": {"type": "array", "items": _STR},
                           "premises": {"type": "array", "items": {
                               "type": "object", "required": ["premise", "hypothesis", "checked"],
                               "properties": {"premise": _STR, "hypothesis": _STR, "checked": {"type": "boolean"}}}},
                           "uses": {"type": "array", "items": _STR}, "rests_on": _STR}}]},
        "counterexample": {"anyOf": [_NULL, {
            "type": "object", "required": ["instance", "certificate", "statistical", "candidate_rank", "L", "boundary"],
            "properties": {"instance": {"type": "object", "required": ["format", "alpha"]},
                           "certificate": {"type": "object", "required": ["status", "margin_lo", "margin_hi", "method",
                                                                          "precision_bits"]},
                           "statistical": {"type": "boolean"}, "candidate_rank": {"type": "integer"}}}]},
        "tightness": {"type": "object", "required": ["best_ratio", "best_margin", "witness", "certificate", "equality"],
                      "properties": {"best_ratio": {"type": ["number", "string", "null"]},
                                     "best_margin": {"type": ["number", "string", "null"]},
                                     "witness": {"type": ["object", "null"]},
                                     "certificate": {"type": ["object", "null"]},
                                     "equality": {"type": ["boolean", "null"]}}},
        "search": {"type": "object", "required": ["budget_s", "seed", "tried", "by_method", "candidates", "L_range"],
                   "properties": {"budget_s": _NUM, "seed": {"type": "integer"}, "tried": {"type": "integer"},
                                  "by_method": _OBJ, "candidates": {"type": "array"}}},
        "software": {"type": "object", "required": ["attnbounds", "python", "numpy", "sympy", "mpmath", "flint", "torch"]},
        "git": {"type": "object", "required": ["commit", "dirty"],
                "properties": {"commit": {"type": ["string", "null"]}, "dirty": {"type": ["boolean", "null"]}}},
        "content_hash": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "timing": {"type": "object", "additionalProperties": {"type": ["number", "string", "null"]}},
    },
}


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


def content_hash(data: dict[str, Any]) -> str:
    """``sha256:...`` of the canonical JSON of a record without ``timing`` and ``content_hash``."""
    body = {k: v for k, v in data.items() if k not in ("timing", "content_hash")}
    return "sha256:" + hashlib.sha256(dumps(body, indent=None).encode()).hexdigest()


def write_json(path: str | os.PathLike[str], value: Any) -> Path:
    """Write ``value`` as deterministic JSON atomically (a temporary file in the same folder, then rename)."""
    return atomic.write_text(path, dumps(value) + "\n")


# -- provenance ----------------------------------------------------------------------------------------
def _version(module: str) -> str | None:
    try:
        from importlib.metadata import version

        return version({"flint": "python-flint"}.get(module, module))
    except Exception:  # not installed
        return None


@functools.lru_cache(maxsize=1)
def software() -> dict[str, Any]:
    """Versions of the libraries a verdict depends on (``None`` when not installed)."""
    return {"attnbounds": _version("attnbounds"), "python": platform.python_version(), "numpy": _version("numpy"),
            "sympy": _version("sympy"), "mpmath": _version("mpmath"), "flint": _version("flint"),
            "scipy": _version("scipy"), "torch": _version("torch")}


@functools.lru_cache(maxsize=1)
def git_state() -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the source tree holding this package (``None`` outside a git checkout)."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return {"commit": None, "dirty": None}
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=10)
        return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


# -- the record ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """One reading's verdict with its provenance (``data`` is the JSON object; see :data:`SCHEMA`)."""

    data: dict[str, Any] = field(repr=False)

    @property
    def id(self) -> str:
        return self.data["id"]

    @property
    def verdict(self) -> str:
        """PROVED, VERIFIED, REFUTED, UNDECIDED, NOT-APPLICABLE or ERROR (README, "What the verdicts mean").

        For a statement about a Python callable normaliser without ``log F`` (:attr:`certified` is False) nothing is
        certified: REFUTED then means violated in float64 arithmetic only (the record's ``counterexample.float``
        holds the float margin), and a bound that holds is at most VERIFIED. A closed claim (no free symbol) is
        decided exactly: PROVED or REFUTED with both sides' exact values under ``closed_claim``."""
        return self.data["verdict"]

    @property
    def content_hash(self) -> str:
        return self.data["content_hash"]

    @property
    def reason(self) -> str:
        return self.data["reason"]

    @property
    def best_ratio(self) -> float | None:
        v = self.data["tightness"]["best_ratio"]
        return None if v is None else float(v)

    @property
    def counterexample(self) -> dict[str, Any] | None:
        """The counterexample of a REFUTED record (its instance, certificate, L, ...), or None. For a statement about
        a Python callable without log F it is a float violation only: ``counterexample["certified"]`` is False."""
        return self.data.get("counterexample")

    @property
    def certified(self) -> bool:
        """False when nothing in this record is certified: the statement is about a Python callable normaliser
        without an interval version (a REFUTED verdict is then a float64 violation, VERIFIED at most otherwise)."""
        return bool(self.data.get("certified", True))

    def cite(self) -> str:
        """What ``attnbounds cite`` prints for this record: a sentence, the paper's BibTeX, the content hash."""
        return (f"{citation_sentence(self)}\n\n{BIBTEX}\n\nCite attnbounds itself with CITATION.cff (repository root).\n"
                f"record content hash: {self.content_hash}")

    def __str__(self) -> str:
        return f"{self.id}: {self.verdict}{'' if self.certified else ' (not certified)'}: {self.reason}"

    @property
    def tried(self) -> int:
        return int(self.data["search"]["tried"])

    @property
    def wall_s(self) -> float:
        return float(self.data["timing"].get("wall_s", float("nan")))

    def to_json(self) -> dict[str, Any]:
        return self.data

    def dumps(self) -> str:
        return dumps(self.data)

    @classmethod
    def build(cls, **fields: Any) -> "Record":
        """A record from its fields (everything in :data:`SCHEMA` but ``format``, ``version``, ``content_hash``)."""
        data = canonical({"format": FORMAT, "version": VERSION, **fields})
        data["content_hash"] = content_hash(data)
        problems = validate(data)
        if problems:
            raise InvalidArgument("internal error: the record does not match its schema: " + "; ".join(problems))
        return cls(data)

    @classmethod
    def from_json(cls, data: Any) -> "Record":
        """A record read back; raises naming the first schema problems or a hash mismatch."""
        problems = validate(data)
        if problems:
            raise InvalidArgument("not a valid attnbounds record: " + "; ".join(problems[:5]))
        if content_hash(data) != data["content_hash"]:
            raise InvalidArgument(f"record {data['id']!r}: content hash mismatch (the record was edited)")
        return cls(data)


#: the largest records file (or document) read, in bytes
MAX_RECORDS_BYTES = 1 << 30


def save(path: str | os.PathLike[str], records: Iterable[Record]) -> Path:
    """Write records as one JSON array, atomically."""
    return write_json(path, [r.to_json() for r in records])


def load(path: str | os.PathLike[str]) -> list[Record]:
    """Read a JSON array of records (as written by :func:`save` or ``attnbounds verify --json``)."""
    text = atomic.read_text(path, "records file", MAX_RECORDS_BYTES)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"records file {str(path)!r} is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidArgument(f"records file {str(path)!r} nests JSON too deeply to be records") from None
    if not isinstance(data, list):
        raise InvalidArgument(f"records file {str(path)!r} must hold a JSON array of records")
    return [Record.from_json(d) for d in data]


# -- a small JSON Schema validator -------------------------------------------------------------------------
_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def validate(value: Any, schema: dict[str, Any] = SCHEMA, path: str = "$") -> list[str]:
    """Problems of ``value`` against ``schema`` (empty when valid).

    Supports the keywords the record schema uses: ``type`` (a name or a list), ``enum``,
    ``required``, ``properties``, ``additionalProperties`` (bool or schema), ``items``,
    ``anyOf`` and ``pattern``.
    """
    import re

    out: list[str] = []
    if "anyOf" in schema:
        if all(validate(value, s, path) for s in schema["anyOf"]):
            out.append(f"{path}: matches none of the allowed forms")
        return out
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            return [f"{path}: expected {' or '.join(kinds)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        out.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                out.append(f"{path}: missing required key {key!r}")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                out += validate(item, props[key], f"{path}.{key}")
            elif extra is False:
                out.append(f"{path}: unexpected key {key!r}")
            elif isinstance(extra, dict):
                out += validate(item, extra, f"{path}.{key}")
    if isinstance(value, list) and "items" in schema:
        for k, item in enumerate(value):
            out += validate(item, schema["items"], f"{path}[{k}]")
    return out


# -- citing ----------------------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    return "n/a" if v is None else (f"{float(v):.6g}" if not isinstance(v, str) else v)


def citation_sentence(record: Record) -> str:
    """One sentence a paper can use, stating what attnbounds established and how."""
    d = record.data
    st, search = d["statement"], d["search"]
    what = f"the reading {d['id']} of {st['citation']['numbering']} of {PAPER['arxiv']} ({st['citation']['version']})"
    if st["source"] == "user":
        what = f"the user-declared bound {d['id']} ({st['citation']['numbering']})"
    sw = f"attnbounds {d['software']['attnbounds'] or '(development version)'}"
    searched = (f"a seeded counterexample search (seed {search['seed']}, budget {_fmt(search['budget_s'])} s, "
                f"{search['tried']} instances")
    ratio = d["tightness"]["best_ratio"]
    tight = f", largest lhs/rhs found {_fmt(ratio)}" if ratio is not None else ""
    verdict = d["verdict"]
    closed = d.get("closed_claim")
    if closed is not None:
        parts = "; ".join(f"{c['relation']} with lhs = {c['lhs']} and rhs = {c['rhs']} ({c['method']})"
                          for c in closed["conjuncts"])
        body = {"PROVED": f"is true, decided exactly: {parts}", "REFUTED": f"is false, decided exactly: {parts}"}.get(
            verdict, f"is undecided: {d['reason']}")
        return f"With {sw}, the closed claim {d['id']} ({st['formula']}) {body} (record {d['content_hash']})."
    if d.get("certified", True) is False:
        note = " (its normaliser is a Python callable without log F, so nothing here is certified)"
        if verdict == "REFUTED":
            f = d["counterexample"]["float"]
            body = (f"is violated in float64 arithmetic only, not certified: {searched}) found an instance at L = "
                    f"{d['counterexample']['L']} with lhs = {_fmt(f['lhs'])}, rhs = {_fmt(f['rhs'])}, float margin "
                    f"rhs - lhs = {_fmt(f['margin'])}{note}")
        elif verdict == "VERIFIED":
            body = f"survived {searched}{tight}) in float64 arithmetic; this is evidence, not a proof{note}"
        else:
            body = f"is {verdict.lower()}: {d['reason']}{note}"
        return f"With {sw}, {what} {body} (record {d['content_hash']})."
    if verdict == "PROVED":
        p = d["proof"]
        body = (f"is proved by the machine-replayed derivation {p['name']}, which rests on {p['rests_on']}, "
                f"and survived {searched}{tight})")
    elif verdict == "VERIFIED":
        body = f"survived {searched}{tight}); this is evidence, not a proof"
    elif verdict == "REFUTED":
        c = d["counterexample"]["certificate"]
        how = (f"a Monte Carlo interval at confidence level {c['level']} (a statistical refutation)"
               if d["counterexample"]["statistical"] else
               f"{c['backend']} interval arithmetic at {c['precision_bits']} bits")
        body = (f"is false: {searched}) found a counterexample whose margin rhs - lhs lies in "
                f"[{_fmt(c['margin_lo'])}, {_fmt(c['margin_hi'])}], certified by {how}")
    elif verdict == "NOT-APPLICABLE":
        body = f"could not be tested: {d['reason']}"
    elif verdict == "UNDECIDED":
        body = f"is undecided after {searched}): {d['reason']}"
    else:
        body = f"produced an internal error ({d['reason']}); do not cite it"
    return f"With {sw}, {what} {body} (record {d['content_hash']})."


# -- the README's verdict table ---------------------------------------------------------------------------
TABLE_START = "<!-- verdict table: generated by `attnbounds table RECORDS --readme README.md`; do not edit -->"
TABLE_END = "<!-- end of verdict table -->"


def verdict_label(record: Record) -> str:
    """``PROVED (derivation)``, ``REFUTED``, ``VERIFIED``, ...: the verdict as the table shows it."""
    proof = record.data.get("proof")
    if record.verdict == "PROVED" and proof:
        return f"PROVED ({proof['name']})"
    return record.verdict


def verdict_table(records: Iterable[Record]) -> str:
    """A markdown table, one row per record: id, verdict, formula, title (what the README shows)."""
    def cell(text: str) -> str:
        return text.replace("|", "/").replace("\n", " ")

    rows = ["| id | verdict | formula | reading |", "|---|---|---|---|"]
    for r in records:
        st = r.data["statement"]
        rows.append(f"| `{r.id}` | {verdict_label(r)} | `{cell(st['formula'])}` | {cell(st['title'])} |")
    return "\n".join(rows)


def parse_verdict_table(text: str) -> dict[str, str]:
    """``id -> verdict label`` from a document holding a :func:`verdict_table` between the markers."""
    if TABLE_START not in text or TABLE_END not in text:
        raise InvalidArgument("no generated verdict table (its start and end markers) in this document")
    body = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    out = {}
    for line in body.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`") and cells[0].endswith("`"):
            out[cells[0].strip("`")] = cells[1]
    return out


def update_readme(path: str | os.PathLike[str], records: Iterable[Record]) -> Path:
    """Replace the verdict table between the markers of the document at ``path`` (atomically)."""
    p = Path(path)
    text = atomic.read_text(p, "document", MAX_RECORDS_BYTES)
    if TABLE_START not in text or TABLE_END not in text:
        raise InvalidArgument(f"{p}: add the markers {TABLE_START!r} and {TABLE_END!r} where the table goes")
    head, rest = text.split(TABLE_START, 1)
    _, tail = rest.split(TABLE_END, 1)
    return atomic.write_text(p, f"{head}{TABLE_START}\n{verdict_table(records)}\n{TABLE_END}{tail}")
