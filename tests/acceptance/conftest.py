"""Fixtures shared by the acceptance tests."""

from __future__ import annotations

import pytest

from attnbounds.theory.mathematics import normalisers as nm


@pytest.fixture
def restore_family():
    """The normaliser family as it was before the test (a statements file registers its normalisers for the
    process; check() restores the family itself)."""
    saved = dict(nm.CONSTRUCTORS)
    yield
    nm.CONSTRUCTORS.clear()
    nm.CONSTRUCTORS.update(saved)
