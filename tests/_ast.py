"""Reading the sources as syntax trees (tests that search the code for tables of names)."""

from __future__ import annotations

import ast


def strings(node: ast.AST) -> list[str]:
    """The string constants of a constant or of a literal tuple, list or set of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in strings(e)]
    return []
