"""core.fs: atomic writes keep the target's mode and replace (never edit) it; symlinks flip atomically."""

from __future__ import annotations

import os
from pathlib import Path

from envforge.core.fs import atomic_write, file_mode, replace_symlink, sha256_hex


def test_sha256_hex_of_known_bytes() -> None:
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert sha256_hex(b"abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_atomic_write_replaces_the_inode_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "generation.json"
    target.write_bytes(b"old")
    twin = tmp_path / "twin"
    os.link(target, twin)
    os.chmod(target, 0o640)
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new" and twin.read_bytes() == b"old"
    assert oct(target.stat().st_mode & 0o7777) == "0o640"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["generation.json", "twin"]


def test_atomic_write_of_a_new_file_gets_0666_minus_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        assert oct(file_mode(tmp_path / "new")) == "0o644"
        atomic_write(tmp_path / "new", b"x")
    finally:
        os.umask(old)
    assert oct((tmp_path / "new").stat().st_mode & 0o7777) == "0o644"
    atomic_write(tmp_path / "explicit", b"x", mode=0o600)
    assert oct((tmp_path / "explicit").stat().st_mode & 0o7777) == "0o600"


def test_replace_symlink_points_a_relative_link_at_the_new_target(tmp_path: Path) -> None:
    (tmp_path / ".generations" / "demo" / "g0001").mkdir(parents=True)
    (tmp_path / ".generations" / "demo" / "g0002").mkdir()
    link = tmp_path / "demo"
    replace_symlink(link, tmp_path / ".generations" / "demo" / "g0001")
    assert os.readlink(link) == ".generations/demo/g0001"
    (tmp_path / ".demo.new-link").symlink_to("stale")  # a killed flip's leftover
    replace_symlink(link, tmp_path / ".generations" / "demo" / "g0002")
    assert os.readlink(link) == ".generations/demo/g0002"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".generations", "demo"]
