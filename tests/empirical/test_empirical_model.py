"""Model loading, the embedded tiny model, and per-layer extraction (against output_attentions and a
manual recomputation from the c_attn weights)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from _gpt2 import random_gpt2
from attnbounds.empirical import modelload, models, training
from attnbounds.empirical.extract import Extractor, LayerRecord, causal_probs, plain_forward
from attnbounds.empirical.text import resolve_text
from attnbounds.empirical.windows import tokenize
from attnbounds.theory.mathematics.errors import AttnBoundsError

SMALL_SPEC = training.TrainSpec(n_layer=2, n_head=2, n_embd=32, n_positions=64, seq_len=64, steps=4, warmup=2,
                           eval_windows=2)


# -- loading ------------------------------------------------------------------------------------
def test_local_folder_loads_with_eager_attention(rand_model_dir: Path) -> None:
    lm = models.load_model(str(rand_model_dir))
    assert lm.source == "local-dir" and lm.model.config._attn_implementation == "eager"
    assert not lm.model.training
    assert lm.describe()["n_layer"] == 2 and lm.describe()["n_head"] == 2


def test_weights_only_torch_file(tmp_path: Path) -> None:
    model = random_gpt2(seed=3)
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")
    loaded = modelload.from_dir(tmp_path)
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name


def test_unavailable_hub_model_fails_fast_with_instructions() -> None:
    t0 = time.perf_counter()
    with pytest.raises(AttnBoundsError) as err:
        models.load_model("attnbounds-test/no-such-model")
    msg = str(err.value)
    assert "not available" in msg and "--model tiny" in msg and "hf download" in msg
    assert "Traceback" not in msg and time.perf_counter() - t0 < 10


def test_hub_name_served_from_the_hf_cache(rand_model_dir: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A hub name resolves through the Hugging Face cache layout offline (HF_HUB_OFFLINE=1)."""
    import shutil

    import huggingface_hub.constants as hub_constants

    repo = tmp_path / "models--someone--tiny-gpt2"
    commit = "0" * 40
    shutil.copytree(rand_model_dir, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path))
    lm = models.load_model("someone/tiny-gpt2")
    assert lm.source == "hub-cache" and lm.path.endswith(commit)
    assert lm.model.config._attn_implementation == "eager"


