"""Batches of windows as tasks: partial states merged in batch order, the same numbers whatever the scheduler.

- the accumulators: merging the partial states of any split of the windows gives exactly the state of one
  pass over all windows;
- ``collect``: the order in which tasks complete does not matter (bit for bit), and other batch sizes agree;
- ``run`` on the embedded model: ``scheduler="none"`` and ``"processes:2"`` (a real LocalCluster of worker
  processes) write the same results.json apart from its timing and environment fields.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from _gpt2 import collect_on
from attnbounds.empirical import cli
from attnbounds.empirical.accumulate import PerHead, Tally
from attnbounds.empirical.config import Protocol
from attnbounds.empirical.pipeline import run
from attnbounds.theory.io.atomic import _finite
from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.deciding.parallel import Runner

PROTO = Protocol.full(name="test", windows=3, batch_windows=1, L_grid=(8, 16, 32), N_fixed=3, N_grid=(1, 3, 6),
                      critical_dense_upto=4, critical_step=1.5, critical_max_frac=0.5,
                      separability_L=32, separability_N=(1, 2, 4, 8), multihead_N=4, gradient_L=32,
                      T_grid=(0.01, 0.1, 1.0, 10.0), null_windows=2)
#: a small embedded model (trained for 2 steps): the quick protocol's 128-token windows fit
TINY_SPEC = {"n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 128, "seq_len": 64, "steps": 2,
             "eval_windows": 1}
NOT_NUMBERS = ("timing", "environment")


# -- the accumulators -----------------------------------------------------------------------------
def _stream(W: int, H: int, seed: int = 0) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """Rows of W windows: (key, window, head, value), several rows per (window, head), some NaN."""
    rng = np.random.default_rng(seed)
    out = []
    for key in ("a", "b"):
        for _ in range(3):  # e.g. three layers' or query positions' rows, in consumption order
            win = np.repeat(np.arange(W), H)
            head = np.tile(np.arange(H), W)
            val = rng.standard_normal(W * H) * 10.0 ** rng.integers(-8, 8, W * H)
            val[rng.random(W * H) < 0.1] = np.nan
            out.append((key, win, head, val))
    return out


def _split_state(rows: list, sizes: list[int], H: int) -> PerHead:
    driver = PerHead(H)
    offset = 0
    for size in sizes:
        part = PerHead(H, size)
        for key, win, head, val in rows:
            mine = (win >= offset) & (win < offset + size)
            part.add(key, head[mine], val[mine], win[mine] - offset)
        driver.absorb(part.state())
        offset += size
    return driver


@pytest.mark.parametrize("sizes", [[1] * 7, [3, 4], [2, 2, 3], [6, 1]])
def test_per_head_merge_of_any_split_equals_one_pass(sizes: list[int]) -> None:
    H, W = 5, 7
    rows = _stream(W, H)
    whole = PerHead(H, W)
    for key, win, head, val in rows:
        whole.add(key, head, val, win)
    merged = _split_state(rows, sizes, H)
    for key in ("a", "b"):
        np.testing.assert_array_equal(merged.mean(key), whole.mean(key))  # bit for bit, NaN where no rows
        np.testing.assert_array_equal(merged.count(key), whole.count(key))
    assert merged.count("a").sum() == sum(np.isfinite(v).sum() for k, _, _, v in rows if k == "a")
    with pytest.raises(ValueError):
        whole.absorb(PerHead(H, 2).state())  # only a one-slot accumulator folds partial states


def test_tally_merge_equals_one_pass() -> None:
    rng = np.random.default_rng(3)
    pairs = []
    for _ in range(6):
        lhs, rhs = rng.random(8) * 2, rng.random(8)
        lhs[rng.random(8) < 0.2] = np.nan  # no such instance
        rhs[0] = 0.0
        rhs[1] = lhs[1] * (1 - 1e-15)  # float64 rounding at an equality case
        pairs.append((lhs, rhs))
    whole = Tally()
    for lhs, rhs in pairs:
        whole.add("s", lhs, rhs)
    merged = Tally()
    for chunk in (pairs[:1], pairs[1:4], pairs[4:], []):
        part = Tally()
        for lhs, rhs in chunk:
            part.add("s", lhs, rhs)
        merged.absorb(part.state())
    assert merged.summary() == whole.summary()
    assert whole.summary()["s"]["instances"] == sum(int((~np.isnan(a)).sum()) for a, _ in pairs)
    assert whole.summary()["s"]["at_equality"] == sum(int(not np.isnan(a[1])) for a, _ in pairs) > 0


def test_tally_counts_rounding_at_an_equality_apart_from_violations() -> None:
    """A margin below 0 by float64 rounding of the sides is 'at equality'; anything beyond it is a violation."""
    lhs = np.array([1.0, 1e6, 1e-9, 2.0, 1.0, 0.0])
    rhs = np.array([1.0 - 1e-15, 1e6 * (1 - 4e-13), 1e-9 * (1 - 1e-10), 1.0, 1.0, 0.0])
    t = Tally()
    t.add("s", lhs, rhs)
    row = t.summary()["s"]
    assert (row["instances"], row["violated"], row["at_equality"]) == (6, 2, 2)
    assert row["min_margin"] == -1.0


# -- collect: order of completion, batch sizes ----------------------------------------------------
class ReversedRunner(Runner):
    """Runs the items last to first (as a cluster may finish them), returns results in item order."""

    def map(self, fn: Any, items: Any, *, label: str = "", progress: bool = False) -> list[Any]:
        return list(reversed([fn(x) for x in reversed(list(items))]))


def _numbers(res: dict[str, Any]) -> Any:
    return _finite({k: v for k, v in res.items() if k != "_timing"})


def _close(a: Any, b: Any, path: str = "") -> None:
    """Equal structure and integers; floats within rtol 1e-6 (forward passes of other batch shapes)."""
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-6, abs=1e-12), path
    else:
        assert a == b, path


@pytest.fixture(scope="module")
def rand_ids() -> np.ndarray:
    return np.random.default_rng(5).integers(0, 50257, size=PROTO.windows * PROTO.max_L + 7)


def test_completion_order_does_not_change_a_bit(rand_model: Any, rand_ids: np.ndarray) -> None:
    a = collect_on(rand_model, rand_ids, PROTO)
    b = collect_on(rand_model, rand_ids, PROTO, runner=ReversedRunner())
    assert json.dumps(_numbers(a)) == json.dumps(_numbers(b))
    assert a["_timing"]["tasks"] == PROTO.windows + len(PROTO.nulls) * PROTO.null_windows


def test_batch_sizes_agree(rand_model: Any, rand_ids: np.ndarray) -> None:
    """Per-window sums and per-(window, head) random directions: other cuts give the same numbers
    (up to the float rounding of forward passes over other batch shapes)."""
    one = collect_on(rand_model, rand_ids, PROTO)
    for bw in (2, 3):
        _close(_numbers(collect_on(rand_model, rand_ids, replace(PROTO, batch_windows=bw))), _numbers(one))


def test_in_memory_model_only_in_process(rand_model: Any, rand_ids: np.ndarray) -> None:
    class Elsewhere(Runner):
        name = "processes:2"

    with pytest.raises(InvalidArgument, match="no folder"):
        collect_on(rand_model, rand_ids, PROTO, runner=Elsewhere())


# -- run on the embedded model: none vs worker processes ------------------------------------------
@pytest.fixture
def tiny_ready(monkeypatch: pytest.MonkeyPatch, small_text_path: Path) -> Path:
    """The small embedded model trained and cached before the runs compared (so neither trains it)."""
    from attnbounds.empirical import training
    from attnbounds.empirical.text import resolve_text

    monkeypatch.setenv("ATTNBOUNDS_TINY_SPEC", json.dumps(TINY_SPEC))
    training.load_or_train(resolve_text(small_text_path), progress=False)
    return small_text_path


def _results(out: Path) -> dict[str, Any]:
    res = json.loads((out / "results.json").read_text())
    return {k: v for k, v in res.items() if k not in NOT_NUMBERS}


@pytest.mark.slow  # 40-55 s: worker processes each load the model
def test_none_and_worker_processes_write_the_same_results(tiny_ready: Path, tmp_path: Path) -> None:
    proto = Protocol.quick(batch_windows=1)  # 4 tasks
    kw: dict[str, Any] = {"text": tiny_ready, "protocol": proto, "progress": False, "figures": False}
    a = run("tiny", tmp_path / "none", scheduler="none", **kw)
    b = run("tiny", tmp_path / "procs", scheduler="processes:2", **kw)
    assert a["environment"]["scheduler"] == "none" and a["timing"]["scheduler"] == "none"
    assert b["environment"]["scheduler"] == "processes:2" and b["environment"]["workers"] == 2
    assert b["timing"]["tasks"] == 4 + 3 * 2  # the model's windows and the nulls' (two each)
    assert _results(tmp_path / "none") == _results(tmp_path / "procs")
    assert "scheduler" not in json.dumps(_results(tmp_path / "procs"))


@pytest.mark.slow
def test_cli_on_a_dask_scheduler_address(tiny_ready: Path, tmp_path: Path) -> None:
    """``--scheduler tcp://...``: an existing cluster, default batches, figures; same numbers as none."""
    from distributed import LocalCluster

    args = ["--model", "tiny", "--text", str(tiny_ready), "--quick", "--batch-windows", "2", "--no-progress"]
    assert cli.main([*args, "--out", str(tmp_path / "none")]) == 0
    with LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None,
                      scheduler_kwargs={"dashboard_address": ":0"}) as cluster:
        assert cli.main([*args, "--out", str(tmp_path / "tcp"), "--scheduler", cluster.scheduler_address]) == 0
    assert _results(tmp_path / "none") == _results(tmp_path / "tcp")


@pytest.mark.parametrize("how", ["flag", "env"])
def test_cli_bad_scheduler_exit_2(how: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--model", "tiny", "--out", str(tmp_path / "o"), "--quick", "--no-progress"]
    if how == "flag":
        argv += ["--scheduler", "processes:0"]
        match = "want processes:N"
    else:
        monkeypatch.setenv("ATTNBOUNDS_SCHEDULER", "threads:4")
        match = "unknown scheduler 'threads:4'"
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()  # refused before any work
