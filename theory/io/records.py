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

import functools
import hashlib
import json
import math
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, cast


from attnbounds.theory.io import atomic
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.io.serialize import canonical, dumps
from attnbounds.theory.mathematics.statement import VERDICTS, Verdict
from attnbounds.theory.io.markdown import _one_line, markdown_plain, markdown_text

FORMAT = "attnbounds.record"
VERSION = 1

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
_STRS = {"type": "array", "items": _STR}
_BOOL = {"type": "boolean"}
_OBJ = {"type": "object"}
#: a number, or the text of a non-finite float (how :func:`canonical` writes them)
_NUM = {"type": ["number", "string"], "pattern": "^(-?inf|nan)$"}
_NUM_OR_NULL = {"type": ["number", "string", "null"], "pattern": "^(-?inf|nan)$"}
#: seeds, indices, token counts and lengths: a limit along a growing family certifies up to t = 2^80 - 1 steps of
#: growth (limits.SWEEP_DEPTH), a class of up to 10^15 tokens (MAX_LENGTH) each step: about 1.2e39 tokens
_BIG = 10**40
_INT = {"type": "integer", "minimum": -_BIG, "maximum": _BIG}
_COUNT = {"type": "integer", "minimum": 0, "maximum": _BIG}
_COUNT_OR_NULL = {"type": ["integer", "null"], "minimum": 0, "maximum": _BIG}
_SPAN = {"anyOf": [_NULL, {"type": "array", "items": _COUNT}]}
#: a float or array of floats as :mod:`attnbounds.theory.io.serialize` writes it
_FLOATS = {"type": "object", "properties": {"hex": {"leaves": _STR}, "values": {"leaves": _NUM}}}
_FLOATS_OR_NULL = {"anyOf": [_NULL, _FLOATS]}
_INSTANCE = {
    "type": "object", "required": ["format", "alpha"],
    "properties": {
        "format": _STR, "version": _INT, "B": _COUNT, "L": _COUNT, "N": _COUNT_OR_NULL, "classes": _COUNT,
        "counts": {"type": "array", "items": {"type": "array", "items": _COUNT}},
        "alpha": _FLOATS, "logits": _FLOATS_OR_NULL, "x": _FLOATS_OR_NULL, "q": _FLOATS_OR_NULL, "k": _FLOATS_OR_NULL,
        "selection": {"anyOf": [_NULL, {"leaves": _BOOL}]},
        "params": {"type": "object", "additionalProperties": _FLOATS},
        "arrays": {"type": "object", "additionalProperties": _FLOATS},
        "normaliser": {"anyOf": [_NULL, {"type": "object", "required": ["family"], "properties": {
            "family": _STR, "name": _STR, "log_F": _STR, "params": {"type": "object", "additionalProperties": _FLOATS}}}]},
    },
}
_CERTIFICATE = {
    "type": "object", "required": ["status", "margin_lo", "margin_hi", "method", "precision_bits"],
    "properties": {"status": _STR, "method": _STR, "backend": _STR, "statement_id": _STR, "weights": _STR,
                   "margin_lo": _NUM, "margin_hi": _NUM, "scale": _NUM, "margin_lo_text": _STR, "margin_hi_text": _STR,
                   "lhs": _STR, "rhs": _STR, "precision_bits": {"type": ["integer", "null"]},
                   "level": {"type": ["number", "null"]}, "notes": _STRS,
                   "hypotheses": {"type": "object", "additionalProperties": _STR},
                   "worst": {"type": "object", "additionalProperties": _INT}},
}
_LIMITS = {"type": "array", "items": {"type": "object", "properties": {
    "family": _STR, "status": _STR, "L0": _COUNT_OR_NULL, "L_max": _COUNT_OR_NULL, "limit": _STR,
    "relative_slack": _NUM_OR_NULL, "order": {"type": ["integer", "null"]}, "detail": _STR}}}
