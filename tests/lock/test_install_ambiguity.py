"""Installing refuses a pylock whose two entries of one name are both selected (the build's guard)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.lock.check import guard_lock
from envforge.lock.digest import packages_digest
from envforge.lock.read import InvalidLock, read_lock_text, refuse_ambiguous
from envforge.recipe.load import load_recipe

HEAD = 'lock-version = "1.0"\ncreated-by = "envforge"\n'
H = 'hashes = { sha256 = "ffff" }'


def _entry(version: str, marker: str | None = None) -> str:
    where = f"marker = {marker!r}\n" if marker else ""
    return (
        f'[[packages]]\nname = "idna"\nversion = "{version}"\n{where}'
        f'wheels = [{{ url = "https://e.example/idna-{version}-py3-none-any.whl", {H} }}]\n'
    )


def test_the_build_guard_refuses_two_entries_selected_for_the_variants_python(tmp_path: Path) -> None:
    (tmp_path / "r.toml").write_text('[recipe]\nname = "r"\npython = "3.12"\n\n[packages]\nidna = ">=3"\n')
    variant = load_recipe(tmp_path / "r.toml").resolve()
    text = HEAD + _entry("3.7", "python_version < '3.13'") + _entry("3.10", "python_version >= '3.12'")
    digest = packages_digest(read_lock_text(text, label="x").packages)
    lock = tmp_path / "pylock.r-default.toml"
    lock.write_text(text + f'\n[tool.envforge]\npackages-digest = "{digest}"\n')
    with pytest.raises(InvalidLock) as err:
        guard_lock(lock, variant)
    assert (err.value.message, err.value.exit_code) == (
        f"{lock}: cannot install idna: packages[0] (idna 3.7; marker python_version < '3.13') and packages[1] "
        "(idna 3.10; marker python_version >= '3.12') are both selected for this environment (e.g. "
        "python_version = '3.12'); an installer cannot choose between them",
        2,
    )


def test_python_sets_the_three_python_variables() -> None:
    entries = read_lock_text(
        HEAD + _entry("3.7", "python_full_version < '3.12.4'") + _entry("3.10", "implementation_version >= '3.12.2'"),
        label="p",
    ).entries
    refuse_ambiguous("p", entries, python="3.12")  # 3.12.0: only the first
    refuse_ambiguous("p", entries, python="3.12.5")  # only the second
    with pytest.raises(InvalidLock) as err:
        refuse_ambiguous("p", entries, python="3.12.3")
    assert err.value.reason.endswith(
        "are both selected for this environment (e.g. implementation_version = "
        "'3.12.3', python_full_version = '3.12.3'); an installer cannot choose "
        "between them"
    )
    with pytest.raises(InvalidLock):
        refuse_ambiguous(
            "p",
            entries,
            python="3.12",
            environment={"python_full_version": "3.12.3", "implementation_version": "3.12.3"},
        )
