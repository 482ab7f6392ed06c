"""Server lifecycle: start an inference server, wait until it is ready, always stop it.

The server runs in its own process group (``start_new_session``) with its output in a log file.
Readiness is the health endpoint answering 200 *while the process is alive*: if the process exits
first, that is a crash, reported with the tail of its log (the log is never grepped for
"Exception"). Loading a 547 GB checkpoint takes over 10 minutes, so the default load timeout is 30
minutes and progress is reported at a fixed interval. Stopping sends SIGTERM to the whole group,
waits a grace period, then SIGKILLs the group, so no worker (TP ranks, detokenizer) is left behind.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from envforge.bench.client import Endpoint, get_status
from envforge.core.errors import ExternalToolError, InputError

__all__ = [
    "RunningServer",
    "ServerCrashed",
    "ServerLaunch",
    "ServerTimeout",
    "group_members",
    "pinned_interpreter",
    "port_in_use",
    "running_server",
    "server_argv",
    "start_server",
]

TAIL_LINES = 30
Progress = Callable[[str], None]


class ServerCrashed(ExternalToolError):
    """The server process exited before it was ready, or while it was measured (exit 3)."""


class ServerTimeout(ExternalToolError):
    """The server did not become ready within the load timeout; its group was stopped (exit 3)."""


@dataclass(frozen=True, slots=True)
class ServerLaunch:
    """How to start one server: full ``argv``, the child's full ``env``, readiness URL, log file.

    ``argv[0]`` is pinned (:func:`pinned_interpreter`): ``envs/<env>/bin/python`` becomes
    ``envs/.generations/<env>/gNNNN/bin/python``, the generation live now, so the server and its
    workers keep importing from it when a build or rollback flips the link (B39), and the command
    printed is the one that runs.
    """

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    health_url: str
    log_path: Path

    def __post_init__(self) -> None:
        if self.argv:
            object.__setattr__(self, "argv", (pinned_interpreter(self.argv[0]), *self.argv[1:]))


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``, read from ``/proc``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def port_in_use(host: str, port: int) -> bool:
    """Whether something already accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.replace("\r", "\n").strip().splitlines()[-lines:])


