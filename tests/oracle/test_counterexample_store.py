"""The counterexample files: well formed, produced by a search, certified, and refused when not violated."""

from __future__ import annotations

import numpy as np
import pytest

from attnbounds.theory.mathematics import registry
from attnbounds.theory.deciding.certify import certify
from attnbounds.theory.mathematics.errors import AttnBoundsError
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import make

from attnbounds.theory.io.counterexamples import recertify, stored, stored_ids, write


@pytest.mark.parametrize("statement_id", stored_ids())
def test_stored_counterexample_is_a_searched_certified_violation(statement_id: str) -> None:
    cx = stored(statement_id)
    assert cx is not None and statement_id in registry.ids()
    assert cx.instance.B == 1
    assert cx.record["certificate"]["status"] == "violated"
    assert "search" in cx.record["found_by"]["method"]  # written by the refresh script, from a search
    assert cx.record["formula"] == registry.get(statement_id).formula, "the reading changed since the file was written"
    assert recertify(statement_id).status == "violated"


def test_write_refuses_what_is_not_a_certified_violation() -> None:
    statement = registry.get("corollary3[entry,corrected]")
    inst = Instance.from_logits(np.zeros((2, 2)), make("softmax", T=1.0))
    with pytest.raises(AttnBoundsError, match="single instance"):
        write(statement, inst, certify(statement, inst, 0), {"method": "test"})
    one = inst.take(0)
    cert = certify(statement, one, 0)
    assert cert.status != "violated"
    with pytest.raises(AttnBoundsError, match="did not find violated"):
        write(statement, one, cert, {"method": "test"})
