"""Classify the changes between two locks: what a reviewer needs, and the churn they do not.

Entries are paired per name. A name with one entry on each side is one pair. A name with several
entries (PEP 751 and uv.lock allow one name per marker, per extra, per index) is paired by the
assignment that changes least: a marker difference costs most, then a public version, a source,
a local label, the files (:func:`pair_entries`). So a marker change stays a marker change, and a
version change of one of several ``torch`` entries stays a version change with its local label.
Entries left over are added or removed (or ``replaced`` by their build for another CUDA major).

Package change kinds (``PackageChange.kind``), the first that applies:

=============  =================================================================================
added          an entry only the new lock has
removed        an entry only the old lock has
replaced       ``nvidia-cublas-cu12`` removed and ``nvidia-cublas`` added: the same library built
               for another CUDA major (names that differ only by a ``-cuNN`` suffix)
upgraded       higher public version; ``level`` is major, minor, patch, pre, post or dev
downgraded     lower public version; same levels
local          same public version, another local label (``2.9.1 -> 2.9.1+cu130``, PEP 440)
rehashed       same version, a file of the same name with other hashes (flagged: an installer or
               cache cannot tell the two files apart)
rebuilt        same version, same wheel tags, a new build tag (``six-1.17.0-8-...`` ->
               ``six-1.17.0-1-...``) and so new hashes
files          same version, files added or removed (e.g. a new platform wheel)
source         same version from another source that is not an index (git commit, path)
moved          same version, same files (same hashes), from another index or URL
marker         same version and files, another environment marker (where it installs)
dependencies   only the dependency edges changed (uv.lock ``dependencies``)
metadata       only upload times or sizes of identical files changed (hidden by default)
=============  =================================================================================

Every other fact of a pair is kept beside its kind: the marker change (also when the version
changed), the source change, wheel coverage gained or lost (platforms and Python tags read from
the wheel file names with ``packaging.utils.parse_wheel_filename``), files and dependency edges.

An index move is said once: when two or more entries move from the same index (or file URL
folder) A to the same B, the move is one :class:`IndexMove` and those entries carry no source
change of their own; an entry whose only change is that move has no :class:`PackageChange`.

Lock-level changes (``FieldChange``) come from the header (``requires-python``; ``created-by``,
``lock-version``, uv's ``revision`` and generator comments are metadata), from top-level arrays
item by item (``resolution-markers``, ``conflicts``, ``manifest.*``, ``environments``...) and
from ``[tool.envforge]`` (docs/architecture.md): top-level keys, ``target``, ``inputs``, ``env``,
``indexes`` by name, ``overrides`` by name (with their reasons), ``patchsets`` by id.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from envforge.lockdiff.model import PYPI, Artifact, Lock, LockedPackage

__all__ = ["CUDA_SUFFIX", "FAMILIES", "FieldChange", "IndexMove", "LockDiff", "PackageChange",
           "coverage_key", "diff_locks", "family_of", "flatten_envforge", "index_names", "pair_entries",
           "wheel_coverage"]

FAMILIES = ("torch", "nvidia", "flashinfer", "sglang", "other")
_TORCH = frozenset({"torch", "torchvision", "torchaudio", "torchao", "torchcodec", "triton",
                    "pytorch-triton"})
CUDA_SUFFIX = re.compile(r"-cu(\d+)$")
_HIDDEN_HEADER = frozenset({"created-by", "lock-version", "version", "revision", "comments"})
_KEYED_ARRAYS = {"indexes": ("index", "name"), "overrides": ("override", "name"),
                 "patchsets": ("patchset", "id")}
_EXHAUSTIVE = 5040  # most candidate pairings tried one by one (7 entries against 7)


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
    added/removed; ``detail`` is a short note (local label, new hashes, build tags, the marker
    of an entry of a name with several entries); ``flagged`` marks what should not happen
    without a reason; ``hidden`` marks metadata-only churn.
    """
    kind: str
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
    kind: str
    old: str | None
    new: str | None
    note: str | None = None
    hidden: bool = False


