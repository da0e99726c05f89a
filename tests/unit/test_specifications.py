"""Hypotheses and cost classes are asked through their specifications, never compared by name (issue 20).

The package's sources are parsed (not imported) and searched for the patterns the specifications replaced: a
hypothesis id or a cost-class name compared with ``==`` / ``in``, an id prefix tested with ``startswith``, and
tables keyed by several ids or cost classes outside the module that defines them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from attnbounds.theory.mathematics import hypotheses
from attnbounds.theory.mathematics.hypotheses import DOMAIN_PREFIX, DOMAINS, FIXED_HYPOTHESIS, RANGES_HYPOTHESIS, Hypothesis, domain_id
from attnbounds.theory.mathematics.quantities import COSTS
from attnbounds.theory.io.userbounds import hypothesis_catalogue
from tests._ast import strings

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = [p for d in ("theory", "proofs", "empirical") for p in sorted((ROOT / d).rglob("*.py"))]
HYPOTHESIS_IDS = frozenset(hypothesis_catalogue()) | {domain_id(n) for n in DOMAINS} | {FIXED_HYPOTHESIS, RANGES_HYPOTHESIS}
PREFIXES = (DOMAIN_PREFIX, "normaliser(")
COST_NAMES = frozenset(COSTS)
#: where each kind of name is defined (and may be spelt)
HOMES = {"hypothesis": {ROOT / "theory" / "mathematics" / "hypotheses.py"}, "cost": {ROOT / "theory" / "mathematics" / "quantities" / "spec.py"}}


def _names(node: ast.AST) -> set[str]:
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
            if isinstance(n, (ast.Attribute, ast.Name))}


def _findings(path: Path, kind: str, names: frozenset[str], subjects: set[str]) -> list[str]:
    """``path:line`` of every comparison of a name of ``kind`` with a subject that holds one, and of every table
    keyed by two or more of them."""
    if path in HOMES[kind]:
        return []
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [s for o in operands for s in strings(o) if s in names]
            if named and _names(node) & subjects:
                out.append(f"{where}:{node.lineno} compares {named}")
        elif kind == "hypothesis" and isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "startswith" and any(s.startswith(PREFIXES) for a in node.args for s in strings(a)):
            out.append(f"{where}:{node.lineno} tests an id prefix")
        elif isinstance(node, (ast.Dict, ast.Set, ast.Tuple, ast.List)):
            keys = node.keys if isinstance(node, ast.Dict) else node.elts
            named = [s for k in keys if k is not None for s in strings(k) if s in names]
            if len(set(named)) >= 2:
                out.append(f"{where}:{node.lineno} keeps a table of {sorted(set(named))}")
    return out


def test_the_catalogue_is_what_is_searched_for() -> None:
    assert {"softmax", "simplex", "top-N", "L>=2", "logits-qk", "domain(T)"} <= HYPOTHESIS_IDS
    assert {"weights", "jacobian", "softmax-jacobian", "subsets", "sphere"} <= COST_NAMES
    assert all(isinstance(h, Hypothesis) for h in hypothesis_catalogue().values())


@pytest.mark.parametrize("kind", ["hypothesis", "cost"])
def test_no_name_is_compared_outside_its_specification(kind: str) -> None:
    names, subjects = ((HYPOTHESIS_IDS, {"id", "hid", "hyps", "hypothesis_id", "hypotheses"}) if kind == "hypothesis"
                       else (COST_NAMES, {"cost_class", "cls", "cost", "name"}))
    found = [f for p in PACKAGE for f in _findings(p, kind, names, subjects)]
    assert not found, "\n".join(found)


def test_the_search_for_comparisons_finds_them(tmp_path: Path) -> None:
    """The patterns the test looks for are found when they are there (the test can fail)."""
    bad = tmp_path / "bad.py"
    bad.write_text('BALL = ("simplex", "top-N")\nok = any(h.id == "L>=2" for h in hyps)\n'
                   'named = h.id.startswith("normaliser(")\nRATES = {"weights": 1, "sphere": 2}\n'
                   'quad = plan.cost_class == "jacobian"\n')
    hyp = _findings(bad, "hypothesis", HYPOTHESIS_IDS, {"id", "hyps"})
    cost = _findings(bad, "cost", COST_NAMES, {"cost_class"})
    assert len(hyp) == 3 and len(cost) == 2, (hyp, cost)


def test_every_hypothesis_says_how_it_is_certified() -> None:
    for h in hypothesis_catalogue().values():
        assert h.certification in ("ball", "construction", "exact", "float"), h.id
        assert h.min_L >= 1
    assert hypotheses.LOGITS_BOUNDED.certification == "ball" and hypotheses.SOFTMAX.certification == "exact"
    assert hypotheses.INDEPENDENT_HEADS.certification == "construction"
    assert hypotheses.SIMPLEX.normaliser == "weights" and hypotheses.SOFTMAX.normaliser == "form"
