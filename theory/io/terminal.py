"""Text for people: what the command line prints, made safe to print.

Everything attnbounds prints for people may carry text it did not write (a statement's id and title from a user's
statements file, a records file from anywhere). :func:`printable` escapes what a terminal would act on instead of
showing: control characters (``ESC`` starts colour and cursor sequences, ``CR`` overwrites a line), Unicode line
separators and the bidirectional overrides that reorder what is shown. They are written as Python escapes
(``\\x1b``, ``\\u202e``), so nothing is lost and the text stays readable.
"""

from __future__ import annotations

import re

#: C0 and C1 control characters and DEL, bidirectional formatting characters, line and paragraph separators
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, lines: bool = True) -> str:
    """``text`` (``str()`` of anything) with control characters escaped (module docstring); newlines and tabs are
    kept when ``lines`` (several lines of output), escaped otherwise (one table cell, one id)."""
    text = str(text)
    keep = "\n\t" if lines else ""

    def sub(match: re.Match[str]) -> str:
        char = match.group(0)
        return char if char in keep else _escape(char)

    return _UNSAFE.sub(sub, text)
