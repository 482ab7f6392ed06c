"""Which declared conflict items each ``uv.lock`` entry needs: the activations of :mod:`envforge.lock.markerspace`.

uv's lock for a project with conflicting extras or groups (``[tool.uv] conflicts``, e.g. the ``cpu`` and
``gpu`` extras of uv's PyTorch guide, torch from two indexes) has two entries of one name whose
``resolution-markers`` can both be true (uv 0.13 writes them without the extra markers): what keeps them
apart is the top-level ``conflicts`` array and the dependency graph. uv installs a lock by walking the
graph from the workspace members, following an edge when its marker is true for the environment and
for the enabled extras and groups; an edge of ``optional-dependencies.X`` needs extra ``X`` of its
package, one of ``dev-dependencies.G`` group ``G``; in edge markers uv encodes a conflict item as
``extra == 'extra-{len(package)}-{package}-{extra}'`` (``group-...`` for a group; uv's
``crates/uv-resolver/src/universal_marker.rs``, ``encode_package_extra``), read as "that item is enabled"
(several can be: uv treats them as a set).

:func:`activations` walks the graph the same way, keeping only the conflict items: per entry, the
alternatives of item sets that lead to it (an entry reached only through ``proj[cpu]`` needs
``{extra-4-proj-cpu}``). Environment markers of edges are not followed (the entries'
``resolution-markers`` carry those), so an activation may be wider than uv's, never narrower: an entry
is never taken for exclusive where uv could install both.

Items are named by their encoding: ``extra-4-proj-cpu``, ``group-4-proj-dev``, and ``project-4-proj`` for
a whole package (``{ package = "proj" }``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.markers import Marker

from envforge.lock.markerspace import ALWAYS, Activation, satisfiable, valid_selection

__all__ = ["MAX_ALTERNATIVES", "activations", "conflict_sets", "item_name"]

MAX_ALTERNATIVES = 64  # per graph node; past it the node counts as always active (wider, never narrower)
_MAX_EDGE_ITEMS = 4  # conflict items one edge marker may name and still be decided (2**4 subsets)
_ENCODED = re.compile(r'extra (?:==|!=) "((?:extra|group|project)-\d+-[^"]+)"')


def item_name(item: Mapping[str, Any]) -> str | None:
    """The encoded name of one item of uv.lock's ``conflicts`` (``{ package = "proj", extra = "cpu" }``
    -> ``extra-4-proj-cpu``); ``None`` for an item without a string ``package``."""
    package = item.get("package")
    if not isinstance(package, str):
        return None
    for kind in ("extra", "group"):
        if isinstance(item.get(kind), str):
            return f"{kind}-{len(package)}-{package}-{item[kind]}"
    return f"project-{len(package)}-{package}"


def conflict_sets(doc: Mapping[str, Any]) -> tuple[frozenset[str], ...]:
    """uv.lock's top-level ``conflicts`` as sets of encoded item names (a shape-checked document)."""
    out = []
    for group in doc.get("conflicts") or ():
        names = frozenset(n for n in (item_name(x) for x in group) if n is not None)
        if len(names) > 1:
            out.append(names)
    return tuple(out)


Node = tuple[int, str | None]  # (package index, extra or None)


