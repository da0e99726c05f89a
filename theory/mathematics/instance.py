"""A batch of attention instances: the one input every statement, test, search and experiment shares.

An instance is one attention situation (paper section 2): logits ``l`` (or query ``q`` and keys
``k``), a normaliser with its parameters, the weights ``alpha`` it produces, token vectors ``x``,
a selection ``I_N`` (the top-N weights by default) and named parameters (``M``, ``delta``, ``r``,
``a``, ``eps``, ...). Everything carries a leading batch axis ``B``.

Token classes (long contexts). The second axis indexes *classes* of identical tokens: column ``k``
stands for ``counts[b, k]`` tokens with the same logit, key, token vector and weight, so a context of
``L = 10^9`` tokens costs ``O(K)``. Without ``counts`` every column is one token (``K = L``), the
dense case. Every quantity is computed from the classes and their counts, exactly, never by
expanding them; :meth:`Instance.expand` materialises the tokens for small ``L`` (tests compare the two).
A batch shares ``L`` and ``N``; classes with count 0 are padding and are ignored. With ``N`` given,
the top-N set is made of whole classes: a class that ``N`` cuts is split into its selected and its
non-selected part (one more column).

Exact logits. Logits are float64; an instance may also carry them as exact rationals
(:meth:`Instance.with_exact_logits`: ``1/10``, which no double is), its float logits then the nearest doubles.
Certification reads the exact ones: an equality case at a point no float64 represents (a logit at a bound
``a = 0.1``) is an instance too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from attnbounds.theory.mathematics.errors import InvalidArgument
from attnbounds.theory.mathematics.normalisers import Normaliser
from attnbounds.theory.mathematics.validation import as_float_array, integer_in

#: the largest context length a class instance may describe (counts are exact int64 integers)
MAX_LENGTH = 10**15


def top_n_mask(alpha: np.ndarray, N: int) -> np.ndarray:
    """Boolean ``(B, L)`` mask of the N largest weights per row (ties broken by lower index): what a stable sort of
    ``-alpha`` selects, found in O(L) per row: the weights above the N-th largest (a partition finds it), then the
    tied ones from the left until there are N. Rows holding NaN are sorted."""
    B, L = alpha.shape
    if not 0 < N < L:
        return _sorted_top_n(alpha, N)
    key = -alpha
    nth = np.partition(key, N - 1, axis=-1)[:, N - 1:N]
    above, tied = key < nth, key == nth
    mask = above | (tied & (np.cumsum(tied, axis=-1) <= N - above.sum(-1, keepdims=True)))
    odd = np.flatnonzero(np.isnan(alpha).any(-1))
    if odd.size:
        mask[odd] = _sorted_top_n(alpha[odd], N)
    return mask


def _sorted_top_n(alpha: np.ndarray, N: int) -> np.ndarray:
    order = np.argsort(-alpha, axis=-1, kind="stable")[:, :N]
    mask = np.zeros(alpha.shape, dtype=bool)
    np.put_along_axis(mask, order, True, axis=-1)
    return mask


def _as_counts(counts: Any, shape: tuple[int, int]) -> np.ndarray:
    arr = np.asarray(counts)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.shape != shape:
        raise InvalidArgument(f"counts must have shape (B, K) = {shape}, like the logits or weights, got {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise InvalidArgument("counts must be whole numbers of tokens, got non-integer values")
        if np.any(np.abs(arr) > MAX_LENGTH):
            raise InvalidArgument(f"counts must be at most {MAX_LENGTH:.0e} tokens per class")
    elif arr.dtype.kind not in "iu":
        raise InvalidArgument(f"counts must be an integer array, got dtype {arr.dtype}")
    out = arr.astype(np.int64)
    if np.any(out < 0):
        raise InvalidArgument(f"counts must be >= 0, got {int(out.min())}")
    totals = out.sum(-1)
    if np.any(totals < 1):
        raise InvalidArgument("every instance needs at least one token: a row of counts sums to 0")
    if np.any(totals != totals[0]):
        raise InvalidArgument(f"every instance of a batch must have the same length L = sum of its counts, got "
                              f"{sorted(set(totals.tolist()))[:5]}")
    if totals[0] > MAX_LENGTH:
        raise InvalidArgument(f"L = {int(totals[0])} exceeds the supported {MAX_LENGTH:.0e} tokens")
    return out


def split_top_n(alpha: np.ndarray, counts: np.ndarray, N: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The top-N token set of a class batch as whole classes.

    Returns ``(columns, selection, counts)``: ``columns`` ``(B, K')`` indexes the original classes (``K' = K + 1`` when some row's N-th token
    falls inside a class, whose copy in the last column holds its non-selected part), ``selection``
    ``(B, K')`` marks the selected classes and ``counts`` ``(B, K')`` the new counts. Classes are
    ranked by weight, ties by lower index, classes of count 0 never selected (as :func:`top_n_mask`).
    """
    B, K = alpha.shape
    key = np.where(counts > 0, -alpha, np.inf)
    order = np.argsort(key, axis=-1, kind="stable")
    ranked = np.take_along_axis(counts, order, -1)
    before = np.cumsum(ranked, -1) - ranked  # tokens ranked before each class
    take = np.clip(N - before, 0, ranked)  # selected tokens of each class, in rank order
    sel_counts = np.empty_like(counts)
    np.put_along_axis(sel_counts, order, take, -1)
    partial = (sel_counts > 0) & (sel_counts < counts)  # at most one per row
    if not partial.any():
        return np.broadcast_to(np.arange(K), (B, K)).copy(), sel_counts > 0, counts.copy()
    which = np.where(partial.any(-1), partial.argmax(-1), 0)
    b = np.arange(B)
    columns = np.concatenate([np.broadcast_to(np.arange(K), (B, K)), which[:, None]], axis=1)
    new_counts = np.concatenate([sel_counts.copy(), np.zeros((B, 1), dtype=np.int64)], axis=1)
    new_counts[:, :K] = np.where(partial, sel_counts, counts)
    new_counts[b, K] = np.where(partial.any(-1), counts[b, which] - sel_counts[b, which], 0)
    selection = np.concatenate([sel_counts > 0, np.zeros((B, 1), dtype=bool)], axis=1)
    return columns, selection, new_counts


