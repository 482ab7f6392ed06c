"""An environment's generations: ``envs/.generations/<env>/gNNNN`` behind the ``envs/<env>`` link.

A generation is *complete* when its ``.envforge/generation.json`` exists (the build writes it last,
just before the link flip); one without it is what a killed build left behind. This module names
generations (:mod:`envforge.core.state` spells the names), lists them, reads their records, holds
their build lock, and rolls the link back (or forward) to another complete one. A complete
generation that failed verify in ``envforge up`` is *held back*: never made live, its record says
why (:func:`hold_back`), and ``up`` stops instead of building the same failure again
(:func:`held_back`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.core.fs import atomic_write, replace_symlink, sha256_hex
from envforge.core.mutex import exclusive
from envforge.core.state import GENERATIONS_DIR, MUTEX_NAME, StateDir, generation_name, generation_number
from envforge.core.textfile import SMALL_LIMIT, parse_json, read_state
from envforge.recipe.model import ResolvedVariant
from envforge.recipe.project import Project

__all__ = [
    "RollbackResult",
    "TRASH",
    "built_from",
    "current_generation",
    "describe_generation",
    "discard_generation",
    "exclusive_generations",
    "generation_record",
    "generation_root",
    "generations",
    "hold_back",
    "held_back",
    "mark_made_live",
    "relink",
    "next_generation",
    "remove_incomplete",
    "rollback",
]


@dataclass(frozen=True, slots=True)
class RollbackResult:
    """``rollback``: the link and the generations it pointed to before and after."""

    link: Path
    previous: Path
    current: Path


def generation_root(project: Project, name: str) -> Path:
    """``envs/.generations/<name>``: the directory of environment ``name``'s generations and logs."""
    return project.envs_dir / GENERATIONS_DIR / name


def generation_record(gen: Path) -> Path | None:
    """The ``generation.json`` of generation directory ``gen``, or None (an incomplete generation)."""
    for sp in sorted(gen.glob("lib/python3*/site-packages")):
        record = StateDir(sp).generation_record
        if record.exists():
            return record
    return None


def generations(project: Project, name: str) -> list[Path]:
    """Complete generations of environment ``name``, oldest first (``gNNNN`` with a record)."""
    root = generation_root(project, name)
    if not root.is_dir():
        return []
    done = [d for d in root.iterdir() if generation_number(d.name) is not None and generation_record(d) is not None]
    return sorted(done, key=lambda d: generation_number(d.name) or 0)


#: Where a generation goes on its way out (``envs/.generations/<env>/.trash``): nothing lists it, gc empties it.
TRASH = ".trash"


def discard_generation(gen: Path, *, remove: bool = True) -> None:
    """Remove generation directory ``gen`` so that no listing ever sees part of it: it is first renamed
    (one ``rename(2)``, atomic) to ``<root>/.trash/<name>.<pid>.<ns>``, then removed. A signal during
    the removal (a second Ctrl-C: removing a CUDA stack takes tens of seconds) leaves only that trash
    entry, which ``envforge gc`` removes; before, it left a half-deleted generation whose record said
    complete (issue 41). A missing ``gen`` is nothing to do; where the rename fails (another
    filesystem under ``gen``), it is removed in place.

    :param remove: False: only the rename (one system call), the files left in the trash for the next
        build (:func:`remove_incomplete`) or ``gc``: what a build stopped by a signal does, so that the
        first Ctrl-C ends at once instead of after removing gigabytes (23-29 s on a CUDA stack, issue 41).
    """
    trash = gen.parent / TRASH
    try:
        trash.mkdir(exist_ok=True)
        target = trash / f"{gen.name}.{os.getpid()}.{time.monotonic_ns()}"
        os.rename(gen, target)
    except FileNotFoundError:
        if not gen.exists():
            return
        target = gen
    except OSError:
        target = gen
    if remove or target == gen:
        shutil.rmtree(target, ignore_errors=True)


def next_generation(root: Path) -> Path:
    """The directory the next build under ``root`` makes: one past the highest ``gNNNN`` there,
    complete or not (``g0001`` when there is none)."""
    numbers = [n for d in (root.iterdir() if root.is_dir() else []) if (n := generation_number(d.name)) is not None]
    return root / generation_name(max(numbers, default=0) + 1)


