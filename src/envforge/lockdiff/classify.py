"""Classify the changes between two locks: what a reviewer needs, and the churn they do not.

Package change kinds (``PackageChange.kind``):

=============  =================================================================================
added          a package only the new lock has
removed        a package only the old lock has
replaced       ``nvidia-cublas-cu12`` removed and ``nvidia-cublas`` added: the same library built
               for another CUDA major (names that differ only by a ``-cuNN`` suffix)
upgraded       higher public version; ``level`` is major, minor, patch, pre, post or dev
downgraded     lower public version; same levels
local          same public version, another local label (``2.9.1 -> 2.9.1+cu130``, PEP 440)
source         same version from another index or source
rehashed       same version, same source, a file of the same name with other hashes (flagged: a
               published file should never change)
files          same version and source, files added or removed (e.g. a new platform wheel)
marker         same version, another environment marker (where it installs)
metadata       only upload times, sizes or URLs of identical files changed (hidden by default)
=============  =================================================================================

Lock-level changes (``FieldChange``) come from the header (``requires-python``; ``created-by``,
``lock-version``, uv's ``revision`` and generator comments are metadata) and from
``[tool.envforge]`` (docs/architecture.md): top-level keys, ``target``, ``inputs``, ``env``,
``indexes`` by name, ``overrides`` by name (with their reasons), ``patchsets`` by id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envforge.lockdiff.model import PYPI, Lock, LockedPackage

__all__ = ["CUDA_SUFFIX", "FAMILIES", "FieldChange", "LockDiff", "PackageChange", "diff_locks", "family_of",
           "flatten_envforge", "index_names"]

FAMILIES = ("torch", "nvidia", "flashinfer", "sglang", "other")
_TORCH = frozenset({"torch", "torchvision", "torchaudio", "torchao", "torchcodec", "triton",
                    "pytorch-triton"})
CUDA_SUFFIX = re.compile(r"-cu(\d+)$")
_HIDDEN_HEADER = frozenset({"created-by", "lock-version", "version", "revision", "comments"})
_KEYED_ARRAYS = {"indexes": ("index", "name"), "overrides": ("override", "name"),
                 "patchsets": ("patchset", "id")}


@dataclass(frozen=True, slots=True)
class PackageChange:
    """One package-level change.

    ``old_name``/``new_name`` differ only for ``replaced``; versions are as written (``None`` on the
    side that lacks the package); ``level`` grades upgrades and downgrades; ``old_source`` and
    ``new_source`` are set when the source changed (index URLs or ``git ...``); ``detail`` is a short
    human note (files concerned, local labels); ``flagged`` marks what should not happen without a
    reason; ``hidden`` marks metadata-only churn.
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
    detail: str = ""
    flagged: bool = False
    hidden: bool = False

    @property
    def name(self) -> str:
        """The name to show (the new one for ``replaced``)."""
        return self.new_name or self.old_name or ""


@dataclass(frozen=True, slots=True)
class FieldChange:
    """A change of the lock header or of ``[tool.envforge]``.

    ``section``: ``header``, ``envforge``, ``target``, ``inputs``, ``env``, ``index``, ``override``
    or ``patchset``; ``subject``: the key, name or id; ``kind``: added, removed, changed, or
    ``reason`` (an override whose version stayed and whose reason changed: old/new are the
    reasons); ``note``: an override's reason.
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
    counts are numbers of packages; ``index_names`` maps index URLs to names for display.
    """

    old_label: str
    new_label: str
    status: str
    old_count: int
    new_count: int
    packages: tuple[PackageChange, ...]
    fields: tuple[FieldChange, ...]
    index_names: Mapping[str, str]

    def visible_packages(self, show_all: bool = False) -> tuple[PackageChange, ...]:
        """Package changes to show: all with ``show_all``, else those not hidden."""
        return tuple(c for c in self.packages if show_all or not c.hidden)

    def visible_fields(self, show_all: bool = False) -> tuple[FieldChange, ...]:
        """Lock-level changes to show: all with ``show_all``, else those not hidden."""
        return tuple(c for c in self.fields if show_all or not c.hidden)

    def has_changes(self, show_all: bool = False) -> bool:
        """True when something would be shown (what ``--exit-code`` tests)."""
        return (self.status != "changed" or bool(self.visible_packages(show_all))
                or bool(self.visible_fields(show_all)))

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


def index_names(*locks: Lock) -> dict[str, str]:
    """Index URL -> name, from ``[tool.envforge] indexes`` of the locks, PyPI as ``pypi``."""
    names = {PYPI: "pypi"}
    for lock in locks:
        for entry in lock.envforge.get("indexes", []) or []:
            if isinstance(entry, Mapping) and "url" in entry and "name" in entry:
                names[str(entry["url"]).rstrip("/")] = str(entry["name"])
    return names


def diff_locks(old: Lock | None, new: Lock | None) -> LockDiff:
    """Compare two locks (``None`` for a side without a lockfile, as with ``--git``).

    :returns: a :class:`LockDiff` with package changes sorted by family then name, and lock-level
        changes in a fixed section order.
    """
    present = [x for x in (old, new) if x is not None]
    names = index_names(*present)
    if old is None or new is None:
        only = present[0]
        return LockDiff(only.label if old else "(none)", only.label if new else "(none)",
                        "added" if old is None else "removed",
                        0 if old is None else len(only.packages),
                        0 if new is None else len(only.packages), (), (), names)
    changes = list(_package_changes(old.packages, new.packages))
    changes.sort(key=lambda c: (FAMILIES.index(c.family), c.name, c.old_name or ""))
    fields = (*_header_changes(old, new), *_envforge_changes(old.envforge, new.envforge))
    return LockDiff(old.label, new.label, "changed", len(old.packages), len(new.packages),
                    tuple(changes), tuple(fields), names)