class Columns:
    """The batch's shape read from its weights ``alpha`` ``(B, K)`` and its token counts per column (``None`` for
    dense rows): shared by :class:`Instance` and the torch backend's
    :class:`~attnbounds.theory.mathematics.quantities.torch_state.State`."""

    alpha: Any
    counts: np.ndarray | None

    @property
    def B(self) -> int:
        return int(self.alpha.shape[0])

    @property
    def K(self) -> int:
        """Columns: tokens (dense) or token classes."""
        return int(self.alpha.shape[1])

    @property
    def L(self) -> int:
        """The number of tokens (the sum of the counts for token classes)."""
        return self.K if self.counts is None else int(self.counts[0].sum())


@dataclass(frozen=True, eq=False)
class Instance(Columns):
    """A batch of ``B`` attention instances of common length ``L`` (see module docstring).

    Build one with :meth:`from_logits`, :meth:`from_qk` or :meth:`from_weights`; pass ``counts``
    for token classes.
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
    counts: np.ndarray | None = None
    #: the logits as exact rationals (an object array of :class:`~fractions.Fraction`, the shape of ``logits``, whose
    #: nearest doubles they are), or None: the float logits are exact (:meth:`with_exact_logits`)
    exact_logits: np.ndarray | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def from_logits(cls, logits: Any, normaliser: Normaliser, *, x: Any = None, N: int | None = None,
                    q: Any = None, k: Any = None, selection: Any = None, arrays: dict[str, Any] | None = None,
                    counts: Any = None, **params: Any) -> "Instance":
        """Weights produced by ``normaliser`` from ``logits`` of shape ``(B, K)`` (or ``(K,)``)."""
        lg = as_float_array("logits", logits, (1, 2))
        lg = lg[None, :] if lg.ndim == 1 else lg
        if not isinstance(normaliser, Normaliser):
            raise InvalidArgument(f"normaliser must be a attnbounds.theory.mathematics.normalisers.Normaliser, got {normaliser!r}")
        cnt = None if counts is None else _as_counts(counts, lg.shape)
        alpha = normaliser.weights(lg, counts=cnt)
        own = {k_: v for k_, v in normaliser.params.items() if k_ not in params}
        return cls._build(alpha, lg, normaliser, x, q, k, N, selection, arrays, {**own, **params}, cnt)

    @classmethod
    def from_qk(cls, q: Any, k: Any, normaliser: Normaliser, **kwargs: Any) -> "Instance":
        """Logits ``l_i = q . k_i`` from queries ``(B, d_k)`` and keys ``(B, K, d_k)``."""
        qa = as_float_array("q", q, (1, 2))
        ka = as_float_array("k", k, (2, 3))
        qa = qa[None] if qa.ndim == 1 else qa
        ka = ka[None] if ka.ndim == 2 else ka
        if qa.shape[0] != ka.shape[0] or qa.shape[-1] != ka.shape[-1]:
            raise InvalidArgument(f"q of shape {qa.shape} does not match k of shape {ka.shape} (want (B,d) and (B,L,d))")
        return cls.from_logits(np.einsum("bd,bld->bl", qa, ka), normaliser, q=qa, k=ka, **kwargs)

    @classmethod
    def from_weights(cls, alpha: Any, *, x: Any = None, N: int | None = None, selection: Any = None,
                     arrays: dict[str, Any] | None = None, counts: Any = None, **params: Any) -> "Instance":
        """Weights given directly, e.g. a real model's attention probabilities (rows on the simplex,
        ``sum_k counts_k alpha_k = 1`` for token classes)."""
        a = as_float_array("alpha", alpha, (1, 2))
        a = a[None, :] if a.ndim == 1 else a
        if np.any(a < 0):
            raise InvalidArgument(f"alpha must be >= 0, got min {a.min()!r}")
        cnt = None if counts is None else _as_counts(counts, a.shape)
        sums = a.sum(-1) if cnt is None else (a * cnt).sum(-1)
        if np.any(np.abs(sums - 1) > 1e-6):
            raise InvalidArgument(f"alpha rows must sum to 1 (within 1e-6), got a row summing to {sums[np.argmax(np.abs(sums - 1))]!r}")
        return cls._build(a, None, None, x, None, None, N, selection, arrays, params, cnt)

    @classmethod
    def _build(cls, alpha: np.ndarray, logits: np.ndarray | None, normaliser: Normaliser | None, x: Any,
               q: np.ndarray | None, k: np.ndarray | None, N: int | None, selection: Any,
               arrays: dict[str, Any] | None, params: dict[str, Any], counts: np.ndarray | None = None) -> "Instance":
        B, K = alpha.shape
        xa = None
        if x is not None:
            xa = as_float_array("x", x, (2, 3))
            xa = xa[None] if xa.ndim == 2 else xa
            if xa.shape[:2] != (B, K):
                raise InvalidArgument(f"x must have shape (B, L, d) = ({B}, {K}, d), got {xa.shape}")
        if counts is not None:
            counts = _as_counts(counts, (B, K))
        L = K if counts is None else int(counts[0].sum())
        mult = np.ones((B, K)) if counts is None else counts
        sel = None
        if selection is not None:
            sel = np.asarray(selection, dtype=bool)
            sel = sel[None] if sel.ndim == 1 else sel
            if sel.shape != (B, K):
                raise InvalidArgument(f"selection must be a boolean mask of shape ({B}, {K}), got {sel.shape}")
            sizes = np.where(sel, mult, 0).sum(-1)
            if np.any(sizes != sizes[0]) or sizes[0] < 1:
                raise InvalidArgument(f"selection must pick the same number N >= 1 of tokens in every row, got counts "
                                      f"{np.unique(sizes)}")
            if N is not None and N != sizes[0]:
                raise InvalidArgument(f"N={N} disagrees with the selection, which picks {int(sizes[0])} tokens")
            N = int(sizes[0])
        if N is not None:
            N = integer_in("N", N, 1, L)
        pars: dict[str, np.ndarray] = {}
        for name, value in params.items():
            arr = as_float_array(name, value, (0, 1))
            if arr.ndim == 1 and arr.shape[0] != B:
                raise InvalidArgument(f"parameter {name} must be a scalar or have shape ({B},), got {arr.shape}")
            pars[name] = np.broadcast_to(arr, (B,)).copy()
        arrs: dict[str, np.ndarray] = {}
        for name, value in (arrays or {}).items():
            arr = as_float_array(name, value, (2, 3))
            if arr.shape[:2] != (B, K):
                raise InvalidArgument(f"array {name} must have shape ({B}, {K}, ...) (batch, tokens), got {arr.shape}")
            arrs[name] = arr
        inst = cls(alpha=alpha, logits=logits, normaliser=normaliser, x=xa, q=q, k=k, N=N, selection=sel,
                   params=pars, arrays=arrs, counts=counts)
        if counts is not None and N is not None and sel is None:
            inst = inst._split()
        return inst

    def _split(self) -> "Instance":
        """The top-N set as whole classes (:func:`split_top_n`), the cut class split in two."""
        assert self.counts is not None and self.N is not None
        columns, selection, counts = split_top_n(self.alpha, self.counts, self.N)
        if columns.shape[1] == self.K:
            return replace(self, selection=selection, _cache={})
        b = np.arange(self.B)[:, None]
        pick = lambda a: None if a is None else a[b, columns]  # noqa: E731
        return replace(self, alpha=self.alpha[b, columns], logits=pick(self.logits),
                       exact_logits=pick(self.exact_logits), x=pick(self.x), k=pick(self.k),
                       arrays={n: v[b, columns] for n, v in self.arrays.items()}, counts=counts,
                       selection=selection, _cache={})

    # -- views ---------------------------------------------------------------------------------
    @property
    def is_classes(self) -> bool:
        return self.counts is not None

    @property
    def multiplicity(self) -> np.ndarray:
        """Tokens per column as floats ``(B, K)``: the counts, or ones (dense)."""
        if "mult" not in self._cache:
            self._cache["mult"] = np.ones(self.alpha.shape) if self.counts is None else self.counts.astype(np.float64)
        return self._cache["mult"]

    @property
    def present(self) -> np.ndarray:
        """Columns that hold at least one token ``(B, K)``."""
        if "present" not in self._cache:
            self._cache["present"] = np.ones(self.alpha.shape, dtype=bool) if self.counts is None else self.counts > 0
        return self._cache["present"]

    @property
    def mask(self) -> np.ndarray:
        """``I_N`` as a boolean ``(B, K)`` mask: the given selection, else the top-N weights."""
        if "mask" not in self._cache:
            if self.N is None:
                raise InvalidArgument("this statement needs a selection size N; pass N=... when building the instance")
            self._cache["mask"] = self.selection if self.selection is not None else top_n_mask(self.alpha, self.N)
        return self._cache["mask"]

    @property
    def is_top_n(self) -> np.ndarray:
        """Per instance: does the selection consist of N largest weights (ties allowed)?"""
        if self.selection is None:
            return np.ones(self.B, dtype=bool)
        m, p = self.mask, self.present
        lo_in = np.where(m & p, self.alpha, np.inf).min(-1)
        hi_out = np.where(~m & p, self.alpha, -np.inf).max(-1)
        return lo_in >= hi_out

    def param(self, name: str) -> np.ndarray:
        """A named parameter as a ``(B,)`` array; raises naming the parameter when absent."""
        if name == "L":
            return np.full(self.B, float(self.L))
        if name == "N":
            if self.N is None:
                raise InvalidArgument("this statement needs N; pass N=... when building the instance")
            return np.full(self.B, float(self.N))
        if name not in self.params:
            have = ", ".join(sorted(self.params)) or "none"
            raise InvalidArgument(f"this statement needs parameter {name!r}; the instance has: {have}")
        return self.params[name]

    def with_params(self, **params: Any) -> "Instance":
        """A copy with parameters added or replaced (cached quantities are recomputed)."""
        merged = {**self.params, **params}
        built = Instance._build(self.alpha, self.logits, self.normaliser, self.x, self.q, self.k, self.N,
                                self.selection, self.arrays, merged, self.counts)
        return built if self.exact_logits is None else replace(built, exact_logits=self.exact_logits)

    def with_exact_logits(self, exact: Any) -> "Instance":
        """A copy whose logits are the rationals ``exact`` (shape ``(B, K)``: :class:`~fractions.Fraction` or int),
        its float logits their nearest doubles and its weights recomputed from those; certification reads the
        rationals (module docstring). Logits given by queries and keys cannot be replaced."""
        if self.logits is None or self.normaliser is None or self.q is not None:
            raise InvalidArgument("exact logits replace the logits of an instance built by from_logits")
        ex = np.asarray(exact, dtype=object)
        if ex.shape != self.logits.shape:
            raise InvalidArgument(f"exact logits must have the logits' shape {self.logits.shape}, got {ex.shape}")
        bad = next((v for v in ex.flat if isinstance(v, bool) or not isinstance(v, (int, Fraction))), None)
        if bad is not None:
            raise InvalidArgument(f"an exact logit must be a fractions.Fraction or an int, got {bad!r:.60}")
        ex = np.vectorize(Fraction, otypes=[object])(ex)
        floats = np.vectorize(float, otypes=[float])(ex)
        alpha = self.normaliser.weights(floats, counts=self.counts)
        return replace(self, alpha=alpha, logits=floats, exact_logits=ex, _cache={})

    def take(self, index: Any) -> "Instance":
        """The sub-batch ``index`` (an int, slice, or index array), keeping the batch axis."""
        idx = np.atleast_1d(np.arange(self.B)[index])
        pick = lambda a: None if a is None else a[idx]  # noqa: E731
        norm = None if self.normaliser is None else self.normaliser.take(idx)
        return replace(self, alpha=self.alpha[idx], logits=pick(self.logits), exact_logits=pick(self.exact_logits),
                       normaliser=norm, x=pick(self.x), q=pick(self.q),
                       k=pick(self.k), selection=pick(self.selection), counts=pick(self.counts),
                       params={k_: v[idx] for k_, v in self.params.items()},
                       arrays={k_: v[idx] for k_, v in self.arrays.items()}, _cache={})

    def expand(self, max_length: int = 1 << 16) -> "Instance":
        """The same batch with every class written out as its tokens (dense, ``K = L``); for tests.

        The weights are recomputed by the normaliser from the expanded logits (from the given weights
        when there is no normaliser); the selection is the class selection, token by token.
        """
        if self.counts is None:
            return self
        if self.L > max_length:
            raise InvalidArgument(f"expanding L = {self.L} tokens exceeds max_length={max_length}")
        reps = [np.repeat(np.arange(self.K), self.counts[b]) for b in range(self.B)]
        idx = np.stack(reps)
        b = np.arange(self.B)[:, None]
        pick = lambda a: None if a is None else a[b, idx]  # noqa: E731
        sel = None if (self.selection is None and self.N is None) else self.mask[b, idx]
        arrays = {n: v[b, idx] for n, v in self.arrays.items()}
        own = set(self.normaliser.params) if self.normaliser is not None else set()
        params = {k_: v for k_, v in self.params.items() if k_ not in own}
        if self.normaliser is not None and self.logits is not None:
            if self.q is not None and self.k is not None:
                return Instance.from_qk(self.q, pick(self.k), self.normaliser, x=pick(self.x), N=self.N, selection=sel,
                                        arrays=arrays, **params)
            dense = Instance.from_logits(pick(self.logits), self.normaliser, x=pick(self.x), N=self.N, selection=sel,
                                         arrays=arrays, **params)
            return dense if self.exact_logits is None else dense.with_exact_logits(pick(self.exact_logits))
        return Instance.from_weights(pick(self.alpha), x=pick(self.x), N=self.N, selection=sel, arrays=arrays,
                                     **params)
