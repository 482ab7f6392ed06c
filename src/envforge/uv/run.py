"""The only module that starts uv. envforge never resolves or installs by itself.

uv comes from the ``uv`` distribution on PyPI (a dependency of envforge), found with
``uv.find_uv_bin()``; ``$ENVFORGE_UV`` overrides it. Every call runs with ``--no-config`` semantics
where it matters (a user's ``uv.toml`` must not change a lock), Python downloads disabled (they
cannot happen on air-gapped GPU boxes and should never happen silently), and a short retry budget
so an unreachable index fails in seconds.

uv reads ``UV_*`` variables even under ``--no-config`` (field case B18), so uv never gets the
caller's environment as it is: :func:`uv_environment` keeps what only changes how uv fetches
(transport, credentials, cache) and drops everything that could change what it resolves or
installs (the list, with its source and uv version, is :mod:`envforge.uv.settings`). A resolving
call (``uv pip compile``) with such a variable set is refused instead (:class:`UvSettingsRefused`,
exit 2), naming each variable and the recipe key that says the same thing: the caller asked for
something the lock would not record.
"""

from __future__ import annotations

import codecs
import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import termios
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from envforge.core.deadline import Cut, cut
from envforge.core.errors import ExternalToolError, InputError
from envforge.core.lifeline import kill_group, spawned
from envforge.core.urls import redact_credentials
from envforge.uv.settings import REFUSED, UV_VERSION, classify

__all__ = [
    "UvError",
    "UvResult",
    "UvSettingsRefused",
    "cache_dir",
    "refused_settings",
    "run_uv",
    "uv_binary",
    "uv_environment",
]

# uv subcommands that resolve (their result depends on resolver settings); others install a lock,
# make a venv or find a Python, which no refused variable may change either: those are dropped.
_RESOLVING = (("pip", "compile"), ("pip", "install"), ("lock",))

_TAIL_LINES = 25

Progress = Callable[[str], None]


class UvError(ExternalToolError):
    """uv failed or could not start (exit 3). ``stderr_tail`` holds uv's last lines."""


class UvSettingsRefused(InputError):
    """The caller's environment sets uv variables that would change a resolution (exit 2)."""


def refused_settings(environ: Mapping[str, str]) -> list[str]:
    """Names in ``environ`` that would change what uv resolves (sorted; values never read)."""
    return sorted(k for k in environ if classify(k) == "refused")


