"""Where the text comes from: ``--text``, ``$ATTNBOUNDS_TEXT``, the user cache, or Project Gutenberg.

The paper (section 3) runs GPT-2 on consecutive chapters of *War and Peace*; Project Gutenberg
ebook 2600 is that text. The text is never part of the repository.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from attnbounds.theory.io import atomic
from attnbounds.empirical.cachedir import cache_dir, sha256_bytes, sha256_file
from attnbounds.theory.mathematics.errors import InvalidArgument

GUTENBERG_URL = "https://www.gutenberg.org/cache/epub/2600/pg2600.txt"
#: SHA-256 of the downloaded file, when the project pins one; ``None`` means the file is checked by
#: content (START/END markers, title, size) and its SHA-256 is recorded on first download and
#: verified on every later use (see ``cached_text_path``).
GUTENBERG_SHA256: str | None = None
CACHE_NAME = "war-and-peace.txt"
ENV_VAR = "ATTNBOUNDS_TEXT"

_HOW_TO = (
    "provide a text with --text PATH or the environment variable ATTNBOUNDS_TEXT=PATH "
    "(any long plain-text file; the paper uses War and Peace, Project Gutenberg ebook 2600, "
    f"{GUTENBERG_URL})"
)


@dataclass(frozen=True)
class TextSource:
    """The text and where it came from (recorded in every output)."""

    text: str
    path: str
    origin: str  # "argument", "environment", "cache", "download"
    sha256: str


#: the largest text read (War and Peace is 3.2 MB); a larger file is refused before it is read
TEXT_MAX_BYTES = 64 << 20
#: the share of control characters (other than tab, newline, carriage return, form feed) above which a file is
#: taken for binary data, not text
CONTROL_MAX_SHARE = 0.001


def _read(path: Path, origin: str) -> TextSource:
    """The text of ``path``: a regular UTF-8 file of at most :data:`TEXT_MAX_BYTES` bytes that looks like text."""
    what = f"text file (from {origin})"
    if not path.exists() and not path.is_symlink():
        raise InvalidArgument(f"{what} {str(path)!r} does not exist; {_HOW_TO}")
    text = atomic.read_text(path, what, TEXT_MAX_BYTES)  # a folder, FIFO or device is named and refused
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise InvalidArgument(f"{what} {str(path)!r} is empty; {_HOW_TO}")
    control = sum(text.count(c) for c in {ch for ch in text[:1 << 20] if ord(ch) < 32 and ch not in "\t\n\r\f"})
    if "\0" in text or control > CONTROL_MAX_SHARE * len(text):
        raise InvalidArgument(f"{what} {str(path)!r} holds NUL bytes or other control characters "
                              f"({control} of {len(text)} characters): binary data, not text; {_HOW_TO}")
    return TextSource(text=text, path=str(path), origin=origin, sha256=sha256_bytes(text.encode("utf-8")))


def strip_gutenberg(raw: str) -> str:
    """The body between the ``*** START OF ...`` and ``*** END OF ...`` lines of a Gutenberg file."""
    start = re.search(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", raw, re.M | re.I)
    end = re.search(r"^\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG EBOOK.*$", raw, re.M | re.I)
    if not start or not end or end.start() <= start.end():
        raise InvalidArgument("the downloaded file has no Project Gutenberg START/END markers; it is not ebook 2600")
    return raw[start.end(): end.start()].strip() + "\n"


def check_download(data: bytes) -> str:
    """Verify a downloaded ebook 2600 and return its body; raises AttnBoundsError when it is not."""
    digest = sha256_bytes(data)
    if GUTENBERG_SHA256 is not None and digest != GUTENBERG_SHA256:
        raise InvalidArgument(f"checksum mismatch for {GUTENBERG_URL}: sha256 {digest}, expected {GUTENBERG_SHA256}")
    raw = data.decode("utf-8-sig", errors="strict").replace("\r\n", "\n")
    body = strip_gutenberg(raw)
    if "WAR AND PEACE" not in raw[:5000].upper() or len(body) < 2_000_000:
        raise InvalidArgument(f"the file from {GUTENBERG_URL} is not War and Peace (title or size wrong, {len(body)} chars)")
    return body


def download(url: str = GUTENBERG_URL, timeout: float = 30.0) -> bytes:
    """Fetch ``url``; raises AttnBoundsError with instructions when offline."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (fixed https URL)
            return resp.read()
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise InvalidArgument(f"could not download {url} ({exc}); this machine looks offline: {_HOW_TO}") from None


def cached_text_path() -> Path:
    return cache_dir("text") / CACHE_NAME


def _read_cached(path: Path) -> TextSource:
    """The cached download, verified against the SHA-256 recorded when it was fetched."""
    sidecar = path.with_suffix(path.suffix + ".sha256")
    recorded = sidecar.read_text().split()[0] if sidecar.is_file() else None
    actual = sha256_file(path)
    if recorded is not None and recorded != actual:
        raise InvalidArgument(
            f"cached text {str(path)!r} is corrupt (sha256 {actual}, recorded {recorded}); delete it to download again"
        )
    return _read(path, "cache")


def resolve_text(path: str | os.PathLike[str] | None = None, *, allow_download: bool = True) -> TextSource:
    """The text: ``path``, else ``$ATTNBOUNDS_TEXT``, else the cached download, else a fresh download."""
    if path is not None:
        return _read(Path(path).expanduser(), "argument")
    env = os.environ.get(ENV_VAR)
    if env:
        return _read(Path(env).expanduser(), "environment")
    cached = cached_text_path()
    if cached.is_file():
        return _read_cached(cached)
    if not allow_download:
        raise InvalidArgument(f"no text given and none cached at {str(cached)!r}; {_HOW_TO}")
    body = check_download(download()).encode("utf-8")
    atomic.write_bytes(cached, body)
    atomic.write_text(cached.with_suffix(cached.suffix + ".sha256"), f"{sha256_bytes(body)}  {CACHE_NAME}\n")
    return _read(cached, "download")
