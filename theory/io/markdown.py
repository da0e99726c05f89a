"""Text as literal Markdown: what records, tables, tighten results and profiles write into Markdown cells and paragraphs
(:func:`markdown_text`), and reading it back (:func:`markdown_plain`). A module of its own, below the records and the
report, so that anything may escape text without importing them."""

from __future__ import annotations

import re

#: Markdown punctuation written with a backslash (:func:`markdown_text`): escapes, code spans, emphasis and
#: strikethrough, links and images, headings, table bars, math (``$`` on GitHub and in Jupyter); ``:`` before ``//``,
#: ``.`` after ``www`` and ``@`` so that GitHub does not turn a URL or an e-mail address into a link; and the three
#: characters written as HTML entities (raw HTML, entities)
_MARKDOWN = re.compile(r"[\\`*_\[\]|~#$@<>&]|:(?=//)|(?<=www)\.", re.IGNORECASE)
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ENTITIES_BACK = {"amp": "&", "lt": "<", "gt": ">"}
#: what would start a block (a list item, a setext underline, an ordered list item) at the start of a line
_LEADING = re.compile(r"^(?:[-+=]|\d{1,9}(?=[.)]))")
#: a backslash escape or an entity of :func:`markdown_text` (:func:`markdown_plain` reads them back)
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])|&(amp|lt|gt);")


def _one_line(text: object) -> str:
    """``text`` (``str()`` of anything) on one line (line breaks as spaces), control characters escaped."""
    from attnbounds.theory.io.terminal import printable

    return printable(" ".join(str(text).splitlines()), lines=False)


def markdown_text(text: object) -> str:
    """``text`` (``str()`` of anything; every text a record carries) as Markdown that GitHub and Jupyter render as
    this literal text, in a paragraph or a table cell: one line (line breaks as spaces, control characters escaped
    as the terminal shows them, :func:`attnbounds.theory.io.terminal.printable`), without leading and trailing white
    space, ``<``, ``>`` and ``&`` as HTML entities, and Markdown punctuation (:data:`_MARKDOWN`) with a backslash; an
    underscore inside a word (``E_dtilde``), which is never emphasis, is kept as it is. No link, image, HTML tag,
    emphasis, code span, heading or table cell can come out of it. :func:`markdown_plain` reads it back."""
    flat = _one_line(text).strip()

    def sub(match: re.Match[str]) -> str:
        char, at = match.group(0), match.start()
        if char in _ENTITIES:
            return _ENTITIES[char]
        if char == "_" and 0 < at < len(flat) - 1 and flat[at - 1].isalnum() and flat[at + 1].isalnum():
            return char
        return "\\" + char

    def lead(match: re.Match[str]) -> str:  # "-" as "\\-", "1." as "1\\."
        marker = match.group(0)
        return marker + "\\" if marker.isdigit() else "\\" + marker

    return _LEADING.sub(lead, _MARKDOWN.sub(sub, flat))


def markdown_plain(text: str) -> str:
    """The text :func:`markdown_text` wrote ``text`` from (its escapes and entities read back)."""
    return _ESCAPED.sub(lambda m: m.group(1) or _ENTITIES_BACK[m.group(2)], text)


__all__ = ["markdown_plain", "markdown_text"]
