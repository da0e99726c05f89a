"""Benchmarks of empirical/ (not timed tests): the protocol's wall time on the GPT-2 small shape, and extraction overhead.

    python bench/bench_empirical.py                          # the full protocol, every query, on 2 windows of GPT-2 small's shape
    python bench/bench_empirical.py --windows 32 --nulls random-init,shuffled,uniform --scheduler processes:2   # the default run
    python bench/bench_empirical.py --queries last --windows 32 --nulls none   # the previous default protocol
    python bench/bench_empirical.py --overhead               # hooks vs a plain forward pass
    python bench/bench_empirical.py --products               # the kernels' products: numpy (used) against torch
    python bench/bench_empirical.py --sample 16              # the experiments on every 16th query of 3 layers (1 min)
    python bench/bench_empirical.py --sample 16 --baseline OLD/bin/python --rounds 3   # against other code, alternated

The model is GPT-2 small's architecture (12 layers x 12 heads, n_embd 768, 1024 positions, vocabulary 50257)
with random weights, built here from a GPT2Config and saved to a temporary folder (no download). The text is
War and Peace from ../shared when present, else generated words. Each run prints one JSON object: the wall
time, the time per window (every experiment and null included), and the split by experiment. Per-window times
extrapolate to other window counts (the work is per window; ``--windows 32`` measures it). glibc's allocator is
tuned as the command line tunes it (``memory.tune_allocator``).

``--baseline PY``: the sampled workload also runs under another interpreter whose ``attnbounds`` is the code to
compare against (a virtual environment with an older commit installed), round after round alternated with this
code in subprocesses (the machine's load moves both alike); the report holds each side's per-round times, the
ratios, and a comparison of every array of the experiments' states (bit-identical, or the largest relative
difference; columns only one side accumulates are listed apart).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
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
                    "--queries", args.queries, "--nulls", args.nulls]
        for flag, value in (("--null-windows", args.null_windows), ("--batch-windows", args.batch_windows)):
            cli_args += [flag, str(value)] if value else []  # 0: the protocol's default
        proto = protocol_from_args(build_parser().parse_args(cli_args))
        t0 = time.perf_counter()
        res = run(str(folder), Path(tmp) / "out", text=text_file(Path(tmp)), protocol=proto, progress=args.progress,
                  figures=False, scheduler=args.scheduler)
        wall = time.perf_counter() - t0
    timing = res["timing"]
    passes = proto.windows + len(proto.nulls) * min(proto.null_windows, proto.windows)  # the model's and each null's
    return {"model": "GPT-2 small shape (12 x 12 heads, n_embd 768), random weights", "queries": args.queries,
            "windows": args.windows, "nulls": list(proto.nulls), "null_windows": proto.null_windows,
            "batch_windows": proto.batch_windows, "scheduler": timing["scheduler"],
            "threads": res["environment"]["threads"], "wall_s": wall,
            "per_window_pass_s": timing["stream_s"] / passes, "window_passes": passes,
            "forward_and_extraction_s": timing["forward_and_extraction_s"],
            "experiments_s": timing["experiments_s"], "stream_s": timing["stream_s"],
            "model_load_s": timing["model_load_s"],
            "default_run_estimate_s": timing["stream_s"] / passes * (32 + 3 * 4),
            "default_run": "32 windows of the model and 4 of each of the 3 nulls"}


def sampled(every: int, layers: tuple[int, ...] = (0, 5, 11), states_out: str | None = None,
            windows: int = 0) -> dict[str, Any]:
    """The experiments (the full protocol, every query) on every ``every``-th query position of some layers of
    ``windows`` windows in one batch (default: the protocol's ``batch_windows``, as the command line batches them:
    the kernels' arrays then have the run's size), in this process. The per-window time is extrapolated from
    the per-record structures (pairwise distances, timed apart) and two runs: one row per layer (the rest of the
    per-record work: the null's vectors, bounds, sampled checks) and every ``every``-th row (the per-row work,
    scaled by ``every``), after a warm-up pass (a first pass pays for faulting in the per-record arrays' memory,
    which would be taken for per-record work and subtracted from the per-row work ``every`` times over).
    ``states_out``: a file to pickle the experiments' states of the second run to."""
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
    proto = Protocol.full()
    B = windows or proto.batch_windows
    ids = torch.randint(0, model.config.vocab_size, (B, model.config.n_positions), generator=torch.Generator().manual_seed(1))
    records: list[Any] = []
    t0 = time.perf_counter()
    with Extractor(model, lambda rec: records.append(rec) if rec.layer in layers else None) as ex:
        ex.run(ids)
    forward = (time.perf_counter() - t0) / B

    def per_record(rr: RecordRows) -> dict[str, float]:
        """The per-record structures (all pairwise distances of a record's tokens), made and timed apart: made
        inside the timed rows, their time (1 to 3 s, varying with page faults) would be scaled up with the rows'."""
        made = {"theorem1": lambda: rr.record(proto.distance_tensor, proto.distance_sphere, proto.M).farthest_before,
                "separability": lambda: rr.record(proto.separability_tensor, proto.separability_sphere,
                                                  proto.M).closest_pairs}
        out = {}
        for name, make in made.items():
            t = time.perf_counter()
            with kernels.one_thread():
                make()
            out[name] = time.perf_counter() - t
        return out

    def seconds(stride: int) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
        """Per experiment: the seconds of its per-record structures and of its rows, and its state."""
        exps = consumers(proto, n_layer, n_head, B)
        out = {e.name: 0.0 for e in exps}
        structures: dict[str, float] = {}
        for rec in records:
            rr = RecordRows(rec)
            for name, s in per_record(rr).items():
                structures[name] = structures.get(name, 0.0) + s
            for e in exps:
                rows = {k: v for k, v in plan(e.spec, e.Ls, rr.T, True).items() if k[0] % stride == stride - 1}
                t = time.perf_counter()
                with kernels.one_thread():
                    e.consume(rr, rows)
                out[e.name] += time.perf_counter() - t
        return structures, out, {e.name: e.state() for e in exps}

    T = int(ids.shape[1])
    seconds(T)  # a warm-up: the first pass also pays for first-touching the per-record arrays' memory
    (made_fixed, fixed, _), (made_rows, rows, states) = seconds(T), seconds(every)
    structures = {k: (made_fixed[k] + made_rows[k]) / 2 for k in made_fixed}  # made in both timed passes
    if states_out:
        with open(states_out, "wb") as f:
            pickle.dump(states, f)
    scale = n_layer / len(records) / B
    per_window = {k: scale * (structures.get(k, 0.0) + fixed[k] + every * max(rows[k] - fixed[k], 0.0)) for k in rows}
    return {"model": "GPT-2 small shape (12 x 12 heads, n_embd 768), random weights", "layers": list(layers),
            "every": every, "window": T, "windows_per_batch": B, "per_record_structures_s": structures,
            "one_row_per_layer_s": fixed, "sampled_rows_s": rows, "per_window_extrapolated_s": per_window, "forward_s": forward,
            "per_window_total_extrapolated_s": sum(per_window.values()) + forward,
            "threads": torch.get_num_threads(), "numpy": np.__version__}


