"""The torch backend's instance: a batch as float64 tensors (:class:`State`), on which each quantity's ``torch``
form is registered (:mod:`attnbounds.theory.mathematics.quantities`), the normaliser's ``log F`` in torch, and the
sympy-to-torch printing the torch forms of formulas use (:mod:`attnbounds.theory.deciding.search.torch_eval`).

torch is imported when a function here first needs it (the mathematics loads without it).
"""

from __future__ import annotations

import functools
import math as mathlib
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, cast

import numpy as np
import sympy as sp
from sympy.printing.lambdarepr import LambdaPrinter

from attnbounds.theory.mathematics.instance import Columns
from attnbounds.theory.mathematics.intervals import Unsupported
from attnbounds.theory.mathematics.normalisers import L_sym, RatioNormaliser, derivative, l_sym, stable_log

if TYPE_CHECKING:
    from torch import Tensor

#: an elementwise map of tensors (log F, (log F)', the weights of other logits)
TensorMap = Callable[["Tensor"], "Tensor"]


def import_torch() -> Any:
    import torch

    return torch


@dataclass
class State(Columns):
    """Tensors of one batch: weights and what they are computed from, plus parameters ``(B,)``.

    ``mult`` holds the tokens per column (ones for a dense instance); ``selection`` a fixed selection
    (token classes), else the top-N set is taken from the current weights.
    """

    alpha: Any
    logits: Any
    N: int | None
    params: dict[str, Any]
    x: Any = None
    q: Any = None
    k: Any = None
    v: Any = None
    weights_fn: TensorMap | None = None  # logits -> alpha (finite differences)
    log_F: TensorMap | None = None  # elementwise log F (Lemma 1 constants)
    dlog_F: TensorMap | None = None  # elementwise (log F)'
    counts: np.ndarray | None = None
    selection: Any = None
    critical_points: tuple[float, ...] = ()
    cache: dict[str, Any] = field(default_factory=dict)

    TINY = 1e-300

    @property
    def mult(self) -> Tensor:
        if "mult" not in self.cache:
            torch = import_torch()
            self.cache["mult"] = torch.ones_like(self.alpha) if self.counts is None else \
                torch.as_tensor(self.counts, dtype=torch.float64)
        return self.cache["mult"]

    @property
    def present(self) -> Tensor:
        return self.mult > 0

    def count_groups(self) -> list[tuple[tuple[int, ...], np.ndarray]]:
        """The rows by count vector: ``[(counts, row indices)]`` (one group for dense rows; token-class rows split
        at the top-N boundary differ from row to row)."""
        if self.counts is None:
            return [((1,) * self.K, np.arange(self.B))]
        rows, inverse = np.unique(np.asarray(self.counts, dtype=np.int64), axis=0, return_inverse=True)
        return [(tuple(int(c) for c in row), np.flatnonzero(inverse.ravel() == g)) for g, row in enumerate(rows)]

    @property
    def mask(self) -> Tensor:
        if "mask" not in self.cache:
            torch = import_torch()
            if self.selection is not None:
                self.cache["mask"] = torch.as_tensor(self.selection)
            else:
                order = torch.argsort(-self.alpha.detach(), dim=-1, stable=True)[:, : self.N]
                m = torch.zeros_like(self.alpha, dtype=torch.bool)
                self.cache["mask"] = m.scatter(1, order, True)
        return self.cache["mask"]

    @property
    def top_N(self) -> int:
        """The selection's size N (quantities of a top-N set need one)."""
        if self.N is None:
            raise Unsupported("this batch has no top-N selection (N is not set)")
        return self.N

    def log_F_of(self, logits: Tensor) -> Tensor:
        """Elementwise ``log F`` of the batch's ratio normaliser."""
        return self._given(self.log_F, "log F")(logits)

    def dlog_F_of(self, logits: Tensor) -> Tensor:
        """Elementwise ``(log F)'`` of the batch's ratio normaliser."""
        return self._given(self.dlog_F, "(log F)'")(logits)

    def weights_of(self, logits: Tensor) -> Tensor:
        """The normaliser's weights of other logits (finite differences)."""
        return self._given(self.weights_fn, "weights map")(logits)

    @staticmethod
    def _given(fn: TensorMap | None, what: str) -> TensorMap:
        if fn is None:
            raise Unsupported(f"this batch has no {what} in torch (its normaliser is not a ratio normaliser)")
        return fn

    def param(self, name: str) -> Tensor:
        torch = import_torch()
        if name == "L":
            return torch.full((self.B,), float(self.L), dtype=torch.float64)
        if name == "N":
            return torch.full((self.B,), float(cast(int, self.N)), dtype=torch.float64)
        return self.params[name]

    def norm(self, v: Tensor, dim: int = -1) -> Tensor:
        """Euclidean norm with a finite gradient at 0."""
        return ((v * v).sum(dim) + self.TINY).sqrt()

    def distances(self, u: Tensor, v: Tensor) -> Tensor:
        """``||u_bi - v_bj||`` for ``u`` ``(B, I, d)`` and ``v`` ``(B, J, d)``, as ``(B, I, J)``: the Gram form
        ``||u||^2 + ||v||^2 - 2 <u, v>`` (one batched product, no ``(B, I, J, d)`` difference), with the entries it
        loses to cancellation (squared distance below ``CANCELLATION`` times ``||u||^2 + ||v||^2``, as the float
        form's :func:`~attnbounds.theory.mathematics.quantities._float.distances`) recomputed from the vectors."""
        torch = import_torch()
        from attnbounds.theory.mathematics.quantities._float import CANCELLATION

        uu, vv = (u * u).sum(-1), (v * v).sum(-1)
        scale = uu[:, :, None] + vv[:, None, :]
        d2 = scale - 2 * torch.einsum("bid,bjd->bij", u, v)
        out = (d2.clamp(min=0) + self.TINY).sqrt()
        bad = torch.nonzero(~(d2.detach() > CANCELLATION * scale.detach()), as_tuple=True)
        if bad[0].numel():
            b, i, j = bad
            out = out.index_put(bad, self.norm(u[b, i] - v[b, j]))
        return out

    def masked(self, values: Tensor, mask: Tensor, how: str) -> Tensor:
        """Min or max of ``values`` over the columns where ``mask`` holds."""
        torch = import_torch()
        fill = torch.full_like(values, float("inf") if how == "min" else -float("inf"))
        picked = torch.where(mask, values, fill)
        return picked.min(-1).values if how == "min" else picked.max(-1).values

    def others(self, values: Tensor) -> Tensor:
        """``sum_{j != i} values_j`` over the other tokens, for a token of each column ``(B, K)``: summed
        term by term (no ``total - own`` cancellation when one column dominates)."""
        torch = import_torch()
        eye = torch.eye(self.K, dtype=torch.float64)
        weights = self.mult[:, None, :] * (1 - eye)[None] + torch.diag_embed(self.mult - 1)
        return (weights * values[:, None, :]).sum(-1)

    def context(self) -> Tensor:
        if "s" not in self.cache:
            self.cache["s"] = ((self.alpha * self.mult * self.mask)[..., None] * self.x).sum(1)
        return self.cache["s"]


