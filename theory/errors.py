"""The one exception type attnbounds raises for bad input."""

from __future__ import annotations


class AttnBoundsError(ValueError):
    """Bad input to a public attnbounds function.

    The message names the offending value and what is allowed, e.g.
    ``T must be > 0, got T=-1.0``.
    """
