"""The user cache folder: ``$ATTNBOUNDS_CACHE``, default ``~/.cache/attnbounds``."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from attnbounds.theory.errors import InvalidArgument


def cache_dir(*parts: str) -> Path:
    """A sub-folder of the cache (created on demand); :class:`InvalidArgument` naming ``$ATTNBOUNDS_CACHE``
    when it cannot be created or written."""
    given = os.environ.get("ATTNBOUNDS_CACHE")
    root = given or os.path.join(os.path.expanduser("~"), ".cache", "attnbounds")
    where = f"the cache folder {root!r} ({'$ATTNBOUNDS_CACHE' if given else 'default; set $ATTNBOUNDS_CACHE to move it'})"
    path = Path(root).joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InvalidArgument(f"{where} is unusable: {str(path)!r} is a file, not a folder") from None
    except (OSError, ValueError) as exc:  # a file on the way, no permission, a NUL in the name
        raise InvalidArgument(f"{where} is unusable: cannot create {str(path)!r}: "
                              f"{getattr(exc, 'strerror', None) or exc}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InvalidArgument(f"{where} is unusable: {str(path)!r} is not writable")
    return path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str]) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
