"""attnbounds test suite (a package so that ``tests.conftest`` puts the repository root, not ``tests/``, on sys.path)."""
