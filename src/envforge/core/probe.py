"""The probe runner: the only code that starts an environment's own interpreter.

A probe is a small Python script run by the target environment's interpreter; it prints one JSON
object as the last line of its standard output. The runner starts it in its own process group
(:func:`envforge.core.lifeline.spawned`), enforces a hard timeout, and on timeout kills the whole group so
no child (an NCCL worker, a spawned process) is left behind (field case B12); the lifeline kills the
group too when the runner's own process dies first (SIGKILL, a fleet agent stopped by Ray).

A caller with a time limit of its own (a fleet node's verify, which its driver stops at ``--timeout``)
wraps its work in :func:`envforge.core.deadline.deadline` (also importable from here): every probe started
inside ends by then, so the caller answers before its own limit, and stopping the caller from outside
never orphans a probe's process group.
"""

from __future__ import annotations

import io
import json
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from envforge.core.deadline import cut, deadline
from envforge.core.errors import ExternalToolError
from envforge.core.lifeline import kill_group, spawned

__all__ = [
    "ProbeError",
    "ProbeResult",
    "ProbeTimeout",
    "deadline",
    "env_python",
    "probe_group",
    "run_probe",
    "stop_running_probes",
]

_TAIL_LINES = 20
#: Most bytes of a probe's standard output read (its JSON line included; the largest, the env probe on
#: a CUDA stack of 170 distributions, prints well under 1 MiB): past it the group is killed (issue 41: a
#: module printing 1 GiB at import took the runner to 2 GB of memory in 3 s).
STDOUT_LIMIT = 64 << 20
#: Bytes of a probe's standard error kept: the last ones (what errors end with); the rest is read and dropped.
STDERR_KEEP = 256 << 10
# Probes running now, in any thread, by the group they were started in (:func:`probe_group`; None: none):
# a caller unwinding from a signal stops its group's (:func:`stop_running_probes`) instead of waiting for
# their timeouts. Set and dict operations are atomic under the GIL.
_RUNNING: dict[subprocess.Popen[str], object] = {}
_GROUP: ContextVar[object] = ContextVar("envforge_probe_group", default=None)


class ProbeError(ExternalToolError):
    """The probe could not start, exited non-zero, or printed no JSON (exit 3)."""


class ProbeTimeout(ProbeError):
    """The probe ran past its timeout (or its caller's :func:`envforge.core.deadline.deadline`, then
    ``deadline_s`` is set); its whole process group was killed."""


