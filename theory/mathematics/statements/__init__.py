"""One module per result of the paper; each exposes ``STATEMENTS``, a tuple of readings."""
