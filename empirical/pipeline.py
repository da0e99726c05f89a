"""``run``: text -> model -> windows -> batches of windows as tasks (any scheduler) -> partial states merged in
batch order -> the four experiments -> outputs."""

from __future__ import annotations

import functools
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from attnbounds.empirical.config import Protocol
from attnbounds.empirical.rows import QuerySpec
from attnbounds.theory.errors import InvalidArgument


def collect(loaded: Any, ids: np.ndarray, proto: Protocol, *, progress: bool = True,
            runner: Any = None) -> dict[str, Any]:
    """Run the experiments of ``proto`` on ``loaded`` over the windows of ``ids``; raw results per experiment.

    The windows are cut into batches of ``proto.batch_windows``; each batch is a task
    (:func:`attnbounds.empirical.tasks.batch_task`) mapped by ``runner`` (a :mod:`attnbounds.theory.parallel`
    runner; default: in this process), and the partial states are merged in batch order.
    """
    from attnbounds.empirical import tasks
    from attnbounds.empirical.windows import windows
    from attnbounds.theory.parallel import Runner

    runner = runner if runner is not None else Runner()
    cfg = loaded.model.config
    if proto.max_L > cfg.n_positions:
        raise InvalidArgument(f"the protocol needs windows of {proto.max_L} tokens but the model has "
                              f"n_positions={cfg.n_positions}; lower L_grid/separability_L/gradient_L")
    QuerySpec.parse(proto.queries, proto.masked_keys)
    wins = windows(ids, proto.max_L, proto.windows, proto.window_start)
    key = tasks.model_key(loaded)
    if loaded.path is None and runner.name != "none":
        raise InvalidArgument(f"model {loaded.name!r} has no folder the workers could load it from; "
                              "use scheduler 'none'")
    job = tasks.Job(model_key=key, folder=loaded.path, proto=proto, n_layer=cfg.n_layer, n_head=cfg.n_head)
    starts = range(0, len(wins), proto.batch_windows)
    items = [(b, s, wins[s: s + proto.batch_windows]) for b, s in enumerate(starts)]
    tasks.register(key, loaded.model)  # in-process tasks use the driver's model; workers load their own
    t_start = time.perf_counter()
    try:
        parts = runner.map(functools.partial(tasks.batch_task, job), items,
                           label=f"{proto.name} protocol: batches of windows", progress=progress)
    finally:
        tasks.unregister(key)
    t_tasks = time.perf_counter() - t_start
    t_merge = time.perf_counter()
    exps = tasks.experiments(proto, cfg.n_layer, cfg.n_head)
    seconds = {e.name: 0.0 for e in exps}
    for part in parts:  # in batch order, whatever order the tasks finished in
        for e in exps:
            e.absorb(part["states"][e.name])
            seconds[e.name] += part["experiments_s"][e.name]
    out: dict[str, Any] = {}
    for e in exps:
        out[e.name] = e.finish()
    t_merge = time.perf_counter() - t_merge
    task_s = sum(p["task_s"] for p in parts)
    out["_timing"] = {"experiments_s": seconds, "stream_s": t_tasks, "tasks_s": task_s,
                      "forward_and_extraction_s": task_s - sum(seconds.values()),
                      "worker_model_load_s": sum(p["model_s"] for p in parts),
                      "merge_and_finish_s": t_merge, "tasks": len(items)}
    out["_windows"] = {"count": int(len(wins)), "length": int(wins.shape[1]), "start": proto.window_start,
                       "first_tokens": wins[:, :8].tolist()}
    return out


def run(model: str = "tiny", out: str | Path = "attnbounds-empirical", *, text: str | Path | None = None,
        quick: bool = False, protocol: Protocol | None = None, progress: bool = True,
        figures: bool = True, scheduler: str | None = None) -> dict[str, Any]:
    """The paper's four experiments on ``model`` (section 3, Figs. 2-4); writes PNGs, report.md/.html, results.json.

    ``scheduler`` (default ``$ATTNBOUNDS_SCHEDULER``, else ``none``): where the batches of windows run,
    ``none`` (this process), ``processes:N`` (N local worker processes) or ``tcp://HOST:PORT`` (a Dask
    scheduler whose workers can read the model folder); see :mod:`attnbounds.theory.parallel`. The numbers
    do not depend on it; it is recorded under ``environment`` and ``timing``.
    Returns the results dictionary written to ``out/results.json``.
    """
    import torch

    from attnbounds.empirical import headlines, report
    from attnbounds.empirical.modelload import load_model
    from attnbounds.empirical.text import resolve_text
    from attnbounds.empirical.windows import token_ids
    from attnbounds.theory import parallel

    t0 = time.perf_counter()
    parallel.parse(scheduler)  # a bad scheduler fails before any work
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
    t_cluster = time.perf_counter()
    with parallel.runner(scheduler) as pool:  # started after the model is on disk: workers only load it
        t_cluster = time.perf_counter() - t_cluster
        raw = collect(loaded, ids, proto, progress=progress, runner=pool)
        sched = {"scheduler": pool.name, "workers": pool.workers}
    timing = raw.pop("_timing")
    timing["model_load_s"] = t_model
    timing["scheduler_start_s"] = t_cluster
    timing.update(sched)
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
