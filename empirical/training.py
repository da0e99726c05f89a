"""Models trained here by the project's own loop, for machines without GPT-2, cached as safetensors.

``tiny`` is small and fast (the tests and ``--quick``; it barely learns: attention close to uniform);
``standin`` is the learned stand-in for GPT-2 small: 8 layers x 8 heads (64 heads, enough for the
critical top-N KS test to mean something), 15 to 30 minutes on 2 idle cores. Both are GPT-2-architecture
models trained by the same loop (AdamW, warm-up + cosine schedule, gradient clipping), seeded, for a
fixed number of steps (never a wall-clock budget, so the cached model does not depend on the machine's
load) on random windows of the training split: the first ``train_fraction`` of the tokens, ending at a
chapter start when the text has chapters. The rest of the text is held out: the held-out perplexity is
measured on it and the experiments read only it. The cache key covers the spec, the text's SHA-256 and
the tokenizer, so a new text trains anew.
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

from attnbounds.empirical.cachedir import cache_dir
from attnbounds.empirical.modelload import LoadedModel, from_dir, quiet_transformers
from attnbounds.empirical.text import TextSource
from attnbounds.empirical.tokenizer import Tokenizer, offline_gpt2
from attnbounds.empirical.windows import Tokens, split_point, tokenize
from attnbounds.theory.io import atomic
from attnbounds.theory.mathematics.errors import InvalidArgument

VOCABULARIES = ("gpt2", "train-split")
VOCABULARY_FILE = "vocabulary.json"
TRAINING_FILE = "training.json"


@dataclass(frozen=True)
class TrainSpec:
    """Architecture and training budget of a model trained here (every field is in the cache key).

    ``vocabulary``: ``gpt2`` (GPT-2's 50257 ids) or ``train-split`` (the GPT-2 ids that occur in the training
    split, renumbered, plus one id for every other token: a smaller output layer, so more steps per second).
    """

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    n_positions: int = 1024
    vocabulary: str = "gpt2"
    dropout: float = 0.1
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

    def key(self, text_sha256: str, tokenizer: str) -> str:
        blob = json.dumps({**asdict(self), "text": text_sha256, "tok": tokenizer}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


#: the models trained here, by the name ``--model`` takes
SPECS: dict[str, TrainSpec] = {
    # 4 x 4 heads, n_embd 128, 260 steps of one 1024-token window: about 5 minutes on 2 idle cores
    "tiny": TrainSpec(),
    # 8 x 8 heads, n_embd 256 (d_head 32), 900 steps of one 1024-token window: 1 to 2 s a step on 2 idle cores
    # (15 to 30 minutes); measured 110 min on 2 cores shared with other jobs, held-out perplexity 250 (README)
    "standin": TrainSpec(n_layer=8, n_head=8, n_embd=256, vocabulary="train-split", dropout=0.0, steps=900,
                         lr=1.5e-3, warmup=40, eval_windows=64),
}
#: the spec whose fields ``$ATTNBOUNDS_TINY_SPEC`` overrides (tests)
DEFAULT_SPEC = SPECS["tiny"]


def spec_for(name: str) -> TrainSpec:
    """The spec of the model called ``name``; for ``tiny``, with fields overridden by ``$ATTNBOUNDS_TINY_SPEC``
    (a JSON object, for tests)."""
    spec = SPECS[name]
    raw = os.environ.get("ATTNBOUNDS_TINY_SPEC") if name == "tiny" else None
    if not raw:
        return spec
    try:
        fields = json.loads(raw)
        return replace(spec, **fields)
    except (ValueError, TypeError) as exc:
        raise InvalidArgument(f"ATTNBOUNDS_TINY_SPEC must be a JSON object of TrainSpec fields, got {raw!r} ({exc})") from None


# -- vocabulary --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Vocabulary:
    """GPT-2 ids kept (sorted; model id ``k`` is ``kept[k]``) and the model id of every other token."""

    kept: np.ndarray

    @property
    def unknown(self) -> int:
        return int(self.kept.size)

    @property
    def size(self) -> int:
        """The model's vocabulary size: the kept ids and the unknown one, rounded up to a multiple of 64."""
        return int(-(-(self.kept.size + 1) // 64) * 64)

    def table(self, base_size: int) -> np.ndarray:
        table = np.full(max(base_size, int(self.kept.max(initial=0)) + 1), self.unknown, dtype=np.int64)
        table[self.kept] = np.arange(self.kept.size)
        return table

    def tokenizer(self, base: Tokenizer) -> Tokenizer:
        table = self.table(base.vocab_size)
        digest = hashlib.sha256(self.kept.tobytes()).hexdigest()[:12]
        return Tokenizer(encode=lambda text: table[np.asarray(base.encode(text), dtype=np.int64)].tolist(),
                         name=f"{base.name} restricted to {self.kept.size} ids + 1 unknown ({digest})",
                         vocab_size=self.size)

    def to_json(self) -> dict[str, Any]:
        return {"kept": self.kept.tolist(), "unknown": self.unknown, "size": self.size}

    @classmethod
    def read(cls, folder: Path) -> "Vocabulary | None":
        path = folder / VOCABULARY_FILE
        if not path.is_file():
            return None
        data = json.loads(atomic.read_text(path, "vocabulary file", 1 << 24))
        return cls(np.asarray(data["kept"], dtype=np.int64))


def model_tokenizer(folder: Path) -> Tokenizer:
    """The tokenizer of a model trained here: GPT-2's BPE, restricted to its vocabulary when it has one."""
    base = offline_gpt2()
    vocab = Vocabulary.read(folder)
    return base if vocab is None else vocab.tokenizer(base)


# -- training ----------------------------------------------------------------------------------------------
def _seed_everything(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _lr_at(step: int, spec: TrainSpec) -> float:
    if step < spec.warmup:
        return spec.lr * (step + 1) / spec.warmup
    frac = (step - spec.warmup) / max(1, spec.steps - spec.warmup)
    return spec.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, frac)))


