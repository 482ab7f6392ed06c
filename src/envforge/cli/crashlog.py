"""The log of an unexpected internal error: the traceback goes to a file, never to the terminal.

``envforge.cli.main`` catches any exception that is not an :class:`envforge.core.errors.EnvforgeError`,
writes it here and prints one line naming the file (exit 70, docs/cli.md). Logs live in
``$XDG_STATE_HOME/envforge/logs/`` (default ``~/.local/state/envforge/logs/``, the XDG Base
Directory specification's place for logs), else in the system temporary directory. URL userinfo
(``https://user:secret@host``) is masked before anything is written.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

from envforge.core.urls import JOINED

__all__ = ["crash_log_dir", "mask_userinfo", "write_crash_log"]

_USERINFO = re.compile(JOINED + r"[^/\s@]+@")  # linear in the text (envforge.core.urls)


def mask_userinfo(text: str) -> str:
    """``scheme://user:password@host`` → ``scheme://***@host`` everywhere in ``text``."""
    return _USERINFO.sub(r"\1***@", text)


def crash_log_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_STATE_HOME/envforge/logs``, or ``~/.local/state/envforge/logs``."""
    state = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "envforge" / "logs"


def write_crash_log(
    exc: BaseException, argv: Sequence[str], *, version: str, environ: Mapping[str, str] | None = None
) -> Path | None:
    """Write the traceback of ``exc`` with the command line and version; return the file, or None
    when neither the state directory nor the temporary directory is writable."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    text = mask_userinfo(
        "".join(
            [
                f"envforge {version}: internal error\n",
                "command: " + " ".join(argv) + "\n\n",
                *traceback.format_exception(exc),
            ]
        )
    )
    for folder in (crash_log_dir(os.environ if environ is None else environ), Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"envforge-internal-{stamp}-{os.getpid()}.log"
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None