_FOUND = {  # what a counterexample (and an interior one) says about itself
    "instance": _INSTANCE, "certificate": _CERTIFICATE, "statistical": _BOOL, "candidate_rank": _INT, "L": _COUNT,
    "boundary": _STRS, "shrunk": _BOOL, "smallest_violating_L_seen": _COUNT_OR_NULL, "limit": _LIMITS,
    "certified": _BOOL, "note": _STR, "found": _BOOL, "reason": _STR, "tried": _COUNT,
    "float": {"type": "object", "properties": {k: _NUM for k in ("lhs", "rhs", "margin", "relative_margin")}},
    "smallest_float_violation_L_seen": {"type": "object", "required": ["L", "certificate", "note"],
                                        "properties": {"L": _COUNT, "certificate": _STR, "note": _STR}},
}
_METHOD = {"type": "object", "properties": {
    "tried": _COUNT, "applicable": _COUNT_OR_NULL, "violations": _COUNT, "L_range": _SPAN, "best_ratio": _NUM_OR_NULL,
    "best_margin": _NUM_OR_NULL, "stopped": _STR, "errors": _COUNT, "error_messages": _STRS, "skipped": _COUNT,
    "callable_failures": _COUNT, "callable_failure_messages": _STRS, "cut": _COUNT, "violation_L_min": _COUNT,
    "by_L": {"type": "array", "items": {"type": "array", "minItems": 3, "maxItems": 3, "items": _NUM}}}}

#: JSON Schema (draft 2020-12 subset) of a record; :func:`validate` implements the subset used. Beyond the shape, it
#: types every value that ``attnbounds report``, ``table`` and ``cite`` read (and numbers must be finite), so a
#: record they accept renders: one check, in :meth:`Record.from_json`, for every command that reads records.
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
                "citation": {"type": "object", "required": ["numbering", "arxiv", "version"],
                             "properties": {"numbering": _STR, "arxiv": _STR, "version": _STR}},
                "source": {"enum": ["paper", "user"]},
                "fixed": _OBJ, "ranges": _OBJ, "normaliser": _OBJ,
            },
        },
        "certified": _BOOL,
        "relaxation": {"type": "object", "required": ["method", "status", "reason", "work", "boxes", "problems"],
                       "properties": {"method": _STR, "status": {"enum": ["proved", "refuted", "open", "declined"]},
                                      "reason": _STR, "work": {"type": "integer"}, "boxes": {"type": "integer"},
                                      "problems": {"type": "array", "items": _OBJ}, "rests_on": _STR,
                                      "boxes_sha256": _STR}},
        "log_F_refused": {"type": "object", "required": ["normaliser", "reason"],
                          "properties": {"normaliser": {"anyOf": [_NULL, _STR]}, "reason": _STR}},
        "callable_check": {"type": "object", "required": ["normaliser", "instances", "longest_L"],
                           "properties": {"normaliser": _STR, "instances": _INT, "longest_L": _INT, "note": _STR}},
        "closed_claim": {"type": "object", "required": ["conjuncts"], "properties": {
            "conjuncts": {"type": "array", "items": {"type": "object", "required": ["relation", "lhs", "rhs", "method"],
                                                     "additionalProperties": _STR}},
            "fixed": {"type": "object", "additionalProperties": _NUM}}},
        "hypotheses": {"type": "array", "items": {"type": "object", "required": ["id", "description"],
                                                  "properties": {"id": _STR, "description": _STR}}},
        "paper": {"type": "object", "required": ["title", "arxiv", "version", "bibtex_key"],
                  "properties": {"title": _STR, "arxiv": _STR, "version": _STR, "bibtex_key": _STR, "authors": _STRS}},
        "proof": {"anyOf": [_NULL, {
            "type": "object",
            "required": ["name", "result", "ok", "complete", "checked", "size_limited", "cited", "cited_unchecked", "prose",
                         "size_limited_steps", "premises", "rests_on"],
            "properties": {"name": _STR, "result": _STR, "ok": _BOOL, "complete": _BOOL,
                           "sharp": {"type": ["boolean", "null"]},
                           "checked": _COUNT, "size_limited": _COUNT, "cited": _COUNT, "cited_unchecked": _COUNT,
                           "prose": _COUNT, "size_limited_steps": _STRS,
                           "premises": {"type": "array", "items": {
                               "type": "object", "required": ["premise", "hypothesis", "checked"],
                               "properties": {"premise": _STR, "hypothesis": _STR, "checked": _BOOL}}},
                           "steps": {"type": "array", "items": {"type": "object", "properties": {
                               "category": _STR, "text": _STR, "ok": {"type": ["boolean", "null"]}}}},
                           "uses": _STRS, "rests_on": _STR}}]},
        "counterexample": {"anyOf": [_NULL, {
            "type": "object", "required": ["instance", "certificate", "statistical", "candidate_rank", "L", "boundary"],
            "properties": {**_FOUND, "interior": {"type": "object", "properties": _FOUND}}}]},
        "tightness": {"type": "object", "required": ["best_ratio", "best_margin", "witness", "certificate", "equality"],
                      "properties": {"best_ratio": _NUM_OR_NULL, "best_margin": _NUM_OR_NULL,
                                     "witness": {"anyOf": [_NULL, _INSTANCE]},
                                     "certificate": {"anyOf": [_NULL, _CERTIFICATE]},
                                     "equality": {"type": ["boolean", "null"]}, "limit": _LIMITS,
                                     "float_only": _STR}},
        "search": {"type": "object", "required": ["budget_s", "seed", "tried", "by_method", "candidates", "L_range"],
                   "properties": {"budget_s": _NUM, "seed": _INT, "tried": _COUNT,
                                  "by_method": {"type": "object", "additionalProperties": _METHOD},
                                  "candidates": {"type": "array", "items": _OBJ}, "plan": _OBJ,
                                  "L_range": {"type": "object", "additionalProperties": _SPAN}}},
        "software": {"type": "object", "required": ["attnbounds", "python", "numpy", "sympy", "mpmath", "flint", "torch"],
                     "additionalProperties": {"type": ["string", "null"]}},
        "git": {"type": "object", "required": ["commit", "dirty"],
                "properties": {"commit": {"type": ["string", "null"]}, "dirty": {"type": ["boolean", "null"]}}},
        "content_hash": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
        "timing": {"type": "object", "additionalProperties": {"type": ["number", "string", "null"]}},
    },
}
#: the deepest nesting of JSON arrays and objects a record may have (an instance's token vectors sit at depth 10)
MAX_DEPTH = 32


