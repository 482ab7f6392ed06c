"""The changes between two locks as values: package changes, index moves, lock-level field changes, and
the package families they are grouped under (see :mod:`envforge.lockdiff.classify` for the kinds).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from envforge.lockdiff.model import PYPI, Lock

__all__ = [
    "CUDA_SUFFIX",
    "ChangeKind",
    "DiffStatus",
    "FieldKind",
    "FAMILIES",
    "FieldChange",
    "IndexMove",
    "LockDiff",
    "PackageChange",
    "SharedChange",
    "family_of",
    "index_names",
]

#: A package change's kind (:mod:`envforge.lockdiff.classify` says what each means), in report order.
ChangeKind = Literal[
    "added", "removed", "replaced", "upgraded", "downgraded", "local", "rehashed", "hashes-removed", "hashes-added",
    "rebuilt", "files", "source", "moved", "marker", "dependencies", "fields", "metadata",
]  # fmt: skip
#: A lock-level field change's kind (:class:`FieldChange`).
FieldKind = Literal["added", "removed", "changed", "reason", "no-longer-applies"]
#: A lock diff's status: both sides have a lock, or one side has none (``--git``).
DiffStatus = Literal["changed", "added", "removed"]

FAMILIES = ("torch", "nvidia", "flashinfer", "sglang", "other")
_TORCH = frozenset({"torch", "torchvision", "torchaudio", "torchao", "torchcodec", "triton", "pytorch-triton"})
CUDA_SUFFIX = re.compile(r"-cu(\d+)$")


@dataclass(frozen=True, slots=True)
class PackageChange:
    """One package-level change (one pair of entries, or one entry added or removed).

    ``old_name``/``new_name`` differ only for ``replaced``; versions and markers are the entries'
    own (``None`` on the side that lacks the entry, or for an entry without a marker);
    ``level`` grades upgrades and downgrades; ``old_source``/``new_source`` are set when the
    source changed, or (same source) the files' URL folder did, and that change is not part of
    an :class:`IndexMove`; ``marker_changed`` says
    whether the markers differ (compared as parsed by ``packaging.markers``); ``coverage`` lists
    what the files cover, gained (``+``) or lost (``-``): platforms (``linux aarch64``, ``win amd64``,
    ``macos arm64``, ``any``), Python tags (``cp311``, ``cp39-abi3``, ``py3``) and ``sdist``;
    ``files`` lists file names added/removed (same version only); ``dependencies`` lists edges
    added/removed; ``attributes`` the entry's other fields that changed (``requires-python '>=3.9'
    -> '>=3.10'``, ``+metadata.requires-dist six``); ``detail`` is a short note (local label, new hashes, build tags, the marker
    of an entry of a name with several entries); ``flagged`` marks what should not happen
    without a reason; ``hidden`` marks metadata-only churn.
    """

    kind: ChangeKind
    family: str
    old_name: str | None
    new_name: str | None
    old_version: str | None
    new_version: str | None
    level: str | None = None
    old_source: str | None = None
    new_source: str | None = None
    old_marker: str | None = None
    new_marker: str | None = None
    marker_changed: bool = False
    coverage: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    dependencies: tuple[str, ...] = ()
    attributes: tuple[str, ...] = ()
    detail: str = ""
    flagged: bool = False
    hidden: bool = False

    @property
    def name(self) -> str:
        """The name to show (the new one for ``replaced``)."""
        return self.new_name or self.old_name or ""


@dataclass(frozen=True, slots=True)
class IndexMove:
    """Entries whose files moved from one index (or file URL folder) to another, said once.

    ``old``/``new`` are the index URLs (or folders); ``packages`` the names of every entry that
    moved that way, sorted (also those with other changes, listed as their own changes).
    """

    old: str
    new: str
    packages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SharedChange:
    """One fact that many entries' changes share, said once (:mod:`envforge.lockdiff.shared`).

    ``what``: ``marker`` (old/new: the entries' markers), ``rebuilt`` (new: ``build tag 8 -> 1``),
    ``field`` (new: the field change, ``requires-python '>=3.9' -> '>=3.10'``),
    ``dependency-marker`` (old/new: the marker of the edges whose marker alone changed),
    ``dependency`` (new: an edge added ``+x`` or removed ``-x``) or ``coverage`` (new: ``-cp311``);
    ``packages``: the entries that carry it, sorted (a name with several changed entries as
    ``name version``).
    """

    what: str
    old: str | None
    new: str | None
    packages: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FieldChange:
    """A change of the lock header, a top-level array item, or ``[tool.envforge]``.

    ``section``: ``header``, ``envforge``, ``target``, ``inputs``, ``env``, ``index``, ``override``
    or ``patchset``; ``subject``: the key, name or id; ``kind``: added, removed, changed, or
    ``reason`` (an override whose version stayed and whose reason changed: old/new are the
    reasons); ``note``: an override's reason. Array items (``resolution-markers``,
    ``conflicts``...) are one change each, added or removed.
    """

    section: str
    subject: str
    kind: FieldKind
    old: str | None
    new: str | None
    note: str | None = None
    hidden: bool = False


@dataclass(frozen=True, slots=True)
class LockDiff:
    """The changes from one lock to another.

    ``status`` is ``changed``, or ``added`` / ``removed`` when one side has no lockfile (``--git``);
    counts are numbers of entries (every ``[[packages]]`` / ``[[package]]`` entry);
    ``index_names`` maps index URLs to names for display; ``index_moves`` are the moves said once; ``shared`` the other facts many changes share, said
    once (taken out of ``packages``);
    ``ambiguities`` are the new side's pairs of same-name entries that can be active together
    (:attr:`envforge.lockdiff.model.Lock.ambiguities`; shown whatever changed, not a change).
    """

    old_label: str
    new_label: str
    status: DiffStatus
    old_count: int
    new_count: int
    packages: tuple[PackageChange, ...]
    fields: tuple[FieldChange, ...]
    index_names: Mapping[str, str]
    index_moves: tuple[IndexMove, ...] = ()
    ambiguities: tuple[str, ...] = ()
    shared: tuple[SharedChange, ...] = ()

    def visible_packages(self, show_all: bool = False) -> tuple[PackageChange, ...]:
        """Package changes to show: all with ``show_all``, else those not hidden."""
        return tuple(c for c in self.packages if show_all or not c.hidden)

    def visible_fields(self, show_all: bool = False) -> tuple[FieldChange, ...]:
        """Lock-level changes to show: all with ``show_all``, else those not hidden."""
        return tuple(c for c in self.fields if show_all or not c.hidden)

    def has_changes(self, show_all: bool = False) -> bool:
        """True when something would be shown (what ``--exit-code`` tests)."""
        return (
            self.status != "changed"
            or bool(self.index_moves)
            or bool(self.shared)
            or bool(self.visible_packages(show_all))
            or bool(self.visible_fields(show_all))
        )

    def hidden_count(self) -> int:
        """How many changes are hidden without ``--all``."""
        return sum(c.hidden for c in self.packages) + sum(c.hidden for c in self.fields)


def family_of(name: str) -> str:
    """The family a package is grouped under: torch, nvidia (``nvidia-*``, ``cuda-*``), flashinfer,
    sglang (``sglang*``, ``sgl-*``) or other."""
    if name in _TORCH:
        return "torch"
    if name.startswith(("nvidia-", "cuda-")):
        return "nvidia"
    if name.startswith("flashinfer"):
        return "flashinfer"
    if name.startswith(("sglang", "sgl-")):
        return "sglang"
    return "other"


def index_names(*locks: Lock, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Index URL -> name, from ``[tool.envforge] indexes`` of the locks and ``extra`` (e.g. a
    recipe's ``[indexes]``), PyPI as ``pypi``."""
    names = {PYPI: "pypi"}
    for url, name in (extra or {}).items():
        names[url.rstrip("/")] = name
    for lock in locks:
        for entry in lock.envforge.get("indexes", []) or []:
            if isinstance(entry, Mapping) and "url" in entry and "name" in entry:
                names[str(entry["url"]).rstrip("/")] = str(entry["name"])
    return names
