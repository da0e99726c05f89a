"""Certified counterexamples of refuted readings, one file per reading: ``<directory>/<reading id>.json``.

A file holds one instance (batch of one, serialised exactly by :mod:`attnbounds.theory.io.serialize`), the
certificate :func:`attnbounds.theory.deciding.certify.certify` gave it, and how the search found it. Files are
written only by the refresh (``python -m tests.oracle.refresh`` from a source checkout), which obtains every
counterexample by searching and certifies it before writing (:func:`write` refuses anything else); never edit one
by hand. The oracle (``tests/oracle/test_oracle.py``) re-certifies each file: a reading whose file certifies as
violated is a strict xfail that replays the instance; a file that stops violating fails the run.

The directory is ``$ATTNBOUNDS_COUNTEREXAMPLES``, else the package's data folder ``theory/data/counterexamples``
(package data: an installed wheel replays them).

Refresh (from the repository root; ``tests/oracle/refresh.py`` says how it searches)::

    python -m tests.oracle.refresh                 # every reading
    python -m tests.oracle.refresh lemma1 ...      # some readings
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from pathlib import Path
from typing import Any

from attnbounds.theory.io import atomic
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.io.serialize import canonical
from attnbounds.theory.io.serialize import instance_from_json, instance_to_json
from attnbounds.theory.mathematics.statement import Statement

DIRECTORY = Path(os.environ.get("ATTNBOUNDS_COUNTEREXAMPLES")
                 or Path(__file__).resolve().parents[1] / "data" / "counterexamples")
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
        return f"{self.path.parent.name}/{self.path.name}"


def path_for(statement_id: str) -> Path:
    return DIRECTORY / f"{statement_id}.json"


def stored(statement_id: str) -> Counterexample | None:
    """The stored counterexample of ``statement_id``, or None when the reading has none."""
    path = path_for(statement_id)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidArgument(f"{path}: not valid JSON ({exc}); regenerate it with the refresh script") from None
    if record.get("format") != FORMAT or record.get("statement") != statement_id:
        raise InvalidArgument(f"{path}: not a counterexample of {statement_id!r} (format {record.get('format')!r}, "
                              f"statement {record.get('statement')!r})")
    return Counterexample(statement_id, path, instance_from_json(record["instance"]), record)


def stored_ids() -> list[str]:
    return sorted(p.name[: -len(".json")] for p in DIRECTORY.glob("*.json"))


@functools.lru_cache(maxsize=None)
def recertify(statement_id: str) -> Any:
    """``certify`` of the stored instance, now (cached per process); None when there is no file."""
    from attnbounds.theory.deciding.certify import certify
    from attnbounds.theory.mathematics.registry import get

    cx = stored(statement_id)
    return None if cx is None else certify(get(statement_id), cx.instance, 0)


def write(statement: Statement, inst: Instance, certificate: Any, found_by: dict[str, Any]) -> Path:
    """Write the counterexample of ``statement`` atomically (temp file + ``os.replace``)."""
    if inst.B != 1:
        raise InvalidArgument(f"a counterexample is a single instance, got a batch of {inst.B}")
    if getattr(certificate, "status", None) != "violated":
        raise InvalidArgument(f"refusing to store an instance the certifier did not find violated "
                              f"(status {getattr(certificate, 'status', None)!r})")
    record = {"format": FORMAT, "version": VERSION, "statement": statement.id, "formula": statement.formula,
              "kind": statement.kind, "certificate": certificate.to_json(timing=False),
              "found_by": canonical(found_by),
              "instance": instance_to_json(inst)}
    path = path_for(statement.id)
    atomic.write_text(path, json.dumps(record, indent=1) + "\n")
    recertify.cache_clear()
    return path
