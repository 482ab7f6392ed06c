"""Where envforge keeps its own caches, how big they are, and removing them: ``envforge cache dir |
clean | prune`` (as ``uv cache dir | clean | prune``).

Everything here only saves time; removing any of it costs the next run the work again, never a result:

====================  ================================================================  ===========================
cache                 what it holds                                                     written by
====================  ================================================================  ===========================
``patch-results``     what a patchset's operations make of one file (``<key>.json``     ``patching/memo.py``
                      and the patched bytes ``<key>.after``)
``releases``          released code for ``envforge patches check``: index listings      ``patching/releases.py``,
                      (``index/``), downloaded wheels (``wheels/``), their Python       ``patching/compat.py``
                      files (``unpacked/<dist>-<version>/``) and results (``check/``)
``valid-locks``       one empty marker per lock text the lock reader has validated      ``lock/read.py``
``marker-verdicts``   one byte per pair of markers ``lock diff`` compared: same         ``lockdiff/classify.py``
                      environments (``1``) or not (``0``)
====================  ================================================================  ===========================

The root is ``$ENVFORGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/envforge``, else ``~/.cache/envforge``
(:func:`cache_root`; the same rule as ``patching.memo.default_cache`` and ``lock/read.py``).

*Prune* removes only what no run reads again: a downloaded wheel whose Python files are unpacked
(``unpacked/<dist>-<version>/.complete-py`` names the wheel; ``fetch_release`` reads the tree and
never the wheel again), the leftovers of interrupted runs (``*.part`` downloads, ``*.partial`` and
unmarked unpack directories, ``*.envforge-tmp`` files of :func:`envforge.core.fs.atomic_write`), and a
patch result's bytes without their record (``<key>.after`` without ``<key>.json``). *Clean* removes
whole caches. Neither takes a lock: run them when no ``envforge patches check`` is running (a build
finds a removed patch result a miss, nothing more).

Sizes are the apparent sizes of regular files (``st_size``), each inode counted once, symbolic links
never followed.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from envforge.core.errors import InputError
from envforge.core.textfile import read_state

__all__ = ["CACHES", "CacheSize", "Removal", "cache_root", "cache_sizes", "clean", "prune"]

#: Cache name -> what it holds (the directory under :func:`cache_root` has the same name).
CACHES: Mapping[str, str] = {
    "patch-results": "patch results of build and apply-patches (patching/memo.py)",
    "releases": "released wheels and their Python files for patches check (patching/releases.py)",
    "valid-locks": "markers of lock texts already validated (lock/read.py)",
    "marker-verdicts": "lock diff's verdicts on pairs of markers (lockdiff/classify.py)",
}

_LEFTOVER_FILES = (".part", ".envforge-tmp")  # an interrupted download; an interrupted atomic write


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """envforge's cache root: ``$ENVFORGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/envforge``, else
    ``~/.cache/envforge`` (``environ`` defaults to ``os.environ``); always absolute (a relative
    ``ENVFORGE_CACHE_DIR`` is taken from the current directory, as uv takes ``UV_CACHE_DIR``, and
    said as the absolute path it is), ``~`` expanded. The one rule every cache of envforge uses."""
    env = os.environ if environ is None else environ
    if env.get("ENVFORGE_CACHE_DIR"):
        return Path(env["ENVFORGE_CACHE_DIR"]).expanduser().absolute()
    base = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return (base / "envforge").expanduser().absolute()


@dataclass(frozen=True, slots=True)
class CacheSize:
    """One cache: its ``name`` (a key of :data:`CACHES`), directory, regular ``files`` and their ``bytes``."""

    name: str
    path: Path
    files: int
    bytes: int

    def as_dict(self) -> dict[str, object]:
        """``{"name", "path", "files", "bytes"}`` for the ``envforge.cache/1`` envelope."""
        return {"name": self.name, "path": str(self.path), "files": self.files, "bytes": self.bytes}


@dataclass(frozen=True, slots=True)
class Removal:
    """What :func:`clean` or :func:`prune` removed: each path (files and directories, sorted) and the
    regular ``files`` and ``bytes`` they held."""

    paths: tuple[Path, ...]
    files: int
    bytes: int

    def as_dict(self) -> dict[str, object]:
        """``{"removed": [paths], "files", "bytes"}`` for the ``envforge.cache-removal/1`` envelope."""
        return {"removed": [str(p) for p in self.paths], "files": self.files, "bytes": self.bytes}


def cache_sizes(root: Path) -> tuple[CacheSize, ...]:
    """Every cache of :data:`CACHES` under ``root``, in that order (a missing one: 0 files, 0 bytes)."""
    return tuple(CacheSize(name, root / name, *_size([root / name])) for name in CACHES)


def clean(root: Path, names: Iterable[str] = ()) -> Removal:
    """Remove the caches ``names`` (default: every cache of :data:`CACHES`) under ``root``.

    :raises InputError: a name that is no cache (exit 2), with the nearest cache name
        (:func:`difflib.get_close_matches`, as for a mistyped command) and the names there are.
    """
    chosen = list(dict.fromkeys(names)) or list(CACHES)
    unknown = [n for n in chosen if n not in CACHES]
    if unknown:
        import difflib  # lazy: only for a mistyped name

        close = [m for n in unknown for m in difflib.get_close_matches(n, CACHES, n=1, cutoff=0.6)]
        guess = f"; did you mean {', '.join(repr(m) for m in dict.fromkeys(close))}?" if close else ""
        raise InputError(
            f"no cache named {', '.join(repr(n) for n in unknown)}{guess}",
            hint=f"envforge's caches: {', '.join(CACHES)}",
        )
    return _remove([root / n for n in chosen if (root / n).exists() or (root / n).is_symlink()])


def prune(root: Path) -> Removal:
    """Remove what no run reads again (see the module docstring) from every cache under ``root``."""
    found = set(_prunable(root))
    return _remove(sorted(p for p in found if not any(parent in found for parent in p.parents)))


def _prunable(root: Path) -> Iterator[Path]:
    for path in _walk(root):
        if path.name.endswith(_LEFTOVER_FILES) and not path.is_symlink():
            yield path
    unpacked = root / "releases" / "unpacked"
    wheels_read: set[str] = set()
    for tree in _children(unpacked):
        marker = next((m for m in (tree / ".complete-py", tree / ".complete") if m.is_file()), None)
        if marker is None or tree.name.endswith(".partial"):
            yield tree
        else:
            wheels_read.add(_wheel_named(marker))
    for wheel in _children(root / "releases" / "wheels"):
        if wheel.name in wheels_read:
            yield wheel
    results = root / "patch-results"
    for after in _children(results):
        if after.suffix == ".after" and not after.with_suffix(".json").exists():
            yield after


def _wheel_named(marker: Path) -> str:
    """The wheel file name an unpack marker records ("" when unreadable: its wheel is then kept)."""
    try:
        return read_state(marker, what="unpack marker", limit=4096).decode("utf-8", "replace").strip()
    except (OSError, InputError):
        return ""


def _children(directory: Path) -> list[Path]:
    try:
        return sorted(directory.iterdir()) if directory.is_dir() and not directory.is_symlink() else []
    except OSError:
        return []


def _walk(root: Path) -> Iterator[Path]:
    for top, dirs, files in os.walk(root):  # os.walk never follows symbolic links to directories
        dirs.sort()
        for name in sorted(files):
            yield Path(top, name)


def _size(paths: Iterable[Path]) -> tuple[int, int]:
    """(regular files, bytes) under ``paths``, each inode once, symbolic links not followed."""
    sizes: dict[tuple[int, int], int] = {}
    for path in paths:
        for entry in _walk(path) if path.is_dir() and not path.is_symlink() else [path]:
            try:
                st = entry.lstat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                sizes[(st.st_dev, st.st_ino)] = st.st_size
    return len(sizes), sum(sizes.values())


def _remove(paths: list[Path]) -> Removal:
    files, size = _size(paths)
    for path in paths:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return Removal(tuple(paths), files, size)
