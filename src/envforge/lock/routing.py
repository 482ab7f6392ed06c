"""Per-package index routing, the way uv supports it, and the guard that checks the result.

A recipe routes some packages to named indexes (torch to a CUDA index). envforge hands uv a
throw-away ``pyproject.toml`` whose ``[[tool.uv.index]]`` entries are all ``explicit = true`` and
whose ``[tool.uv.sources]`` pin each routed package to its index: an explicit index serves only the
packages pinned to it, so an extra CUDA index can never shadow the default index for other packages
(field case B01, sglang PR 18404; uv docs "Package indexes", explicit indexes).

After resolution, :func:`index_violations` attributes every locked file to an index by its URL and
fails on any package that came from an index not allowed for it (defence in depth against, for
example, ``UV_EXTRA_INDEX_URL`` in the caller's environment).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from envforge.recipe.model import Index, ResolvedVariant
from envforge.core.urls import redact_credentials

__all__ = [
    "DEFAULT_INDEX",
    "FIND_LINKS",
    "IndexViolation",
    "attribute",
    "attribute_packages",
    "effective_indexes",
    "index_violations",
    "override_routes",
    "redact_userinfo",
    "routed_files_only",
    "uv_pyproject",
    "without_userinfo",
]

DEFAULT_INDEX = Index("pypi", "https://pypi.org/simple")
FIND_LINKS = "find-links"
# Hosts that serve the files of an index whose pages live elsewhere (PyPI's CDN).
_FILE_HOSTS = {"pypi.org": ("files.pythonhosted.org",)}


def _toml_str(s: str) -> str:
    return json.dumps(s)  # a JSON string is a valid TOML basic string


def uv_pyproject(variant: ResolvedVariant) -> str:
    """The throw-away ``pyproject.toml`` uv resolves: dependencies, explicit indexes, sources."""
    python = variant.python if variant.python.count(".") >= 2 else f"{variant.python}.*"
    deps = ",\n".join(f"    {_toml_str(p.requirement())}" for p in variant.packages)
    lines = [
        "[project]",
        'name = "envforge-lock-input"',
        'version = "0"',
        f"requires-python = {_toml_str('==' + python)}",
        f"dependencies = [\n{deps}\n]",
        "",
    ]
    routed = [p for p in variant.packages if p.index]
    if routed:
        lines.append("[tool.uv.sources]")
        lines += [f"{_toml_str(p.name)} = {{ index = {_toml_str(p.index or '')} }}" for p in routed]
        lines.append("")
    for idx in variant.indexes:
        if idx.name == DEFAULT_INDEX.name:
            continue
        lines += [
            "[[tool.uv.index]]",
            f"name = {_toml_str(idx.name)}",
            f"url = {_toml_str(idx.url)}",
            "explicit = true",
            "",
        ]
    return "\n".join(lines)


def override_routes(variant: ResolvedVariant) -> dict[str, str]:
    """``{package: find-links URL}`` for each override of a package the recipe routes to an index.

    uv looks an ``--override`` requirement up on the default index only: ``[tool.uv.sources]``
    does not apply to it (in ``uv pip compile`` neither to ``[tool.uv] override-dependencies``;
    uv#16933), so overriding the upstream pin of a routed package fails with "not found in the
    package registry" (field case B51). The package's own page on its index (PEP 503
    ``<index>/<name>/``, a flat list of its files) given as ``--find-links`` brings the route back;
    :func:`routed_files_only` then drops any file of it the default index also offered.
    """
    urls = {i.name: i.url for i in variant.indexes}
    routed = {p.name: p.index for p in variant.packages if p.index and p.index in urls}
    return {o.name: f"{urls[routed[o.name]].rstrip('/')}/{o.name}/" for o in variant.overrides if o.name in routed}


def routed_files_only(packages: Iterable[dict[str, Any]], variant: ResolvedVariant) -> None:
    """Keep, in each overridden routed package of uv's ``[[packages]]`` (changed in place), only
    the files its index serves, when it serves any: uv merges a ``--find-links`` page's files with
    the default index's files of the same version (:func:`override_routes`). A package left with
    none is untouched (:func:`index_violations` then names it)."""
    indexes = effective_indexes(variant)
    routed = {p.name: p.index for p in variant.packages if p.index}
    for pkg in packages:
        index = routed.get(pkg["name"]) if pkg["name"] in override_routes(variant) else None
        if index is None:
            continue
        wheels = [w for w in pkg.get("wheels", []) if attribute(w.get("url") or w.get("path"), indexes) == index]
        if wheels:
            pkg["wheels"] = wheels
            if "sdist" in pkg and attribute(pkg["sdist"].get("url") or pkg["sdist"].get("path"), indexes) != index:
                del pkg["sdist"]


def effective_indexes(variant: ResolvedVariant) -> list[Index]:
    """The default index (the recipe's ``pypi`` entry, else PyPI) first, then the recipe's others."""
    default = next((i for i in variant.indexes if i.name == DEFAULT_INDEX.name), DEFAULT_INDEX)
    return [default, *[i for i in variant.indexes if i.name != DEFAULT_INDEX.name]]


def _host(url: str) -> str:
    """``host[:port]`` of ``url``, lower-cased, without user or password (issue 18: uv strips a
    password from the file URLs it records, so indexes and files compare without userinfo)."""
    return urlsplit(url).netloc.rpartition("@")[2].lower()


def redact_userinfo(text: str) -> str:
    """``text`` with every ``scheme://user:password@`` shown as ``scheme://<credentials>@`` (a lock
    written before envforge refused credentials in recipe URLs must not print them): the one
    redaction, :func:`envforge.core.urls.redact_credentials`."""
    return redact_credentials(text)


def without_userinfo(url: str) -> str:
    """``url`` with any ``user:password@`` removed from its authority; other parts unchanged."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def attribute(url: str | None, indexes: Sequence[Index], find_links: Sequence[Path] = ()) -> str:
    """Name of the index (or ``find-links``) a file URL or path came from; ``"unknown (<host>)"``.

    A file belongs to an index when its URL is under the index URL's path, or on the index's host
    (PyPI serves files from ``files.pythonhosted.org``).
    """
    if url is None:
        return FIND_LINKS if find_links else "unknown (no url)"
    if url.startswith("file:") or url.startswith("/"):
        path = urlsplit(url).path if url.startswith("file:") else url
        if any(Path(path).resolve().is_relative_to(d.resolve()) for d in find_links):
            return FIND_LINKS
    url = without_userinfo(url)
    by_prefix = [
        i for i in indexes if url.startswith(without_userinfo(i.url).rstrip("/").rsplit("/simple", 1)[0] + "/")
    ]
    if by_prefix:
        return max(by_prefix, key=lambda i: len(i.url)).name
    host = _host(url)
    for idx in indexes:
        ihost = _host(idx.url)
        if host == ihost or host in _FILE_HOSTS.get(ihost, ()):
            return idx.name
    return f"unknown ({host})"