def _package_changes(old: Mapping[str, LockedPackage],
                     new: Mapping[str, LockedPackage]) -> Iterator[PackageChange]:
    removed = [k for k in old if k not in new]
    added = [k for k in new if k not in old]
    pairs = _cuda_pairs(removed, added)
    for key, other in pairs.items():
        yield _replaced(old[key], new[other])
    for key in removed:
        if key not in pairs:
            p = old[key]
            yield PackageChange("removed", family_of(p.name), p.name, None, p.version, None,
                                old_source=p.source)
    paired_new = set(pairs.values())
    for key in added:
        if key not in paired_new:
            p = new[key]
            yield PackageChange("added", family_of(p.name), None, p.name, None, p.version,
                                new_source=p.source)
    for key in old:
        if key in new:
            change = _compare(old[key], new[key])
            if change is not None:
                yield change


def _cuda_pairs(removed: Sequence[str], added: Sequence[str]) -> dict[str, str]:
    """Removed key -> added key for names equal once a ``-cuNN`` suffix is dropped (one each)."""
    def stems(keys: Iterable[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for k in keys:
            out.setdefault(CUDA_SUFFIX.sub("", k), []).append(k)
        return out

    old_stems, new_stems = stems(removed), stems(added)
    pairs = {}
    for stem, olds in old_stems.items():
        news = new_stems.get(stem, [])
        if len(olds) == 1 and len(news) == 1 and olds[0] != news[0] and (
                CUDA_SUFFIX.search(olds[0]) or CUDA_SUFFIX.search(news[0])):
            pairs[olds[0]] = news[0]
    return pairs


def _cuda_label(name: str) -> str:
    match = CUDA_SUFFIX.search(name)
    return f"-cu{match.group(1)}" if match else "unsuffixed"


def _replaced(old: LockedPackage, new: LockedPackage) -> PackageChange:
    detail = f"{_cuda_label(old.name)} -> {_cuda_label(new.name)}"
    moved = old.source != new.source
    return PackageChange("replaced", family_of(new.name), old.name, new.name, old.version,
                         new.version, old_source=old.source if moved else None,
                         new_source=new.source if moved else None, detail=detail)


def _compare(old: LockedPackage, new: LockedPackage) -> PackageChange | None:
    moved = old.source != new.source
    kind, level, detail = _version_change(old.version, new.version)
    if kind is None and moved:
        kind = "source"
    if kind is None:
        kind, detail, flagged, hidden = _file_change(old, new)
        if kind is None:
            return None
        return PackageChange(kind, family_of(new.name), old.name, new.name, old.version,
                             new.version, detail=detail, flagged=flagged, hidden=hidden)
    return PackageChange(kind, family_of(new.name), old.name, new.name, old.version, new.version,
                         level=level, old_source=old.source if moved else None,
                         new_source=new.source if moved else None, detail=detail)


def _version_change(old: str | None, new: str | None) -> tuple[str | None, str | None, str]:
    """(kind, level, detail) for two versions; kind None when they are equal."""
    if old == new:
        return None, None, ""
    from packaging.version import InvalidVersion, Version

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


def _file_change(old: LockedPackage, new: LockedPackage) -> tuple[str | None, str, bool, bool]:
    """(kind, detail, flagged, hidden) for two packages of the same version and source."""
    a = {f.filename: f for f in old.artifacts}
    b = {f.filename: f for f in new.artifacts}
    rehashed = sorted(n for n in a.keys() & b.keys() if a[n].hashes != b[n].hashes)
    if rehashed:
        more = f" (+{len(rehashed) - 1} more)" if len(rehashed) > 1 else ""
        return "rehashed", f"same version, new hashes: {rehashed[0]}{more}", True, False
    gone, came = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    if gone or came:
        parts = [f"+{n}" for n in came] + [f"-{n}" for n in gone]
        return "files", ", ".join(parts), False, False
    if old.marker != new.marker:
        return "marker", _marker_change(old.marker, new.marker), False, False
    meta = [n for n in a if a[n] != b[n]]
    if meta:
        return "metadata", _meta_what(a[meta[0]], b[meta[0]]), False, True
    return None, "", False, False


def _marker_change(old: str | None, new: str | None) -> str:
    """Markers that are ``or``-lists show the clauses added and removed, others in full."""
    a, b = (old or "").split(" or "), (new or "").split(" or ")
    if old and new and len(a) > 1 and len(b) > 1:
        parts = [f"+{c}" for c in b if c not in a] + [f"-{c}" for c in a if c not in b]
        return "marker " + ", ".join(parts)
    return f"marker {old!r} -> {new!r}"


def _meta_what(a: Any, b: Any) -> str:
    fields = [n for n in ("upload_time", "size", "url") if getattr(a, n) != getattr(b, n)]
    return " and ".join(f.replace("_", "-") for f in fields) + " of identical files"


def _header_changes(old: Lock, new: Lock) -> Iterator[FieldChange]:
    for key in sorted(old.header.keys() | new.header.keys()):
        a, b = old.header.get(key), new.header.get(key)
        if a != b:
            yield FieldChange("header", key, _kind(a, b), a, b, hidden=key in _HIDDEN_HEADER)
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
