"""Writing a PEP 751 ``pylock.toml`` deterministically (same inputs, same bytes).

Layout follows uv's own output (one ``[[packages]]`` table per distribution, files as inline tables,
one per line) so diffs stay small, with keys in a fixed order. ``tomlkit`` renders TOML values.
Sources: PEP 751 (https://peps.python.org/pep-0751/) for the keys; ``packages.index`` is the PEP 503
base URL the files were found at. ``[tool.envforge] packages-digest`` records what was written
(:func:`envforge.lock.read.packages_digest`), so a hand-added, edited or truncated package table is
detected at ``lock --check``, build and verify.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tomllib

import tomlkit

from envforge.lock.read import packages_digest
from envforge.recipe.model import ResolvedVariant
from envforge.lock.routing import DEFAULT_INDEX, attribute_packages

__all__ = ["render", "restamp"]

_PKG_KEYS = ("name", "version", "marker", "requires-python", "index", "dependencies", "vcs", "directory",
             "archive", "sdist", "wheels")
_FILE_KEYS = ("name", "url", "path", "upload-time", "size", "hashes")


def _inline(entry: Mapping[str, Any]) -> Any:
    t = tomlkit.inline_table()
    for k in _FILE_KEYS:
        if k in entry:
            t[k] = entry[k]
    for k in sorted(set(entry) - set(_FILE_KEYS)):
        t[k] = entry[k]
    return t


def _files_array(files: Sequence[Mapping[str, Any]]) -> Any:
    arr = tomlkit.array()
    for f in files:
        arr.append(_inline(f))
    arr.multiline(len(files) > 1)
    return arr


def _package(raw: Mapping[str, Any], index_url: str | None) -> Any:
    t = tomlkit.table()
    data = dict(raw)
    if index_url is not None:
        data["index"] = index_url
    for k in _PKG_KEYS:
        if k not in data:
            continue
        v = data[k]
        if k == "wheels":
            t[k] = _files_array(v)
        elif k == "sdist":
            t[k] = _inline(v)
        else:
            t[k] = v
    return t


def _array_of_tables(rows: Sequence[Mapping[str, Any]]) -> Any:
    arr = tomlkit.array()
    for row in rows:
        it = tomlkit.inline_table()
        it.update(row)
        arr.append(it)
    arr.multiline(True)
    return arr


def _tool_table(tool: Mapping[str, Any], indexes: Sequence[Mapping[str, Any]], digest: str) -> Any:
    t = tomlkit.table()
    for k, v in tool.items():
        if k in ("target", "inputs", "env"):
            sub = tomlkit.table()
            for sk, sv in v.items():
                sub[sk] = _array_of_strings(sv) if isinstance(sv, list) else sv
            t[k] = sub
        elif k in ("overrides", "patchsets"):
            t[k] = _array_of_tables(v)
        else:
            t[k] = v
        if k == "recipe-digest":
            t["packages-digest"] = digest
            t["indexes"] = _array_of_tables(indexes)
    return t


def _array_of_strings(items: Sequence[str]) -> Any:
    arr = tomlkit.array()
    arr.extend(items)
    arr.multiline(len(items) > 1)
    return arr


def render(raw: Mapping[str, Any], variant: ResolvedVariant, tool: Mapping[str, Any],
           find_links: Sequence[Path], version: str) -> str:
    """The lock text for uv's resolution ``raw`` (parsed pylock) plus envforge's ``tool`` table.

    Index attribution is recorded per package (``index``) and per index in
    ``[tool.envforge].indexes`` (name, url, packages).
    """
    by_pkg = attribute_packages(raw.get("packages", []), variant, find_links)
    urls = {i.name: i.url for i in (DEFAULT_INDEX, *variant.indexes)}  # the recipe's pypi wins
    doc = tomlkit.document()
    doc.add(tomlkit.comment(f"envforge lock of recipe {variant.recipe}, variant {variant.variant}. "
                            "Regenerate with `envforge lock`; do not edit."))
    doc["lock-version"] = "1.0"
    doc["environments"] = [_environment_marker(variant.target.platform)]
    doc["requires-python"] = f"=={variant.python}.*" if variant.python.count(".") == 1 else f"=={variant.python}"
    doc["created-by"] = "envforge"
    packages = tomlkit.aot()
    for p in sorted(raw.get("packages", []), key=lambda p: p["name"]):
        packages.append(_package(p, urls.get(by_pkg[p["name"]])))
    doc["packages"] = packages
    served: dict[str, list[str]] = {}
    for name, idx in sorted(by_pkg.items()):
        served.setdefault(idx, []).append(name)
    indexes = [{"name": n, "url": urls.get(n, n), **({"packages": served[n]} if n != DEFAULT_INDEX.name else {})}
               for n in sorted(served)]
    digest = packages_digest(tomllib.loads(tomlkit.dumps(doc))["packages"])
    tool_doc = tomlkit.table(is_super_table=True)
    tool_doc["envforge"] = _tool_table(tool, indexes, digest)
    doc["tool"] = tool_doc
    return tomlkit.dumps(doc)


def restamp(text: str) -> str:
    """``text`` (a lock ``envforge lock`` wrote) with its ``[tool.envforge]`` table rewritten by the
    same code as :func:`render`, so it records the ``packages-digest`` of the packages it holds.

    For locks written before the digest existed: the ``[[packages]]`` bytes are kept as they are.
    Only for locks envforge wrote and a maintainer has reviewed; a hand-edited lock must be
    re-locked instead.

    :raises KeyError: the text has no ``[tool.envforge]`` table.
    """
    doc = tomlkit.parse(text)
    plain = tomllib.loads(text)
    tool = {k: v for k, v in plain["tool"]["envforge"].items() if k not in ("indexes", "packages-digest")}
    doc["tool"]["envforge"] = _tool_table(tool, plain["tool"]["envforge"].get("indexes", []),
                                          packages_digest(plain["packages"]))
    return tomlkit.dumps(doc)


def _environment_marker(platform: str) -> str:
    """A PEP 508 marker for a uv ``--python-platform`` target like ``x86_64-manylinux_2_28``."""
    machine = platform.split("-", 1)[0]
    if "linux" in platform:
        return f"sys_platform == 'linux' and platform_machine == '{machine}'"
    if "macos" in platform or "apple" in platform:
        return f"sys_platform == 'darwin' and platform_machine == '{machine}'"
    if "windows" in platform:
        return "sys_platform == 'win32'"
    return f"platform_machine == '{machine}'"
