"""Revert, called in this process on manifests the journaled write made (issue 47): the report,
the files, the manifest and the saved originals after each kind of revert, pinned literally."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from envforge.core.errors import CheckFailed, InputError
from envforge.patching import journal
from envforge.patching.journal import journaled_write
from envforge.patching.manifest import (
    AppliedPatchset,
    Manifest,
    PatchedFile,
    intent_path,
    manifest_path,
    read_manifest,
    rebuild_hint,
)
from envforge.patching.reverting import revert
from envforge.patching.states import REVERTED, FileChange, OperationResult, PatchReport

A0, A1, A2 = b"a = 0\n", b"a = 1\n", b"a = 2\n"
B0, B1 = b"b = 0\n", b"b = 1\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


P1 = AppliedPatchset("p1", "sha256:" + "1" * 64, "pkg", "1.0")
P2 = AppliedPatchset("p2", "sha256:" + "2" * 64, "pkg", "1.0")
FA1 = PatchedFile("pkg/a.py", "p1", sha(A0), sha(A1))
FA2 = PatchedFile("pkg/a.py", "p2", sha(A1), sha(A2))
FB1 = PatchedFile("pkg/b.py", "p1", sha(B0), sha(B1))
APPLIED = Manifest(patchsets=(P1, P2), files=(FA1, FA2, FB1))


def restored(pid: str, path: str, original: bytes) -> OperationResult:
    return OperationResult(pid, path, "revert", REVERTED, f"restored original (sha256 {sha(original)})")


@pytest.fixture
def sp(tmp_path: Path) -> Path:
    """A site-packages where p1 patched pkg/a.py and pkg/b.py and p2 patched pkg/a.py over p1."""
    root = tmp_path / "site-packages"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "a.py").write_bytes(A0)
    (root / "pkg" / "b.py").write_bytes(B0)
    journaled_write(
        root,
        "apply",
        ["p1", "p2"],
        (
            FileChange("p1", "pkg/a.py", A0, A1),
            FileChange("p2", "pkg/a.py", A1, A2),
            FileChange("p1", "pkg/b.py", B0, B1),
        ),
        APPLIED,
    )
    return root


def originals(sp: Path) -> set[str]:
    d = sp / ".envforge" / "originals"
    return {p.name for p in d.iterdir()} if d.is_dir() else set()


def files(sp: Path) -> tuple[bytes, bytes]:
    return (sp / "pkg/a.py").read_bytes(), (sp / "pkg/b.py").read_bytes()


def test_reverting_everything_restores_each_file_newest_first_and_removes_the_state(sp: Path) -> None:
    report = revert(sp)
    assert report == PatchReport(
        sp,
        (restored("p1", "pkg/b.py", B0), restored("p2", "pkg/a.py", A1), restored("p1", "pkg/a.py", A0)),
        (FileChange("", "pkg/a.py", A2, A0), FileChange("", "pkg/b.py", B1, B0)),
        written=True,
        recovered=(),
    )
    assert files(sp) == (A0, B0)
    assert not manifest_path(sp).exists() and originals(sp) == set()
    assert revert(sp) == PatchReport(sp, (), (), written=False, recovered=())  # twice: nothing to do


def test_a_dry_run_reports_the_same_and_writes_nothing(sp: Path) -> None:
    report = revert(sp, dry_run=True)
    assert report == PatchReport(
        sp,
        (restored("p1", "pkg/b.py", B0), restored("p2", "pkg/a.py", A1), restored("p1", "pkg/a.py", A0)),
        (FileChange("", "pkg/a.py", A2, A0), FileChange("", "pkg/b.py", B1, B0)),
        written=False,
        recovered=(),
    )
    assert files(sp) == (A2, B1)
    assert read_manifest(sp) == APPLIED and originals(sp) == {sha(A0), sha(A1), sha(B0)}


def test_reverting_the_newer_of_two_keeps_the_older_and_its_originals(sp: Path) -> None:
    report = revert(sp, ["p2", "not-applied"])
    assert report == PatchReport(
        sp, (restored("p2", "pkg/a.py", A1),), (FileChange("", "pkg/a.py", A2, A1),), written=True, recovered=()
    )
    assert files(sp) == (A1, B1)
    assert read_manifest(sp) == Manifest((P1,), (FA1, FB1))
    assert originals(sp) == {sha(A0), sha(B0)}


def test_the_older_of_two_stacked_patchsets_alone_is_refused(sp: Path) -> None:
    with pytest.raises(CheckFailed) as info:
        revert(sp, ["p1"])
    assert info.value.message == "cannot revert p1: pkg/a.py was patched after it by p2"
    assert info.value.hint == "revert p2 too (envforge apply-patches --revert)"
    assert files(sp) == (A2, B1) and read_manifest(sp) == APPLIED


def test_a_file_already_back_is_only_dropped_from_the_manifest(sp: Path) -> None:
    (sp / "pkg/a.py").write_bytes(A1)  # p2's original: as if reinstalled at p1's state
    report = revert(sp, ["p2"])
    assert report == PatchReport(sp, (), (), written=False, recovered=())
    assert files(sp) == (A1, B1)
    assert read_manifest(sp) == Manifest((P1,), (FA1, FB1))
    assert originals(sp) == {sha(A0), sha(B0)}


def test_a_file_changed_since_the_patch_is_refused_naming_both_digests(sp: Path) -> None:
    (sp / "pkg/b.py").write_bytes(b"b = 'by hand'\n")
    with pytest.raises(CheckFailed) as info:
        revert(sp)
    hand = sha(b"b = 'by hand'\n")
    assert info.value.message == (
        f"pkg/b.py changed since envforge patched it: sha256 {hand}, "
        f"expected {sha(B1)} (patched) or {sha(B0)} (original)"
    )
    assert info.value.hint == rebuild_hint(sp)
    assert (sp / "pkg/a.py").read_bytes() == A2 and read_manifest(sp) == APPLIED


def test_a_deleted_file_is_refused_and_nothing_is_written(sp: Path) -> None:
    (sp / "pkg/b.py").unlink()
    with pytest.raises(CheckFailed) as info:
        revert(sp)
    assert info.value.message == (
        f"cannot revert p1: pkg/b.py is missing ({sp / 'pkg/b.py'}): deleted after "
        "envforge patched it; nothing was changed"
    )
    assert info.value.hint == rebuild_hint(sp)
    assert (sp / "pkg/a.py").read_bytes() == A2 and read_manifest(sp) == APPLIED


def test_a_missing_saved_original_is_refused_and_nothing_is_written(sp: Path) -> None:
    blob = sp / ".envforge" / "originals" / sha(A1)
    blob.unlink()
    with pytest.raises(CheckFailed) as info:
        revert(sp)
    assert (
        info.value.message
        == f"cannot revert p2: the saved original of pkg/a.py is missing ({blob}); nothing was changed"
    )
    assert info.value.hint == rebuild_hint(sp)
    assert files(sp) == (A2, B1) and read_manifest(sp) == APPLIED


class Crash(BaseException):
    """Stands for a kill between the files and the manifest."""


def interrupted_revert(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Leave the intent record of a revert of p2 killed before its manifest was written."""

    def killed(*_args: object) -> None:
        raise Crash

    with monkeypatch.context() as m:
        m.setattr(journal, "write_manifest", killed)
        with pytest.raises(Crash):
            revert(sp, ["p2"])
    assert intent_path(sp).exists() and files(sp) == (A1, B1)


