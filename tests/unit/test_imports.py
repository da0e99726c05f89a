"""What the package's modules may import (issues 20, 32): read from the sources, function-local imports and
``if TYPE_CHECKING:`` blocks included (a type is a dependency too: no wing names a higher one even for a hint).

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
    """Every module ``path`` imports (absolute names), wherever the import stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = set()
    for node in ast.walk(tree):
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


def test_the_walk_sees_local_and_type_checking_imports(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tests.x\n"
                      "def f():\n    from attnbounds.empirical.cachedir import cache_dir\n")
    assert {"attnbounds.empirical.cachedir", "tests.x"} <= imported(source)


THEORY = "attnbounds.theory"


def _theory_module(path: Path) -> str:
    rel = path.relative_to(ROOT / "theory").with_suffix("").parts
    return ".".join((THEORY, *(rel[:-1] if rel[-1] == "__init__" else rel)))


def _theory_graph() -> dict[str, set[str]]:
    """Module -> the theory modules it imports (``from attnbounds.theory import x`` counts as importing ``x``; a
    module's own parent packages, which Python imports before it anyway, do not count)."""
    modules = {_theory_module(p): p for p in PACKAGE["theory"]}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    return {m: {t for n in imported(p) if n.startswith(THEORY + ".") for t in [resolve(n)]
                if t is not None and t != m and not m.startswith(t + ".")} for m, p in modules.items()}


def _wing(module: str) -> int:
    """The wing a theory module stands in (``attnbounds.theory.<wing>....``), by its place in the order."""
    from attnbounds.theory import WINGS

    head = module.removeprefix(THEORY + ".").split(".")[0]
    assert head in WINGS, f"{module} stands in no wing: every theory module lives in one of {WINGS}"
    return WINGS.index(head)


def test_every_theory_module_stands_in_one_wing_and_imports_only_downward() -> None:
    from attnbounds.theory import WINGS

    graph = _theory_graph()
    assert not graph[THEORY], f"attnbounds.theory itself imports {sorted(graph[THEORY])}"
    up = [f"{m} ({WINGS[_wing(m)]}) imports {t} ({WINGS[_wing(t)]})"
          for m, targets in sorted(graph.items()) if m != THEORY for t in sorted(targets)
          if _wing(t) > _wing(m)]
    assert not up, "\n".join(up)


def test_the_theory_has_no_import_circle() -> None:
    graph = _theory_graph()
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        if m in path:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(m):] + [m]))
        if m in done:
            return
        for t in sorted(graph.get(m, ())):
            visit(t, path + [m])
        done.add(m)

    for m in sorted(graph):
        visit(m, [])


def test_the_wing_check_sees_an_upward_import(tmp_path: Path, monkeypatch) -> None:
    """The check can fail: a mathematics module naming the CLI for a type hint (``if TYPE_CHECKING:``) is an upward
    import, and a module-level import back is a circle (at the type level)."""
    fake = tmp_path / "theory"
    for wing in ("mathematics", "running"):
        (fake / wing).mkdir(parents=True)
    (fake / "mathematics" / "instance.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                      "    from attnbounds.theory.running.cli import main\n")
    (fake / "running" / "cli.py").write_text("import attnbounds.theory.mathematics.instance\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "ROOT", tmp_path)
    monkeypatch.setitem(PACKAGE, "theory", sorted(fake.rglob("*.py")))
    graph = _theory_graph()
    instance, cli = f"{THEORY}.mathematics.instance", f"{THEORY}.running.cli"
    assert graph[instance] == {cli}
    assert _wing(cli) > _wing(instance)
    try:
        test_the_theory_has_no_import_circle()
    except AssertionError as exc:
        assert "import circle" in str(exc)
    else:
        raise AssertionError("the circle instance <-> cli was not seen")
