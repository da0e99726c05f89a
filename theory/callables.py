"""Normalisers given as Python callables, and statements about one normaliser.

A user's torch function ``fn(logits, T) -> weights`` (rows along the last axis; ``logits`` a float64 tensor of
shape ``(B, L)``, ``T`` a float or a ``(B, 1)`` tensor) becomes a :class:`CallableNormaliser`: the search
evaluates it in float64 through torch, and a Jacobian quantity differentiates it with autograd. It has no
interval version, so nothing about it can be certified: a violation found is REFUTED *in float arithmetic only*
(the record says ``certified: false`` and gives the float margin), a statement that holds is at most VERIFIED,
and every hypothesis computed from a normaliser's ``log F`` (``softmax``, ``F-positive``,
``F-length-independent``) fails on it (unknown, never assumed): such instances are NOT-APPLICABLE.

With a ``log F`` (a sympy expression in ``l``, ``L`` and its parameters) the callable is a ratio normaliser
``F(l_i) / sum_j F(l_j)``: :func:`ratio_from_callable` checks the callable against that formula on random logits
when it is loaded (and refuses them if they disagree), and from then on the formula is what the search,
the hypotheses and the certifier read.

:func:`same_normaliser` is the hypothesis ``normaliser(<name>)`` of a statement about one normaliser: an
instance satisfies it when its normaliser *is* that one (the same ``log F``, the same function object, or the
same built-in map), whatever its temperature.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from attnbounds.theory.errors import InvalidArgument, NotApplicable
from attnbounds.theory.normalisers import Normaliser, RatioNormaliser, _check_logits
from attnbounds.theory.statement import Hypothesis, Statement
from attnbounds.theory.validation import positive

#: the most logits (rows times tokens) a callable is evaluated on at once: token classes are written out token by
#: token for it (the search draws fewer rows of long classes), and a longer class instance is skipped (NOT-APPLICABLE)
MAX_EXPANDED = 1 << 20
#: per cost class, the share of a budget's random and class batches a statement about a callable gets (torch, batch by batch, and
#: autograd Jacobians are slower than the generated numpy kernels the rates are measured on)
CALLABLE_RATE = {"default": 0.25, "jacobian": 0.08}
#: random logit rows a callable is checked on when loaded (shape, finiteness, permutation equivariance, log F)
CHECKS = 24
#: relative agreement required between a callable and its log F
RTOL = 1e-9


def _torch() -> Any:
    import torch

    return torch


class CallableNormaliser(Normaliser):
    """``fn(logits, T)`` as a normaliser (module docstring). Its parameters: the temperature ``T`` only."""

    #: whether the weights sum to one is not known: certificates take the weights as they are
    normalising = False

    def __init__(self, name: str, fn: Callable[..., Any], T: Any = 1.0):
        self.name = name
        self.fn = fn
        self.T = positive("T", T)

    @property
    def params(self) -> dict[str, Any]:
        return {"T": self.T}

    def _with(self, params: dict[str, Any]) -> "Normaliser":
        return CallableNormaliser(self.name, self.fn, **params)

    def __repr__(self) -> str:
        return f"CallableNormaliser({self.name!r}, T={self.T!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CallableNormaliser) and other.fn is self.fn and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))

    # no log F: positivity and length independence are unknown, so Normaliser's answer (False) stands and the
    # hypotheses computed from them fail

    def _T_tensor(self, B: int, dtype: Any) -> Any:
        torch = _torch()
        T = np.asarray(self.T, dtype=np.float64)
        return float(T) if T.ndim == 0 else torch.as_tensor(np.broadcast_to(T, (B,)).copy(), dtype=dtype)[:, None]

    def _call(self, lg: Any) -> Any:
        """``fn`` on a ``(B, L)`` tensor, its output checked (shape, real values) and returned as float64."""
        torch = _torch()
        try:
            out = self.fn(lg, self._T_tensor(lg.shape[0], lg.dtype))
        except (NotApplicable, InvalidArgument):
            raise
        except Exception as exc:  # noqa: BLE001 - the user's function failed: say which and on what
            raise NotApplicable(f"normaliser {self.name!r} failed on logits of shape {tuple(lg.shape)}: "
                                f"{type(exc).__name__}: {exc}") from None
        if not isinstance(out, torch.Tensor):
            out = torch.as_tensor(np.asarray(out, dtype=np.float64))
        if tuple(out.shape) != tuple(lg.shape):
            raise InvalidArgument(f"normaliser {self.name!r} returned weights of shape {tuple(out.shape)} for logits of "
                                  f"shape {tuple(lg.shape)}; it must return one weight per logit (rows along the last axis)")
        return out.to(torch.float64)

    def _expand(self, lg: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token classes written out token by token, and per class the position of its first token (which
        stands for the class: the map is permutation-equivariant, so equal logits get equal weights)."""
        counts = np.asarray(counts, dtype=np.int64)
        B, K = counts.shape
        L = int(counts[0].sum())
        if B * L > MAX_EXPANDED:
            raise NotApplicable(f"normaliser {self.name!r} is a Python callable: token classes are written out for it, "
                                f"and {B} rows of L = {L} tokens exceed {MAX_EXPANDED} logits")
        column = np.repeat(np.tile(np.arange(K), B), counts.ravel()).reshape(B, L)
        firsts = np.minimum(np.cumsum(counts, axis=-1) - counts, L - 1)
        return np.take_along_axis(lg, column, -1), firsts

    def weights(self, logits: Any, counts: np.ndarray | None = None) -> np.ndarray:
        torch = _torch()
        lg = _check_logits(logits)
        dense, firsts = (lg, None) if counts is None else self._expand(lg, counts)
        with torch.no_grad():
            w = self._call(torch.as_tensor(dense, dtype=torch.float64)).numpy()
        if not np.all(np.isfinite(w)):
            raise NotApplicable(f"normaliser {self.name!r} returned non-finite weights on these logits")
        if firsts is None:
            return w
        return np.where(np.asarray(counts) > 0, np.take_along_axis(w, firsts, -1), 0.0)

    def jacobian(self, logits: Any) -> np.ndarray:
        """``J[b, i, j] = d alpha_i / d l_j`` by autograd (rows are independent: one Jacobian of the summed rows)."""
        torch = _torch()
        lg = torch.as_tensor(_check_logits(logits), dtype=torch.float64)
        J = torch.autograd.functional.jacobian(lambda z: self._call(z).sum(0), lg, vectorize=True)  # (L, B, L)
        out = J.permute(1, 0, 2).detach().numpy()
        if not np.all(np.isfinite(out)):
            raise NotApplicable(f"the autograd Jacobian of normaliser {self.name!r} is not finite on these logits")
        return out

    def torch_weights(self, logits: Any, counts: Any = None) -> Any:
        if counts is not None:
            raise NotApplicable(f"normaliser {self.name!r} (a Python callable) takes dense logits in torch")
        lg = logits if logits.ndim == 2 else logits[None, :]
        return self._call(lg)


