"""Benchmarks of empirical/ (not timed tests): the protocol's wall time on the GPT-2 small shape, and extraction overhead.

    python bench/bench_empirical.py                          # the full protocol, every query, on 2 windows of GPT-2 small's shape
    python bench/bench_empirical.py --windows 32 --nulls random-init,shuffled,uniform   # the whole default run
    python bench/bench_empirical.py --queries last --windows 32 --nulls none   # the previous default protocol
    python bench/bench_empirical.py --overhead               # hooks vs a plain forward pass
    python bench/bench_empirical.py --sample 16              # the experiments on every 16th query of 3 layers (1 min)

The model is GPT-2 small's architecture (12 layers x 12 heads, n_embd 768, 1024 positions, vocabulary 50257)
with random weights, built here from a GPT2Config and saved to a temporary folder (no download). The text is
War and Peace from ../shared when present, else generated words. Each run prints one JSON object: the wall
time, the time per window (every experiment and null included), and the split by experiment. Per-window times
extrapolate to other window counts (the work is per window; ``--windows 32`` measures it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SHARED_TEXT = Path(__file__).resolve().parents[2] / "shared" / "data" / "war-and-peace.txt"


def gpt2_small_random(folder: Path, seed: int = 0) -> Path:
    """GPT-2 small's architecture with seeded random weights, saved as safetensors in ``folder``."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from attnbounds.empirical.modelload import quiet_transformers

    quiet_transformers()
    torch.manual_seed(seed)
    GPT2LMHeadModel(GPT2Config(attn_implementation="eager")).save_pretrained(folder, safe_serialization=True)
    return folder


def text_file(folder: Path) -> Path:
    if SHARED_TEXT.is_file():
        return SHARED_TEXT
    import numpy as np

    words = np.random.default_rng(0).choice(["the", "prince", "said", "war", "and", "peace", "Natasha", "Moscow"], 400_000)
    path = folder / "text.txt"
    path.write_text(" ".join(words))
    return path


def protocol_time(args: argparse.Namespace) -> dict[str, Any]:
    from attnbounds.empirical.cli import build_parser, protocol_from_args
    from attnbounds.empirical.pipeline import run

    with tempfile.TemporaryDirectory() as tmp:
        folder = gpt2_small_random(Path(tmp) / "gpt2-random")
        cli_args = ["--model", str(folder), "--out", str(Path(tmp) / "out"), "--windows", str(args.windows),
                    "--queries", args.queries, "--nulls", args.nulls, "--null-windows", str(args.windows),
                    "--batch-windows", str(args.batch_windows)]
        proto = protocol_from_args(build_parser().parse_args(cli_args))
        t0 = time.perf_counter()
        res = run(str(folder), Path(tmp) / "out", text=text_file(Path(tmp)), protocol=proto, progress=args.progress,
                  figures=False, scheduler=args.scheduler)
        wall = time.perf_counter() - t0
    timing = res["timing"]
    passes = args.windows * (1 + len(proto.nulls))  # window passes: the model's and each null's
    return {"model": "GPT-2 small shape (12 x 12 heads, n_embd 768), random weights", "queries": args.queries,
            "windows": args.windows, "nulls": list(proto.nulls), "scheduler": timing["scheduler"],
            "threads": res["environment"]["threads"], "wall_s": wall,
            "per_window_pass_s": timing["stream_s"] / passes, "window_passes": passes,
            "forward_and_extraction_s": timing["forward_and_extraction_s"],
            "experiments_s": timing["experiments_s"], "stream_s": timing["stream_s"],
            "model_load_s": timing["model_load_s"],
            "default_run_estimate_s": timing["stream_s"] / passes * (32 + 3 * 4),
            "default_run": "32 windows of the model and 4 of each of the 3 nulls"}


