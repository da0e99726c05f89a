"""The sympy side of ``log F``: the logit and length symbols, stable ``softplus`` and ``sigmoid``, and the rewrites
that make every backend (float, ball, torch) evaluate ``log F`` and ``(log F)'`` without cancellation."""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp

#: The logit variable and the sequence length in every ``log F`` expression.
l_sym = sp.Symbol("l", real=True)
L_sym = sp.Symbol("L", positive=True, integer=True)


class softplus(sp.Function):
    """``log(1 + exp(x))``, evaluated stably (``np.logaddexp(0, x)``)."""

    is_real = True
    is_positive = True

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        return sigmoid(self.args[0])

    def _eval_rewrite_as_log(self, x: sp.Expr, **kwargs: Any) -> sp.Expr:
        return sp.log(1 + sp.exp(x))

    def _eval_evalf(self, prec: int) -> sp.Expr:
        return sp.log(1 + sp.exp(self.args[0]))._eval_evalf(prec)


class sigmoid(sp.Function):
    """``1 / (1 + exp(-x))``, evaluated stably."""

    is_real = True
    is_positive = True

    def fdiff(self, argindex: int = 1) -> sp.Expr:
        x = self.args[0]
        return sigmoid(x) * (1 - sigmoid(x))

    def _eval_rewrite_as_exp(self, x: sp.Expr, **kwargs: Any) -> sp.Expr:
        return 1 / (1 + sp.exp(-x))

    def _eval_evalf(self, prec: int) -> sp.Expr:
        return (1 / (1 + sp.exp(-self.args[0])))._eval_evalf(prec)


def np_sigmoid(x: np.ndarray) -> np.ndarray:
    """``1 / (1 + exp(-x))`` in float64 without overflow."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


NUMPY_MODULES: list[Any] = [{"softplus": lambda x: np.logaddexp(0.0, x), "sigmoid": np_sigmoid}, "numpy"]


def np_printer() -> Any:
    """The printer lambdify uses for the numpy kernels."""
    from sympy.printing.numpy import NumPyPrinter

    return NumPyPrinter({"strict": False, "fully_qualified_modules": False})


def torch_modules() -> list[Any]:
    """The functions lambdify maps ``log F``'s names to in torch."""
    import torch

    funcs = {"softplus": torch.nn.functional.softplus, "sigmoid": torch.sigmoid, "exp": torch.exp,
             "log": torch.log, "Max": lambda a, b: torch.clamp(a, min=b), "math": torch}
    return [funcs]


def complement_sigmoid(expr: sp.Expr) -> sp.Expr:
    """Rewrite ``c - c sigmoid(u)`` as ``c sigmoid(-u)``: the same number, without the cancellation that
    makes ``1 - sigmoid(u)`` lose every digit for large ``u`` (float: 0 where the value is ~e^-u)."""
    def fix(add: sp.Add) -> sp.Expr:
        terms = list(add.args)
        for t in list(terms):
            coeff, rest = t.as_coeff_Mul()
            if isinstance(rest, sigmoid) and -coeff in terms:
                terms.remove(t)
                terms.remove(-coeff)
                terms.append(-coeff * sigmoid(-rest.args[0]))
        return sp.Add(*terms, evaluate=False)

    return expr.replace(lambda e: isinstance(e, sp.Add), fix)


def derivative(log_F: sp.Expr, variable: sp.Symbol) -> sp.Expr:
    """``(log F)'`` in a form without cancellation (:func:`complement_sigmoid` after differentiating the
    stable ``log F``); every backend (float, ball, torch) evaluates this same expression."""
    return complement_sigmoid(sp.expand(sp.diff(stable_log(log_F), variable)))


def stable_log(expr: sp.Expr) -> sp.Expr:
    """Rewrite ``log(sigmoid(x))`` so that lambdify emits a stable kernel."""
    return expr.replace(
        lambda e: isinstance(e, sp.log) and isinstance(e.args[0], sigmoid),
        lambda e: -softplus(-e.args[0].args[0]),
    )