def problems(data: Any) -> list[str]:
    """Everything wrong with a record: :func:`validate` against :data:`SCHEMA`, then what the verdict needs (a
    PROVED record its derivation, a REFUTED one its counterexample, a float-only one its float margin)."""
    out = validate(data)
    if out:
        return out
    verdict, closed, cx = data["verdict"], data.get("closed_claim"), data["counterexample"]
    relaxed = isinstance(data.get("relaxation"), dict) and data["relaxation"].get("status") == "proved"
    if closed is None and verdict == "PROVED" and data["proof"] is None and not relaxed:
        out.append("$.proof: a PROVED record needs its derivation, a relaxation certificate or a closed claim")
    if closed is None and verdict == "REFUTED" and cx is None:
        out.append("$.counterexample: a REFUTED record needs its counterexample (or a closed claim)")
    if cx is not None and data.get("certified", True) is False and verdict == "REFUTED" and "float" not in cx:
        out.append("$.counterexample: a REFUTED record that is not certified needs its float margin ('float')")
    return out


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
    root = Path(__file__).resolve().parents[2]
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
    def verdict(self) -> Verdict:
        """PROVED, VERIFIED, REFUTED, UNDECIDED, NOT-APPLICABLE or ERROR (README, "What the verdicts mean").

        For a statement about a Python callable normaliser without ``log F`` (:attr:`certified` is False) nothing is
        certified: REFUTED then means violated in float64 arithmetic only (the record's ``counterexample.float``
        holds the float margin), and a bound that holds is at most VERIFIED. A closed claim (no free symbol) is
        decided exactly: PROVED or REFUTED with both sides' exact values under ``closed_claim``."""
        return cast(Verdict, self.data["verdict"])

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

    def _repr_html_(self) -> str:
        """Jupyter's view: the record's section of ``attnbounds report`` (plot inline)."""
        return _html([self.data])

    def _repr_markdown_(self) -> str:
        """Jupyter's view where HTML is not shown: verdict, why, formula, the paper's numbering."""
        return record_markdown(self)

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
        found = problems(data)
        if found:
            raise InvalidArgument("internal error: the record does not match its schema: " + "; ".join(found))
        return cls(data)

    @classmethod
    def from_json(cls, data: Any) -> "Record":
        """A record read back; raises naming the first schema problems or a hash mismatch."""
        found = problems(data)
        if found:
            raise InvalidArgument("not a valid attnbounds record: " + "; ".join(found[:5]))
        if content_hash(data) != data["content_hash"]:
            raise InvalidArgument(f"record {data['id']!r}: content hash mismatch (the record was edited)")
        return cls(data)


