"""The one place empirical/ talks to theory/: instances from model rows, quantities, statements.

Bounds and quantities are never re-implemented here: every bound value is the ``rhs``/``lhs`` of a
registered statement (``attnbounds.theory.registry``) and every quantity a registered specification
(``attnbounds.theory.quantities``), evaluated on instances built from real tensors.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from attnbounds.empirical.rows import RowBatch
from attnbounds.theory.instance import Instance
from attnbounds.theory.normalisers import softmax
from attnbounds.theory.quantities import compute
from attnbounds.theory.registry import all_statements, get
from attnbounds.theory.statement import Evaluation, Statement

__all__ = ["weights_instance", "logits_instance", "compute", "evaluate", "statement_ids", "with_observed",
           "paper_r", "min_pairwise_distance", "inside_ball"]


def weights_instance(rows: RowBatch, N: int, **params: Any) -> Instance:
    """The rows as a theory Instance: the model's weights, token vectors ``x``, top-N selection."""
    return Instance.from_weights(rows.alpha, x=rows.x, N=N, **params)


def logits_instance(logits: np.ndarray, T: np.ndarray, *, v: np.ndarray | None = None,
                    eps: np.ndarray | None = None) -> Instance:
    """Softmax with temperature ``T`` (per row) on ``logits`` (paper eq. 3, ``F = exp(l / T)``)."""
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


# -- quantities of section 3 ---------------------------------------------------------------------------------
def paper_r(inst: Instance) -> np.ndarray:
    """The paper's radius (section 3): ``r = min_{i not in I_N} ||s - alpha_i x_i||_2`` (quantity ``r_paper``)."""
    return compute("r_paper", inst)


def inside_ball(inst: Instance, r: np.ndarray) -> np.ndarray:
    """``(B, L)``: selected tokens with ``||alpha_i x_i - s|| <= r`` (the relaxed Definition, token by token)."""
    return inst.mask & (compute("context_distance", inst) <= r[:, None])


def min_pairwise_distance(x: np.ndarray) -> np.ndarray:
    """``delta = min_{i != j} ||x_i - x_j||_2`` per row of ``x`` ``(B, L, d)`` (quantity ``delta_min``)."""
    B, L = x.shape[:2]
    return compute("delta_min", Instance.from_weights(np.full((B, L), 1.0 / L), x=x))
