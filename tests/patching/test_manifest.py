"""The patch manifest: deterministic bytes, round trip, clear errors; atomic writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envforge.core.errors import InputError
from envforge.core.fs import atomic_write, current_umask
from envforge.patching.manifest import (
    AppliedPatchset,
    Manifest,
    PatchedFile,
    manifest_path,
    read_manifest,
    write_manifest,
)

MANIFEST = Manifest(
    (AppliedPatchset("p", "sha256:" + "a" * 64, "sglang", "0.5.9", "--flag"),),
    (PatchedFile("sglang/x.py", "p", "b" * 64, "c" * 64),),
)


def test_round_trip_and_fixed_bytes(tmp_path: Path) -> None:
    write_manifest(tmp_path, MANIFEST)
    assert read_manifest(tmp_path) == MANIFEST
    assert json.loads(manifest_path(tmp_path).read_text()) == {
        "schema": 1,
        "patchsets": [
            {
                "id": "p",
                "digest": "sha256:" + "a" * 64,
                "distribution": "sglang",
                "version": "0.5.9",
                "activation": "--flag",
            }
        ],
        "files": [{"path": "sglang/x.py", "patchset": "p", "original_sha256": "b" * 64, "new_sha256": "c" * 64}],
    }
    first = manifest_path(tmp_path).read_bytes()
    write_manifest(tmp_path, MANIFEST)
    assert manifest_path(tmp_path).read_bytes() == first


def test_absent_and_empty(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None
    write_manifest(tmp_path, MANIFEST)
    write_manifest(tmp_path, Manifest())
    assert not manifest_path(tmp_path).exists()


def test_unknown_schema(tmp_path: Path) -> None:
    manifest_path(tmp_path).parent.mkdir()
    manifest_path(tmp_path).write_text('{"schema": 7}')
    with pytest.raises(InputError) as exc:
        read_manifest(tmp_path)
    assert str(exc.value) == (
        f"{manifest_path(tmp_path)}: unknown patch manifest schema 7\n"
        "  hint: this envforge reads schema 1; upgrade envforge"
    )


def test_atomic_write_breaks_hardlinks_and_keeps_mode(tmp_path: Path) -> None:
    target, twin = tmp_path / "a.py", tmp_path / "b.py"
    target.write_bytes(b"old")
    os.link(target, twin)
    atomic_write(target, b"new", mode=0o640)
    assert (target.read_bytes(), twin.read_bytes()) == (b"new", b"old")
    assert target.stat().st_nlink == 1 and target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]  # no temp file left


def test_atomic_write_mode_is_the_existing_files_else_0666_minus_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        atomic_write(tmp_path / "new.json", b"{}")
        existing = tmp_path / "existing.py"
        existing.write_bytes(b"old")
        os.chmod(existing, 0o664)
        atomic_write(existing, b"new")
    finally:
        os.umask(old)
    assert (tmp_path / "new.json").stat().st_mode & 0o777 == 0o640
    assert existing.stat().st_mode & 0o777 == 0o664
