"""A memory budget for the arrays attnbounds allocates: estimate before allocating, chunk where the
computation allows, refuse with a clear error otherwise. Never rely on MemoryError or the OOM killer.

The budget is ``$ATTNBOUNDS_MEMORY_GB`` gibibytes (default 4) for any single temporary array.
"""

from __future__ import annotations

import os

from attnbounds.theory.errors import InvalidArgument

#: bytes one temporary array may take when the variable is unset
DEFAULT_GB = 4.0
#: bytes a chunked temporary holds at once
CHUNK_BYTES = 1 << 26


def limit_bytes() -> int:
    """The budget in bytes (``$ATTNBOUNDS_MEMORY_GB``, default 4 GiB)."""
    raw = os.environ.get("ATTNBOUNDS_MEMORY_GB", "")
    try:
        gb = float(raw) if raw else DEFAULT_GB
    except ValueError:
        raise InvalidArgument(f"ATTNBOUNDS_MEMORY_GB must be a number of gibibytes, got {raw!r}") from None
    if not gb > 0:
        raise InvalidArgument(f"ATTNBOUNDS_MEMORY_GB must be > 0, got {raw!r}")
    return int(gb * 2**30)


def check(nbytes: float, what: str) -> None:
    """Refuse (InvalidArgument) an allocation of ``nbytes`` for ``what`` beyond the budget, saying how to change it."""
    limit = limit_bytes()
    if nbytes > limit:
        raise InvalidArgument(f"{what} needs {nbytes / 2**30:.3g} GiB, over the memory limit of {limit / 2**30:.3g} GiB; "
                              f"use a smaller instance (or token classes), or raise the limit with ATTNBOUNDS_MEMORY_GB")


def rows_per_chunk(bytes_per_row: float, chunk_bytes: int = CHUNK_BYTES) -> int:
    """How many rows of ``bytes_per_row`` a chunk holds (at least one)."""
    return max(1, int(chunk_bytes // max(bytes_per_row, 1)))
