"""What the lock says and what is installed: the two inventories static verify compares.

The lock is the PEP 751 ``pylock.toml`` copied into ``<site-packages>/.envforge/`` at build time
(docs/architecture.md). It is read with :mod:`tomllib` and checked for the keys verify needs
(``lock.py`` validated the whole file with :mod:`packaging.pylock` when it wrote it; importing that
module here would cost a fifth of a static verify). Installed distributions are the
``*.dist-info`` directories of the environment's own site-packages (PEP 376 / PEP 627), read without
importing anything from the environment.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

from envforge.errors import InputError

__all__ = ["EnvLock", "Installed", "LockedPackage", "LockedWheel", "direct_url", "installed_distributions",
           "read_env_lock"]


@dataclass(frozen=True, slots=True)
class LockedWheel:
    """One wheel of a locked package: file ``name``, ``url`` or ``path``, ``sha256`` hex (or None)."""

    name: str | None
    url: str | None
    sha256: str | None


@dataclass(frozen=True, slots=True)
class LockedPackage:
    """A ``[[packages]]`` entry: canonical ``name``, ``version`` string, ``marker`` text, wheels."""

    name: str
    version: str | None
    marker: str | None
    index: str | None
    wheels: tuple[LockedWheel, ...]


@dataclass(frozen=True, slots=True)
class EnvLock:
    """The lock an environment was built from. ``envforge`` is its ``[tool.envforge]`` table."""

    path: Path
    packages: tuple[LockedPackage, ...]
    envforge: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Installed:
    """An installed distribution: canonical ``name``, ``version`` from METADATA, its ``dist_info``."""

    name: str
    version: str
    dist_info: Path


def _wheel_of(w: Mapping[str, Any]) -> LockedWheel:
    url = w.get("url") or w.get("path")
    name = w.get("name") or (Path(unquote(urlparse(url).path)).name if url else None)
    return LockedWheel(name=name, url=url, sha256=(w.get("hashes") or {}).get("sha256"))


def _package(path: Path, i: int, p: Any) -> LockedPackage:
    if not isinstance(p, Mapping) or not isinstance(p.get("name"), str):
        raise InputError(f"{path}: packages[{i}].name: missing or not a string (PEP 751)")
    wheels = p.get("wheels", [])
    if not isinstance(wheels, list) or not all(isinstance(w, Mapping) for w in wheels):
        raise InputError(f"{path}: packages[{i}].wheels: not an array of tables (PEP 751)")
    version = p.get("version")
    return LockedPackage(name=canonicalize_name(p["name"]), version=str(version) if version is not None else None,
                         marker=p.get("marker"), index=p.get("index"), wheels=tuple(_wheel_of(w) for w in wheels))


def read_env_lock(path: Path) -> EnvLock:
    """Read the PEP 751 lock at ``path``.

    :raises InputError: missing, not TOML, or without the keys verify reads (the message names the key).
    """
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path} does not exist: the environment records no lock",
                         hint="rebuild it with `envforge build` (it copies the lock into .envforge/)") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    if "lock-version" not in data or not isinstance(data.get("packages", []), list):
        raise InputError(f"{path}: not a PEP 751 lock (no lock-version, or packages is not an array)")
    packages = tuple(_package(path, i, p) for i, p in enumerate(data.get("packages", [])))
    return EnvLock(path=path, packages=packages, envforge=data.get("tool", {}).get("envforge", {}))


def _metadata_fields(metadata: Path) -> tuple[str | None, str | None]:
    name = version = None
    with metadata.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            if key == "Name":
                name = value.strip()
            elif key == "Version":
                version = value.strip()
    return name, version


def installed_distributions(site_packages: Path) -> dict[str, Installed]:
    """Installed distributions by canonical name (``*.dist-info`` with a METADATA file)."""
    found: dict[str, Installed] = {}
    for d in sorted(site_packages.glob("*.dist-info")):
        meta = d / "METADATA"
        if not meta.is_file():
            continue
        name, version = _metadata_fields(meta)
        if name and version:
            found[canonicalize_name(name)] = Installed(canonicalize_name(name), version, d)
    return found


def direct_url(dist: Installed) -> Mapping[str, Any] | None:
    """The PEP 610 ``direct_url.json`` of an installed distribution, or None."""
    try:
        data: Mapping[str, Any] = json.loads((dist.dist_info / "direct_url.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data