def against_baseline(every: int, baseline: str, rounds: int, windows: int = 0) -> dict[str, Any]:
    """:func:`sampled` under ``baseline`` (another interpreter) and this code, alternated in subprocesses for
    ``rounds`` rounds; per-window times of each side, their ratios, and the states compared."""
    sides = {"baseline": baseline, "current": sys.executable}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in sides}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for side, exe in sides.items():
                out = subprocess.run([exe, __file__, "--sample", str(every), "--sample-windows", str(windows),
                                      "--states-out", f"{tmp}/{side}.pkl"],
                                     check=True, capture_output=True, text=True).stdout
                runs[side].append(json.loads(out))
        states = {}
        for side in sides:
            with open(f"{tmp}/{side}.pkl", "rb") as f:
                states[side] = pickle.load(f)
    per_window = {side: [r["per_window_extrapolated_s"] for r in rs] for side, rs in runs.items()}
    names = list(per_window["current"][0])
    total = {side: [sum(w.values()) for w in ws] for side, ws in per_window.items()}
    ratio = {name: [c[name] / b[name] for b, c in zip(per_window["baseline"], per_window["current"])] for name in names}
    return {"every": every, "rounds": rounds, "baseline": baseline, "per_window_experiments_s": per_window,
            "experiments_total_s": total, "ratio_current_to_baseline": ratio,
            "ratio_total": [c / b for b, c in zip(total["baseline"], total["current"])],
            "states": compare_states(states["baseline"], states["current"])}


