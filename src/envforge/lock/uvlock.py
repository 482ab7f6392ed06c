"""The shape of a ``uv.lock`` as uv documents and writes it; no spec validator exists for it.

Checked (uv's docs, https://docs.astral.sh/uv/concepts/projects/layout/#the-lockfile, and the files
uv 0.9 writes): top-level ``version`` is the integer 1 (uv refuses other versions), ``revision`` an
integer, ``requires-python`` a PEP 440 specifier set, ``resolution-markers`` and
``supported-markers`` arrays of PEP 508 markers, ``conflicts`` an array of arrays of tables,
``options`` and ``manifest`` tables; every ``[[package]]`` has a normalised ``name``, a PEP 440
``version`` (optional for dynamic sources), a ``source`` table with exactly one of ``registry``,
``git``, ``url``, ``path``, ``directory``, ``editable``, ``virtual``; ``resolution-markers`` markers;
``sdist`` a table and ``wheels`` an array of tables, each file with ``url``, ``path`` or
``filename`` and a ``hash`` of the form ``<algorithm>:<hex>``, ``size`` an integer; ``dependencies``,
``optional-dependencies`` and ``dev-dependencies`` entries tables with a ``name``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from packaging.markers import InvalidMarker, Marker
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

__all__ = ["SOURCE_KINDS", "UvLockShapeError", "check_shape"]

SOURCE_KINDS = ("registry", "git", "url", "path", "directory", "editable", "virtual")
_HASH = re.compile(r"^[a-z0-9]+:[0-9a-f]+$")
_NORMALIZED = re.compile(r"^([a-z0-9]|[a-z0-9]([a-z0-9-](?!--))*[a-z0-9])$")


class UvLockShapeError(Exception):
    """A uv.lock key that does not have the documented shape: ``key`` path and ``reason``."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}")
        self.key = key
        self.reason = reason


def check_shape(doc: Mapping[str, Any]) -> list[tuple[str, str | None, list[str] | None]]:
    """Check ``doc`` (a parsed uv.lock) and return ``(name, version, resolution-markers or None)`` per
    package, in file order, for the same-name check.

    :raises UvLockShapeError: the first key that does not fit, with its path.
    """
    version = doc.get("version")
    if type(version) is not int:
        raise UvLockShapeError("version", f"should be an integer, got {_kind(version)}")
    if version != 1:
        raise UvLockShapeError("version", f"uv.lock version {version} is not supported (envforge reads version 1)")
    _opt(doc, "revision", int, "")
    if "requires-python" in doc:
        _specifier(doc["requires-python"], "requires-python")
    for key in ("resolution-markers", "supported-markers"):
        _markers(doc, key, "")
    for key in ("options", "manifest"):
        _opt(doc, key, dict, "")
    _conflicts(doc)
    packages = doc.get("package")
    if not isinstance(packages, list):
        raise UvLockShapeError("package", f"should be an array of tables, got {_kind(packages)}")
    return [_package(p, f"package[{i}]") for i, p in enumerate(packages)]


def _kind(value: Any) -> str:
    return {
        str: "a string",
        int: "an integer",
        float: "a float",
        bool: "a boolean",
        list: "an array",
        dict: "a table",
        type(None): "nothing",
    }.get(type(value), type(value).__name__)


def _opt(d: Mapping[str, Any], key: str, typ: type, path: str) -> Any:
    value = d.get(key)
    if value is not None and (type(value) is not typ):
        noun = {int: "an integer", str: "a string", dict: "a table", list: "an array"}[typ]
        raise UvLockShapeError(f"{path}{key}", f"should be {noun}, got {_kind(value)}")
    return value


def _specifier(value: Any, key: str) -> None:
    if not isinstance(value, str):
        raise UvLockShapeError(key, f"should be a string, got {_kind(value)}")
    try:
        SpecifierSet(value)
    except InvalidSpecifier as exc:
        raise UvLockShapeError(key, f"not a version specifier: {exc}") from None


