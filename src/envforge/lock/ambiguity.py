"""Two entries of one name that can be active together, as data: what the lock reader reports.

:mod:`envforge.lock.markerspace` decides which pairs overlap; this module names them the way every
message does (``packages[0] (idna 3.7; no marker) and packages[1] (idna 3.10; no marker) can be
active together``). The reader keeps them on the document (a pylock packaging reads is read), ``lock
diff`` shows them, and installing refuses them (:func:`envforge.lock.read.refuse_ambiguous`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from envforge.lock.markerspace import Entry, Overlap, overlaps

__all__ = ["Ambiguity", "Selectable", "ambiguity_of", "describe_entry", "plain_entries", "pylock_ambiguities"]


@dataclass(frozen=True, slots=True)
class Ambiguity:
    """Two entries of one name that can be active together: ``<key>[first]`` and ``<key>[second]``
    (``key`` is ``packages``, or uv's ``package``), each described as ``"idna 3.7; no marker"``
    (:func:`describe_entry`); ``witness`` an environment where both are (the variables their
    markers use; ``{}`` when one has no marker)."""

    key: str
    first: int
    second: int
    first_entry: str
    second_entry: str
    witness: Mapping[str, str]

    @property
    def name(self) -> str:
        """The package name both entries have."""
        return self.first_entry.split(" ", 1)[0]

    def describe(self, verb: str = "can be active together") -> str:
        """``packages[0] (idna 3.7; no marker) and packages[1] (idna 3.10; no marker) can be active
        together``, plus `` (e.g. sys_platform = 'linux')`` where the witness names variables."""
        where = (
            " (e.g. " + ", ".join(f"{k} = {v!r}" for k, v in sorted(self.witness.items())) + ")" if self.witness else ""
        )
        return (
            f"{self.key}[{self.first}] ({self.first_entry}) and {self.key}[{self.second}] "
            f"({self.second_entry}) {verb}{where}"
        )


class Selectable(Protocol):
    """A pylock package entry as read (:class:`envforge.lock.read.LockEntry`, or the build's
    ``envforge.lock.resolve.LockedPackage``): its name, version and marker."""

    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str | None: ...
    @property
    def marker(self) -> str | None: ...


def describe_entry(entry: Entry) -> str:
    """``"idna 3.7; no marker"``, ``"a 1; marker sys_platform == 'linux' | sys_platform == 'win32'"``
    (alternatives joined with `` | ``), ``"example (no version); no marker"``."""
    name, version, markers = entry
    marker = "no marker" if markers is None else "marker " + " | ".join(markers)
    return f"{name} {version or '(no version)'}; {marker}"


def plain_entries(entries: Sequence[Selectable]) -> list[Entry]:
    """Pylock entries as :mod:`envforge.lock.markerspace` reads them: ``(name, version, [marker] or None)``."""
    return [(e.name, e.version, [e.marker] if e.marker else None) for e in entries]


def ambiguity_of(found: Overlap, entries: Sequence[Entry], key: str) -> Ambiguity:
    """The :class:`Ambiguity` of one overlap of ``entries`` (the array ``key`` of the lock)."""
    return Ambiguity(
        key,
        found.first,
        found.second,
        describe_entry(entries[found.first]),
        describe_entry(entries[found.second]),
        found.witness,
    )


def pylock_ambiguities(entries: Sequence[Selectable]) -> tuple[Ambiguity, ...]:
    """Every name's first pair of pylock ``entries`` that can be active together (:func:`markerspace.overlaps`)."""
    plain = plain_entries(entries)
    return tuple(ambiguity_of(o, plain, "packages") for o in overlaps(plain))