def compare_states(old: Any, new: Any) -> dict[str, Any]:
    """Every array of two experiments' states: the paths that differ, with the largest relative difference. In
    per-head sums (``{"sum": ..., "cnt": ...}``) an entry only one side counted (a column it no longer
    accumulates, say) is listed apart and left out of the differences."""
    import numpy as np

    differ: dict[str, float] = {}
    one_sided: dict[str, int] = {}

    def arrays(a: Any, b: Any, path: str, lone: Any = None) -> None:
        x, y = np.asarray(a), np.asarray(b)
        if x.shape != y.shape or x.dtype.kind not in "fiub":
            if not (x.shape == y.shape and np.array_equal(x, y)):
                differ[path] = float("inf")
            return
        same = (x == y) | (np.isnan(x) & np.isnan(y)) if x.dtype.kind == "f" else x == y
        if lone is not None and lone.any():
            one_sided[path] = int(lone.sum())
            same = same | lone
        if not same.all():
            with np.errstate(all="ignore"):
                rel = np.abs(x - y) / np.maximum(np.abs(x), np.abs(y))
            differ[path] = float(np.nanmax(np.where(same, 0.0, rel)))

    def walk(a: Any, b: Any, path: str) -> None:
        if not (isinstance(a, dict) and isinstance(b, dict)):
            arrays(a, b, path)
            return
        if set(a) | set(b) != set(a) & set(b):
            differ[f"{path}/<keys>"] = float("inf")
        if set(a) == {"sum", "cnt"}:
            for key in set(a["sum"]) & set(b["sum"]):
                lone = (np.asarray(a["cnt"][key]) == 0) != (np.asarray(b["cnt"][key]) == 0)
                for part in ("sum", "cnt"):
                    arrays(a[part][key], b[part][key], f"{path}/{part}/{key}", lone)
            return
        for k in set(a) & set(b):
            walk(a[k], b[k], f"{path}/{k}")

    walk(old, new, "")
    return {"bit_identical": not differ and not one_sided, "identical_where_both_counted": not differ,
            "differ": dict(sorted(differ.items())),
            "max_relative_difference": max(differ.values(), default=0.0),
            "entries_only_one_side_counted": dict(sorted(one_sided.items()))}


def products(repeats: int = 7) -> dict[str, Any]:
    """The kernels' batched products (a batch of 4 windows: 48 rows of d = 64) by numpy's ``np.matmul`` (OpenBLAS,
    what the kernels use) and by ``torch.bmm`` (torch's BLAS, MKL in the CPU wheel), both on one thread, alternated;
    median wall times, the ratio torch / numpy and the largest difference between their results."""
    import numpy as np
    import torch

    from attnbounds.empirical import kernels

    rng = np.random.default_rng(0)
    R, d, T = 48, 64, 1024
    x = rng.standard_normal((R, T, d))
    xT = np.ascontiguousarray(x.transpose(0, 2, 1))
    shapes = {f"context vectors ({n} N) x tokens ({ell})": (rng.standard_normal((R, n, d)), xT[:, :, :ell])
              for n in (9, 32) for ell in (256, 512, 1024)}
    shapes["Gram matrix of a record (1024 tokens)"] = (x, xT)
    ways: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
        "numpy": np.matmul, "torch": lambda a, b: torch.bmm(torch.from_numpy(a), torch.from_numpy(b)).numpy()}
    out: dict[str, Any] = {}
    with kernels.one_thread():
        for name, (a, b) in shapes.items():
            times: dict[str, list[float]] = {k: [] for k in ways}
            for _ in range(repeats):
                for k, fn in ways.items():
                    t0 = time.perf_counter()
                    fn(a, b)
                    times[k].append(time.perf_counter() - t0)
            med = {k: statistics.median(v) for k, v in times.items()}
            out[name] = {"median_s": med, "torch_over_numpy": med["torch"] / med["numpy"],
                         "largest_difference": float(np.abs(ways["numpy"](a, b) - ways["torch"](a, b)).max())}
    blas = "MKL" if "BLAS_INFO=mkl" in torch.__config__.show() else "other"
    return {"rows": R, "d": d, "repeats": repeats, "threads": 1, "torch_blas": blas, "products": out}


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
    p.add_argument("--batch-windows", type=int, default=0, help="windows per task (default: the protocol's)")
    p.add_argument("--null-windows", type=int, default=0, help="windows of each null (default: the protocol's)")
    p.add_argument("--progress", action="store_true")
    p.add_argument("--overhead", action="store_true", help="only the extraction overhead")
    p.add_argument("--products", action="store_true", help="only the kernels' batched products: numpy against torch")
    p.add_argument("--sample", type=int, default=0, metavar="K",
                   help="only the experiments, on every K-th query of 3 layers of one batch of windows (extrapolated)")
    p.add_argument("--sample-windows", type=int, default=0, metavar="B",
                   help="with --sample: windows in the batch (default: the protocol's batch_windows)")
    p.add_argument("--states-out", default=None, help="with --sample: pickle the experiments' states to this file")
    p.add_argument("--baseline", default=None, metavar="PY",
                   help="with --sample: also under this interpreter (the code to compare against), alternated")
    p.add_argument("--rounds", type=int, default=3, help="with --baseline: rounds of baseline then current")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from attnbounds.theory.mathematics.memory import tune_allocator

    tune_allocator()  # as the command line does
    if args.overhead:
        report = overhead(4, 1024, 5)
    elif args.products:
        report = products()
    elif args.sample and args.baseline:
        report = against_baseline(args.sample, args.baseline, args.rounds, args.sample_windows)
    elif args.sample:
        report = sampled(args.sample, states_out=args.states_out, windows=args.sample_windows)
    else:
        report = protocol_time(args)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
