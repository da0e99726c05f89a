"""README's verdict table: generated from records (``attnbounds table``), and matching what a fresh run
concludes. The default run checks what is cheap to establish exactly: every reading with a complete
derivation is PROVED, every reading whose stored counterexample certifies as violated is REFUTED, every
other reading is VERIFIED or UNDECIDED; ``-m slow`` runs ``attnbounds verify`` over every reading at the
default budget and compares each verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from attnbounds import proofs
from attnbounds.theory.io import records as rec
from attnbounds.theory.mathematics import registry
from attnbounds.theory.io.counterexamples import recertify

README = Path(__file__).resolve().parents[2] / "README.md"


def _table() -> dict[str, str]:
    return rec.parse_verdict_table(README.read_text(encoding="utf-8"))


def test_readme_table_lists_every_reading_once() -> None:
    table = _table()
    assert sorted(table) == sorted(registry.ids()), (sorted(set(registry.ids()) - set(table)),
                                                     sorted(set(table) - set(registry.ids())))


def test_readme_verdicts_match_proofs_and_certified_counterexamples() -> None:
    table = _table()
    for sid in registry.ids():
        derivation = proofs.get(sid)
        replay = proofs.replay(sid)
        cert = recertify(sid)
        if replay is not None and replay.ok and replay.complete:
            assert table[sid] == f"PROVED ({derivation.name})", (sid, table[sid])
        elif cert is not None and cert.status == "violated":
            assert table[sid] == "REFUTED", (sid, table[sid])
        else:
            assert table[sid] in ("VERIFIED", "UNDECIDED"), (sid, table[sid])


@pytest.mark.slow
def test_readme_verdicts_match_a_fresh_run() -> None:
    from attnbounds.theory.running.verify import verify

    fresh = {r.id: rec.verdict_label(r) for r in verify(progress=False)}
    assert fresh == _table()


def test_table_command_round_trips(tmp_path: Path) -> None:
    from attnbounds.theory.running.verify import verify_statement

    st = registry.get("multihead")
    record = verify_statement(st, budget_s=0.2, seed=0)
    path = tmp_path / "records.json"
    rec.save_records(path, [record])
    doc = tmp_path / "doc.md"
    doc.write_text(f"intro\n{rec.TABLE_START}\nold\n{rec.TABLE_END}\noutro\n")
    from attnbounds.theory.running.cli import main

    assert main(["table", str(path), "--readme", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text
    assert rec.parse_verdict_table(text) == {"multihead": rec.verdict_label(record)}
