"""Input checks shared by every public entry point; each raises AttnBoundsError naming the value."""

from __future__ import annotations

from typing import Any

import numpy as np

from attnbounds.theory.mathematics.errors import InvalidArgument


def as_float_array(name: str, value: Any, ndim: int | tuple[int, ...], *, finite: bool = True) -> np.ndarray:
    """Convert ``value`` to a float64 array with ``ndim`` dimensions, rejecting NaN/inf."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{name} must be a real numeric array, got {type(value).__name__}: {exc}") from None
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if arr.ndim not in allowed:
        want = " or ".join(str(n) for n in allowed)
        raise InvalidArgument(f"{name} must have {want} dimensions, got shape {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise InvalidArgument(
            f"{name} must be finite, got {arr[tuple(bad)]} at index {tuple(int(i) for i in bad)}"
        )
    return arr


def positive(name: str, value: Any) -> np.ndarray | float:
    """A strictly positive finite scalar or array (temperatures, radii)."""
    arr = as_float_array(name, value, (0, 1))
    if np.any(arr <= 0):
        bad = arr if arr.ndim == 0 else arr[arr <= 0][0]
        raise InvalidArgument(f"{name} must be > 0, got {name}={float(bad)!r}")
    return float(arr) if arr.ndim == 0 else arr


def nonnegative(name: str, value: Any) -> np.ndarray | float:
    arr = as_float_array(name, value, (0, 1))
    if np.any(arr < 0):
        bad = arr if arr.ndim == 0 else arr[arr < 0][0]
        raise InvalidArgument(f"{name} must be >= 0, got {name}={float(bad)!r}")
    return float(arr) if arr.ndim == 0 else arr


def integer_in(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    """An integer in [lo, hi] (hi inclusive, None for unbounded)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgument(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < lo or (hi is not None and value > hi):
        rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise InvalidArgument(f"{name} must be an integer in {rng}, got {name}={value}")
    return value
