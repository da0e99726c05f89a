"""Load a GPT-2-family model with eager attention: a hub name, a local folder, or the embedded ``tiny``.

Weights are read only from safetensors files, or with ``torch.load(weights_only=True)`` for a
local ``pytorch_model.bin``; remote code is never trusted. When a model cannot be had, the error
says how to provide one instead of showing a hub traceback.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from attnbounds.empirical.tokenizer import Tokenizer, for_model
from attnbounds.theory.errors import AttnBoundsError, InvalidArgument


@dataclass
class LoadedModel:
    """A model ready for extraction, its tokenizer, and where both came from."""

    model: Any  # transformers GPT2LMHeadModel, eval mode, eager attention
    name: str
    source: str  # "local-dir", "hub-cache", "hub-download", "tiny"
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
        "holding config.json and model.safetensors of a GPT-2-family model; or (c) use --model tiny, a small "
        "GPT-2-architecture model trained here on the text (about 5 minutes once, then cached)"
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


def _check_family(config: Any, name: str) -> None:
    if getattr(config, "model_type", None) != "gpt2":
        raise InvalidArgument(
            f"model {name!r} has model_type {getattr(config, 'model_type', None)!r}; only GPT-2-family checkpoints "
            "(model_type 'gpt2': gpt2, gpt2-medium, distilgpt2, your own GPT2LMHeadModel) are supported"
        )


def quiet_transformers() -> None:
    """Silence transformers' info messages and progress bars (ours are the ones that count)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def _finish(model: Any) -> Any:
    model.eval()
    model.config.use_cache = False
    return model


def from_dir(path: str | os.PathLike[str], name: str | None = None) -> Any:
    """A GPT2LMHeadModel from a local folder (config.json + safetensors, or a weights-only torch file)."""
    import torch
    from transformers import AutoConfig, GPT2LMHeadModel

    quiet_transformers()
    folder = Path(path)
    label = name or str(folder)
    if not (folder / "config.json").is_file():
        raise InvalidArgument(f"model folder {str(folder)!r} has no config.json; {how_to_provide(label)}")
    config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
    _check_family(config, label)
    if any(folder.glob("*.safetensors")):
        model = GPT2LMHeadModel.from_pretrained(folder, local_files_only=True, use_safetensors=True,
                                                attn_implementation="eager", trust_remote_code=False)
        return _finish(model)
    binary = folder / "pytorch_model.bin"
    if not binary.is_file():
        raise InvalidArgument(f"model folder {str(folder)!r} has neither *.safetensors nor pytorch_model.bin; "
                              f"{how_to_provide(label)}")
    config._attn_implementation = "eager"
    model = GPT2LMHeadModel(config)
    state = torch.load(binary, map_location="cpu", weights_only=True)
    state = {k.removeprefix("module."): v for k, v in state.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
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


def load_model(name: str, *, text: Any = None, progress: bool = True) -> LoadedModel:
    """The model called ``name``: ``tiny`` (embedded, needs ``text``), a local folder, or a hub name."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"--model must be 'tiny', a folder or a hub name such as 'gpt2', got {name!r}")
    if name == "tiny":
        from attnbounds.empirical import tiny

        if text is None:
            raise InvalidArgument("--model tiny trains on the text; give a text (--text or ATTNBOUNDS_TEXT)")
        return tiny.load_or_train(text, progress=progress)
    folder = Path(name).expanduser()
    if folder.exists():
        if not folder.is_dir():
            raise InvalidArgument(f"--model {name!r} is a file; give the folder that holds config.json and weights")
        return LoadedModel(from_dir(folder, name), name, "local-dir", str(folder.resolve()), for_model(str(folder)))
    model, source, path = from_hub(name)
    return LoadedModel(model, name, source, path, for_model(path))
