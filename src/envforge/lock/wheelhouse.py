"""A wheelhouse is a transport, never a source a committed lock names (issue 29).

``envforge lock --offline --find-links DIR`` resolves from the wheel files in ``DIR``; uv then
writes each file as a ``file:///DIR/<wheel>`` URL, a path on this machine that no other machine,
CI job or reviewer can fetch or check. So, before a lock is written:

- :func:`restore_urls`: a wheelhouse file that a lock of the project already records (same file
  name, same sha256) gets that lock's entry back: its index URL, size, upload time and hashes.
  Lock once where the indexes are reachable; offline relocks then record the same URLs.
- :func:`local_files`: the wheelhouse files left. ``envforge lock`` refuses them
  (:class:`LocalPathsRefused`, exit 2) unless ``--local-paths`` asks for a lock that stays on
  this machine; :func:`local_path_reasons` makes ``lock --check`` (and ``up``) call such a lock
  stale, except where the wheelhouse it names is given (``--find-links DIR``).

PEP 751 (``packages.wheels``): a file entry needs a ``url`` or a ``path``; ``hashes`` are required.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from envforge.core.errors import InputError
from envforge.core.plural import counted

__all__ = ["LocalPathsRefused", "local_files", "local_path_reasons", "refusal", "restore_urls"]

_LOCK_LIMIT = 64 * 1024 * 1024  # a lock of the project larger than this is not read for URLs


class LocalPathsRefused(InputError):
    """An offline lock would record wheelhouse files as local paths (exit 2)."""


def _files(pkg: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(pkg.get("wheels", [])) + ([pkg["sdist"]] if isinstance(pkg.get("sdist"), Mapping) else [])


def _local_path(entry: Mapping[str, Any]) -> Path | None:
    """The local file an entry names (a ``file:`` URL or a ``path``), else None."""
    url = entry.get("url")
    if isinstance(url, str) and url.startswith("file:"):
        return Path(unquote(urlsplit(url).path))
    path = entry.get("path")
    return Path(path) if isinstance(path, str) and not url else None


def _sha256(entry: Mapping[str, Any]) -> str | None:
    hashes = entry.get("hashes")
    return hashes.get("sha256") if isinstance(hashes, Mapping) else None


def _under(path: Path, dirs: Sequence[Path]) -> bool:
    return any(path.resolve().is_relative_to(d.resolve()) for d in dirs)


def _known_entries(lockfiles: Path) -> dict[tuple[str, str], Mapping[str, Any]]:
    """(file name, sha256) -> the file entry of every ``pylock.*.toml`` under ``lockfiles`` that
    records it by a URL that is not a local path. An unreadable lock adds nothing."""
    known: dict[tuple[str, str], Mapping[str, Any]] = {}
    for lock in sorted(lockfiles.glob("pylock.*.toml")) if lockfiles.is_dir() else ():
        try:
            if lock.stat().st_size > _LOCK_LIMIT:
                continue
            doc = tomllib.loads(lock.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # TOMLDecodeError, UnicodeDecodeError, a number too long to convert
            continue
        for pkg in doc.get("packages", []):
            for entry in _files(pkg) if isinstance(pkg, Mapping) else ():
                url, digest = entry.get("url"), _sha256(entry)
                if isinstance(url, str) and digest and _local_path(entry) is None:
                    known.setdefault((unquote(url.rsplit("/", 1)[-1]), digest), entry)
    return known


def restore_urls(
    packages: Sequence[Mapping[str, Any]], lockfiles: Path, find_links: Sequence[Path]
) -> list[dict[str, Any]]:
    """``packages`` (uv's resolution, PEP 751 ``[[packages]]`` dicts) with every wheelhouse file
    (a local path under one of ``find_links``) that a lock in ``lockfiles`` records by URL (same
    file name and sha256) replaced by that lock's entry. Other entries are kept as they are."""
    known = _known_entries(lockfiles)

    def restored(entry: Mapping[str, Any]) -> Mapping[str, Any]:
        path, digest = _local_path(entry), _sha256(entry)
        if path is None or digest is None or not _under(path, find_links):
            return entry
        return known.get((path.name, digest), entry)

    out = []
    for pkg in packages:
        new = dict(pkg)
        if "wheels" in pkg:
            new["wheels"] = [restored(w) for w in pkg["wheels"]]
        if isinstance(pkg.get("sdist"), Mapping):
            new["sdist"] = restored(pkg["sdist"])
        out.append(new)
    return out


def local_files(
    packages: Iterable[Mapping[str, Any]], indexes: Sequence[str] = (), keep: Sequence[Path] = ()
) -> list[tuple[str, str]]:
    """``(package name, file URL or path)`` of each file a lock would record as a local path: a
    ``file:`` URL or a ``path`` that is under none of the recipe's ``indexes`` (an index may be a
    ``file://`` mirror the recipe names) nor of the wheelhouses ``keep``."""
    out = []
    for pkg in packages:
        for entry in _files(pkg):
            path = _local_path(entry)
            url = str(entry.get("url") or entry.get("path"))
            if path is None or any(url.startswith(i.rstrip("/").rsplit("/simple", 1)[0] + "/") for i in indexes):
                continue
            if not _under(path, keep):
                out.append((str(pkg.get("name")), url))
    return out


def refusal(where: str, files: Sequence[tuple[str, str]], relock: str) -> LocalPathsRefused:
    """The error for an offline lock that would record ``files`` as local paths."""
    names = ", ".join(sorted({Path(unquote(u)).name for _, u in files})[:5]) + (", ..." if len(files) > 5 else "")
    return LocalPathsRefused(
        f"{where}: an offline lock would record {counted(len(files), 'wheelhouse file')} as local paths ({names}): "
        "a committed lock says where each file comes from (its index URL and sha256), never a path on this machine",
        hint=f"lock once where the indexes are reachable (`{relock}`) and commit it: offline relocks keep the URLs "
        f"and hashes it records for the same files; a lock that stays on this machine: `{relock} --offline "
        "--find-links DIR --local-paths` (`lock --check` then calls it stale, except with --find-links DIR)",
    )


def local_path_reasons(
    tables: Iterable[Mapping[str, Any]], indexes: Sequence[str], keep: Sequence[Path], relock: str
) -> list[str]:
    """``lock --check`` reasons for a lock that records local paths outside ``keep``: one line."""
    files = local_files(tables, indexes, keep)
    if not files:
        return []
    names = sorted({name for name, _ in files})
    shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
    return [
        f"wheelhouse: {counted(len(names), 'package')} locked as local paths, not index URLs ({shown}; "
        f"{files[0][1]}): relock where the indexes are reachable: `{relock}`"
    ]
