"""What is on disk under ``envs/``: every environment, its generations, which one is live, and
explicit garbage collection (``envforge envs``, ``envforge gc``).

A generation is *complete* when its ``.envforge/generation.json`` exists (build writes it last,
just before the link flip); a generation directory without it is what a killed build left behind
(*incomplete*: never live, never listed as a generation to roll back to, removed by ``gc`` and by
the next build). Nothing is pruned silently: ``gc`` removes what it is told to and reports it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.core.state import GENERATIONS_DIR, generation_number, is_generation_name
from envforge.core.textfile import SMALL_LIMIT, read_state
from envforge.env.generations import (
    TRASH,
    discard_generation,
    exclusive_generations,
    generation_record,
    generation_root,
)
from envforge.env.processes import StaleProcess, generation_users, stale_processes
from envforge.recipe.project import Project

__all__ = ["DiskUsage", "EnvInfo", "GcResult", "GenerationInfo", "collect_garbage", "disk_usage", "list_environments"]


@dataclass(frozen=True, slots=True)
class GenerationInfo:
    """One generation directory.

    :ivar name: ``g0001``...
    :ivar complete: has its manifest (``generation.json``); False for a killed build's leftovers.
    :ivar live: the environment link points at it.
    :ivar recipe, variant, lock_digest: from ``generation.json`` (None when incomplete).
    :ivar size_bytes: allocated bytes under the directory, each inode counted once (``own_bytes +
        shared_bytes``).
    :ivar own_bytes: bytes of inodes every link of which lies inside this generation: what removing
        it frees.
    :ivar shared_bytes: bytes of files hardlinked from elsewhere too (uv's cache, another
        generation); removing the generation does not free them.
    :ivar built_at: POSIX time the manifest was written (the directory's mtime when incomplete).
    :ivar log: the build log (``<name>.log`` beside the directory), or None.
    :ivar held_back: the finding kinds it failed ``envforge up``'s verify with, so it was not made
        live (``verify-failed`` in ``generation.json``); empty for every other generation.
    :ivar made_live: a held-back generation ``envforge rollback --to`` made live all the same
        (``made-live`` in ``generation.json``).
    """

    name: str
    path: Path
    complete: bool
    live: bool
    recipe: str | None
    variant: str | None
    lock_digest: str | None
    size_bytes: int
    own_bytes: int
    shared_bytes: int
    built_at: float
    log: Path | None
    held_back: tuple[str, ...] = ()
    made_live: bool = False

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of ``envforge envs --json`` (docs/cli.md)."""
        return {
            "name": self.name,
            "path": str(self.path),
            "complete": self.complete,
            "live": self.live,
            "recipe": self.recipe,
            "variant": self.variant,
            "lock_digest": self.lock_digest,
            "size_bytes": self.size_bytes,
            "own_bytes": self.own_bytes,
            "shared_bytes": self.shared_bytes,
            "built_at": round(self.built_at, 3),
            "log": None if self.log is None else str(self.log),
            "held_back": list(self.held_back),
            "made_live": self.made_live,
        }


@dataclass(frozen=True, slots=True)
class EnvInfo:
    """One environment: ``envs/<name>`` and its generations, oldest first.

    :ivar live: the generation the link points at, or None (no link, or a dangling one).
    :ivar stale: processes still running from a generation that is no longer live, or started
        through the link before its last flip (:func:`envforge.env.processes.stale_processes`, B39).
    """

    name: str
    link: Path
    live: str | None
    generations: tuple[GenerationInfo, ...]
    stale: tuple[StaleProcess, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of ``envforge envs --json``."""
        return {
            "name": self.name,
            "link": str(self.link),
            "live": self.live,
            "generations": [g.as_dict() for g in self.generations],
            "stale-processes": [p.as_dict() for p in self.stale],
        }


@dataclass(frozen=True, slots=True)
class GcResult:
    """``gc``: what was removed (``(env, generation, own bytes, shared bytes)``, as in
    :class:`GenerationInfo`), what was kept, and the bytes
    actually freed: files of the removed generations none of whose links survive elsewhere (a file
    hardlinked into uv's cache or a kept generation stays on disk and is not counted)."""

    removed: tuple[tuple[str, str, int, int], ...]
    kept: tuple[tuple[str, str], ...]
    freed_bytes: int
    in_use: tuple[tuple[str, str, int, str], ...] = ()
    """Generations gc would have removed but kept because a process uses them: ``(env, generation,
    pid, command)``, one per process (:func:`envforge.env.processes.generation_users`)."""


@dataclass(frozen=True, slots=True)
class DiskUsage:
    """Allocated bytes (``st_blocks * 512``) under some directories, each inode counted once.

    :ivar own_bytes: inodes all of whose links (``st_nlink``) were seen under those directories,
        plus directories and symlinks: what removing them frees.
    :ivar shared_bytes: files with links elsewhere too (builds hardlink files from uv's cache);
        they stay on disk when the directories are removed.
    """

    own_bytes: int
    shared_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.own_bytes + self.shared_bytes


def disk_usage(*paths: Path) -> DiskUsage:
    """Own and shared allocated bytes under ``paths`` together, symlinks not followed.

    A regular file's inode is *own* when the walk saw as many links to it as its ``st_nlink``,
    i.e. no path outside ``paths`` keeps it alive; unreadable entries are skipped.
    """
    seen: dict[tuple[int, int], list[int]] = {}  # inode -> [blocks bytes, nlink, links seen]
    for root in paths:  # the directories themselves are freed too
        try:
            st = root.lstat()
        except OSError:
            continue
        seen[(st.st_dev, st.st_ino)] = [st.st_blocks * 512, 1, 1]
    stack = list(paths)
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key in seen:
                seen[key][2] += 1
                continue
            is_dir = stat.S_ISDIR(st.st_mode)
            links = st.st_nlink if stat.S_ISREG(st.st_mode) else 1
            seen[key] = [st.st_blocks * 512, links, 1]
            if is_dir:
                stack.append(Path(e.path))
    own = sum(size for size, links, found in seen.values() if found >= links)
    shared = sum(size for size, links, found in seen.values() if found < links)
    return DiskUsage(own_bytes=own, shared_bytes=shared)


def _generation(gen: Path, live: Path | None) -> GenerationInfo:
    manifest = generation_record(gen)
    record: dict[str, Any] = {}
    if manifest is not None:
        try:  # a damaged record (a FIFO, a directory, not JSON) shows as unknown, never blocks the listing
            found = json.loads(read_state(manifest, what="generation record", limit=SMALL_LIMIT).decode("utf-8"))
            record = found if isinstance(found, dict) else {}
        except (OSError, ValueError, RecursionError, InputError):
            record = {}
    log = gen.with_name(gen.name + ".log")
    usage = disk_usage(gen)
    return GenerationInfo(
        name=gen.name,
        path=gen,
        complete=manifest is not None,
        live=live is not None and gen == live,
        recipe=record.get("recipe"),
        variant=record.get("variant"),
        lock_digest=record.get("lock-digest"),
        size_bytes=usage.total_bytes,
        own_bytes=usage.own_bytes,
        shared_bytes=usage.shared_bytes,
        built_at=(manifest or gen).stat().st_mtime,
        log=log if log.is_file() else None,
        held_back=_held_back(record),
        made_live=isinstance(record.get("made-live"), dict),
    )


def _held_back(record: dict[str, Any]) -> tuple[str, ...]:
    failed = record.get("verify-failed")
    kinds = failed.get("kinds") if isinstance(failed, dict) else None
    return tuple(str(k) for k in kinds) if isinstance(kinds, list) else ()


def _live(link: Path) -> Path | None:
    if not link.is_symlink():
        return None
    target = (link.parent / os.readlink(link)).resolve()
    return target if target.is_dir() else None


def _environment_names(project: Project, names: Sequence[str]) -> list[str]:
    """The environment names of ``project`` (only ``names`` when given), sorted: names with a link
    under ``envs/`` or a directory under ``envs/.generations/``.

    :raises InputError: a name in ``names`` has neither.
    """
    root = project.envs_dir / GENERATIONS_DIR
    found = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    if project.envs_dir.is_dir():
        found |= {p.name for p in project.envs_dir.iterdir() if p.is_symlink()}
    for name in names:
        if name not in found:
            raise InputError(
                f"no environment named '{name}' in {project.envs_dir}",
                hint=f"environments: {', '.join(sorted(found)) or 'none'}",
            )
    return sorted(names or found)


def _environment(project: Project, name: str) -> EnvInfo:
    root = project.envs_dir / GENERATIONS_DIR / name
    link = project.env_path(name)
    live = _live(link)
    gens = sorted(
        (d for d in root.iterdir() if is_generation_name(d.name) and d.is_dir()) if root.is_dir() else [],
        key=lambda d: generation_number(d.name) or 0,
    )
    return EnvInfo(
        name,
        link,
        live.name if live is not None else None,
        tuple(_generation(g, live) for g in gens),
        stale_processes(link),
    )


def list_environments(project: Project, names: Sequence[str] = ()) -> tuple[EnvInfo, ...]:
    """Every environment of ``project`` (or only ``names``), sorted by name.

    An environment is a name with a link under ``envs/`` or a directory under
    ``envs/.generations/``. Reads only, without the build lock: a snapshot for display, never the
    basis of a removal (``gc`` lists again under the lock).

    :raises InputError: a name in ``names`` has neither.
    """
    return tuple(_environment(project, name) for name in _environment_names(project, names))


def collect_garbage(project: Project, *, keep: int, names: Sequence[str] = ()) -> GcResult:
    """Remove old generations: keep the live one and the ``keep`` newest complete ones per
    environment; remove every incomplete one (a killed build's leftovers) and their logs.

    Takes each environment's build lock first and lists its generations (which is live, which is
    complete) only while holding it, so a build that finishes meanwhile is seen as it is (field
    case N48: a listing made before the lock called the build's new live generation incomplete).
    A running build is never touched: its environment is refused with an error naming the lock.
    A generation a process uses (runs from, works in, maps native code from: an ``envforge run``, a
    bench server, a user's own interpreter) is never removed: it is kept and listed in
    :attr:`GcResult.in_use` (issue 41: ``gc --keep 1`` removed it under a running server). Each is
    removed by renaming it out of the listings first (:func:`envforge.env.generations.discard_generation`).

    :raises InputError: ``keep`` < 1, an unknown name, or a build of that environment is running.
    """
    if keep < 1:
        raise InputError(f"--keep {keep}: keep at least 1 generation (the live one is always kept)")
    removed: list[tuple[str, str, int, int]] = []
    kept: list[tuple[str, str]] = []
    busy: list[tuple[str, str, int, str]] = []
    freed = 0
    for name in _environment_names(project, names):
        root = generation_root(project, name)
        if not root.is_dir():
            continue
        with exclusive_generations(root):
            env = list_environments(project, [name])[0]  # under the lock: the listing gc acts on
            complete = [g for g in env.generations if g.complete]
            newest = {g.name for g in complete[-keep:]}
            doomed = [g for g in env.generations if not (g.live or g.name in newest)]
            users = [u for u in generation_users(root) if u.generation in {g.name for g in doomed}] if doomed else []
            busy += [(env.name, u.generation, u.pid, u.command) for u in users]
            doomed = [g for g in doomed if g.name not in {u.generation for u in users}]
            kept += [(env.name, g.name) for g in env.generations if g not in doomed]
            freed += disk_usage(*(g.path for g in doomed)).own_bytes if doomed else 0  # links among them
            for g in doomed:
                discard_generation(g.path)
                if g.log is not None:
                    g.log.unlink(missing_ok=True)
                removed.append((env.name, g.name, g.own_bytes, g.shared_bytes))
            for orphan in root.glob("g*.log"):  # logs of failed builds, whose generation was removed
                if is_generation_name(orphan.stem) and not orphan.with_suffix("").exists():
                    orphan.unlink(missing_ok=True)
            shutil.rmtree(root / TRASH, ignore_errors=True)  # generations whose removal a signal stopped
    return GcResult(tuple(removed), tuple(kept), freed, tuple(busy))