@contextmanager
def exclusive_generations(root: Path) -> Iterator[None]:
    """Hold the build lock of one environment's generations directory (``root/.lock``, flock): the
    same file :func:`envforge.core.mutex.exclusive` locks for ``apply-patches``, never waiting.

    :raises InputError: another build (or ``gc``, ``rollback``) of it holds the lock.
    """
    root.mkdir(parents=True, exist_ok=True)
    lock = root / MUTEX_NAME
    held = ExitStack()
    try:
        held.enter_context(exclusive(lock, wait=False))
    except BlockingIOError:
        raise InputError(f"another envforge build of {root.name} is running (lock {lock})") from None
    with held:
        yield


def remove_incomplete(root: Path, keep: Path) -> None:
    """Remove every incomplete generation under ``root`` but ``keep`` (a killed build's leftovers) and
    empty the trash (:func:`discard_generation`)."""
    shutil.rmtree(root / TRASH, ignore_errors=True)
    for d in root.iterdir():
        if generation_number(d.name) is not None and d != keep and generation_record(d) is None:
            discard_generation(d)


def rollback(project: Project, name: str, to: str | None = None) -> RollbackResult:
    """Point ``envs/<name>`` at the complete generation before the live one, or at generation
    ``to`` (``g0003`` or ``3``; older or newer than the live one: rolling forward again). With
    ``to`` and no link yet (``envforge up`` held its first generation back), the link is made.

    :raises InputError: no such environment, no earlier generation, or ``to`` names no complete
        generation (the message lists the ones there are).
    """
    link = project.env_path(name)
    first = to is not None and not link.exists() and not link.is_symlink()  # none live yet (up held it back)
    if not link.is_symlink() and not first:
        raise InputError(f"{link} is not an envforge environment link", hint="build it with `envforge build`")
    with exclusive_generations(generation_root(project, name)):
        if first:
            target = _named_generation(name, generations(project, name), str(to))
            replace_symlink(link, target)
            mark_made_live(target)
            return RollbackResult(link, target, target)
        live = (link.parent / os.readlink(link)).resolve()
        done = generations(project, name)
        if to is not None:
            target = _named_generation(name, done, to)
        else:
            live_number = generation_number(live.name) or 0
            earlier = [g for g in done if (generation_number(g.name) or 0) < live_number]
            if not earlier:
                raise InputError(
                    f"{name} has no generation before {live.name} to roll back to",
                    hint="`envforge envs` lists the generations; `rollback --to gN` picks one",
                )
            target = earlier[-1]
        replace_symlink(link, target)
        mark_made_live(target)
    return RollbackResult(link, live, target)


def _named_generation(name: str, done: Sequence[Path], to: str) -> Path:
    number = to[1:] if to[:1] in ("g", "G") else to
    found = [g for g in done if number.isdigit() and generation_number(g.name) == int(number)]
    if not found:
        have = ", ".join(g.name for g in done) or "none"
        raise InputError(
            f"{name} has no complete generation {to!r} (generations: {have})",
            hint="`envforge envs` lists every environment's generations",
        )
    return found[0]


def current_generation(link: Path, lock: Path, variant: ResolvedVariant) -> Path | None:
    """The generation ``link`` points at when it was built from exactly ``lock`` (same sha256),
    else None (no link, or another lock).

    The lock records the patchset digests and the env profile, so the same lock bytes mean the
    same packages, patches and profile: ``envforge up`` then verifies instead of rebuilding.

    :param variant: what the lock is of (names the rebuild command an error gives).
    :raises InputError: the live generation's ``generation.json`` is damaged (:func:`describe_generation`).
    """
    if not link.is_symlink():
        return None
    live = (link.parent / os.readlink(link)).resolve()
    record = describe_generation(
        live,
        hint=f"build a new generation: `envforge up {variant.recipe} --variant "
        f"{variant.variant} --rebuild` ({live.name} stays for rollback)",
    )
    return live if record.get("lock-digest") == "sha256:" + sha256_hex(lock.read_bytes()) else None


