"""The distribution: installed as ``attnbounds`` (never as top-level ``theory``, ``empirical``, ``proofs``), a
small public API, and every module loaded under one name only."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_OLD = re.compile(r"^\s*(from|import)\s+(theory|empirical|proofs)(\.|\s|$)", re.M)


def test_no_module_is_imported_under_a_second_name() -> None:
    """A module loaded as ``theory.x`` and as ``attnbounds.theory.x`` would hold two registries that disagree."""
    offenders = [str(p.relative_to(ROOT)) for d in ("theory", "empirical", "proofs", "attnbounds", "tests", "bench",
                                                     "examples")
                 for p in (ROOT / d).rglob("*.py") if _OLD.search(p.read_text(encoding="utf-8"))]
    assert not offenders, f"imports that bypass the attnbounds package: {offenders}"
    code = ("import sys, attnbounds, attnbounds.theory.mathematics.registry, attnbounds.theory.deciding.search, attnbounds.proofs, "
            "attnbounds.empirical.bridge, attnbounds.theory.running.cli\n"
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('theory', 'empirical', 'proofs'))\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT.parent)
    assert not [m for m in sys.modules if m.split(".")[0] in ("theory", "empirical", "proofs")]


def test_public_api() -> None:
    import attnbounds

    assert attnbounds.__version__ and "verify" in attnbounds.__all__ and "Instance" in attnbounds.__all__
    for name in attnbounds.__all__:
        assert getattr(attnbounds, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute"):
        attnbounds.not_a_thing  # noqa: B018
    assert (ROOT / "attnbounds" / "py.typed").exists()


def test_import_is_light() -> None:
    """``import attnbounds`` does not pull torch, transformers, matplotlib or sympy."""
    code = "import sys, attnbounds; heavy = {'torch', 'transformers', 'matplotlib', 'sympy'} & set(sys.modules); " \
           "assert not heavy, heavy"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT.parent)


def test_wheel_installs_as_attnbounds_only(tmp_path: Path) -> None:
    """``pip install .`` (a wheel, not editable) works from a directory outside the repository, holds every module
    and the stored counterexamples (package data), and ``import theory`` fails there."""
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
                    str(ROOT)], check=True, capture_output=True)
    wheel = next(wheels.glob("attnbounds-*.whl"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith((".dist-info", ".data")) and p.name != "bin") == ["attnbounds"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}
    run = lambda code: subprocess.run([sys.executable, "-c", code], cwd=elsewhere, env=env,  # noqa: E731
                                      capture_output=True, text=True)
    ok = run("import attnbounds, attnbounds.theory.mathematics.registry as r; print(attnbounds.__version__, "
             "attnbounds.theory.mathematics.registry.__file__, len(r.ids()))")
    assert ok.returncode == 0, ok.stderr
    assert str(target) in ok.stdout
    installed = {p.relative_to(target / "attnbounds").as_posix() for p in (target / "attnbounds").rglob("*.py")}
    sources = {f"{d}/{p.relative_to(ROOT / d).as_posix()}" for d in ("theory", "empirical", "proofs")
               for p in (ROOT / d).rglob("*.py")}
    assert sources <= installed, f"modules the wheel leaves out (pyproject's package list): {sorted(sources - installed)}"
    stored = run("from attnbounds.theory.io import counterexamples as c; print(c.DIRECTORY, len(c.stored_ids()))")
    assert stored.returncode == 0, stored.stderr
    where, count = stored.stdout.split()
    assert where.startswith(str(target)) and int(count) == len(list((ROOT / "theory" / "data" / "counterexamples")
                                                                    .glob("*.json"))) > 0, stored.stdout
    for name in ("theory", "empirical", "proofs"):
        failed = run(f"import {name}")
        assert failed.returncode != 0 and "ModuleNotFoundError" in failed.stderr, (name, failed.stderr)


def test_docs_and_examples_teach_the_public_api_only() -> None:
    """``docs/user-bounds.md``'s code and ``examples/`` name ``attnbounds.*`` (``__all__``), never a sub-module."""
    import attnbounds

    texts = {"docs/user-bounds.md": (ROOT / "docs" / "user-bounds.md").read_text(encoding="utf-8")}
    texts.update({f"examples/{p.name}": p.read_text(encoding="utf-8") for p in (ROOT / "examples").iterdir()
                  if p.suffix in (".py", ".ipynb")})
    inner = re.compile(r"attnbounds\.(theory|empirical|proofs)\b")
    offenders = {name: sorted(set(m.group(0) for m in inner.finditer(text))) for name, text in texts.items()
                 if inner.search(text)}
    assert not offenders, offenders
    named = {m.group(1) for text in texts.values() for m in re.finditer(r"\battnbounds\.([A-Za-z_]\w*)", text)}
    assert named - {"__version__"} <= set(attnbounds.__all__), sorted(named - set(attnbounds.__all__))
