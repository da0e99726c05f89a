"""Reading a file runs no code (issue 31, item 3): one test per entry point that reads expressions from a file or
from the caller, each handed Python payloads that would create a marker file if they ran.

Entry points: records (``prove --replay``, ``search --replay``, ``report``, ``table``, ``cite``, the notebook views)
with payloads in every expression field a record holds (the statement's srepr, a user normaliser's log F in the
statement and in an instance, a certificate's expressions, a face key); a statements file (TOML); and
``Statement.subs`` with text. The forged certificates of :mod:`tests.acceptance.test_forged_records` cover the
relaxation certificate's own fields in more depth.
"""

from __future__ import annotations

import contextlib
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from attnbounds.theory.io import records as rec
from attnbounds.theory.mathematics.errors import AttnBoundsError
from tests._cli import run_cli
from tests._records import rehash

PAYLOADS = ["__import__('os').system('touch {marker}')",
            "open('{marker}', 'w')",
            "Symbol('x').__class__.__mro__[-1].__subclasses__()",
            "(lambda: open('{marker}', 'w'))()",
            "exec(\"open('{marker}', 'w')\")"]


@pytest.fixture(scope="module")
def user_record() -> dict[str, Any]:
    """A user's bound on a user's normaliser, REFUTED: it carries the normaliser's log F in its statement and in its
    counterexample instance."""
    from attnbounds.theory.running import api

    record = api.check("alpha_i <= 5/(4*L)", normaliser={"name": "bsig", "log_F": "log(2 + sigmoid(l/T))"},
                       budget=0.3, seed=0, id="user.payload").to_json()
    assert record["verdict"] == "REFUTED" and record["counterexample"]["instance"]["normaliser"]["family"] == "ratio"
    return record


def _places(record: dict[str, Any]) -> dict[str, list[Any]]:
    return {"statement.srepr": ["statement", "srepr"],
            "statement.normaliser.log_F": ["statement", "normaliser", "log_F"],
            "counterexample normaliser log_F": ["counterexample", "instance", "normaliser", "log_F"],
            "tightest instance normaliser log_F": ["tightness", "witness", "normaliser", "log_F"],
            "statement.formula": ["statement", "formula"],
            "hypothesis description": ["hypotheses", 0, "description"]}


def _run(argv: list[str]) -> tuple[int, str]:
    code, out, err = run_cli(argv)
    return code, out + err


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: p[:24])
@pytest.mark.parametrize("place", sorted(_places({})))
def test_a_payload_in_a_record_stays_text_in_every_command(user_record: dict[str, Any], tmp_path: Path, place: str,
                                                           payload: str) -> None:
    marker = tmp_path / "ran"
    data = copy.deepcopy(user_record)
    node: Any = data
    path = _places(data)[place]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = payload.format(marker=marker)
    records = tmp_path / "records.json"
    records.write_text(json.dumps([rehash(data)]))
    for argv in (["prove", "--replay", str(records)], ["search", "user.payload", "--replay", str(records)],
                 ["report", str(records), "--out", str(tmp_path / "site"), "--quiet"], ["table", str(records)],
                 ["cite", "user.payload", "--records", str(records)]):
        code, text = _run(argv)
        assert code in (0, 1, 2) and "Traceback" not in text, (argv, text[-2000:])
        assert not marker.exists(), argv
    with contextlib.suppress(AttnBoundsError):
        record = rec.Record.from_json(data)
        record._repr_html_(), record._repr_markdown_()
    assert not marker.exists()


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: p[:24])
def test_a_payload_in_a_statements_file_stays_text(tmp_path: Path, payload: str) -> None:
    marker = tmp_path / "ran"
    text = payload.format(marker=marker).replace('"', "'")
    toml = tmp_path / "mine.toml"
    toml.write_text(f'[[statement]]\nid = "x"\nrelation = "alpha_i <= {text}"\n\n'
                    f'[[normaliser]]\nname = "evil"\nlog_F = "{text}"\n')
    code, out = _run(["verify", "--statements", str(toml), "--budget", "0.1", "--quiet"])
    assert code == 2 and not marker.exists(), out


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: p[:24])
def test_a_payload_handed_to_statement_subs_stays_text(tmp_path: Path, payload: str) -> None:
    from attnbounds.theory.mathematics import registry

    marker = tmp_path / "ran"
    with pytest.raises(AttnBoundsError):
        registry.get("lemma1").subs(C_1=payload.format(marker=marker))
    assert not marker.exists()
