"""Changes many entries share, said once: a marker rewrite, a rebuild with one build tag, a field
change (``requires-python``), a dependency edge or an edge's marker rewrite, wheel coverage.

A fact of a :class:`PackageChange` that :data:`SHARED_MIN` or more shown changes carry becomes one
:class:`SharedChange` naming them, and is taken out of those changes (as an index move is); a change
left with nothing of its own (a ``marker`` change whose marker rewrite is shared) is dropped, one
with more (a version change) keeps its line with what else changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from envforge.lockdiff.changes import PackageChange, SharedChange

__all__ = ["SHARED_MIN", "share"]

SHARED_MIN = 3  # a fact this many shown changes carry is said once
_BUILD = re.compile(r"^\d+ files? rebuilt, (build tag .+?)(?:; (where .*))?$")
_EDGE = re.compile(r"^([+-])(.*?)(?: ; (.*))?$")
_KEEPS_LINE = frozenset(
    {
        "added",
        "removed",
        "replaced",
        "upgraded",
        "downgraded",
        "local",
        "rehashed",
        "hashes-removed",
        "hashes-added",
        "source",
        "moved",
    }
)  # kinds that are a change of their own


@dataclass(frozen=True, slots=True)
class _Fact:
    what: str
    old: str | None
    new: str | None


def _edge_rewrites(deps: Sequence[str]) -> dict[tuple[str, str], tuple[str, str]]:
    """``{(removed, added): (old marker, new marker)}``: an edge whose marker alone changed."""
    gone: dict[str, list[tuple[str, str]]] = {}
    came: dict[str, list[tuple[str, str]]] = {}
    for item in deps:
        match = _EDGE.match(item)
        if match is None:
            continue
        sign, head, marker = match.groups()
        (came if sign == "+" else gone).setdefault(head, []).append((item, marker or ""))
    out = {}
    for head in gone.keys() & came.keys():
        if len(gone[head]) == 1 and len(came[head]) == 1:
            (x, m1), (y, m2) = gone[head][0], came[head][0]
            out[(x, y)] = (m1, m2)
    return out


def _facts(c: PackageChange) -> Iterator[_Fact]:
    if c.kind not in ("added", "removed", "replaced") and c.marker_changed:
        yield _Fact("marker", c.old_marker, c.new_marker)
    if c.kind == "rebuilt":
        match = _BUILD.match(c.detail)
        if match:
            yield _Fact("rebuilt", None, match.group(1))
    for item in c.attributes:
        yield _Fact("field", None, item)
    rewrites = _edge_rewrites(c.dependencies)
    rewritten = {e for pair in rewrites for e in pair}
    for m1, m2 in sorted(set(rewrites.values())):
        yield _Fact("dependency-marker", m1 or None, m2 or None)
    for item in c.dependencies:
        if item not in rewritten:
            yield _Fact("dependency", None, item)
    for item in c.coverage:
        yield _Fact("coverage", None, item)


def _without(c: PackageChange, shared: set[_Fact]) -> PackageChange | None:
    """``c`` without its shared facts; ``None`` when nothing of its own is left."""
    facts = set(_facts(c))
    mine = facts - shared
    if mine == facts:
        return c
    detail = c.detail
    if _Fact("rebuilt", None, (_BUILD.match(detail) or [None, None])[1]) in shared:
        detail = _BUILD.match(detail).group(2) or ""  # type: ignore[union-attr]
    rewrites = _edge_rewrites(c.dependencies)
    gone_edges = {
        e
        for pair, (m1, m2) in rewrites.items()
        if _Fact("dependency-marker", m1 or None, m2 or None) in shared
        for e in pair
    }
    deps = tuple(d for d in c.dependencies if d not in gone_edges and _Fact("dependency", None, d) not in shared)
    coverage = tuple(x for x in c.coverage if _Fact("coverage", None, x) not in shared)
    files = () if c.coverage and not coverage else c.files  # the shared coverage said them
    out = replace(
        c,
        marker_changed=c.marker_changed and _Fact("marker", c.old_marker, c.new_marker) not in shared,
        detail=detail,
        dependencies=deps,
        coverage=coverage,
        files=files,
        attributes=tuple(a for a in c.attributes if _Fact("field", None, a) not in shared),
    )
    if c.kind in _KEEPS_LINE or c.flagged:
        return out
    own = (
        out.marker_changed
        or out.dependencies
        or out.attributes
        or out.coverage
        or out.files
        or out.old_source
        or (out.detail and not out.detail.startswith("where "))
    )
    return out if own else None


def _label(c: PackageChange, twice: set[str]) -> str:
    return f"{c.name} {c.new_version or c.old_version}" if c.name in twice else c.name


def share(changes: Sequence[PackageChange]) -> tuple[list[PackageChange], tuple[SharedChange, ...]]:
    """``(changes without their shared facts, shared changes)``: facts carried by at least
    :data:`SHARED_MIN` shown (not hidden) changes, largest first; hidden changes are kept as they are."""
    carriers: dict[_Fact, list[PackageChange]] = {}
    for c in changes:
        if not c.hidden:
            for fact in set(_facts(c)):
                carriers.setdefault(fact, []).append(c)
    shared = {f for f, cs in carriers.items() if len(cs) >= SHARED_MIN}
    if not shared:
        return list(changes), ()
    counts: dict[str, int] = {}
    for c in changes:
        counts[c.name] = counts.get(c.name, 0) + 1
    twice = {n for n, k in counts.items() if k > 1}
    groups = [SharedChange(f.what, f.old, f.new, tuple(sorted(_label(c, twice) for c in carriers[f]))) for f in shared]
    groups.sort(key=lambda g: (-len(g.packages), g.what, g.old or "", g.new or ""))
    kept = [out for c in changes if (out := (c if c.hidden else _without(c, shared))) is not None]
    return kept, tuple(groups)