def _html(records: list[dict[str, Any]]) -> str:
    """The report's HTML of records held in memory (:func:`attnbounds.theory.io.report.fragment`; the report reads
    records, so it is imported only when a notebook shows them)."""
    from attnbounds.theory.io.report import fragment

    return fragment(records)


class Records(list[Record]):
    """A list of records (what :func:`attnbounds.verify` returns) that Jupyter shows as the report: the erratum and
    one section per record (``_repr_html_``), or the verdict table (``_repr_markdown_``)."""

    def _repr_html_(self) -> str:
        return _html([r.data for r in self])

    def _repr_markdown_(self) -> str:
        return verdict_table(self)


def record_markdown(record: Record) -> str:
    """One record in Markdown: id and verdict, the sentence saying why, the formula as the paper writes it, where
    it comes from, and the reason the search gave."""
    from attnbounds.theory.io import paper
    from attnbounds.theory.mathematics.notation import text_of_record

    d = record.data
    st = d["statement"]
    cit = st["citation"]
    source = ("the user's statements file" if st.get("source") == "user" else
              f"[{markdown_text(cit['numbering'])}, {markdown_text(cit['arxiv'])} {markdown_text(cit['version'])}]"
              f"({paper.ARXIV_URL})")
    reason = markdown_text(d["reason"])
    try:
        why = paper.why(d)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:  # a shape the schema leaves open
        why = f"(malformed: {type(exc).__name__}: {exc})"
    lines = [f"**{_code(record.id, table=False)}**: **{markdown_text(verdict_label(record))}**"
             f"{'' if record.certified else ' (not certified)'}. {markdown_text(why)}", "",
             f"{_code(text_of_record(st), table=False)} ({markdown_text(st['title'])}; {source})", "",
             f"*{reason}*" if reason else "(no reason given)"]
    return "\n".join(lines)


#: the largest records file (or document) read, in bytes
MAX_RECORDS_BYTES = 1 << 30


def save_records(path: str | os.PathLike[str], records: Iterable[Record]) -> Path:
    """Write records as one JSON array, atomically."""
    return write_json(path, [r.to_json() for r in records])


def load_records(path: str | os.PathLike[str]) -> list[Record]:
    """Read a JSON array of records (as written by :func:`save` or ``attnbounds verify --json``)."""
    return list(iter_records(path))


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (a record writes non-finite numbers as text)")


