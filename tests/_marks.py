"""Test selection helpers shared by the test modules."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest


def slow_where(values: Iterable[Any], ids: Callable[[Any], str], slow: set[str]) -> list[Any]:
    """``values`` as pytest parameters with their ids, those whose id is in ``slow`` marked ``slow`` (deselected by
    default; ``-m slow`` runs them): the heaviest cases of a family whose others keep it in the default run. An id in
    ``slow`` that names no value is an error, so that a renamed case cannot silently leave both runs."""
    values = list(values)
    named = {ids(v) for v in values}
    missing = slow - named
    if missing:
        raise ValueError(f"slow_where: {sorted(missing)} name no case; the cases are {sorted(named)}")
    return [pytest.param(v, id=ids(v), marks=[pytest.mark.slow] if ids(v) in slow else []) for v in values]
