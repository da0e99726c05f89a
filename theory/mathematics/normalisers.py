"""The normalisers ``F`` of paper eq. (3): ``alpha_i = F(l_i, theta) / sum_j F(l_j, theta)``.

Ratio normalisers are defined by one sympy expression for ``log F(l; theta, L)``; their
weights, closed-form Jacobian and torch version are all generated from it, and the hypotheses
they satisfy (F positive, F independent of L) are computed from it, never declared by hand.
Maps that are not of the form F / sum F (sparsemax, entmax-1.5, sigmoid attention) are
:class:`SimplexMap` subclasses with their own closed forms; they satisfy neither hypothesis.

Every kernel works on a batch ``logits`` of shape ``(B, L)`` and is stable for
``T`` in ``[1e-4, 1e3]`` and ``|l| <= 1e3`` (log-sum-exp, no overflow).
"""

from __future__ import annotations

import contextlib
import functools
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import numpy as np
import sympy as sp
from sympy.printing.lambdarepr import LambdaPrinter

from attnbounds.theory.mathematics.errors import InvalidArgument, NotApplicable
from attnbounds.theory.mathematics.validation import as_float_array, nonnegative, positive

if TYPE_CHECKING:
    from torch import Tensor

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


def _np_sigmoid(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_NUMPY_MODULES: list[Any] = [{"softplus": lambda x: np.logaddexp(0.0, x), "sigmoid": _np_sigmoid}, "numpy"]


def _np_printer() -> Any:
    from sympy.printing.numpy import NumPyPrinter

    return NumPyPrinter({"strict": False, "fully_qualified_modules": False})


def _torch_modules() -> list[Any]:
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


class Normaliser:
    """Base of every attention normaliser: a map from logits ``(B, L)`` to weights ``(B, L)``."""

    name: str = "normaliser"

    @property
    def params(self) -> dict[str, Any]:
        raise NotImplementedError

    #: True when the map has the form F / sum F with F > 0 (paper eq. 3 and Lemma 1).
    @property
    def positive(self) -> bool:
        return False

    #: True when F does not depend on the sequence length L (Lemma 1).
    @property
    def length_independent(self) -> bool:
        return False

    #: True when the weights always sum to one.
    normalising: bool = True

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """Per-token weights ``(B, K)``; with ``counts`` column k stands for ``counts[:, k]`` equal tokens
        (``sum_k counts_k alpha_k = 1``), see :mod:`attnbounds.theory.mathematics.instance`."""
        raise NotImplementedError

    def jacobian(self, logits: Any) -> np.ndarray:
        """``J[b, i, j] = d alpha_i / d l_j``, closed form, shape ``(B, L, L)``."""
        raise NotImplementedError

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        """The same map in torch (differentiable), for autograd checks and gradient search."""
        raise NotImplementedError

    def take(self, idx: np.ndarray) -> "Normaliser":
        """The normaliser restricted to the sub-batch ``idx`` (per-instance parameters are sliced)."""
        return self._with({k: (v[idx] if np.ndim(v) else v) for k, v in self.params.items()})

    def _with(self, params: dict[str, Any]) -> "Normaliser":
        return type(self)(**params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))


def check_logits(logits: Any) -> np.ndarray:
    """Logits as a float ``(B, L)`` array (a vector is one row); :class:`InvalidArgument` naming a bad value."""
    arr = as_float_array("logits", logits, (1, 2))
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.shape[1] < 1:
        raise InvalidArgument(f"logits must have at least one token (L >= 1), got shape {arr.shape}")
    return arr


def _multiplicity(logits: np.ndarray, counts: np.ndarray | None) -> np.ndarray:
    """Tokens per column as floats (ones when ``counts`` is None)."""
    return np.ones(logits.shape) if counts is None else np.asarray(counts, dtype=np.float64)


def _length(logits: np.ndarray, counts: np.ndarray | None) -> int:
    return int(logits.shape[-1]) if counts is None else int(np.asarray(counts)[0].sum())


