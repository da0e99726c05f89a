"""The user cache folder: ``$ATTNBOUNDS_CACHE``, default ``~/.cache/attnbounds`` (the theory's and the experiments')."""

from __future__ import annotations

import os
from pathlib import Path

from attnbounds.theory.mathematics.errors import InvalidArgument


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


def hypothesis_home() -> None:
    """Keep hypothesis' files (its constants and character caches) in the attnbounds cache, not in the folder
    the command runs from."""
    from hypothesis.configuration import set_hypothesis_home_dir

    set_hypothesis_home_dir(cache_dir("hypothesis"))
