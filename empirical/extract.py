"""Per-layer extraction of attention tensors from a GPT-2-family model, streamed layer by layer.

For every layer the consumer receives the attention probabilities, queries, keys and values of
all heads (paper section 3: "for every layer and head, the full attention matrix and the query,
key and value tensors"); logits with and without the ``1/sqrt(d_head)`` scale are computed on
demand. Only one layer is held at a time: the hook hands the layer over while the forward pass
runs, then drops it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from attnbounds.theory.mathematics.errors import InvalidArgument


@dataclass
class LayerRecord:
    """One layer of one batch of windows. Tensors are torch, shapes ``(B, H, L, d_head)``.

    ``probs`` is ``(B, H, L, L)``: row ``t`` is the causal attention of query ``t`` over keys ``0..t``.
    ``scaling`` is the factor the model applies to ``q . k`` before the softmax
    (``1/sqrt(d_head)``, times ``1/(layer+1)`` when ``scale_attn_by_inverse_layer_idx``).
    """

    layer: int
    q: Any
    k: Any
    v: Any
    probs: Any
    scaling: float
    _logits: dict[bool, Any] = field(default_factory=dict, repr=False)

    @property
    def n_heads(self) -> int:
        return int(self.q.shape[1])

    @property
    def length(self) -> int:
        return int(self.q.shape[2])

    def logits(self, scaled: bool = True) -> Any:
        """``q . k`` for every (query, key) pair, ``(B, H, L, L)`` float64, unmasked; times ``scaling`` if ``scaled``.

        Computed in float64 from the model's q and k: near-ties at low temperature (Fig. 4) must not
        be decided by float32 rounding of the product.
        """
        if scaled not in self._logits:
            raw = self._logits.get(False)
            if raw is None:
                import torch

                raw = torch.matmul(self.q.double(), self.k.double().transpose(-1, -2))
                self._logits[False] = raw
            if scaled:
                self._logits[True] = raw * self.scaling
        return self._logits[scaled]

    def logit_rows(self, positions: list[int], length: int, scaled: bool = True) -> Any:
        """Logits of the given query positions over keys ``0..length-1``, ``(B, H, len(positions), length)`` float64.

        Only the rows an experiment reads are computed (the full ``L x L`` product is not needed).
        """
        import torch

        q = self.q[:, :, positions, :].double()
        out = torch.matmul(q, self.k[:, :, :length, :].double().transpose(-1, -2))
        return out * self.scaling if scaled else out

    def tensor(self, name: str) -> Any:
        """``values``, ``keys`` or ``queries`` (which tensor plays the paper's ``x_i``)."""
        try:
            return {"values": self.v, "keys": self.k, "queries": self.q}[name]
        except KeyError:
            raise InvalidArgument(f"token vectors must be one of values, keys, queries; got {name!r}") from None


def _blocks(model: Any) -> Any:
    base = getattr(model, "transformer", model)
    if not hasattr(base, "h"):
        raise InvalidArgument(f"{type(model).__name__} is not a GPT-2-family model (no transformer.h blocks)")
    return base, base.h


def attention_scaling(attn: Any, layer: int) -> float:
    """The factor GPT-2 applies to ``q . k`` in ``layer`` (read from the module, else its config)."""
    if hasattr(attn, "scaling"):
        return float(attn.scaling)
    scale = 1.0 / math.sqrt(attn.head_dim) if getattr(attn, "scale_attn_weights", True) else 1.0
    if getattr(attn, "scale_attn_by_inverse_layer_idx", False):
        scale /= float(layer + 1)
    return scale


def causal_probs(q: Any, k: Any, scaling: float) -> Any:
    """Causal softmax attention recomputed from q and k (used when the module does not return weights)."""
    import torch

    L = q.shape[-2]
    logits = torch.matmul(q, k.transpose(-1, -2)) * scaling
    mask = torch.ones(L, L, dtype=torch.bool, device=q.device).triu(1)
    return torch.softmax(logits.masked_fill(mask, float("-inf")), dim=-1)


class Extractor:
    """Context manager that streams a :class:`LayerRecord` per layer to ``consumer`` during forward passes.

    >>> with Extractor(model, consumer) as ex:   # doctest: +SKIP
    ...     ex.run(input_ids)
    """

    def __init__(self, model: Any, consumer: Callable[[LayerRecord], None]):
        self.model = model
        self.consumer = consumer
        self.base, self.blocks = _blocks(model)
        self._handles: list[Any] = []
        self._qkv: dict[int, Any] = {}

    def __enter__(self) -> "Extractor":
        for layer, block in enumerate(self.blocks):
            attn = block.attn
            self._handles.append(attn.c_attn.register_forward_hook(self._qkv_hook(layer)))
            self._handles.append(attn.register_forward_hook(self._attn_hook(layer, attn)))
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        self._qkv.clear()

    def _qkv_hook(self, layer: int) -> Callable[..., None]:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            self._qkv[layer] = output

        return hook

    def _attn_hook(self, layer: int, attn: Any) -> Callable[..., None]:
        def hook(module: Any, inputs: Any, output: Any) -> None:
            qkv = self._qkv.pop(layer)
            B, L, three_e = qkv.shape
            H = attn.num_heads
            dh = three_e // (3 * H)
            q, k, v = (t.view(B, L, H, dh).transpose(1, 2) for t in qkv.split(three_e // 3, dim=2))
            scaling = attention_scaling(attn, layer)
            probs = None
            if isinstance(output, tuple):
                probs = next((o for o in output[1:] if getattr(o, "ndim", 0) == 4 and o.shape[-1] == L), None)
            if probs is None:
                probs = causal_probs(q, k, scaling)
            self.consumer(LayerRecord(layer=layer, q=q, k=k, v=v, probs=probs, scaling=scaling))

        return hook

    def run(self, input_ids: Any) -> None:
        """One forward pass of the transformer body (no LM head) over ``input_ids`` ``(B, L)``."""
        import torch

        ids = torch.as_tensor(input_ids, dtype=torch.long, device=next(self.model.parameters()).device)
        if ids.ndim != 2:
            raise InvalidArgument(f"input_ids must have shape (batch, length), got {tuple(ids.shape)}")
        n_pos = self.model.config.n_positions
        if ids.shape[1] > n_pos:
            raise InvalidArgument(f"windows of {ids.shape[1]} tokens exceed the model's n_positions={n_pos}")
        with torch.inference_mode():
            self.base(input_ids=ids, use_cache=False)


def plain_forward(model: Any, input_ids: Any) -> None:
    """The same forward pass without extraction (the baseline of the overhead benchmark)."""
    import torch

    base, _ = _blocks(model)
    with torch.inference_mode():
        base(input_ids=torch.as_tensor(input_ids, dtype=torch.long), use_cache=False)