def check_callable(fn: Any, name: str, where: str, *, seed: int = 0) -> None:
    """Refuse (:class:`InvalidArgument`, naming ``where``) a callable that is not a usable normaliser: it must take
    ``(logits, T)`` and return finite weights of the logits' shape, and be permutation-equivariant (the weights
    follow the logits, not their positions: token classes rely on it)."""
    if not callable(fn):
        raise InvalidArgument(f"{where}: a normaliser must be a callable fn(logits, T) -> weights, a built-in name, "
                              f"a table with 'log_F', or a RatioNormaliser; got {type(fn).__name__}")
    rng = np.random.default_rng(seed)
    n = CallableNormaliser(name, fn, 1.0)
    for k in range(CHECKS // 3):
        L = int(rng.integers(1, 9))
        T = float(10 ** rng.uniform(-1, 1))
        logits = rng.uniform(-4, 4, (3, L))
        try:
            w = n._with({"T": T}).weights(logits)
        except NotApplicable as exc:
            raise InvalidArgument(f"{where}: {exc}") from None
        except InvalidArgument as exc:
            raise InvalidArgument(f"{where}: {exc}") from None
        perm = rng.permutation(L)
        wp = n._with({"T": T}).weights(logits[:, perm])
        if not np.allclose(wp, w[:, perm], rtol=1e-9, atol=1e-12):
            raise InvalidArgument(f"{where}: normaliser {name!r} is not permutation-equivariant (permuting the logits "
                                  f"{np.round(logits[0], 3).tolist()} does not permute the weights): the weights must "
                                  f"depend on the logits, not on their positions")


def ratio_from_callable(fn: Any, ratio: RatioNormaliser, where: str, *, seed: int = 0) -> None:
    """Refuse a callable that disagrees with the ``log F`` it is declared with, at random logits, lengths and
    temperatures (its other parameters at their values)."""
    check_callable(fn, ratio.name, where, seed=seed)
    rng = np.random.default_rng(seed + 1)
    n = CallableNormaliser(ratio.name, fn, 1.0)
    for _ in range(CHECKS):
        L = int(rng.integers(1, 40))
        T = float(10 ** rng.uniform(-1, 1))
        logits = np.round(rng.uniform(-3, 3, (1, L)), 3)
        expected = ratio._with({**ratio.values, "T": T}).weights(logits)
        got = n._with({"T": T}).weights(logits)
        err = np.abs(got - expected)
        if np.any(err > RTOL * np.maximum(np.abs(expected), 1e-300) + 1e-15):
            j = int(np.argmax(err))
            raise InvalidArgument(
                f"{where}: the callable and log_F = {ratio.log_F} disagree: at L = {L}, T = {T:.6g}, logits "
                f"{np.round(logits[0], 3).tolist()[:8]}{'...' if L > 8 else ''} token {j} has weight {got[0, j]!r} "
                f"from the callable but {expected[0, j]!r} from log_F (parameters {ratio.values})")


class _SameNormaliser:
    """The check of ``normaliser(<name>)``: the instance's normaliser is ``proto`` (any temperature)."""

    def __init__(self, proto: Normaliser):
        self.proto = proto
        #: whether a violation on this normaliser can be certified in interval arithmetic
        self.certifiable = not isinstance(proto, CallableNormaliser)

    def same(self, n: Normaliser | None) -> bool:
        p = self.proto
        if n is None or type(n) is not type(p) or getattr(n, "name", None) != getattr(p, "name", None):
            return False
        if isinstance(p, RatioNormaliser):
            return n.log_F == p.log_F  # type: ignore[attr-defined]
        if isinstance(p, CallableNormaliser):
            return n.fn is p.fn  # type: ignore[attr-defined]
        return True

    def __call__(self, inst: Any) -> np.ndarray:
        ok = np.full(inst.B, self.same(inst.normaliser))
        if ok.any() and isinstance(self.proto, RatioNormaliser):  # its other parameters at their values
            for name, value in self.proto.values.items():
                if name != "T":
                    got = np.asarray(inst.normaliser.values.get(name, np.nan), dtype=np.float64)
                    ok &= np.broadcast_to(got, (inst.B,)) == np.broadcast_to(np.asarray(value, dtype=np.float64), (inst.B,))
        return ok


def same_normaliser(name: str, proto: Normaliser) -> Hypothesis:
    """The hypothesis ``normaliser(<name>)`` (module docstring)."""
    kind = ("a Python callable without log F: never certified" if isinstance(proto, CallableNormaliser) else
            f"log F = {proto.log_F}" if isinstance(proto, RatioNormaliser) else f"the built-in {type(proto).__name__}")
    others = {k: v for k, v in proto.params.items() if k != "T"} if isinstance(proto, RatioNormaliser) else {}
    fixed = (", its other parameters at " + ", ".join(f"{k} = {float(np.ravel(v)[0]):g}" for k, v in sorted(others.items()))
             if others else "")
    return Hypothesis(f"normaliser({name})", f"the weights come from the normaliser {name!r} ({kind}), at any "
                      f"temperature{fixed}", _SameNormaliser(proto), relax=_relax_rule(name, proto))


def _relax_rule(name: str, proto: Normaliser) -> Any:
    """The relaxation reads a ratio normaliser's log F with its parameters (T free); a Python callable, or a
    built-in map not of the form F / sum F, has none."""
    if not isinstance(proto, RatioNormaliser):
        return None
    values = {k: float(np.ravel(np.asarray(v, dtype=np.float64))[0]) for k, v in proto.values.items()}
    return lambda space: space.normaliser(proto.log_F, values, f"{name}, log F = {proto.log_F}", name=proto.name)


def uncertified(statement: Statement) -> str | None:
    """Why nothing about ``statement`` can be certified (it is about a callable without log F), or None."""
    for h in statement.hypotheses:
        if getattr(h.check, "certifiable", True) is False:
            return (f"the normaliser {h.check.proto.name!r} is a Python callable without log F: it has no interval "  # type: ignore[attr-defined]
                    f"version, so a violation is found in float64 arithmetic only (not certified) and a bound that "
                    f"holds is at most VERIFIED")
    return None
