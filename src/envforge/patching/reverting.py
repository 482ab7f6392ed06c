"""Revert patchsets: restore the original bytes of every file the manifest records for them.

The originals come from ``.envforge/originals/<sha256>`` and go back through the journaled write
(:mod:`envforge.patching.journal`), newest patchset first, so a file several patchsets stacked on
ends byte-exact where it started.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envforge.core.errors import CheckFailed
from envforge.core.fs import sha256_hex
from envforge.core.textfile import read_state
from envforge.patching.journal import journaled_write, prune_originals, recover
from envforge.patching.manifest import (
    Manifest,
    PatchedFile,
    originals_dir,
    read_installed,
    read_manifest,
    rebuild_hint,
    write_manifest,
)
from envforge.patching.planning import inside, refuse_interrupted
from envforge.patching.states import REVERTED, FileChange, OperationResult, PatchReport

__all__ = ["revert"]


def revert(site_packages: Path, ids: Sequence[str] | None = None, *, dry_run: bool = False) -> PatchReport:
    """Restore the original bytes of every file the manifest records for ``ids`` (all when None),
    newest first, and drop them from the manifest. A file already back to its original is only
    dropped. Patchsets not in the manifest are ignored (reverting twice is a no-op). With
    ``dry_run`` nothing is written (``changes`` hold the diff back to the originals).

    :raises CheckFailed: a file changed since envforge wrote it (tampered or reinstalled: both
        sha256s named), a later patchset not being reverted patched the same file, or a recorded
        file or its saved original is missing (nothing is written then).
    :raises InputError: the manifest names a path outside ``site_packages`` (:func:`inside`).
    """
    recovered = () if dry_run else recover(site_packages)
    refuse_interrupted(site_packages)
    manifest = read_manifest(site_packages) or Manifest()
    chosen = {p.id for p in manifest.patchsets if ids is None or p.id in ids}
    entries = [f for f in manifest.files if f.patchset in chosen]
    disk: dict[str, bytes] = {}
    state: dict[str, bytes] = {}  # each path as it is once the newer entries are undone
    results: list[OperationResult] = []
    for f in reversed(entries):
        later = [
            g for g in manifest.files[manifest.files.index(f) + 1 :] if g.path == f.path and g.patchset not in chosen
        ]
        if later:
            raise CheckFailed(
                f"cannot revert {f.patchset}: {f.path} was patched after it by {later[0].patchset}",
                hint=f"revert {later[0].patchset} too (envforge apply-patches --revert)",
            )
        if f.path not in state and f.path not in disk:
            disk[f.path] = _read_for_revert(site_packages, f)
        current = state.get(f.path, disk[f.path])
        digest = sha256_hex(current)
        if digest == f.original_sha256:
            continue
        if digest != f.new_sha256:
            raise CheckFailed(
                f"{f.path} changed since envforge patched it: sha256 {digest}, expected "
                f"{f.new_sha256} (patched) or {f.original_sha256} (original)",
                hint=rebuild_hint(site_packages),
            )
        state[f.path] = _read_for_revert(site_packages, f, original=True)
        results.append(
            OperationResult(f.patchset, f.path, "revert", REVERTED, f"restored original (sha256 {f.original_sha256})")
        )
    restore = [FileChange("", path, disk[path], after) for path, after in sorted(state.items()) if after != disk[path]]
    if dry_run:
        return PatchReport(site_packages, tuple(results), tuple(restore), recovered=recovered)
    kept_files = tuple(f for f in manifest.files if f.patchset not in chosen)
    new = Manifest(tuple(p for p in manifest.patchsets if p.id not in chosen), kept_files)
    if restore:
        journaled_write(site_packages, "revert", sorted(chosen), restore, new)
    else:
        write_manifest(site_packages, new)
        prune_originals(site_packages, {f.original_sha256 for f in kept_files})
    return PatchReport(site_packages, tuple(results), tuple(restore), written=bool(restore), recovered=recovered)


def _read_for_revert(sp: Path, f: PatchedFile, *, original: bool = False) -> bytes:
    """The bytes of ``f.path`` (a manifest ``PatchedFile``) on disk, or of its saved original.

    :raises CheckFailed: the file (or ``.envforge/originals/<sha256>``) is gone: revert cannot
        restore it, a rebuild can.
    :raises InputError: the saved original is not a regular file (a FIFO, a directory), unreadable
        or larger than 64 MiB.
    """
    path = originals_dir(sp) / f.original_sha256 if original else inside(sp, f.path)
    try:
        if original:  # envforge's own copy: a FIFO or a directory in its place is named, never opened
            return read_state(path, what="saved original", hint=lambda: rebuild_hint(sp))
        return read_installed(sp, path)
    except (FileNotFoundError, NotADirectoryError):
        what = (
            f"the saved original of {f.path} is missing ({path})"
            if original
            else f"{f.path} is missing ({path}): deleted after envforge patched it"
        )
        raise CheckFailed(f"cannot revert {f.patchset}: {what}; nothing was changed", hint=rebuild_hint(sp)) from None
