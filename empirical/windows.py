"""Token ids of the text (cached) and the non-overlapping windows the experiments read."""

from __future__ import annotations

import hashlib

import numpy as np

from attnbounds.theory import atomic
from attnbounds.empirical.cachedir import cache_dir
from attnbounds.empirical.text import TextSource
from attnbounds.empirical.tokenizer import Tokenizer
from attnbounds.theory.errors import InvalidArgument


def token_ids(text: TextSource, tokenizer: Tokenizer) -> np.ndarray:
    """The whole text as int64 ids; cached per (text sha256, tokenizer)."""
    key = hashlib.sha256(f"{text.sha256}|{tokenizer.name}".encode()).hexdigest()[:24]
    path = cache_dir("tokens") / f"{key}.npy"
    if path.is_file():
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError):
            pass  # unreadable cache entry: re-tokenise below and overwrite it
    ids = np.asarray(tokenizer.encode(text.text), dtype=np.int64)
    import io

    buf = io.BytesIO()
    np.save(buf, ids, allow_pickle=False)
    atomic.write_bytes(path, buf.getvalue())
    return ids


def windows(ids: np.ndarray, length: int, count: int, start: int = 0) -> np.ndarray:
    """``count`` non-overlapping windows of ``length`` consecutive tokens from token ``start`` on.

    Returns an int64 array ``(count, length)``; window ``w`` is ``ids[start + w*length : start + (w+1)*length]``.
    """
    if length < 2:
        raise InvalidArgument(f"window length must be >= 2 tokens, got {length}")
    if count < 1:
        raise InvalidArgument(f"number of windows must be >= 1, got {count}")
    if start < 0:
        raise InvalidArgument(f"window start must be >= 0, got {start}")
    available = max(0, (len(ids) - start) // length)
    if count > available:
        raise InvalidArgument(
            f"the text has {len(ids)} tokens: from token {start} it holds {available} windows of {length} tokens, "
            f"but {count} were asked for; lower --windows or --window-start, or give a longer text"
        )
    return np.asarray(ids[start: start + count * length], dtype=np.int64).reshape(count, length)
