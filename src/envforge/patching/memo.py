"""A cache of patch results: what the operations of a patchset make of one file, keyed by the
sha256 of the file's bytes and of every other file they read, the patchset digest and the
engine's own source (issue 16.4: a rebuild re-derives the same patched bytes, libcst and pyflakes
included, for nothing).

Entries are ``<dir>/<key>.json`` (each operation's state, detail and fix) and ``<dir>/<key>.after``
(the patched bytes, absent when the file is unchanged), written atomically; a damaged or missing
entry is a miss, never an error. The cache only saves time: the states and bytes are those the
engine computes, and the engine still writes, records and checks as without it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from envforge.core.cache import cache_root
from envforge.core.errors import InputError
from envforge.core.fs import atomic_write
from envforge.core.textfile import SMALL_LIMIT, read_state
from envforge.patching.patchset import Patchset
from envforge.patching.states import State, state_of

__all__ = [
    "ENGINE_SOURCES",
    "CachedFile",
    "ResultCache",
    "default_cache",
    "default_result_cache",
    "engine_tag",
    "patchset_inputs",
]


def default_cache() -> Path:
    """envforge's cache directory (:func:`envforge.core.cache.cache_root`: ``$ENVFORGE_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/envforge``, else ``~/.cache/envforge``, absolute)."""
    return cache_root()


def default_result_cache() -> ResultCache:
    """The patch-result cache build and apply-patches use: ``<default_cache()>/patch-results``."""
    return ResultCache(default_cache() / "patch-results")


#: The modules whose code decides a patch result (states and bytes), relative to this package.
ENGINE_SOURCES = (
    "states.py",
    "planning.py",
    "operations/__init__.py",
    "operations/base.py",
    "operations/edits.py",
    "operations/replacements.py",
    "syntax.py",
    "source.py",
    "soundness.py",
    "memo.py",
)


@cache
def engine_tag() -> str:
    """sha256 of the patching engine's source (:data:`ENGINE_SOURCES`: states, planning, operations,
    syntax, source, soundness, memo): an entry is reused only by the code that computed it."""
    here = Path(__file__).parent
    h = hashlib.sha256()
    for name in ENGINE_SOURCES:
        h.update((here / name).read_bytes())
    return h.hexdigest()


def patchset_inputs(ps: Patchset) -> list[str]:
    """Files the patchset's operations read (relative to site-packages): their own, and any
    ``signatures-from`` file, in first-use order."""
    files = list(ps.files)
    for op in ps.operations:
        extra = getattr(op, "signatures_from", None)
        if isinstance(extra, Mapping) and "file" in extra:
            files.append(str(extra["file"]))
    return list(dict.fromkeys(files))


@dataclass(frozen=True, slots=True)
class CachedFile:
    """One file's result: ``(state, detail, fix)`` per operation on it (patchset order), and the
    patched bytes (``after``, equal to the input when nothing changed)."""

    operations: tuple[tuple[State, str, str], ...]
    after: bytes


@dataclass(frozen=True, slots=True)
class ResultCache:
    """Patch results under ``directory`` (created on first write)."""

    directory: Path

    def key(self, ps: Patchset, path: str, before: bytes, already: bool, read: Callable[[str], bytes | None]) -> str:
        """The entry name of ``ps`` on ``path`` (bytes ``before``; ``already``: the manifest records
        it as patched by ``ps``); ``read`` gives the other files the operations read."""
        h = hashlib.sha256(f"{engine_tag()}\0{ps.digest}\0{path}\0{int(already)}\0".encode())
        h.update(hashlib.sha256(before).digest())
        for rel in patchset_inputs(ps):
            if rel != path:
                data = read(rel)
                h.update(f"\0{rel}\0".encode() + (hashlib.sha256(data).digest() if data is not None else b"-"))
        return h.hexdigest()

    def get(self, key: str, before: bytes) -> CachedFile | None:
        """The entry ``key``, or None (missing, unreadable, or damaged: not a regular file, e.g. a
        FIFO, which is never opened; larger than a patched file can be)."""
        try:
            raw = read_state(self.directory / f"{key}.json", what="patch-result cache entry", limit=SMALL_LIMIT)
            data = json.loads(raw.decode("utf-8"))
            ops = tuple((state_of(s), str(d), str(f)) for s, d, f in data["operations"])
            after = (
                read_state(self.directory / f"{key}.after", what="patch-result cache entry")
                if data["changed"]
                else before
            )
            if data["changed"] and hashlib.sha256(after).hexdigest() != data["after_sha256"]:
                return None
        except (OSError, ValueError, KeyError, TypeError, RecursionError, InputError):
            return None
        return CachedFile(ops, after)

    def put(self, key: str, before: bytes, entry: CachedFile) -> None:
        """Store ``entry`` (best effort: an unwritable cache is skipped silently)."""
        changed = entry.after != before
        record = {
            "operations": [list(o) for o in entry.operations],
            "changed": changed,
            "after_sha256": hashlib.sha256(entry.after).hexdigest(),
        }
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if changed:
                atomic_write(self.directory / f"{key}.after", entry.after)
            atomic_write(self.directory / f"{key}.json", json.dumps(record).encode("utf-8"))
        except OSError:
            return
