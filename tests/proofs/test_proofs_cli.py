"""``attnbounds prove`` / ``python -m attnbounds.proofs``: one line per reading, exit 0 / 1 / 2."""

import subprocess
import sys
from dataclasses import replace

from attnbounds import proofs
from attnbounds.proofs import cli
from attnbounds.proofs.framework import Identity
from attnbounds.theory.running import cli as theory_cli


def test_prove_selected_readings(capsys):
    assert cli.main(["lemma1", "corollary3[fd,corrected]", "theorem2.lower[full]"]) == 0
    out = capsys.readouterr().out
    assert "lemma1" in out and "PROVED" in out and "lemma1.extreme-values" in out
    assert "corollary3.softmax.fd" in out and "MODULO PROSE" not in out
    assert "UNDECIDED" in out and "anti-concentration" in out


def test_verbose_prints_every_step(capsys):
    assert cli.main(["-v", "multihead"]) == 0
    out = capsys.readouterr().out
    assert "[ok  ] conclusion" in out and "[ok  ] witness" in out


def test_unknown_id_exits_2(capsys):
    assert cli.main(["no-such-reading"]) == 2
    assert "unknown statement id" in capsys.readouterr().err


def test_a_failing_derivation_exits_1(monkeypatch, capsys):
    good = proofs.get("theorem1.fixed[R1,g1]")
    k = next(k for k, s in enumerate(good.steps) if isinstance(s, Identity))
    bad = replace(good, steps=(*good.steps[:k], Identity("wrong", good.steps[k].lhs, 0), *good.steps[k + 1:]))
    monkeypatch.setattr(proofs, "get", lambda sid: bad if sid == "theorem1.fixed[R1,g1]" else None)
    assert cli.main(["theorem1.fixed[R1,g1]"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "[FAIL] identity" in out


def test_attnbounds_prove_delegates(capsys):
    assert theory_cli.main(["prove", "corollary1[delta=max-key]"]) == 0
    assert "corollary1.cauchy-schwarz.max-key" in capsys.readouterr().out


def test_python_dash_m_proofs():
    done = subprocess.run([sys.executable, "-m", "proofs", "multihead"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "multihead.independence" in done.stdout
