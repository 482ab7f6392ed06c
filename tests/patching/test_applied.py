"""The applied diff read back (``envforge patches diff``), in-process on manifests the journaled write
made: the diff word for word, a stack of two patchsets, a file changed since, and real FIFOs where
the saved original or the patched file should be (named, never opened: opening one would block)."""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from envforge.core.errors import CheckFailed, InputError
from envforge.patching import journal
from envforge.patching.applied import AppliedFile, applied_diff
from envforge.patching.journal import journaled_write
from envforge.patching.manifest import AppliedPatchset, Manifest, PatchedFile, rebuild_hint
from envforge.patching.states import FileChange

A0, A1, A2 = b"a = 0\nx = 1\n", b"a = 1\nx = 1\n", b"a = 2\nx = 1\n"
B0, B1 = b"b = 0\n", b"b = 1\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


APPLIED = Manifest(
    patchsets=(
        AppliedPatchset("p1", "sha256:" + "1" * 64, "pkg", "1.0"),
        AppliedPatchset("p2", "sha256:" + "2" * 64, "pkg", "1.0"),
    ),
    files=(
        PatchedFile("pkg/a.py", "p1", sha(A0), sha(A1)),
        PatchedFile("pkg/b.py", "p1", sha(B0), sha(B1)),
        PatchedFile("pkg/a.py", "p2", sha(A1), sha(A2)),
    ),
)


@pytest.fixture(autouse=True)
def _never_hang() -> Iterator[None]:
    """A FIFO opened by mistake blocks for ever: turn that into a failure (a guard, not a timing bound)."""

    def hung(*_args: object) -> None:
        raise AssertionError("applied_diff blocked (a FIFO was opened)")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(300)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def sp(tmp_path: Path) -> Path:
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
            FileChange("p1", "pkg/b.py", B0, B1),
            FileChange("p2", "pkg/a.py", A1, A2),
        ),
        APPLIED,
    )
    return root


def test_each_file_is_diffed_against_its_first_original_with_its_stack_of_patchsets(sp: Path) -> None:
    assert applied_diff(sp) == (
        AppliedFile(
            "pkg/a.py", ("p1", "p2"), "--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1,2 +1,2 @@\n-a = 0\n+a = 2\n x = 1\n", True
        ),
        AppliedFile("pkg/b.py", ("p1",), "--- a/pkg/b.py\n+++ b/pkg/b.py\n@@ -1 +1 @@\n-b = 0\n+b = 1\n", True),
    )


def test_a_file_changed_since_shows_its_current_bytes_and_is_not_as_recorded(sp: Path) -> None:
    (sp / "pkg/b.py").write_bytes(b"b = 7\n")
    assert applied_diff(sp)[1] == AppliedFile(
        "pkg/b.py", ("p1",), "--- a/pkg/b.py\n+++ b/pkg/b.py\n@@ -1 +1 @@\n-b = 0\n+b = 7\n", False
    )


def test_never_patched_is_empty(tmp_path: Path) -> None:
    assert applied_diff(tmp_path) == ()


def test_a_fifo_as_saved_original_is_named_and_never_opened(sp: Path) -> None:
    blob = sp / ".envforge" / "originals" / sha(A0)
    blob.unlink()
    os.mkfifo(blob)
    with pytest.raises(InputError) as info:
        applied_diff(sp)
    assert (info.value.message, info.value.hint) == (
        f"saved original {blob} is not a regular file (a FIFO)",
        rebuild_hint(sp),
    )


def test_a_fifo_as_patched_file_is_named_and_never_opened(sp: Path) -> None:
    (sp / "pkg/b.py").unlink()
    os.mkfifo(sp / "pkg/b.py")
    with pytest.raises(InputError) as info:
        applied_diff(sp)
    assert "pkg/b.py" in info.value.message and "FIFO" in info.value.message
    assert info.value.hint == rebuild_hint(sp)


def test_a_missing_original_or_patched_file_says_which(sp: Path) -> None:
    (sp / "pkg/b.py").unlink()
    with pytest.raises(InputError) as info:
        applied_diff(sp)
    assert (info.value.message, info.value.hint) == (f"patched file {sp / 'pkg/b.py'} is missing", rebuild_hint(sp))
    blob = sp / ".envforge" / "originals" / sha(A0)
    blob.unlink()
    with pytest.raises(InputError) as info:
        applied_diff(sp)
    assert (info.value.message, info.value.hint) == (
        f"the saved original of pkg/a.py is missing ({blob})",
        rebuild_hint(sp),
    )


def test_an_interrupted_write_is_refused_not_read_as_a_diff(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def killed(*_args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(journal, "write_manifest", killed)
    with pytest.raises(KeyboardInterrupt):
        journaled_write(sp, "apply", ["p3"], (FileChange("p3", "pkg/b.py", B1, B0),), Manifest())
    with pytest.raises(CheckFailed) as info:
        applied_diff(sp)
    assert info.value.message.startswith("an `apply-patches` of p3 was interrupted while writing pkg/b.py ")
