"""Batches of windows as independent tasks: each computes the experiments' partial states for its batch.

The driver (``pipeline.collect``) cuts the windows of every variant (the model and its nulls,
``empirical.nulls``) into batches, maps :func:`batch_task` over them with a :mod:`attnbounds.theory.deciding.parallel`
runner (in this process, worker processes, or a Dask cluster) and absorbs the partial states in batch
order; the in-process runner takes the same path, so the numbers do not depend on the scheduler. A worker
process loads the model once (:func:`worker_model`, a per-process cache keyed by the model's folder, dtype,
device and weights) and reuses it for every batch it runs.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnbounds.empirical import kernels
from attnbounds.empirical.config import Protocol
from attnbounds.empirical.nulls import VARIANTS, random_init, uniform_attention
from attnbounds.empirical.rows import QuerySpec, RecordRows, plan
from attnbounds.theory.mathematics.errors import InvalidArgument

#: (folder or in-memory tag, dtype, device, weights) -> (model, lock); the lock keeps concurrent tasks of a
#: multi-threaded worker from hooking the same model at once
_MODELS: dict[tuple[str, str, str, str], tuple[Any, threading.Lock]] = {}
_MODELS_LOCK = threading.Lock()
#: models kept per process (a long-lived worker serving several runs: a model and its random-init null)
MAX_MODELS = 3


@dataclass(frozen=True)
class Job:
    """What a task needs besides its windows: where the model is, the protocol, the variant, the device."""

    model_key: tuple[str, str]  # (folder, or an in-memory tag for a model only this process holds; dtype)
    folder: str | None  # the model folder workers load (None: in-memory only)
    proto: Protocol
    n_layer: int
    n_head: int
    variant: str = "model"
    device: str = "cpu"

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (*self.model_key, self.device, VARIANTS[self.variant].weights)


def model_key(loaded: Any) -> tuple[str, str]:
    dtype = str(next(loaded.model.parameters()).dtype)
    return (loaded.path if loaded.path else f"<in-memory {loaded.name} {id(loaded.model):x}>", dtype)


def register(job: Job, model: Any) -> None:
    """Put a model the driver already holds into this process's cache (so in-process tasks do not reload it)."""
    with _MODELS_LOCK:
        _MODELS[job.key] = (model, threading.Lock())


def unregister(job: Job) -> None:
    with _MODELS_LOCK:
        _MODELS.pop(job.key, None)


def build(job: Job, trained: Any) -> Any:
    """The job's model from the trained one: itself, or its random-init null; on the job's device."""
    import torch

    model = trained if VARIANTS[job.variant].weights == "trained" else random_init(trained.config, job.proto.seed)
    return model.to(device=torch.device(job.device), dtype=getattr(torch, job.model_key[1].removeprefix("torch.")))


def worker_model(job: Job) -> tuple[Any, threading.Lock]:
    """The job's model, loaded from its folder on first use in this process and cached."""
    with _MODELS_LOCK:
        hit = _MODELS.get(job.key)
        if hit is not None:
            return hit
        if job.folder is None:
            raise InvalidArgument(f"model {job.model_key[0]} exists only in the driver's memory; "
                                  "run it with scheduler 'none' or load it from a folder")
        from attnbounds.empirical.modelload import from_dir

        model = build(job, from_dir(job.folder))
        while len(_MODELS) >= MAX_MODELS:
            _MODELS.pop(next(iter(_MODELS)))
        _MODELS[job.key] = (model, threading.Lock())
        return _MODELS[job.key]


def consumers(proto: Protocol, n_layer: int, n_head: int, n_windows: int = 1) -> list[Any]:
    """The protocol's experiments as record consumers, with per-head accumulators of ``n_windows`` window slots."""
    from attnbounds.empirical.exp_distance import Theorem1
    from attnbounds.empirical.exp_gradients import Gradients
    from attnbounds.empirical.exp_separability import Separability

    spec = QuerySpec.parse(proto.queries, proto.masked_keys)
    n_heads = n_layer * n_head
    out: list[Any] = []
    if {"distance", "critical"} & set(proto.experiments):
        out.append(Theorem1(proto, n_heads, spec, n_windows))
    if "separability" in proto.experiments:
        out.append(Separability(proto, n_heads, spec, n_head, n_windows))
    if "gradients" in proto.experiments:
        out.append(Gradients(proto, n_heads, spec, n_windows))
    return out


def run_item(item: tuple[Job, tuple[int, int, np.ndarray]]) -> dict[str, Any]:
    """:func:`batch_task` of ``(job, batch)`` (what the runner maps)."""
    return batch_task(*item)


def batch_task(job: Job, item: tuple[int, int, np.ndarray]) -> dict[str, Any]:
    """One batch ``(index, first window, windows (B, L))``: the partial state of every experiment, and timings."""
    from attnbounds.empirical.extract import Extractor

    batch, offset, wins = item
    t0 = time.perf_counter()
    model, lock = worker_model(job)
    t_model = time.perf_counter() - t0
    exps = consumers(job.proto, job.n_layer, job.n_head, n_windows=len(wins))
    for e in exps:
        e.begin(batch, offset)
    seconds = {e.name: 0.0 for e in exps}
    prefixes = job.proto.window_lengths == "prefixes"
    uniform = VARIANTS[job.variant].attention == "uniform"

    def consumer(rec: Any) -> None:
        rr = RecordRows(uniform_attention(rec) if uniform else rec)
        with kernels.one_thread():  # row-sized products (the forward passes keep their threads)
            for e in exps:
                t = time.perf_counter()
                e.consume(rr, plan(e.spec, e.Ls, rr.T, prefixes))
                seconds[e.name] += time.perf_counter() - t

    t1 = time.perf_counter()
    with lock, Extractor(model, consumer) as ex:
        ex.run(wins)
    return {"batch": batch, "states": {e.name: e.state() for e in exps}, "experiments_s": seconds,
            "task_s": time.perf_counter() - t1, "model_s": t_model}
