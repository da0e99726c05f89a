"""The embedded model: a small GPT-2-architecture model trained once on the text, cached as safetensors.

For machines without GPT-2. The project's own training loop (AdamW, warm-up + cosine schedule,
gradient clipping), seeded, on random windows of the text's first ``train_fraction`` of tokens.
The cache key covers the spec, the text's SHA-256 and the tokenizer, so a new text trains anew.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from attnbounds.theory import atomic
from attnbounds.empirical.cachedir import cache_dir
from attnbounds.empirical.modelload import LoadedModel, from_dir, quiet_transformers
from attnbounds.empirical.text import TextSource
from attnbounds.empirical.tokenizer import offline_gpt2
from attnbounds.theory.errors import InvalidArgument


@dataclass(frozen=True)
class TinySpec:
    """Architecture and training budget of the embedded model.

    Defaults: 4 layers x 4 heads, n_embd 128, 1024 positions (so L = 1024 works), 260 steps of one
    1024-token window: about 5 minutes on 2 idle cores (budget 10). A fixed number of steps, not a time
    budget, so the cached model does not depend on the machine's load.
    """

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    n_positions: int = 1024
    vocab_size: int = 50257
    seq_len: int = 1024
    batch_size: int = 1
    steps: int = 260
    lr: float = 2e-3
    warmup: int = 20
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    train_fraction: float = 0.9
    eval_windows: int = 4
    seed: int = 0
    max_seconds: float | None = None  # optional wall-clock guard; None keeps training deterministic

    def key(self, text_sha256: str, tokenizer: str) -> str:
        blob = json.dumps({**asdict(self), "max_seconds": None, "text": text_sha256, "tok": tokenizer}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


DEFAULT_SPEC = TinySpec()


def spec_from_env() -> TinySpec:
    """``DEFAULT_SPEC``, with fields overridden by ``ATTNBOUNDS_TINY_SPEC`` (a JSON object), for tests."""
    raw = os.environ.get("ATTNBOUNDS_TINY_SPEC")
    if not raw:
        return DEFAULT_SPEC
    try:
        fields = json.loads(raw)
        return replace(DEFAULT_SPEC, **fields)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"ATTNBOUNDS_TINY_SPEC must be a JSON object of TinySpec fields, got {raw!r} ({exc})") from None


def _seed_everything(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _lr_at(step: int, spec: TinySpec) -> float:
    if step < spec.warmup:
        return spec.lr * (step + 1) / spec.warmup
    frac = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
    return spec.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, frac)))


def train(ids: np.ndarray, spec: TinySpec, progress: bool = True) -> tuple[Any, dict[str, Any]]:
    """Train a fresh GPT-2-architecture model on ``ids``; returns ``(model, training record)``."""
    import torch
    from tqdm.auto import tqdm
    from transformers import GPT2Config, GPT2LMHeadModel

    quiet_transformers()
    split = int(len(ids) * spec.train_fraction)
    if split < spec.seq_len + 1 or len(ids) - split < spec.seq_len:
        raise InvalidArgument(f"the text has {len(ids)} tokens; training the tiny model needs at least "
                              f"{int(2 * spec.seq_len / (1 - spec.train_fraction)) + 1} (seq_len={spec.seq_len})")
    _seed_everything(spec.seed)
    config = GPT2Config(vocab_size=spec.vocab_size, n_positions=spec.n_positions, n_embd=spec.n_embd,
                        n_layer=spec.n_layer, n_head=spec.n_head, attn_implementation="eager", use_cache=False)  # type: ignore[call-arg]  # a PretrainedConfig kwarg
    model = GPT2LMHeadModel(config)
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": spec.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=spec.lr, betas=(0.9, 0.95))
    gen = np.random.default_rng(spec.seed)
    data = torch.from_numpy(np.asarray(ids[:split], dtype=np.int64))
    losses: list[float] = []
    t0 = time.perf_counter()
    bar = tqdm(range(spec.steps), desc="training tiny model", disable=not progress, leave=False)
    for step in bar:
        starts = gen.integers(0, split - spec.seq_len, size=spec.batch_size)
        batch = torch.stack([data[s: s + spec.seq_len] for s in starts])
        for group in opt.param_groups:
            group["lr"] = _lr_at(step, spec)
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), spec.grad_clip)
        opt.step()
        losses.append(float(loss.detach()))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if spec.max_seconds is not None and time.perf_counter() - t0 > spec.max_seconds:
            break
    seconds = time.perf_counter() - t0
    model.eval()
    held = np.asarray(ids[split:], dtype=np.int64)
    n_eval = min(spec.eval_windows, len(held) // spec.seq_len)
    with torch.inference_mode():
        ev = torch.from_numpy(held[: n_eval * spec.seq_len].reshape(n_eval, spec.seq_len))
        eval_loss = float(model(input_ids=ev, labels=ev).loss)
    record = {
        "spec": asdict(spec), "steps_done": len(losses), "stopped_by_time_limit": len(losses) < spec.steps,
        "seconds": seconds, "initial_loss": losses[0], "final_loss": float(np.mean(losses[-min(20, len(losses)):])),
        "heldout_loss": eval_loss, "loss_curve": losses, "train_tokens": split, "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    return model, record


def load_or_train(text: TextSource, *, spec: TinySpec | None = None, progress: bool = True) -> LoadedModel:
    """The cached embedded model for ``text`` (trained and cached on first use)."""
    from attnbounds.empirical.windows import token_ids

    spec = spec or spec_from_env()
    tok = offline_gpt2()
    folder = cache_dir("models") / f"tiny-{spec.key(text.sha256, tok.name)}"
    record_path = folder / "training.json"
    trained_now = False
    if not record_path.is_file():
        model, record = train(token_ids(text, tok), spec, progress=progress)
        record.update({"text_sha256": text.sha256, "text_path": text.path, "tokenizer": tok.name})
        tmp = Path(tempfile.mkdtemp(prefix=".tiny-", dir=folder.parent))
        try:
            model.save_pretrained(tmp, safe_serialization=True)
            atomic.write_json(tmp / "training.json", record)
            try:
                os.replace(tmp, folder)  # atomic publish; fails if another process published first
            except OSError:
                if not record_path.is_file():
                    shutil.rmtree(folder, ignore_errors=True)
                    os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        trained_now = True
    record = json.loads(record_path.read_text())
    model = from_dir(folder, "tiny")
    info = {"tiny": {k: v for k, v in record.items() if k != "loss_curve"}, "trained_now": trained_now,
            "loss_curve_len": len(record.get("loss_curve", []))}
    return LoadedModel(model, "tiny", "tiny", str(folder), tok, info)
