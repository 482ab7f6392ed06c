"""Same-name pylock entries that can be active together: shown by every lock diff output, not a change."""

from __future__ import annotations

from envforge.lockdiff.classify import diff_locks
from envforge.lockdiff.model import parse_lock
from envforge.lockdiff.render import diff_data, render_markdown, render_terminal

HEAD = 'lock-version = "1.0"\ncreated-by = "pip"\n'
H = 'hashes = { sha256 = "ffff" }'
TWO = (
    HEAD
    + f'[[packages]]\nname = "idna"\nversion = "3.7"\nwheels = [{{ url = "https://e.example/idna-3.7-py3-none-any.whl", {H} }}]\n'
    f'[[packages]]\nname = "idna"\nversion = "3.10"\nwheels = [{{ url = "https://e.example/idna-3.10-py3-none-any.whl", {H} }}]\n'
)
ONE = (
    HEAD
    + f'[[packages]]\nname = "idna"\nversion = "3.7"\nwheels = [{{ url = "https://e.example/idna-3.7-py3-none-any.whl", {H} }}]\n'
)
TEXT = "packages[0] (idna 3.7; no marker) and packages[1] (idna 3.10; no marker) can be active together"


def test_the_new_sides_ambiguity_is_shown_and_is_not_a_change() -> None:
    diff = diff_locks(parse_lock(TWO, label="a.toml"), parse_lock(TWO, label="b.toml"))
    assert (diff.ambiguities, diff.has_changes()) == ((TEXT,), False)
    assert render_terminal(diff, width=None).splitlines() == [
        "lock diff: a.toml -> b.toml",
        "2 -> 2 packages: no changes",
        f"! ambiguous in b.toml: {TEXT}; an install is refused where both are selected",
    ]
    assert render_markdown(diff).splitlines()[4] == (
        f"- ⚠️ **ambiguous**: {TEXT}; an install is refused where both are selected"
    )
    assert diff_data(diff)["ambiguities"] == [TEXT]


def test_only_the_new_side_counts() -> None:
    fixed = diff_locks(parse_lock(TWO, label="a.toml"), parse_lock(ONE, label="b.toml"))
    assert (fixed.ambiguities, diff_data(fixed)["ambiguities"]) == ((), [])
    assert "ambiguous" not in render_terminal(fixed)
    broken = diff_locks(parse_lock(ONE, label="a.toml"), parse_lock(TWO, label="b.toml"))
    assert broken.ambiguities == (TEXT,)
    assert diff_locks(None, parse_lock(TWO, label="b.toml")).ambiguities == (TEXT,)