def config_for(spec: TrainSpec, vocab_size: int) -> Any:
    """The GPT2Config of ``spec`` (eager attention)."""
    from transformers import GPT2Config

    p = spec.dropout
    return GPT2Config(vocab_size=vocab_size, n_positions=spec.n_positions, n_embd=spec.n_embd, n_layer=spec.n_layer,
                      n_head=spec.n_head, resid_pdrop=p, embd_pdrop=p, attn_pdrop=p, bos_token_id=None,
                      eos_token_id=None, attn_implementation="eager", use_cache=False)  # type: ignore[call-arg]  # a PretrainedConfig kwarg


def heldout_loss(model: Any, held: np.ndarray, seq_len: int, windows: int) -> tuple[float, int]:
    """Mean next-token cross-entropy (nats) over up to ``windows`` non-overlapping windows of ``held``, and
    the number of windows used."""
    import torch

    n = min(windows, len(held) // seq_len)
    if n < 1:
        return float("nan"), 0
    total, count = 0.0, 0
    with torch.inference_mode():
        for a in range(0, n, 2):
            ev = torch.from_numpy(held[a * seq_len: min(n, a + 2) * seq_len].reshape(-1, seq_len))
            loss = model(input_ids=ev, labels=ev).loss
            k = ev.shape[0] * (seq_len - 1)
            total += float(loss) * k
            count += k
    return total / count, n


def train(tokens: Tokens, spec: TrainSpec, progress: bool = True) -> tuple[Any, dict[str, Any], Vocabulary | None]:
    """Train a fresh GPT-2-architecture model on the training split of ``tokens`` (GPT-2 ids).

    Returns ``(model, training record, vocabulary or None)``.
    """
    import torch
    from tqdm.auto import tqdm
    from transformers import GPT2LMHeadModel

    quiet_transformers()
    if spec.vocabulary not in VOCABULARIES:
        raise InvalidArgument(f"vocabulary must be one of {', '.join(VOCABULARIES)}, got {spec.vocabulary!r}")
    split = split_point(tokens, spec.train_fraction)
    if split < spec.seq_len + 1 or len(tokens) - split < spec.seq_len:
        raise InvalidArgument(f"the text has {len(tokens)} tokens; training this model needs at least "
                              f"{int(2 * spec.seq_len / (1 - spec.train_fraction)) + 1} (seq_len={spec.seq_len})")
    ids = tokens.ids
    vocab = None
    vocab_size = int(max(50257, ids.max(initial=0) + 1))
    if spec.vocabulary == "train-split":
        vocab = Vocabulary(np.unique(ids[:split]))
        ids = vocab.table(vocab_size)[ids]
        vocab_size = vocab.size
    _seed_everything(spec.seed)
    model = GPT2LMHeadModel(config_for(spec, vocab_size))
    model.train()
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": spec.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=spec.lr, betas=(0.9, 0.95))
    gen = np.random.default_rng(spec.seed)
    data = torch.from_numpy(np.asarray(ids[:split], dtype=np.int64))
    losses: list[float] = []
    t0 = time.perf_counter()
    bar = tqdm(range(spec.steps), desc=f"training a {spec.n_layer}x{spec.n_head}-head model", disable=not progress,
               leave=False)
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
    seconds = time.perf_counter() - t0
    model.eval()
    held = np.asarray(ids[split:], dtype=np.int64)
    t_eval = time.perf_counter()
    eval_loss, n_eval = heldout_loss(model, held, spec.seq_len, spec.eval_windows)
    record = {
        "spec": asdict(spec), "steps_done": len(losses), "seconds": seconds, "tokens_seen": len(losses) *
        spec.seq_len * spec.batch_size, "initial_loss": losses[0], "final_loss": float(np.mean(losses[-min(20, len(losses)):])),
        "heldout_loss": eval_loss, "heldout_perplexity": math.exp(eval_loss) if math.isfinite(eval_loss) else None,
        "heldout_windows": n_eval, "heldout_eval_s": time.perf_counter() - t_eval, "loss_curve": losses,
        "train_tokens": split, "heldout_tokens": int(held.size), "vocab_size": vocab_size,
        "heldout_unknown_fraction": None if vocab is None else float(np.mean(held == vocab.unknown)),
        "torch": torch.__version__, "threads": torch.get_num_threads(),
    }
    return model, record, vocab


def load_or_train(text: TextSource, name: str = "tiny", *, spec: TrainSpec | None = None,
                  progress: bool = True) -> LoadedModel:
    """The cached model ``name`` (a key of :data:`SPECS`) for ``text``, trained and cached on first use."""
    spec = spec or spec_for(name)
    base = offline_gpt2()
    folder = cache_dir("models") / f"{name}-{spec.key(text.sha256, base.name)}"
    record_path = folder / TRAINING_FILE
    trained_now = False
    if not record_path.is_file():
        model, record, vocab = train(tokenize(text, base), spec, progress=progress)
        record.update({"name": name, "text_sha256": text.sha256, "text_path": text.path, "tokenizer": base.name})
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=folder.parent))
        try:
            model.save_pretrained(tmp, safe_serialization=True)
            if vocab is not None:
                atomic.write_json(tmp / VOCABULARY_FILE, vocab.to_json())
            atomic.write_json(tmp / TRAINING_FILE, record)
            try:
                os.replace(tmp, folder)  # atomic publish; fails if another process published first
            except OSError:
                if not record_path.is_file():
                    shutil.rmtree(folder, ignore_errors=True)
                    os.replace(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        trained_now = True
    return LoadedModel(from_dir(folder, name), name, "trained here", str(folder), model_tokenizer(folder),
                       training_info(folder, trained_now))


def training_info(folder: Path, trained_now: bool = False) -> dict[str, Any]:
    """What a folder's ``training.json`` says (without the loss curve), for :class:`LoadedModel`; ``{}`` without one."""
    path = folder / TRAINING_FILE
    if not path.is_file():
        return {}
    try:
        record = json.loads(atomic.read_text(path, "training record", 1 << 26))
    except ValueError:
        raise InvalidArgument(f"{str(path)!r} is not a JSON training record; delete the folder to train anew") from None
    if not isinstance(record, dict):
        raise InvalidArgument(f"{str(path)!r} is not a JSON object; delete the folder to train anew")
    return {"training": {k: v for k, v in record.items() if k != "loss_curve"}, "trained_now": trained_now,
            "loss_curve_len": len(record.get("loss_curve", []))}
