"""From a layer's tensors to batches of attention rows (the instances of paper section 2).

Choices the paper leaves open, all parameters (recorded in the output):

- ``queries``: ``"all"`` (the paper's protocol) takes every query position ``t`` of a window of ``L``
  tokens, ``"last"`` only ``t = L-1`` (the row that attends to exactly the ``L`` keys), ``"tail:Q"``
  the last ``Q`` positions. With windows cut as prefixes of longer ones, the rows of a window of ``L``
  tokens are the first ``L`` rows of the longer window (GPT-2 is causal with absolute positions), so
  every row is computed once and counted for every ``L`` it belongs to.
- ``masked_keys``: ``"drop"`` makes query ``t`` an instance of length ``t+1`` (its visible keys);
  ``"zero"`` keeps all ``L`` keys with weight 0 on the causally masked ones.
- ``tensor``: which tensor plays ``x_i`` (``values``, ``keys``, ``queries``); ``sphere`` rescales every
  ``x_i`` to norm ``M`` (Assumption 1).

A row set is a dict ``(t, l) -> [L, ...]``: query position, instance length, and the window lengths
whose rows include it (:func:`plan`). A :class:`RecordRows` hands out the batches of a layer record:
the rows ``(t, l)`` of every (window, head) pair, in (window, head) order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterable

import numpy as np

from attnbounds.empirical.extract import LayerRecord
from attnbounds.empirical.kernels import Batch, Record
from attnbounds.theory.mathematics.errors import InvalidArgument

QUERY_MODES = ("all", "last", "tail:Q")
MASKED_KEYS = ("drop", "zero")


@dataclass(frozen=True)
class QuerySpec:
    """Which query positions become instances, and how causally masked keys are treated."""

    mode: str = "all"  # "all", "last" or "tail"
    count: int = 1  # Q for "tail"
    masked_keys: str = "drop"  # "drop" or "zero"

    @classmethod
    def parse(cls, text: str, masked_keys: str = "drop") -> "QuerySpec":
        if masked_keys not in MASKED_KEYS:
            raise InvalidArgument(f"masked keys must be 'drop' or 'zero', got {masked_keys!r}")
        if text in ("all", "last"):
            return cls(text, 1, masked_keys)
        if isinstance(text, str) and text.startswith("tail:"):
            try:
                q = int(text[5:])
            except ValueError:
                q = 0
            if q >= 1:
                return cls("tail", q, masked_keys)
        raise InvalidArgument(f"queries must be 'all', 'last' or 'tail:Q' with an integer Q >= 1, got {text!r}")

    def label(self) -> str:
        return self.mode if self.mode != "tail" else f"tail:{self.count}"

    def describe(self) -> str:
        what = {"all": "every query position", "last": "the last query position",
                "tail": f"the last {self.count} query positions"}[self.mode]
        keys = ("causally masked keys dropped (query t is an instance of length t + 1)" if self.masked_keys == "drop"
                else "causally masked keys kept with weight 0 (every instance has length L)")
        return f"{what} of each window of L tokens; {keys}"

    def positions(self, L: int) -> range:
        """The query positions of a window of ``L`` tokens."""
        if self.mode == "all":
            return range(L)
        return range(max(0, L - (1 if self.mode == "last" else self.count)), L)


def plan(spec: QuerySpec, Ls: Iterable[int], length: int, prefixes: bool) -> dict[tuple[int, int], list[int]]:
    """``(t, l) -> [L, ...]``: the rows a record of ``length`` tokens gives the window lengths ``Ls``.

    ``prefixes``: the record is a window of the longest length and shorter windows are its prefixes;
    otherwise the record is a window of exactly ``length`` tokens and serves only ``L = length``.
    Rows of length 1 (the first query, when masked keys are dropped) hold no top-N split and are left out.
    """
    out: dict[tuple[int, int], list[int]] = {}
    for L in sorted(set(Ls)):
        if L > length or (not prefixes and L != length):
            continue
        for t in spec.positions(L):
            ell = t + 1 if spec.masked_keys == "drop" else L
            if ell >= 2:
                out.setdefault((t, ell), []).append(L)
    return dict(sorted(out.items()))


def to_sphere(x: np.ndarray, M: float = 1.0) -> np.ndarray:
    """Every vector rescaled to norm ``M`` (Assumption 1's sphere); zero vectors are left at 0."""
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 0, x * (M / np.where(n > 0, n, 1.0)), 0.0)


def _as64(t: Any) -> np.ndarray:
    """A torch tensor as a C-contiguous float64 array (a layer's q, k and v are strided views of one projection:
    contiguous, a head's tokens are one block, read in place by the compiled loops of :mod:`~attnbounds.empirical.compiled`)."""
    return t.detach().to("cpu").double().contiguous().numpy()


class RecordRows:
    """The rows of one layer record, ``R = B H`` per query position in (window, head) order, float64 on the CPU.

    Token vectors (``values``, ``keys``, ``queries``, optionally on the sphere of radius ``M``) and the
    per-record structures (:class:`~attnbounds.empirical.kernels.Record`) are built on first use.
    """

    def __init__(self, rec: LayerRecord):
        self.rec = rec
        B, H, T, _ = rec.q.shape
        self.B, self.H, self.T = int(B), int(H), int(T)
        self.R = self.B * self.H
        self.probs = rec.probs.detach().to("cpu").float().reshape(self.R, self.T, self.T)
        self.head = rec.layer * self.H + np.tile(np.arange(self.H), self.B)  # global head index per row
        self.window = np.repeat(np.arange(self.B), self.H)  # window slot per row
        self._x: dict[tuple[str, bool, float], np.ndarray] = {}
        self._records: dict[tuple[str, bool, float], Record] = {}

    def x(self, tensor: str, sphere: bool = False, M: float = 1.0) -> np.ndarray:
        key = (tensor, sphere, M)
        if key not in self._x:
            x = _as64(self.rec.tensor(tensor)).reshape(self.R, self.T, -1)
            self._x[key] = to_sphere(x, M) if sphere else x
        return self._x[key]

    def record(self, tensor: str, sphere: bool = False, M: float = 1.0) -> Record:
        key = (tensor, sphere, M)
        if key not in self._records:
            self._records[key] = Record(self.x(tensor, sphere, M))
        return self._records[key]

    def weights(self, t: int, ell: int) -> np.ndarray:
        """``(R, ell)``: query ``t``'s weights over the first ``ell`` keys (zero on masked ones)."""
        return self.probs[:, t, :ell].double().numpy()

    def batch(self, t: int, ell: int, tensor: str | None, sphere: bool = False, M: float = 1.0) -> Batch:
        if tensor is None:
            return Batch(self.weights(t, ell), None)
        record = self.record(tensor, sphere, M)
        return Batch(self.weights(t, ell), record.x[:, :ell], record)

    @cached_property
    def _qk(self) -> tuple[np.ndarray, np.ndarray]:
        return (_as64(self.rec.q).reshape(self.R, self.T, -1), _as64(self.rec.k).reshape(self.R, self.T, -1))

    def logits(self, t: int, ell: int, scaled: bool = False) -> np.ndarray:
        """``q_t . k_i`` over the first ``ell`` keys ``(R, ell)``, float64 (times the model's scaling if ``scaled``)."""
        q, k = self._qk
        raw = np.einsum("rd,rid->ri", q[:, t], k[:, :ell])
        return raw * self.rec.scaling if scaled else raw
