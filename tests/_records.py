"""Records made quickly for the tests of what reads records (report, table, cite, replay, the notebook view): the
stand-in search of :mod:`tests._fakesearch`, a token-class counterexample, and a way to edit a record and keep it
valid (its content hash recomputed)."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from attnbounds.theory.mathematics import normalisers as nm
from attnbounds.theory.io import records as rec
from attnbounds.theory.mathematics.instance import Instance
from tests._fakesearch import no_proof, random_search, scripted

#: 112 tokens in 3 classes: one dominant token and two classes of 55 and 56 (``alpha_i <= 1/2`` fails for the first)
COUNTS = [[1, 55, 56]]
LENGTH = 112


def class_instance() -> Instance:
    return Instance.from_logits(np.array([[10.0, 0.0, 0.5]]), nm.softmax(1.0), counts=COUNTS)


def class_record() -> rec.Record:
    """A user's bound ``alpha_i <= 1/2`` REFUTED by a certified token-class counterexample (112 tokens, 3 classes)."""
    from attnbounds.theory.running import api
    from attnbounds.theory.running.verify import verify

    user = api.statement("alpha_i <= 1/2", hypotheses=["simplex"], id="user.half")
    inst = class_instance()
    return verify(None, budget_s=0.1, progress=False, statements=user.statements,
                  search=scripted([inst], best=inst, ratio=2.0, margin=-0.5), prover=no_proof)[0]


def quick_records(ids: list[str]) -> list[rec.Record]:
    """Records of paper readings from the small random search, without proofs (seconds, not minutes)."""
    from attnbounds.theory.running.verify import verify

    return verify(ids, budget_s=0.1, progress=False, search=random_search, prover=no_proof)


def rehash(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with its content hash recomputed (an edited record that is still a record)."""
    data["content_hash"] = rec.content_hash(data)
    return data


def edited(record: rec.Record | dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of a record's JSON with top-level ``changes`` and a fresh content hash."""
    data = copy.deepcopy(record.to_json() if isinstance(record, rec.Record) else record)
    data.update(changes)
    return rehash(data)
