"""The exceptions attnbounds raises, one per kind of failure.

- :class:`InvalidArgument`: bad input (a value out of its domain, a wrong shape, an unknown name);
  the message names the value and what is allowed. The CLI exits 2.
- :class:`NotApplicable`: a statement's hypothesis, or a quantity's requirement on the instance,
  fails for this instance (weights undefined on these logits, an infeasible separation, ...). The
  search skips such instances; a verdict on them is NOT-APPLICABLE. The CLI exits 2.
- :class:`CannotCertify`: interval arithmetic cannot decide (an unsupported function, precision
  lost): a certificate says ``inconclusive``, never a refutation.
- :class:`CallableFailed`: a user's Python callable normaliser failed on some logits (it raised, returned
  NaN or inf, a wrong type or shape, or ran over its time limit). When it is loaded this is refused as
  :class:`InvalidArgument`; during a search it is counted and named, and a verdict that would have been
  VERIFIED becomes UNDECIDED (part of the searched range was not checked). The CLI exits 2.

Every other exception is an internal error: never swallowed, the search counts it per method and a
verdict that would have been VERIFIED becomes UNDECIDED naming it; the CLI exits 1.
"""

from __future__ import annotations


class AttnBoundsError(ValueError):
    """Base of the exceptions attnbounds raises on purpose (see module docstring)."""


class InvalidArgument(AttnBoundsError):
    """Bad input to a public attnbounds function, e.g. ``T must be > 0, got T=-1.0``."""


class NotApplicable(AttnBoundsError):
    """A hypothesis or requirement fails on this instance (not a bug, not bad input)."""


class CannotCertify(AttnBoundsError):
    """Interval arithmetic cannot decide this (unsupported operation, precision, infeasible check)."""


class CallableFailed(AttnBoundsError):
    """A user's callable normaliser failed on these logits (see module docstring); never a skipped draw."""