@dataclass(frozen=True, slots=True)
class LockDiff:
    """The changes from one lock to another.

    ``status`` is ``changed``, or ``added`` / ``removed`` when one side has no lockfile (``--git``);
    counts are numbers of entries (every ``[[packages]]`` / ``[[package]]`` entry);
    ``index_names`` maps index URLs to names for display; ``index_moves`` are the moves said once.
    """
    old_label: str
    new_label: str
    status: str
    old_count: int
    new_count: int
    packages: tuple[PackageChange, ...]
    fields: tuple[FieldChange, ...]
    index_names: Mapping[str, str]
    index_moves: tuple[IndexMove, ...] = ()

    def visible_packages(self, show_all: bool = False) -> tuple[PackageChange, ...]:
        """Package changes to show: all with ``show_all``, else those not hidden."""
        return tuple(c for c in self.packages if show_all or not c.hidden)

    def visible_fields(self, show_all: bool = False) -> tuple[FieldChange, ...]:
        """Lock-level changes to show: all with ``show_all``, else those not hidden."""
        return tuple(c for c in self.fields if show_all or not c.hidden)

    def has_changes(self, show_all: bool = False) -> bool:
        """True when something would be shown (what ``--exit-code`` tests)."""
        return (self.status != "changed" or bool(self.index_moves)
                or bool(self.visible_packages(show_all)) or bool(self.visible_fields(show_all)))

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


def diff_locks(old: Lock | None, new: Lock | None, *,
               names: Mapping[str, str] | None = None) -> LockDiff:
    """Compare two locks (``None`` for a side without a lockfile, as with ``--git``).

    :param names: more index URL -> name pairs for display (a recipe's indexes).
    :returns: a :class:`LockDiff` with package changes sorted by family, name, then versions;
        index moves by size; lock-level changes in a fixed section order.
    """
    present = [x for x in (old, new) if x is not None]
    shown = index_names(*present, extra=names)
    if old is None or new is None:
        only = present[0]
        return LockDiff(only.label if old else "(none)", only.label if new else "(none)",
                        "added" if old is None else "removed",
                        0 if old is None else len(only.packages),
                        0 if new is None else len(only.packages), (), (), shown)
    changes, moves = _package_changes(old.packages.values(), new.packages.values())
    changes.sort(key=lambda c: (FAMILIES.index(c.family), c.name, c.old_name or "",
                                c.old_version or "", c.new_version or "", c.old_marker or "",
                                c.new_marker or ""))
    fields = (*_header_changes(old, new), *_envforge_changes(old.envforge, new.envforge))
    return LockDiff(old.label, new.label, "changed", len(old.packages), len(new.packages),
                    tuple(changes), tuple(fields), shown, moves)


def _by_name(entries: Iterable[LockedPackage]) -> dict[str, list[LockedPackage]]:
    out: dict[str, list[LockedPackage]] = {}
    for p in entries:
        out.setdefault(p.name, []).append(p)
    return out


def _public(version: str | None) -> str:
    return (version or "").partition("+")[0]


def _pair_cost(a: LockedPackage, b: LockedPackage) -> int:
    """How much pairing ``a`` with ``b`` changes: marker 16, public version 8, source 4, local
    label 2, files 1 (a marker kept outweighs everything else; see :func:`pair_entries`)."""
    cost = 16 if a.marker != b.marker else 0
    if a.version != b.version:
        cost += 8 if _public(a.version) != _public(b.version) else 2
    if a.source != b.source:
        cost += 4
    if a.artifacts != b.artifacts:
        cost += 1
    return cost


