"""The ``envforge`` command line: parse, call one core function, render, return an exit code.

No logic lives here. Each command group has its own module (``cli/lock.py``, ``cli/build.py``, ...)
with a ``register(subparsers)`` function; those modules import argparse only, and import the core
inside their handlers, so ``envforge --help`` stays fast. :func:`main` is the one place where
:class:`envforge.errors.EnvforgeError` becomes a red one-line message and an exit code.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any
from importlib import import_module

from envforge import __version__
from envforge.cli.output import Ui
from envforge.errors import EXIT_INPUT_ERROR, EXIT_TOOL_FAILED, EnvforgeError

__all__ = ["main"]

# Command-group modules, in the order their commands appear in --help.
_GROUPS = ("lock", "build", "patches", "envprofile", "verify", "lockdiff", "drafter", "bench")

# ``envforge lock diff`` / ``envforge lock textconv`` are separate commands internally.
_TWO_WORD = {("lock", "diff"): "lock-diff", ("lock", "textconv"): "lock-textconv",
             ("bench", "compare"): "bench-compare", ("patches", "export"): "patches-export",
             ("patches", "list"): "patches-list", ("env", "show"): "env-show"}

Handler = Callable[[argparse.Namespace, Ui], int]


class _Stopped(BaseException):
    """SIGTERM or SIGHUP (Slurm's scancel, timeout(1), a closed ssh session): unwind like Ctrl-C,
    so every ``finally`` runs and servers, probes and uv, each in its own session, are stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


def build_parser() -> argparse.ArgumentParser:
    """Return the full argument parser (every command group registered)."""
    parser = argparse.ArgumentParser(
        prog="envforge",
        description="Reproducible GPU inference stacks: lock, build, patch, verify, diff.",
    )
    parser.add_argument("--version", action="version", version=f"envforge {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in _GROUPS:
        import_module(f"envforge.cli.{group}").register(sub)
    _show_two_word_names(sub)
    return parser


def _show_two_word_names(sub: "argparse._SubParsersAction[Any]") -> None:
    """Show ``lock-diff`` as ``lock diff`` in --help and usage lines (how users type it)."""
    spoken = {internal: " ".join(words) for words, internal in _TWO_WORD.items()}
    for action in sub._choices_actions:
        if action.dest in spoken:
            action.metavar = spoken[action.dest]
    for name, parser in sub.choices.items():
        if name in spoken:
            parser.prog = f"envforge {spoken[name]}"


def _join_two_word(argv: list[str]) -> list[str]:
    if len(argv) >= 2 and (argv[0], argv[1]) in _TWO_WORD:
        return [_TWO_WORD[(argv[0], argv[1])], *argv[2:]]
    return argv


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI. Returns the exit status (0 ok, 1 check failed, 2 input error, 3 tool failed)."""
    args_list = _join_two_word(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args, extra = parser.parse_known_args(args_list)
    if extra:  # report it with the subcommand's usage, not the top level's
        sub = next((a for a in parser._subparsers._group_actions), None) if parser._subparsers else None
        command = getattr(args, "command", None)
        target = sub.choices.get(command, parser) if sub is not None and command else parser  # type: ignore[union-attr]
        target.error(f"unrecognized arguments: {' '.join(extra)}")
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_INPUT_ERROR
    ui = Ui(json_mode=bool(getattr(args, "json", False)))
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _run(handler, args, ui)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _run(handler: Handler, args: argparse.Namespace, ui: Ui) -> int:
    """Call the handler; the one place errors become a message and an exit code."""
    try:
        return handler(args, ui)
    except EnvforgeError as exc:
        ui.error(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        ui.error_text("interrupted")
        return 130
    except _Stopped as exc:
        ui.error_text(f"stopped by signal {signal.Signals(exc.signum).name}")
        return 128 + exc.signum
    except BrokenPipeError:  # `envforge lock diff ... | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a last resort: one line, never a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        ui.error_text(f"{exc.strerror or exc}{where}")
        return EXIT_TOOL_FAILED