def test_a_revert_first_rolls_back_an_interrupted_write_and_says_so(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    interrupted_revert(sp, monkeypatch)
    report = revert(sp, ["p1", "p2"])
    assert report.recovered == (
        "rolled back an interrupted `apply-patches --revert` of p2: 1 file restored to their "
        "bytes before it; the patch manifest was not written, so none of its files stay changed",
    )
    assert report.written is True and files(sp) == (A0, B0)
    assert not intent_path(sp).exists() and not manifest_path(sp).exists()


def test_a_dry_run_never_rolls_back_and_refuses_the_half_written_state(
    sp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    interrupted_revert(sp, monkeypatch)
    with pytest.raises(CheckFailed) as info:
        revert(sp, dry_run=True)
    assert info.value.message.startswith("an `apply-patches --revert` of p2 was interrupted while writing pkg/a.py ")
    assert intent_path(sp).exists() and files(sp) == (A1, B1)


def test_a_file_already_back_does_not_stop_the_older_entries(sp: Path) -> None:
    (sp / "pkg/b.py").write_bytes(B0)  # the newest entry (p1's b.py) is already its original
    report = revert(sp)
    assert report == PatchReport(
        sp,
        (restored("p2", "pkg/a.py", A1), restored("p1", "pkg/a.py", A0)),
        (FileChange("", "pkg/a.py", A2, A0),),
        written=True,
        recovered=(),
    )
    assert files(sp) == (A0, B0) and not manifest_path(sp).exists()


def test_a_saved_original_that_is_not_a_file_is_named_and_never_opened(sp: Path) -> None:
    blob = sp / ".envforge" / "originals" / sha(B0)
    blob.unlink()
    os.mkfifo(blob)
    with pytest.raises(InputError) as info:
        revert(sp)
    assert (info.value.message, info.value.hint) == (
        f"saved original {blob} is not a regular file (a FIFO)",
        rebuild_hint(sp),
    )
    assert files(sp) == (A2, B1) and read_manifest(sp) == APPLIED


def test_a_patched_file_that_is_not_a_file_is_refused_with_the_rebuild_hint(sp: Path) -> None:
    (sp / "pkg/b.py").unlink()
    os.mkfifo(sp / "pkg/b.py")
    with pytest.raises(InputError) as info:
        revert(sp)
    assert info.value.hint == rebuild_hint(sp)
    assert (sp / "pkg/a.py").read_bytes() == A2 and read_manifest(sp) == APPLIED
