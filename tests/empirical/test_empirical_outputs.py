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
from attnbounds.theory.mathematics.errors import AttnBoundsError

TINY_ARGS = ["--windows", "2", "--batch-windows", "2", "--L-grid", "8,16,32", "--N-grid", "1,3,6", "--N-fixed", "3",
             "--separability-L", "32", "--separability-N", "1,2,4,16", "--gradient-L", "32",
             "--T-grid", "0.001,0.01,0.03,0.1,1,3,10", "--no-progress"]


# -- verdicts -------------------------------------------------------------------------------------------------
def _critical(found: dict[int, int | None], ceiling: float = 0.5) -> dict:
    """Critical-N results where the N of each L is given (None: not found up to the ceiling L/2)."""
    from attnbounds.empirical import stats
    from attnbounds.empirical.exp_critical import AT_CEILING, FOUND, NOT_FOUND

    key = "J_scaled_weighted"
    per_L = []
    for L, n in found.items():
        top = int(ceiling * L)
        status = NOT_FOUND if n is None else AT_CEILING if n == top else FOUND
        per_L.append({"L": L, "N": [1, 2, top], "ceiling": top, "scans": {key: {"critical_N": n, "status": status}}})
    pts = [(r["L"], r["scans"][key]["critical_N"]) for r in per_L if r["scans"][key]["status"] == FOUND]
    fit = stats.fit_through_origin([p[0] for p in pts], [p[1] for p in pts]) if len(pts) >= 2 else None
    return {"expectation": key, "per_L": per_L, "ks_resolution": {"heads_per_sample": 64},
            "fits": {key: {"linear": fit, "found": len(pts), "of": len(found)}}}


