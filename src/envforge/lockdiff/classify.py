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
rehashed       same version, a file of the same name with another digest (flagged: an installer or
               cache cannot tell the two files apart)
hashes-removed same version, the same files without their hashes (or with fewer algorithms):
               the lock no longer verifies them (flagged; field case U04)
hashes-added   the reverse: files the lock now verifies by hash
rebuilt        same version, same wheel tags, a new build tag (``six-1.17.0-8-...`` ->
               ``six-1.17.0-1-...``) and so new hashes
files          same version, files added or removed (e.g. a new platform wheel)
source         another source that is not an index (git commit, path, editable checkout), same
               version or a side without one (uv.lock writes no version for editable, virtual
               and directory sources): never an upgrade or downgrade
moved          same version, same files (same hashes), from another index or URL
marker         same version and files, another environment marker (where it installs): markers true
               in the same environments are none (:func:`envforge.lock.markerspace.equivalent`)
dependencies   only the dependency edges changed (uv.lock ``dependencies``)
fields         only other fields of the entry changed (uv.lock ``metadata.requires-dist``, PEP 751
               ``requires-python``...: :attr:`LockedPackage.attrs`)
metadata       only upload times or sizes of identical files changed (hidden by default)
=============  =================================================================================

Every other fact of a pair is kept beside its kind: the marker change (also when the version
changed), the source change, wheel coverage gained or lost (platforms and Python tags read from
the wheel file names with ``packaging.utils.parse_wheel_filename``), files and dependency edges.
A dependency edge that pins an entry (uv.lock's ``version`` and ``source`` on an edge to one of
several same-name entries) follows that entry's pair: the entry's upgrade is its own line, not a
change of every edge to it too. A pylock entry without an ``index`` key (``pip lock``) whose files
are the same files at the same URLs as the other side's is no move (hidden metadata).

An index move is said once: when two or more entries move from the same index (or file URL
folder) A to the same B, the move is one :class:`IndexMove` and those entries carry no source
change of their own; an entry whose only change is that move has no :class:`PackageChange`. Any
other fact many changes share (a marker rewrite, a build tag, a field, a dependency edge) is said
once too (:mod:`envforge.lockdiff.shared`).

