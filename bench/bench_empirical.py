"""Benchmarks of empirical/ (not timed tests): extraction overhead and protocol wall time.

    python bench/bench_empirical.py                      # overhead on the tiny architecture (random weights)
    python bench/bench_empirical.py --model gpt2         # ... on a real checkpoint (cache or folder)
    python bench/bench_empirical.py --protocol quick     # also time `attnbounds empirical --model tiny --quick`

Overhead = (forward with per-layer extraction) / (the same forward without hooks), both eager attention,
transformer body only, measured interleaved in the same run; the goal is <= 1.20. Two extraction
variants: ``hooks`` hands every layer's probabilities, q, k, v to a consumer that keeps nothing
(the extraction itself); ``hooks+rows`` also materialises in float64 what the default protocol reads
(the last query's logits and probabilities, the values); ``hooks+full_logits`` the full L x L float64
logits of every head (what ``LayerRecord.logits()`` costs). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _model(name: str) -> tuple[Any, str]:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from attnbounds.empirical.modelload import load_model, quiet_transformers

    quiet_transformers()
    if name == "random-tiny":
        from attnbounds.empirical.tiny import DEFAULT_SPEC as s

        torch.manual_seed(0)
        cfg = GPT2Config(vocab_size=s.vocab_size, n_positions=s.n_positions, n_embd=s.n_embd, n_layer=s.n_layer,
                         n_head=s.n_head, attn_implementation="eager")
        return GPT2LMHeadModel(cfg).eval(), "tiny architecture, random weights"
    if name == "tiny":
        from attnbounds.empirical.text import resolve_text

        return load_model("tiny", text=resolve_text()).model, "tiny (trained, cached)"
    return load_model(name).model, name


def _timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def overhead(model: Any, batch: int, length: int, repeats: int) -> dict[str, Any]:
    """Median wall times (s) of plain and extracting forwards, interleaved, and their ratios."""
    import torch

    from attnbounds.empirical.extract import Extractor, plain_forward

    ids = torch.randint(0, model.config.vocab_size, (batch, length), generator=torch.Generator().manual_seed(0))

    def keep_nothing(rec: Any) -> None:
        return None

    def last_rows(rec: Any) -> None:
        rec.logit_rows([length - 1], length, scaled=False).numpy()
        rec.probs[:, :, -1, :].double().numpy()
        rec.v.double().numpy()

    def full_logits(rec: Any) -> None:
        rec.logits(scaled=False)

    variants: dict[str, Callable[[], None]] = {"plain": lambda: plain_forward(model, ids)}
    for name, consumer in (("hooks", keep_nothing), ("hooks+rows", last_rows), ("hooks+full_logits", full_logits)):
        def run(consumer: Callable[[Any], None] = consumer) -> None:
            with Extractor(model, consumer) as ex:
                ex.run(ids)

        variants[name] = run
    for fn in variants.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(repeats):
        for k, fn in variants.items():
            times[k].append(_timed(fn))
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"batch": batch, "length": length, "repeats": repeats, "median_s": med,
            "ratio": {k: med[k] / med["plain"] for k in med if k != "plain"},
            "threads": torch.get_num_threads(), "goal": 1.20}


def protocol_time(name: str, model: str) -> dict[str, Any]:
    from attnbounds.empirical import run

    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        res = run(model, out, quick=(name == "quick"), progress=False)
        return {"protocol": name, "model": model, "wall_s": time.perf_counter() - t0, "timing": res["timing"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="random-tiny", help="random-tiny (default), tiny, gpt2, or a folder")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--protocol", choices=("none", "quick", "full"), default="none")
    args = p.parse_args(argv)
    model, label = _model(args.model)
    report: dict[str, Any] = {"model": label, "overhead": overhead(model, args.batch, args.length, args.repeats)}
    if args.protocol != "none":
        report["protocol"] = protocol_time(args.protocol, "tiny")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