# -- formulas in torch -------------------------------------------------------------------------------
def as_tensor(v: Any) -> Tensor:
    torch = import_torch()
    return v if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=torch.float64)


def torch_modules() -> list[Any]:
    torch = import_torch()

    def tmin(*args: Any) -> Tensor:
        return functools.reduce(torch.minimum, [as_tensor(a) for a in args])

    def tmax(*args: Any) -> Tensor:
        return functools.reduce(torch.maximum, [as_tensor(a) for a in args])

    funcs = {"sqrt": lambda v: torch.sqrt(as_tensor(v)), "exp": lambda v: torch.exp(as_tensor(v)), "log": lambda v: torch.log(as_tensor(v))}
    math = types.SimpleNamespace(**funcs, pi=mathlib.pi, e=mathlib.e)  # the printer may write math.exp(...)
    return [{"tmin": tmin, "tmax": tmax, "tabs": lambda v: torch.abs(as_tensor(v)), **funcs, "math": math,
             "softplus": torch.nn.functional.softplus, "sigmoid": torch.sigmoid}, "torch"]


class _TorchPrinter(LambdaPrinter):
    """Python source for torch: an integer or rational beyond 2^53 written as the nearest double (``inf`` past the
    double range), since a Python int times a tensor must fit a double (``(2*T*J)**1000`` expands to 2^1000 J^1000 T^1000)."""

    def _print_Integer(self, expr: sp.Integer) -> str:
        return super()._print_Integer(expr) if abs(int(expr)) <= 2**53 else _double(expr)

    def _print_Rational(self, expr: sp.Rational) -> str:
        if max(abs(int(expr.p)), int(expr.q)) <= 2**53:
            return str(super()._print_Rational(expr))
        return _double(expr)


