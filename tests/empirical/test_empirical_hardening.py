"""Bad inputs to ``attnbounds empirical``: exit 2 with a message naming what is wrong, never a traceback, nothing
allocated or written before the input is checked; Ctrl-C leaves ``--out`` as it was."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from _gpt2 import random_gpt2
from attnbounds.empirical import cli, text
from tests._signals import interruptible

REPO = Path(__file__).resolve().parents[2]
SMALL = ["--windows", "2", "--batch-windows", "1", "--L-grid", "8,16,32", "--N-grid", "1,3,6", "--N-fixed", "3",
         "--separability-L", "32", "--separability-N", "1,2,4,16", "--gradient-L", "32", "--null-windows", "1",
         "--T-grid", "0.001,0.01,0.03,0.1,1,3,10", "--no-progress", "--quick"]


class OddState(collections.OrderedDict):  # type: ignore[type-arg]
    """A state dict of a class of its own: unpickling it needs arbitrary code, which weights_only refuses."""


def _exit2(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    code = cli.main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def _folder(tmp_path: Path, config: object | str) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return folder


# -- model folders ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value", [("n_embd", 60_000), ("n_layer", 1000), ("vocab_size", 4_000_000),
                                          ("n_positions", 131_072)])
def test_absurd_config_sizes_are_refused_before_anything_is_built(tmp_path: Path, field: str, value: int,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNBOUNDS_MEMORY_GB", "0.5")
    cfg = {**random_gpt2().config.to_dict(), "n_embd": 768, "n_head": 12}
    cfg[field] = value
    folder = _folder(tmp_path, cfg)
    t0 = time.perf_counter()
    err = _exit2(["--model", str(folder), "--out", str(tmp_path / "o"), *SMALL], capsys, f"{field}={value}",
                 "ATTNBOUNDS_MEMORY_GB")
    assert "GiB" in err and time.perf_counter() - t0 < 60  # refused from the config, nothing allocated
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("config, needle", [("{not json", "is not JSON"), ("[1, 2, 3]", "must be a JSON object"),
                                            ('{"model_type": "gpt2", "n_embd": 1000000000}', "n_embd=1000000000"),
                                            ('{"model_type": "gpt2", "n_layer": "two"}', "n_layer='two'"),
                                            ('{"model_type": "gpt2", "n_embd": 30, "n_head": 4}', "not a multiple")])
def test_bad_config_json(tmp_path: Path, config: str, needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, config)
    _exit2(["--model", str(folder), "--out", str(tmp_path / "o"), *SMALL], capsys, needle, "config")


def test_garbage_safetensors_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _folder(tmp_path, random_gpt2().config.to_dict())
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00not a header" * 3)
    _exit2(["--model", str(folder), "--out", str(tmp_path / "o"), *SMALL], capsys, "model.safetensors",
           "not a readable safetensors file")


def test_pickle_only_checkpoint_is_refused_without_relaying_torch_advice(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    model = random_gpt2()
    folder = _folder(tmp_path, model.config.to_dict())
    torch.save(OddState(model.state_dict()), folder / "pytorch_model.bin")
    err = _exit2(["--model", str(folder), "--out", str(tmp_path / "o"), *SMALL], capsys,
                 "safetensors or torch.load(weights_only=True) only", "pytorch_model.bin")
    assert "weights_only=False" not in err and "weights_only` set to `False" not in err


def test_tokenizer_ids_outside_the_vocabulary(tmp_path: Path, small_text_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "model"
    random_gpt2(vocab_size=300).save_pretrained(folder, safe_serialization=True)
    _exit2(["--model", str(folder), "--out", str(tmp_path / "o"), "--text", str(small_text_path), *SMALL], capsys,
           "outside the model's vocabulary of 300")


# -- texts ------------------------------------------------------------------------------------------------------
def test_text_too_large(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.txt"
    big.write_text("word " * 1000)
    monkeypatch.setattr(text, "TEXT_MAX_BYTES", 1000)
    with pytest.raises(Exception, match="5000 bytes; at most 1000"):
        text.resolve_text(big)


def test_text_that_is_a_folder_or_a_fifo_is_named(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="is a directory"):
        text.resolve_text(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(Exception, match="is a FIFO"):
        text.resolve_text(fifo)  # refused without opening it (which would block)


@pytest.mark.parametrize("data", [b"\x00" * 4096, ("words " * 100).encode() + b"\x01\x02\x03" * 50,
                                  bytes(range(256)) * 4])
def test_binary_text_is_refused(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "binary.txt"
    path.write_bytes(data)
    with pytest.raises(Exception, match="binary|not UTF-8"):
        text.resolve_text(path)


def test_cli_bad_text_exit_2(tmp_path: Path, rand_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "nul.txt").write_bytes(b"\x00" * 100)
    _exit2(["--model", str(rand_model_dir), "--out", str(tmp_path / "o"), "--text", str(tmp_path / "nul.txt"), *SMALL],
           capsys, "NUL bytes")
    _exit2(["--model", str(rand_model_dir), "--out", str(tmp_path / "o"), "--text", str(tmp_path), *SMALL], capsys,
           "is a directory")


@pytest.mark.parametrize("argv, needle", [(["--device", "tpu"], "--device must be"), (["--queries", "most"], "queries must be"),
                                          (["--nulls", "noise"], "nulls must be among"),
                                          (["--window-align", "chapters"], "needs a text with chapter headings"),
                                          (["--null-windows", "0"], "null_windows must be"), (["--windows", "x"], "")])
def test_other_bad_options_exit_2(argv: list[str], needle: str, tmp_path: Path, rand_model_dir: Path,
                                  small_text_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--model", str(rand_model_dir), "--out", str(tmp_path / "o"), "--text", str(small_text_path), *SMALL]
    try:
        code = cli.main(base + argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


# -- Ctrl-C ---------------------------------------------------------------------------------------------------
def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _old_out(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("an older report")
    (out / "fig2ab_distance.png").write_bytes(b"old figure")
    return out, _tree(out)


def test_outputs_are_published_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An interruption while the figures are written leaves the old --out; a finished run replaces it whole."""
    from attnbounds.empirical import figures, report

    out, before = _old_out(tmp_path)
    results = {"headlines": [], "model": {}}

    def interrupted(results: dict, folder: Path) -> list[Path]:
        (folder / "fig2ab_distance.png").write_bytes(b"half of a new run")
        raise KeyboardInterrupt

    monkeypatch.setattr(figures, "all_figures", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.write_all(results, out)
    assert _tree(out) == before and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    monkeypatch.setattr(figures, "all_figures", lambda results, folder: [])
    monkeypatch.setattr(report, "markdown", lambda results, figs: "new report")
    report.write_all(results, out)
    assert sorted(_tree(out)) == ["report.html", "report.md", "results.json"]  # the old figure is gone with its run
    assert (out / "report.md").read_text() == "new report" and sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _interrupt(argv: list[str], env: dict[str, str], ready: Callable[[], bool]) -> tuple[int, str]:
    """Start ``argv``, send SIGINT as soon as ``ready()`` holds (or once the process is done), return its exit code."""
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=interruptible)
    while proc.poll() is None and not ready():
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=600)
    return proc.returncode, err


