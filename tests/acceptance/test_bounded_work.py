"""Nothing hangs and nothing is allocated before a bound is checked (issue 19, items 3 to 5; the scheduler
handshake is in test_cluster.py, callables' time limit in test_callables.py).

No assertion here measures time: work is bounded by construction (what is evaluated, what is allocated), and a run
that did hang would hold the test run up, which is what the CI's own timeout is for."""

from __future__ import annotations

import math
import tracemalloc
import warnings

import numpy as np
import pytest

import attnbounds
from attnbounds.theory.deciding import parallel
from attnbounds.theory.io import userbounds
from attnbounds.theory.running.cli import main
from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.quantities import compute

pytestmark = pytest.mark.usefixtures("restore_family")


@pytest.mark.parametrize("H", [11, 16, 20])
def test_the_multihead_coverage_costs_O_H_for_every_H_in_its_domain(H):
    p = np.linspace(0.0, 1.0, 257)
    inst = Instance.from_logits(np.zeros((p.size, 1)), softmax(1.0), p=p, H=np.full(p.size, float(H)))
    got = compute("coverage_enum", inst)  # 257 rows of 2^20 outcomes each would be 10^8 products
    assert np.allclose(got, 1 - (1 - p) ** H, rtol=1e-12, atol=1e-15)
    r = attnbounds.check("coverage_enum >= 0.99", fixed={"p": 0.3, "H": H}, budget=0.3)
    # true at H = 16 and 20 (1 - 0.7^16 = 0.9967): proved exactly since coverage relaxes for a fixed H; false at 11
    assert r.verdict == ("PROVED" if 1 - 0.7**H >= 0.99 else "REFUTED"), r.reason


def test_a_single_long_length_loads_without_a_dense_row_of_that_length():
    tracemalloc.start()
    try:
        user = userbounds.load_data({"statement": [{"id": "long", "relation": "alpha_i <= 1",
                                                    "ranges": {"L": [3 * 10**8, 4 * 10**8]}}]}, "test")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"loading allocated {peak / 2**20:.0f} MiB (a dense row of 3e8 logits is 2.4 GB)"
    rec = attnbounds.verify(statements=user.statements, budget_s=0.3, progress=False)[0]
    assert rec.verdict == "VERIFIED" and rec.data["search"]["L_range"]["all"][0] >= 3 * 10**8


def test_local_workers_are_capped_by_cores_and_memory_with_a_warning():
    from attnbounds.theory.mathematics.memory import cores, total_bytes

    memory = total_bytes()
    cap = min(cores(), max(1, memory // parallel.WORKER_BYTES) if memory is not None else cores())
    with pytest.warns(UserWarning, match=rf"processes:1000 capped at {cap} worker processes: this machine has"):
        assert parallel.parse("processes:1000") == ("processes", cap)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning within the cap
        assert parallel.parse("processes:1") == ("processes", 1)


def test_statements_given_twice_are_read_together_and_clashes_are_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ATTNBOUNDS_CACHE", str(tmp_path / "cache"))
    a, b, c = tmp_path / "a.toml", tmp_path / "b.toml", tmp_path / "c.toml"
    a.write_text('[[statement]]\nid = "mine.a"\nrelation = "alpha_i <= 1"\n')
    b.write_text('[[statement]]\nid = "mine.b"\nrelation = "alpha_max <= 0.5"\n')
    c.write_text('[[statement]]\nid = "mine.a"\nrelation = "alpha_min >= 0"\n')
    out = tmp_path / "r.json"
    assert main(["verify", "--statements", str(a), "--statements", str(b), "--budget", "0.3", "--quiet",
                 "--json", str(out)]) == 0
    from attnbounds.theory.io.records import load_records

    assert {r.id: r.verdict for r in load_records(out)} == {"mine.a": "VERIFIED", "mine.b": "REFUTED"}
    capsys.readouterr()
    assert main(["verify", "--statements", str(a), "--statements", str(c), "--budget", "0.3", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'mine.a' is declared in" in err and str(c) in err and "Traceback" not in err


def test_a_long_flat_conjunction_is_accepted_and_deep_nesting_still_refused():
    from attnbounds.theory.running import api

    parts = [f"(alpha_i <= {1 + k / 10})" for k in range(40)]  # 24 levels of nesting were the limit before
    assert len(api.statement(" & ".join(parts)).statements[0].strict) == 40
    # the budget is wall-clock seconds: 0.2 s found no counterexample once on a loaded machine (a 27-minute test run)
    r = attnbounds.check(" & ".join(parts[:21] + ["(alpha_max <= 0.5)"]), budget=5.0)
    assert r.verdict == "REFUTED"
    with pytest.raises(attnbounds.InvalidArgument, match="nested 2[0-9] levels deep"):
        attnbounds.check("alpha_i <= " + "sqrt(" * 26 + "2" + ")" * 26, budget=0.3)
    assert math.isfinite(float(r.data["counterexample"]["certificate"]["margin_hi"]))