def iter_records(path: str | os.PathLike[str]) -> Iterator[Record]:
    """The records of a file one at a time, each checked (:meth:`Record.from_json`) as it is read: the file is read
    in pieces and only the record being read is held (a whole file of Python objects takes several times its size).
    :class:`InvalidArgument` naming the file and the problem (not JSON, not an array, an invalid record)."""
    shown = f"records file {str(path)!r}"
    pieces = atomic.read_chunks(path, "records file", MAX_RECORDS_BYTES)
    decoder = json.JSONDecoder(parse_constant=_constant)
    space = re.compile(r"[ \t\n\r]*")
    text, at, done = "", 0, False

    def more() -> bool:
        """Read the next piece (dropping what was parsed); False at the end of the file."""
        nonlocal text, at, done
        piece = next(pieces, None)
        if piece is None:
            done = True
            return False
        text, at = text[at:] + piece, 0
        return True

    def skip() -> str:
        """The next character after white space ('' at the end of the file)."""
        nonlocal at
        while True:
            match = space.match(text, at)
            at = match.end() if match else at
            if at < len(text) or not more():
                return text[at:at + 1]

    def not_json(why: str) -> InvalidArgument:
        return InvalidArgument(f"{shown} is not JSON: {why}")

    def grow() -> bool:
        """Read pieces until the unparsed text has doubled (a record spanning many pieces is parsed a few times,
        not once per piece); False at the end of the file."""
        want = 2 * max(len(text) - at, 1)
        grew = False
        while len(text) - at < want and more():
            grew = True
        return grew

    first = skip()
    if first != "[":  # say what it is: not JSON at all, or JSON but not an array
        while more():
            pass
        try:
            decoder.decode(text[at:])
        except (ValueError, RecursionError) as exc:
            raise not_json(str(exc) if text[at:] else "the file is empty") from None
        raise InvalidArgument(f"{shown} must hold a JSON array of records")
    at += 1
    k = 0
    while True:
        char = skip()
        if char == "]":
            at += 1
            if skip():
                raise not_json(f"extra data after the array: {text[at:at + 20]!r}")
            return
        if k:
            if char != ",":
                raise not_json(f"expected ',' or ']' after record {k - 1}, got {char!r}" if char else "it ends early")
            at += 1
            skip()
        while True:
            try:
                data, end = decoder.raw_decode(text, at)
                break
            except ValueError as exc:  # json.JSONDecodeError (the record may go on in the next piece), constants
                if done or "is not JSON" in str(exc) or not grow():
                    raise not_json(str(exc).split(": line", 1)[0] + f" (in record {k})") from None
            except RecursionError:
                raise InvalidArgument(f"{shown} nests JSON too deeply to be records") from None
        at = end
        try:
            yield Record.from_json(data)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{shown}, record {k}: {exc}") from None
        k += 1