def sampled(every: int, layers: tuple[int, ...] = (0, 5, 11)) -> dict[str, Any]:
    """The experiments (the full protocol, every query) on every ``every``-th query position of some layers of one
    window, in this process; the per-window time is extrapolated from two runs: one row per layer (the per-record
    work: pairwise distances, sampled checks) and every ``every``-th row (the per-row work, scaled by ``every``)."""
    import numpy as np
    import torch

    from attnbounds.empirical import kernels
    from attnbounds.empirical.config import Protocol
    from attnbounds.empirical.extract import Extractor
    from attnbounds.empirical.rows import RecordRows, plan
    from attnbounds.empirical.tasks import consumers

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        from attnbounds.empirical.modelload import from_dir

        model = from_dir(str(gpt2_small_random(Path(tmp) / "gpt2-random")))
    n_layer, n_head = model.config.n_layer, model.config.n_head
    ids = torch.randint(0, model.config.vocab_size, (1, model.config.n_positions), generator=torch.Generator().manual_seed(1))
    records: list[Any] = []
    t0 = time.perf_counter()
    with Extractor(model, lambda rec: records.append(rec) if rec.layer in layers else None) as ex:
        ex.run(ids)
    forward = time.perf_counter() - t0
    proto = Protocol.full()

    def seconds(stride: int) -> dict[str, float]:
        exps = consumers(proto, n_layer, n_head)
        out = {e.name: 0.0 for e in exps}
        for rec in records:
            rr = RecordRows(rec)
            for e in exps:
                rows = {k: v for k, v in plan(e.spec, e.Ls, rr.T, True).items() if k[0] % stride == stride - 1}
                t = time.perf_counter()
                with kernels.one_thread():
                    e.consume(rr, rows)
                out[e.name] += time.perf_counter() - t
        return out

    T = int(ids.shape[1])
    fixed, rows = seconds(T), seconds(every)
    scale = n_layer / len(records)
    per_window = {k: scale * (fixed[k] + every * max(rows[k] - fixed[k], 0.0)) for k in rows}
    return {"model": "GPT-2 small shape (12 x 12 heads, n_embd 768), random weights", "layers": list(layers),
            "every": every, "window": T, "one_row_per_layer_s": fixed, "sampled_rows_s": rows,
            "per_window_extrapolated_s": per_window, "forward_s": forward,
            "per_window_total_extrapolated_s": sum(per_window.values()) + forward,
            "threads": torch.get_num_threads(), "numpy": np.__version__}


def overhead(batch: int, length: int, repeats: int) -> dict[str, Any]:
    """Median wall times (s) of plain and extracting forwards on the GPT-2 small shape, interleaved, and their ratio."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from attnbounds.empirical.extract import Extractor, plain_forward

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(attn_implementation="eager")).eval()
    ids = torch.randint(0, model.config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(0))

    def keep_nothing(rec: Any) -> None:
        return None

    def run_hooks() -> None:
        with Extractor(model, keep_nothing) as ex:
            ex.run(ids)

    variants: dict[str, Callable[[], None]] = {"plain": lambda: plain_forward(model, ids), "hooks": run_hooks}
    for fn in variants.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for k, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"batch": batch, "length": length, "repeats": repeats, "median_s": med,
            "ratio": med["hooks"] / med["plain"], "threads": torch.get_num_threads(), "goal": 1.20}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--windows", type=int, default=2)
    p.add_argument("--queries", default="all")
    p.add_argument("--nulls", default="none", help="comma-separated nulls, or none")
    p.add_argument("--scheduler", default=None, help="none (default) or processes:N")
    p.add_argument("--batch-windows", type=int, default=1, help="windows per task (1: the windows spread over workers)")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--overhead", action="store_true", help="only the extraction overhead")
    p.add_argument("--sample", type=int, default=0, metavar="K",
                   help="only the experiments, on every K-th query of 3 layers of one window (extrapolated)")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    report = overhead(4, 1024, 5) if args.overhead else sampled(args.sample) if args.sample else protocol_time(args)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
