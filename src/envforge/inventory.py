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
import re
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.errors import InputError
from envforge.project import Project

__all__ = ["EnvInfo", "GcResult", "GenerationInfo", "collect_garbage", "list_environments"]

_GEN = re.compile(r"^g(\d{4,})$")


@dataclass(frozen=True, slots=True)
class GenerationInfo:
    """One generation directory.

    :ivar name: ``g0001``...
    :ivar complete: has its manifest (``generation.json``); False for a killed build's leftovers.
    :ivar live: the environment link points at it.
    :ivar recipe, variant, lock_digest: from ``generation.json`` (None when incomplete).
    :ivar size_bytes: disk usage (allocated blocks, each inode counted once).
    :ivar built_at: POSIX time the manifest was written (the directory's mtime when incomplete).
    :ivar log: the build log (``<name>.log`` beside the directory), or None.
    """

    name: str
    path: Path
    complete: bool
    live: bool
    recipe: str | None
    variant: str | None
    lock_digest: str | None
    size_bytes: int
    built_at: float
    log: Path | None

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of ``envforge envs --json`` (docs/cli.md)."""
        return {"name": self.name, "path": str(self.path), "complete": self.complete, "live": self.live,
                "recipe": self.recipe, "variant": self.variant, "lock_digest": self.lock_digest,
                "size_bytes": self.size_bytes, "built_at": round(self.built_at, 3),
                "log": None if self.log is None else str(self.log)}


@dataclass(frozen=True, slots=True)
class EnvInfo:
    """One environment: ``envs/<name>`` and its generations, oldest first.

    :ivar live: the generation the link points at, or None (no link, or a dangling one).
    """

    name: str
    link: Path
    live: str | None
    generations: tuple[GenerationInfo, ...]

    def as_dict(self) -> dict[str, Any]:
        """JSON shape of ``envforge envs --json``."""
        return {"name": self.name, "link": str(self.link), "live": self.live,
                "generations": [g.as_dict() for g in self.generations]}


@dataclass(frozen=True, slots=True)
class GcResult:
    """``gc``: what was removed (``(env, generation, bytes)``), what was kept, and why not more."""

    removed: tuple[tuple[str, str, int], ...]
    kept: tuple[tuple[str, str], ...]

    @property
    def freed_bytes(self) -> int:
        return sum(size for _, _, size in self.removed)


def _generation_file(gen: Path) -> Path | None:
    found = sorted(gen.glob("lib/python3*/site-packages/.envforge/generation.json"))
    return found[0] if found else None


def disk_usage(path: Path) -> int:
    """Bytes allocated under ``path`` (``st_blocks * 512``), each inode once, symlinks not followed."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [path]
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
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(e.path))
    return total


def _generation(gen: Path, live: Path | None) -> GenerationInfo:
    manifest = _generation_file(gen)
    record: dict[str, Any] = {}
    if manifest is not None:
        try:
            record = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            record = {}
    log = gen.with_name(gen.name + ".log")
    return GenerationInfo(
        name=gen.name, path=gen, complete=manifest is not None, live=live is not None and gen == live,
        recipe=record.get("recipe"), variant=record.get("variant"), lock_digest=record.get("lock-digest"),
        size_bytes=disk_usage(gen), built_at=(manifest or gen).stat().st_mtime, log=log if log.is_file() else None)


def _live(link: Path) -> Path | None:
    if not link.is_symlink():
        return None
    target = (link.parent / os.readlink(link)).resolve()
    return target if target.is_dir() else None


def list_environments(project: Project, names: Sequence[str] = ()) -> tuple[EnvInfo, ...]:
    """Every environment of ``project`` (or only ``names``), sorted by name.

    An environment is a name with a link under ``envs/`` or a directory under
    ``envs/.generations/``. Reads only.

    :raises InputError: a name in ``names`` has neither.
    """
    root = project.envs_dir / ".generations"
    found = {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()
    if project.envs_dir.is_dir():
        found |= {p.name for p in project.envs_dir.iterdir() if p.is_symlink()}
    for name in names:
        if name not in found:
            raise InputError(f"no environment named '{name}' in {project.envs_dir}",
                             hint=f"environments: {', '.join(sorted(found)) or 'none'}")
    out = []
    for name in sorted(names or found):
        link = project.env_path(name)
        live = _live(link)
        gens = sorted((d for d in (root / name).iterdir() if _GEN.match(d.name) and d.is_dir())
                      if (root / name).is_dir() else [], key=lambda d: int(d.name[1:]))
        out.append(EnvInfo(name, link, live.name if live is not None else None,
                           tuple(_generation(g, live) for g in gens)))
    return tuple(out)


def collect_garbage(project: Project, *, keep: int, names: Sequence[str] = ()) -> GcResult:
    """Remove old generations: keep the live one and the ``keep`` newest complete ones per
    environment; remove every incomplete one (a killed build's leftovers) and their logs.

    Takes each environment's build lock, so a running build is never touched (its environment is
    then skipped with an error naming the lock).

    :raises InputError: ``keep`` < 1, an unknown name, or a build of that environment is running.
    """
    from envforge.build import exclusive_generations

    if keep < 1:
        raise InputError(f"--keep {keep}: keep at least 1 generation (the live one is always kept)")
    removed: list[tuple[str, str, int]] = []
    kept: list[tuple[str, str]] = []
    for env in list_environments(project, names):
        root = project.envs_dir / ".generations" / env.name
        if not root.is_dir():
            continue
        with exclusive_generations(root):
            complete = [g for g in env.generations if g.complete]
            newest = {g.name for g in complete[-keep:]}
            for g in env.generations:
                if g.live or g.name in newest:
                    kept.append((env.name, g.name))
                    continue
                shutil.rmtree(g.path, ignore_errors=True)
                if g.log is not None:
                    g.log.unlink(missing_ok=True)
                removed.append((env.name, g.name, g.size_bytes))
            for orphan in root.glob("g*.log"):  # logs of failed builds, whose generation was removed
                if _GEN.match(orphan.stem) and not orphan.with_suffix("").exists():
                    orphan.unlink(missing_ok=True)
            shutil.rmtree(root / ".trash", ignore_errors=True)  # left by earlier envforge versions
    return GcResult(tuple(removed), tuple(kept))