@pytest.mark.parametrize("found, passed", [
    ({100: 6, 200: 12, 400: 24}, True),
    ({100: 30, 200: 60, 400: 120}, False),
    ({100: None, 200: None}, False),
    ({100: None, 200: None, 400: None, 800: 400}, False),  # the one "found" N is the scan ceiling: never fitted
])
def test_critical_criterion(found: dict, passed: bool) -> None:
    row = headlines.critical(_critical(found))
    assert row["passed"] is passed
    if all(n is None or n == L // 2 for L, n in found.items()):
        assert row["numbers"]["c"] is None and "no line fitted" in row["measured"]
        assert "not found up to N=50" in row["measured"]


def _sep(medians: dict[int, float]) -> dict:
    return {"per_N": [{"N": N, "median_over_heads": {"Ns_frac": v}} for N, v in medians.items()]}


@pytest.mark.parametrize("medians, passed", [
    ({1: 1.0, 4: 0.9, 16: 0.8, 64: 0.78}, True),
    ({1: 1.0, 16: 0.5, 64: 0.45}, False),
    ({1: 1.0, 4: 0.9}, None),
])
def test_separability_criterion(medians: dict, passed: bool | None) -> None:
    assert headlines.separability(_sep(medians))["passed"] is passed


def test_vacuous_bounds_are_named_per_N() -> None:
    """A Theorem 2 bound says nothing where the lower one is <= 0, or the upper one >= 0.99, on every head."""
    from attnbounds.empirical.exp_separability import _vacuous

    def rec(N: int, lower: list[float], upper: list[float]) -> dict:
        return {"N": N, "per_head": {"lower": np.array(lower), "upper": np.array(upper)}}

    vac = _vacuous([rec(1, [0.5, 0.2], [1.0, 1.0]), rec(16, [-0.1, -0.2], [0.995, 0.999]),
                    rec(64, [0.1, -0.1], [0.9, 0.999])])
    assert vac["lower_at_or_below_0_for_N"] == [16] and vac["lower_max"] == -0.1
    assert vac["upper_nearly_1_for_N"] == [1, 16] and vac["upper_min"] == 0.995


def _grad(power: float) -> dict:
    T = np.logspace(-3, 2, 21)
    g = np.minimum(T ** power, 1e3 ** -power)  # saturated below T = 1e-3... as real curves are below 0.01
    return {"T": T.tolist(), "eps": [1e-3, 0.1], "max_over_heads": np.stack([g, 2 * g], 1).tolist()}


def test_gradient_criteria() -> None:
    assert headlines.gradient_slope(_grad(-1.0))["passed"] is True
    assert headlines.gradient_slope(_grad(-0.3))["passed"] is False
    assert headlines.gradient_drop(_grad(-1.0))["numbers"]["ratio"] == pytest.approx(100, rel=0.3)
    assert headlines.gradient_drop(_grad(-1.0))["passed"] is True
    assert headlines.gradient_drop(_grad(-0.3))["passed"] is False
    flat_low = _grad(-1.0)
    flat_low["max_over_heads"] = [[1.0, 1.0] if t < 0.01 else row for t, row in zip(flat_low["T"], flat_low["max_over_heads"])]
    assert headlines.gradient_slope(flat_low)["passed"] is True  # saturation below T = 0.01 is outside the fit
    short = {"T": [1.0, 10.0], "eps": [1e-3], "max_over_heads": [[1.0], [0.1]]}
    assert headlines.gradient_slope(short)["passed"] is None
    assert headlines.gradient_drop(short)["passed"] is None


def test_a_null_that_passes_makes_the_verdict_does_not_discriminate() -> None:
    good = {"gradients": _grad(-1.0)}
    rows = headlines.table({"experiments": good, "nulls": {"random-init": {"experiments": {"gradients": _grad(-1.0)}},
                                                           "shuffled": {"experiments": {"gradients": _grad(-0.3)}}}})
    slope = next(r for r in rows if r["claim"] == "gradient sensitivity, low T")
    assert slope["verdict"] == "does not discriminate"
    assert slope["nulls"]["random-init"]["passed"] is True and slope["nulls"]["shuffled"]["passed"] is False
    rows = headlines.table({"experiments": good, "nulls": {"shuffled": {"experiments": {"gradients": _grad(-0.3)}}}})
    assert next(r for r in rows if r["claim"] == "gradient sensitivity, low T")["verdict"] == "reproduced"


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
    ("queries", "first", "queries must be 'all', 'last' or 'tail:Q'"),
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
    assert full.queries == quick.queries == "all" and full.nulls == quick.nulls == ("random-init", "shuffled", "uniform")


# -- the command ----------------------------------------------------------------------------------
VERDICTS = ("reproduced", "does not discriminate", "not reproduced", "not comparable")


def test_cli_end_to_end(rand_model_dir: Path, tmp_path: Path, small_text_path: Path,
                        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    argv = ["--model", str(rand_model_dir), "--out", str(out), "--text", str(small_text_path), "--quick", *TINY_ARGS,
            "--null-windows", "1"]
    assert cli.main(argv) == 0
    files = sorted(os.listdir(out))
    assert files == ["fig2ab_distance.png", "fig2c_critical_n.png", "fig3_separability.png", "fig4_gradients.png",
                     "report.html", "report.md", "results.json"]
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no temporary folder left beside it
    for f in files:
        if f.endswith(".png"):
            assert (out / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = json.loads((out / "results.json").read_text())
    assert res["model"]["path"] == str(rand_model_dir.resolve()) and res["model"]["n_layer"] == 2
    assert res["protocol"]["windows"] == 2 and res["protocol"]["name"] == "quick"
    assert res["text"]["path"] == str(small_text_path) and res["text"]["origin"] == "argument"
    assert res["windows"]["count"] == 2 and res["windows"]["region"]["split"].startswith("the whole text")
    assert set(res["experiments"]) == {"distance", "critical", "separability", "gradients"}
    assert set(res["nulls"]) == {"random-init", "shuffled", "uniform"}
    assert all(set(n["experiments"]) == set(res["experiments"]) for n in res["nulls"].values())
    md = (out / "report.md").read_text()
    first_table = md[md.index("| claim | paper | measured | nulls | verdict |"):].split("\n\n")[0]
    for row in res["headlines"]:
        assert row["claim"] in first_table and row["verdict"] in VERDICTS and set(row["nulls"]) == set(res["nulls"])
    assert md.index("| claim | paper | measured | nulls | verdict |") < md.index("![")
    for needle in ("every query position", "verdicts speak for this model", "Nulls: random-init, shuffled, uniform",
                   "## Critical top-N, every reading", "per-head means"):
        assert needle in md, needle
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "<table>" in html
    printed = capsys.readouterr().out
    assert "wrote" in printed and "verdicts speak for this model" in printed and "[nulls:" in printed


def test_tiny_runs_the_every_query_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``attnbounds empirical --model tiny --quick``: trained (a small spec), held-out windows, every query, nulls;
    the report and the terminal state the model, its perplexity, the split, the queries and the nulls."""
    monkeypatch.setenv("ATTNBOUNDS_TINY_SPEC", json.dumps({"n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 128,
                                                           "seq_len": 64, "steps": 2, "eval_windows": 2}))
    out = tmp_path / "out"
    assert cli.main(["--model", "tiny", "--out", str(out), "--quick", "--no-progress"]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["protocol"]["queries"] == "all" and res["queries"].startswith("every query position")
    region = res["windows"]["region"]
    assert region["split"].startswith("held out") and region["start"] == res["model"]["training"]["train_tokens"]
    assert min(min(s) for s in res["windows"]["starts"].values()) >= region["start"]  # only held-out windows
    pairs = res["experiments"]["distance"]["pairs"]
    assert all(min(p["rows_per_head"]) == res["windows"]["count"] * (p["L"] - p["N"]) for p in pairs)
    md = (out / "report.md").read_text().replace("**", "")
    printed = capsys.readouterr().out
    for text_ in (md, printed):
        for needle in ("Model tiny", "held-out perplexity", "held out: tokens", "every query position", "Nulls:",
                       "verdicts speak for this model"):
            assert needle in text_, needle


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
    assert cli.main(["--model", "gpt2-no-such-thing", "--out", str(tmp_path), "--quick"]) == 2
    err = capsys.readouterr().err
    assert "--model standin" in err and "Traceback" not in err


def test_run_is_importable_without_heavy_modules() -> None:
    import subprocess
    import sys

    code = "import sys, empirical; assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


@pytest.mark.slow
def test_tiny_default_trains_and_quick_protocol_runs(tmp_path: Path, text_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The embedded model from scratch (default spec), then --quick. Times are printed, not asserted."""
    import torch

    from attnbounds.empirical import training
    from attnbounds.empirical.text import resolve_text

    torch.set_num_threads(os.cpu_count() or 1)
    lm = training.load_or_train(resolve_text(text_path), progress=False)
    record = lm.info["training"]
    assert record["steps_done"] == training.DEFAULT_SPEC.steps
    assert record["final_loss"] < record["initial_loss"] - 2.0
    t0 = time.perf_counter()
    assert cli.main(["--model", "tiny", "--out", str(tmp_path), "--quick", "--no-progress"]) == 0
    with capsys.disabled():
        print(f"\ntiny training {record['seconds']:.0f} s, quick protocol {time.perf_counter() - t0:.0f} s")
