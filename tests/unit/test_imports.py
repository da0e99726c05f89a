"""What the package's modules may import (issue 20): read from the sources, function-local imports included,
``if TYPE_CHECKING:`` blocks left out.

- nothing in the package imports the test instruments (``tests``) or the benchmarks (``bench``): an installed
  wheel has neither;
- the theory imports nothing from the experiments (``attnbounds.empirical``): the experiments stand on the theory
  (the cache folder is found in ``theory.cachedir``); only the CLI names ``attnbounds empirical`` as a command.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = {d: sorted((ROOT / d).rglob("*.py")) for d in ("theory", "proofs", "empirical", "attnbounds")}


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names), outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def _offenders(dirs: tuple[str, ...], forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    return [f"{p.relative_to(ROOT)} imports {m}" for d in dirs for p in PACKAGE[d]
            if p.relative_to(ROOT).as_posix() not in allowed
            for m in sorted(imported(p)) if m.split(".")[0] in forbidden or m.startswith(forbidden)]


def test_the_package_imports_no_test_instrument_or_benchmark() -> None:
    found = _offenders(tuple(PACKAGE), ("tests", "bench", "_util"))
    assert not found, "\n".join(found)


def test_the_theory_stands_below_the_experiments() -> None:
    found = _offenders(("theory", "proofs"), ("attnbounds.empirical",))
    assert not found, "\n".join(found)


def test_the_walk_sees_local_imports_and_skips_type_checking(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tests.x\n"
                      "def f():\n    from attnbounds.empirical.cachedir import cache_dir\n")
    assert "attnbounds.empirical.cachedir" in imported(source) and "tests.x" not in imported(source)
