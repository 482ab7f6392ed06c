"""Patches of installed third-party code: declarative, version-scoped, idempotent, reversible.

``patchsets/*.toml`` name a distribution, the versions a patch is written for and libcst
operations on its files (:mod:`.patchset`, :mod:`.operations`). :func:`plan` says what each
operation would do (:mod:`.planning`, states in :mod:`.states`), :func:`apply` does it
(:mod:`.applying`: all files of a patchset or none, temp file + ``os.replace``, stale bytecode
removed, originals kept in ``.envforge/``; the crash-safe write is :mod:`.journal`), :func:`revert`
restores byte-exact (:mod:`.reverting`), :func:`export_diff` writes a unified diff for upstream.
See docs/patchsets.md.

The names below are loaded from their modules on first use (PEP 562), so importing one module of
the package (``envforge.patching.syntax``, ``envforge.patching.manifest``) does not load the engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envforge.patching.applying import apply
    from envforge.patching.export import export_diff
    from envforge.patching.journal import recover
    from envforge.patching.manifest import Manifest, PatchedFile, read_manifest
    from envforge.patching.patchset import Patchset, PatchsetError, load_patchset, load_patchsets
    from envforge.patching.planning import installed_version, plan
    from envforge.patching.reverting import revert
    from envforge.patching.states import (
        ALREADY_APPLIED,
        APPLIED,
        DRIFTED,
        OUT_OF_RANGE,
        REVERTED,
        SHADOWED,
        STATES,
        UPSTREAM_FIXED,
        FileChange,
        OperationResult,
        PatchReport,
        Unmet,
    )

__all__ = [
    "ALREADY_APPLIED",
    "APPLIED",
    "DRIFTED",
    "OUT_OF_RANGE",
    "REVERTED",
    "SHADOWED",
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

#: The module each public name is defined in.
_HOME = {
    **dict.fromkeys(
        (
            "ALREADY_APPLIED",
            "APPLIED",
            "DRIFTED",
            "OUT_OF_RANGE",
            "REVERTED",
            "SHADOWED",
            "STATES",
            "UPSTREAM_FIXED",
            "FileChange",
            "OperationResult",
            "PatchReport",
            "Unmet",
        ),
        "states",
    ),
    **dict.fromkeys(("installed_version", "plan"), "planning"),
    "apply": "applying",
    "revert": "reverting",
    "recover": "journal",
    "export_diff": "export",
    **dict.fromkeys(("Manifest", "PatchedFile", "read_manifest"), "manifest"),
    **dict.fromkeys(("Patchset", "PatchsetError", "load_patchset", "load_patchsets"), "patchset"),
}


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use and kept.

    :raises AttributeError: ``name`` is not one of :data:`__all__`.
    """
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's own names and every public name, loaded or not."""
    return sorted({*globals(), *__all__})