Lock-level changes (``FieldChange``) come from the header (``requires-python``; ``created-by``,
``lock-version``, uv's ``revision`` and generator comments are metadata), from top-level arrays
item by item (``resolution-markers``, ``conflicts``, ``manifest.*``, ``environments``...) and
from ``[tool.envforge]`` (docs/architecture.md): top-level keys, ``target``, ``inputs``, ``env``,
``indexes`` by name, ``overrides`` by name (with their reasons), ``patchsets`` by id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from packaging.version import InvalidVersion, Version

from envforge.lock.markerspace import equivalent
from envforge.lock.validcache import recalled_verdict, remember_verdict, verdict_path
from envforge.lockdiff.changes import (
    CUDA_SUFFIX,
    FAMILIES,
    ChangeKind,
    IndexMove,
    LockDiff,
    PackageChange,
    family_of,
    index_names,
)
from envforge.lockdiff.fields import envforge_changes, header_changes
from envforge.lockdiff.model import PYPI, Lock, LockedPackage
from envforge.lockdiff.pairing import by_name, pair_entries
from envforge.lockdiff.shared import share
from envforge.lockdiff.wheels import coverage_change, file_change

__all__ = ["diff_locks"]


def diff_locks(old: Lock | None, new: Lock | None, *, names: Mapping[str, str] | None = None) -> LockDiff:
    """Compare two locks (``None`` for a side without a lockfile, as with ``--git``).

    :param names: more index URL -> name pairs for display (a recipe's indexes).
    :returns: a :class:`LockDiff` with package changes sorted by family, name, then versions;
        index moves by size; lock-level changes in a fixed section order.
    """
    present = [x for x in (old, new) if x is not None]
    shown = index_names(*present, extra=names)
    if old is None or new is None:
        only = present[0]
        return LockDiff(
            only.label if old else "(none)",
            only.label if new else "(none)",
            "added" if old is None else "removed",
            0 if old is None else len(only.packages),
            0 if new is None else len(only.packages),
            (),
            (),
            shown,
            ambiguities=new.ambiguities if new is not None else (),
        )
    changes, moves = _package_changes(old.packages.values(), new.packages.values())
    changes, shared = share(changes)
    changes.sort(
        key=lambda c: (
            FAMILIES.index(c.family),
            c.name,
            c.old_name or "",
            c.old_version or "",
            c.new_version or "",
            c.old_marker or "",
            c.new_marker or "",
        )
    )
    fields = (*header_changes(old, new), *envforge_changes(old.envforge, new.envforge))
    return LockDiff(
        old.label,
        new.label,
        "changed",
        len(old.packages),
        len(new.packages),
        tuple(changes),
        tuple(fields),
        shown,
        moves,
        new.ambiguities,
        shared,
    )


def _package_changes(
    old: Iterable[LockedPackage], new: Iterable[LockedPackage]
) -> tuple[list[PackageChange], tuple[IndexMove, ...]]:
    olds, news = by_name(old), by_name(new)
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
    pins = _pins(pairs)
    out: list[PackageChange] = []
    replaced = _cuda_pairs(removed, added)
    for x, y in replaced:
        out.append(_replaced(x, y))
    paired = {id(p) for pair in replaced for p in pair}
    for p in removed:
        if id(p) not in paired:
            out.append(
                PackageChange(
                    "removed",
                    family_of(p.name),
                    p.name,
                    None,
                    p.version,
                    None,
                    old_source=p.source,
                    old_marker=p.marker,
                )
            )
    for p in added:
        if id(p) not in paired:
            out.append(
                PackageChange(
                    "added", family_of(p.name), None, p.name, None, p.version, new_source=p.source, new_marker=p.marker
                )
            )
    for x, y, several in pairs:
        change = _compare(x, y, several, moved, pins)
        if change is not None:
            out.append(change)
    return out, moves


def _location(a: LockedPackage, b: LockedPackage) -> tuple[str, str] | None:
    """(old, new) where the files moved: the sources when they differ and both are index URLs
    or URL folders, else the folders of the first file of the same name and hashes whose URL
    changed. ``None`` when nothing moved, also when one side names no index and every file is
    at the same URL (:func:`_index_unnamed`). URLs are compared unquoted (``%2B`` is ``+``)."""
    if a.source != b.source:
        if _is_url(a.source) and _is_url(b.source) and not _index_unnamed(a, b):
            return a.source, b.source
        return None
    by_name = {f.filename: f for f in b.artifacts}
    for f in a.artifacts:
        g = by_name.get(f.filename)
        if g is not None and f.url and g.url and f.hashes == g.hashes and unquote(f.url) != unquote(g.url):
            return f.url.rsplit("/", 1)[0], g.url.rsplit("/", 1)[0]
    return None


def _index_unnamed(a: LockedPackage, b: LockedPackage) -> bool:
    """True when one side names no index (a ``pip lock`` pylock) and only the folder of its files
    stands for one, and both have the same files (names, hashes) at the same URLs: the files did
    not move, one lock only names no index. (Files on PyPI's file host stand for PyPI's index:
    another index named on the other side is a move.)"""
    if all(p.index_named or p.source == PYPI for p in (a, b)) or len(a.artifacts) != len(b.artifacts):
        return False
    theirs = {f.filename: f for f in b.artifacts}
    return all(
        (g := theirs.get(f.filename)) is not None
        and f.hashes == g.hashes
        and f.url
        and g.url
        and unquote(f.url) == unquote(g.url)
        for f in a.artifacts
    )


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://", "file://"))


def _index_moves(pairs: Sequence[tuple[LockedPackage, LockedPackage, bool]]) -> tuple[IndexMove, ...]:
    groups: dict[tuple[str, str], list[str]] = {}
    for a, b, _ in pairs:
        where = _location(a, b)
        if where is not None:
            groups.setdefault(where, []).append(b.name)
    moves = [IndexMove(old, new, tuple(sorted(names))) for (old, new), names in groups.items() if len(names) > 1]
    return tuple(sorted(moves, key=lambda m: (-len(m.packages), m.old, m.new)))


def _cuda_pairs(
    removed: Sequence[LockedPackage], added: Sequence[LockedPackage]
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
        if (
            len(olds) == 1
            and len(news) == 1
            and olds[0].name != news[0].name
            and (CUDA_SUFFIX.search(olds[0].name) or CUDA_SUFFIX.search(news[0].name))
        ):
            pairs.append((olds[0], news[0]))
    return pairs


def _cuda_label(name: str) -> str:
    match = CUDA_SUFFIX.search(name)
    return f"-cu{match.group(1)}" if match else "unsuffixed"


def _replaced(old: LockedPackage, new: LockedPackage) -> PackageChange:
    detail = f"{_cuda_label(old.name)} -> {_cuda_label(new.name)}"
    moved = old.source != new.source
    return PackageChange(
        "replaced",
        family_of(new.name),
        old.name,
        new.name,
        old.version,
        new.version,
        old_source=old.source if moved else None,
        new_source=new.source if moved else None,
        old_marker=old.marker,
        new_marker=new.marker,
        marker_changed=_markers_differ(old, new),
        coverage=coverage_change(old, new),
        detail=detail,
    )


def _compare(
    old: LockedPackage,
    new: LockedPackage,
    several: bool,
    moved: set[tuple[str, str]],
    pins: Mapping[tuple[str, str], Sequence[tuple[str, str, str]]],
) -> PackageChange | None:
    """The change of one pair, or ``None`` when nothing but an index move (said once) changed."""
    if old == new:
        return None
    where = _location(old, new)
    in_move = where is not None and where in moved
    unnamed = old.source != new.source and _index_unnamed(old, new)
    source_changed = old.source != new.source and not in_move and not unnamed
    marker_changed = _markers_differ(old, new)
    deps = _edge_change(old.dependencies, new.dependencies, pins)
    attributes = attr_change(old.attrs, new.attrs)
    direct = old.source != new.source and not (_is_url(old.source) and _is_url(new.source))
    no_version = (old.version is None) != (new.version is None)
    kind, level, detail = (None, None, "") if no_version else _version_change(old.version, new.version)
    coverage: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    flagged = hidden = False
    if kind is not None:
        coverage = coverage_change(old, new)
    else:
        kind, detail, files, flagged = file_change(old, new)
        if direct:  # a direct source: its files follow it (an editable checkout has none)
            kind, detail, flagged = "source", "", False
            coverage = coverage_change(old, new)
        elif kind in ("files", "rebuilt", "rehashed", "hashes-removed", "hashes-added"):
            coverage = coverage_change(old, new)
        elif where is not None:
            kind, detail = (None if in_move else "moved"), ""
        elif unnamed and kind is None:
            kind, detail = "metadata", "index named on one side only, same files at the same URLs"
        if kind is None or kind == "metadata":
            if marker_changed or deps or attributes:
                kind, detail = ("marker" if marker_changed else "dependencies" if deps else "fields"), ""
            elif kind is None or in_move:
                return None
            else:
                hidden = True
    if several and not marker_changed and old.marker and not _same_space(old.marker, None):  # says which entry
        detail = f"{detail}; where {old.marker}" if detail else f"where {old.marker}"
    shown = where if where is not None and not in_move else (old.source, new.source) if source_changed else (None, None)
    return PackageChange(
        kind,
        family_of(new.name),
        old.name,
        new.name,
        old.version,
        new.version,
        level=level,
        old_source=shown[0],
        new_source=shown[1],
        old_marker=old.marker,
        new_marker=new.marker,
        marker_changed=marker_changed,
        coverage=coverage,
        files=files,
        dependencies=deps,
        attributes=attributes,
        detail=detail,
        flagged=flagged,
        hidden=hidden,
    )


def _markers_differ(a: LockedPackage, b: LockedPackage) -> bool:
    """True when the markers differ once parsed by ``packaging.markers`` (spacing and quotes
    alone are no change) and are true in different environments (:func:`_same_space`)."""
    return a.marker != b.marker and not _same_space(a.marker, b.marker)


@lru_cache(maxsize=1024)
def _same_space(a: str | None, b: str | None) -> bool:
    """Two markers with one text once parsed, or true in the same environments
    (:func:`envforge.lock.markerspace.equivalent`: a uv.lock entry's ``resolution-markers`` that
    join every fork are no marker; forks split another way over the same environments are the
    same marker). Cached in the process (a relock rewrites many entries' markers the same way) and
    on disk (:func:`envforge.lock.validcache.verdict_path`: a warm diff parses no marker)."""
    where = verdict_path(a, b)
    known = recalled_verdict(where)
    if known is not None:
        return known
    from packaging.markers import InvalidMarker, Marker  # lazy: only where two markers differ

    try:
        same = (a is not None and b is not None and str(Marker(a)) == str(Marker(b))) or equivalent(a, b)
    except InvalidMarker:
        same = False
    remember_verdict(where, same)
    return same


def attr_change(old: tuple[tuple[str, str], ...], new: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """Other fields that differ (:attr:`LockedPackage.attrs`): ``key 'a' -> 'b'`` where the key has
    one value a side, else ``+key value`` / ``-key value`` per item (array items as a set)."""
    if old == new:
        return ()
    a: dict[str, set[str]] = {}
    b: dict[str, set[str]] = {}
    for key, value in old:
        a.setdefault(key, set()).add(value)
    for key, value in new:
        b.setdefault(key, set()).add(value)
    out: list[str] = []
    for key in sorted(a.keys() | b.keys()):
        x, y = a.get(key, set()), b.get(key, set())
        if x == y:
            continue
        if len(x) == 1 and len(y) == 1:
            out.append(f"{key} {next(iter(x))!r} -> {next(iter(y))!r}")
            continue
        out += [f"+{key} {v}" for v in sorted(y - x)] + [f"-{key} {v}" for v in sorted(x - y)]
    return tuple(out)


_PINNED_EDGE = re.compile(
    r"^((?:\[[^\]]*\] |\([^)]*\) )?)([^\s\[]+)((?:\[[^\]]*\])?) ==(\S+)(?: @ (\S+)(?= |$))?(.*)$", re.S
)


def _pins(
    pairs: Sequence[tuple[LockedPackage, LockedPackage, bool]],
) -> dict[tuple[str, str], list[tuple[str, str, str]]]:
    """``{(name, old version): [(old source, new version, new source)]}`` of every pair whose
    version or source changed: where an edge that pins the old entry points now."""
    out: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for a, b, _ in pairs:
        if a.version and b.version and (a.version, a.source) != (b.version, b.source):
            out.setdefault((a.name, a.version), []).append((a.source, b.version, b.source))
    return out


def _follow(edge: str, pins: Mapping[tuple[str, str], Sequence[tuple[str, str, str]]]) -> str:
    """An old dependency edge that pins an entry (uv.lock writes ``version`` and ``source`` on
    an edge to one of several same-name entries) rewritten to pin the entry that entry is paired
    with: the entry's own change is said on its own line, so an edge that follows it is no change.
    An edge to an entry left unpaired, or pinned by another source, is kept as it is."""
    match = _PINNED_EDGE.match(edge) if pins else None
    if match is None:
        return edge
    group, name, extras, version, source, rest = match.groups()
    found = [(s, v, t) for s, v, t in pins.get((name, version), ()) if source is None or s == source]
    if len(found) != 1:
        return edge
    _, new_version, new_source = found[0]
    where = f" @ {new_source}" if source is not None else ""
    return f"{group}{name}{extras} =={new_version}{where}{rest}"


def _edge_change(
    old: tuple[str, ...], new: tuple[str, ...], pins: Mapping[tuple[str, str], Sequence[tuple[str, str, str]]]
) -> tuple[str, ...]:
    """Edges added (``+edge``) and removed (``-edge``, as the old lock wrote it); an old edge
    that follows its paired entry (:func:`_follow`) is compared as followed."""
    if old == new:
        return ()
    followed = {_follow(e, pins): e for e in old}
    came = set(new)
    return tuple(
        [f"+{e}" for e in sorted(came - followed.keys())]
        + [f"-{e}" for e in sorted(followed[f] for f in followed.keys() - came)]
    )


def _version_change(old: str | None, new: str | None) -> tuple[ChangeKind | None, str | None, str]:
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
    # a != b with equal releases and local labels (callers return before): pre, post or dev differs
    return next(attr for attr in ("pre", "post", "dev") if getattr(a, attr) != getattr(b, attr))
