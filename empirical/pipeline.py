"""``run``: text -> model -> held-out region -> windows -> batches of windows of the model and its nulls as tasks
(any scheduler) -> partial states merged in batch order -> the four experiments -> outputs."""

from __future__ import annotations

import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from attnbounds.empirical import nulls, tasks
from attnbounds.empirical.config import Protocol
from attnbounds.empirical.rows import QuerySpec
from attnbounds.empirical.windows import Region, Tokens, cut, segments
from attnbounds.theory.mathematics.errors import InvalidArgument


def resolve_device(device: str | None) -> str:
    """``auto`` (default): ``cuda`` when torch sees a GPU, else ``cpu``; ``cpu``; ``cuda`` or ``cuda:K`` (checked)."""
    import torch

    name = (device or "auto").strip()
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        return name
    if name == "cuda" or (name.startswith("cuda:") and name[5:].isdigit()):
        if not torch.cuda.is_available():
            raise InvalidArgument(f"--device {name}: torch sees no GPU on this machine; use --device cpu (or auto)")
        if name != "cuda" and int(name[5:]) >= torch.cuda.device_count():
            raise InvalidArgument(f"--device {name}: torch sees {torch.cuda.device_count()} GPU(s)")
        return name
    raise InvalidArgument(f"--device must be auto, cpu, cuda or cuda:K, got {name!r}")


def region_for(loaded: Any, tokens: Tokens, text_sha256: str) -> Region:
    """Where windows come from: the held-out tokens of a model trained here on this text, else the whole text."""
    info = loaded.info.get("training") or {}
    if info.get("text_sha256") == text_sha256 and isinstance(info.get("train_tokens"), int):
        split = int(info["train_tokens"])
        return Region(split, len(tokens), f"held out: tokens {split}..{len(tokens)} (the model was trained on "
                                          f"tokens 0..{split} of this text)")
    if info:
        return Region(0, len(tokens), "the whole text (the model was trained here on another text)")
    return Region(0, len(tokens), "the whole text (the model was not trained here; its own training data may "
                                  "contain this text)")


def window_sets(tokens: Tokens, region: Region, proto: Protocol) -> tuple[dict[int, np.ndarray], dict[str, Any]]:
    """Windows per length (``prefixes``: one set of the longest length; ``new``: one set per length) and what they are."""
    parts, align = segments(tokens, region, proto.window_align, proto.window_start)
    lengths = (proto.max_L,) if proto.window_lengths == "prefixes" else proto.lengths
    sets, starts = {}, {}
    for L in lengths:
        sets[L], first = cut(tokens, parts, L, proto.windows)
        starts[L] = first.tolist()
    info = {"count": proto.windows, "lengths": list(lengths), "alignment": align, "segments": len(parts),
            "layout": ("prefixes: each shorter length reads the first L tokens of the same windows"
                       if proto.window_lengths == "prefixes" else "new windows for every length"),
            "region": {"start": region.start, "end": region.end, "split": region.split},
            "starts": {str(L): s for L, s in starts.items()},
            "first_tokens": {str(L): w[:, :8].tolist() for L, w in sets.items()}}
    return sets, info


def collect(loaded: Any, sets: dict[int, np.ndarray], proto: Protocol, *, progress: bool = True,
            runner: Any = None, device: str = "cpu") -> dict[str, Any]:
    """Run the experiments of ``proto`` on ``loaded`` and its nulls over the windows ``sets`` (length -> (W, L) ids).

    Every variant's windows (all of them for the model, the first ``null_windows`` for a null) are cut into
    batches of ``proto.batch_windows``; each batch is a task (:func:`attnbounds.empirical.tasks.batch_task`)
    mapped by ``runner`` (a :mod:`attnbounds.theory.deciding.parallel` runner; default: in this process), and the partial
    states are merged in batch order. Returns ``{variant: raw results per experiment}`` and ``_timing``.
    """
    from attnbounds.theory.deciding.parallel import Runner

    runner = runner if runner is not None else Runner()
    cfg = loaded.model.config
    if proto.max_L > cfg.n_positions:
        raise InvalidArgument(f"the protocol needs windows of {proto.max_L} tokens but the model has "
                              f"n_positions={cfg.n_positions}; lower L_grid/separability_L/gradient_L")
    top = max(int(w.max()) for w in sets.values())
    if top >= cfg.vocab_size:
        raise InvalidArgument(f"the tokenizer ({loaded.tokenizer.name}) gives id {top}, outside the model's "
                              f"vocabulary of {cfg.vocab_size}: the model folder does not match its tokenizer")
    QuerySpec.parse(proto.queries, proto.masked_keys)
    key = tasks.model_key(loaded)
    if loaded.path is None and runner.name != "none":
        raise InvalidArgument(f"model {loaded.name!r} has no folder the workers could load it from; "
                              "use scheduler 'none'")
    variants = [nulls.MODEL, *proto.nulls]
    jobs = {v: tasks.Job(model_key=key, folder=loaded.path, proto=proto, n_layer=cfg.n_layer, n_head=cfg.n_head,
                         variant=v, device=device) for v in variants}
    items: list[tuple[tasks.Job, tuple[int, int, np.ndarray]]] = []
    for v in variants:
        count = proto.windows if v == nulls.MODEL else min(proto.null_windows, proto.windows)
        for wins in sets.values():
            wins = wins[:count]
            if nulls.VARIANTS[v].tokens == "shuffled":
                wins = nulls.shuffle_windows(wins, proto.seed)
            for b, s in enumerate(range(0, count, proto.batch_windows)):
                items.append((jobs[v], (b, s, wins[s: s + proto.batch_windows])))
    if runner.name == "none":  # in-process tasks use the driver's models (workers load their own)
        for job in {j.key: j for j in jobs.values()}.values():
            tasks.register(job, tasks.build(job, loaded.model))
    t_start = time.perf_counter()
    try:
        parts = runner.map(tasks.run_item, items, label=f"{proto.name} protocol: batches of windows (model and nulls)",
                           progress=progress)
    finally:
        for job in jobs.values():
            tasks.unregister(job)
    t_tasks = time.perf_counter() - t_start
    t_merge = time.perf_counter()
    out: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for v in variants:
        exps = tasks.consumers(proto, cfg.n_layer, cfg.n_head)
        for (job, _), part in zip(items, parts):  # in batch order, whatever order the tasks finished in
            if job.variant != v:
                continue
            for e in exps:
                e.absorb(part["states"][e.name])
                seconds[f"{v}:{e.name}"] = seconds.get(f"{v}:{e.name}", 0.0) + part["experiments_s"][e.name]
        out[v] = {}
        for e in exps:
            out[v].update(e.finish())
    task_s = sum(p["task_s"] for p in parts)
    out["_timing"] = {"experiments_s": seconds, "stream_s": t_tasks, "tasks_s": task_s,
                      "forward_and_extraction_s": task_s - sum(seconds.values()),
                      "worker_model_load_s": sum(p["model_s"] for p in parts),
                      "merge_and_finish_s": time.perf_counter() - t_merge, "tasks": len(items)}
    return out


