"""A batch of attention instances: the one input every statement, test, search and experiment shares.

An instance is one attention situation (paper section 2): logits ``l`` (or query ``q`` and keys
``k``), a normaliser with its parameters, the weights ``alpha`` it produces, token vectors ``x``,
a selection ``I_N`` (the top-N weights by default) and named parameters (``M``, ``delta``, ``r``,
``a``, ``eps``, ...). Everything carries a leading batch axis ``B``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from theory.errors import AttnBoundsError
from theory.normalisers import Normaliser
from theory.validation import as_float_array, integer_in


def top_n_mask(alpha: np.ndarray, N: int) -> np.ndarray:
    """Boolean ``(B, L)`` mask of the N largest weights per row (ties broken by lower index)."""
    order = np.argsort(-alpha, axis=-1, kind="stable")[:, :N]
    mask = np.zeros(alpha.shape, dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask


@dataclass(frozen=True, eq=False)
class Instance:
    """A batch of ``B`` attention instances of common length ``L`` (see module docstring).

    Build one with :meth:`from_logits`, :meth:`from_qk` or :meth:`from_weights`.
    """

    alpha: np.ndarray
    logits: np.ndarray | None = None
    normaliser: Normaliser | None = None
    x: np.ndarray | None = None
    q: np.ndarray | None = None
    k: np.ndarray | None = None
    N: int | None = None
    selection: np.ndarray | None = None
    params: dict[str, np.ndarray] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def from_logits(cls, logits: Any, normaliser: Normaliser, *, x: Any = None, N: int | None = None,
                    q: Any = None, k: Any = None, selection: Any = None, arrays: dict[str, Any] | None = None,
                    **params: Any) -> "Instance":
        """Weights produced by ``normaliser`` from ``logits`` of shape ``(B, L)`` (or ``(L,)``)."""
        lg = as_float_array("logits", logits, (1, 2))
        lg = lg[None, :] if lg.ndim == 1 else lg
        if not isinstance(normaliser, Normaliser):
            raise AttnBoundsError(f"normaliser must be a theory.normalisers.Normaliser, got {normaliser!r}")
        alpha = normaliser.weights(lg)
        own = {k_: v for k_, v in normaliser.params.items() if k_ not in params}
        return cls._build(alpha, lg, normaliser, x, q, k, N, selection, arrays, {**own, **params})

    @classmethod
    def from_qk(cls, q: Any, k: Any, normaliser: Normaliser, **kwargs: Any) -> "Instance":
        """Logits ``l_i = q . k_i`` from queries ``(B, d_k)`` and keys ``(B, L, d_k)``."""
        qa = as_float_array("q", q, (1, 2))
        ka = as_float_array("k", k, (2, 3))
        qa = qa[None] if qa.ndim == 1 else qa
        ka = ka[None] if ka.ndim == 2 else ka
        if qa.shape[0] != ka.shape[0] or qa.shape[-1] != ka.shape[-1]:
            raise AttnBoundsError(f"q of shape {qa.shape} does not match k of shape {ka.shape} (want (B,d) and (B,L,d))")
        return cls.from_logits(np.einsum("bd,bld->bl", qa, ka), normaliser, q=qa, k=ka, **kwargs)

    @classmethod
    def from_weights(cls, alpha: Any, *, x: Any = None, N: int | None = None, selection: Any = None,
                     arrays: dict[str, Any] | None = None, **params: Any) -> "Instance":
        """Weights given directly, e.g. a real model's attention probabilities (rows on the simplex)."""
        a = as_float_array("alpha", alpha, (1, 2))
        a = a[None, :] if a.ndim == 1 else a
        if np.any(a < 0):
            raise AttnBoundsError(f"alpha must be >= 0, got min {a.min()!r}")
        sums = a.sum(-1)
        if np.any(np.abs(sums - 1) > 1e-6):
            raise AttnBoundsError(f"alpha rows must sum to 1 (within 1e-6), got a row summing to {sums[np.argmax(np.abs(sums - 1))]!r}")
        return cls._build(a, None, None, x, None, None, N, selection, arrays, params)

    @classmethod
    def _build(cls, alpha: np.ndarray, logits: np.ndarray | None, normaliser: Normaliser | None, x: Any,
               q: np.ndarray | None, k: np.ndarray | None, N: int | None, selection: Any,
               arrays: dict[str, Any] | None, params: dict[str, Any]) -> "Instance":
        B, L = alpha.shape
        xa = None
        if x is not None:
            xa = as_float_array("x", x, (2, 3))
            xa = xa[None] if xa.ndim == 2 else xa
            if xa.shape[:2] != (B, L):
                raise AttnBoundsError(f"x must have shape (B, L, d) = ({B}, {L}, d), got {xa.shape}")
        sel = None
        if selection is not None:
            sel = np.asarray(selection, dtype=bool)
            sel = sel[None] if sel.ndim == 1 else sel
            if sel.shape != (B, L):
                raise AttnBoundsError(f"selection must be a boolean mask of shape ({B}, {L}), got {sel.shape}")
            counts = sel.sum(-1)
            if np.any(counts != counts[0]) or counts[0] < 1:
                raise AttnBoundsError(f"selection must pick the same number N >= 1 of tokens in every row, got counts {np.unique(counts)}")
            if N is not None and N != counts[0]:
                raise AttnBoundsError(f"N={N} disagrees with the selection, which picks {counts[0]} tokens")
            N = int(counts[0])
        if N is not None:
            N = integer_in("N", N, 1, L)
        pars: dict[str, np.ndarray] = {}
        for name, value in params.items():
            arr = as_float_array(name, value, (0, 1))
            if arr.ndim == 1 and arr.shape[0] != B:
                raise AttnBoundsError(f"parameter {name} must be a scalar or have shape ({B},), got {arr.shape}")
            pars[name] = np.broadcast_to(arr, (B,)).copy()
        arrs: dict[str, np.ndarray] = {}
        for name, value in (arrays or {}).items():
            arr = as_float_array(name, value, (2, 3))
            if arr.shape[0] != B:
                raise AttnBoundsError(f"array {name} must have leading batch axis {B}, got shape {arr.shape}")
            arrs[name] = arr
        return cls(alpha=alpha, logits=logits, normaliser=normaliser, x=xa, q=q, k=k, N=N,
                   selection=sel, params=pars, arrays=arrs)

    # -- views ---------------------------------------------------------------------------------
    @property
    def B(self) -> int:
        return int(self.alpha.shape[0])

    @property
    def L(self) -> int:
        return int(self.alpha.shape[1])

    @property
    def mask(self) -> np.ndarray:
        """``I_N`` as a boolean ``(B, L)`` mask: the given selection, else the top-N weights."""
        if "mask" not in self._cache:
            if self.N is None:
                raise AttnBoundsError("this statement needs a selection size N; pass N=... when building the instance")
            self._cache["mask"] = self.selection if self.selection is not None else top_n_mask(self.alpha, self.N)
        return self._cache["mask"]

    @property
    def is_top_n(self) -> np.ndarray:
        """Per instance: does the selection consist of N largest weights (ties allowed)?"""
        if self.selection is None:
            return np.ones(self.B, dtype=bool)
        m = self.mask
        lo_in = np.where(m, self.alpha, np.inf).min(-1)
        hi_out = np.where(~m, self.alpha, -np.inf).max(-1)
        return lo_in >= hi_out

    def param(self, name: str) -> np.ndarray:
        """A named parameter as a ``(B,)`` array; raises naming the parameter when absent."""
        if name == "L":
            return np.full(self.B, float(self.L))
        if name == "N":
            if self.N is None:
                raise AttnBoundsError("this statement needs N; pass N=... when building the instance")
            return np.full(self.B, float(self.N))
        if name not in self.params:
            have = ", ".join(sorted(self.params)) or "none"
            raise AttnBoundsError(f"this statement needs parameter {name!r}; the instance has: {have}")
        return self.params[name]

    def with_params(self, **params: Any) -> "Instance":
        """A copy with parameters added or replaced (cached quantities are recomputed)."""
        merged = {**self.params, **params}
        return Instance._build(self.alpha, self.logits, self.normaliser, self.x, self.q, self.k, self.N,
                               self.selection, self.arrays, merged)

    def take(self, index: Any) -> "Instance":
        """The sub-batch ``index`` (an int, slice, or index array), keeping the batch axis."""
        idx = np.atleast_1d(np.arange(self.B)[index])
        pick = lambda a: None if a is None else a[idx]  # noqa: E731
        norm = None if self.normaliser is None else self.normaliser.take(idx)
        return replace(self, alpha=self.alpha[idx], logits=pick(self.logits), normaliser=norm, x=pick(self.x), q=pick(self.q),
                       k=pick(self.k), selection=pick(self.selection),
                       params={k_: v[idx] for k_, v in self.params.items()},
                       arrays={k_: v[idx] for k_, v in self.arrays.items()}, _cache={})
