"""Lock freshness and lock integrity are two answers (issue 24, item 4; envforge.lock.check).

A recipe edited since the lock (a package added, removed or re-pinned, cuda-exceptions dropped,
build-constraints added) is a stale lock: exit 1, one line per changed key. A lock whose bytes are
not what ``envforge lock`` wrote (an entry added by hand, nothing recomputed) is exit 2. Real uv
locks against a real local index served on 127.0.0.1; ``--check`` runs with uv disabled.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.cli import main
from envforge.lock.check import StaleLock, guard_lock
from envforge.lock.model import LockIntegrityError
from envforge.lock.write import restamp
from envforge.lock.model import read_lock
from envforge.recipe.load import load_recipe
from tests.support.localindex import LocalIndex, make_wheel, serve

BASE = 'app = "==1.0"\nnvidia-thing-cu13 = "==13.0.1"'
CUDA = '\n[variant.cu128]\ncuda = "12.8"\n\n[variant.cu128.cuda-exceptions]\nnvidia-thing-cu13 = "kept on purpose"\n'


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalIndex]:
    root = tmp_path_factory.mktemp("index")
    idx = LocalIndex(root / "simple")
    idx.add(make_wheel(root / "w", "app", "1.0", requires=["certifi"]))
    idx.add(make_wheel(root / "w", "certifi", "2026.1.1"))
    idx.add(make_wheel(root / "w", "newpkg", "1.0"))
    idx.add(make_wheel(root / "w", "nvidia-thing-cu13", "13.0.1"))
    with serve(idx):
        yield idx


def locked(tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str], tail: str = CUDA) -> Path:
    """A project with recipe ``r`` (variant cu128) locked by the real uv; returns the project root."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\n\n[indexes]\npypi = "{index.url}"\n\n[packages]\n{BASE}\n{tail}'
    )
    assert main(["lock", "r", "--project", str(tmp_path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return tmp_path


def edit(proj: Path, old: str, new: str) -> None:
    recipe = proj / "recipes" / "r.toml"
    text = recipe.read_text()
    assert old in text
    recipe.write_text(text.replace(old, new, 1))


def check(proj: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.setenv("ENVFORGE_UV", "/bin/false")  # --check never starts uv
    code = main(["lock", "r", "--check", "--project", str(proj)])
    out, err = capsys.readouterr()
    return code, out, err


def test_added_package_is_stale_and_names_it(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = locked(tmp_path, index, capsys)
    lock = proj / "lockfiles" / "pylock.r-cu128.toml"
    assert check(proj, capsys, monkeypatch) == (0, f"{lock}: up to date\n", "")
    edit(proj, 'app = "==1.0"\n', 'app = "==1.0"\nnewpkg = "==1.0"\n')
    before = lock.read_bytes()
    assert check(proj, capsys, monkeypatch) == (
        1,
        f"{lock}: stale\n  packages.newpkg: locked (absent), recipe now newpkg==1.0\n",
        "",
    )
    # Already a dependency of app: stale the same way.
    edit(proj, 'newpkg = "==1.0"\n', 'certifi = "==2026.1.1"\n')
    assert check(proj, capsys, monkeypatch) == (
        1,
        f"{lock}: stale\n  packages.certifi: locked (absent), recipe now certifi==2026.1.1\n",
        "",
    )
    assert lock.read_bytes() == before


def test_removed_and_repinned_packages_are_stale(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = locked(tmp_path, index, capsys)
    lock = proj / "lockfiles" / "pylock.r-cu128.toml"
    edit(proj, 'app = "==1.0"\n', "")
    assert check(proj, capsys, monkeypatch) == (
        1,
        f"{lock}: stale\n  packages.app: locked app==1.0, recipe now (absent)\n",
        "",
    )
    edit(proj, 'nvidia-thing-cu13 = "==13.0.1"', 'app = ">=1.0"\nnvidia-thing-cu13 = "==13.0.1"')
    assert check(proj, capsys, monkeypatch) == (
        1,
        f"{lock}: stale\n  packages.app: locked app==1.0, recipe now app>=1.0\n",
        "",
    )


def test_each_changed_key_is_named_and_absent_scalars_say_absent(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = locked(tmp_path, index, capsys)
    lock = proj / "lockfiles" / "pylock.r-cu128.toml"
    edit(proj, 'app = "==1.0"\n', 'app = "==1.0"\nnewpkg = "==1.0"\n')
    edit(proj, 'python = "3.12"\n', 'python = "3.12"\nexclude-newer = "2026-01-01"\n')
    assert check(proj, capsys, monkeypatch) == (
        1,
        "".join(
            [
                f"{lock}: stale\n",
                "  exclude-newer: locked (absent), recipe now '2026-01-01'\n",
                "  packages.newpkg: locked (absent), recipe now newpkg==1.0\n",
            ]
        ),
        "",
    )


def test_dropped_cuda_exceptions_and_added_build_constraints_are_stale_not_a_crash(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = locked(tmp_path, index, capsys)
    lock = proj / "lockfiles" / "pylock.r-cu128.toml"
    edit(proj, '\n[variant.cu128.cuda-exceptions]\nnvidia-thing-cu13 = "kept on purpose"\n', "")
    edit(proj, 'python = "3.12"\n', 'python = "3.12"\nbuild-constraints = ["setuptools==80.9.0"]\n')
    assert check(proj, capsys, monkeypatch) == (
        1,
        "".join(
            [
                f"{lock}: stale\n",
                "  build-constraints.setuptools: locked (absent), recipe now setuptools==80.9.0\n",
                "  cuda-exceptions.nvidia-thing-cu13: locked nvidia-thing-cu13: kept on purpose, recipe now (absent)\n",
                "  build-constraints.setuptools: locked (absent), recipe now setuptools==80.9.0\n",
                "  cuda-exceptions.nvidia-thing-cu13: locked reason=kept on purpose, recipe now (absent)\n",
            ]
        ),
        "",
    )


def test_hand_added_entry_is_an_integrity_error_not_stale(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proj = locked(tmp_path, index, capsys)
    lock = proj / "lockfiles" / "pylock.r-cu128.toml"
    digest = read_lock(lock).digest
    wheel = make_wheel(tmp_path / "extra", "newpkg", "1.0")
    entry = (
        f'[[packages]]\nname = "newpkg"\nversion = "1.0"\nwheels = [{{ url = "{index.url}/{wheel.name}", '
        f'hashes = {{ sha256 = "{hashlib.sha256(wheel.read_bytes()).hexdigest()}" }} }}]\n\n'
    )
    lock.write_text(lock.read_text().replace("[tool.envforge]", entry + "[tool.envforge]", 1))
    edit(proj, 'app = "==1.0"\n', 'app = "==1.0"\nnewpkg = "==1.0"\n')  # even with the recipe asking for it
    code, out, err = check(proj, capsys, monkeypatch)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: {lock} is not the lock `envforge lock` wrote:",
        f"  its [[packages]] are not the ones `envforge lock` wrote: packages-digest {digest}, the file's packages "
        f"hash to {read_lock(lock).digest} (an entry added, removed, cut off or edited by hand, e.g. a changed "
        "wheel hash)",
        "  hint: regenerate it with `envforge lock r --variant cu128` and review the diff; never edit a lock by hand",
    ]


def test_build_guard_stale_is_exit_1_and_hand_edit_exit_2(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = locked(tmp_path, index, capsys, tail="")
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    edit(proj, 'app = "==1.0"\n', 'app = "==1.0"\nnewpkg = "==1.0"\n')
    variant = load_recipe(proj / "recipes" / "r.toml").resolve()
    with pytest.raises(StaleLock) as stale:
        guard_lock(lock, variant)
    assert (stale.value.exit_code, stale.value.message, stale.value.hint) == (
        1,
        f"{lock} is stale: the recipe changed since it was locked:\n"
        "  packages.newpkg: locked (absent), recipe now newpkg==1.0",
        "run `envforge lock r --variant default` and review the change",
    )
    edit(proj, 'newpkg = "==1.0"\n', 'certifi = "==2026.1.1"\n')  # locked already (app needs it): builds the lock
    assert guard_lock(lock, load_recipe(proj / "recipes" / "r.toml").resolve()).path == lock
    text = lock.read_text()
    sha = text[text.index('sha256 = "') + 10 :][:64]
    lock.write_text(text.replace(sha, "0" * 64, 1))  # a wheel hash edited by hand
    for command in ("build", "up"):
        assert main([command, "r", "--project", str(proj)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {lock} is not the lock `envforge lock` wrote:\n"), err


def test_up_and_build_stop_at_an_added_package_with_exit_1(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    proj = locked(tmp_path, index, capsys, tail="")
    lock = proj / "lockfiles" / "pylock.r-default.toml"
    edit(proj, 'app = "==1.0"\n', 'app = "==1.0"\nnewpkg = "==1.0"\n')
    for command in ("build", "up"):
        assert main([command, "r", "--project", str(proj)]) == 1
        out, err = capsys.readouterr()
        assert (out, err.splitlines()) == (
            "",
            [
                f"error: {lock} is stale: the recipe changed since it was locked:",
                "  packages.newpkg: locked (absent), recipe now newpkg==1.0",
                "  hint: run `envforge lock r --variant default` and review the change",
            ],
        ), command
    assert not (proj / "envs").exists() and not os.path.lexists(proj / "envs" / "r-default")


def test_a_hand_added_entry_with_a_recomputed_digest_fails_a_no_deps_lock(
    tmp_path: Path, index: LocalIndex, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Field case N01: the packages-digest is an unkeyed hash anyone can recompute (restamp); in a
    ``no-deps`` lock the added package is caught anyway: the recipe does not name it."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(
        f'[recipe]\nname = "r"\npython = "3.12"\nresolution = "no-deps"\n\n[indexes]\npypi = "{index.url}"\n\n'
        '[packages]\napp = "==1.0"\n'
    )
    assert main(["lock", "r", "--project", str(tmp_path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    lock = tmp_path / "lockfiles" / "pylock.r-default.toml"
    wheel = make_wheel(tmp_path / "extra", "newpkg", "1.0")
    entry = (
        f'[[packages]]\nname = "newpkg"\nversion = "1.0"\nwheels = [{{ url = "{index.url}/{wheel.name}", '
        f'hashes = {{ sha256 = "{hashlib.sha256(wheel.read_bytes()).hexdigest()}" }} }}]\n\n'
    )
    lock.write_text(restamp(lock.read_text().replace("[tool.envforge]", entry + "[tool.envforge]", 1)))
    assert read_lock(lock).envforge["packages-digest"] == read_lock(lock).digest  # the forgery is consistent
    code, out, err = check(tmp_path, capsys, monkeypatch)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: {lock} is not the lock `envforge lock` wrote:",
        "  [[packages]] holds newpkg, which the recipe does not name: a `no-deps` lock holds only the recipe's "
        "packages (an entry added by hand)",
        "  hint: regenerate it with `envforge lock r --variant default` and review the diff; never edit a lock by hand",
    ]
    variant = load_recipe(tmp_path / "recipes" / "r.toml").resolve("default")
    with pytest.raises(LockIntegrityError, match="holds newpkg, which the recipe does not name"):
        guard_lock(lock, variant)  # what build and verify hold a lock to
