"""The user cache folder: ``$ATTNBOUNDS_CACHE``, default ``~/.cache/attnbounds``."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def cache_dir(*parts: str) -> Path:
    """A sub-folder of the cache (created on demand)."""
    root = os.environ.get("ATTNBOUNDS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "attnbounds")
    path = Path(root).joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
