"""Headline verdicts, protocol validation, and the command end to end (figures, reports, JSON)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pytest

from attnbounds.empirical import cli, headlines
from attnbounds.empirical.config import Protocol
from attnbounds.theory.errors import AttnBoundsError

TINY_ARGS = ["--windows", "2", "--batch-windows", "2", "--L-grid", "8,16,32", "--N-grid", "1,3,6", "--N-fixed", "3",
             "--separability-L", "32", "--separability-N", "1,2,4,16", "--gradient-L", "32",
             "--T-grid", "0.001,0.01,0.03,0.1,1,3,10", "--no-progress"]


# -- verdicts -------------------------------------------------------------------------------------
def _critical(c_found: dict[int, int | None]) -> dict:
    key = "J_scaled_weighted"
    from attnbounds.empirical import stats

    pts = [(L, n) for L, n in c_found.items() if n is not None]
    return {"expectation": key, "choices": {"max_frac": 0.5},
            "per_L": [{"L": L, "N": [1, 2, L // 2], "scans": {key: {"critical_N": n}}} for L, n in c_found.items()],
            "fits": {key: {"linear": stats.fit_through_origin([p[0] for p in pts], [p[1] for p in pts]),
                           "found": len(pts), "of": len(c_found)}}}


@pytest.mark.parametrize("found, verdict", [
    ({100: 6, 200: 12, 400: 24}, "reproduced"),
    ({100: 30, 200: 60, 400: 120}, "not reproduced"),
    ({100: None, 200: None}, "not reproduced"),
])
def test_critical_verdict(found: dict, verdict: str) -> None:
    assert headlines.critical(_critical(found))["verdict"] == verdict


def _sep(medians: dict[int, float]) -> dict:
    return {"per_N": [{"N": N, "median_over_heads": {"Ns_frac": v}} for N, v in medians.items()]}


@pytest.mark.parametrize("medians, verdict", [
    ({1: 1.0, 4: 0.9, 16: 0.8, 64: 0.78}, "reproduced"),
    ({1: 1.0, 16: 0.5, 64: 0.45}, "not reproduced"),
    ({1: 1.0, 4: 0.9}, "not comparable"),
])
def test_separability_verdict(medians: dict, verdict: str) -> None:
    assert headlines.separability(_sep(medians))["verdict"] == verdict


def _grad(power: float) -> dict:
    T = np.logspace(-3, 2, 11)
    g = T ** power
    return {"T": T.tolist(), "eps": [1e-3, 0.1], "max_over_heads": np.stack([g, 2 * g], 1).tolist()}


def test_gradient_verdicts() -> None:
    assert headlines.gradient_slope(_grad(-1.0))["verdict"] == "reproduced"
    assert headlines.gradient_slope(_grad(-0.3))["verdict"] == "not reproduced"
    assert headlines.gradient_drop(_grad(-1.0))["numbers"]["ratio"] == pytest.approx(100)
    assert headlines.gradient_drop(_grad(-1.0))["verdict"] == "reproduced"
    assert headlines.gradient_drop(_grad(-0.3))["verdict"] == "not reproduced"
    short = {"T": [1.0, 10.0], "eps": [1e-3], "max_over_heads": [[1.0], [0.1]]}
    assert headlines.gradient_slope(short)["verdict"] == "not comparable"
    assert headlines.gradient_drop(short)["verdict"] == "not comparable"


def test_missing_experiments_are_not_comparable() -> None:
    rows = headlines.table({"experiments": {}})
    assert len(rows) == 6 and {r["verdict"] for r in rows} == {"not comparable"}


# -- protocol ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value, match", [
    ("ks_alpha", 2.0, "ks_alpha must be a significance level in \\(0, 1\\), got ks_alpha=2.0"),
    ("windows", 0, "windows must be an integer >= 1"),
    ("distance_tensor", "hidden", "distance_tensor must be one of values, keys, queries"),
    ("T_grid", (1.0, -1.0), "T_grid must be a non-empty list of finite numbers > 0"),
    ("N_fixed", 64, "N_fixed must be smaller than every L"),
    ("queries", "first", "queries must be 'last' or 'tail:Q'"),
    ("experiments", ("distance", "fig9"), "experiments must be among"),
])
def test_protocol_errors_name_value_and_allowed(field: str, value: object, match: str) -> None:
    with pytest.raises(AttnBoundsError, match=match):
        Protocol.full(**{field: value})


def test_quick_protocol_is_smaller() -> None:
    full, quick = Protocol.full(), Protocol.quick()
    assert quick.windows < full.windows and quick.max_L <= full.max_L
    assert full.L_grid == (32, 64, 128, 256, 512, 1024) and full.N_grid == (1, 5, 10, 20, 100)
    assert full.eps_grid == (1e-3, 1e-1, 10.0) and full.ks_alpha == 0.01


# -- the command ----------------------------------------------------------------------------------
def test_cli_end_to_end(rand_model_dir: Path, tmp_path: Path, small_text_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["--model", str(rand_model_dir), "--out", str(out), "--text", str(small_text_path), "--quick", *TINY_ARGS]
    assert cli.main(argv) == 0
    files = sorted(os.listdir(out))
    assert files == ["fig2ab_distance.png", "fig2c_critical_n.png", "fig3_separability.png", "fig4_gradients.png",
                     "report.html", "report.md", "results.json"]  # no temp files left behind
    for f in files:
        if f.endswith(".png"):
            assert (out / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = json.loads((out / "results.json").read_text())
    assert res["model"]["path"] == str(rand_model_dir.resolve()) and res["model"]["n_layer"] == 2
    assert res["protocol"]["windows"] == 2 and res["protocol"]["name"] == "quick"
    assert res["text"]["path"] == str(small_text_path) and res["text"]["origin"] == "argument"
    assert res["windows"]["count"] == 2
    assert set(res["experiments"]) == {"distance", "critical", "separability", "gradients"}
    claims = [r["claim"] for r in res["headlines"]]
    md = (out / "report.md").read_text()
    first_table = md.split("\n\n")[1]
    for claim, row in zip(claims, res["headlines"]):
        assert claim in first_table and row["verdict"] in ("reproduced", "not reproduced", "not comparable")
    assert md.index("| claim | paper | measured | verdict |") < md.index("![")
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "<table>" in html
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("argv, match", [
    (["--ks-alpha", "2"], "ks_alpha=2.0"),
    (["--L-grid", "8,16,4096"], "n_positions=128"),
    (["--windows", "100000"], "windows of"),
])
def test_cli_bad_input_exit_2(rand_model_dir: Path, tmp_path: Path, small_text_path: Path,
                              capsys: pytest.CaptureFixture[str], argv: list[str], match: str) -> None:
    code = cli.main(["--model", str(rand_model_dir), "--out", str(tmp_path / "o"), "--text", str(small_text_path),
                     "--quick", *TINY_ARGS, *argv])
    err = capsys.readouterr().err
    assert code == 2 and match in err and "Traceback" not in err


def test_cli_unavailable_model_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t0 = time.perf_counter()
    assert cli.main(["--model", "gpt2-no-such-thing", "--out", str(tmp_path), "--quick"]) == 2
    err = capsys.readouterr().err
    assert "--model tiny" in err and "Traceback" not in err and time.perf_counter() - t0 < 20


def test_run_is_importable_without_heavy_modules() -> None:
    import subprocess
    import sys

    code = "import sys, empirical; assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


@pytest.mark.slow
def test_tiny_default_trains_and_quick_protocol_runs(tmp_path: Path, text_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The embedded model from scratch (default spec), then --quick. Times are printed, not asserted
    (benchmarks: about 5 minutes of training and under 2 minutes of --quick on 2 idle cores)."""
    import torch

    from attnbounds.empirical import tiny
    from attnbounds.empirical.text import resolve_text

    torch.set_num_threads(os.cpu_count() or 1)
    lm = tiny.load_or_train(resolve_text(text_path), progress=False)
    record = lm.info["tiny"]
    assert record["steps_done"] == tiny.DEFAULT_SPEC.steps and not record["stopped_by_time_limit"]
    assert record["final_loss"] < record["initial_loss"] - 2.0
    t0 = time.perf_counter()
    assert cli.main(["--model", "tiny", "--out", str(tmp_path), "--quick", "--no-progress"]) == 0
    with capsys.disabled():
        print(f"\ntiny training {record['seconds']:.0f} s, quick protocol {time.perf_counter() - t0:.0f} s")
