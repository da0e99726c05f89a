"""``run``: text -> model -> windows -> one streamed pass per batch -> the four experiments -> outputs."""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from attnbounds.empirical.config import Protocol
from attnbounds.empirical.rows import QuerySpec
from attnbounds.theory.errors import InvalidArgument


def _experiments(proto: Protocol, n_heads: int, H: int, spec: QuerySpec) -> list[Any]:
    from attnbounds.empirical.exp_critical import Critical
    from attnbounds.empirical.exp_distance import Distance
    from attnbounds.empirical.exp_gradients import Gradients
    from attnbounds.empirical.exp_separability import Separability

    make = {"distance": lambda: Distance(proto, n_heads, spec), "critical": lambda: Critical(proto, n_heads, spec),
            "separability": lambda: Separability(proto, n_heads, spec, H),
            "gradients": lambda: Gradients(proto, n_heads, spec)}
    return [make[name]() for name in proto.experiments]


def collect(loaded: Any, ids: np.ndarray, proto: Protocol, *, progress: bool = True) -> dict[str, Any]:
    """Run the experiments of ``proto`` on ``loaded`` over the windows of ``ids``; raw results per experiment."""
    from tqdm.auto import tqdm

    from attnbounds.empirical.extract import Extractor
    from attnbounds.empirical.windows import windows

    cfg = loaded.model.config
    if proto.max_L > cfg.n_positions:
        raise InvalidArgument(f"the protocol needs windows of {proto.max_L} tokens but the model has "
                              f"n_positions={cfg.n_positions}; lower L_grid/separability_L/gradient_L")
    spec = QuerySpec.parse(proto.queries, proto.masked_keys)
    wins = windows(ids, proto.max_L, proto.windows, proto.window_start)
    exps = _experiments(proto, cfg.n_layer * cfg.n_head, cfg.n_head, spec)
    seconds = {e.name: 0.0 for e in exps}

    def consumer(rec: Any) -> None:
        for e in exps:
            t0 = time.perf_counter()
            e.consume(rec)
            seconds[e.name] += time.perf_counter() - t0

    t_start = time.perf_counter()
    batches = range(0, len(wins), proto.batch_windows)
    with Extractor(loaded.model, consumer) as ex:
        for b in tqdm(batches, desc=f"{proto.name} protocol: windows", unit="batch", disable=not progress):
            ex.run(wins[b: b + proto.batch_windows])
    t_stream = time.perf_counter() - t_start
    out: dict[str, Any] = {}
    for e in exps:
        t0 = time.perf_counter()
        out[e.name] = e.finish()
        seconds[e.name] += time.perf_counter() - t0
    out["_timing"] = {"experiments_s": seconds, "stream_s": t_stream,
                      "forward_and_extraction_s": t_stream - sum(seconds.values())}
    out["_windows"] = {"count": int(len(wins)), "length": int(wins.shape[1]), "start": proto.window_start,
                       "first_tokens": wins[:, :8].tolist()}
    return out


def run(model: str = "tiny", out: str | Path = "attnbounds-empirical", *, text: str | Path | None = None,
        quick: bool = False, protocol: Protocol | None = None, progress: bool = True,
        figures: bool = True) -> dict[str, Any]:
    """The paper's four experiments on ``model`` (section 3, Figs. 2-4); writes PNGs, report.md/.html, results.json.

    Returns the results dictionary written to ``out/results.json``.
    """
    import torch

    from attnbounds.empirical import headlines, report
    from attnbounds.empirical.modelload import load_model
    from attnbounds.empirical.text import resolve_text
    from attnbounds.empirical.windows import token_ids

    t0 = time.perf_counter()
    proto = protocol or (Protocol.quick() if quick else Protocol.full())
    proto.validated()
    out_dir = Path(out)
    if out_dir.exists() and not out_dir.is_dir():
        raise InvalidArgument(f"--out {str(out_dir)!r} is a file; give a folder")
    src = resolve_text(text)
    t_model = time.perf_counter()
    loaded = load_model(model, text=src, progress=progress)
    t_model = time.perf_counter() - t_model
    ids = token_ids(src, loaded.tokenizer)
    raw = collect(loaded, ids, proto, progress=progress)
    timing = raw.pop("_timing")
    timing["model_load_s"] = t_model
    results: dict[str, Any] = {
        "paper": "arXiv:2508.17821, Limitations of Normalization in Attention Mechanism (section 3, Figs. 2-4)",
        "model": loaded.describe(),
        "text": {"path": src.path, "origin": src.origin, "sha256": src.sha256, "characters": len(src.text),
                 "tokens": int(len(ids))},
        "windows": raw.pop("_windows"),
        "protocol": proto.to_dict(),
        "experiments": raw,
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": _version("transformers"), "numpy": np.__version__,
                        "scipy": _version("scipy"), "threads": torch.get_num_threads(),
                        "machine": platform.machine(), "platform": platform.platform()},
    }
    results["headlines"] = headlines.table(results)
    timing["total_before_outputs_s"] = time.perf_counter() - t0
    results["timing"] = timing
    report.write_all(results, out_dir, figures=figures)
    return results


def _version(module: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(module)
    except PackageNotFoundError:
        return None
