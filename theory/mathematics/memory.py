"""A memory budget for the arrays attnbounds allocates: estimate before allocating, chunk where the
computation allows, refuse with a clear error otherwise. Never rely on MemoryError or the OOM killer.

The budget is ``$ATTNBOUNDS_MEMORY_GB`` gibibytes (default 4) for any single temporary array.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Iterator

from attnbounds.theory.mathematics.errors import InvalidArgument

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


def total_bytes() -> int | None:
    """This machine's physical memory (``SC_PHYS_PAGES``); None where it is not known. (Not what is free now: a cap
    read from that would change from run to run with the other jobs on the machine.)"""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def rows_per_chunk(bytes_per_row: float, chunk_bytes: int = CHUNK_BYTES) -> int:
    """How many rows of ``bytes_per_row`` a chunk holds (at least one)."""
    return max(1, int(chunk_bytes // max(bytes_per_row, 1)))


#: glibc's thresholds while a search runs: temporaries below MMAP_THRESHOLD come from the heap and up to
#: TRIM_THRESHOLD of free heap is kept, instead of mapping and faulting in every numpy temporary anew
MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
@functools.cache
def tune_allocator() -> bool:
    """Raise glibc's mmap and trim thresholds for this process (``mallopt``), once; False where there is no glibc.

    The search allocates many numpy temporaries of 0.1 to 10 MB. With glibc's defaults each one above the current
    mmap threshold is mapped and faulted in, and Dask's workers make it worse (their nannies export
    ``MALLOC_TRIM_THRESHOLD_=65536``, which also freezes the threshold at 128 KiB): random search pieces ran
    1.7x slower on a worker than in one process, and 1.3x slower in one process than with these thresholds.
    Called by the command line and by every task on a Dask worker, never on import (a library must not change
    its host's allocator unasked). Results do not depend on it.
    """
    import ctypes
    import sys

    ok = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None)  # this process's own symbols (ctypes.util.find_library would run ldconfig)
            M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # malloc.h
            ok = bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
        except (OSError, AttributeError):  # musl and others: no mallopt
            ok = False
    return ok


@functools.cache
def _openblas() -> tuple[Any, Any] | None:
    """``(get_num_threads, set_num_threads)`` of the OpenBLAS numpy loaded (through ctypes, from the libraries mapped
    into this process); None where there is none (another BLAS, or no ``/proc``)."""
    import ctypes

    import numpy  # noqa: F401  (its BLAS is mapped once numpy is imported)

    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower() and ".so" in line})
    except OSError:
        return None
    names = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
             ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
             ("openblas_get_num_threads", "openblas_set_num_threads"))
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get, put in names:
            if hasattr(lib, get) and hasattr(lib, put):
                return getattr(lib, get), getattr(lib, put)
    return None


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """numpy's BLAS on ``n`` threads inside the block (restored after). The search and the certificates run their
    linear algebra on one: on a loaded 2-core machine OpenBLAS's own two threads made 16 SVDs of 128 x 128
    Jacobians take 10 s instead of 0.01 s (they spin while waiting for a core), and a 7 s budget took minutes."""
    blas = _openblas()
    before = int(blas[0]()) if blas is not None else None
    if blas is not None:
        blas[1](int(n))
    try:
        yield
    finally:
        if blas is not None and before is not None:
            blas[1](before)

