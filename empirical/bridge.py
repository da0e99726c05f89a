"""The one place empirical/ talks to theory/: statements, their formulas, quantities and instances.

Bounds are never re-implemented here: every bound value is a side of a registered statement
(``attnbounds.theory.mathematics.registry``) evaluated by its own compiled formula on the quantities the kernels
computed (:func:`sides`), and the kernels' quantities are re-checked against the registered float forms
on sampled rows of every run (``empirical.checks``, through :func:`weights_instance` and :func:`compute`).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from attnbounds.theory.mathematics.instance import Instance
from attnbounds.theory.mathematics.normalisers import softmax
from attnbounds.theory.mathematics.quantities import compute
from attnbounds.theory.mathematics.registry import all_statements, get
from attnbounds.theory.mathematics.statement import SELECTED_WEIGHTS, Evaluation, Statement

__all__ = ["weights_instance", "logits_instance", "compute", "evaluate", "statement_ids", "with_observed", "sides"]


def weights_instance(alpha: np.ndarray, x: np.ndarray | None, N: int | None = None, **params: Any) -> Instance:
    """Rows as a theory Instance: the model's weights, token vectors ``x``, top-N selection."""
    return Instance.from_weights(alpha, x=x, N=N, **params)


def logits_instance(logits: np.ndarray, T: np.ndarray | float, *, v: np.ndarray | None = None,
                    eps: np.ndarray | float | None = None) -> Instance:
    """Softmax with temperature ``T`` on ``logits`` (paper eq. 3, ``F = exp(l / T)``)."""
    params: dict[str, Any] = {} if eps is None else {"eps": eps}
    arrays = None if v is None else {"v": v}
    return Instance.from_logits(logits, softmax(T=T), arrays=arrays, **params)


def evaluate(statement_id: str | Statement, inst: Instance) -> Evaluation:
    stmt = statement_id if isinstance(statement_id, Statement) else get(statement_id)
    return stmt.evaluate(inst)


def statement_ids(result: str) -> list[str]:
    """Every registered reading of ``result`` (e.g. ``theorem1.fixed``), in registry order."""
    return [s.id for s in all_statements() if s.result == result]


@functools.lru_cache(maxsize=None)
def with_observed(statement_id: str, symbol: str, parameter: str) -> Statement:
    """The statement with the quantity bound to ``symbol`` replaced by an instance parameter.

    Theorem 2 bounds ``E[N_s]/N`` over random sphere embeddings; the paper's Fig. 3 puts the same
    bounds next to the *observed* ``N_s/N``. Substituting the observed value for ``E_Ns`` evaluates
    exactly the registered formula without its Monte Carlo expectation. (``Statement.subs`` keys
    on an assumption-free Symbol and so misses ``E_Ns``, declared nonnegative; hence ``xreplace``.)
    """
    import dataclasses

    import sympy as sp

    stmt = get(statement_id)
    old = [sym for sym in stmt.relation.free_symbols if str(sym) == symbol]
    if not old:
        raise AssertionError(f"{statement_id} has no symbol {symbol!r}")  # a programming error, not bad input
    relation = stmt.relation.xreplace({old[0]: sp.Symbol(parameter, nonnegative=True)})
    bindings = {k: v for k, v in stmt.bindings.items() if k != symbol}
    return dataclasses.replace(stmt, id=f"{stmt.id}{{{symbol}={parameter}}}", relation=relation, bindings=bindings,
                               kind="deterministic", expectation_over=None)


def sides(stmt: str | Statement, values: dict[str, Any], selected: tuple[int, ...] | None = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """``(lhs, rhs)`` of a one-conjunct statement by its own compiled formula, broadcast together.

    ``values``: every symbol of the statement by its quantity name (bound symbols) or its own name
    (parameters), as arrays that broadcast together; ``selected``: the shape ``(..., N)`` of the per-token
    values a sum over ``I_N`` reads (the selected tokens, last axis), when the statement has one.
    """
    stmt = stmt if isinstance(stmt, Statement) else get(stmt)
    env: dict[str, np.ndarray] = {}
    for name in stmt.symbols():
        qname = stmt.bindings.get(name)
        env[name] = np.asarray(values[qname if qname is not None else name], dtype=np.float64)
    env[SELECTED_WEIGHTS] = np.ones(selected if selected is not None else (1, 1))
    (lhs, rhs), = stmt.sides_from(env)
    out = np.broadcast_arrays(lhs, rhs)
    return out[0], out[1]
