"""Running a verification: ``verify`` (one verdict ladder for every path), the public API and the CLI.

The top wing: it may import from every other.
"""