def test_non_gpt2_model_rejected(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(AttnBoundsError, match="model_type 'llama'.*GPT-2-family"):
        models.load_model(str(tmp_path))


@pytest.mark.parametrize("bad", ["", None, 3])
def test_bad_model_name(bad: object) -> None:
    with pytest.raises(AttnBoundsError, match="--model"):
        models.load_model(bad)  # type: ignore[arg-type]


def test_folder_without_weights(tmp_path: Path) -> None:
    random_gpt2().config.save_pretrained(tmp_path)
    with pytest.raises(AttnBoundsError, match="neither .*safetensors nor pytorch_model.bin"):
        models.load_model(str(tmp_path))


# -- the embedded tiny model ------------------------------------------------------------------
def test_tiny_trains_once_caches_safetensors_and_reuses(small_text_path: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNBOUNDS_CACHE", str(tmp_path))
    src = resolve_text(small_text_path)
    first = training.load_or_train(src, spec=SMALL_SPEC, progress=False)
    folder = Path(first.path)
    assert first.info["trained_now"] and (folder / "model.safetensors").is_file()
    record = json.loads((folder / "training.json").read_text())
    assert record["spec"]["n_layer"] == 2 and record["steps_done"] == 4 and math.isfinite(record["final_loss"])
    assert record["train_tokens"] + record["heldout_tokens"] == len(tokenize(src, first.tokenizer))
    assert math.isfinite(record["heldout_perplexity"]) and first.info["training"]["heldout_windows"] == 2
    assert record["text_sha256"] == src.sha256 and len(record["loss_curve"]) == 4
    second = training.load_or_train(src, spec=SMALL_SPEC, progress=False)
    assert not second.info["trained_now"] and second.path == first.path
    for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()):
        assert torch.equal(a, b)


def test_tiny_training_is_seeded(small_text_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = resolve_text(small_text_path)
    states = []
    for sub in ("a", "b"):
        monkeypatch.setenv("ATTNBOUNDS_CACHE", str(tmp_path / sub))
        states.append(training.load_or_train(src, spec=SMALL_SPEC, progress=False).model.state_dict())
    for a, b in zip(*(s.values() for s in states)):
        assert torch.allclose(a, b)


def test_tiny_spec_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ATTNBOUNDS_TINY_SPEC", '{"steps": 7}')
    assert training.spec_for("tiny").steps == 7
    monkeypatch.setenv("ATTNBOUNDS_TINY_SPEC", '{"nope": 1}')
    with pytest.raises(AttnBoundsError, match="ATTNBOUNDS_TINY_SPEC"):
        training.spec_for("tiny")


def test_tiny_needs_enough_text(tmp_path: Path) -> None:
    short = tmp_path / "short.txt"
    short.write_text("a few words only")
    with pytest.raises(AttnBoundsError, match="needs at least"):
        training.load_or_train(resolve_text(short), spec=SMALL_SPEC, progress=False)


def test_default_specs_fit_the_protocol() -> None:
    from attnbounds.empirical.config import Protocol

    tiny, standin = training.SPECS["tiny"], training.SPECS["standin"]
    assert tiny.n_positions >= Protocol.full().max_L and tiny.n_layer >= 4 and tiny.n_head >= 4
    assert standin.n_positions >= Protocol.full().max_L and standin.n_layer >= 8 and standin.n_head >= 8
    assert standin.vocabulary == "train-split" and standin.steps * standin.seq_len > 5 * 10**5


def test_restricted_vocabulary_maps_unseen_tokens_to_one_id(small_text_path: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    monkeypatch.setenv("ATTNBOUNDS_CACHE", str(tmp_path))
    src = resolve_text(small_text_path)
    lm = training.load_or_train(src, "standin", spec=replace(SMALL_SPEC, vocabulary="train-split"), progress=False)
    vocab = training.Vocabulary.read(Path(lm.path))
    assert vocab is not None and lm.model.config.vocab_size == vocab.size and vocab.size % 64 == 0
    ids = lm.tokenizer.encode("the prince said Zyzzyva")
    assert max(ids) == vocab.unknown and min(ids) >= 0 and "restricted to" in lm.tokenizer.name
    again = models.load_model(lm.path)  # the folder keeps its tokenizer and training record
    assert again.tokenizer.encode("the prince") == ids[:2] and again.info["training"]["name"] == "standin"


# -- extraction -------------------------------------------------------------------------------
def _records(model: torch.nn.Module, ids: torch.Tensor) -> list[LayerRecord]:
    out: list[LayerRecord] = []
    with Extractor(model, out.append) as ex:
        ex.run(ids)
    return out


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    return torch.randint(0, 50257, (2, 24), generator=torch.Generator().manual_seed(0))


def test_extraction_matches_output_attentions(rand_model: torch.nn.Module, ids: torch.Tensor) -> None:
    recs = _records(rand_model, ids)
    with torch.inference_mode():
        ref = rand_model(input_ids=ids, output_attentions=True).attentions
    assert [r.layer for r in recs] == list(range(len(ref)))
    for rec, att in zip(recs, ref):
        assert rec.probs.shape == att.shape == (2, 2, 24, 24)
        torch.testing.assert_close(rec.probs, att, rtol=0, atol=1e-6)


def test_extraction_matches_manual_recomputation(rand_model: torch.nn.Module, ids: torch.Tensor) -> None:
    recs = _records(rand_model, ids)
    with torch.inference_mode():
        hidden = rand_model(input_ids=ids, output_hidden_states=True).hidden_states
    H, E = 2, 32
    dh = E // H
    for layer, (rec, block) in enumerate(zip(recs, rand_model.transformer.h)):
        with torch.inference_mode():
            h = block.ln_1(hidden[layer])
            qkv = h @ block.attn.c_attn.weight + block.attn.c_attn.bias  # Conv1D: x W + b
        q, k, v = (t.reshape(2, 24, H, dh).permute(0, 2, 1, 3) for t in qkv.split(E, dim=-1))
        torch.testing.assert_close(rec.q, q, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rec.k, k, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(rec.v, v, rtol=1e-5, atol=1e-5)
        raw = q.double() @ k.double().transpose(-1, -2)
        assert rec.logits(scaled=False).dtype == torch.float64
        torch.testing.assert_close(rec.logits(scaled=False), raw, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(rec.logits(scaled=True), raw / math.sqrt(dh), rtol=1e-5, atol=1e-4)
        raw = raw.float()
        mask = torch.ones(24, 24, dtype=torch.bool).triu(1)
        probs = torch.softmax((raw / math.sqrt(dh)).masked_fill(mask, float("-inf")), -1)
        torch.testing.assert_close(rec.probs, probs, rtol=1e-5, atol=1e-6)
        assert rec.scaling == pytest.approx(1 / math.sqrt(dh))


def test_prefix_row_is_the_shorter_window(rand_model: torch.nn.Module, ids: torch.Tensor) -> None:
    """Query L-1 of a long window == the last query of a window of L tokens (causal, absolute positions)."""
    long = _records(rand_model, ids)
    L = 10
    short = _records(rand_model, ids[:, :L])
    for a, b in zip(long, short):
        torch.testing.assert_close(a.probs[:, :, L - 1, :L], b.probs[:, :, L - 1, :], rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a.v[:, :, :L], b.v, rtol=1e-5, atol=1e-5)


def test_inverse_layer_scaling_read_from_module(ids: torch.Tensor) -> None:
    model = random_gpt2(scale_attn_by_inverse_layer_idx=True)
    recs = _records(model, ids)
    with torch.inference_mode():
        ref = model(input_ids=ids, output_attentions=True).attentions
    for layer, (rec, att) in enumerate(zip(recs, ref)):
        assert rec.scaling == pytest.approx(1 / math.sqrt(16) / (layer + 1))
        torch.testing.assert_close(causal_probs(rec.q, rec.k, rec.scaling), att, rtol=1e-5, atol=1e-6)


def test_hooks_removed_and_plain_forward_runs(rand_model: torch.nn.Module, ids: torch.Tensor) -> None:
    def hooks() -> list[int]:
        return [len(m._forward_hooks) for b in rand_model.transformer.h for m in (b.attn, b.attn.c_attn)]

    before = hooks()
    calls: list[int] = []
    with Extractor(rand_model, lambda r: calls.append(r.layer)) as ex:
        ex.run(ids)
    plain_forward(rand_model, ids)
    assert calls == [0, 1] and hooks() == before


def test_window_longer_than_model_positions(rand_model: torch.nn.Module) -> None:
    with pytest.raises(AttnBoundsError, match="n_positions=128"):
        with Extractor(rand_model, lambda r: None) as ex:
            ex.run(np.zeros((1, 200), dtype=np.int64))
