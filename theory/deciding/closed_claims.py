"""Closed claims: a relation without a free symbol (``1 - (1 - 0.8)**2 >= 0.99``), decided exactly.

There is nothing to search: both sides are numbers. Decimal literals are read as the exact rationals they
spell (``0.8`` is ``4/5``; a fixed parameter substituted into the claim likewise, from its shortest decimal
form). Each conjunct ``lhs <= rhs`` is decided from ``rhs - lhs``: in exact rational arithmetic when both sides
are rational, else in arb balls at increasing precision (128 to 65536 bits) until the sign is certain, and an
exact zero is recognised by sympy. The verdict is PROVED when every conjunct holds, REFUTED when one fails
(with the exact values of both sides in the record), UNDECIDED when the sign cannot be settled.
"""

from __future__ import annotations

from typing import Any, TypedDict

import sympy as sp

from attnbounds.theory.mathematics.exact import PRECISIONS, sign_of
from attnbounds.theory.mathematics.statement import Verdict
from attnbounds.theory.mathematics.statement import Statement, conjuncts

#: decimal digits shown for each side
DIGITS = 30


def is_closed(statement: Statement) -> bool:
    """Whether the statement is a closed claim (no quantity, no free symbol)."""
    return not statement.bindings and not statement.relation.free_symbols


def _text(ops: Any, value: sp.Expr) -> str:
    from attnbounds.theory.mathematics.intervals import BallEvaluator

    if value.is_Rational:
        return sp.sstr(sp.Float(value, DIGITS)) if not value.is_Integer else str(value)
    with ops.precision(PRECISIONS[1]):
        return ops.text(BallEvaluator(ops, {})(value), DIGITS)


class ClosedClaim(TypedDict):
    """What a record says of a closed claim (``closed_claim``): each conjunct decided, the fixed values used."""

    conjuncts: list[dict[str, str]]
    fixed: dict[str, float]


def decide_conjunct(rel: sp.Rel, written: sp.Basic | None = None) -> dict[str, str]:
    """``{relation, lhs, rhs, lhs_decimal, rhs_decimal, margin, status, method}`` for one conjunct ``lhs <= rhs`` (or
    ``lhs < rhs``: strict, an exact 0 margin violates it), as :func:`conjuncts` writes it. The sides are reported as
    ``written`` has them (``a >= b``: lhs ``a``, rhs ``b``); the margin is by how much the conjunct holds (``rhs - lhs``
    of ``lhs <= rhs``, ``a - b`` of ``a >= b``): negative when it fails."""
    from attnbounds.theory.mathematics.intervals import backend

    strict = isinstance(rel, sp.Lt)
    lhs, rhs = rel.lhs.doit(), rel.rhs.doit()
    margin = sp.nsimplify(rhs - lhs) if (rhs - lhs).is_Rational else (rhs - lhs)
    sides = (rhs, lhs) if isinstance(written, (sp.GreaterThan, sp.StrictGreaterThan)) else (lhs, rhs)
    ops = backend(None)
    out = {"relation": sp.sstr(written if written is not None else rel), "lhs": sp.sstr(sides[0]),
           "rhs": sp.sstr(sides[1]), "margin": sp.sstr(margin)}
    sign, method = sign_of(margin)
    if sign is None:
        status = "undecided"
    elif sign == 0 and strict:
        status, method = "violated", method + ": the two sides are exactly equal, which the strict inequality excludes"
    else:
        status = "holds" if sign >= 0 else "violated"
    try:
        out["lhs_decimal"], out["rhs_decimal"] = _text(ops, sides[0]), _text(ops, sides[1])
    except Exception:  # noqa: BLE001 - a side the balls cannot print: its exact form is in the record
        out["lhs_decimal"], out["rhs_decimal"] = sp.sstr(sp.N(sides[0], DIGITS)), sp.sstr(sp.N(sides[1], DIGITS))
    out.update(status=status, method=method)
    return out


def written_conjuncts(statement: Statement) -> list[sp.Basic]:
    """The conjuncts as the statement writes them (``a >= b`` stays so), beside :func:`conjuncts`' ``lhs <= rhs``."""
    return list(statement.relation.args) if isinstance(statement.relation, sp.And) else [statement.relation]


def decide(statement: Statement) -> tuple[Verdict, str, ClosedClaim]:
    """``(verdict, reason, closed_claim)`` of a closed claim (module docstring)."""
    written = written_conjuncts(statement)
    parts = [decide_conjunct(rel, w) for rel, w in zip(conjuncts(statement.relation), written)]
    failed = [p for p in parts if p["status"] == "violated"]
    open_ = [p for p in parts if p["status"] == "undecided"]

    def show(p: dict[str, str]) -> str:
        return f"{p['relation']}: lhs = {p['lhs']} ({p['lhs_decimal']}), rhs = {p['rhs']} ({p['rhs_decimal']}); {p['method']}"

    verdict: Verdict
    if failed:
        verdict, reason = "REFUTED", "a closed claim, decided exactly: false; " + "; ".join(show(p) for p in failed)
    elif open_:
        verdict, reason = "UNDECIDED", "a closed claim whose sign could not be settled: " + "; ".join(show(p) for p in open_)
    else:
        verdict, reason = "PROVED", "a closed claim, decided exactly: true; " + "; ".join(show(p) for p in parts)
    return verdict, reason, ClosedClaim(conjuncts=parts,
                                        fixed={k: float(v) for k, v in sorted(statement.fixed.items())})
