"""Nulls: the same experiments where the model has learned nothing, so a headline that a null also "reproduces"
is marked as not discriminating (``headlines``).

- ``random-init``: the same architecture with fresh random weights (transformers' GPT-2 initialisation,
  seeded), on the same windows;
- ``shuffled``: the model on windows whose tokens are permuted at random (seeded per window): the text's
  order destroyed, its tokens kept;
- ``uniform``: the model's own token vectors with uniform causal attention (query ``t`` weighs its ``t + 1``
  keys equally; logits 0).

Nulls run on the first ``Protocol.null_windows`` windows (recorded).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from attnbounds.empirical.extract import LayerRecord

MODEL = "model"


@dataclass(frozen=True)
class Variant:
    """What one pass over the windows runs: whose weights, which tokens, which attention."""

    name: str
    weights: str  # "trained" (the model as loaded) or "random-init"
    tokens: str  # "as-is" or "shuffled"
    attention: str  # "model" or "uniform"
    description: str


VARIANTS = {
    MODEL: Variant(MODEL, "trained", "as-is", "model", "the model on the windows"),
    "random-init": Variant("random-init", "random-init", "as-is", "model",
                           "the same architecture with random initial weights (GPT-2 initialisation, seeded)"),
    "shuffled": Variant("shuffled", "trained", "shuffled", "model",
                        "the model on windows whose tokens are randomly permuted (seeded per window)"),
    "uniform": Variant("uniform", "trained", "as-is", "uniform",
                       "the model's token vectors with uniform causal attention (logits 0)"),
}


def shuffle_windows(wins: np.ndarray, seed: int) -> np.ndarray:
    """Each window's tokens permuted by a generator seeded by (seed, window index)."""
    out = wins.copy()
    for w in range(out.shape[0]):
        np.random.default_rng([seed, 5, w]).shuffle(out[w])
    return out


def uniform_attention(rec: LayerRecord) -> LayerRecord:
    """The record with uniform causal weights (row ``t``: ``1/(t+1)`` on keys ``0..t``) and zero queries."""
    import torch

    T = rec.length
    probs = torch.tril(torch.ones(T, T, dtype=rec.probs.dtype, device=rec.probs.device))
    probs = (probs / probs.sum(-1, keepdim=True)).expand_as(rec.probs)
    return dataclasses.replace(rec, probs=probs, q=torch.zeros_like(rec.q), _logits={})


def random_init(config: Any, seed: int) -> Any:
    """A GPT2LMHeadModel of ``config`` with seeded random initial weights (eval mode, eager attention)."""
    import copy

    import torch
    from transformers import GPT2LMHeadModel

    cfg = copy.deepcopy(config)
    cfg._attn_implementation = "eager"
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = GPT2LMHeadModel(cfg)
    finally:
        torch.random.set_rng_state(state)
    model.eval()
    model.config.use_cache = False
    return model
