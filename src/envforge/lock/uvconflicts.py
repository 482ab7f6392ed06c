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
alternatives of conditions that lead to it, each the items that must be enabled and those that must
not be (:class:`~envforge.lock.markerspace.Alternative`). An entry reached only through ``proj[cpu]``
needs ``cpu`` on; uv's PyTorch layout also writes *negative* items: the base ``torch`` is reached
through ``extra != 'extra-4-proj-cpu' and extra != 'extra-4-proj-gpu'`` (installed only while no
conflicting extra is enabled), which keeps it apart from ``torch+cpu`` as surely as the conflict set
keeps ``+cpu`` apart from ``+gpu``. Environment markers of edges are not followed (the entries'
``resolution-markers`` carry those), so an activation may be wider than uv's, never narrower: an entry
is never taken for exclusive where uv could install both.

Items are named by their encoding: ``extra-4-proj-cpu``, ``group-4-proj-dev``, and ``project-4-proj`` for
a whole package (``{ package = "proj" }``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from envforge.lock.markerspace import (
    ALWAYS,
    Activation,
    Alternative,
    combine,
    literals,
    parse,
    satisfiable,
    valid_selection,
)

__all__ = ["MAX_ALTERNATIVES", "activations", "conflict_sets", "edge_condition", "item_name"]

MAX_ALTERNATIVES = 64  # per graph node; past it the node counts as always active (wider, never narrower)
_MAX_EDGE_ITEMS = 8  # declared conflict items one edge marker may name and still be decided (2**8 subsets)
_ENCODED = re.compile(r"(?:extra|group|project)-\d+-.+")


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
    the condition its marker puts on the declared items (:func:`edge_condition`, positive and negative);
    its target entries are those of its ``name`` (and ``version`` / ``source`` where given). An entry
    nothing leads to counts as always active. Per node at most :data:`MAX_ALTERNATIVES` alternatives
    are kept (minimal ones: an alternative whose items include another's is dropped); beyond, the
    node counts as always active.
    """
    packages = list(doc.get("package") or ())
    if not conflicts:
        return tuple(ALWAYS for _ in packages)
    declared = frozenset().union(*conflicts)
    edges = list(_edges(packages, declared, conflicts))
    targeted = {t for _, _, targets in edges for t, _ in targets}
    members = set((doc.get("manifest") or {}).get("members") or ())
    act: dict[Node, frozenset[Alternative]] = {}
    for i, p in enumerate(packages):
        if i in targeted and p["name"] not in members:
            continue
        own = f"project-{len(p['name'])}-{p['name']}"
        act[(i, None)] = _only(own, declared)
        for extra in p.get("optional-dependencies") or {}:
            act[(i, extra)] = _only(f"extra-{len(p['name'])}-{p['name']}-{extra}", declared)
    changed = True
    while changed:  # monotone over finitely many minimal alternatives (or the cap): ends
        changed = False
        for src, cond, targets in edges:
            if src not in act:
                continue
            new = {c for c in (combine(a, b, conflicts) for a in act[src] for b in cond) if c is not None}
            for target in (n for t, extras in targets for n in ((t, None), *((t, e) for e in extras))):
                merged = _minimal(act.get(target, frozenset()) | new)
                if merged != act.get(target):
                    act[target] = merged
                    changed = True
    return tuple(act.get((i, None)) or ALWAYS for i in range(len(packages)))


def _only(item: str, declared: frozenset[str]) -> frozenset[Alternative]:
    return frozenset({Alternative(frozenset({item}))}) if item in declared else ALWAYS


def _minimal(alternatives: Iterable[Alternative]) -> frozenset[Alternative]:
    alts = set(alternatives)
    kept = frozenset(a for a in alts if not any(b != a and b.on <= a.on and b.off <= a.off for b in alts))
    return kept if len(kept) <= MAX_ALTERNATIVES else ALWAYS


def _edges(
    packages: Sequence[Mapping[str, Any]], declared: frozenset[str], conflicts: Sequence[frozenset[str]]
) -> list[tuple[Node, frozenset[Alternative], list[tuple[int, tuple[str, ...]]]]]:
    """(source node, the conditions the edge needs, [(target package, extras it enables)])."""
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
            base = _only(item, declared) if item is not None else ALWAYS
            for dep in deps:
                cond = frozenset(
                    c
                    for c in (
                        combine(a, b, conflicts)
                        for a in base
                        for b in edge_condition(dep.get("marker"), declared, conflicts)
                    )
                    if c is not None
                )
                targets = [
                    (t, tuple(dep.get("extra") or ()))
                    for t in by_name.get(dep["name"], ())
                    if _matches(packages[t], dep)
                ]
                if cond and targets:
                    out.append((src, cond, targets))
    return out


def _matches(package: Mapping[str, Any], dep: Mapping[str, Any]) -> bool:
    if "version" in dep and package.get("version") != dep["version"]:
        return False
    return "source" not in dep or package.get("source") == dep["source"]


def edge_condition(
    marker: Any, declared: frozenset[str], conflicts: Sequence[frozenset[str]]
) -> frozenset[Alternative]:
    """The conditions on the ``declared`` conflict items under which an edge ``marker`` can be true:
    for every valid selection of the items it names (at most one per conflict set), enabled ones
    ``on`` and the others ``off``, kept where the marker can then be true (its other variables
    free), and merged where two differ in one item only (``extra == 'A' or extra == 'B'`` with A and
    B in one set: ``{A on, B off}``, ``{B on, A off}``; uv's negative layout ``(A off and B off) or
    (A on and B on)``: ``{A off, B off}``). :data:`~envforge.lock.markerspace.ALWAYS` for no marker,
    one that names no declared item, or one naming more than :data:`_MAX_EDGE_ITEMS` (wider, never
    narrower); empty when no selection makes it true.
    """
    if not isinstance(marker, str):
        return ALWAYS
    parsed = parse(marker)
    named = sorted(v for v in literals([parsed]).get("extras", ()) if v in declared or _ENCODED.fullmatch(v))
    if not named or len(named) > _MAX_EDGE_ITEMS:
        return ALWAYS
    found: set[Alternative] = set()
    for size in range(len(named) + 1):
        for on in map(frozenset, itertools.combinations(named, size)):
            if valid_selection(on, conflicts) and satisfiable([marker], {"extras": on}):
                found.add(Alternative(on, frozenset(named) - on))
    return _merged(found)


def _merged(alternatives: set[Alternative]) -> frozenset[Alternative]:
    """The prime implicants of ``alternatives`` (full assignments of a small truth table): every two
    that differ only in one item's polarity also give the term without that item, until no new term
    comes; then the terms another covers (fewer conditions) are dropped."""
    alts = set(alternatives)
    while True:
        new = {
            Alternative(a.on - {x}, a.off) for a in alts for x in a.on if Alternative(a.on - {x}, a.off | {x}) in alts
        } - alts
        if not new:
            return _minimal(alts)
        alts |= new
