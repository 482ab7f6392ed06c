"""envforge.lock.write: the lock file is written atomically, on a real full filesystem too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.localindex import make_wheel

ENVFORGE = [sys.executable, "-m", "envforge"]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (root only); unmounted after the test."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, timeout=30
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True, timeout=30)


def test_lock_on_a_full_disk_names_the_file_and_leaves_no_temp_file(tmp_path: Path, full_disk: Path) -> None:
    """Field case N56: a full disk left an empty `.pylock.tiny-default.toml.tmp` and the error named no file."""
    house = tmp_path / "wh"
    make_wheel(house, "tinypkg", "1.0")
    make_wheel(house, "tinypkg", "1.1")
    proj = full_disk / "p"
    (proj / "recipes").mkdir(parents=True)
    recipe = proj / "recipes" / "tiny.toml"
    recipe.write_text(
        '[recipe]\nname = "tiny"\npython = "3.12"\nresolution = "no-deps"\n[packages]\ntinypkg = "==1.0"\n'
    )
    offline = ("--offline", "--find-links", str(house), "--local-paths")
    first = subprocess.run([*ENVFORGE, "lock", "tiny", *offline], cwd=proj, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    lock = proj / "lockfiles" / "pylock.tiny-default.toml"
    old = lock.read_bytes()
    recipe.write_text(recipe.read_text().replace("==1.0", "==1.1"))
    filler = full_disk / "filler"
    with open(filler, "wb") as fh:  # fill the filesystem to the last block
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    try:
        res = subprocess.run(
            [*ENVFORGE, "lock", "tiny", *offline], cwd=proj, capture_output=True, text=True, timeout=300
        )
    finally:
        filler.unlink()
    assert res.returncode == 3, res.stderr
    assert res.stderr.splitlines()[-1] == (
        f"error: cannot write {lock}: No space left on device; the previous lock is unchanged"
    )
    assert lock.read_bytes() == old
    assert sorted(p.name for p in lock.parent.iterdir()) == ["pylock.tiny-default.toml"]  # no temp file left
    shutil.rmtree(proj)
