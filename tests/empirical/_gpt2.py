"""A tiny random GPT-2 for the empirical/ tests (2 layers, 2 heads, n_embd 32)."""

from __future__ import annotations


def random_gpt2(seed: int = 0, **overrides: object):
    """A tiny random GPT2LMHeadModel (eager attention, eval mode)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from attnbounds.empirical.modelload import quiet_transformers

    quiet_transformers()
    cfg = dict(vocab_size=50257, n_positions=128, n_embd=32, n_layer=2, n_head=2, attn_implementation="eager")
    cfg.update(overrides)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**cfg))
    # larger attention weights than the 0.02 init, so that attention is far from uniform
    with torch.no_grad():
        for block in model.transformer.h:
            block.attn.c_attn.weight.mul_(8.0)
    return model.eval()


def collect_on(model, ids, proto, **kwargs):
    """``pipeline.collect`` on the model (in memory) over windows of ``ids`` cut from the start (no chapters)."""
    import numpy as np

    from attnbounds.empirical.modelload import LoadedModel
    from attnbounds.empirical.pipeline import collect, window_sets
    from attnbounds.empirical.tokenizer import offline_gpt2
    from attnbounds.empirical.windows import Region, Tokens

    tokens = Tokens(np.asarray(ids, dtype=np.int64), np.zeros(0, dtype=np.int64))
    sets, _ = window_sets(tokens, Region(0, len(tokens), "test"), proto)
    return collect(LoadedModel(model, "rand", "test", None, offline_gpt2()), sets, proto, progress=False, **kwargs)
