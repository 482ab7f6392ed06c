"""envforge.printable: what a lock's strings look like on a terminal or in a diff (literal escapes)."""

from __future__ import annotations

import pytest

from envforge.printable import escape_controls


@pytest.mark.parametrize(("text", "keep", "shown"), [
    ("plain text, é, ✓", "", "plain text, é, ✓"),
    ("t\x1b[31mRED\x1b[0m", "", "t\\x1b[31mRED\\x1b[0m"),
    ("a\nb\rc\td", "", "a\\nb\\rc\\td"),
    ("a\nb\rc\td", "\n\t", "a\nb\\rc\td"),
    ("\x00\x7f\x85\x9f", "", "\\x00\\x7f\\x85\\x9f"),
    ("x\u202ey\u2066z\u200f", "", "x\\u202ey\\u2066z\\u200f"),
    ("\u00a0nbsp stays", "", "\u00a0nbsp stays"),
])
def test_escape_controls(text: str, keep: str, shown: str) -> None:
    assert escape_controls(text, keep=keep) == shown
