"""The ``attnbounds`` command: verify / search / cite / list, exit codes 0 (completed), 2 (bad input), 1 (internal)."""

import json
from pathlib import Path

import pytest

import attnbounds.theory.verify as verify_mod
from tests._fakesearch import no_proof, random_search
from attnbounds.theory import records as rec
from attnbounds.theory.cli import main
from attnbounds.theory.normalisers import FAMILY

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "user_bounds.toml"


@pytest.fixture(autouse=True)
def fake_search(monkeypatch):
    monkeypatch.setattr(verify_mod, "default_search", lambda: random_search)
    monkeypatch.setattr(verify_mod, "default_prover", no_proof)
    saved = dict(FAMILY)
    yield
    FAMILY.clear()
    FAMILY.update(saved)  # a statements file registers its normalisers: undo it for the other tests


def test_verify_writes_valid_records_and_prints_a_table(tmp_path, capsys):
    out = tmp_path / "records.json"
    code = main(["verify", "theorem1.fixed[R1,g2]", "corollary3[spectral,corrected]", "--budget", "1", "--json",
                 str(out), "--quiet"])
    assert code == 0
    text = capsys.readouterr().out
    assert "theorem1.fixed[R1,g2]" in text and "REFUTED" in text and "best lhs/rhs" in text
    data = json.loads(out.read_text())
    assert [d["id"] for d in data] == ["theorem1.fixed[R1,g2]", "corollary3[spectral,corrected]"]
    assert all(rec.validate(d) == [] for d in data)


@pytest.mark.parametrize("argv, message", [
    (["verify", "no-such-reading", "--quiet"], "unknown statement id"),
    (["verify", "multihead", "--budget", "-3", "--quiet"], "budget"),
    (["search", "multihead", "--seed", "-1", "--quiet"], "seed"),
    (["verify", "--statements", "/nonexistent.toml", "--quiet"], "does not exist"),
    (["cite", "multihead", "--records", "/nonexistent.json"], "cannot read"),
])
def test_bad_input_exits_2_with_a_clear_message(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_argparse_errors_exit_2():
    with pytest.raises(SystemExit) as exc:
        main(["verify", "--budget", "lots"])
    assert exc.value.code == 2


def test_internal_error_exits_1(monkeypatch, capsys):
    def broken(statement, **kw):
        raise RuntimeError("boom")

    monkeypatch.setattr(verify_mod, "default_search", lambda: broken)
    assert main(["search", "multihead", "--quiet"]) == 1
    assert "internal error" in capsys.readouterr().err
    assert main(["verify", "multihead", "--quiet"]) == 1  # an ERROR record: written, reported, non-zero
    assert "ERROR in multihead" in capsys.readouterr().err


def test_search_prints_details(capsys):
    assert main(["search", "corollary3[frobenius]", "--budget", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "searched" in out and "random" in out and "certificate" in out and '"format": "attnbounds.instance"' in out


def test_cite_from_records_and_by_running(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["verify", "corollary3[frobenius]", "--budget", "1", "--json", str(out), "--quiet"]) == 0
    record = rec.load(out)[0]
    capsys.readouterr()
    assert main(["cite", "corollary3[frobenius]", "--records", str(out)]) == 0
    text = capsys.readouterr().out
    assert record.content_hash in text and "@article{mudarisov2025limitations" in text and "CITATION.cff" in text
    assert main(["cite", "corollary3[frobenius]", "--budget", "1", "--quiet"]) == 0
    assert record.content_hash in capsys.readouterr().out  # same seed and budget: the same record
    assert main(["cite", "multihead", "--records", str(out)]) == 2


def test_list_still_works(capsys):
    assert main(["list", "--short"]) == 0
    assert "theorem1.fixed[R1,g1]" in capsys.readouterr().out


def test_user_statements_from_the_example_file(capsys):
    assert main(["verify", "--statements", str(EXAMPLE), "--budget", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "user.naive-context-distance" in out and "REFUTED" in out and "user.softmax-jacobian-half" in out
