"""From a layer's tensors to batches of attention rows (the instances of paper section 2).

Choices the paper leaves open, all parameters (recorded in the output):

- ``queries``: ``"last"`` takes query ``L-1`` of each window prefix of length ``L``: it attends to
  exactly the ``L`` keys ``0..L-1``, so it is an attention instance of length ``L``, identical to
  running the model on a window of ``L`` tokens (GPT-2 is causal with absolute positions).
  ``"tail:Q"`` takes the last ``Q`` query positions ``t = L-Q..L-1`` of the prefix.
- ``masked_keys`` (only with ``tail:Q``): ``"drop"`` makes query ``t`` an instance of length ``t+1``
  (its visible keys); ``"zero"`` keeps all ``L`` keys with weight 0 on the causally masked ones.
- ``tensor``: which tensor plays ``x_i`` (``values``, ``keys``, ``queries``), ``sphere`` rescales
  every ``x_i`` to norm ``M`` (Assumption 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnbounds.empirical.extract import LayerRecord
from attnbounds.theory.errors import InvalidArgument


@dataclass(frozen=True)
class QuerySpec:
    """Which query positions become instances, and how causally masked keys are treated."""

    mode: str = "last"  # "last" or "tail"
    count: int = 1  # Q for "tail"
    masked_keys: str = "drop"  # "drop" or "zero"

    @classmethod
    def parse(cls, text: str, masked_keys: str = "drop") -> "QuerySpec":
        if masked_keys not in ("drop", "zero"):
            raise InvalidArgument(f"masked keys must be 'drop' or 'zero', got {masked_keys!r}")
        if text == "last":
            return cls("last", 1, masked_keys)
        if text.startswith("tail:"):
            try:
                q = int(text[5:])
            except ValueError:
                q = 0
            if q >= 1:
                return cls("tail", q, masked_keys)
        raise InvalidArgument(f"queries must be 'last' or 'tail:Q' with an integer Q >= 1, got {text!r}")

    def label(self) -> str:
        return "last" if self.mode == "last" else f"tail:{self.count}"


@dataclass
class RowBatch:
    """``R`` attention rows of common length ``L`` with their token vectors and provenance."""

    alpha: np.ndarray  # (R, L) float64, rows on the simplex
    x: np.ndarray | None  # (R, L, d) float64
    logits: np.ndarray | None  # (R, L) float64
    head: np.ndarray  # (R,) global head index layer * H + h
    window: np.ndarray  # (R,) window index within the batch
    query: np.ndarray  # (R,) query position

    @property
    def L(self) -> int:
        return int(self.alpha.shape[1])

    def take(self, index: np.ndarray) -> "RowBatch":
        pick = lambda a: None if a is None else a[index]  # noqa: E731
        return RowBatch(self.alpha[index], pick(self.x), pick(self.logits), self.head[index], self.window[index],
                        self.query[index])


def _as64(t: object) -> np.ndarray:
    import torch

    assert isinstance(t, torch.Tensor)
    return t.detach().to(torch.float64).cpu().numpy()


def to_sphere(x: np.ndarray, M: float = 1.0) -> np.ndarray:
    """Every vector rescaled to norm ``M`` (Assumption 1's sphere); zero vectors are left at 0."""
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.where(n > 0, x * (M / np.where(n > 0, n, 1.0)), 0.0)


def _positions(spec: QuerySpec, L: int) -> list[int]:
    if spec.mode == "last":
        return [L - 1]
    return list(range(max(0, L - spec.count), L))


def build(rec: LayerRecord, L: int, spec: QuerySpec, *, tensor: str | None = "values", sphere: bool = False,
          M: float = 1.0, logits: str | None = None) -> list[RowBatch]:
    """Rows of the prefixes of length ``L`` in ``rec`` (one batch per instance length).

    ``logits``: ``None``, ``"raw"`` (``q . k``) or ``"scaled"`` (times the model's ``1/sqrt(d_head)``).
    """
    if not 2 <= L <= rec.length:
        raise InvalidArgument(f"L must be in [2, {rec.length}] (the window length), got L={L}")
    if logits not in (None, "raw", "scaled"):
        raise InvalidArgument(f"logits must be 'raw' or 'scaled', got {logits!r}")
    if logits and spec.mode == "tail" and spec.masked_keys == "zero":
        raise InvalidArgument("logit rows exist only over visible keys: use masked_keys='drop' with logits")
    B, H = int(rec.q.shape[0]), rec.n_heads
    xs = None
    if tensor is not None:
        xs = _as64(rec.tensor(tensor)[:, :, :L, :])  # (B, H, L, d)
        if sphere:
            xs = to_sphere(xs, M)
    head = np.tile(rec.layer * H + np.arange(H), B)
    window = np.repeat(np.arange(B), H)
    positions = _positions(spec, L)
    out: list[RowBatch] = []

    def make(ts: list[int], length: int) -> RowBatch:
        a = np.concatenate([_as64(rec.probs[:, :, t, :length]).reshape(B * H, length) for t in ts])
        a = a / a.sum(-1, keepdims=True)
        x = None if xs is None else np.concatenate([xs[:, :, :length, :].reshape(B * H, length, -1)] * len(ts))
        lg = None
        if logits:
            rows = rec.logit_rows(ts, length, scaled=(logits == "scaled"))  # (B, H, len(ts), length)
            lg = np.concatenate([_as64(rows[:, :, k, :]).reshape(B * H, length) for k in range(len(ts))])
        return RowBatch(a, x, lg, np.tile(head, len(ts)), np.tile(window, len(ts)), np.repeat(np.asarray(ts), B * H))

    if spec.mode == "tail" and spec.masked_keys == "zero":
        out.append(make(positions, L))
    else:
        for t in positions:
            out.append(make([t], t + 1))
    return out