def run(model: str = "tiny", out: str | Path = "attnbounds-empirical", *, text: str | Path | None = None,
        quick: bool = False, protocol: Protocol | None = None, progress: bool = True,
        figures: bool = True, scheduler: str | None = None, device: str | None = None) -> dict[str, Any]:
    """The paper's four experiments on ``model`` (section 3, Figs. 2-4); writes PNGs, report.md/.html, results.json.

    ``scheduler`` (default ``$ATTNBOUNDS_SCHEDULER``, else ``none``): where the batches of windows run,
    ``none`` (this process), ``processes:N`` (N local worker processes) or ``tcp://HOST:PORT`` (a Dask
    scheduler whose workers can read the model folder); see :mod:`attnbounds.theory.deciding.parallel`. The numbers
    do not depend on it; it is recorded under ``environment`` and ``timing``. ``device`` (default ``auto``):
    where the forward passes run (``cuda`` when torch sees a GPU). ``out`` is written whole at the end (built
    next to it, then moved into place): an interrupted run leaves it as it was.
    Returns the results dictionary written to ``out/results.json``.
    """
    import torch

    from attnbounds.empirical import headlines, report
    from attnbounds.empirical.models import load_model
    from attnbounds.empirical.text import resolve_text
    from attnbounds.empirical.windows import tokenize
    from attnbounds.theory.deciding import parallel

    t0 = time.perf_counter()
    parallel.parse(scheduler)  # a bad scheduler fails before any work
    dev = resolve_device(device)
    proto = protocol or (Protocol.quick() if quick else Protocol.full())
    proto.validated()
    out_dir = report.check_out(out)
    src = resolve_text(text)
    t_model = time.perf_counter()
    loaded = load_model(model, text=src, progress=progress)
    t_model = time.perf_counter() - t_model
    if proto.max_L > loaded.model.config.n_positions:
        raise InvalidArgument(f"the protocol needs windows of {proto.max_L} tokens but the model has "
                              f"n_positions={loaded.model.config.n_positions}; lower L_grid/separability_L/gradient_L")
    tokens = tokenize(src, loaded.tokenizer)
    region = region_for(loaded, tokens, src.sha256)
    sets, win_info = window_sets(tokens, region, proto)
    t_cluster = time.perf_counter()
    with parallel.runner(scheduler) as pool:  # started after the model is on disk: workers only load it
        t_cluster = time.perf_counter() - t_cluster
        raw = collect(loaded, sets, proto, progress=progress, runner=pool, device=dev)
        sched = {"scheduler": pool.name, "workers": pool.workers}
    timing = raw.pop("_timing")
    timing["model_load_s"] = t_model
    timing["scheduler_start_s"] = t_cluster
    timing.update(sched)
    null_count = min(proto.null_windows, proto.windows)
    results: dict[str, Any] = {
        "paper": "arXiv:2508.17821, Limitations of Normalization in Attention Mechanism (section 3, Figs. 2-4)",
        "model": loaded.describe(),
        "text": {"path": src.path, "origin": src.origin, "sha256": src.sha256, "characters": len(src.text),
                 "tokens": len(tokens), "chapters": int(tokens.chapters.size)},
        "windows": win_info,
        "queries": QuerySpec.parse(proto.queries, proto.masked_keys).describe(),
        "protocol": proto.to_dict(),
        "experiments": raw.pop(nulls.MODEL),
        "nulls": {v: {"description": nulls.VARIANTS[v].description, "windows": null_count, "experiments": raw[v]}
                  for v in proto.nulls},
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "transformers": _version("transformers"), "numpy": np.__version__,
                        "scipy": _version("scipy"), "threads": torch.get_num_threads(), "device": dev,
                        "machine": platform.machine(), "platform": platform.platform(), **sched},
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
