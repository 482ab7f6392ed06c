"""Patchsets that stop applying between two locks (field case B41): one line each in ``lock diff``.

A lock records the patchsets its variant applies by id and digest (``[tool.envforge] patchsets``);
what each is written for (``distribution`` and ``versions``) is in the project's
``patchsets/<id>.toml``. A patchset of the old lock that applied to the old lock's version of its
distribution and applies to no version of it in the new lock gives a ``no-longer-applies`` change:
``patchset: sm120-fix no longer applies to sglang 0.5.21 (versions >=0.5.8,<0.5.21)``, with the
new lock's retirement reason when the recipe retired it (``retired-patchsets``). The patchset files
are read for their two keys only (the loader is :mod:`envforge.patching`, which lock diff does not
import); a patchset file that is missing or unreadable adds nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from envforge.lockdiff.changes import FieldChange, LockDiff
from envforge.lockdiff.model import Lock

if TYPE_CHECKING:
    from envforge.lock.model import PatchsetRef

__all__ = ["NO_LONGER_APPLIES", "patchset_changes", "with_patchset_changes"]

#: The :class:`FieldChange` kind of a patchset that stops applying (section ``patchset``).
NO_LONGER_APPLIES: Final = "no-longer-applies"


def _rows(envforge: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = envforge.get(key)
    return [r for r in value if isinstance(r, Mapping)] if isinstance(value, list) else []


def _ref(patchsets_dir: Path, pid: str) -> PatchsetRef | None:
    import tomllib  # lazy: only a lock with patchsets reads their files (tomllib's patterns: about 3 ms)

    from envforge.lock.model import PatchsetRef  # lazy: lock.model's dataclasses (about 4 ms), with patchsets only

    try:
        meta = tomllib.loads((patchsets_dir / f"{pid}.toml").read_text(encoding="utf-8")).get("patchset", {})
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError):
        return None
    dist, versions = meta.get("distribution"), meta.get("versions")
    if not isinstance(dist, str) or not isinstance(versions, str):
        return None
    return PatchsetRef(pid, "", dist, versions)


def _locked(lock: Lock) -> list[tuple[str, str | None]]:
    return [(p.name, p.version) for p in lock.packages.values()]


def patchset_changes(old: Lock, new: Lock, patchsets_dir: Path) -> tuple[FieldChange, ...]:
    """The ``no-longer-applies`` changes from ``old`` to ``new`` (see the module docstring):
    ``old``/``new`` are ``"<dist> <versions>"`` of each side (``"<dist> (not in the lock)"``),
    ``note`` is ``versions <specifier>`` and, when the new lock retires it, ``retired: <reason>``."""
    ids = [str(r.get("id")) for r in _rows(old.envforge, "patchsets") if r.get("id")]
    refs = [ref for pid in ids if (ref := _ref(patchsets_dir, pid)) is not None]
    if not refs:
        return ()
    from envforge.lock.patchsets import (
        unapplied_patchsets,
    )  # lazy: packaging.specifiers (about 5 ms), with patchsets only

    before = {u.id for u in unapplied_patchsets(refs, _locked(old))}
    retired = {str(r.get("id")): str(r.get("reason")) for r in _rows(new.envforge, "retired-patchsets")}
    out = []
    for u in unapplied_patchsets(refs, _locked(new)):
        if u.id in before:
            continue
        was = sorted({str(p.version) for p in old.packages.values() if p.name == u.distribution and p.version})
        note = f"versions {u.versions}" + (f"; retired: {retired[u.id]}" if u.id in retired else "")
        out.append(
            FieldChange(
                "patchset",
                u.id,
                NO_LONGER_APPLIES,
                f"{u.distribution} {', '.join(was)}",
                f"{u.distribution} {', '.join(u.locked)}" if u.locked else f"{u.distribution} (not in the lock)",
                note,
            )
        )
    return tuple(out)


def with_patchset_changes(diff: LockDiff, old: Lock | None, new: Lock | None, patchsets_dir: Path) -> LockDiff:
    """``diff`` with the :func:`patchset_changes` of ``old`` -> ``new`` after its other lock-level
    changes (unchanged when a side has no lock)."""
    if old is None or new is None:
        return diff
    extra = patchset_changes(old, new, patchsets_dir)
    return replace(diff, fields=diff.fields + extra) if extra else diff