def describe_generation(
    gen: Path, *, hint: str = "build a new generation: `envforge build RECIPE --variant VARIANT`"
) -> Mapping[str, Any]:
    """The ``generation.json`` of a generation directory ({} when missing).

    :param hint: the next step an error gives.
    :raises InputError: the record is not a regular file (a FIFO, a device, a directory), larger
        than 1 MiB, or not JSON; the message names it.
    """
    f = generation_record(gen)
    if f is None:
        return {}
    try:
        data: Any = parse_json(read_state(f, what="generation record", limit=SMALL_LIMIT, hint=hint), label=str(f))
    except FileNotFoundError:  # removed since the glob
        return {}
    return data if isinstance(data, Mapping) else {}


def hold_back(gen: Path, kinds: Sequence[str], cause: str) -> None:
    """Record in ``gen``'s ``generation.json`` that it failed verify (``verify-failed``: the finding
    ``kinds`` and the ``cause`` with its fix): :func:`held_back` reads it, ``envforge up`` never flips to it."""
    record = generation_record(gen)
    if record is None:
        return
    data = dict(describe_generation(gen))
    data["verify-failed"] = {"kinds": sorted(set(kinds)), "cause": cause}
    atomic_write(record, (json.dumps(data, indent=2) + "\n").encode())


def mark_made_live(gen: Path) -> None:
    """Record in ``gen``'s ``generation.json`` that ``envforge rollback --to`` made it live although it
    failed verify when it was built (``made-live``: who and when, POSIX seconds): ``envs`` then no
    longer calls it "never live", and ``envforge up`` says it failed verify when built instead of
    blaming files changed since (issue 41). A generation that never failed verify is left as it is."""
    record = generation_record(gen)
    data = dict(describe_generation(gen))
    if record is None or "verify-failed" not in data:
        return
    data["made-live"] = {"by": "envforge rollback --to", "at": round(time.time(), 3)}
    atomic_write(record, (json.dumps(data, indent=2) + "\n").encode())


def _complete(link: Path) -> list[Path]:
    """The complete generations of environment link ``link``, oldest first."""
    root = link.parent / GENERATIONS_DIR / link.name
    if not root.is_dir():
        return []
    return sorted(
        (d for d in root.iterdir() if generation_number(d.name) is not None and generation_record(d)),
        key=lambda d: generation_number(d.name) or 0,
    )


def built_from(link: Path, lock: Path) -> Path | None:
    """The newest complete generation of ``link`` that is not live, was built from exactly ``lock``
    (same sha256) and never failed verify (:func:`hold_back`), else None: what ``envforge up`` makes
    live again instead of building a duplicate after a ``rollback`` (issue 44)."""
    live = (link.parent / os.readlink(link)).resolve() if link.is_symlink() else None
    digest = "sha256:" + sha256_hex(lock.read_bytes())
    for gen in reversed(_complete(link)):
        record = describe_generation(gen)
        if gen.resolve() != live and record.get("lock-digest") == digest and "verify-failed" not in record:
            return gen
    return None


def relink(link: Path, gen: Path, *, why: str = "") -> None:
    """Point ``link`` at generation ``gen`` (one ``os.replace``) under the generations' build lock, and
    say so in ``gen``'s build log (``r-default -> g0002`` and ``why``, e.g. `` (made live again by ...)``)."""
    with exclusive_generations(gen.parent):
        link.parent.mkdir(parents=True, exist_ok=True)
        replace_symlink(link, gen)
        with open(gen.parent / f"{gen.name}.log", "a", encoding="utf-8") as log:
            log.write(f"{link.name} -> {gen.name}{why}\n")


def held_back(link: Path, lock: Path) -> tuple[Path, Mapping[str, Any]] | None:
    """The newest complete generation of ``link`` built from exactly ``lock`` (same sha256) when it
    is not live and failed verify (:func:`hold_back`): ``(directory, its verify-failed record)``,
    else None. A build from the same lock bytes installs the same files from the same uv cache, so
    it would fail the same way."""
    done = _complete(link)
    if not done:
        return None
    newest = done[-1]
    live = (link.parent / os.readlink(link)).resolve() if link.is_symlink() else None
    record = describe_generation(newest)
    failed = record.get("verify-failed")
    if newest.resolve() == live or not isinstance(failed, Mapping):
        return None
    if record.get("lock-digest") != "sha256:" + sha256_hex(lock.read_bytes()):
        return None
    return newest, failed
