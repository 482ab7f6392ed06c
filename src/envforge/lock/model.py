"""A lock as envforge reads it back: packages, wheels, the ``[tool.envforge]`` table, its patchsets.

:func:`read_lock` reads a PEP 751 lock through :func:`envforge.lock.read.read_lock_file` into
:class:`Lock`; :class:`PatchsetRef` is a patchset id and digest a lock records. The errors
of making or reading a lock (:class:`LockError`, :class:`LockIntegrityError`) live here, beside
the values they are about.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.lock.digest import packages_digest
from envforge.lock.read import read_lock_file

__all__ = [
    "LOCK_SCHEMA",
    "Lock",
    "LockError",
    "LockIntegrityError",
    "LockedPackage",
    "LockedWheel",
    "PatchsetRef",
    "read_lock",
]

LOCK_SCHEMA = 1


class LockError(InputError):
    """A lock cannot be made or read (exit 2): unsatisfiable, unreachable index, bad file."""


class LockIntegrityError(LockError):
    """The lock is not what ``envforge lock`` wrote (exit 2): no ``[tool.envforge]`` table (or cut
    before it), no or another ``packages-digest`` than its packages hash to (an entry added, removed
    or edited by hand, e.g. a changed wheel hash), or a package its own ``inputs`` record missing
    from its ``[[packages]]``. ``problems`` holds one line per problem."""

    def __init__(self, path: Path, problems: Sequence[str], *, hint: str) -> None:
        super().__init__(
            f"{path} is not the lock `envforge lock` wrote:\n" + "\n".join("  " + p for p in problems), hint=hint
        )
        self.problems = tuple(problems)


@dataclass(frozen=True, slots=True)
class PatchsetRef:
    """A patchset recorded in a lock: ``id`` and ``digest`` (``sha256:<hex>`` of its file); the
    ``distribution`` and ``versions`` (PEP 440 specifier) it is written for, to hold it to the locked
    version (:mod:`envforge.lock.patchsets`; empty: not known, not checked)."""

    id: str
    digest: str
    distribution: str = ""
    versions: str = ""


@dataclass(frozen=True, slots=True)
class LockedWheel:
    """One wheel of a locked package: file ``name``, ``url`` or ``path``, ``sha256`` hex (or None)."""

    name: str | None
    url: str | None
    sha256: str | None


@dataclass(frozen=True, slots=True)
class LockedPackage:
    """A ``[[packages]]`` entry: canonical ``name``, ``version`` string, ``marker`` text, wheels."""

    name: str
    version: str | None
    marker: str | None
    index: str | None
    wheels: tuple[LockedWheel, ...]


@dataclass(frozen=True, slots=True)
class Lock:
    """A lock as read back: its path, packages and the ``[tool.envforge]`` table; ``digest`` is the
    :func:`envforge.lock.digest.packages_digest` of the ``[[packages]]`` tables as they are in the
    file (``tables``), to compare with the ``packages-digest`` ``envforge lock`` recorded."""

    path: Path
    packages: tuple[LockedPackage, ...]
    envforge: Mapping[str, Any]
    digest: str = ""
    tables: tuple[Mapping[str, Any], ...] = ()


def read_lock(path: Path, *, state_hint: str | None = None) -> Lock:
    """Read a PEP 751 lock through :func:`envforge.lock.read.read_lock_file` (validated by
    ``packaging.pylock``, same-name entries that can be active together refused) into the keys
    envforge uses. Wheel names are packaging's ``PackageWheel.filename`` (name, else path, else url).

    :param state_hint: given when ``path`` is an environment's own copy (``.envforge/pylock.toml``):
        read as envforge state (a regular file only; a FIFO or device is named, never opened), and
        the hint of every error, the missing copy's included.
    :raises LockError: missing (with the hint to run ``envforge lock``, or ``state_hint``).
    :raises InputError: not UTF-8, not TOML (with the line), not a valid PEP 751 lock (key path and
        packaging's reason), or a uv.lock (envforge builds and verifies from pylock files only);
        with ``state_hint``, not a regular file.
    """
    if state_hint is not None:
        try:
            doc = read_lock_file(path, state_hint=state_hint)
        except FileNotFoundError:
            raise LockError(f"lock {path} does not exist", hint=state_hint) from None
    elif not path.exists():  # (a pipe, `--lock <(git show REV:LOCK)`, is read; a directory or device named)
        raise LockError(f"lock {path} does not exist", hint="create it with `envforge lock RECIPE`")
    else:
        doc = read_lock_file(path)
    if doc.kind != "pylock":
        raise LockError(
            f"{path} is a uv.lock; envforge builds and verifies from PEP 751 pylock files",
            hint="create one with `envforge lock RECIPE`",
        )
    packages = tuple(
        LockedPackage(
            name=e.name,
            version=e.version,
            marker=e.marker,
            index=e.index,
            wheels=tuple(LockedWheel(w.filename, w.where, w.hashes.get("sha256")) for w in e.wheels),
        )
        for e in doc.entries
    )
    return Lock(
        path=path,
        packages=packages,
        envforge=doc.envforge,
        digest=packages_digest(doc.packages),
        tables=tuple(doc.packages),
    )
