"""envforge.core.printable: what a lock's strings look like on a terminal or in a diff (literal escapes)."""

from __future__ import annotations

import pytest

from envforge.core.printable import escape_controls


@pytest.mark.parametrize(
    ("text", "keep", "shown"),
    [
        ("plain text, é, ✓", "", "plain text, é, ✓"),
        ("t\x1b[31mRED\x1b[0m", "", "t\\x1b[31mRED\\x1b[0m"),
        ("a\nb\rc\td", "", "a\\nb\\rc\\td"),
        ("a\nb\rc\td", "\n\t", "a\nb\\rc\td"),
        ("\x00\x7f\x85\x9f", "", "\\x00\\x7f\\x85\\x9f"),
        ("x\u202ey\u2066z\u200f", "", "x\\u202ey\\u2066z\\u200f"),
        ("\u00a0nbsp stays", "", "\u00a0nbsp stays"),
    ],
)
def test_escape_controls(text: str, keep: str, shown: str) -> None:
    assert escape_controls(text, keep=keep) == shown


@pytest.fixture(autouse=True)
def fresh_tables(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[int, str]]:
    """Each test builds its translation tables anew (the module keeps one per ``keep`` for the process)."""
    import envforge.core.printable

    tables: dict[str, dict[int, str]] = {}
    monkeypatch.setattr(envforge.core.printable, "_TABLES", tables)
    return tables


def test_every_c0_and_c1_control_and_del() -> None:
    text = "".join(map(chr, range(0x00, 0x20))) + "".join(map(chr, range(0x7F, 0xA0)))
    assert escape_controls(text) == (
        "\\x00\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\\t\\n\\x0b\\x0c\\r\\x0e\\x0f"
        "\\x10\\x11\\x12\\x13\\x14\\x15\\x16\\x17\\x18\\x19\\x1a\\x1b\\x1c\\x1d\\x1e\\x1f"
        "\\x7f\\x80\\x81\\x82\\x83\\x84\\x85\\x86\\x87\\x88\\x89\\x8a\\x8b\\x8c\\x8d\\x8e\\x8f"
        "\\x90\\x91\\x92\\x93\\x94\\x95\\x96\\x97\\x98\\x99\\x9a\\x9b\\x9c\\x9d\\x9e\\x9f"
    )


def test_every_bidirectional_formatting_character_and_nothing_around_them() -> None:
    bidi = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
    assert escape_controls(bidi) == ("\\u200e\\u200f\\u202a\\u202b\\u202c\\u202d\\u202e\\u2066\\u2067\\u2068\\u2069")
    # Neighbours that are not printable either (spaces, joiners, other format characters) stay as they are.
    others = "\u200b\u200d\u2028\u2029\u202f\u2065\u206a\u00a0 \u00ad"
    assert escape_controls(others) == others
    assert escape_controls("a\u202fb\u202ec") == "a\u202fb\\u202ec"


@pytest.mark.parametrize(
    ("text", "keep", "shown"),
    [
        ("a\nb\rc\td\x1b", "\n", "a\nb\\rc\\td\\x1b"),
        ("a\nb\rc\td\x1b", "\r\x1b", "a\\nb\rc\\td\x1b"),
        ("x\u202ey\u2066z", "\u2066", "x\\u202ey\u2066z"),
        ("x\u202ey", "abc", "x\\u202ey"),  # keeping printable characters changes nothing
    ],
)
def test_keep_leaves_exactly_those_characters(text: str, keep: str, shown: str) -> None:
    assert escape_controls(text, keep=keep) == shown


def test_one_table_per_keep_built_once(fresh_tables: dict[str, dict[int, str]]) -> None:
    assert escape_controls("\x01\n", keep="\n") == "\\x01\n"
    table = fresh_tables["\n"]
    assert (len(table), table[1], table[9], 10 in table) == (75, "\\x01", "\\t", False)
    assert escape_controls("\x02") == "\\x02"
    assert sorted(fresh_tables) == ["", "\n"] and len(fresh_tables[""]) == 76
    # A table already built is the one used.
    fresh_tables["\r"] = {1: "<one>"}
    assert escape_controls("\x01\x02", keep="\r") == "<one>\x02"