def _ctrl_c(tmp_path: Path, rand_model_dir: Path, small_text_path: Path, session_cache: Path,
            moments: dict[str, Callable[[Path], bool]]) -> None:
    out, before = _old_out(tmp_path)
    env = {**os.environ, "ATTNBOUNDS_CACHE": str(session_cache), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    argv = [sys.executable, "-m", "attnbounds.theory.running.cli", "empirical", "--model", str(rand_model_dir), "--out",
            str(out), "--text", str(small_text_path), "--nulls", "none", *SMALL]
    for what, moment in moments.items():
        code, err = _interrupt(argv, env, lambda: moment(tmp_path))
        assert code == 130, (what, code, err)
        # the old --out, or (a signal that a loaded machine delivers after the run published its outputs) a whole new
        # one: never a mixture
        assert _tree(out) == before or _whole_new_run(out, before), what
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out"], what  # no temporary folder beside it


def _whole_new_run(out: Path, before: dict[str, bytes]) -> bool:
    """``out`` holds a finished run's outputs and nothing of the run before it."""
    tree = _tree(out)
    return {"report.md", "report.html", "results.json"} <= set(tree) and all(tree.get(k) != v for k, v in before.items())


def _building(tmp_path: Path) -> bool:
    """The run is writing its outputs: a temporary folder beside --out holds a figure."""
    return any(any(d.glob("*.png")) for d in tmp_path.glob(".out.*.tmp"))


def test_ctrl_c_while_outputs_are_written_leaves_out_whole(tmp_path: Path, rand_model_dir: Path,
                                                           small_text_path: Path, session_cache: Path) -> None:
    _ctrl_c(tmp_path, rand_model_dir, small_text_path, session_cache, {"writing figures": _building})


@pytest.mark.slow
def test_ctrl_c_at_several_moments_leaves_out_whole(tmp_path: Path, rand_model_dir: Path, small_text_path: Path,
                                                    session_cache: Path) -> None:
    started = time.perf_counter()
    _ctrl_c(tmp_path, rand_model_dir, small_text_path, session_cache, {
        "start-up": lambda _: time.perf_counter() - started > 0.5,
        "computing": lambda _: time.perf_counter() - started > 6,
        "output folder created": lambda p: any(p.glob(".out.*.tmp")),
        "writing figures": _building,
    })


def test_device_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from attnbounds.empirical.pipeline import resolve_device
    from attnbounds.theory.mathematics.errors import InvalidArgument

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device(None) == resolve_device("auto") == resolve_device("cpu") == "cpu"
    with pytest.raises(InvalidArgument, match="torch sees no GPU"):
        resolve_device("cuda")
    with pytest.raises(InvalidArgument, match="--device must be"):
        resolve_device("cuda:x")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto") == "cuda" and resolve_device("cuda:0") == "cuda:0"
    with pytest.raises(InvalidArgument, match="sees 1 GPU"):
        resolve_device("cuda:3")
