"""The journaled write and its recovery, called in this process (issue 47).

tests/patching/test_faults.py kills real child processes inside the windows that matter; these
tests stop the write at the same points in-process (an exception where the kill would land), so
that every statement of :mod:`envforge.patching.journal` runs under mutmut too, and pin what is
on disk and what :func:`recover` says, word for word.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from envforge.core.errors import CheckFailed, InputError
from envforge.patching import journal
from envforge.patching.journal import journaled_write, prune_originals, recover, remove_bytecode
from envforge.patching.manifest import (
    AppliedPatchset,
    Intent,
    IntentFile,
    Manifest,
    PatchedFile,
    intent_path,
    manifest_path,
    read_intent,
    read_manifest,
    rebuild_hint,
)
from envforge.patching.states import FileChange

A0, A1, A2 = b"a = 0\n", b"a = 1\n", b"a = 2\n"
B0, B1 = b"b = 0\n", b"b = 1\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Crash(BaseException):
    """Stands for the kill: a BaseException no ``except Exception`` catches."""


@pytest.fixture
def sp(tmp_path: Path) -> Path:
    """A site-packages with pkg/a.py (mode 0640), pkg/b.py and bytecode of a, b and ab."""
    root = tmp_path / "site-packages"
    (root / "pkg" / "__pycache__").mkdir(parents=True)
    (root / "pkg" / "a.py").write_bytes(A0)
    (root / "pkg" / "a.py").chmod(0o640)
    (root / "pkg" / "b.py").write_bytes(B0)
    for name in ("a.cpython-311.pyc", "a.cpython-312.opt-1.pyc", "b.cpython-311.pyc", "ab.cpython-311.pyc"):
        (root / "pkg" / "__pycache__" / name).write_bytes(b"pyc")
    return root


def pyc(sp: Path) -> list[str]:
    return sorted(p.name for p in (sp / "pkg" / "__pycache__").iterdir())


def originals(sp: Path) -> dict[str, bytes]:
    d = sp / ".envforge" / "originals"
    return {p.name: p.read_bytes() for p in d.iterdir()} if d.is_dir() else {}


CHANGES = (
    FileChange("p1", "pkg/a.py", A0, A1),
    FileChange("p2", "pkg/a.py", A1, A2),
    FileChange("p1", "pkg/b.py", B0, B1),
)
APPLIED = Manifest(
    patchsets=(
        AppliedPatchset("p1", "sha256:" + "1" * 64, "pkg", "1.0"),
        AppliedPatchset("p2", "sha256:" + "2" * 64, "pkg", "1.0"),
    ),
    files=(
        PatchedFile("pkg/a.py", "p1", sha(A0), sha(A1)),
        PatchedFile("pkg/a.py", "p2", sha(A1), sha(A2)),
        PatchedFile("pkg/b.py", "p1", sha(B0), sha(B1)),
    ),
)


def crash_in(monkeypatch: pytest.MonkeyPatch, name: str, *, times: int = 1) -> None:
    """Make ``journal.<name>`` raise :class:`Crash` on its first ``times`` calls, as a kill there would."""
    real = getattr(journal, name)
    calls = {"n": 0}

    def stopped(*args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] <= times:
            raise Crash(name)
        return real(*args, **kwargs)

    monkeypatch.setattr(journal, name, stopped)


# -- journaled_write ------------------------------------------------------------------------------


def test_a_write_saves_every_before_records_one_file_each_then_writes_and_clears(
    sp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, object] = {}
    real = journal.write_manifest

    def watched(site_packages: Path, manifest: Manifest) -> None:
        seen["intent"] = read_intent(site_packages)
        seen["originals"] = originals(site_packages)
        seen["files"] = ((sp / "pkg/a.py").read_bytes(), (sp / "pkg/b.py").read_bytes())
        real(site_packages, manifest)

    monkeypatch.setattr(journal, "write_manifest", watched)
    journaled_write(sp, "apply", ["p1", "p2"], CHANGES, APPLIED)
    assert seen["intent"] == Intent(
        "apply",
        ("p1", "p2"),
        sha(APPLIED.to_json().encode("utf-8")),
        (IntentFile("pkg/a.py", sha(A0), sha(A2)), IntentFile("pkg/b.py", sha(B0), sha(B1))),
    )
    # the stacked file's intermediate is saved too: it is p2's original
    assert seen["originals"] == {sha(A0): A0, sha(A1): A1, sha(B0): B0}
    assert seen["files"] == (A2, B1)
    assert (sp / "pkg/a.py").read_bytes() == A2 and (sp / "pkg/b.py").read_bytes() == B1
    assert (sp / "pkg/a.py").stat().st_mode & 0o7777 == 0o640
    assert pyc(sp) == ["ab.cpython-311.pyc"]
    assert not intent_path(sp).exists()
    assert read_manifest(sp) == APPLIED
    assert originals(sp) == {sha(A0): A0, sha(A1): A1, sha(B0): B0}


def test_a_write_to_the_empty_manifest_records_absent_and_prunes_every_original(
    sp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journaled_write(sp, "apply", ["p1", "p2"], CHANGES, APPLIED)
    back = (
        FileChange("p2", "pkg/a.py", A2, A1),
        FileChange("p1", "pkg/a.py", A1, A0),
        FileChange("p1", "pkg/b.py", B1, B0),
    )
    seen: list[Intent | None] = []
    real = journal.write_manifest

    def watched(site_packages: Path, manifest: Manifest) -> None:
        seen.append(read_intent(site_packages))
        real(site_packages, manifest)

    monkeypatch.setattr(journal, "write_manifest", watched)
    journaled_write(sp, "revert", ["p2", "p1"], back, Manifest())
    assert seen == [
        Intent(
            "revert",
            ("p2", "p1"),
            "absent",
            (IntentFile("pkg/a.py", sha(A2), sha(A0)), IntentFile("pkg/b.py", sha(B1), sha(B0))),
        )
    ]
    assert (sp / "pkg/a.py").read_bytes() == A0 and (sp / "pkg/b.py").read_bytes() == B0
    assert not manifest_path(sp).exists() and not (sp / ".envforge" / "originals").exists()
    assert not intent_path(sp).exists()


def test_an_unwritable_file_restores_the_files_written_removes_what_it_saved_and_says_so(sp: Path) -> None:
    (sp / ".envforge" / "originals").mkdir(parents=True)
    (sp / ".envforge" / "originals" / sha(B0)).write_bytes(B0)  # saved by an earlier apply: kept
    (sp / "pkg" / "b.py").unlink()
    (sp / "pkg" / "b.py").mkdir()  # os.replace onto a directory fails: EISDIR
    with pytest.raises(InputError) as info:
        journaled_write(sp, "apply", ["p1"], (CHANGES[0], CHANGES[2]), APPLIED)
    assert info.value.message == (
        f"cannot write {sp}/pkg/b.py: Is a directory; 1 file of this patchset restored, nothing changed"
    )
    assert info.value.hint == "run as the owner of the environment, or patch a virtual environment"
    assert (sp / "pkg/a.py").read_bytes() == A0
    assert not intent_path(sp).exists()
    assert originals(sp) == {sha(B0): B0}
    assert not manifest_path(sp).exists()
    assert pyc(sp) == ["a.cpython-311.pyc", "a.cpython-312.opt-1.pyc", "ab.cpython-311.pyc", "b.cpython-311.pyc"]


def test_an_interrupt_while_writing_restores_and_propagates_unchanged(
    sp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = journal.atomic_write

    def second_file_interrupted(path: Path, data: bytes, **kwargs: object) -> None:
        if path == sp / "pkg/b.py" and data == B1:
            raise KeyboardInterrupt
        real(path, data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(journal, "atomic_write", second_file_interrupted)
    with pytest.raises(KeyboardInterrupt):
        journaled_write(sp, "apply", ["p1"], (CHANGES[0], CHANGES[2]), APPLIED)
    assert (sp / "pkg/a.py").read_bytes() == A0 and (sp / "pkg/b.py").read_bytes() == B0
    assert not intent_path(sp).exists() and originals(sp) == {}


# -- recover --------------------------------------------------------------------------------------


def test_no_record_recovers_nothing(sp: Path) -> None:
    assert recover(sp) == ()
    assert not (sp / ".envforge").exists()


def test_killed_before_the_manifest_rolls_every_file_back(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crash_in(monkeypatch, "write_manifest")
    with pytest.raises(Crash):
        journaled_write(sp, "apply", ["p1", "p2"], CHANGES, APPLIED)
    assert (sp / "pkg/a.py").read_bytes() == A2 and intent_path(sp).exists()
    (sp / "pkg" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"compiled from the patched bytes")
    (sp / "pkg/a.py").chmod(0o600)
    assert recover(sp) == (
        "rolled back an interrupted `apply-patches` of p1, p2: 2 files restored to their bytes "
        "before it; the patch manifest was not written, so none of its files stay changed",
    )
    assert (sp / "pkg/a.py").read_bytes() == A0 and (sp / "pkg/b.py").read_bytes() == B0
    assert (sp / "pkg/a.py").stat().st_mode & 0o7777 == 0o600
    assert pyc(sp) == ["ab.cpython-311.pyc"]
    assert not intent_path(sp).exists()
    assert read_manifest(sp) is None
    assert not (sp / ".envforge" / "originals").exists()
    assert recover(sp) == ()


def test_a_rollback_keeps_the_originals_of_the_manifest_on_disk(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = Manifest(patchsets=APPLIED.patchsets[:1], files=(APPLIED.files[0],))
    journaled_write(sp, "apply", ["p1"], (CHANGES[0],), first)
    crash_in(monkeypatch, "write_manifest")
    with pytest.raises(Crash):
        journaled_write(sp, "apply", ["p2"], (CHANGES[1],), Manifest(APPLIED.patchsets, APPLIED.files[:2]))
    assert originals(sp) == {sha(A0): A0, sha(A1): A1}
    assert recover(sp) == (
        "rolled back an interrupted `apply-patches` of p2: 1 file restored to their bytes "
        "before it; the patch manifest was not written, so none of its files stay changed",
    )
    assert (sp / "pkg/a.py").read_bytes() == A1
    assert read_manifest(sp) == first
    assert originals(sp) == {sha(A0): A0}


def test_a_file_already_back_is_not_counted(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crash_in(monkeypatch, "write_manifest")
    with pytest.raises(Crash):
        journaled_write(sp, "revert", [], (CHANGES[2], CHANGES[0]), APPLIED)  # b.py first: skipped, then a.py
    (sp / "pkg/b.py").write_bytes(B0)  # as if the kill came before its os.replace
    (sp / "pkg" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"pyc")  # a skipped file's bytecode stays
    assert recover(sp) == (
        "rolled back an interrupted `apply-patches --revert` of patchsets: 1 file restored to "
        "their bytes before it; the patch manifest was not written, so none of its files stay changed",
    )
    assert (sp / "pkg/a.py").read_bytes() == A0 and (sp / "pkg/b.py").read_bytes() == B0
    assert pyc(sp) == ["ab.cpython-311.pyc", "b.cpython-311.pyc"]


def test_killed_after_the_manifest_only_clears_the_record_and_prunes(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crash_in(monkeypatch, "clear_intent")
    with pytest.raises(Crash):
        journaled_write(sp, "revert", ["p9"], (CHANGES[0],), Manifest(APPLIED.patchsets[:1], APPLIED.files[:1]))
    (sp / ".envforge" / "originals" / ("f" * 64)).write_bytes(b"stale")
    monkeypatch.undo()
    assert recover(sp) == (
        "recovered an interrupted `apply-patches --revert` of p9: it had completed (the patch manifest was written)",
    )
    assert (sp / "pkg/a.py").read_bytes() == A1  # the completed write stays
    assert not intent_path(sp).exists()
    assert originals(sp) == {sha(A0): A0}


@pytest.mark.parametrize("where", ["hand-edited", "missing"])
def test_a_file_that_is_neither_before_nor_after_refuses_and_writes_nothing(
    sp: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    crash_in(monkeypatch, "write_manifest")
    with pytest.raises(Crash):
        journaled_write(sp, "apply", ["p1"], (CHANGES[0], CHANGES[2]), APPLIED)
    if where == "missing":
        (sp / "pkg/b.py").unlink()
        now = "missing"
    else:
        (sp / "pkg/b.py").write_bytes(b"b = 'by hand'\n")
        now = sha(b"b = 'by hand'\n")
    record = intent_path(sp).read_bytes()
    with pytest.raises(CheckFailed) as info:
        recover(sp)
    assert info.value.message == (
        f"cannot roll back an interrupted `apply-patches` of p1: pkg/b.py is {now}, neither {sha(B0)} (before) "
        f"nor {sha(B1)} (after); nothing was changed (record {intent_path(sp)})"
    )
    assert info.value.hint == rebuild_hint(sp)
    assert (sp / "pkg/a.py").read_bytes() == A1  # nothing written: a.py is still the patched bytes
    assert intent_path(sp).read_bytes() == record


def test_a_missing_saved_original_refuses_and_writes_nothing(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crash_in(monkeypatch, "write_manifest")
    with pytest.raises(Crash):
        journaled_write(sp, "apply", ["p1"], (CHANGES[0], CHANGES[2]), APPLIED)
    blob = sp / ".envforge" / "originals" / sha(B0)
    blob.unlink()
    with pytest.raises(CheckFailed) as info:
        recover(sp)
    assert info.value.message == (
        f"cannot roll back an interrupted `apply-patches` of p1: the saved bytes of "
        f"pkg/b.py ({blob}) are missing; nothing was changed (record {intent_path(sp)})"
    )
    assert (sp / "pkg/a.py").read_bytes() == A1 and (sp / "pkg/b.py").read_bytes() == B1
    assert intent_path(sp).exists()


def test_a_saved_original_that_is_not_a_file_is_refused_by_name(sp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    crash_in(monkeypatch, "write_manifest")
    with pytest.raises(Crash):
        journaled_write(sp, "apply", ["p1"], (CHANGES[0],), APPLIED)
    blob = sp / ".envforge" / "originals" / sha(A0)
    blob.unlink()
    os.mkfifo(blob)  # opening it would block: it must be refused, not opened
    with pytest.raises(InputError) as info:
        recover(sp)
    assert info.value.message == f"saved original {blob} is not a regular file (a FIFO)"
    assert info.value.hint == rebuild_hint(sp)
    assert (sp / "pkg/a.py").read_bytes() == A1 and intent_path(sp).exists()


def test_a_record_naming_a_path_outside_site_packages_is_refused(sp: Path) -> None:
    intent_path(sp).parent.mkdir(parents=True)
    intent_path(sp).write_text(
        json.dumps(
            {
                "schema": 1,
                "action": "apply",
                "patchsets": ["p1"],
                "manifest_after": "0" * 64,
                "files": [{"path": "../outside.py", "before_sha256": sha(A0), "after_sha256": sha(A1)}],
            }
        )
    )
    with pytest.raises(InputError) as info:
        recover(sp)
    assert info.value.message.startswith("../outside.py: outside site-packages ")
    assert intent_path(sp).exists()


# -- remove_bytecode, prune_originals -------------------------------------------------------------


def test_remove_bytecode_removes_only_the_modules_own(sp: Path) -> None:
    remove_bytecode(sp / "pkg" / "a.py")
    assert pyc(sp) == ["ab.cpython-311.pyc", "b.cpython-311.pyc"]
    remove_bytecode(sp / "other" / "a.py")  # no __pycache__: nothing to do
    assert pyc(sp) == ["ab.cpython-311.pyc", "b.cpython-311.pyc"]


def test_prune_originals_keeps_what_is_asked_and_removes_an_empty_directory(sp: Path) -> None:
    prune_originals(sp, set())  # no originals directory: nothing to do
    d = sp / ".envforge" / "originals"
    d.mkdir(parents=True)
    for name in ("1" * 64, "2" * 64):
        (d / name).write_bytes(name.encode())
    prune_originals(sp, {"1" * 64})
    assert originals(sp) == {"1" * 64: b"1" * 64}
    prune_originals(sp, set())
    assert not d.exists() and (sp / ".envforge").is_dir()


def test_a_record_whose_file_is_not_a_regular_file_is_refused_with_the_rebuild_hint(
    sp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash_in(monkeypatch, "write_manifest")
    with pytest.raises(Crash):
        journaled_write(sp, "apply", ["p1"], (CHANGES[0],), APPLIED)
    (sp / "pkg/a.py").unlink()
    os.mkfifo(sp / "pkg/a.py")
    with pytest.raises(InputError) as info:
        recover(sp)
    assert info.value.hint == rebuild_hint(sp)
    assert intent_path(sp).exists()


def test_a_manifest_of_patchsets_without_files_is_recorded_by_its_digest(
    sp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    only = Manifest(patchsets=APPLIED.patchsets, files=())
    seen: list[Intent | None] = []
    real = journal.write_manifest

    def watched(site_packages: Path, manifest: Manifest) -> None:
        seen.append(read_intent(site_packages))
        real(site_packages, manifest)

    monkeypatch.setattr(journal, "write_manifest", watched)
    journaled_write(sp, "apply", ["p1"], (CHANGES[0],), only)
    assert seen == [
        Intent("apply", ("p1",), sha(only.to_json().encode("utf-8")), (IntentFile("pkg/a.py", sha(A0), sha(A1)),))
    ]
    assert read_manifest(sp) == only and originals(sp) == {}
