"""Installed distributions in a site-packages directory: ``*.dist-info``, METADATA, RECORD.

Read as files, never by importing anything from the environment (PEP 376, PEP 627; RECORD hashes
are urlsafe-base64 sha256 per the binary distribution format spec). Used by build (B04, B09),
verify and patching.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.core.errors import InputError
from envforge.core.textfile import LARGE_LIMIT, SMALL_LIMIT, file_kind, parse_json, read_state

__all__ = [
    "Installed",
    "RecordEntry",
    "direct_url",
    "find_distribution",
    "installed_distributions",
    "read_direct_url",
    "read_record",
    "refuse_unreadable",
    "unreadable_distributions",
]


@dataclass(frozen=True, slots=True)
class Installed:
    """An installed distribution: canonical ``name``, ``version`` from METADATA, its ``dist_info``."""

    name: str
    version: str
    dist_info: Path


def _metadata_fields(metadata: Path) -> tuple[str | None, str | None]:
    """Name and Version of a METADATA file; only a regular file is read (a FIFO would block,
    field case N44): :func:`envforge.core.textfile.read_state`."""
    name = version = None
    raw = read_state(metadata, what="METADATA", limit=LARGE_LIMIT)
    for line in raw.decode("utf-8", errors="replace").splitlines():
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


def unreadable_distributions(site_packages: Path) -> tuple[tuple[Path, str], ...]:
    """The ``*.dist-info`` entries :func:`installed_distributions` leaves out, each with why: ``(dist-info,
    reason)``, sorted. Reasons: ``"no METADATA"``, ``"METADATA is not a regular file (a FIFO)"`` (or
    another kind; never opened), ``"METADATA names no Name or Version"`` (empty, truncated), ``"METADATA
    cannot be read: <OS reason>"``, ``"not a directory"``. An output that lists distributions (the SBOM,
    an adopted lock) fails on these instead of dropping them (issue 41)."""
    out: list[tuple[Path, str]] = []
    for d in sorted(site_packages.glob("*.dist-info")):
        meta = d / "METADATA"
        try:
            if not d.is_dir():
                out.append((d, "not a directory"))
                continue
            kind = file_kind(os.stat(meta).st_mode)
        except FileNotFoundError:
            out.append((d, "no METADATA"))
            continue
        except OSError as exc:
            out.append((d, f"METADATA cannot be read: {exc.strerror or exc}"))
            continue
        if kind is not None:
            out.append((d, f"METADATA is not a regular file ({kind})"))
            continue
        try:
            name, version = _metadata_fields(meta)
        except InputError as exc:
            out.append((d, f"METADATA cannot be read: {exc.message}"))
            continue
        if not (name and version):
            out.append((d, "METADATA names no Name or Version"))
    return tuple(out)


def refuse_unreadable(site_packages: Path, *, what: str, fix: str) -> None:
    """Raise when :func:`unreadable_distributions` finds any: ``what`` (e.g. ``"the SBOM"``) would leave
    them out.

    :raises InputError: ``<what> would leave out 2 distributions whose METADATA cannot be read:
        foo-1.0.dist-info (no METADATA), ...``, with ``fix`` as the hint.
    """
    bad = unreadable_distributions(site_packages)
    if bad:
        listed = ", ".join(f"{d.name} ({why})" for d, why in bad)
        count = f"{len(bad)} distribution{'' if len(bad) == 1 else 's'}"
        raise InputError(
            f"{what} would leave out {count} of {site_packages} whose METADATA cannot be read: {listed}", hint=fix
        )


def find_distribution(site_packages: Path, name: str) -> Installed | None:
    """The installed distribution ``name`` (any spelling; PEP 503 normalisation), or None."""
    want = canonicalize_name(name)
    for d in site_packages.glob("*.dist-info"):
        if canonicalize_name(d.name[: -len(".dist-info")].rsplit("-", 1)[0]) != want:
            continue
        found, version = _metadata_fields(d / "METADATA") if (d / "METADATA").is_file() else (None, None)
        if found and version:
            return Installed(canonicalize_name(found), version, d)
    return None


def read_direct_url(dist_info: Path) -> Mapping[str, Any] | None:
    """The PEP 610 ``direct_url.json`` in ``dist_info``, or None when there is none.

    A corrupt record is never taken for an index install (field cases N71, N72).

    :raises InputError: not a regular file (a FIFO never blocks the read), larger than 1 MiB, not
        JSON or nested too deeply, not a JSON object with a string ``url``, a ``dir_info`` /
        ``archive_info`` / ``vcs_info`` that is not an object, or a ``dir_info.editable`` that is not a
        JSON boolean (issue 41: ``"yes"`` was read as "not editable"); the message names the file.
    """
    path = dist_info / "direct_url.json"
    hint = "reinstall the distribution (its PEP 610 record is damaged)"
    try:
        raw = read_state(path, what="PEP 610 record", limit=SMALL_LIMIT, hint=hint)
    except FileNotFoundError:
        return None
    try:
        data = parse_json(raw, label=str(path))
    except InputError as exc:
        raise InputError(exc.message, hint=hint) from None
    if not isinstance(data, dict) or not isinstance(data.get("url"), str):
        raise InputError(f'{path}: not a PEP 610 record (a JSON object with a string "url")', hint=hint)
    bad = [k for k in ("dir_info", "archive_info", "vcs_info") if k in data and not isinstance(data[k], dict)]
    if bad:
        raise InputError(f"{path}: not a PEP 610 record ({bad[0]} is not an object)", hint=hint)
    editable = data.get("dir_info", {}).get("editable", False)
    if not isinstance(editable, bool):  # PEP 610: a boolean; "yes" is neither, never read as "not editable"
        raise InputError(
            f"{path}: not a PEP 610 record (dir_info.editable is {json.dumps(editable)}, not true or false)", hint=hint
        )
    return data


def direct_url(dist: Installed) -> Mapping[str, Any] | None:
    """The PEP 610 ``direct_url.json`` of an installed distribution, or None (:func:`read_direct_url`).

    :raises InputError: a damaged record (see :func:`read_direct_url`).
    """
    return read_direct_url(dist.dist_info)


@dataclass(frozen=True, slots=True)
class RecordEntry:
    """One RECORD row: ``path`` relative to site-packages, ``sha256`` hex (None if unhashed), ``size``."""

    path: str
    sha256: str | None
    size: int | None


def _hex_of_record_hash(value: str) -> str | None:
    algo, _, b64 = value.partition("=")
    if algo != "sha256" or not b64:
        return None
    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()


def read_record(dist: Installed) -> tuple[RecordEntry, ...]:
    """The rows of ``dist``'s RECORD (empty when there is none)."""
    try:
        raw = read_state(dist.dist_info / "RECORD", what="RECORD", limit=LARGE_LIMIT)
    except FileNotFoundError:
        return ()
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8", errors="replace"), newline="")))
    out = []
    for row in rows:
        if not row or not row[0]:
            continue
        digest = _hex_of_record_hash(row[1]) if len(row) > 1 and row[1] else None
        size = int(row[2]) if len(row) > 2 and row[2].isdigit() else None
        out.append(RecordEntry(row[0], digest, size))
    return tuple(out)