class RunningServer:
    """A started server. ``stop()`` is idempotent; use :func:`running_server` to never forget it."""

    def __init__(self, launch: ServerLaunch, proc: subprocess.Popen[bytes], stop_grace_s: float = 20.0) -> None:
        self.launch = launch
        self.proc = proc
        self.pgid = proc.pid
        self.stop_grace_s = stop_grace_s
        self._stopped = False

    def alive(self) -> bool:
        """Whether the server's main process is still running."""
        return self.proc.poll() is None

    def log_tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of the server log."""
        return _log_tail(self.launch.log_path, lines)

    def crashed(self, when: str) -> ServerCrashed:
        """The error for a server that exited; ``when`` is e.g. ``"while loading (after 7.1 s)"``."""
        return ServerCrashed(
            f"server '{self.launch.name}' exited with status {self.proc.returncode} {when}",
            tool=self.launch.name,
            argv=self.launch.argv,
            returncode=self.proc.returncode,
            stderr_tail=self.log_tail(),
            hint=f"full log: {self.launch.log_path}",
        )

    def stop(self, grace_s: float | None = None) -> None:
        """SIGTERM the group, wait up to ``grace_s`` seconds (default ``stop_grace_s``) for it to
        leave, then SIGKILL the group and wait (at most 5 s) until no member is left. Interrupted
        during the grace (a second signal), the group is SIGKILLed at once and the interruption goes on."""
        if self._stopped:
            return
        _signal_group(self.pgid, signal.SIGTERM)
        deadline = time.monotonic() + (self.stop_grace_s if grace_s is None else grace_s)
        try:
            while time.monotonic() < deadline and (self.alive() or group_members(self.pgid)):
                time.sleep(0.05)
        except BaseException:  # a second Ctrl-C or SIGTERM during the grace: no member may outlive bench
            _signal_group(self.pgid, signal.SIGKILL)
            self._stopped = True
            raise
        _signal_group(self.pgid, signal.SIGKILL)
        self.proc.wait()
        deadline = time.monotonic() + 5.0
        while group_members(self.pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stopped = True


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _launch(launch: ServerLaunch, stop_grace_s: float) -> RunningServer:
    launch.log_path.parent.mkdir(parents=True, exist_ok=True)
    with launch.log_path.open("ab") as log:
        try:
            proc = subprocess.Popen(
                list(launch.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(launch.env),
                start_new_session=True,
            )
        except OSError as exc:
            raise ServerCrashed(
                f"cannot start server '{launch.name}': {exc.strerror}",
                tool=launch.name,
                argv=launch.argv,
                returncode=None,
                hint="is the environment built? run `envforge build`",
            ) from None
    return RunningServer(launch, proc, stop_grace_s)


def _wait_ready(server: RunningServer, timeout_s: float, progress: Progress, every_s: float, poll_s: float) -> float:
    start = time.monotonic()
    last_report, answer = start, "no answer yet"
    while True:
        elapsed = time.monotonic() - start
        if not server.alive():
            raise server.crashed(f"while loading (after {elapsed:.1f} s)")
        status = get_status(server.launch.health_url, timeout_s=min(10.0, max(1.0, timeout_s - elapsed)))
        if status == 200 and server.alive():
            return time.monotonic() - start
        answer = f"HTTP {status}" if isinstance(status, int) else status
        if time.monotonic() - start >= timeout_s:
            raise ServerTimeout(
                f"server '{server.launch.name}' was not ready after {timeout_s:g} s "
                f"(GET {server.launch.health_url}: {answer}); stopped it",
                tool=server.launch.name,
                argv=server.launch.argv,
                returncode=None,
                stderr_tail=server.log_tail(),
                hint=f"raise load-timeout-s in [verify.smoke] if it is still loading; full log: "
                f"{server.launch.log_path}",
            )
        if time.monotonic() - last_report >= every_s:
            last_report = time.monotonic()
            last_line = (server.log_tail(1) or "(log empty)")[:160]
            progress(
                f"waiting for '{server.launch.name}' (pid {server.pgid}): {elapsed:.0f} s of "
                f"{timeout_s:g} s, health: {answer}; log: {last_line}"
            )
        time.sleep(poll_s)


def start_server(
    launch: ServerLaunch,
    *,
    load_timeout_s: float,
    progress: Progress = lambda _: None,
    progress_every_s: float = 15.0,
    poll_s: float = 0.5,
    stop_grace_s: float = 20.0,
) -> tuple[RunningServer, float]:
    """Start ``launch`` and wait until its health URL answers 200 while the process lives.

    ``stop_grace_s`` is the time between SIGTERM and SIGKILL when the server has to be stopped.

    :returns: the running server and the load time in seconds.
    :raises InputError: the port is already in use (another server would answer our requests).
    :raises ServerCrashed: the process exited while loading (message has the log tail).
    :raises ServerTimeout: not ready after ``load_timeout_s`` seconds.
    On any error the process group is stopped before raising.
    """
    host, port = _host_port(launch.health_url)
    if port_in_use(host, port):
        raise InputError(
            f"port {port} on {host} is already in use; a server started there would not be the one answering",
            hint="stop what listens there, set port in [verify.smoke], or measure it with --url",
        )
    server = _launch(launch, stop_grace_s)
    try:
        return server, _wait_ready(server, load_timeout_s, progress, progress_every_s, poll_s)
    except BaseException:
        server.stop()
        raise


def _host_port(url: str) -> tuple[str, int]:
    ep = Endpoint.from_url(url)
    return ep.host, ep.port


@contextmanager
def running_server(
    launch: ServerLaunch,
    *,
    load_timeout_s: float,
    progress: Progress = lambda _: None,
    progress_every_s: float = 15.0,
    stop_grace_s: float = 20.0,
) -> Iterator[tuple[RunningServer, float]]:
    """Context manager around :func:`start_server` that always stops the server on exit."""
    server, load_s = start_server(
        launch,
        load_timeout_s=load_timeout_s,
        progress=progress,
        progress_every_s=progress_every_s,
        stop_grace_s=stop_grace_s,
    )
    try:
        yield server, load_s
    finally:
        server.stop()


def pinned_interpreter(python: str | Path) -> str:
    """``python`` with the links of its directory resolved, the file name kept:
    ``envs/fi-default/bin/python`` -> ``/abs/envs/.generations/fi-default/g0002/bin/python``.

    The file itself stays unresolved: a venv's ``bin/python`` is a link to the base interpreter, and
    Python finds its venv (``pyvenv.cfg``) from the path it was started as. A bare name (``python``,
    looked up on ``PATH``) is returned as it is.
    """
    text = str(python)
    head, name = os.path.split(text)
    return os.path.join(os.path.realpath(head), name) if head else text


def server_argv(python: Path, tail: Sequence[str]) -> tuple[str, ...]:
    """The argv of a server started with the environment's interpreter, pinned to its generation."""
    return (pinned_interpreter(python), *tail)
