"""The user cache folder (:func:`attnbounds.theory.io.cachedir.cache_dir`, re-exported) and file digests."""

from __future__ import annotations

import hashlib
import os

from attnbounds.theory.io.cachedir import cache_dir

__all__ = ["cache_dir", "sha256_bytes", "sha256_file"]


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
