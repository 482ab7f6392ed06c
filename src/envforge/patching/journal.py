"""The journaled write: every file of an apply or revert, and the manifest after them, or none.

Each file is written to a temp file and ``os.replace``d (field case B09, :func:`envforge.core.fs.atomic_write`)
and its stale ``__pycache__`` entries are removed (B10). Before the first ``os.replace`` the bytes
every file has are saved in ``.envforge/originals/<sha256>`` and an intent record
(:class:`envforge.patching.manifest.Intent`) is written and fsynced; it is removed once the manifest
is written. A process killed in between leaves the record, and :func:`recover` rolls the files back
(issue 18).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envforge.core.errors import CheckFailed, InputError
from envforge.core.fs import atomic_write, sha256_hex
from envforge.core.plural import counted
from envforge.core.textfile import read_state
from envforge.patching.manifest import (
    Intent,
    IntentFile,
    Manifest,
    clear_intent,
    intent_path,
    manifest_sha256,
    originals_dir,
    read_installed,
    read_intent,
    read_manifest,
    rebuild_hint,
    write_intent,
    write_manifest,
)
from envforge.patching.planning import inside
from envforge.patching.states import FileChange

__all__ = ["journaled_write", "prune_originals", "recover", "remove_bytecode"]


def journaled_write(sp: Path, action: str, ids: Sequence[str], changes: Sequence[FileChange], new: Manifest) -> None:
    """Write ``changes`` and then manifest ``new`` so that, across a crash, all files or none
    (issue 18): the bytes each file had before are saved in ``.envforge/originals/<sha256>``, an
    intent record naming every file and the manifest to come is written and fsynced, the files
    are replaced, the manifest is written, and the intent record is removed. A process killed in
    between leaves the record; :func:`recover` then rolls the files back (or, when the manifest
    was already written, only removes the record).
    """
    originals = originals_dir(sp)
    originals.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    for c in changes:  # every intermediate too: a stacked patchset's original is the one below it
        blob = originals / sha256_hex(c.before)
        if not blob.exists():
            atomic_write(blob, c.before)
            saved.append(blob)
    collapsed: dict[str, FileChange] = {}  # one write per path: first before, last after
    for c in changes:
        first = collapsed.get(c.path)
        collapsed[c.path] = c if first is None else FileChange(first.patchset, c.path, first.before, c.after)
    changes = list(collapsed.values())
    after = sha256_hex(new.to_json().encode("utf-8")) if new.patchsets or new.files else "absent"
    write_intent(
        sp,
        Intent(
            action,
            tuple(ids),
            after,
            tuple(IntentFile(c.path, sha256_hex(c.before), sha256_hex(c.after)) for c in changes),
        ),
    )
    try:
        _replace_all(sp, changes)
    except BaseException:
        clear_intent(sp)  # _replace_all restored the files it had replaced
        for p in saved:
            p.unlink(missing_ok=True)
        raise
    write_manifest(sp, new)
    clear_intent(sp)
    prune_originals(sp, {f.original_sha256 for f in new.files})


def recover(site_packages: Path) -> tuple[str, ...]:
    """Finish what an interrupted apply or revert left (its intent record), one line per action.

    When the manifest on disk is the one the write was to end with, the write completed and the
    record is removed. Otherwise every file it names is put back to its ``before`` bytes (the
    manifest on disk still describes that state) and stale bytecode is removed. The caller holds
    the environment lock (:mod:`envforge.core.mutex`). No record: ``()``.

    :raises CheckFailed: a named file is neither its ``before`` nor its ``after`` bytes (changed
        by hand since the crash), or a saved ``before`` is missing: nothing is written then.
    :raises InputError: the record is malformed or names a path outside ``site_packages``, or a
        state file (the record, the manifest, a saved ``before``) is not a regular file or too large.
    """
    intent = read_intent(site_packages)
    if intent is None:
        return ()
    what = f"an interrupted `apply-patches{' --revert' if intent.action == 'revert' else ''}` of {', '.join(intent.patchsets) or 'patchsets'}"
    if manifest_sha256(site_packages) == intent.manifest_after:
        clear_intent(site_packages)
        manifest = read_manifest(site_packages) or Manifest()
        prune_originals(site_packages, {f.original_sha256 for f in manifest.files})
        return (f"recovered {what}: it had completed (the patch manifest was written)",)
    todo: list[tuple[Path, bytes]] = []
    for f in intent.files:
        target = inside(site_packages, f.path)
        try:
            current = sha256_hex(read_installed(site_packages, target))
        except (FileNotFoundError, NotADirectoryError):
            current = "missing"
        if current == f.before_sha256:
            continue
        blob = originals_dir(site_packages) / f.before_sha256
        saved = None
        if current == f.after_sha256:
            try:  # a FIFO or a directory in its place is refused by name, never opened
                saved = read_state(blob, what="saved original", hint=lambda: rebuild_hint(site_packages))
            except FileNotFoundError:
                pass
        if saved is None:
            why = (
                f"{f.path} is {current}, neither {f.before_sha256} (before) nor {f.after_sha256} (after)"
                if current != f.after_sha256
                else f"the saved bytes of {f.path} ({blob}) are missing"
            )
            raise CheckFailed(
                f"cannot roll back {what}: {why}; nothing was changed (record {intent_path(site_packages)})",
                hint=rebuild_hint(site_packages),
            )
        todo.append((target, saved))
    for target, data in todo:
        atomic_write(target, data)  # keeps the file's permission bits (core.fs.file_mode)
        remove_bytecode(target)
    clear_intent(site_packages)
    manifest = read_manifest(site_packages) or Manifest()
    prune_originals(site_packages, {f.original_sha256 for f in manifest.files})
    return (
        f"rolled back {what}: {counted(len(todo), 'file')} restored to their bytes before it; "
        f"the patch manifest was not written, so none of its files stay changed",
    )


def _replace_all(sp: Path, changes: Sequence[FileChange]) -> None:
    """Write every change (temp file + ``os.replace``); on failure restore those already replaced.

    :raises InputError: a file cannot be written (e.g. a read-only system site-packages).
    """
    done: list[FileChange] = []
    try:
        for c in changes:
            target = inside(sp, c.path)
            atomic_write(target, c.after)  # keeps the file's permission bits
            done.append(c)
    except BaseException as exc:
        for c in done:
            atomic_write(sp / c.path, c.before)
        if isinstance(exc, OSError):
            raise InputError(
                f"cannot write {sp / changes[len(done)].path}: {exc.strerror or exc}; "
                f"{counted(len(done), 'file')} of this patchset restored, nothing changed",
                hint="run as the owner of the environment, or patch a virtual environment",
            ) from None
        raise
    for c in changes:
        remove_bytecode(sp / c.path)


def remove_bytecode(source: Path) -> None:
    """Delete ``__pycache__/<module>.*.pyc`` of ``source`` (field case B10: stale or
    unchecked-hash bytecode would hide the patched source)."""
    cache = source.parent / "__pycache__"
    for pyc in cache.glob(f"{source.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def prune_originals(sp: Path, keep: set[str]) -> None:
    """Delete every saved original of ``sp`` whose sha256 is not in ``keep``, and ``originals/``
    itself once it is empty."""
    d = originals_dir(sp)
    if not d.is_dir():
        return
    for p in d.iterdir():
        if p.name not in keep:
            p.unlink()
    if not any(d.iterdir()):
        d.rmdir()