def _column(value: Any) -> Any:
    """Broadcast a scalar or per-instance ``(B,)`` parameter against ``(B, L)`` arrays."""
    arr = np.asarray(value, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr[:, None]


@functools.lru_cache(maxsize=256)
def _kernels(log_F: sp.Expr, names: tuple[str, ...]) -> tuple[Callable[..., np.ndarray], Callable[..., np.ndarray]]:
    """Generated numpy kernels for ``log F`` and ``(log F)'``, cached per expression."""
    pos = {sp.Symbol(n): sp.Symbol(n, positive=True) for n in names}
    expr = log_F.subs(pos)
    args = (l_sym, L_sym, *(pos[sp.Symbol(n)] for n in names))
    f = sp.lambdify(args, stable_log(expr), modules=_NUMPY_MODULES, printer=_np_printer())
    df = sp.lambdify(args, derivative(expr, l_sym), modules=_NUMPY_MODULES, printer=_np_printer())
    return f, df


class RatioNormaliser(Normaliser):
    """``alpha_i = F(l_i) / sum_j F(l_j)`` with ``log F`` given as a sympy expression.

    ``log_F`` may contain ``l`` (:data:`l_sym`), ``L`` (:data:`L_sym`) and the parameter
    symbols named in ``values``. Positive F: F = exp(log_F) > 0 wherever ``log_F`` is finite, so
    positivity is decided by whether ``log_F`` is real-valued for all real ``l`` (checked by sympy,
    then on a probe grid).
    """

    def __init__(self, name: str, log_F: sp.Expr, values: dict[str, Any] | None = None):
        self.name = name
        self.log_F = sp.sympify(log_F)
        self.values = dict(values or {})

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.values)

    def _with(self, params: dict[str, Any]) -> "Normaliser":
        return RatioNormaliser(self.name, self.log_F, params)

    # -- generated kernels ---------------------------------------------------------------
    @functools.cached_property
    def _symbols(self) -> tuple[sp.Symbol, ...]:
        names = sorted(self.values)
        return (l_sym, L_sym, *(sp.Symbol(n, positive=True) for n in names))

    def _subs_symbols(self) -> sp.Expr:
        # parameters are declared positive so that sympy can reason about the sign of F
        return self.log_F.subs({sp.Symbol(n): sp.Symbol(n, positive=True) for n in self.values})

    @functools.cached_property
    def _expr(self) -> sp.Expr:
        return stable_log(self._subs_symbols())

    @property
    def _log_F_np(self) -> Callable[..., np.ndarray]:
        return _kernels(self.log_F, tuple(sorted(self.values)))[0]

    @property
    def _dlog_F_np(self) -> Callable[..., np.ndarray]:
        return _kernels(self.log_F, tuple(sorted(self.values)))[1]

    def _args(self, L: int) -> list[Any]:
        return [L, *(_column(self.values[n]) for n in sorted(self.values))]

    def log_F_values(self, logits: Any, L: int | None = None) -> np.ndarray:
        """``log F(l_i)`` for a batch, shape ``(B, K)``; ``L`` the context length (default: the columns)."""
        lg = check_logits(logits)
        out = self._log_F_np(lg, *self._args(lg.shape[1] if L is None else L))
        return np.broadcast_to(np.asarray(out, dtype=np.float64), lg.shape).copy()

    def dlog_F_values(self, logits: Any, L: int | None = None) -> np.ndarray:
        """``g_i = d log F / d l`` at each logit, shape ``(B, K)``."""
        lg = check_logits(logits)
        out = self._dlog_F_np(lg, *self._args(lg.shape[1] if L is None else L))
        return np.broadcast_to(np.asarray(out, dtype=np.float64), lg.shape).copy()

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """Stable ``exp(log F_i - max_j log F_j) / sum_j m_j exp(log F_j - max log F)`` (``m_j`` the counts)."""
        lg = check_logits(logits)
        lf = self.log_F_values(lg, _length(lg, counts))
        mult = _multiplicity(lg, counts)
        present = mult > 0
        if np.any(np.isnan(lf) & present) or np.any((lf == np.inf) & present):
            raise NotApplicable(f"{self!r}: log F is not finite on these logits (F <= 0 or overflow)")
        if np.any(np.all((lf == -np.inf) | ~present, axis=-1)):
            raise NotApplicable(f"{self!r}: F vanishes on every token of some row, weights undefined")
        top = np.where(present, lf, -np.inf).max(axis=-1, keepdims=True)
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.where(present, np.exp(lf - top), 0.0)
        return e / (mult * e).sum(axis=-1, keepdims=True)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``J = (diag(alpha) - alpha alpha^T) diag(g)`` with ``g = (log F)'`` (Lemma 2)."""
        a = self.weights(logits)
        g = self.dlog_F_values(logits)
        with np.errstate(invalid="ignore"):
            ag = np.where(a > 0, a * g, 0.0)  # F = 0 tokens (ReLU) carry no gradient
        J = -a[:, :, None] * ag[:, None, :]
        idx = np.arange(a.shape[1])
        J[:, idx, idx] += ag
        return J

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        f = sp.lambdify(self._symbols, self._expr, modules=_torch_modules(), printer=LambdaPrinter({"strict": False}))
        lg = logits if logits.ndim == 2 else logits[None, :]
        L = float(lg.shape[1]) if counts is None else float(counts[0].sum())
        args = [torch.tensor(L, dtype=lg.dtype)]
        for n in sorted(self.values):
            v = torch.as_tensor(np.asarray(self.values[n], dtype=np.float64), dtype=lg.dtype)
            args.append(v if v.ndim == 0 else v[:, None])
        lf = f(lg, *args) + torch.zeros_like(lg)
        if counts is None:
            return torch.softmax(lf, dim=-1)
        m = torch.as_tensor(counts, dtype=lg.dtype)
        return torch.softmax(lf + torch.log(m), dim=-1) / m.clamp(min=1.0)

    # -- computed hypotheses ---------------------------------------------------------------
    @functools.cached_property
    def length_independent(self) -> bool:  # type: ignore[override]
        return L_sym not in self.log_F.free_symbols

    @functools.cached_property
    def positive(self) -> bool:  # type: ignore[override]
        """F = exp(log F) > 0 iff log F is real-valued (finite) for every real l."""
        expr = self._subs_symbols()
        if expr.is_real is True and not expr.has(sp.zoo, sp.oo, -sp.oo, sp.nan):
            return True
        probe = np.concatenate([-np.logspace(-3, 3, 61)[::-1], [0.0], np.logspace(-3, 3, 61)])
        with np.errstate(all="ignore"):
            vals = self.log_F_values(np.tile(probe, (1, 1)))
        return bool(np.all(np.isfinite(vals)))

    @property
    def _critical_points(self) -> np.ndarray:
        """Real zeros of ``(log F)'`` (empty when its sign is constant); requires scalar parameters."""
        if any(np.ndim(v) for v in self.values.values()):
            raise InvalidArgument("Lemma 1's F range needs scalar normaliser parameters, got a per-instance array")
        return _critical_points(self.log_F, tuple(sorted((k, float(v)) for k, v in self.values.items())))

    def log_F_range(self, a: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(log min F, log max F)`` on ``[-a, a]`` for each bound ``a`` (Lemma 1's constants).

        The extrema lie at the endpoints or at real zeros of ``(log F)'``, found once by sympy.
        """
        if not self.length_independent:
            raise InvalidArgument(f"{self!r} depends on L: Lemma 1's F range is not defined for it")
        a = np.atleast_1d(np.asarray(nonnegative("a", a), dtype=np.float64))
        crit = self._critical_points
        pts = np.concatenate([-a[:, None], a[:, None], np.broadcast_to(crit, (a.size, crit.size))], axis=1)
        inside = np.abs(pts) <= a[:, None]
        lf = self.log_F_values(np.clip(pts, -a[:, None], a[:, None]))
        return np.where(inside, lf, np.inf).min(-1), np.where(inside, lf, -np.inf).max(-1)


@functools.lru_cache(maxsize=256)
def _critical_points(log_F: sp.Expr, values: tuple[tuple[str, float], ...]) -> np.ndarray:
    expr = log_F.subs({sp.Symbol(n): sp.Symbol(n, positive=True) for n, _ in values})
    d = sp.diff(stable_log(expr), l_sym).subs({sp.Symbol(n, positive=True): sp.Rational(v) for n, v in values})
    if d.is_positive or d.is_negative or d.is_zero:  # cheap: decided from the factors' assumptions
        return np.empty(0)
    if d.is_polynomial(l_sym):
        return np.array([float(r) for r in sp.Poly(d, l_sym).real_roots()])
    signed = sp.simplify(d.rewrite(sp.exp))  # slow: only when the factors did not decide the sign
    if signed.is_positive or signed.is_negative:
        return np.empty(0)
    raise InvalidArgument(f"cannot locate the extrema of F={sp.exp(log_F)}: (log F)' = {d} is neither "
                          "of constant sign nor a polynomial in l")


class SimplexMap(Normaliser):
    """A normaliser that is not of the form F / sum F with F > 0 (breaks Lemma 1 on purpose)."""

    def __init__(self, T: Any = 1.0):
        self.T = positive("T", T)

    @property
    def params(self) -> dict[str, Any]:
        return {"T": self.T}


class Sparsemax(SimplexMap):
    """Sparsemax (Martins & Astudillo 2016): Euclidean projection of ``l / T`` onto the simplex."""

    name = "sparsemax"

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """``max(z - tau, 0)``, ``z = l / T`` shifted by its row maximum (no cancellation in the sums),
        ``tau`` from the sorted cumulative sums weighted by the counts."""
        lg = check_logits(logits)
        mult = _multiplicity(lg, counts)
        present = mult > 0
        z = lg / _column(self.T)
        z = z - np.where(present, z, -np.inf).max(axis=-1, keepdims=True)
        order = np.argsort(np.where(present, -z, np.inf), axis=-1, kind="stable")
        zs, ms = np.take_along_axis(z, order, -1), np.take_along_axis(mult, order, -1)
        k = np.cumsum(ms, axis=-1)  # tokens up to and including this column
        cums = np.cumsum(ms * zs, axis=-1)
        support = (1 + k * zs > cums) & (ms > 0)
        last = support.sum(axis=-1, keepdims=True) - 1
        tau = (np.take_along_axis(cums, last, -1) - 1) / np.take_along_axis(k, last, -1)
        return np.where(present, np.maximum(z - tau, 0.0), 0.0)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``(diag(s) - s s^T / |S|) / T`` with ``s`` the support indicator."""
        s = (self.weights(logits) > 0).astype(np.float64)
        J = -s[:, :, None] * s[:, None, :] / s.sum(-1)[:, None, None]
        idx = np.arange(s.shape[1])
        J[:, idx, idx] += s
        return J / np.asarray(_column(self.T))[..., None]

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        if counts is not None:
            raise NotApplicable("sparsemax in torch takes dense logits only (no token classes)")
        z = logits / torch.as_tensor(_column(self.T), dtype=logits.dtype)
        z = z - z.max(-1, keepdim=True).values
        zs, _ = torch.sort(z, dim=-1, descending=True)
        k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
        cums = zs.cumsum(-1)
        kz = ((1 + k * zs) > cums).sum(-1, keepdim=True)
        tau = (cums.gather(-1, kz - 1) - 1) / kz.to(z.dtype)
        return torch.clamp(z - tau, min=0.0)


class Entmax15(SimplexMap):
    """1.5-entmax (Peters et al. 2019) of ``l / T``: ``alpha = [(z/2 - tau)_+]^2``, exact sort-based."""

    name = "entmax15"

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        """``[(z - tau)_+]^2``, ``z = l / (2T)`` shifted by its row maximum, ``tau`` from the sorted
        cumulative moments weighted by the counts."""
        lg = check_logits(logits)
        mult = _multiplicity(lg, counts)
        present = mult > 0
        z = lg / _column(self.T) / 2.0
        z = z - np.where(present, z, -np.inf).max(axis=-1, keepdims=True)
        order = np.argsort(np.where(present, -z, np.inf), axis=-1, kind="stable")
        zs, ms = np.take_along_axis(z, order, -1), np.take_along_axis(mult, order, -1)
        zs = np.where(ms > 0, zs, zs[..., :1])  # padding never enters the support
        k = np.cumsum(ms, -1)
        mean = np.cumsum(ms * zs, -1) / k
        mean_sq = np.cumsum(ms * zs**2, -1) / k
        ss = k * (mean_sq - mean**2)
        delta = np.maximum((1 - ss) / k, 0.0)
        tau = mean - np.sqrt(delta)
        support = ((tau <= zs) & (ms > 0)).sum(-1, keepdims=True)
        tau_star = np.take_along_axis(tau, support - 1, -1)
        return np.where(present, np.maximum(z - tau_star, 0.0) ** 2, 0.0)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``(diag(w) - w w^T / sum w) / T`` with ``w = sqrt(alpha)`` (Peters et al. 2019, Prop. 1)."""
        w = np.sqrt(self.weights(logits))
        J = -w[:, :, None] * w[:, None, :] / w.sum(-1)[:, None, None]
        idx = np.arange(w.shape[1])
        J[:, idx, idx] += w
        return J / np.asarray(_column(self.T))[..., None]

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        if counts is not None:
            raise NotApplicable("entmax-1.5 in torch takes dense logits only (no token classes)")
        z = logits / torch.as_tensor(_column(self.T), dtype=logits.dtype) / 2.0
        z = z - z.max(-1, keepdim=True).values
        zs, _ = torch.sort(z, -1, descending=True)
        k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
        mean = zs.cumsum(-1) / k
        mean_sq = (zs**2).cumsum(-1) / k
        delta = torch.clamp((1 - k * (mean_sq - mean**2)) / k, min=0.0)
        tau = mean - torch.sqrt(delta)
        support = (tau <= zs).sum(-1, keepdim=True)
        return torch.clamp(z - tau.gather(-1, support - 1), min=0.0) ** 2


class SigmoidAttention(SimplexMap):
    """Sigmoid attention ``alpha_i = sigmoid(l_i / T)``: not normalised (weights need not sum to 1)."""

    name = "sigmoid"
    normalising = False

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        return _np_sigmoid(check_logits(logits) / _column(self.T))

    def jacobian(self, logits: Any) -> np.ndarray:
        a = self.weights(logits)
        d = a * (1 - a) / _column(self.T)
        return np.einsum("bi,ij->bij", d, np.eye(a.shape[1]))

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        return torch.sigmoid(logits / torch.as_tensor(_column(self.T), dtype=logits.dtype))


class ReluNormalised(SimplexMap):
    """``alpha_i = relu(l_i) / sum_j relu(l_j)``: of the form F / sum F but F = relu is not positive."""

    name = "relu"

    @staticmethod
    def F(l: np.ndarray) -> np.ndarray:
        return np.maximum(l, 0.0)

    @functools.cached_property
    def positive(self) -> bool:  # type: ignore[override]
        probe = np.linspace(-10.0, 10.0, 201)
        return bool(np.all(self.F(probe) > 0))

    length_independent = True  # relu has no L in it; Lemma 1 fails through positivity instead

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        lg = check_logits(logits)
        f = self.F(lg / _column(self.T))
        tot = (_multiplicity(lg, counts) * f).sum(-1, keepdims=True)
        if np.any(tot == 0):
            raise NotApplicable("relu normaliser: every logit of some row is <= 0, weights undefined")
        return f / tot

    def jacobian(self, logits: Any) -> np.ndarray:
        lg = check_logits(logits)
        a = self.weights(lg)
        on = (lg > 0).astype(np.float64)
        tot = self.F(lg / _column(self.T)).sum(-1)
        J = -a[:, :, None] * on[:, None, :]
        idx = np.arange(a.shape[1])
        J[:, idx, idx] += on
        return J / (tot[:, None, None] * np.asarray(_column(self.T))[..., None])

    def torch_weights(self, logits: Tensor, counts: Any = None) -> Tensor:
        import torch

        f = torch.relu(logits / torch.as_tensor(_column(self.T), dtype=logits.dtype))
        m = 1.0 if counts is None else torch.as_tensor(counts, dtype=logits.dtype)
        return f / (m * f).sum(-1, keepdim=True)


# -- constructors ---------------------------------------------------------------------------
_T = sp.Symbol("T", positive=True)


def softmax(T: Any = 1.0) -> RatioNormaliser:
    """Softmax with temperature: ``F(l) = exp(l / T)`` (paper eq. 3 with ``T = sqrt(d)`` usually)."""
    return RatioNormaliser("softmax", l_sym / _T, {"T": positive("T", T)})


def softplus_shift(c: float = 0.1, T: Any = 1.0) -> RatioNormaliser:
    """``F(l) = softplus(l / T) + c``, positive for ``c > 0``."""
    return RatioNormaliser("softplus", sp.log(softplus(l_sym / _T) + sp.Symbol("c")),
                           {"T": positive("T", T), "c": positive("c", c)})


def exp_poly(b: float = 0.1, T: Any = 1.0) -> RatioNormaliser:
    """``F(l) = exp(l / T - b l^2)``: exponential of a polynomial, positive, not monotone."""
    return RatioNormaliser("exp_poly", l_sym / _T - sp.Symbol("b") * l_sym**2,
                           {"T": positive("T", T), "b": positive("b", b)})


def shifted_sigmoid(shift: float = 0.0, T: Any = 1.0) -> RatioNormaliser:
    """``F(l) = sigmoid(l / T - shift)``: positive, bounded."""
    return RatioNormaliser("shifted_sigmoid", sp.log(sigmoid(l_sym / _T - sp.Symbol("shift"))),
                           {"T": positive("T", T), "shift": float(as_float_array("shift", shift, 0))})


def scalable_softmax(s: float = 0.4, T: Any = 1.0) -> RatioNormaliser:
    """Scalable-Softmax (Nakanishi 2025): ``F(l) = exp(s log(L) l / T)``; depends on L (breaks Lemma 1)."""
    return RatioNormaliser("ssmax", sp.Symbol("s") * sp.log(L_sym) * l_sym / _T,
                           {"T": positive("T", T), "s": positive("s", s)})


#: name -> constructor with keyword parameters, for CLI, strategies and user files.
CONSTRUCTORS: dict[str, Callable[..., Normaliser]] = {
    "softmax": softmax,
    "softplus": softplus_shift,
    "exp_poly": exp_poly,
    "shifted_sigmoid": shifted_sigmoid,
    "ssmax": scalable_softmax,
    "relu": ReluNormalised,
    "sparsemax": Sparsemax,
    "entmax15": Entmax15,
    "sigmoid": SigmoidAttention,
}
#: the names above: a statements file or a Python callable registers more in CONSTRUCTORS for its process
BUILTIN_NAMES: frozenset[str] = frozenset(CONSTRUCTORS)


@functools.lru_cache(maxsize=None)
def constructor_parameters(name: str) -> frozenset[str]:
    """The parameters of the normaliser built by ``name`` besides ``T`` (e.g. ``b`` of exp_poly)."""
    return frozenset(make(name).params) - {"T"}


@contextlib.contextmanager
def constructors_added(added: Mapping[str, Callable[..., Normaliser]]) -> Iterator[None]:
    """``added`` join (or replace names in) :data:`CONSTRUCTORS` inside the block only (the search draws them
    there); the constructors are restored afterwards."""
    before = dict(CONSTRUCTORS)
    CONSTRUCTORS.update(added)
    constructor_parameters.cache_clear()
    try:
        yield
    finally:
        CONSTRUCTORS.clear()
        CONSTRUCTORS.update(before)
        constructor_parameters.cache_clear()


def make(name: str, **params: Any) -> Normaliser:
    """Build a normaliser by its constructor's name (:data:`CONSTRUCTORS`)."""
    if name not in CONSTRUCTORS:
        raise InvalidArgument(f"unknown normaliser {name!r}; allowed: {', '.join(CONSTRUCTORS)}")
    return CONSTRUCTORS[name](**params)