def uv_environment(environ: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment uv runs with: ``environ`` without every variable :func:`classify` does not
    pass, then envforge's own settings (no Python downloads, a short retry budget, no colour),
    then ``extra``. Pure: ``environ`` is not changed."""
    env = {k: v for k, v in environ.items() if classify(k) == "passed"}
    env.update(
        {
            "UV_PYTHON_DOWNLOADS": "never",
            "UV_HTTP_RETRIES": env.get("UV_HTTP_RETRIES", "1"),
            "UV_HTTP_TIMEOUT": env.get("UV_HTTP_TIMEOUT", "30"),
            "NO_COLOR": "1",
        }
    )
    env.update(extra or {})
    return env


def _refuse(args: Sequence[str], environ: Mapping[str, str]) -> None:
    if not any(tuple(args[: len(cmd)]) == cmd for cmd in _RESOLVING):
        return
    names = refused_settings(environ)
    if not names:
        return
    lines = [f"  {n}: instead, {REFUSED[n]}" for n in names]
    raise UvSettingsRefused(
        f"your environment sets {len(names)} uv variable{'s' if len(names) > 1 else ''} that would change "
        f"what uv resolves, and the lock would not record {'them' if len(names) > 1 else 'it'}:\n" + "\n".join(lines),
        hint=f"unset {'them' if len(names) > 1 else 'it'} for envforge (`env {' '.join('-u ' + n for n in names)} "
        f"envforge ...`) and say it in the recipe; see docs/recipes.md (uv {UV_VERSION} settings)",
    )


@dataclass(frozen=True, slots=True)
class UvResult:
    """A finished uv call: its argv, standard output and standard error (text)."""

    argv: tuple[str, ...]
    stdout: str
    stderr: str


def uv_binary() -> str:
    """Path of the uv executable: ``$ENVFORGE_UV``, else the ``uv`` package's binary, else PATH.

    :raises UvError: none found.
    """
    if env := os.environ.get("ENVFORGE_UV"):
        return env
    try:
        from uv import find_uv_bin  # lazy: uv's wheel module only to find its binary

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        pass

    found = shutil.which("uv")
    if found is None:
        raise UvError(
            "uv is not installed",
            tool="uv",
            argv=["uv"],
            returncode=None,
            hint="pip install uv (it is a dependency of envforge)",
        )
    return found


def _past_deadline(limit: Cut, argv: Sequence[str], what: str, stderr_tail: str = "") -> UvError:
    """The error of a uv run that the caller's deadline ended."""
    err = UvError(
        f"uv {argv[1] if len(argv) > 1 else ''} ran past its caller's {limit.limit_s:.3g} s limit and {what}",
        tool="uv",
        argv=argv,
        returncode=None,
        stderr_tail=stderr_tail,
    )
    err.deadline_s = limit.limit_s
    return err


def run_uv(
    args: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    timeout_s: float | None = None,
    terminal: Callable[[str], None] | None = None,
) -> UvResult:
    """Run ``uv <args>`` and return its output; stream stderr lines to ``progress`` when given.

    :param env: extra environment variables on top of :func:`uv_environment` of this process's.
    :param terminal: when given (the caller's stderr is a terminal), uv's stderr is a pseudo-terminal
        so uv draws its own progress bars (bytes per download, packages prepared and installed);
        its raw output goes to ``terminal`` as it comes, and ``progress`` still gets each line as
        plain text (escape sequences and redrawn parts removed), e.g. for a log file.
    :param timeout_s: wall-clock limit in seconds (None: no limit). Inside a
        :func:`envforge.core.deadline.deadline` block, cut to what is left of it.
    :raises UvSettingsRefused: a resolving call while the caller's environment sets a variable
        that would change the resolution (each named, with the recipe key to use instead).
    :raises UvError: uv could not start, exited non-zero, or ran past ``timeout_s`` or the caller's
        deadline (then ``deadline_s`` is set; uv is not started when nothing is left of it); the
        message keeps argv, exit status and uv's last stderr lines.
    """
    _refuse(args, os.environ)
    argv = [uv_binary(), *args]
    limit = cut(timeout_s)
    if limit.expired:
        raise _past_deadline(limit, argv, "was not started")
    master = slave = None
    if terminal is not None:
        master, slave = _pty()
    started = False
    try:
        # Under the lifeline: uv's process group is killed when the block ends (Ctrl-C, SIGTERM,
        # an error here included), and when this process dies first, even by SIGKILL.
        with spawned(
            argv,
            cwd=cwd,
            env=uv_environment(os.environ, env),
            stdout=subprocess.PIPE,
            stderr=slave if slave is not None else subprocess.PIPE,
            text=True,
        ) as proc:
            started = True
            if slave is not None:
                os.close(slave)
                slave = None
            return _finish(proc, argv, args, limit, timeout_s, master, terminal, progress)
    except OSError as exc:
        if started:
            raise
        raise UvError(f"cannot start uv: {exc.strerror}", tool="uv", argv=argv, returncode=None) from None
    finally:
        if slave is not None:
            os.close(slave)


def _finish(
    proc: subprocess.Popen[str],
    argv: list[str],
    args: Sequence[str],
    limit: Cut,
    timeout_s: float | None,
    master: int | None,
    terminal: Callable[[str], None] | None,
    progress: Progress | None,
) -> UvResult:
    """Stream uv's output until it exits (or its limit kills it) and make the result or the error.

    Every line of uv's stderr passes :func:`redact_credentials` before it reaches ``progress`` (a
    terminal, a build log), the result or an error: uv prints URLs it was given, sometimes with
    their password (field case N37: ``http:/u:SECRET@`` after a path join)."""
    err_lines: list[str] = []
    if progress is not None:
        progress = _redacting(progress)
    assert proc.stdout is not None
    out_chunks: list[str] = []
    # Read stdout in a thread while stderr streams here: a full pipe must never block uv.
    reader = threading.Thread(target=lambda: out_chunks.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    timer = threading.Timer(limit.timeout_s, kill_group, (proc,)) if limit.timeout_s is not None else None
    if timer is not None:
        timer.start()
    try:
        if master is not None and terminal is not None:
            _relay_pty(master, terminal, err_lines, progress)
        else:
            assert proc.stderr is not None
            for line in map(redact_credentials, proc.stderr):
                err_lines.append(line.rstrip("\n"))
                if progress is not None and line.strip() and not line.startswith(("error:", "warning:", " ")):
                    progress(line.rstrip())
        proc.wait()
    finally:  # (on Ctrl-C or SIGTERM, the caller's lifeline block kills uv's group)
        if timer is not None:
            timer.cancel()
    reader.join()
    if timer is not None and timer.finished.is_set() and proc.returncode is not None and proc.returncode < 0:
        if limit.limit_s is not None:
            raise _past_deadline(limit, argv, "was stopped", "\n".join(err_lines[-_TAIL_LINES:]))
        raise UvError(
            f"uv ran past {timeout_s:g} s and was stopped",
            tool="uv",
            argv=argv,
            returncode=None,
            stderr_tail="\n".join(err_lines[-_TAIL_LINES:]),
        )
    out = "".join(out_chunks)  # data (a path, a resolution), not messages
    stderr = redact_credentials("\n".join(err_lines))
    if proc.returncode != 0:
        raise UvError(
            f"uv {args[0] if args else ''} {args[1] if len(args) > 1 else ''}".rstrip()
            + f" failed with exit status {proc.returncode}",
            tool="uv",
            argv=argv,
            returncode=proc.returncode,
            stderr_tail="\n".join(err_lines[-_TAIL_LINES:]),
        )
    return UvResult(tuple(argv), out, stderr)


def _redacting(progress: Progress) -> Progress:
    return lambda line: progress(redact_credentials(line))


def cache_dir(*, timeout_s: float | None = 30.0) -> Path:
    """uv's cache directory, as uv itself reports it (``uv cache dir``): ``$UV_CACHE_DIR`` when set
    (passed to uv, :mod:`envforge.uv.settings`), else uv's default (``$XDG_CACHE_HOME/uv``,
    ``~/.cache/uv``). The directory need not exist.

    :param timeout_s: limit for the uv call in seconds.
    :raises UvError: uv could not start, failed, or printed no path.
    """
    res = run_uv(["cache", "dir"], timeout_s=timeout_s)
    text = res.stdout.strip()
    if not text:
        raise UvError("uv cache dir printed no path", tool="uv", argv=res.argv, returncode=0, stderr_tail=res.stderr)
    return Path(text)


_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>78]")


def _pty() -> tuple[int, int]:
    """A pseudo-terminal pair sized like this process's terminal (uv's bars fit the width)."""
    master, slave = pty.openpty()
    size = shutil.get_terminal_size((100, 24))
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size.lines, size.columns, 0, 0))
    return master, slave


def _relay_pty(master: int, terminal: Callable[[str], None], err_lines: list[str], progress: Progress | None) -> None:
    """Copy uv's terminal output to ``terminal`` until uv closes it; keep its lines as plain text."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""
    try:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the pty is gone
                break
            if not chunk:
                break
            text = decoder.decode(chunk)
            terminal(text)
            *lines, pending = (pending + text).split("\n")
            for raw in lines:
                line = _ESCAPE.sub("", raw).rstrip("\r").split("\r")[-1].rstrip()
                if line.strip():
                    err_lines.append(line)
                    if progress is not None:
                        progress(line)
    finally:
        os.close(master)
