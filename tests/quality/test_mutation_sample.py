"""A sampled mutation run of the soundness core (issue 35): a fixed, seeded sample of the mutants
``bench/mutation.py`` makes (cosmic-ray; ``[tool.attnbounds.mutation]`` in pyproject.toml) must each be killed by the
tests of its group, or be listed in ``bench/mutation_equivalent.toml`` with the reason: equivalent, benign, or a known
survivor a test is still owed for (``kind = "open"``, counted as survived in every score). The sample is
drawn from the current sources, so an edit that adds code the tests do not guard can surface a survivor here: kill
it with a test of the behaviour (not of the mutant), or list it with the reason why no behaviour can differ.

Each mutant runs its group's tests in a copy of the sources (never the working tree), two at a time. The whole run
is documented in bench/mutation_report.md (``python bench/mutation.py``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: the sample: its size and seed (a few minutes on 2 cores)
SAMPLE, SEED = 5, 0


@pytest.mark.skipif(importlib.util.find_spec("cosmic_ray") is None, reason="cosmic-ray is not installed (.[test])")
def test_a_sample_of_the_soundness_cores_mutants_is_killed(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "mutation.py"), "--sample", str(SAMPLE), "--seed",
                           str(SEED), "--workers", "2", "--no-baseline", "--out", str(out)],
                          capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["all"]["mutants"] == SAMPLE
    assert not data["incompetent"], f"mutants that do not run (the copy is broken?): {data['incompetent']}"
    unlisted = [f"{m['module']}:{m['line']} {m['operator']}" for m in data["survivors"] if not m["known"]]
    assert not unlisted, out.with_suffix(".md").read_text()
