"""A differentiable (torch) evaluator for statements, for gradient search.

Mirrors the float evaluator: each quantity's ``torch`` form (registered on its specification,
:mod:`attnbounds.theory.mathematics.quantities`) computes it from a
:class:`~attnbounds.theory.mathematics.quantities.torch_state.State` (the selection is held
fixed within a step), and each side of the statement's sympy relation is lambdified with torch
functions. It only steers the search: every instance it produces is re-evaluated by the float
evaluator (and certified) before anything is reported.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, cast

import sympy as sp

from attnbounds.theory.deciding.margins import relative_margin
from attnbounds.theory.mathematics.quantities import QUANTITIES
from attnbounds.theory.mathematics.quantities.torch_state import State, as_tensor, for_torch, import_torch, torch_modules, torch_printer
from attnbounds.theory.mathematics.statement import Statement, conjuncts, indexed_to_symbol

if TYPE_CHECKING:
    from torch import Tensor


def supports(statement: Statement) -> bool:
    """Whether every quantity of the statement has a torch form and the relation has no ``Piecewise``."""
    read = [*statement.bindings.values(), *(v for k, v in statement.defaults.items()
                                            if isinstance(v, str) and k in statement.parameters())]
    if not all(QUANTITIES[q].has("torch") for q in read):
        return False
    return not statement.relation.has(sp.Piecewise)


# -- the relation -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def _side(expr: sp.Expr) -> tuple[tuple[str, ...], Callable[..., Any]]:
    names = tuple(sorted(str(s) for s in expr.free_symbols))
    return names, sp.lambdify([sp.Symbol(n) for n in names], for_torch(expr), modules=torch_modules(), printer=torch_printer())


def gap(statement: Statement, state: State) -> Tensor:
    """Per instance the largest normalised gap ``-relative_margin(lhs, rhs)`` over conjuncts and columns.

    Positive means violated; maximising it pushes towards (and past) equality.
    """
    torch = import_torch()
    env: dict[str, Any] = {}
    for name in sorted(statement.symbols()):  # a fixed order: autograd sums gradients in graph order
        q = statement.bindings.get(name)
        default = statement.defaults.get(name)
        if q is None and isinstance(default, str) and name not in state.params:  # a default computed from a quantity
            q = default
        value = QUANTITIES[q].forms["torch"](state) if q is not None else state.param(name)
        env[name] = value[:, None] if value.ndim == 1 else value
    if state.N is not None:
        env["__selected_weights__"] = state.mult * (state.mask & state.present)
    worst = None
    for c, rel in enumerate(conjuncts(statement.relation)):
        sides = []
        for expr in (rel.lhs, rel.rhs):
            sides.append(as_tensor(_evaluate(expr, env)))
        lhs, rhs = torch.broadcast_tensors(*(s.reshape(state.B, -1) if s.ndim else s.expand(state.B, 1) for s in sides))
        g = -relative_margin(lhs, rhs)
        kind = statement.token_kinds[c]
        if lhs.shape[1] > 1 and kind != "none":
            cols = (state.mask & state.present) if kind == "selected" else state.present
            g = torch.where(cols, g, torch.full_like(g, -float("inf")))
        g = g.max(-1).values
        worst = g if worst is None else torch.maximum(worst, g)
    return cast("Tensor", worst)  # a relation has at least one conjunct


def _evaluate(expr: sp.Expr, env: dict[str, Any]) -> Any:
    """One side in torch: ``Sum`` over the selected tokens as a weighted sum over columns."""
    torch = import_torch()
    local = dict(env)
    replace = {}
    for k, node in enumerate(sorted(expr.atoms(sp.Sum), key=sp.default_sort_key)):
        body = indexed_to_symbol(node.function)
        names, fn = _side(body)
        w = env["__selected_weights__"]
        value = as_tensor(fn(*(local[n] for n in names)))
        local[f"_sum{k}"] = (torch.broadcast_to(value, w.shape) * w).sum(-1, keepdim=True)
        replace[node] = sp.Symbol(f"_sum{k}")
    names, fn = _side(indexed_to_symbol(expr.xreplace(replace)))
    return fn(*(local[n] for n in names))