def pair_entries(old: Sequence[LockedPackage], new: Sequence[LockedPackage]
                 ) -> tuple[list[tuple[LockedPackage, LockedPackage]], list[LockedPackage],
                            list[LockedPackage]]:
    """Pair the entries of one name across two locks: ``(pairs, old left over, new left over)``.

    ``min(len(old), len(new))`` pairs are made, choosing the assignment with the lowest total
    :func:`_pair_cost` (ties: the first in entry order). Up to 5,040 candidate assignments are
    tried exhaustively; beyond that (a name with more than seven entries a side) pairs are taken
    greedily by cost, an approximation stated here.
    """
    if len(old) == 1 and len(new) == 1:
        return [(old[0], new[0])], [], []
    if not old or not new:
        return [], list(old), list(new)
    swap = len(old) > len(new)
    short, long_ = (new, old) if swap else (old, new)
    cost = [[_pair_cost(*((b, a) if swap else (a, b))) for b in long_] for a in short]
    k, n = len(short), len(long_)
    chosen: tuple[int, ...]
    if _permutations(n, k) <= _EXHAUSTIVE:
        chosen = min(itertools.permutations(range(n), k),
                     key=lambda perm: sum(cost[i][j] for i, j in enumerate(perm)))
    else:
        chosen = _greedy(cost)
    pairs = [(short[i], long_[j]) for i, j in enumerate(chosen)]
    if swap:
        pairs = [(b, a) for a, b in pairs]
    used = set(chosen)
    rest = [p for j, p in enumerate(long_) if j not in used]
    return pairs, (rest if swap else []), ([] if swap else rest)


def _permutations(n: int, k: int) -> int:
    out = 1
    for i in range(n - k + 1, n + 1):
        out *= i
    return out


def _greedy(cost: Sequence[Sequence[int]]) -> tuple[int, ...]:
    cells = sorted((c, i, j) for i, row in enumerate(cost) for j, c in enumerate(row))
    chosen: dict[int, int] = {}
    taken: set[int] = set()
    for _, i, j in cells:
        if i not in chosen and j not in taken:
            chosen[i] = j
            taken.add(j)
    return tuple(chosen[i] for i in range(len(cost)))


def _package_changes(old: Iterable[LockedPackage], new: Iterable[LockedPackage]
                     ) -> tuple[list[PackageChange], tuple[IndexMove, ...]]:
    olds, news = _by_name(old), _by_name(new)
    pairs: list[tuple[LockedPackage, LockedPackage, bool]] = []
    removed: list[LockedPackage] = []
    added: list[LockedPackage] = []
    for name in sorted(olds.keys() | news.keys()):
        a_list, b_list = olds.get(name, []), news.get(name, [])
        several = len(a_list) > 1 or len(b_list) > 1
        made, gone, came = pair_entries(a_list, b_list)
        pairs.extend((x, y, several) for x, y in made)
        removed.extend(gone)
        added.extend(came)
    moves = _index_moves(pairs)
    moved = {(m.old, m.new) for m in moves}
    out: list[PackageChange] = []
    replaced = _cuda_pairs(removed, added)
    for x, y in replaced:
        out.append(_replaced(x, y))
    paired = {id(p) for pair in replaced for p in pair}
    for p in removed:
        if id(p) not in paired:
            out.append(PackageChange("removed", family_of(p.name), p.name, None, p.version, None,
                                     old_source=p.source, old_marker=p.marker))
    for p in added:
        if id(p) not in paired:
            out.append(PackageChange("added", family_of(p.name), None, p.name, None, p.version,
                                     new_source=p.source, new_marker=p.marker))
    for x, y, several in pairs:
        change = _compare(x, y, several, moved)
        if change is not None:
            out.append(change)
    return out, moves


def _location(a: LockedPackage, b: LockedPackage) -> tuple[str, str] | None:
    """(old, new) where the files moved: the sources when they differ and both are index URLs
    or URL folders, else the folders of the first file of the same name and hashes whose URL
    changed. ``None`` when nothing moved."""
    if a.source != b.source:
        if _is_url(a.source) and _is_url(b.source):
            return a.source, b.source
        return None
    by_name = {f.filename: f for f in b.artifacts}
    for f in a.artifacts:
        g = by_name.get(f.filename)
        if g is not None and f.url != g.url and f.hashes == g.hashes and f.url and g.url:
            return f.url.rsplit("/", 1)[0], g.url.rsplit("/", 1)[0]
    return None


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://", "file://"))