def _markers(d: Mapping[str, Any], key: str, path: str) -> list[str] | None:
    value = d.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise UvLockShapeError(f"{path}{key}", f"should be an array of markers, got {_kind(value)}")
    for i, m in enumerate(value):
        if not isinstance(m, str):
            raise UvLockShapeError(f"{path}{key}[{i}]", f"should be a string, got {_kind(m)}")
        try:
            Marker(m)
        except InvalidMarker as exc:
            raise UvLockShapeError(f"{path}{key}[{i}]", f"not an environment marker: {exc}") from None
    return list(value)


def _conflicts(doc: Mapping[str, Any]) -> None:
    value = doc.get("conflicts")
    if value is None:
        return
    if not isinstance(value, list):
        raise UvLockShapeError("conflicts", f"should be an array, got {_kind(value)}")
    for i, group in enumerate(value):
        if not isinstance(group, list) or not all(isinstance(x, dict) for x in group):
            raise UvLockShapeError(f"conflicts[{i}]", "should be an array of tables")


def _package(p: Any, path: str) -> tuple[str, str | None, list[str] | None]:
    if not isinstance(p, dict):
        raise UvLockShapeError(path, f"should be a table, got {_kind(p)}")
    name = p.get("name")
    if not isinstance(name, str):
        raise UvLockShapeError(f"{path}.name", "missing" if name is None else f"should be a string, got {_kind(name)}")
    if not _NORMALIZED.match(name):
        raise UvLockShapeError(f"{path}.name", f"{name!r} is not a normalised name (uv writes them normalised)")
    version = _opt(p, "version", str, f"{path}.")
    if version is not None:
        try:
            Version(version)
        except InvalidVersion:
            raise UvLockShapeError(f"{path}.version", f"{version!r} is not a PEP 440 version") from None
    _source(p.get("source"), f"{path}.source")
    if "sdist" in p:
        _file(p["sdist"], f"{path}.sdist")
    wheels = _opt(p, "wheels", list, f"{path}.")
    for i, w in enumerate(wheels or []):
        _file(w, f"{path}.wheels[{i}]")
    for key in ("dependencies", "dev-dependencies", "optional-dependencies"):
        _dependencies(p, key, path)
    return name, version, _markers(p, "resolution-markers", f"{path}.")


def _source(source: Any, path: str) -> None:
    if not isinstance(source, dict):
        raise UvLockShapeError(path, "missing" if source is None else f"should be a table, got {_kind(source)}")
    kinds = [k for k in source if k in SOURCE_KINDS]
    if len(kinds) != 1:
        raise UvLockShapeError(
            path, f"should have exactly one of {', '.join(SOURCE_KINDS)}; has {', '.join(sorted(source)) or 'none'}"
        )
    if not isinstance(source[kinds[0]], str):
        raise UvLockShapeError(f"{path}.{kinds[0]}", f"should be a string, got {_kind(source[kinds[0]])}")


def _file(f: Any, path: str) -> None:
    if not isinstance(f, dict):
        raise UvLockShapeError(path, f"should be a table, got {_kind(f)}")
    where = [k for k in ("url", "path", "filename") if k in f]
    if not where:
        raise UvLockShapeError(path, "has none of url, path, filename")
    for k in where:
        _opt(f, k, str, f"{path}.")
    digest = f.get("hash")
    if digest is not None and not (isinstance(digest, str) and _HASH.match(digest)):
        raise UvLockShapeError(f"{path}.hash", f"should be '<algorithm>:<hex digest>', got {digest!r}")
    _opt(f, "size", int, f"{path}.")


def _dependencies(p: Mapping[str, Any], key: str, path: str) -> None:
    value = p.get(key)
    if value is None:
        return
    groups: Sequence[tuple[str, Any]]
    if key == "dependencies":
        groups = [(f"{path}.{key}", value)]
    elif isinstance(value, dict):
        groups = [(f"{path}.{key}.{g}", v) for g, v in value.items()]
    else:
        raise UvLockShapeError(f"{path}.{key}", f"should be a table of arrays, got {_kind(value)}")
    for where, deps in groups:
        if not isinstance(deps, list):
            raise UvLockShapeError(where, f"should be an array of tables, got {_kind(deps)}")
        for i, d in enumerate(deps):
            if not isinstance(d, dict) or not isinstance(d.get("name"), str):
                raise UvLockShapeError(f"{where}[{i}]", "should be a table with a string `name`")
