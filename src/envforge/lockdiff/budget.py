"""A reviewer's budget: no output line over :data:`MAX_LINE` characters, a markdown report within
one GitHub comment (:data:`MAX_COMMENT` characters).

Long values are shortened, never lines cut where a change is: :func:`shorten_pair` keeps the part
where two values differ with some context on each side (``…'linux' and platform_machine == 'x86_64'…``)
and both ends of a long change, so the arrow and both sides stay in view; the markdown report then
lists the whole values in a collapsed ``<details>`` block, and the JSON output keeps every value
whole. Summary lines are wrapped, never cut. Only a line that wrapping cannot bring under the limit
(one long URL, a word of 200 characters) is elided in the middle: its head, ``…[`` a 12-hex digest of
the whole line ``]…``, and its tail, so two different long lines stay different.
"""

from __future__ import annotations

import hashlib
import os
import textwrap
from collections.abc import Iterable, Sequence

from envforge.core.printable import escape_controls

__all__ = [
    "MAX_COMMENT",
    "MAX_LINE",
    "MAX_VALUE",
    "MarkdownBudget",
    "fit_line",
    "fit_lines",
    "pieces",
    "shorten_pair",
    "table_rows",
]

MAX_VALUE = 70  # characters of one side of a change a markdown row shows (the whole in <details>)
_CONTEXT = 24  # characters kept on each side of where two shortened values differ

MAX_LINE = 200  # characters of any line of the terminal, markdown and textconv outputs
MAX_COMMENT = 65_536  # characters GitHub takes in one comment body
_TAIL = 40


def fit_line(line: str, limit: int = MAX_LINE) -> str:
    """``line`` itself when it has at most ``limit`` characters, else its head, ``" …[digest]… "``
    and its last 40 characters, ``limit`` characters in all."""
    if len(line) <= limit:
        return line
    digest = hashlib.sha256(line.encode()).hexdigest()[:12]
    mark = f" …[{digest}]… "
    head = limit - len(mark) - _TAIL
    return f"{line[:head]}{mark}{line[-_TAIL:]}"


def fit_lines(lines: Iterable[str], limit: int = MAX_LINE) -> list[str]:
    """Every line through :func:`fit_line`."""
    return [fit_line(line, limit) for line in lines]


def shorten_pair(old: str, new: str, limit: int = MAX_VALUE) -> tuple[str, str]:
    """``(old, new)`` as shown in a change ``old -> new`` of at most about ``limit`` characters a
    side: unchanged when both fit; else each side is the part where they differ with up to
    :data:`_CONTEXT` characters around it (fewer where the side would pass ``limit``), ``…`` where
    text is left out, and a differing part longer than ``limit`` keeps its two ends around `` … ``.

    >>> shorten_pair("sys_platform == 'linux'", "sys_platform == 'win32'")
    ("sys_platform == 'linux'", "sys_platform == 'win32'")
    """
    if len(old) <= limit and len(new) <= limit:
        return old, new
    head = len(os.path.commonprefix([old, new]))
    tail = len(os.path.commonprefix([old[::-1], new[::-1]]))
    tail = min(tail, len(old) - head, len(new) - head)
    differing = max(len(old), len(new)) - head - tail
    context = max(0, min(_CONTEXT, (limit - differing) // 2))
    start = max(0, head - context)

    def window(value: str) -> str:
        end = len(value) - max(0, tail - context)
        middle = value[start:end]
        if len(middle) > limit:
            half = (limit - 3) // 2
            middle = f"{middle[:half]} … {middle[-half:]}"
        return ("…" if start else "") + middle + ("…" if end < len(value) else "")

    return window(old), window(new)


def pieces(item: str) -> list[str]:
    """A fact too long for one row, wrapped at spaces into pieces the continuation rows carry
    (nothing is left out)."""
    if len(item) <= 150:
        return [item]
    return textwrap.wrap(item, width=150, break_long_words=False, break_on_hyphens=False) or [item]


def table_rows(first: str, items: Sequence[str]) -> list[str]:
    """One table row, continued on rows with empty cells where it would pass 200 characters."""
    rows, line = [], first
    for item in items:
        if line.endswith("| ") or len(line) + len(item) + 7 <= 200:
            line += item if line.endswith("| ") else f"<br>{item}"
        else:
            rows.append(line + " |")
            line = f"| | | | | {item}"
    rows.append(line + " |")
    return rows


class MarkdownBudget:
    """Markdown lines within one GitHub comment; each line escaped and at most 200 characters."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.size = 0

    def add(self, *lines: str) -> None:
        for line in lines:
            line = fit_line(escape_controls(line))
            self.lines.append(line)
            self.size += len(line) + 1

    def rows(self, rows: Sequence[str | list[str]], what: str, reserve: int = 0) -> None:
        """Add ``rows`` (a row may be several lines) while they fit, keeping ``reserve`` characters
        for what follows; then one line saying how many were left out."""
        for i, row in enumerate(rows):
            block = [fit_line(escape_controls(x)) for x in ([row] if isinstance(row, str) else row)]
            cost = sum(len(x) + 1 for x in block)
            if self.size + cost > MAX_COMMENT - reserve - 400:
                self.add(
                    "",
                    f"_{len(rows) - i} more {what} are not shown: one GitHub comment holds "
                    f"{MAX_COMMENT:,} characters; `envforge lock diff --json` has them all._",
                    "",
                )
                return
            self.lines += block
            self.size += cost
