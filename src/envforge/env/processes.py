"""Processes still running from an environment's generation that is no longer live (field case B39).

A process started as ``envs/<env>/bin/python`` has ``sys.prefix`` ``envs/<env>``: every lazy import
and every ``multiprocessing`` spawn child goes through the link, so after ``build`` or ``rollback``
flips it the process mixes the generation it started from with the new one; one started from
``envs/.generations/<env>/gNNNN/bin/python`` keeps running generation ``gNNNN`` after the live one
moved on. Nothing in the process warns. :func:`stale_processes` finds both kinds by reading
``/proc`` (Linux only; elsewhere, or without ``/proc``, it finds nothing and :func:`can_scan` says so):

* ``/proc/<pid>/cmdline`` and ``exe``: a path under ``.generations/<env>/gNNNN`` (pinned to gNNNN,
  stale when gNNNN is not live), or under the link ``envs/<env>`` (relative paths taken from
  the process's ``cwd``), stale when the process started before the link's last flip (the link's
  mtime: ``os.replace`` writes a new link; the start from ``/proc/<pid>/stat`` and ``/proc/uptime``);
* ``/proc/<pid>/cwd``: a working directory inside a generation that is no longer live;
* ``/proc/<pid>/maps``: the generations its loaded native code (``.so``) comes from, shown.

:func:`generation_users` answers the question ``gc`` asks before it removes a generation: which
processes run from it, have their working directory in it or map its native code, live or not.

Processes this user may not inspect are skipped. Reads only.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.state import GENERATIONS_DIR

__all__ = ["GenerationUser", "StaleProcess", "can_scan", "generation_users", "stale_processes", "warning_lines"]

_GEN = re.compile(r"^g[0-9]{4,}$")
_COMMAND_LIMIT = 200


@dataclass(frozen=True, slots=True)
class StaleProcess:
    """A process running (wholly or in part) from a generation of ``env`` that is no longer live.

    :ivar pid: its process id.
    :ivar command: its command line, arguments joined by spaces, at most 200 characters.
    :ivar generation: the generation it is pinned to (``g0001``), or None when it was started through
        the link (``via == "link"``).
    :ivar via: ``"generation"`` (a path under ``.generations/<env>/gNNNN``), ``"link"`` (through
        ``envs/<env>``, started before the link's last flip) or ``"cwd"`` (its working directory).
    :ivar live: the generation the link points at now.
    :ivar loaded: generations its mapped native code comes from (``/proc/<pid>/maps``), sorted.
    """

    pid: int
    command: str
    generation: str | None
    via: str
    live: str | None
    loaded: tuple[str, ...] = ()

    @property
    def why(self) -> str:
        """One clause: what is stale about it."""
        if self.via == "link":
            return (
                f"was started through the link before it was flipped to {self.live}: its lazy imports and "
                f"spawned workers now come from {self.live}"
            )
        where = "still runs from" if self.via == "generation" else "still has its working directory in"
        return f"{where} {self.generation}, which is no longer live (live: {self.live})"

    def as_dict(self) -> dict[str, Any]:
        """JSON shape (``envforge envs --json``, docs/verify.md)."""
        return {
            "pid": self.pid,
            "command": self.command,
            "generation": self.generation,
            "via": self.via,
            "live": self.live,
            "loaded": list(self.loaded),
        }


@dataclass(frozen=True, slots=True)
class GenerationUser:
    """A process that uses generation ``generation``: it runs from it (its ``exe`` or a path in its
    command line), has its working directory in it, or maps native code from it.

    :ivar pid: its process id.
    :ivar command: its command line, at most 200 characters.
    :ivar generation: ``gNNNN``.
    """

    pid: int
    command: str
    generation: str


def generation_users(root: Path, *, proc: Path = Path("/proc"), skip: Sequence[int] = ()) -> tuple[GenerationUser, ...]:
    """Every (process, generation) pair where a process uses a generation under ``root``
    (``envs/.generations/<env>``), sorted by pid then generation; this process is never counted.
    Without a readable ``/proc`` (:func:`can_scan`), nothing is found.

    :param skip: pids not to count.
    """
    if not can_scan(proc):
        return ()
    roots = _spellings(root)
    ignore = {os.getpid(), *skip}
    found = []
    for entry in sorted((e for e in os.listdir(proc) if e.isdigit()), key=int):
        pid = int(entry)
        seen = None if pid in ignore else _paths(proc, pid)
        if seen is None:
            continue
        command, cwd, paths = seen
        gens = {g for p in [*paths, *([cwd] if cwd else [])] if (g := _generation_in(p, roots)) is not None}
        found += [GenerationUser(pid, command, g) for g in sorted(gens | set(_loaded(proc, pid, roots)))]
    return tuple(found)


def can_scan(proc: Path = Path("/proc")) -> bool:
    """Whether ``proc`` is a Linux ``/proc`` this module can read (``/proc/self/cmdline`` exists)."""
    return (proc / "self" / "cmdline").exists()


def _read(path: Path, limit: int = 1 << 20) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def _readlink(path: Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _start_time(proc: Path, pid: int) -> float | None:
    """POSIX time ``pid`` started: now, less the uptime (``/proc/uptime``, 10 ms) since its start
    (field 22 of ``/proc/<pid>/stat``, clock ticks after boot). ``btime`` of ``/proc/stat`` would do
    too, but is truncated to whole seconds: a process started just after a flip would seem older."""
    stat, uptime = _read(proc / str(pid) / "stat"), _read(proc / "uptime")
    if stat is None or uptime is None:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()  # the command name in parentheses may hold spaces
    try:
        return time.time() - (float(uptime.split()[0]) - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (ValueError, IndexError, OSError):
        return None


def _generation_in(path: str, roots: Sequence[str]) -> str | None:
    """``gNNNN`` when ``path`` lies in ``<root>/gNNNN`` for one of ``roots``."""
    for root in roots:
        if path.startswith(root + os.sep):
            first = path[len(root) + 1 :].split(os.sep, 1)[0]
            if _GEN.match(first):
                return first
    return None


def _spellings(path: Path) -> list[str]:
    """``path`` made absolute as written and with links resolved (``/tmp`` may be a link)."""
    return list(dict.fromkeys([os.path.normpath(os.path.abspath(path)), os.path.realpath(path)]))


def stale_processes(link: Path, *, proc: Path = Path("/proc"), skip: Sequence[int] = ()) -> tuple[StaleProcess, ...]:
    """Processes running from a generation of the environment ``link`` (``envs/<env>``) that is no
    longer live, or started through ``link`` before its last flip; sorted by pid.

    :param proc: the ``/proc`` to read (tests pass another); without one, nothing is found.
    :param skip: pids not to report (this process is never reported).
    """
    if not can_scan(proc) or not link.is_symlink():
        return ()
    roots = _spellings(link.parent / GENERATIONS_DIR / link.name)
    links = _spellings(link.parent.resolve() / link.name) + [os.path.normpath(os.path.abspath(link))]
    live = os.path.basename(os.path.realpath(link))
    try:
        flipped = os.lstat(link).st_mtime
    except OSError:
        return ()
    ignore = {os.getpid(), *skip}
    found = []
    for entry in sorted((e for e in os.listdir(proc) if e.isdigit()), key=int):
        pid = int(entry)
        if pid in ignore:
            continue
        if (hit := _inspect(proc, pid, roots, links, live, flipped)) is not None:
            found.append(hit)
    return tuple(found)


def _paths(proc: Path, pid: int) -> tuple[str, str | None, list[str]] | None:
    """``(command, cwd, paths)`` of process ``pid``: its command line (at most 200 characters), its
    working directory, and the paths it runs (the paths in its command line, taken from ``cwd``, and
    its ``exe``); None when it is gone, a kernel thread, or not ours to read."""
    raw = _read(proc / str(pid) / "cmdline")
    if not raw:
        return None
    argv = [a.decode("utf-8", errors="replace") for a in raw.rstrip(b"\0").split(b"\0")]
    cwd = _readlink(proc / str(pid) / "cwd")
    paths = [os.path.normpath(os.path.join(cwd or "/", a)) for a in argv if "/" in a]
    exe = _readlink(proc / str(pid) / "exe")
    if exe:
        paths.append(exe)
    return " ".join(argv)[:_COMMAND_LIMIT], cwd, paths


def _inspect(
    proc: Path, pid: int, roots: Sequence[str], links: Sequence[str], live: str, flipped: float
) -> StaleProcess | None:
    seen = _paths(proc, pid)
    if seen is None:
        return None
    command, cwd, paths = seen
    pinned = next((g for p in paths if (g := _generation_in(p, roots)) is not None), None)
    via = "generation"
    if pinned is None and any(p == lk or p.startswith(lk + os.sep) for p in paths for lk in links):
        started = _start_time(proc, pid)
        if started is None or started >= flipped:
            return None
        return StaleProcess(pid, command, None, "link", live, _loaded(proc, pid, roots))
    if pinned is None and cwd is not None:
        pinned, via = _generation_in(cwd, roots), "cwd"
    if pinned is None or pinned == live:
        return None
    return StaleProcess(pid, command, pinned, via, live, _loaded(proc, pid, roots))


def _loaded(proc: Path, pid: int, roots: Sequence[str]) -> tuple[str, ...]:
    maps = _read(proc / str(pid) / "maps", limit=16 << 20) or b""
    gens = {
        g
        for line in maps.decode("utf-8", errors="replace").splitlines()
        if (parts := line.split(None, 5))[5:] and (g := _generation_in(parts[5], roots)) is not None
    }
    return tuple(sorted(gens))


def warning_lines(env: str, found: Sequence[StaleProcess]) -> list[str]:
    """The warning lines ``build``, ``rollback`` and ``envs`` print: one per process, then the remedy.

    E.g. ``warning: envs/flip-default: pid 4242 still runs from g0001, which is no longer live (live:
    g0002): python server.py`` (``warning:`` is the caller's).
    """
    if not found:
        return []
    lines = [f"envs/{env}: pid {p.pid} {p.why}: {p.command}" for p in found]
    lines.append(
        f"envs/{env}: restart {'it' if len(found) == 1 else 'them'} to run the live generation; "
        f"start servers from envs/{GENERATIONS_DIR}/{env}/<generation>/bin/python (as `envforge bench` "
        "does) so that a later build or rollback cannot change what they import"
    )
    return lines