def _deadline_timeout(limit: float, argv: Sequence[str], pid: int | None = None, stderr: str = "") -> ProbeTimeout:
    what = "was not started" if pid is None else f"was killed (process group {pid})"
    exc = ProbeTimeout(
        f"probe ran past its caller's {limit:.3g} s limit and {what}",
        tool="python",
        argv=list(argv[:2]) + ["<probe>"],
        returncode=None,
        stderr_tail=_tail(stderr),
    )
    exc.deadline_s = limit
    return exc


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What a probe printed: ``data`` is the parsed JSON of its last stdout line; ``elapsed_s`` seconds."""

    data: Any
    stderr: str
    elapsed_s: float


def env_python(env: Path) -> Path:
    """The interpreter of a virtual environment (``<env>/bin/python``); ``env`` may be a symlink."""
    return env / "bin" / "python"


def _tail(text: str) -> str:
    return "\n".join(text.strip().splitlines()[-_TAIL_LINES:])


def run_probe(
    python: Path,
    script: str,
    *,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
    interpreter_flags: Sequence[str] = (),
    clock: Any = None,
) -> ProbeResult:
    """Run ``script`` (Python source) with ``python`` and parse the JSON object it prints last.

    :param python: the environment's interpreter.
    :param args: extra ``sys.argv`` entries for the script.
    :param env: the full environment for the child (default: inherit this process's).
    :param timeout_s: hard limit in seconds; on expiry the process group is killed. Inside a
        :func:`envforge.core.deadline.deadline` block, cut to what is left of it.
    :param interpreter_flags: flags before ``-c`` (e.g. ``["-I"]``, ``["-S"]``).
    :param clock: a ``time.monotonic``-like callable (injected for tests); default ``time.monotonic``.
    :raises ProbeTimeout: ran past ``timeout_s`` or the caller's deadline (``deadline_s`` set; raised
        without starting the probe when nothing is left of it).
    :raises ProbeError: could not start, non-zero exit, no JSON on the last stdout line, or more than
        :data:`STDOUT_LIMIT` bytes on standard output (the group is killed at once; standard error is
        read to its end, its last :data:`STDERR_KEEP` bytes kept).
    """
    now = clock or time.monotonic
    argv = [str(python), *interpreter_flags, "-c", script, *args]
    limit = cut(timeout_s)
    if limit.limit_s is not None and limit.expired:
        raise _deadline_timeout(limit.limit_s, argv)
    start = now()
    try:
        # Under the lifeline: the group is killed when the block ends (nothing left behind, even
        # children that outlived the probe), and when this process dies before that.
        with spawned(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env) if env is not None else None
        ) as proc:
            _RUNNING[proc] = _GROUP.get()
            out, err, ended = _bounded_output(proc, limit.timeout_s)
            try:
                if ended == "flooded":
                    raise ProbeError(
                        f"probe printed more than {STDOUT_LIMIT >> 20} MiB on standard output and was "
                        f"killed (process group {proc.pid}): something the interpreter runs prints "
                        "without end (start-up code, a module at import)",
                        tool="python",
                        argv=argv[:2] + ["<probe>"],
                        returncode=None,
                        stderr_tail=_tail(err),
                        hint="run the environment's `python -c pass` and see what it prints",
                    )
                if ended == "timeout":
                    if limit.limit_s is not None:
                        raise _deadline_timeout(limit.limit_s, argv, proc.pid, err)
                    raise ProbeTimeout(
                        f"probe ran past its {timeout_s:g} s limit and was killed (process group {proc.pid})",
                        tool="python",
                        argv=argv[:2] + ["<probe>"],
                        returncode=None,
                        stderr_tail=_tail(err),
                    )
            finally:
                _RUNNING.pop(proc, None)
    except OSError as exc:
        raise ProbeError(
            f"cannot start {python}: {exc.strerror}",
            tool="python",
            argv=argv,
            returncode=None,
            hint="is the environment built? run `envforge build`",
        ) from None
    elapsed = now() - start
    if proc.returncode != 0:
        raise ProbeError(
            f"probe exited with status {proc.returncode}",
            tool="python",
            argv=argv[:2] + ["<probe>"],
            returncode=proc.returncode,
            stderr_tail=_tail(err),
        )
    lines = out.strip().splitlines()
    try:
        data = json.loads(lines[-1]) if lines else None
    except (ValueError, RecursionError):  # not JSON (or a number too long to convert, or nested too deeply): no result
        data = None
    if data is None:
        raise ProbeError(
            "probe printed no JSON on its last line",
            tool="python",
            argv=argv[:2] + ["<probe>"],
            returncode=proc.returncode,
            stderr_tail=_tail(out + "\n" + err),
        )
    return ProbeResult(data=data, stderr=err, elapsed_s=elapsed)


def _bounded_output(proc: subprocess.Popen[bytes], timeout_s: float | None) -> tuple[str, str, str]:
    """``(stdout, stderr, ended)`` of ``proc``, read by two threads: standard output up to
    :data:`STDOUT_LIMIT` bytes, standard error to its end keeping the last :data:`STDERR_KEEP` bytes;
    decoded as UTF-8 (bad bytes replaced). ``ended`` is ``"exited"``, ``"flooded"`` (more standard
    output than the limit: the process group was killed at once) or ``"timeout"`` (ran past
    ``timeout_s``: the group was killed).
    """
    out, err = bytearray(), bytearray()
    flooded = threading.Event()

    def drain_out() -> None:
        assert proc.stdout is not None
        stream = cast(io.BufferedReader, proc.stdout)  # Popen's default buffering: read1 is there
        while chunk := stream.read1(1 << 16):
            out.extend(chunk)
            if len(out) > STDOUT_LIMIT:
                flooded.set()
                kill_group(proc)
                return

    def drain_err() -> None:
        assert proc.stderr is not None
        stream = cast(io.BufferedReader, proc.stderr)
        while chunk := stream.read1(1 << 16):
            err.extend(chunk)
            if len(err) > 2 * STDERR_KEEP:
                del err[:-STDERR_KEEP]

    readers = [threading.Thread(target=f, daemon=True) for f in (drain_out, drain_err)]
    for t in readers:
        t.start()
    ended = "exited"
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.wait()
        ended = "timeout"
    for t in readers:  # the group is gone; a process that left it may still hold a pipe: do not wait for it
        t.join(timeout=5.0)
    if flooded.is_set():
        ended = "flooded"
    tail = bytes(err[-STDERR_KEEP:]).decode("utf-8", "replace")
    return ("" if ended == "flooded" else out.decode("utf-8", "replace")), tail, ended


@contextmanager
def probe_group() -> Iterator[object]:
    """A group for the probes started in this block, in this thread or in threads that run a copy of
    its context (``copy_context().run``, as static verify's probe threads do); yields the group to
    pass to :func:`stop_running_probes`."""
    group = object()
    token = _GROUP.set(group)
    try:
        yield group
    finally:
        _GROUP.reset(token)


def stop_running_probes(group: object = None) -> int:
    """Kill the process group of every probe of ``group`` (:func:`probe_group`; None: every probe)
    running now, in any thread (:func:`run_probe` then raises :class:`ProbeError` there); returns how
    many. For a caller unwinding from SIGTERM or Ctrl-C whose probes run in worker threads: the
    interpreter joins those threads at exit, so without this it would wait for each probe's timeout
    (60 s for a probe blocked on a FIFO)."""
    running = [proc for proc, g in list(_RUNNING.items()) if group is None or g is group]
    for proc in running:
        kill_group(proc)
    return len(running)
