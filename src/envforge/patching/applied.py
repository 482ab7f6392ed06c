"""What envforge changed in an environment, read back: the applied diff against the originals.

``envforge patches diff [ENV]`` compares each file the patch manifest lists with the original
bytes saved under ``.envforge/originals/<sha256>`` when it was first patched (docs/architecture.md):
the diff a reviewer or an upstream PR needs, for an environment that is already patched (where
``apply-patches --dry-run`` rightly shows nothing left to do).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from envforge.core.errors import InputError
from envforge.core.fs import sha256_hex
from envforge.core.textfile import read_state
from envforge.patching.manifest import originals_dir, read_installed, read_manifest, rebuild_hint
from envforge.patching.planning import inside, refuse_interrupted
from envforge.patching.source import lines_of, readable_source

__all__ = ["AppliedFile", "applied_diff"]


@dataclass(frozen=True, slots=True)
class AppliedFile:
    """One patched file.

    :ivar path: relative to site-packages.
    :ivar patchsets: the patchsets that changed it, in the order they were stacked.
    :ivar diff: unified diff original → current bytes (``a/<path>``, ``b/<path>``).
    :ivar as_recorded: the current bytes are those envforge wrote (False: changed since, which
        verify reports as tampered; the diff then shows the current bytes).
    """

    path: str
    patchsets: tuple[str, ...]
    diff: str
    as_recorded: bool


def applied_diff(site_packages: Path) -> tuple[AppliedFile, ...]:
    """Every file of the patch manifest with its diff against the saved original, by path.

    Empty when envforge never patched ``site_packages``.

    :raises CheckFailed: an interrupted apply or revert left its intent record: the files may be half
        written, so no diff read from them would be true; the message says which are written
        (:func:`envforge.patching.planning.refuse_interrupted`, as the dry run says it).
    :raises InputError: a malformed manifest, a missing saved original (or one that is not a
        regular file, or larger than 64 MiB), or a patched file that was deleted (each names the
        file and the next step).
    """
    refuse_interrupted(site_packages)  # a crash mid-apply is not "no patches applied" (fault suite N93)
    manifest = read_manifest(site_packages)
    if manifest is None:
        return ()
    out = []
    canonical = manifest.canonical()
    for path in sorted({f.path for f in canonical.files}):
        stack = [f for f in canonical.files if f.path == path]
        original_file = originals_dir(site_packages) / stack[0].original_sha256
        current_file = inside(site_packages, path)
        try:  # envforge's own copy: a FIFO or a directory in its place is named, never opened
            original = read_state(original_file, what="saved original", hint=lambda: rebuild_hint(site_packages))
        except FileNotFoundError:
            raise InputError(
                f"the saved original of {path} is missing ({original_file})", hint=rebuild_hint(site_packages)
            ) from None
        try:
            current = read_installed(site_packages, current_file)
        except (FileNotFoundError, NotADirectoryError):
            raise InputError(f"patched file {current_file} is missing", hint=rebuild_hint(site_packages)) from None
        before = lines_of(readable_source(original))
        after = lines_of(readable_source(current))
        diff = "".join(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))
        out.append(
            AppliedFile(path, tuple(f.patchset for f in stack), diff, sha256_hex(current) == stack[-1].new_sha256)
        )
    return tuple(out)
