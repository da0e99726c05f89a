"""Files in and out: atomic output (records, reports, caches) and checked input.

Output policy (:func:`write_bytes`, checked up front by :func:`check_target`):

- attnbounds writes only **regular files or new paths**. A directory, a character or block device
  (``/dev/null``), a FIFO or a socket at the target is refused, never replaced; so is a read-only
  file, a path under a file, or a folder where it cannot create files. Missing parent folders are
  created.
- A **symlink is followed**: the file it points to is replaced (the link stays a link), under the
  same rules as that file; a dangling link creates its target.
- The data goes to a temporary file in the target's folder, flushed to disk, then renamed over the
  target (``os.replace``): a reader sees the old file or the new one, never half of one, and an
  interrupted write leaves the old file as it was.
- **Concurrent writers** of one path each write their own temporary file; the last rename wins and
  replaces the other's output whole (nothing is merged, nothing is interleaved).

Input (:func:`read_text`, or :func:`read_chunks` for a file read piece by piece): a regular file (not a directory,
FIFO or device, which could block or never end), at most a stated size, UTF-8.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterator

from attnbounds.theory.mathematics.errors import InvalidArgument

#: temporary files are named ``.<target name, cut to this length>.<random>.tmp`` (names stay under 255 bytes)
_PREFIX_CHARS = 100


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_target(path: str | os.PathLike[str], what: str = "output file") -> Path:
    """The file a write to ``path`` will replace (symlinks followed), after checking that the write can
    happen under the policy of the module docstring; :class:`InvalidArgument` naming the reason otherwise."""
    if not str(path) or "\0" in str(path):
        raise InvalidArgument(f"{what}: expected a file path, got {str(path)!r}")
    target = Path(os.path.realpath(path))
    shown = f"{what} {str(path)!r}" + ("" if str(target) == os.path.abspath(path) else f" (-> {str(target)!r})")
    try:
        info = os.stat(target)
    except FileNotFoundError:
        info = None
    except NotADirectoryError:
        blocker = next(p for p in target.parents if p.exists() and not p.is_dir())
        raise InvalidArgument(f"{shown}: {str(blocker)!r} is a file, not a folder") from None
    except OSError as exc:  # a name too long, no permission to look
        raise InvalidArgument(f"{shown}: cannot write there: {exc.strerror}") from None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            raise InvalidArgument(f"{shown} is {_kind(info.st_mode)}; attnbounds writes only regular files or new paths")
        if not os.access(target, os.W_OK):
            raise InvalidArgument(f"{shown} is read-only; attnbounds does not replace it")
    folder = target.parent
    while not folder.exists():  # created at write time; the nearest existing one must let us
        folder = folder.parent
    if not folder.is_dir():
        raise InvalidArgument(f"{shown}: {str(folder)!r} is a file, not a folder")
    if folder == target.parent:
        try:  # what the write does: a temporary file next to the target
            fd, tmp = tempfile.mkstemp(prefix=_prefix(target), suffix=".tmp", dir=folder)
        except OSError as exc:
            raise InvalidArgument(f"{shown}: cannot create files in {str(folder)!r}: {exc.strerror}") from None
        os.close(fd)
        os.unlink(tmp)
    elif not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidArgument(f"{shown}: cannot create folders in {str(folder)!r}")
    return target


def _prefix(target: Path) -> str:
    return f".{target.name[:_PREFIX_CHARS]}."


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, under the policy of the module docstring; returns ``path``."""
    target = check_target(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=_prefix(target), suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise InvalidArgument(f"cannot write {str(path)!r}: {exc.strerror}") from None
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual permissions
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except OSError as exc:  # a full disk, a folder that vanished: say so, leave the old file as it was
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise InvalidArgument(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return Path(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` atomically."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Write ``obj`` as indented JSON atomically (NaN/inf are written as null)."""
    return write_text(path, json.dumps(_finite(obj), indent=1, sort_keys=False) + "\n")


def _checked_source(path: str | os.PathLike[str], what: str, max_bytes: int) -> str:
    """``what 'path'`` after checking that ``path`` is a regular file of at most ``max_bytes`` bytes."""
    shown = f"{what} {str(path)!r}"
    if not str(path) or "\0" in str(path):
        raise InvalidArgument(f"{what}: expected a file path, got {str(path)!r}")
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise InvalidArgument(f"{shown} does not exist") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot read {shown}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        raise InvalidArgument(f"{shown} is {_kind(info.st_mode)}, not a file to read")
    if info.st_size > max_bytes:
        raise InvalidArgument(f"{shown} has {info.st_size} bytes; at most {max_bytes} are read")
    return shown


def read_text(path: str | os.PathLike[str], what: str, max_bytes: int) -> str:
    """The UTF-8 text of the regular file ``path`` of at most ``max_bytes`` bytes (:class:`InvalidArgument` otherwise)."""
    shown = _checked_source(path, what, max_bytes)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InvalidArgument(f"cannot read {shown}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise InvalidArgument(f"{shown} has more than {max_bytes} bytes; at most {max_bytes} are read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgument(f"{shown} is not UTF-8 text (a binary file?): {exc}") from None


def read_chunks(path: str | os.PathLike[str], what: str, max_bytes: int, chunk: int = 1 << 20) -> Iterator[str]:
    """The UTF-8 text of ``path`` (checked as by :func:`read_text`) in pieces of about ``chunk`` characters, so a
    large file is never held whole."""
    shown = _checked_source(path, what, max_bytes)
    read = 0
    try:
        with open(path, encoding="utf-8", errors="strict", newline="") as fh:
            while True:
                try:
                    piece = fh.read(chunk)
                except UnicodeDecodeError as exc:
                    raise InvalidArgument(f"{shown} is not UTF-8 text (a binary file?): {exc}") from None
                if not piece:
                    return
                read += len(piece)
                if read > max_bytes:
                    raise InvalidArgument(f"{shown} has more than {max_bytes} bytes; at most {max_bytes} are read")
                yield piece
    except OSError as exc:
        raise InvalidArgument(f"cannot read {shown}: {exc.strerror}") from None


def _finite(obj: Any) -> Any:
    """JSON-safe copy: numpy scalars/arrays to Python, non-finite floats to None."""
    import math

    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if hasattr(obj, "tolist") and not isinstance(obj, (str, bytes)):
        return _finite(obj.tolist())
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Path):
        return str(obj)
    return obj
