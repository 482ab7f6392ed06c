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
from collections.abc import Iterable

__all__ = ["MAX_COMMENT", "MAX_LINE", "MAX_VALUE", "fit_line", "fit_lines", "shorten_pair"]

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
