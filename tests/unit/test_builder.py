"""The typed record builder and the record schema describe the same record (issue 20 item 4).

Each part the builder types (a ``TypedDict``) is compared with its object in :data:`records.SCHEMA`: every key the
part may hold is a property of the schema's object, and every key the schema requires is required by the part. The
builder's fields and what :meth:`RecordBuilder.build` adds are exactly the record's top-level properties.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from attnbounds.theory.deciding.closed_claims import ClosedClaim
from attnbounds.theory.deciding.search.tracker import TIMING_KEYS, MethodSummary
from attnbounds.theory.io import builder
from attnbounds.theory.io.records import SCHEMA

PROPS = SCHEMA["properties"]
#: (part, its object in the schema)
PARTS: list[tuple[Any, dict[str, Any]]] = [
    (builder.StatementPart, PROPS["statement"]),
    (builder.CitationPart, PROPS["statement"]["properties"]["citation"]),
    (builder.HypothesisPart, PROPS["hypotheses"]["items"]),
    (builder.SearchPart, PROPS["search"]),
    (MethodSummary, PROPS["search"]["properties"]["by_method"]["additionalProperties"]),
    (builder.TightnessPart, PROPS["tightness"]),
    (builder.CounterexamplePart, PROPS["counterexample"]["anyOf"][1]),
    (builder.InteriorPart, PROPS["counterexample"]["anyOf"][1]["properties"]["interior"]),
    (builder.FloatViolation, PROPS["counterexample"]["anyOf"][1]["properties"]["float"]),
    (builder.LogFRefusedPart, PROPS["log_F_refused"]),
    (ClosedClaim, PROPS["closed_claim"]),
]


@pytest.mark.parametrize("part,schema", PARTS, ids=[p.__name__ for p, _ in PARTS])
def test_each_part_types_its_schema_object(part: Any, schema: dict[str, Any]) -> None:
    keys = set(part.__required_keys__) | set(part.__optional_keys__)
    if part is MethodSummary:  # its clock's entries go to the record's timing, not into the record
        keys -= set(TIMING_KEYS)
    assert keys <= set(schema["properties"]), keys - set(schema["properties"])
    assert set(schema.get("required", ())) <= set(part.__required_keys__)


def test_the_builder_holds_every_top_level_property() -> None:
    fields = {f.name for f in dataclasses.fields(builder.RecordBuilder)} - {"timing"}
    added = {"id", "paper", "software", "git", "verdict", "reason", "timing"}  # by build()
    written = {"format", "version", "content_hash"}  # by Record.build
    assert fields | added | written == set(PROPS)
    assert not fields & (added | written)
