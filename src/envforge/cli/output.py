"""Rendering for the CLI: human text on stderr, results on stdout, versioned JSON envelopes.

The library never prints; only the CLI writes, through :class:`Ui`.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from envforge import __version__
from envforge.core.errors import EnvforgeError
from envforge.core.printable import escape_controls
from envforge.core.urls import redact

__all__ = ["ERROR_KINDS", "JSON_ENVELOPE_VERSION", "Ui", "envelope", "error_kind", "redact", "size_text"]

JSON_ENVELOPE_VERSION = 1


def envelope(kind: str, data: Any, version: int = JSON_ENVELOPE_VERSION) -> dict[str, Any]:
    """Wrap a report in the versioned JSON envelope every ``--json`` output uses.

    Shape: ``{"envforge": "<version>", "schema": "envforge.<kind>/<n>", "data": {...}}``.
    The ``schema`` string changes when the shape of ``data`` changes incompatibly: ``version``
    is that kind's own shape version (``n``).
    """
    return {"envforge": __version__, "schema": f"envforge.{kind}/{version}", "data": data}


# ``data.kind`` of the ``envforge.error/1`` envelope (docs/cli.md), with the exit code of each.
ERROR_KINDS = {
    "usage-error": 2,  # the command line did not parse (argparse)
    "input-error": 2,  # a bad recipe, lock, patchset, report or argument value
    "check-failed": 1,  # a check ran and failed (stale lock, index guard, drifted patch)
    "tool-failed": 3,  # uv, git or an environment's interpreter failed
    "os-error": 3,  # the operating system refused (disk full, permission denied)
    "interrupted": 130,  # Ctrl-C
    "stopped": None,  # SIGTERM / SIGHUP: 128 + the signal number
    "internal-error": 70,  # a bug in envforge; data.log names the file with the traceback
}


def error_kind(exc: EnvforgeError) -> str:
    """The envelope ``kind`` of an envforge error, from its exit code."""
    return {1: "check-failed", 2: "input-error", 3: "tool-failed"}.get(exc.exit_code, "input-error")


def size_text(n: int) -> str:
    """A size in bytes as people read it: ``512 B``, ``1.5 KiB``, ``4.2 GiB`` (binary units)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _shown(text: str) -> str:
    """What a human sees of ``text``: credentials redacted, control and bidirectional characters
    escaped except newlines and tabs (:func:`envforge.core.printable.escape_controls`)."""
    return redact(escape_controls(text, keep="\n\t"))


class Ui:
    """Where CLI output goes: ``out`` for results, ``err`` for human messages and progress.
    Every line passes through :func:`redact`, and human text has control characters escaped."""

    def __init__(self, *, json_mode: bool = False, out: TextIO | None = None, err: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._color = self.err.isatty() and "NO_COLOR" not in os.environ

    def _paint(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self._color else text

    def result(self, text: str) -> None:
        """Write a result line (stdout)."""
        print(_shown(text), file=self.out)

    def emit_json(self, kind: str, data: Any, *, version: int = JSON_ENVELOPE_VERSION) -> None:
        """Write ``data`` wrapped in :func:`envelope` (shape ``version``) to stdout, keys in a
        fixed order."""
        print(redact(json.dumps(envelope(kind, data, version), indent=2, sort_keys=False)), file=self.out)

    def info(self, text: str) -> None:
        """A human message (stderr)."""
        print(_shown(text), file=self.err)

    def progress(self, text: str) -> None:
        """A progress line for long work (stderr); silent in JSON mode only if stderr is not a tty."""
        print(self._paint("2", _shown(text)), file=self.err, flush=True)

    def terminal(self) -> Callable[[str], None] | None:
        """A raw writer to stderr when it is a terminal (and not ``--json``), for tools that draw
        their own progress bars (uv); None otherwise: plain lines then."""
        if self.json_mode or not self.err.isatty():
            return None

        def write(text: str) -> None:
            self.err.write(text)
            self.err.flush()

        return write

    def warn(self, text: str) -> None:
        """A warning (stderr)."""
        print(self._paint("33", f"warning: {_shown(text)}"), file=self.err)

    def error(self, exc: EnvforgeError) -> None:
        """Render an envforge error: red first line, then its details and hint (stderr); with
        ``--json`` also the ``envforge.error/1`` envelope on stdout."""
        first, _, rest = _shown(str(exc)).partition("\n")
        print(self._paint("31", f"error: {first}"), file=self.err)
        if rest:
            print(rest, file=self.err)
        if self.json_mode:
            message = str(exc) if exc.hint is None else str(exc).rsplit("\n  hint: ", 1)[0]
            self._error_json(error_kind(exc), message, exc.hint, exc.exit_code, None)

    def fail(self, kind: str, message: str, hint: str | None, exit_code: int, *, log: str | None = None) -> None:
        """Render an error that is not an :class:`EnvforgeError` (see :data:`ERROR_KINDS`)."""
        print(self._paint("31", _shown(f"error: {message}" + (f" (full log: {log})" if log else ""))), file=self.err)
        if self.json_mode:
            self._error_json(kind, message, hint, exit_code, log)

    def usage_error(self, message: str, usage: str) -> None:
        """A command line that did not parse: the usage, then the message, as argparse prints them."""
        print(usage, file=self.err)
        print(self._paint("31", f"error: {message}"), file=self.err)
        if self.json_mode:
            self._error_json("usage-error", message, usage, 2, None)

    def _error_json(self, kind: str, message: str, hint: str | None, exit_code: int, log: str | None) -> None:
        self.emit_json("error", {"kind": kind, "message": message, "hint": hint, "exit_code": exit_code, "log": log})

    def error_text(self, text: str) -> None:
        """Render a plain error line."""
        print(self._paint("31", f"error: {_shown(text)}"), file=self.err)
