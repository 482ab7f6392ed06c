"""Patches of installed third-party code: declarative, version-scoped, idempotent, reversible.

``patchsets/*.toml`` name a distribution, the versions a patch is written for and libcst
operations on its files (:mod:`.patchset`, :mod:`.operations`). :func:`plan` says what each
operation would do, :func:`apply` does it (all files of a patchset or none, temp file +
``os.replace``, stale bytecode removed, originals kept in ``.envforge/``), :func:`revert` restores
byte-exact, :func:`export_diff` writes a unified diff for upstream. See docs/patchsets.md.
"""

from __future__ import annotations

from envforge.patching.engine import (
    ALREADY_APPLIED,
    APPLIED,
    DRIFTED,
    OUT_OF_RANGE,
    REVERTED,
    STATES,
    UPSTREAM_FIXED,
    FileChange,
    OperationResult,
    PatchReport,
    Unmet,
    apply,
    installed_version,
    plan,
    recover,
    revert,
)
from envforge.patching.export import export_diff
from envforge.patching.manifest import Manifest, PatchedFile, read_manifest
from envforge.patching.patchset import (
    Patchset,
    PatchsetError,
    load_patchset,
    load_patchsets,
)

__all__ = [
    "ALREADY_APPLIED",
    "APPLIED",
    "DRIFTED",
    "OUT_OF_RANGE",
    "REVERTED",
    "STATES",
    "UPSTREAM_FIXED",
    "FileChange",
    "Manifest",
    "OperationResult",
    "PatchReport",
    "PatchedFile",
    "Patchset",
    "PatchsetError",
    "Unmet",
    "apply",
    "export_diff",
    "installed_version",
    "load_patchset",
    "load_patchsets",
    "plan",
    "read_manifest",
    "recover",
    "revert",
]