def _index_moves(pairs: Sequence[tuple[LockedPackage, LockedPackage, bool]]
                 ) -> tuple[IndexMove, ...]:
    groups: dict[tuple[str, str], list[str]] = {}
    for a, b, _ in pairs:
        where = _location(a, b)
        if where is not None:
            groups.setdefault(where, []).append(b.name)
    moves = [IndexMove(old, new, tuple(sorted(names)))
             for (old, new), names in groups.items() if len(names) > 1]
    return tuple(sorted(moves, key=lambda m: (-len(m.packages), m.old, m.new)))


def _cuda_pairs(removed: Sequence[LockedPackage], added: Sequence[LockedPackage]
                ) -> list[tuple[LockedPackage, LockedPackage]]:
    """(removed, added) entries whose names are equal once a ``-cuNN`` suffix is dropped (one
    entry each side for that stem, names different, at least one suffixed)."""
    def stems(entries: Iterable[LockedPackage]) -> dict[str, list[LockedPackage]]:
        out: dict[str, list[LockedPackage]] = {}
        for p in entries:
            out.setdefault(CUDA_SUFFIX.sub("", p.name), []).append(p)
        return out

    old_stems, new_stems = stems(removed), stems(added)
    pairs = []
    for stem, olds in old_stems.items():
        news = new_stems.get(stem, [])
        if len(olds) == 1 and len(news) == 1 and olds[0].name != news[0].name and (
                CUDA_SUFFIX.search(olds[0].name) or CUDA_SUFFIX.search(news[0].name)):
            pairs.append((olds[0], news[0]))
    return pairs


def _cuda_label(name: str) -> str:
    match = CUDA_SUFFIX.search(name)
    return f"-cu{match.group(1)}" if match else "unsuffixed"


def _replaced(old: LockedPackage, new: LockedPackage) -> PackageChange:
    detail = f"{_cuda_label(old.name)} -> {_cuda_label(new.name)}"
    moved = old.source != new.source
    return PackageChange("replaced", family_of(new.name), old.name, new.name, old.version,
                         new.version, old_source=old.source if moved else None,
                         new_source=new.source if moved else None, old_marker=old.marker,
                         new_marker=new.marker, marker_changed=_markers_differ(old, new),
                         coverage=_coverage_change(old, new), detail=detail)


def _compare(old: LockedPackage, new: LockedPackage, several: bool,
             moved: set[tuple[str, str]]) -> PackageChange | None:
    """The change of one pair, or ``None`` when nothing but an index move (said once) changed."""
    if old == new:
        return None
    where = _location(old, new)
    in_move = where is not None and where in moved
    source_changed = old.source != new.source and not in_move
    marker_changed = _markers_differ(old, new)
    deps = _edge_change(old.dependencies, new.dependencies)
    kind, level, detail = _version_change(old.version, new.version)
    coverage: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    flagged = hidden = False
    if kind is not None:
        coverage = _coverage_change(old, new)
    else:
        kind, detail, files, flagged = _file_change(old, new)
        if kind in ("files", "rebuilt", "rehashed"):
            coverage = _coverage_change(old, new)
        elif old.source != new.source and not (_is_url(old.source) and _is_url(new.source)):
            kind, detail = "source", ""
        elif where is not None:
            kind, detail = (None if in_move else "moved"), ""
        if kind is None or kind == "metadata":
            if marker_changed or deps:
                kind, detail = ("marker" if marker_changed else "dependencies"), ""
            elif kind is None or in_move:
                return None
            else:
                hidden = True
    if several and not marker_changed and old.marker:
        detail = f"{detail}; where {old.marker}" if detail else f"where {old.marker}"
    shown = (where if where is not None and not in_move
             else (old.source, new.source) if source_changed else (None, None))
    return PackageChange(
        kind, family_of(new.name), old.name, new.name, old.version, new.version, level=level,
        old_source=shown[0], new_source=shown[1],
        old_marker=old.marker, new_marker=new.marker, marker_changed=marker_changed,
        coverage=coverage, files=files, dependencies=deps, detail=detail, flagged=flagged,
        hidden=hidden)


