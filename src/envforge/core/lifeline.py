"""A lifeline for every child process envforge starts: its whole process group dies with envforge.

envforge starts each child (an environment's interpreter for a probe, uv) in a process group of its
own, and kills that group on timeout, on an error and on Ctrl-C. That needs envforge to be alive: an
envforge killed with SIGKILL (the OOM killer, ``ray.kill`` of a fleet agent, a fleet node whose raylet
died, ``kill -9``) kills nothing, and a probe stuck in an NCCL init, or a uv download, ran on with
no parent.

So :func:`spawned` starts the child under a small POSIX shell (:data:`WATCH`) in the child's new
session. The shell's standard input is the read end of a pipe whose write end only envforge holds. A
watcher in the group reads that pipe; when envforge's process ends, however it ends, the kernel
closes the write end, the watcher reads end of file and kills the whole group (``kill -KILL 0``).
The child itself gets ``/dev/null`` as its standard input. POSIX ``sh`` and ``cat`` are all it needs.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ["WATCH", "kill_group", "spawned"]

#: The supervising shell: fd 3 keeps the pipe from envforge, the watcher waits for its end of file
#: and then kills the process group (its own output goes nowhere, so it never holds the child's
#: stdout or stderr pipe open); the child runs in the background with fd 3 closed, and the shell
#: exits with the child's status (``wait``: 128 + N for a child killed by signal N).
WATCH = 'exec 3<&0 </dev/null; (cat <&3; kill -KILL 0) >/dev/null 2>&1 & "$@" 3<&- & wait $!'


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group ``proc`` leads (its child, the watcher, and what they started);
    nothing when the group is already gone."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _executable(program: str) -> str:
    """``program`` as the shell will run it; raise what ``Popen`` would where it cannot start."""
    found = shutil.which(program) if os.sep not in program else program
    if found is None or not os.path.exists(found):
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if os.path.isdir(found) or not os.access(found, os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return found


@contextmanager
def spawned(argv: Sequence[str], **popen: Any) -> Iterator[subprocess.Popen[Any]]:
    """``subprocess.Popen(argv, **popen)`` in a new session, under the lifeline; on leaving the
    block the whole process group is killed (whatever is still running in it) and the pipe closed.

    ``popen`` must not set ``stdin`` or ``start_new_session``. ``proc.returncode`` is the child's
    exit status, or 128 + N when a signal N ended the child, or negative when the group was killed.

    :raises OSError: the program cannot be started (missing: FileNotFoundError; not executable:
        PermissionError), as ``Popen`` raises it; nothing was started then.
    """
    _executable(argv[0])
    read, write = os.pipe()
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", WATCH, "envforge-lifeline", *argv], stdin=read, start_new_session=True, **popen
        )
    except BaseException:
        os.close(write)
        raise
    finally:
        os.close(read)
    try:
        yield proc
    finally:
        kill_group(proc)
        os.close(write)
