"""A quantity is asked through its specification, never looked up in a table of names (issue 32).

The verifier's sources (``theory/``, but the quantity modules that define the quantities and the statement modules
that bind them) are parsed, not imported, and searched for literal tables (tuples, lists, sets, dict keys) naming two
or more quantities, and for a quantity's name compared with ``==`` / ``in``: what ``Quantity.closed_form``,
``Quantity.autograd``, ``Quantity.F_extremes`` and ``Quantity.reads_logit_bound`` replaced.
"""

from __future__ import annotations

import ast
from pathlib import Path


from attnbounds.theory.mathematics.quantities import QUANTITIES
from tests._ast import strings

ROOT = Path(__file__).resolve().parents[2]
HOMES = (ROOT / "theory" / "mathematics" / "quantities", ROOT / "theory" / "mathematics" / "statements")
SOURCES = [p for p in sorted((ROOT / "theory").rglob("*.py")) if not any(p.is_relative_to(h) for h in HOMES)]


def _findings(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Compare):
            named = [s for o in (node.left, *node.comparators) for s in strings(o) if s in QUANTITIES]
            if named:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} compares {named}")
        elif isinstance(node, (ast.Dict, ast.Set, ast.Tuple, ast.List)):
            keys = node.keys if isinstance(node, ast.Dict) else node.elts
            named = sorted({s for k in keys if k is not None for s in strings(k) if s in QUANTITIES})
            if len(named) >= 2:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} keeps a table of {named}")
    return out


def test_the_fields_that_replaced_the_tables_are_set() -> None:
    assert {q for q, spec in QUANTITIES.items() if spec.autograd} == {"J_spectral", "J_frobenius", "J_row", "J_entry"}
    assert {q for q, spec in QUANTITIES.items() if spec.F_extremes} == {"C_1", "C_2"}
    assert {q for q, spec in QUANTITIES.items() if spec.reads_logit_bound} == {"C_1", "C_2", "logit_absmax"}
    assert QUANTITIES["alpha_max"].closed_form and not QUANTITIES["J_spectral"].closed_form


def test_no_quantity_name_is_kept_in_a_table_outside_its_specification() -> None:
    found = [f for p in SOURCES for f in _findings(p)]
    assert not found, "\n".join(found)
