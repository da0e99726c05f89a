"""Load a GPT-2-family checkpoint with eager attention: a hub name or a local folder.

Weights are read only from safetensors files, or with ``torch.load(weights_only=True)`` for a
local ``pytorch_model.bin``; remote code is never trusted. ``config.json`` is checked before anything
is built (a JSON object, GPT-2 family, sizes that fit the memory limit ``$ATTNBOUNDS_MEMORY_GB``), and
every file that cannot be read is an :class:`InvalidArgument` naming it. When a model cannot be had, the
error says how to provide one instead of showing a hub traceback. (Models trained here: ``training``.)
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from attnbounds.empirical.tokenizer import Tokenizer, for_model
from attnbounds.theory.io import atomic
from attnbounds.theory.mathematics import memory
from attnbounds.theory.mathematics.errors import AttnBoundsError, InvalidArgument

#: the largest config.json read
CONFIG_MAX_BYTES = 1 << 20
#: sizes a GPT-2-family config may have (GPT-2 XL: 48 layers, 25 heads, n_embd 1600, 1024 positions)
SIZE_FIELDS = {"n_layer": 1024, "n_head": 1024, "n_embd": 1 << 16, "n_positions": 1 << 17, "vocab_size": 1 << 22}
#: bytes per weight as the model holds them (float32) and while a checkpoint is read beside it
BYTES_PER_WEIGHT = 4 * 2


@dataclass
class LoadedModel:
    """A model ready for extraction, its tokenizer, and where both came from."""

    model: Any  # transformers GPT2LMHeadModel, eval mode, eager attention
    name: str
    source: str  # "local-dir", "hub-cache", "hub-download", "trained here"
    path: str | None
    tokenizer: Tokenizer
    info: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        cfg = self.model.config
        return {"name": self.name, "source": self.source, "path": self.path, "tokenizer": self.tokenizer.name,
                "n_layer": cfg.n_layer, "n_head": cfg.n_head, "n_embd": cfg.n_embd, "n_positions": cfg.n_positions,
                "vocab_size": cfg.vocab_size, "n_params": int(sum(p.numel() for p in self.model.parameters())),
                **self.info}


def how_to_provide(name: str) -> str:
    return (
        f"model {name!r} is not available on this machine. Either (a) on a machine with network run "
        f"`hf download {name}` (`huggingface-cli download {name}` with huggingface_hub < 1.0) and copy its "
        "Hugging Face cache (~/.cache/huggingface/hub, or $HF_HOME/hub) here; (b) pass --model /path/to/folder "
        "holding config.json and model.safetensors of a GPT-2-family model; or (c) use --model standin, a "
        "GPT-2-architecture model with 8 x 8 heads trained here on the text (about 30 minutes once, then cached), "
        "or --model tiny (4 x 4 heads, about 5 minutes; for tests)"
    )


def _truthy(var: str) -> bool:
    return os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    """True when HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE ask for offline mode."""
    return _truthy("HF_HUB_OFFLINE") or _truthy("TRANSFORMERS_OFFLINE")


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick TCP check of the hub endpoint, so offline machines fail in seconds, not after retries."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    parsed = urlparse(endpoint)
    host, port = parsed.hostname or "huggingface.co", parsed.port or (443 if parsed.scheme != "http" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def quiet_transformers() -> None:
    """Silence transformers' info messages and progress bars (ours are the ones that count)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def weight_count(cfg: dict[str, int]) -> dict[str, int]:
    """GPT-2's weights by part: token and position embeddings, the blocks (tied output layer)."""
    e = cfg["n_embd"]
    return {"vocab_size x n_embd": cfg["vocab_size"] * e, "n_positions x n_embd": cfg["n_positions"] * e,
            "n_layer x n_embd^2": cfg["n_layer"] * (12 * e * e + 13 * e)}


def check_config(path: Path, label: str) -> dict[str, Any]:
    """``config.json`` as a dict, after checking it before anything is built: a JSON object of a GPT-2-family
    model whose sizes are whole numbers in range and whose weights fit the memory limit."""
    try:
        data = json.loads(atomic.read_text(path, "model config", CONFIG_MAX_BYTES))
    except ValueError as exc:
        raise InvalidArgument(f"model config {str(path)!r} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"model config {str(path)!r} must be a JSON object, got a JSON {type(data).__name__}")
    if data.get("model_type") != "gpt2":
        raise InvalidArgument(
            f"model {label!r} has model_type {data.get('model_type')!r}; only GPT-2-family checkpoints "
            "(model_type 'gpt2': gpt2, gpt2-medium, distilgpt2, your own GPT2LMHeadModel) are supported"
        )
    defaults = {"n_layer": 12, "n_head": 12, "n_embd": 768, "n_positions": 1024, "vocab_size": 50257}
    sizes: dict[str, int] = {}
    for name, top in SIZE_FIELDS.items():
        value = data.get(name, defaults[name])
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
            raise InvalidArgument(f"model config {str(path)!r}: {name}={value!r}; expected a whole number in [1, {top}]")
        sizes[name] = value
    if sizes["n_embd"] % sizes["n_head"]:
        raise InvalidArgument(f"model config {str(path)!r}: n_embd={sizes['n_embd']} is not a multiple of "
                              f"n_head={sizes['n_head']}")
    parts = weight_count(sizes)
    need = sum(parts.values()) * BYTES_PER_WEIGHT
    if need > memory.limit_bytes():
        worst = max(parts, key=lambda k: parts[k])
        shown = ", ".join(f"{k}={sizes[k]}" for k in SIZE_FIELDS)
        memory.check(need, f"model {label!r} ({shown}; mostly {worst}: {parts[worst]:,} weights)")
    return data


def _read_safetensors(folder: Path) -> None:
    """Read every safetensors header (cheap): a file that is not safetensors is named before loading."""
    from safetensors import safe_open

    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), "pt") as fh:
                fh.keys()
        except Exception as exc:  # noqa: BLE001 - SafetensorError, OSError: any unreadable file is bad input
            raise InvalidArgument(f"weights file {str(path)!r} is not a readable safetensors file "
                                  f"({type(exc).__name__}: {str(exc)[:200]})") from None


