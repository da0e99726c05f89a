"""The one place empirical/ talks to theory/: instances from model rows, quantities, statements.

Bounds are never re-implemented here: every bound value is the ``rhs``/``lhs`` of a registered
statement (``theory.registry``) evaluated on instances built from real tensors (DESIGN.md).
The private helpers at the bottom compute things theory/ has no public quantity for yet.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from empirical.rows import RowBatch
from theory.instance import Instance
from theory.normalisers import softmax
from theory.quantities import compute
from theory.registry import all_statements, get
from theory.statement import Evaluation, Statement

__all__ = ["weights_instance", "logits_instance", "compute", "evaluate", "statement_ids", "with_observed",
           "paper_r", "min_pairwise_distance", "inside_ball"]


def weights_instance(rows: RowBatch, N: int, **params: Any) -> Instance:
    """The rows as a theory Instance: the model's weights, token vectors ``x``, top-N selection."""
    return Instance.from_weights(rows.alpha, x=rows.x, N=N, **params)


def logits_instance(logits: np.ndarray, T: np.ndarray, *, v: np.ndarray | None = None,
                    eps: np.ndarray | None = None) -> Instance:
    """Softmax with temperature ``T`` (per row) on ``logits`` (paper eq. 3, ``F = exp(l / T)``)."""
    params = {} if eps is None else {"eps": eps}
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


# -- private helpers: quantities theory/ does not expose (listed in the hand-over note) ----------
def paper_r(inst: Instance) -> np.ndarray:
    """The paper's radius (section 3): ``r = min_{i not in I_N} ||s - alpha_i x_i||_2``, ``(B,)``.

    TODO(theory): move to theory.quantities as a named quantity.
    """
    x, a, mask = inst.x, inst.alpha, inst.mask
    s = np.einsum("bl,bld->bd", np.where(mask, a, 0.0), x)
    dist = np.linalg.norm(a[..., None] * x - s[:, None, :], axis=-1)
    return np.where(mask, np.inf, dist).min(-1)


def inside_ball(inst: Instance, r: np.ndarray) -> np.ndarray:
    """``(B, L)``: selected tokens with ``||alpha_i x_i - s|| <= r`` (the relaxed Definition's count, per token).

    TODO(theory): theory.quantities._separable_counts computes the same test but returns counts only.
    """
    x, a, mask = inst.x, inst.alpha, inst.mask
    s = np.einsum("bl,bld->bd", np.where(mask, a, 0.0), x)
    dist = np.linalg.norm(a[..., None] * x - s[:, None, :], axis=-1)
    return mask & (dist <= r[:, None])


def min_pairwise_distance(x: np.ndarray) -> np.ndarray:
    """``delta = min_{i != j} ||x_i - x_j||_2`` per row of ``x`` ``(B, L, d)`` (Assumption 2, empirical).

    The Gram form locates the closest pair; its distance is then recomputed directly, so near-equal
    vectors do not lose accuracy to cancellation. TODO(theory): a named quantity.
    """
    import torch

    xt = torch.from_numpy(np.ascontiguousarray(x))
    sq = (xt * xt).sum(-1)
    d2 = sq[:, :, None] + sq[:, None, :] - 2.0 * torch.bmm(xt, xt.transpose(1, 2))
    L = x.shape[1]
    d2.diagonal(dim1=1, dim2=2).fill_(float("inf"))
    flat = d2.reshape(x.shape[0], -1).argmin(-1).numpy()
    i, j = np.divmod(flat, L)
    b = np.arange(x.shape[0])
    return np.linalg.norm(x[b, i] - x[b, j], axis=-1)
