"""Token ids of the text (cached), its chapters, the held-out region, and the windows the experiments read.

The paper (section 3) runs GPT-2 on "consecutive chapters" of *War and Peace*. When the text has chapter
headings (``CHAPTER I`` lines, as in Project Gutenberg's ebook 2600), every chapter is tokenised on its own
and windows start at a chapter's first token and never cross into the next chapter; without headings the
region is one segment and the windows are consecutive. A model trained here (``training``) is evaluated
only on the tokens after its training split (the held-out region).
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass

import numpy as np

from attnbounds.empirical.cachedir import cache_dir
from attnbounds.empirical.text import TextSource
from attnbounds.empirical.tokenizer import Tokenizer
from attnbounds.theory.io import atomic
from attnbounds.theory.mathematics.errors import InvalidArgument

#: a chapter heading: a line "CHAPTER I" / "Chapter 12" (roman or arabic numeral, optional title after it)
CHAPTER_HEADING = re.compile(r"^[ \t]*(?:CHAPTER|Chapter)[ \t]+(?:[IVXLCDM]+|\d+)\b[^\n]*$", re.M)
#: how windows are laid out: at chapter starts when the text has headings ("auto"), always, or never
ALIGNMENTS = ("auto", "chapters", "consecutive")


@dataclass(frozen=True)
class Tokens:
    """The text's ids and the token offsets where its chapters start (empty without headings)."""

    ids: np.ndarray
    chapters: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.size)


def chapter_offsets(text: str) -> list[int]:
    """Character offsets of the chapter headings of ``text`` (the start of each heading line)."""
    return [m.start() for m in CHAPTER_HEADING.finditer(text)]


def tokenize(text: TextSource, tokenizer: Tokenizer) -> Tokens:
    """The whole text as int64 ids, chapter by chapter (cached per text sha256 and tokenizer)."""
    key = hashlib.sha256(f"{text.sha256}|{tokenizer.name}|chapters".encode()).hexdigest()[:24]
    path = cache_dir("tokens") / f"{key}.npz"
    if path.is_file():
        try:
            with np.load(path, allow_pickle=False) as data:
                return Tokens(data["ids"], data["chapters"])
        except (OSError, ValueError, KeyError):
            pass  # unreadable cache entry: re-tokenise below and overwrite it
    cuts = chapter_offsets(text.text)
    bounds = [0, *[c for c in cuts if c > 0], len(text.text)]
    pieces = [np.asarray(tokenizer.encode(text.text[a:b]), dtype=np.int64) for a, b in zip(bounds, bounds[1:])]
    starts = np.cumsum([0] + [p.size for p in pieces])[:-1]
    ids = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.int64)
    chapters = starts[1:] if cuts and cuts[0] > 0 else starts
    chapters = chapters if cuts else np.zeros(0, dtype=np.int64)
    buf = io.BytesIO()
    np.savez(buf, ids=ids, chapters=np.asarray(chapters, dtype=np.int64))
    atomic.write_bytes(path, buf.getvalue())
    return Tokens(ids, np.asarray(chapters, dtype=np.int64))


def split_point(tokens: Tokens, fraction: float) -> int:
    """Where a training split of ``fraction`` of the tokens ends: the first chapter start at or after that
    fraction (so the held-out part is whole chapters), else the fraction itself."""
    target = int(len(tokens) * fraction)
    after = tokens.chapters[tokens.chapters >= target]
    return int(after[0]) if after.size and after[0] < len(tokens) else target


@dataclass(frozen=True)
class Region:
    """The tokens windows may come from: ``[start, end)``, and why (recorded in the output)."""

    start: int
    end: int
    split: str  # what the region is, e.g. "held-out tokens after the training split"


def segments(tokens: Tokens, region: Region, align: str, offset: int = 0) -> tuple[list[tuple[int, int]], str]:
    """The segments of ``region`` windows are cut from (from ``region.start + offset`` on), and the alignment used.

    ``align``: ``chapters`` (one segment per chapter; the region's first, partial chapter is a segment too),
    ``consecutive`` (one segment), ``auto`` (chapters when the region holds a chapter heading).
    """
    if align not in ALIGNMENTS:
        raise InvalidArgument(f"window alignment must be one of {', '.join(ALIGNMENTS)}, got {align!r}")
    lo, hi = region.start + offset, region.end
    inside = [int(c) for c in tokens.chapters if lo < c < hi]
    if align == "chapters" and not inside and not tokens.chapters.size:
        raise InvalidArgument("window alignment 'chapters' needs a text with chapter headings (lines 'CHAPTER I'); "
                              "this text has none: use 'consecutive' or 'auto'")
    if align == "consecutive" or (align == "auto" and not inside):
        return [(lo, hi)], "consecutive"
    bounds = [lo, *inside, hi]
    return list(zip(bounds, bounds[1:])), "chapters"


def cut(tokens: Tokens, parts: list[tuple[int, int]], length: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` non-overlapping windows of ``length`` tokens, each inside one segment, in text order.

    A segment of ``n`` tokens holds ``n // length`` windows, the first starting at its first token. Returns
    the ids ``(count, length)`` and the windows' first-token offsets ``(count,)``.
    """
    if length < 2:
        raise InvalidArgument(f"window length must be >= 2 tokens, got {length}")
    if count < 1:
        raise InvalidArgument(f"number of windows must be >= 1, got {count}")
    starts: list[int] = []
    for a, b in parts:
        starts.extend(range(a, b - length + 1, length))
        if len(starts) >= count:
            break
    if len(starts) < count:
        where = "its segments" if len(parts) > 1 else f"tokens {parts[0][0]}..{parts[0][1]}" if parts else "nothing"
        raise InvalidArgument(f"the text holds {len(starts)} windows of {length} tokens in {where} "
                              f"({len(tokens)} tokens in all), but {count} were asked for; lower --windows or "
                              "--window-start, or give a longer text")
    first = np.asarray(starts[:count], dtype=np.int64)
    return tokens.ids[first[:, None] + np.arange(length)[None, :]], first