# -- a small JSON Schema validator -------------------------------------------------------------------------
_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind == "number":  # finite: JSON has no inf or nan (a record writes them as text)
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, _TYPES[kind])


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels in ``value`` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def _number_text(value: int | float) -> str:
    """A number for a message, shortened without changing what it says: its digits, or its first and last ones and
    how many (never cut to a smaller number)."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:12]}...{text[-4:]} ({len(text)} characters)"


def validate(value: Any, schema: dict[str, Any] = SCHEMA, path: str = "$") -> list[str]:
    """Problems of ``value`` against ``schema`` (empty when valid).

    Supports the keywords the record schema uses: ``type`` (a name or a list; numbers are finite), ``enum``,
    ``required``, ``properties``, ``additionalProperties`` (bool or schema), ``items``, ``minItems``, ``maxItems``,
    ``anyOf``, ``pattern`` (strings), ``minimum`` and ``maximum`` (numbers), and ``leaves`` (a value of that schema
    or arrays of them, nested: the arrays of an instance). At the root, nesting deeper than :data:`MAX_DEPTH` is a
    problem of its own (and nothing else is checked).
    """
    if path == "$" and too_deep(value):
        return [f"$: arrays and objects nested more than {MAX_DEPTH} levels deep"]
    out: list[str] = []
    if "anyOf" in schema:
        found = [validate(value, s, path) for s in schema["anyOf"]]
        if all(found):  # the problems of the one form of the right type, if there is one
            typed = [f for f in found if not (len(f) == 1 and f[0].startswith(f"{path}: expected "))]
            return typed[0] if len(typed) == 1 else [f"{path}: matches none of the allowed forms"]
        return out
    if "leaves" in schema:
        stack = [(value, path)]
        while stack:
            item, where = stack.pop()
            if isinstance(item, list):
                stack.extend((v, f"{where}[{k}]") for k, v in enumerate(item))
            else:
                out += validate(item, schema["leaves"], where)
                if len(out) > 5:
                    break
        return out
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else kinds
        if not any(_is(value, k) for k in kinds):
            got = "a non-finite number" if isinstance(value, float) and not math.isfinite(value) else type(value).__name__
            return [f"{path}: expected {' or '.join(kinds)}, got {got}"]
    if "enum" in schema and value not in schema["enum"]:
        out.append(f"{path}: {value!r:.80} is not one of {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        out.append(f"{path}: {value!r:.80} does not match {schema['pattern']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            out.append(f"{path}: {_number_text(value)} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            out.append(f"{path}: {_number_text(value)} is above the maximum {schema['maximum']}")
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
                out.append(f"{path}: unexpected key {key!r:.80}")
            elif isinstance(extra, dict):
                out += validate(item, extra, f"{path}.{key}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            out.append(f"{path}: expected {schema.get('minItems', 0)} to {schema.get('maxItems', 'any number of')} "
                       f"items, got {len(value)}")
        if "items" in schema:
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
        from attnbounds.theory.mathematics.notation import text_of_record

        return f"With {sw}, the closed claim {d['id']} ({text_of_record(st)}) {body} (record {d['content_hash']})."
    if d.get("certified", True) is False:
        note = " (its normaliser is a Python callable without log F, so nothing here is certified)"
        if verdict == "REFUTED":
            f = d["counterexample"]["float"]
            body = (f"is violated in float64 arithmetic only, not certified: {searched}) found an instance at L = "
                    f"{d['counterexample']['L']} with lhs = {_fmt(f.get('lhs'))}, rhs = {_fmt(f.get('rhs'))}, float "
                    f"margin rhs - lhs = {_fmt(f.get('margin'))}{note}")
        elif verdict == "VERIFIED":
            body = f"survived {searched}{tight}) in float64 arithmetic; this is evidence, not a proof{note}"
        else:
            body = f"is {verdict.lower()}: {d['reason']}{note}"
        return f"With {sw}, {what} {body} (record {d['content_hash']})."
    if verdict == "PROVED":
        p = d["proof"]
        relaxed = d.get("relaxation") or {}
        second = (f"; it is also proved for every L by {relaxed.get('rests_on', 'the relaxation prover')}"
                  if relaxed.get("status") == "proved"
                  else "")
        body = (f"is proved by the machine-replayed derivation {p['name']}, which rests on {p['rests_on']}{second}, "
                f"and survived {searched}{tight})" if p and p.get("ok") and p.get("complete") else
                f"is proved for every L by {relaxed.get('rests_on', 'the relaxation prover')}, and survived "
                f"{searched}{tight})")
    elif verdict == "VERIFIED":
        body = f"survived {searched}{tight}); this is evidence, not a proof"
    elif verdict == "REFUTED":
        c = d["counterexample"]["certificate"]
        how = (f"a Monte Carlo interval at confidence level {c.get('level')} (a statistical refutation)"
               if d["counterexample"]["statistical"] else
               f"{c.get('backend', c['method'])} interval arithmetic at {c['precision_bits']} bits")
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
ERRATUM_START = "<!-- erratum: generated by `attnbounds table RECORDS --erratum --readme README.md`; do not edit -->"
ERRATUM_END = "<!-- end of erratum -->"


def verdict_label(record: Record) -> str:
    """``PROVED (derivation)``, ``REFUTED``, ``VERIFIED``, ...: the verdict as the table shows it."""
    proof = record.data.get("proof")
    relaxed = (record.data.get("relaxation") or {}).get("status") == "proved"
    if record.verdict == "PROVED" and proof and proof.get("ok") and proof.get("complete"):
        return f"PROVED ({proof['name']}{' + relaxation' if relaxed else ''})"
    if record.verdict == "PROVED" and relaxed:
        return "PROVED (relaxation)"
    return record.verdict


def _code(text: object, *, table: bool = True) -> str:
    """A Markdown code span showing ``text`` literally (``str()`` of anything; one line, control characters escaped):
    as many backticks around it as it needs, padded when it starts or ends with a backtick or a space. Nothing is
    interpreted inside a code span (HTML, entities, emphasis, backslashes) except a table's bars: with ``table`` (a
    cell of a Markdown table) they are written ``\\|``, which the table reads as a bar of the cell."""
    flat = _one_line(text)
    if table:
        flat = flat.replace("|", "\\|")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if not flat or flat[0] in "` " or flat[-1] in "` " else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def verdict_table(records: Iterable[Record]) -> str:
    """A markdown table, one row per record: id, verdict, formula (as the paper writes it), title (what the README
    shows). ``records`` may be an iterator (:func:`iter_records`): only the rows are kept."""
    from attnbounds.theory.mathematics.notation import text_of_record

    rows = ["| id | verdict | formula | reading |", "|---|---|---|---|"]
    for r in records:
        st = r.data["statement"]
        rows.append(f"| {_code(r.id)} | {markdown_text(verdict_label(r))} | {_code(text_of_record(st))} | "
                    f"{markdown_text(st['title'])} |")
    return "\n".join(rows)


def erratum_table(records: Iterable[Record]) -> str:
    """The erratum in Markdown (:func:`attnbounds.theory.io.paper.erratum`): per result of the paper, what it prints,
    its readings that hold, those refuted, and the corrected forms, each with its verdict."""
    from attnbounds.theory.io import paper

    rows = []
    for r in records:
        rows.append((r.id, verdict_label(r), r.data["statement"].get("source", "paper")))
    labels = {i: v for i, v, _ in rows}

    def items(pairs: list[tuple[str, str]]) -> str:
        return "<br>".join(f"{_code(i)} {markdown_text(labels[i])}" for i, _ in pairs) or "none"

    out = ["| the paper prints | readings that hold (or are open) | readings refuted | corrected forms |",
           "|---|---|---|---|"]
    for entry in paper.erratum((i, v.split(" ", 1)[0], src) for i, v, src in rows):
        printed = entry.printed
        what = (f"[{markdown_text(printed.numbering)}]({paper.ARXIV_URL}): {markdown_text(printed.statement)}"
                if printed is not None else _code(entry.result))
        out.append(f"| {what} *{markdown_text(entry.summary)}* | {items(entry.holds + entry.open)} | "
                   f"{items(entry.fails)} | {items(entry.corrected)} |")
    return "\n".join(out)


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (bars escaped as ``\\|`` stay in their cell)."""
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def parse_verdict_table(text: str) -> dict[str, str]:
    """``id -> verdict label`` from a document holding a :func:`verdict_table` between the markers (the label's
    Markdown escapes read back, :func:`markdown_plain`)."""
    if TABLE_START not in text or TABLE_END not in text:
        raise InvalidArgument("no generated verdict table (its start and end markers) in this document")
    body = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    out = {}
    for line in body.splitlines():
        cells = _cells(line)
        if len(cells) >= 2 and cells[0].startswith("`") and cells[0].endswith("`"):
            out[cells[0].strip("`").strip()] = markdown_plain(cells[1])
    return out


def update_readme(path: str | os.PathLike[str], table: str, *, erratum: bool = False) -> Path:
    """Replace the generated text between the markers (:data:`TABLE_START` and :data:`TABLE_END`, or the erratum's)
    of the document at ``path`` with ``table`` (atomically)."""
    start, end = (ERRATUM_START, ERRATUM_END) if erratum else (TABLE_START, TABLE_END)
    p = Path(path)
    text = atomic.read_text(p, "document", MAX_RECORDS_BYTES)
    if start not in text or end not in text:
        raise InvalidArgument(f"{p}: add the markers {start!r} and {end!r} where the table goes")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return atomic.write_text(p, f"{head}{start}\n{table}\n{end}{tail}")
