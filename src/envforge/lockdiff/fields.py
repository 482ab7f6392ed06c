"""Lock-level changes: the header (``requires-python``, metadata keys hidden), top-level arrays item by
item, and ``[tool.envforge]`` by section (indexes and overrides by name, patchsets by id).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from envforge.core.plural import counted
from envforge.lockdiff.changes import FieldChange, FieldKind
from envforge.lockdiff.model import Lock

__all__ = ["envforge_changes", "flatten_envforge", "header_changes"]

_HIDDEN_HEADER = frozenset({"created-by", "lock-version", "version", "revision", "comments"})
_KEYED_ARRAYS = {
    "indexes": ("index", "name"),
    "overrides": ("override", "name"),
    "patchsets": ("patchset", "id"),
    "retired-patchsets": ("retired-patchset", "id"),
}


def header_changes(old: Lock, new: Lock) -> Iterator[FieldChange]:
    for key in sorted(old.header.keys() | new.header.keys()):
        a, b = old.header.get(key), new.header.get(key)
        if a != b:
            yield FieldChange("header", key, _kind(a, b), a, b, hidden=key in _HIDDEN_HEADER)
    for key in sorted(old.lists.keys() | new.lists.keys()):
        a_items, b_items = old.lists.get(key, ()), new.lists.get(key, ())
        if a_items == b_items:
            continue
        a_set, b_set = set(a_items), set(b_items)
        gone, came = sorted(a_set - b_set), sorted(b_set - a_set)
        if key.startswith("manifest."):  # requirements: one name's item changed is one change
            for name, x, y in _same_name(gone, came):
                gone.remove(x)
                came.remove(y)
                yield FieldChange("header", f"{key} {name}", "changed", x, y)
        for item in gone:
            yield FieldChange("header", key, "removed", item, None)
        for item in came:
            yield FieldChange("header", key, "added", None, item)
        if a_set == b_set:
            yield FieldChange("header", key, "changed", "order", "order", hidden=True)
    if old.comments != new.comments:
        yield FieldChange(
            "header",
            "comments",
            "changed",
            counted(len(old.comments), "line"),
            counted(len(new.comments), "line"),
            hidden=True,
        )


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def _same_name(gone: list[str], came: list[str]) -> list[tuple[str, str, str]]:
    """(name, old item, new item) for requirement names with one item removed and one added."""

    def names(items: list[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for item in items:
            match = _NAME.match(item)
            if match:
                out.setdefault(match.group(0), []).append(item)
        return out

    a, b = names(gone), names(came)
    return [(n, a[n][0], b[n][0]) for n in sorted(a.keys() & b.keys()) if len(a[n]) == 1 and len(b[n]) == 1]


def _kind(a: object, b: object) -> FieldKind:
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


def envforge_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> Iterator[FieldChange]:
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