def activations(doc: Mapping[str, Any], conflicts: Sequence[frozenset[str]]) -> tuple[Activation, ...]:
    """One :data:`~envforge.lock.markerspace.Activation` per ``[[package]]`` of a shape-checked uv.lock,
    in file order; every entry :data:`~envforge.lock.markerspace.ALWAYS` when ``conflicts`` is empty.

    Roots (workspace members: ``manifest.members``, and entries no edge leads to) are active with
    nothing enabled (or with their ``project-`` item, where one is declared); each of their extras and
    groups with its own item where that is declared, else always. An edge adds its table's item and
    the items its marker needs; its target entries are those of its ``name`` (and ``version`` /
    ``source`` where given). An entry nothing leads to counts as always active.
    """
    packages = list(doc.get("package") or ())
    if not conflicts:
        return tuple(ALWAYS for _ in packages)
    declared = frozenset().union(*conflicts)
    edges = list(_edges(packages, declared, conflicts))
    targeted = {t for _, _, targets in edges for t, _ in targets}
    members = set((doc.get("manifest") or {}).get("members") or ())
    act: dict[Node, set[frozenset[str]]] = {}
    for i, p in enumerate(packages):
        if i in targeted and p["name"] not in members:
            continue
        own = f"project-{len(p['name'])}-{p['name']}"
        act[(i, None)] = {frozenset({own}) if own in declared else frozenset()}
        for extra in p.get("optional-dependencies") or {}:
            item = f"extra-{len(p['name'])}-{p['name']}-{extra}"
            act[(i, extra)] = {frozenset({item}) if item in declared else frozenset()}
    changed = True
    while changed:  # monotone over finitely many minimal item sets: ends
        changed = False
        for src, cond, targets in edges:
            if src not in act:
                continue
            new = {a | c for a in act[src] for c in cond if valid_selection(a | c, conflicts)}
            for target in (n for t, extras in targets for n in ((t, None), *((t, e) for e in extras))):
                merged = _minimal(act.get(target, set()) | new)
                if merged != act.get(target):
                    act[target] = merged
                    changed = True
    return tuple(frozenset(act.get((i, None)) or ALWAYS) for i in range(len(packages)))


def _minimal(alternatives: set[frozenset[str]]) -> set[frozenset[str]]:
    kept = {a for a in alternatives if not any(b < a for b in alternatives)}
    return kept if len(kept) <= MAX_ALTERNATIVES else {frozenset()}


def _edges(packages: Sequence[Mapping[str, Any]], declared: frozenset[str], conflicts: Sequence[frozenset[str]],
           ) -> list[tuple[Node, frozenset[frozenset[str]], list[tuple[int, tuple[str, ...]]]]]:
    """(source node, item alternatives the edge needs, [(target package, extras it enables)])."""
    by_name: dict[str, list[int]] = {}
    for i, p in enumerate(packages):
        by_name.setdefault(p["name"], []).append(i)
    out = []
    for i, p in enumerate(packages):
        name = p["name"]
        tables: list[tuple[Node, str | None, Sequence[Any]]] = [((i, None), None, p.get("dependencies") or ())]
        for extra, deps in (p.get("optional-dependencies") or {}).items():
            tables.append(((i, extra), None, deps))
        for group, deps in (p.get("dev-dependencies") or {}).items():
            tables.append(((i, None), f"group-{len(name)}-{name}-{group}", deps))
        for src, item, deps in tables:
            base = frozenset({item}) if item in declared else frozenset()
            for dep in deps:
                cond = frozenset(base | c for c in _marker_items(dep.get("marker"), conflicts)
                                 if valid_selection(base | c, conflicts))
                targets = [(t, tuple(dep.get("extra") or ())) for t in by_name.get(dep["name"], ())
                           if _matches(packages[t], dep)]
                if cond and targets:
                    out.append((src, cond, targets))
    return out


def _matches(package: Mapping[str, Any], dep: Mapping[str, Any]) -> bool:
    if "version" in dep and package.get("version") != dep["version"]:
        return False
    return "source" not in dep or package.get("source") == dep["source"]


def _marker_items(marker: Any, conflicts: Sequence[frozenset[str]]) -> tuple[frozenset[str], ...]:
    """The sets of encoded items with which ``marker`` can be true (exactly those enabled among the
    ones it names); ``(frozenset(),)`` for no marker, one that names none, or one naming more than
    :data:`_MAX_EDGE_ITEMS` (wider, never narrower)."""
    if not isinstance(marker, str):
        return (frozenset(),)
    text = str(Marker(marker))
    named = sorted(set(_ENCODED.findall(text)))
    if not named or len(named) > _MAX_EDGE_ITEMS:
        return (frozenset(),)
    as_set = _ENCODED.sub(lambda m: f'"{m.group(1)}" {"in" if "==" in m.group(0) else "not in"} extras', text)
    subsets = [frozenset(n for k, n in enumerate(named) if mask >> k & 1) for mask in range(1 << len(named))]
    return tuple(s for s in subsets if valid_selection(s, conflicts) and satisfiable([as_set], {"extras": s}))
