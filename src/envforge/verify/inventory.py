"""What the lock says and what is installed: the two inventories static verify compares.

The lock is the PEP 751 ``pylock.toml`` copied into ``<site-packages>/.envforge/`` at build time
(docs/architecture.md), read by :func:`envforge.lock.read_lock`. Installed distributions are the
``*.dist-info`` directories of the environment's own site-packages (PEP 376 / PEP 627), read without
importing anything from the environment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.errors import InputError
from envforge.lock import Lock as EnvLock
from envforge.lock import LockedPackage, LockedWheel, read_lock

__all__ = ["EnvLock", "Installed", "LockedPackage", "LockedWheel", "direct_url", "installed_distributions",
           "read_env_lock"]


@dataclass(frozen=True, slots=True)
class Installed:
    """An installed distribution: canonical ``name``, ``version`` from METADATA, its ``dist_info``."""

    name: str
    version: str
    dist_info: Path


def read_env_lock(path: Path) -> EnvLock:
    """Read the lock an environment was built from (``.envforge/pylock.toml``).

    :raises InputError: missing (the environment records no lock), not TOML, or without the keys
        verify reads (the message names the key).
    """
    if not path.is_file():
        raise InputError(f"{path} does not exist: the environment records no lock",
                         hint="rebuild it with `envforge build` (it copies the lock into .envforge/)")
    return read_lock(path)


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