def _markers_differ(a: LockedPackage, b: LockedPackage) -> bool:
    """True when the markers differ once parsed by ``packaging.markers`` (spacing and quotes
    alone are no change)."""
    if a.marker == b.marker:
        return False
    if a.marker is None or b.marker is None:
        return True

    try:
        return str(Marker(a.marker)) != str(Marker(b.marker))
    except InvalidMarker:
        return True


def _edge_change(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
    if old == new:
        return ()
    a, b = set(old), set(new)
    return tuple([f"+{e}" for e in sorted(b - a)] + [f"-{e}" for e in sorted(a - b)])


def _version_change(old: str | None, new: str | None) -> tuple[str | None, str | None, str]:
    """(kind, level, detail) for two versions; kind None when they are equal."""
    if old == new:
        return None, None, ""

    try:
        a, b = Version(old or "0"), Version(new or "0")
    except InvalidVersion:
        return "upgraded", None, "not PEP 440 versions"
    local = "" if a.local == b.local else f"{_local(a.local)} -> {_local(b.local)}"
    if a.public == b.public and a.local != b.local:
        return "local", None, local
    local = f"local label {local}" if local else ""
    if a == b:
        return None, None, ""
    return ("upgraded" if b > a else "downgraded"), _level(a, b), local


def _local(label: str | None) -> str:
    return f"+{label}" if label else "no label"


def _level(a: Any, b: Any) -> str:
    ra, rb = a.release + (0, 0, 0), b.release + (0, 0, 0)
    if a.epoch != b.epoch or ra[0] != rb[0]:
        return "major"
    if ra[1] != rb[1]:
        return "minor"
    if ra[2:] != rb[2:]:
        return "patch"
    for attr in ("pre", "post", "dev"):
        if getattr(a, attr) != getattr(b, attr):
            return attr
    return "patch"


def _wheel_identity(f: Artifact) -> tuple[str, str]:
    """(identity without the build tag, build tag) of a file: a wheel's sorted tags, or the file
    name of anything else (build tag ``""``)."""
    if not f.filename.endswith(".whl"):
        return f.filename, ""

    try:
        _, _, build, tags = parse_wheel_filename(f.filename)
    except InvalidWheelFilename:
        return f.filename, ""
    text = "".join(str(part) for part in build) if build else "none"
    return "wheel " + ".".join(sorted(str(t) for t in tags)), text


def _file_change(old: LockedPackage, new: LockedPackage
                 ) -> tuple[str | None, str, tuple[str, ...], bool]:
    """(kind, detail, files, flagged) for two entries of the same version: rehashed, rebuilt,
    files, metadata or ``None`` (same files, maybe at other URLs)."""
    if len(old.artifacts) == len(new.artifacts) and all(
            x.filename == y.filename and x.hashes == y.hashes
            for x, y in zip(old.artifacts, new.artifacts)):  # same files (the common case)
        for x, y in zip(old.artifacts, new.artifacts):
            if (x.size, x.upload_time) != (y.size, y.upload_time):
                return "metadata", _meta_what(x, y), (), False
        return None, "", (), False
    a = {f.filename: f for f in old.artifacts}
    b = {f.filename: f for f in new.artifacts}
    rehashed = sorted(n for n in a.keys() & b.keys() if a[n].hashes != b[n].hashes)
    if rehashed:
        more = f" (+{len(rehashed) - 1} more)" if len(rehashed) > 1 else ""
        return "rehashed", f"same version, new hashes: {rehashed[0]}{more}", (), True
    gone, came = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    if gone or came:
        ids_a = {_wheel_identity(a[n])[0]: a[n] for n in gone}
        ids_b = {_wheel_identity(b[n])[0]: b[n] for n in came}
        rebuilt = sorted(ids_a.keys() & ids_b.keys())
        files = tuple([f"+{n}" for n in came if _wheel_identity(b[n])[0] not in ids_a]
                      + [f"-{n}" for n in gone if _wheel_identity(a[n])[0] not in ids_b])
        if rebuilt:
            builds = sorted({(_wheel_identity(ids_a[i])[1], _wheel_identity(ids_b[i])[1])
                             for i in rebuilt})
            tags = ", ".join(f"{x} -> {y}" for x, y in builds)
            word = "file" if len(rebuilt) == 1 else "files"
            return "rebuilt", f"{len(rebuilt)} {word} rebuilt, build tag {tags}", files, False
        return "files", "", files, False
    meta = [n for n in a if (a[n].size, a[n].upload_time) != (b[n].size, b[n].upload_time)]
    if meta:
        return "metadata", _meta_what(a[meta[0]], b[meta[0]]), (), False
    return None, "", (), False


def _meta_what(a: Any, b: Any) -> str:
    fields = [n for n in ("upload_time", "size") if getattr(a, n) != getattr(b, n)]
    return " and ".join(f.replace("_", "-") for f in fields) + " of identical files"


_ARCH = re.compile(r"^(manylinux|musllinux|macosx)_\d+_\d+_(.+)$|^(manylinux\d+|linux)_(.+)$")
_OS = {"manylinux": "linux", "musllinux": "musllinux", "macosx": "macos"}


def _platform(tag: str) -> str:
    """A wheel platform tag as ``os arch``: ``manylinux_2_28_aarch64`` -> ``linux aarch64``,
    ``macosx_11_0_arm64`` -> ``macos arm64``, ``win_amd64`` -> ``win amd64``."""
    match = _ARCH.match(tag)
    if match and match.group(1):
        return f"{_OS[match.group(1)]} {match.group(2)}"
    if match:
        return f"linux {match.group(4)}"
    if tag.startswith("win_"):
        return "win " + tag[4:]
    return tag


def wheel_coverage(p: LockedPackage) -> frozenset[str]:
    """What an entry's files cover: platforms (``linux x86_64``, ``win amd64``, ``any``...),
    Python tags (``cp312``, ``cp39-abi3``, ``py3``) and ``sdist``, from the wheel file names
    (PEP 427 / PEP 425, read by ``packaging.utils.parse_wheel_filename``)."""
    out: set[str] = set()
    for f in p.artifacts:
        if not f.filename.endswith(".whl"):
            out.add("sdist")
            continue
        try:
            tags = parse_wheel_filename(f.filename)[3]
        except InvalidWheelFilename:
            continue
        for t in tags:
            out.add(_platform(t.platform))
            out.add(f"{t.interpreter}-abi3" if t.abi == "abi3" else t.interpreter)
    return frozenset(out)


def coverage_key(item: str) -> tuple[int, str]:
    """Sort key of coverage items: platforms, then Python tags, then ``sdist``."""
    python = bool(re.match(r"^(cp|py|pp|ip|jy|graalpy)\d", item))
    return (2 if item == "sdist" else 1 if python else 0), item


def _coverage_change(old: LockedPackage, new: LockedPackage) -> tuple[str, ...]:
    """Coverage gained (``+``) then lost (``-``): platforms, then Python tags, then sdist."""
    if old.artifacts == new.artifacts:
        return ()
    if {f.filename for f in old.artifacts} == {f.filename for f in new.artifacts}:
        return ()  # coverage is read from the file names alone: same names (e.g. moved files), same coverage
    a, b = wheel_coverage(old), wheel_coverage(new)
    return tuple([f"+{x}" for x in sorted(b - a, key=coverage_key)]
                 + [f"-{x}" for x in sorted(a - b, key=coverage_key)])


def _header_changes(old: Lock, new: Lock) -> Iterator[FieldChange]:
    for key in sorted(old.header.keys() | new.header.keys()):
        a, b = old.header.get(key), new.header.get(key)
        if a != b:
            yield FieldChange("header", key, _kind(a, b), a, b, hidden=key in _HIDDEN_HEADER)
    for key in sorted(old.lists.keys() | new.lists.keys()):
        a_items, b_items = old.lists.get(key, ()), new.lists.get(key, ())
        if a_items == b_items:
            continue
        a_set, b_set = set(a_items), set(b_items)
        for item in sorted(a_set - b_set):
            yield FieldChange("header", key, "removed", item, None)
        for item in sorted(b_set - a_set):
            yield FieldChange("header", key, "added", None, item)
        if a_set == b_set:
            yield FieldChange("header", key, "changed", "order", "order", hidden=True)
    if old.comments != new.comments:
        yield FieldChange("header", "comments", "changed", f"{len(old.comments)} lines",
                          f"{len(new.comments)} lines", hidden=True)


def _kind(a: object, b: object) -> str:
    return "added" if a is None else "removed" if b is None else "changed"


def flatten_envforge(table: Mapping[str, Any]) -> dict[tuple[str, str], str]:
    """``[tool.envforge]`` as ``{(section, subject): text}``, arrays of tables keyed by name or id.

    Sections: ``envforge`` (top-level scalars), ``target``, ``inputs``, ``env``, ``index``,
    ``override``, ``patchset``. Override values are ``"<version>  # <reason>"``.
    """
    out: dict[tuple[str, str], str] = {}
    for key, value in table.items():
        if key in _KEYED_ARRAYS and isinstance(value, list):
            section, ident = _KEYED_ARRAYS[key]
            for entry in value:
                if isinstance(entry, Mapping):
                    out[(section, str(entry.get(ident)))] = _entry_text(section, entry, ident)
        elif isinstance(value, Mapping):
            for sub, item in _flat_items(value, ""):
                out[(key, sub)] = _text(item)
        else:
            out[("envforge", key)] = _text(value)
    return out


def _flat_items(table: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, Any]]:
    for key, value in table.items():
        if isinstance(value, Mapping) and value:
            yield from _flat_items(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _entry_text(section: str, entry: Mapping[str, Any], ident: str) -> str:
    if section == "patchset":
        return str(entry.get("digest"))
    if section == "override":
        reason = entry.get("reason")
        return f"{entry.get('version')}  # {reason}" if reason else str(entry.get("version"))
    rest = {k: v for k, v in entry.items() if k != ident}
    return ", ".join(f"{k}={_text(v)}" for k, v in rest.items())


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}={_text(v)}" for k, v in value.items()) + "}"
    return str(value)


_SECTION_ORDER = ("envforge", "target", "inputs", "env", "index", "override", "patchset")


def _envforge_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[FieldChange]:
    a, b = flatten_envforge(old), flatten_envforge(new)

    def order(key: tuple[str, str]) -> tuple[int, str]:
        section = key[0]
        rank = _SECTION_ORDER.index(section) if section in _SECTION_ORDER else len(_SECTION_ORDER)
        return rank, key[1]

    for key in sorted(a.keys() | b.keys(), key=order):
        va, vb = a.get(key), b.get(key)
        if va == vb:
            continue
        section, subject = key
        if section != "override":
            yield FieldChange(section, subject, _kind(va, vb), va, vb)
            continue
        va, reason_a = _split_reason(va)
        vb, reason_b = _split_reason(vb)
        if va == vb:
            yield FieldChange(section, subject, "reason", reason_a, reason_b)
        else:
            yield FieldChange(section, subject, _kind(va, vb), va, vb, reason_b or reason_a)


def _split_reason(value: str | None) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    version, _, reason = value.partition("  # ")
    return version, reason or None
