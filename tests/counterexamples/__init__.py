"""Certified counterexamples of refuted readings: ``tests/counterexamples/<reading id>.json``.

A file holds one instance (batch of one, serialised exactly by :mod:`theory.serialize`), the
certificate :func:`theory.certify.certify` gave it, and how the search found it. Files are written
only by ``python -m tests.counterexamples.refresh``, which obtains every counterexample by
searching and certifies it before writing; never edit one by hand. The oracle
(``tests/theory/test_oracle.py``) re-certifies each file: a reading whose file certifies as
violated is a strict xfail that replays the instance; a file that stops violating fails the run.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any


from theory import atomic
from theory.errors import AttnBoundsError
from theory.instance import Instance
from theory.records import canonical
from theory.serialize import instance_from_json, instance_to_json
from theory.statement import Statement

DIRECTORY = Path(__file__).resolve().parent
FORMAT = "attnbounds.counterexample"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class Counterexample:
    """A stored counterexample: the reading, the file, the instance and the stored record."""

    statement_id: str
    path: Path
    instance: Instance
    record: dict[str, Any]

    @property
    def relpath(self) -> str:
        return f"tests/counterexamples/{self.path.name}"


def path_for(statement_id: str) -> Path:
    return DIRECTORY / f"{statement_id}.json"


def load(statement_id: str) -> Counterexample | None:
    """The stored counterexample of ``statement_id``, or None when the reading has none."""
    path = path_for(statement_id)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise AttnBoundsError(f"{path}: not valid JSON ({exc}); regenerate it with the refresh script") from None
    if record.get("format") != FORMAT or record.get("statement") != statement_id:
        raise AttnBoundsError(f"{path}: not a counterexample of {statement_id!r} (format {record.get('format')!r}, "
                              f"statement {record.get('statement')!r})")
    return Counterexample(statement_id, path, instance_from_json(record["instance"]), record)


def stored_ids() -> list[str]:
    return sorted(p.name[: -len(".json")] for p in DIRECTORY.glob("*.json"))


@functools.lru_cache(maxsize=None)
def recertify(statement_id: str) -> Any:
    """``certify`` of the stored instance, now (cached per process); None when there is no file."""
    from theory.certify import certify
    from theory.registry import get

    cx = load(statement_id)
    return None if cx is None else certify(get(statement_id), cx.instance, 0)


def write(statement: Statement, inst: Instance, certificate: Any, found_by: dict[str, Any]) -> Path:
    """Write the counterexample of ``statement`` atomically (temp file + ``os.replace``)."""
    if inst.B != 1:
        raise AttnBoundsError(f"a counterexample is a single instance, got a batch of {inst.B}")
    if getattr(certificate, "status", None) != "violated":
        raise AttnBoundsError(f"refusing to store an instance the certifier did not find violated "
                              f"(status {getattr(certificate, 'status', None)!r})")
    record = {"format": FORMAT, "version": VERSION, "statement": statement.id, "formula": statement.formula,
              "kind": statement.kind, "certificate": certificate.to_json(timing=False),
              "found_by": canonical(found_by),
              "instance": instance_to_json(inst)}
    path = path_for(statement.id)
    atomic.write_text(path, json.dumps(record, indent=1) + "\n")
    recertify.cache_clear()
    return path
