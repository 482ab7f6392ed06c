"""Rendering for the CLI: human text on stderr, results on stdout, versioned JSON envelopes.

The library never prints; only the CLI writes, through :class:`Ui`.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from envforge import __version__
from envforge.errors import EnvforgeError

__all__ = ["JSON_ENVELOPE_VERSION", "Ui", "envelope"]

JSON_ENVELOPE_VERSION = 1


def envelope(kind: str, data: Any) -> dict[str, Any]:
    """Wrap a report in the versioned JSON envelope every ``--json`` output uses.

    Shape: ``{"envforge": "<version>", "schema": "envforge.<kind>/<n>", "data": {...}}``.
    The ``schema`` string changes when the shape of ``data`` changes incompatibly.
    """
    return {
        "envforge": __version__,
        "schema": f"envforge.{kind}/{JSON_ENVELOPE_VERSION}",
        "data": data,
    }


class Ui:
    """Where CLI output goes: ``out`` for results, ``err`` for human messages and progress."""

    def __init__(self, *, json_mode: bool = False, out: TextIO | None = None,
                 err: TextIO | None = None) -> None:
        self.json_mode = json_mode
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._color = self.err.isatty() and "NO_COLOR" not in os.environ

    def _paint(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self._color else text

    def result(self, text: str) -> None:
        """Write a result line (stdout)."""
        print(text, file=self.out)

    def emit_json(self, kind: str, data: Any) -> None:
        """Write ``data`` wrapped in :func:`envelope` to stdout, keys in a fixed order."""
        print(json.dumps(envelope(kind, data), indent=2, sort_keys=False), file=self.out)

    def info(self, text: str) -> None:
        """A human message (stderr)."""
        print(text, file=self.err)

    def progress(self, text: str) -> None:
        """A progress line for long work (stderr); silent in JSON mode only if stderr is not a tty."""
        print(self._paint("2", text), file=self.err, flush=True)

    def warn(self, text: str) -> None:
        """A warning (stderr)."""
        print(self._paint("33", f"warning: {text}"), file=self.err)

    def error(self, exc: EnvforgeError) -> None:
        """Render an envforge error: red first line, then its details and hint."""
        first, _, rest = str(exc).partition("\n")
        print(self._paint("31", f"error: {first}"), file=self.err)
        if rest:
            print(rest, file=self.err)

    def error_text(self, text: str) -> None:
        """Render a plain error line."""
        print(self._paint("31", f"error: {text}"), file=self.err)
