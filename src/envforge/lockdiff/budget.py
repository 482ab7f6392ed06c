"""A reviewer's budget: no output line over :data:`MAX_LINE` characters, a markdown report within
one GitHub comment (:data:`MAX_COMMENT` characters).

A line that wrapping cannot bring under the limit (one long URL, a marker without spaces) is
elided in the middle: its head, ``…[`` a 12-hex digest of the whole line ``]…``, and its tail, so
two different long lines stay different (a textconv diff still shows the change) and the JSON
output keeps every value whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

__all__ = ["MAX_COMMENT", "MAX_LINE", "fit_line", "fit_lines"]

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
