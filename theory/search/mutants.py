"""Planted mutants: a statement with its right-hand sides scaled, to measure what the search can kill.

``scaled(statement, 0.97)`` tightens every conjunct ``lhs <= rhs`` to ``lhs <= 0.97 rhs`` (false
as soon as the bound is attained within 3 %); ``scaled(statement, 1.03)`` loosens it (true
whenever the statement is). The statement modules are not touched.
"""

from __future__ import annotations

import dataclasses

import sympy as sp

from attnbounds.theory.errors import InvalidArgument
from attnbounds.theory.statement import Statement, _conjuncts


def scaled(statement: Statement, factor: float) -> Statement:
    """``statement`` with every right-hand side multiplied by ``factor`` (id suffixed ``{rhs*factor}``)."""
    if not factor > 0:
        raise InvalidArgument(f"factor must be > 0, got {factor!r}")
    f = sp.Float(factor)
    parts = [sp.Le(c.lhs, c.rhs * f) for c in _conjuncts(statement.relation)]
    relation = parts[0] if len(parts) == 1 else sp.And(*parts)
    return dataclasses.replace(statement, id=f"{statement.id}{{rhs*{factor:g}}}", relation=relation)