@dataclass(frozen=True, slots=True)
class IndexViolation:
    """A locked package that came from an index not allowed for it."""

    name: str
    version: str
    index: str
    allowed: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.name} {self.version} came from {self.index}; allowed: {', '.join(self.allowed)}"


def _file_urls(pkg: Mapping[str, Any]) -> list[str | None]:
    files = list(pkg.get("wheels", [])) + ([pkg["sdist"]] if "sdist" in pkg else [])
    return [f.get("url") or f.get("path") for f in files]


def attribute_packages(
    packages: Iterable[Mapping[str, Any]], variant: ResolvedVariant, find_links: Sequence[Path] = ()
) -> dict[str, str]:
    """Package name -> index name (or ``find-links``), from the first file of each locked package."""
    indexes = effective_indexes(variant)
    return {p["name"]: attribute(next(iter(_file_urls(p)), None), indexes, find_links) for p in packages}


def index_violations(
    packages: Iterable[Mapping[str, Any]], variant: ResolvedVariant, find_links: Sequence[Path] = ()
) -> list[IndexViolation]:
    """Check each locked package (PEP 751 ``[[packages]]`` dicts) against the recipe's routing.

    A package routed to index X may come only from X; any other package only from the default
    index (``pypi``) or, for an offline lock, the ``--find-links`` wheelhouse.
    """
    indexes = effective_indexes(variant)
    routed = {p.name: p.index for p in variant.packages if p.index}
    out = []
    for pkg in packages:
        allowed: tuple[str, ...] = (routed[pkg["name"]],) if pkg["name"] in routed else (DEFAULT_INDEX.name,)
        if find_links:
            allowed = (*allowed, FIND_LINKS)
        for url in _file_urls(pkg):
            got = attribute(url, indexes, find_links)
            if got not in allowed:
                shown = next((f"index '{i.name}' ({i.url})" for i in indexes if i.name == got), got)
                out.append(IndexViolation(pkg["name"], str(pkg["version"]), shown, allowed))
                break
    return out
