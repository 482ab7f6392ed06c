"""core.state: the literal names and paths of everything envforge keeps on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.core.mutex import environment_lock_path
from envforge.core.state import (
    GENERATIONS_DIR,
    MUTEX_NAME,
    STATE_DIR,
    StateDir,
    generation_name,
    generation_number,
    is_generation_name,
)


def test_the_directory_names() -> None:
    assert (STATE_DIR, GENERATIONS_DIR, MUTEX_NAME) == (".envforge", ".generations", ".lock")


def test_every_state_path_of_a_site_packages() -> None:
    sp = Path("/e/lib/python3.12/site-packages")
    state = StateDir(sp)
    assert {
        name: str(getattr(state, name))
        for name in (
            "path",
            "generation_record",
            "lock_copy",
            "patch_manifest",
            "patch_intent",
            "originals",
            "profile_record",
            "mutex",
        )
    } == {
        "path": "/e/lib/python3.12/site-packages/.envforge",
        "generation_record": "/e/lib/python3.12/site-packages/.envforge/generation.json",
        "lock_copy": "/e/lib/python3.12/site-packages/.envforge/pylock.toml",
        "patch_manifest": "/e/lib/python3.12/site-packages/.envforge/patches.json",
        "patch_intent": "/e/lib/python3.12/site-packages/.envforge/patch-intent.json",
        "originals": "/e/lib/python3.12/site-packages/.envforge/originals",
        "profile_record": "/e/lib/python3.12/site-packages/.envforge/env-profile.json",
        "mutex": "/e/lib/python3.12/site-packages/.envforge/.lock",
    }
    assert StateDir(Path()).profile_record.parts == (".envforge", "env-profile.json")


def test_state_dir_is_a_frozen_value() -> None:
    a, b = StateDir(Path("/x")), StateDir(Path("/x"))
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.site_packages = Path("/y")  # type: ignore[misc]


@pytest.mark.parametrize(("number", "name"), [(1, "g0001"), (42, "g0042"), (9999, "g9999"), (10000, "g10000")])
def test_generation_names_round_trip(number: int, name: str) -> None:
    assert generation_name(number) == name
    assert generation_number(name) == number
    assert is_generation_name(name)


@pytest.mark.parametrize("number", [0, -1])
def test_generation_numbers_start_at_one(number: int) -> None:
    with pytest.raises(ValueError) as exc:
        generation_name(number)
    assert str(exc.value) == f"generation numbers start at 1, not {number}"


@pytest.mark.parametrize("name", ["g001", "g0001.log", "G0001", "0001", "g", "gabcd", "xg0001", "g0001x", ".lock", ""])
def test_other_names_are_not_generations(name: str) -> None:
    assert generation_number(name) is None
    assert not is_generation_name(name)


def test_the_mutex_of_a_generation_and_of_any_other_site_packages(tmp_path: Path) -> None:
    gen_sp = tmp_path / "envs" / ".generations" / "demo-cpu" / "g0003" / "lib" / "python3.12" / "site-packages"
    gen_sp.mkdir(parents=True)
    assert environment_lock_path(gen_sp) == tmp_path.resolve() / "envs/.generations/demo-cpu/.lock"
    other = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    other.mkdir(parents=True)
    assert environment_lock_path(other) == tmp_path.resolve() / "venv/lib/python3.12/site-packages/.envforge/.lock"