def _double(expr: sp.Rational) -> str:
    value = float(sp.Float(expr, 20)) if abs(expr) < sp.Float("1.8e308") else float("inf") * int(sp.sign(expr))
    return repr(value) if value == value and abs(value) != float("inf") else f"float('{value}')"


def torch_printer() -> LambdaPrinter:
    return _TorchPrinter({"strict": False})


_TMIN, _TMAX, _TABS = sp.Function("tmin"), sp.Function("tmax"), sp.Function("tabs")


def for_torch(expr: sp.Expr) -> sp.Expr:
    return (expr.replace(lambda e: isinstance(e, sp.Min), lambda e: _TMIN(*e.args))
            .replace(lambda e: isinstance(e, sp.Max), lambda e: _TMAX(*e.args))
            .replace(lambda e: isinstance(e, sp.Abs), lambda e: _TABS(*e.args)))


# -- normalisers ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _log_F_fns(log_F: sp.Expr, names: tuple[str, ...]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    pos = {sp.Symbol(n): sp.Symbol(n, positive=True) for n in names}
    expr = log_F.subs(pos)
    args = (l_sym, L_sym, *(pos[sp.Symbol(n)] for n in names))
    mods, printer = torch_modules(), torch_printer()
    f = sp.lambdify(args, for_torch(stable_log(expr)), modules=mods, printer=printer)
    df = sp.lambdify(args, for_torch(derivative(expr, l_sym)), modules=mods, printer=printer)
    return f, df


def ratio_fns(normaliser: RatioNormaliser, T: Any, L: int | None = None) -> tuple[TensorMap, TensorMap]:
    """Elementwise ``log F`` and ``(log F)'`` in torch, with the temperature ``T`` a ``(B,)`` tensor and ``L``
    the context length (default: the columns of the logits)."""
    torch = import_torch()
    names = tuple(sorted(normaliser.values))
    f, df = _log_F_fns(normaliser.log_F, names)

    def args(lg: Any) -> list[Any]:
        out = [torch.tensor(float(lg.shape[-1] if L is None else L), dtype=torch.float64)]
        for n in names:
            v = T if n == "T" else torch.as_tensor(np.asarray(normaliser.values[n], dtype=np.float64))
            out.append(v[:, None] if v.ndim == 1 else v)
        return out

    return (lambda lg: f(lg, *args(lg)) + torch.zeros_like(lg)), (lambda lg: df(lg, *args(lg)) + torch.zeros_like(lg))



def state_of(inst: Any, *, recompute_selection: bool = False) -> State:
    """A :class:`State` holding a float instance as float64 tensors (no gradients), for comparing the torch
    forms with the float forms (the cross-check of forms) and for starting gradient ascent. The weights come from the
    normaliser's torch map (ratio normalisers) or are taken as given; the selection is the instance's own
    unless ``recompute_selection`` (dense instances: the top-N set of the current weights)."""
    torch = import_torch()
    t = lambda a: None if a is None else torch.as_tensor(np.asarray(a, dtype=np.float64))  # noqa: E731
    n = inst.normaliser
    params = {k: t(v) for k, v in inst.params.items()}
    logits = t(inst.logits)
    counts = inst.counts
    log_F = dlog_F = None
    weights_fn = None
    critical: tuple[float, ...] = ()
    if isinstance(n, RatioNormaliser) and logits is not None:
        T = params.get("T", torch.ones(inst.B, dtype=torch.float64))
        log_F, dlog_F = ratio_fns(n, T, inst.L)
        if counts is None:
            weights_fn = lambda lg: torch.softmax(log_F(lg), dim=-1)  # noqa: E731
        else:
            m = torch.as_tensor(counts, dtype=torch.float64)
            weights_fn = lambda lg: torch.softmax(log_F(lg) + torch.log(m), dim=-1) / m.clamp(min=1.0)  # noqa: E731
        try:
            critical = tuple(float(c) for c in n._critical_points)
        except Exception:  # noqa: BLE001 - only Lemma 1's torch constants need them
            critical = ()
    elif n is not None and logits is not None:
        weights_fn = lambda lg: n.torch_weights(lg, counts)  # noqa: E731
    alpha = weights_fn(logits) if weights_fn is not None else t(inst.alpha)
    selection = None if (inst.N is None or (recompute_selection and counts is None)) else torch.as_tensor(inst.mask)
    return State(alpha=alpha, logits=logits, N=inst.N, params=params, x=t(inst.x), q=t(inst.q), k=t(inst.k),
                 v=t(inst.arrays.get("v")), weights_fn=weights_fn, log_F=log_F, dlog_F=dlog_F, counts=counts,
                 selection=selection, critical_points=critical)
