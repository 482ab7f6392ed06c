"""Patchsets against releases that are not installed: the state matrix ``envforge patches check``
prints (patchset x release), computed on the released wheels' Python files (:mod:`.releases`).

Each patchset is planned on each release exactly as on an environment (:func:`.planning.plan`), with
its ``requires`` left out (they are about the environment it will be applied to, which does not
exist here; they are listed in the JSON). A cell's state is its operations' states folded:

``drifted``         an operation drifted: upgrading to this release breaks the patchset,
``applied``         it would apply (at least one operation edits the released code),
``upstream-fixed``  every operation already holds in the release: the patchset is obsolete there,
``out-of-range``    the release is outside the patchset's ``versions``,
``unavailable``     the release could not be fetched (the message says why).

A patchset named on the command line is one the caller means to apply there: its ``out-of-range``
cell on a release given exactly (``--against guardkit==1.1``) is a problem too (exit 1; field case
B41: a listed patchset that stops applying after an upgrade leaves its fix out without a word).

A cell is cached in ``<cache>/check/<key>.json``, the key being the sha256 of the engine's own
source, the patchset digest, the version and the sha256 of every file the patchset reads: a warm
run reads a few files per cell and parses nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envforge.core.errors import EnvforgeError, InputError
from envforge.core.fs import atomic_write
from envforge.core.textfile import SMALL_LIMIT, read_state
from envforge.patching.memo import engine_tag, patchset_inputs
from envforge.patching.patchset import Patchset
from envforge.patching.planning import plan
from envforge.patching.releases import DEFAULT_INDEX, IndexListing, fetch_release, list_releases, select_versions
from envforge.patching.states import APPLIED, DRIFTED, OUT_OF_RANGE, UPSTREAM_FIXED, State, state_of

__all__ = ["UNAVAILABLE", "Cell", "CellState", "CompatMatrix", "check_patchsets", "parse_against"]

#: A cell's (and an operation's) state: a patch state, or ``unavailable`` (the release could not be fetched).
CellState = State | Literal["unavailable"]
UNAVAILABLE: Final = "unavailable"
_FOLD: Final[tuple[CellState, ...]] = (DRIFTED, UNAVAILABLE, APPLIED, UPSTREAM_FIXED, OUT_OF_RANGE)
_COMPAT_TAG = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


@dataclass(frozen=True, slots=True)
class Cell:
    """One patchset on one release: the folded ``state`` and each operation's
    ``(file, operation, state, message)``."""

    patchset: str
    distribution: str
    version: str
    state: CellState
    operations: tuple[tuple[str, str, CellState, str], ...] = ()


@dataclass(frozen=True, slots=True)
class CompatMatrix:
    """``patchsets`` (rows) x ``releases`` (columns, per distribution, oldest first)."""

    patchsets: tuple[Patchset, ...]
    releases: tuple[tuple[str, tuple[str, ...]], ...]  # (distribution, versions)
    cells: tuple[Cell, ...]
    must_apply: frozenset[tuple[str, str]] = frozenset()  # (patchset, version) out-of-range may not be

    def _failed(self, c: Cell) -> bool:
        return c.state in (DRIFTED, UNAVAILABLE) or (
            c.state == OUT_OF_RANGE and (c.patchset, c.version) in self.must_apply
        )

    @property
    def ok(self) -> bool:
        """No cell drifted or unavailable, and none of :attr:`must_apply` out of range."""
        return not any(self._failed(c) for c in self.cells)

    def cell(self, patchset: str, version: str) -> Cell | None:
        """The cell of ``patchset`` on its distribution's release ``version``."""
        return next((c for c in self.cells if c.patchset == patchset and c.version == version), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``ok``, ``releases``, ``patchsets`` (with their requirements, which the
        check leaves out), ``cells``."""
        return {
            "ok": self.ok,
            "must_apply": [{"patchset": p, "version": v} for p, v in sorted(self.must_apply)],
            "releases": {d: list(vs) for d, vs in self.releases},
            "patchsets": [
                {
                    "id": p.id,
                    "distribution": p.distribution,
                    "versions": p.versions,
                    "digest": p.digest,
                    "requires": [r.text for r in p.requires],
                }
                for p in self.patchsets
            ],
            "cells": [
                {
                    "patchset": c.patchset,
                    "distribution": c.distribution,
                    "version": c.version,
                    "state": c.state,
                    "operations": [
                        {"file": f, "operation": o, "state": s, "message": m} for f, o, s, m in c.operations
                    ],
                }
                for c in self.cells
            ],
        }

    def _tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        out = []
        for dist, versions in self.releases:
            rows = [p for p in self.patchsets if p.distribution == dist]
            if not rows:
                continue
            body = [[v, *((c.state if (c := self.cell(p.id, v)) else "") for p in rows)] for v in versions]
            out.append((dist, [dist, *(p.id for p in rows)], body))
        return out

    def problems(self) -> list[str]:
        """One line per drifted or unavailable operation: ``<patchset> on <dist> <version>: <message>``,
        and one per :attr:`must_apply` cell out of range, with the way out."""
        out = []
        versions = {p.id: p.versions for p in self.patchsets}
        for c in self.cells:
            if c.state in (DRIFTED, UNAVAILABLE):
                out += [
                    f"{c.patchset} on {c.distribution} {c.version}: {m}"
                    for _, _, s, m in c.operations
                    if s in (DRIFTED, UNAVAILABLE)
                ]
            elif self._failed(c):
                out.append(
                    f"{c.patchset} on {c.distribution} {c.version}: out-of-range: its versions "
                    f"{versions.get(c.patchset, '?')} exclude {c.version}, so it would not be applied; "
                    f"check the code of {c.version} and widen `versions`, or retire it in the recipe "
                    "with a reason (retire-patchsets)"
                )
        return out

    def markdown(self) -> str:
        """GitHub-flavoured Markdown: one table per distribution (a row per release, a column per
        patchset), then one bullet per drifted or unavailable operation."""
        parts = []
        for _, head, body in self._tables():
            lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(row) + " |" for row in body]
            parts.append("\n".join(lines))
        problems = self.problems()
        if problems:
            parts.append("\n".join(f"- {p}" for p in problems))
        return "\n\n".join(parts) + "\n"

    def text(self) -> str:
        """Aligned plain-text tables, as :meth:`markdown` without the pipes."""
        parts = []
        for _, head, body in self._tables():
            widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
            parts.append(
                "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [head, *body])
            )
        return "\n\n".join(parts) + "\n"


def parse_against(texts: Sequence[str]) -> tuple[Requirement, ...]:
    """``--against`` values as PEP 508 requirements (``sglang==0.5.23``, ``'sglang>=0.5.8'``).

    :raises InputError: not a requirement, or one without a version specifier.
    """
    out = []
    for text in texts:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise InputError(
                f"--against {text!r}: not a requirement: {exc}",
                hint="write DIST==VERSION or a range such as 'sglang>=0.5.8'",
            ) from None
        if not req.specifier:
            raise InputError(
                f"--against {text!r}: no version given",
                hint=f"write {req.name}==VERSION, or a range such as '{req.name}>=0.5.8'",
            )
        out.append(req)
    return tuple(out)


def _cell_key(ps: Patchset, version: str, tree: Path) -> str:
    h = hashlib.sha256(f"{engine_tag()}\0{_COMPAT_TAG}\0{ps.digest}\0{version}".encode())
    for rel in patchset_inputs(ps):
        try:
            digest = hashlib.sha256((tree / rel).read_bytes()).hexdigest()
        except (FileNotFoundError, NotADirectoryError):
            digest = "missing"
        h.update(f"\0{rel}\0{digest}".encode())
    return h.hexdigest()


def _version(text: str) -> Version | str:
    try:
        return Version(text)
    except InvalidVersion:
        return text


def _fold(states: Sequence[CellState]) -> CellState:
    return next((s for s in _FOLD if s in states), UPSTREAM_FIXED)


def _cell_state(text: object) -> CellState:
    """A state read back from the cache. :raises ValueError: not a state."""
    return UNAVAILABLE if text == UNAVAILABLE else state_of(text)


def _evaluate(ps: Patchset, version: str, tree: Path, cache_dir: Path) -> Cell:
    key = _cell_key(ps, version, tree)
    stored = cache_dir / "check" / f"{key}.json"
    try:  # a damaged entry (a FIFO, a directory, not JSON) is a miss: computed again, never blocks
        data = json.loads(read_state(stored, what="patches check cache entry", limit=SMALL_LIMIT).decode("utf-8"))
        ops: tuple[tuple[str, str, CellState, str], ...] = tuple(
            (str(f), str(o), _cell_state(s), str(m)) for f, o, s, m in data["operations"]
        )
        return Cell(ps.id, ps.distribution, version, _cell_state(data["state"]), ops)
    except (OSError, ValueError, KeyError, TypeError, RecursionError, InputError):
        pass
    report = plan(tree, [replace(ps, requires=())])
    ops = tuple((r.file, r.operation, r.state, r.message) for r in report.results)
    cell = Cell(ps.id, ps.distribution, version, _fold([r.state for r in report.results]), ops)
    stored.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(stored, json.dumps({"state": cell.state, "operations": [list(o) for o in ops]}).encode("utf-8"))
    return cell


def check_patchsets(
    patchsets: Sequence[Patchset],
    against: Sequence[Requirement],
    *,
    cache_dir: Path,
    index_url: str = DEFAULT_INDEX,
    progress: Callable[[str], None] | None = None,
    jobs: int = 4,
    must_apply: Sequence[str] = (),
) -> CompatMatrix:
    """Evaluate every patchset on every release ``against`` selects for its distribution.

    ``must_apply``: ids of patchsets whose ``out-of-range`` cell on a release ``against`` gives
    exactly (``==V``) is a problem (:attr:`CompatMatrix.must_apply`).

    Releases are listed from ``index_url`` and fetched into ``cache_dir`` (``jobs`` downloads at
    a time); a release that cannot be fetched gives ``unavailable`` cells, never a skipped one.

    :raises InputError: a distribution of ``against`` that no patchset targets, an exact version
        the index has no wheel of, or a range that selects no release.
    :raises IndexUnreachable: the index cannot be read and no listing of it is cached (exit 3).
    """
    releases: list[tuple[str, tuple[str, ...]]] = []
    listings: dict[str, IndexListing] = {}
    targeted = {p.distribution for p in patchsets}
    for req in against:
        dist = canonicalize_name(req.name)
        if dist not in targeted:
            raise InputError(
                f"--against {req}: no patchset given targets {dist}",
                hint=f"the patchsets target {', '.join(sorted(targeted)) or 'nothing'}",
            )
        listing = listings.get(dist) or list_releases(dist, index_url, cache_dir)
        listings[dist] = listing
        versions = select_versions(listing, req.specifier)
        if not versions:
            raise InputError(
                f"--against {req}: no release with a wheel on {index_url} matches",
                hint=f"newest releases there: {', '.join(listing.versions[-6:]) or 'none'}",
            )
        known = dict(releases)
        merged = tuple(sorted({*known.get(dist, ()), *versions}, key=lambda v: listing.versions.index(v)))
        releases = [(d, vs) for d, vs in releases if d != dist] + [(dist, merged)]
    work = [(dist, v) for dist, vs in releases for v in vs]

    def fetch(item: tuple[str, str]) -> tuple[str, str, Path | str]:
        dist, version = item
        try:
            tree: Path | str = fetch_release(listings[dist], version, cache_dir)
        except EnvforgeError as exc:
            tree = str(exc).splitlines()[0]
        if progress:
            progress(f"{dist} {version}: {'ready' if isinstance(tree, Path) else 'unavailable'}")
        return dist, version, tree

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        trees = list(pool.map(fetch, work))
    cells: list[Cell] = []
    for name, version, tree in trees:
        for ps in patchsets:
            if ps.distribution != name:
                continue
            if isinstance(tree, str):
                cells.append(Cell(ps.id, name, version, UNAVAILABLE, (("", "fetch", UNAVAILABLE, tree),)))
            else:
                cells.append(_evaluate(ps, version, tree, cache_dir))
    rows = tuple(p for p in patchsets if any(p.distribution == d for d, _ in releases))
    exact = {
        (canonicalize_name(r.name), _version(s.version))
        for r in against
        for s in r.specifier
        if len(r.specifier) == 1 and s.operator == "==" and "*" not in s.version
    }
    required = frozenset(
        (p.id, v)
        for p in rows
        if p.id in must_apply
        for d, vs in releases
        if d == p.distribution
        for v in vs
        if (d, _version(v)) in exact
    )
    return CompatMatrix(rows, tuple(releases), tuple(cells), required)
