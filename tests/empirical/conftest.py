"""Fixtures for empirical/: a text (War and Peace when ../shared has it, else generated), an isolated
cache, and tiny random GPT-2 models (2 layers, 2 heads, n_embd 32). Nothing here trains for minutes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from _gpt2 import random_gpt2

REPO = Path(__file__).resolve().parents[2]
SHARED_TEXT = REPO.parent / "shared" / "data" / "war-and-peace.txt"

WORDS = ("the prince said that war and peace were two faces of one coin while Natasha laughed at the ball "
         "Pierre walked across the field of Borodino thinking of Moscow and the French army retreated "
         "through snow as the old count counted his debts and the young officers sang").split()


def _generated_text(n_words: int = 60_000, seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    words = rng.choice(WORDS, size=n_words)
    lines, line = [], []
    for k, w in enumerate(words):
        line.append(str(w))
        if len(line) >= 12:
            lines.append(" ".join(line) + ("." if k % 5 == 0 else ","))
            line = []
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="session")
def text_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """War and Peace from ../shared when present (CI), else a generated text (fresh clone)."""
    if SHARED_TEXT.is_file():
        return SHARED_TEXT
    path = tmp_path_factory.mktemp("text") / "generated.txt"
    path.write_text(_generated_text())
    return path


@pytest.fixture(scope="session")
def small_text_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short generated text (fast to tokenise) for tests that do not need a book."""
    path = tmp_path_factory.mktemp("small") / "small.txt"
    path.write_text(_generated_text(6_000, seed=1))
    return path


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attnbounds-cache")


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, session_cache: Path, text_path: Path,
              request: pytest.FixtureRequest) -> None:
    """Every test: the session's cache root, the test text as ATTNBOUNDS_TEXT, the hub offline, one torch thread."""
    if request.node.get_closest_marker("slow") and "slow" not in (request.config.getoption("-m") or ""):
        pytest.skip("slow: run with -m slow")
    monkeypatch.setenv("ATTNBOUNDS_CACHE", str(session_cache))
    monkeypatch.setenv("ATTNBOUNDS_TEXT", str(text_path))
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ATTNBOUNDS_TINY_SPEC", raising=False)
    import torch

    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def rand_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding a tiny random GPT-2 (config.json + model.safetensors)."""
    path = tmp_path_factory.mktemp("rand-gpt2")
    random_gpt2().save_pretrained(path, safe_serialization=True)
    return path


@pytest.fixture(scope="session")
def rand_model():
    return random_gpt2()