def _torch_weights(binary: Path) -> dict[str, Any]:
    """A weights-only torch checkpoint; anything that needs unpickling objects is refused (never unpickled)."""
    import torch

    try:
        state = torch.load(binary, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - UnpicklingError, RuntimeError, EOFError: refused, its advice not relayed
        raise InvalidArgument(
            f"weights file {str(binary)!r} cannot be read as weights only ({type(exc).__name__}); attnbounds loads "
            "safetensors or torch.load(weights_only=True) only. Convert the checkpoint to model.safetensors where "
            "you trust it (GPT2LMHeadModel.from_pretrained(folder).save_pretrained(folder, safe_serialization=True))"
        ) from None
    if not isinstance(state, dict) or not all(hasattr(v, "shape") for v in state.values()):
        raise InvalidArgument(f"weights file {str(binary)!r} does not hold a state dict of tensors")
    return {k.removeprefix("module."): v for k, v in state.items()}


def _finish(model: Any) -> Any:
    model.eval()
    model.config.use_cache = False
    return model


def from_dir(path: str | os.PathLike[str], name: str | None = None) -> Any:
    """A GPT2LMHeadModel from a local folder (config.json + safetensors, or a weights-only torch file)."""
    from transformers import AutoConfig, GPT2LMHeadModel

    quiet_transformers()
    folder = Path(path)
    label = name or str(folder)
    if not (folder / "config.json").is_file():
        raise InvalidArgument(f"model folder {str(folder)!r} has no config.json; {how_to_provide(label)}")
    check_config(folder / "config.json", label)
    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - a config transformers rejects is bad input
        raise InvalidArgument(f"model config in {str(folder)!r} is not a valid GPT-2 config "
                              f"({type(exc).__name__}: {str(exc)[:200]})") from None
    if any(folder.glob("*.safetensors")):
        _read_safetensors(folder)
        try:
            model = GPT2LMHeadModel.from_pretrained(folder, local_files_only=True, use_safetensors=True,
                                                    attn_implementation="eager", trust_remote_code=False)
        except Exception as exc:  # noqa: BLE001 - shapes that do not fit the config, truncated files
            raise InvalidArgument(f"weights in {str(folder)!r} do not load into the config "
                                  f"({type(exc).__name__}: {str(exc)[:300]})") from None
        return _finish(model)
    binary = folder / "pytorch_model.bin"
    if not binary.is_file():
        raise InvalidArgument(f"model folder {str(folder)!r} has neither *.safetensors nor pytorch_model.bin; "
                              f"{how_to_provide(label)}")
    state = _torch_weights(binary)
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config)
    try:
        missing, unexpected = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # size mismatches
        raise InvalidArgument(f"weights in {str(binary)!r} do not fit the config ({str(exc)[:300]})") from None
    if any(not k.endswith((".attn.bias", ".attn.masked_bias", "lm_head.weight")) for k in missing):
        raise InvalidArgument(f"weights in {str(binary)!r} do not fit the config: missing {missing[:5]}")
    model.tie_weights()
    return _finish(model)


def from_hub(name: str) -> tuple[Any, str, str | None]:
    """``(model, source, resolved folder)`` for a hub name: the local HF cache first, then a download."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(name, local_files_only=True,
                                   allow_patterns=["config.json", "*.safetensors", "*.json", "*.txt", "merges.txt"])
        return from_dir(folder, name), "hub-cache", folder
    except AttnBoundsError:
        raise
    except Exception:  # noqa: BLE001 - not cached; try the network below
        pass
    if hub_offline() or not hub_reachable():
        raise InvalidArgument(how_to_provide(name)) from None
    try:
        folder = snapshot_download(name, allow_patterns=["config.json", "*.safetensors", "*.json", "*.txt"])
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear message
        raise InvalidArgument(f"download of {name!r} failed ({type(exc).__name__}: {str(exc)[:200]}); "
                              f"{how_to_provide(name)}") from None
    return from_dir(folder, name), "hub-download", folder


def load_pretrained(name: str) -> LoadedModel:
    """A checkpoint: the local folder ``name``, else the hub name ``name`` (cache first)."""
    folder = Path(name).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise InvalidArgument(f"--model {name!r} is a file; give the folder that holds config.json and weights")
        return LoadedModel(from_dir(folder, name), name, "local-dir", str(folder.resolve()), for_model(str(folder)))
    model, source, path = from_hub(name)
    return LoadedModel(model, name, source, path, for_model(path))
