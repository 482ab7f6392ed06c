"""The ``envforge`` command line: parse, call one core function, render, return an exit code.

No logic lives here. Registration and handlers are apart, so ``envforge --help`` stays fast:
``cli/commands/<group>.py`` registers a command group on argparse (importing argparse and
``cli/parser.py`` only) and names each command's handler by reference, ``"envforge.cli.lock:run_lock"``;
``cli/<group>.py`` holds the handlers, which import the core at their top. :func:`main` builds
only the registration modules of the command given (``_COMMAND_GROUPS``), and imports the one
handler module of the command that runs (:func:`handler_of`). Groups (``envforge lock diff``,
``envforge patches list``) are nested argparse subparsers (``cli/parser.py``). :func:`main` is the
one place where :class:`envforge.core.errors.EnvforgeError` becomes a red one-line message and an exit
code, where usage errors and unexpected internal errors (exit 70, the traceback in a log file,
never on the terminal) are rendered, and where ``--json`` errors become the ``envforge.error/1``
envelope on stdout (docs/cli.md).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import Any, NoReturn

from envforge import __version__
from envforge.cli.commands import SUMMARIES
from envforge.cli.output import Ui
from envforge.cli.parser import Parser, UsageError, deepest
from envforge.core.errors import EXIT_INPUT_ERROR, EXIT_INTERNAL_ERROR, EXIT_TOOL_FAILED, EnvforgeError

__all__ = ["build_parser", "handler_of", "main", "run"]

# Registration modules (envforge.cli.commands.<group>), in the order their commands appear in --help.
_GROUPS = (
    "lock",
    "build",
    "run",
    "environments",
    "patches",
    "sbom",
    "envprofile",
    "verify",
    "lockdiff",
    "drafter",
    "bench",
    "fleet",
    "cache",
    "init",
    "completion",
)

# Top-level command -> the registration modules of _GROUPS that register it (several add to one group: see
# cli/parser.group), so `envforge COMMAND ...` builds only those. tests/cli/test_cli.py checks this
# against what every module registers.
_COMMAND_GROUPS = {
    "lock": ("lock", "lockdiff"),
    "build": ("build",),
    "rollback": ("build",),
    "up": ("build",),
    "run": ("run",),
    "env": ("environments", "envprofile"),
    "envs": ("environments",),
    "gc": ("environments",),
    "apply-patches": ("patches",),
    "patches": ("patches",),
    "verify": ("verify",),
    "drafter": ("drafter",),
    "bench": ("bench",),
    "fleet": ("fleet",),
    "cache": ("cache",),
    "init": ("init",),
    "completion": ("completion",),
    "sbom": ("sbom",),
}

Handler = Callable[[argparse.Namespace, Ui], int]

# Paths that run rarely load their module when they run, like a command's handler (_load):
# while the shell asks for completions (argcomplete's variables set), what answers it; after an
# internal error, what writes the log (traceback and tempfile are about 8 ms of start-up).
_COMPLETE = "envforge.cli.completers:complete"
_CRASH_LOG = "envforge.cli.crashlog:write_crash_log"
# A module of an optional extra that is not installed (scipy for bench, huggingface_hub for drafters):
# exit 2 naming the extra, instead of an internal error (envforge.core.extras).
_MISSING_EXTRA = "envforge.core.extras:missing_extra"


class _Stopped(BaseException):
    """SIGTERM or SIGHUP (Slurm's scancel, timeout(1), a closed ssh session): unwind like Ctrl-C,
    so every ``finally`` runs and servers, probes and uv, each in its own session, are stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum: int, _frame: object) -> None:
    raise _Stopped(signum)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Return the argument parser: every command group registered, or with ``command`` (a key of
    ``_COMMAND_GROUPS``) only the modules that register that top-level command, in the same order:
    the same parser for every word line that starts with ``command``, in about half the time (the
    other modules are neither imported nor registered: about 10 ms of a ``lock diff``)."""
    modules = _COMMAND_GROUPS[command] if command is not None else _GROUPS
    parser, sub = _top()
    for group in _GROUPS:
        if group in modules:
            import_module(f"envforge.cli.commands.{group}").register(sub)
    return parser


def _top() -> tuple[Parser, "argparse._SubParsersAction[Any]"]:
    """The top-level parser, and its ``COMMAND`` subparsers action with no command yet."""
    parser = Parser(
        prog="envforge",
        description="Reproducible GPU inference stacks: lock, build, patch, verify, diff.",
        epilog="`envforge COMMAND --help` for a command; exit codes and --json: docs/cli.md",
    )
    parser.add_argument("--version", action="version", version=f"envforge {__version__}")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")


def _listing() -> Parser:
    """The top-level parser for a command line that names no command first (``envforge --help``,
    ``envforge``, ``envforge bogus``): every command by name and help (``commands.SUMMARIES``),
    none of their arguments registered, so it shows and refuses the same as :func:`build_parser`
    at the top level in a fraction of the time (tests/cli/test_cli.py compares them). A command
    word found later (``envforge --json lock ...``) is parsed again with the full parser."""
    parser, sub = _top()
    for name, summary in SUMMARIES.items():
        sub.add_parser(name, help=summary, add_help=False)
    return parser


def handler_of(reference: str | Handler) -> Handler:
    """The handler a ``"module:function"`` reference names (its module imported now, :func:`_load`),
    or ``reference`` itself when it is a function already (a group's help).

    :raises ImportError, AttributeError: no such module or function (a registration bug: exit 70).
    """
    if not isinstance(reference, str):
        return reference
    function: Handler = _load(reference)
    return function


def _load(reference: str) -> Any:
    """The object ``"module:name"`` names, importing ``module`` now (``importlib``: a reference,
    not an import statement, so the module costs nothing until the path that needs it runs)."""
    module, _, name = reference.partition(":")
    return getattr(import_module(module), name)


def _wants_json(argv: Sequence[str]) -> bool:
    """``--json`` (or ``--format json``) anywhere on the command line, even one that did not parse."""
    words = list(argv)
    return (
        "--json" in words
        or "--format=json" in words
        or any(a == "--format" and b == "json" for a, b in zip(words, words[1:]))
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI. Returns the exit status (0 ok, 1 check failed, 2 input error, 3 tool failed,
    70 internal error, 128+N stopped by signal N); docs/cli.md."""
    words = list(sys.argv[1:] if argv is None else argv)
    ui = Ui(json_mode=_wants_json(words))
    try:
        completing = "_ARGCOMPLETE" in os.environ
        if completing:  # shell completion (`envforge completion SHELL`): answers and ends the process
            _load(_COMPLETE)(build_parser())
        parser = build_parser(words[0]) if words and words[0] in _COMMAND_GROUPS else _listing()
        args, extra = parser.parse_known_args(words)
        if words and words[0] not in _COMMAND_GROUPS and args.command is not None:
            parser = build_parser()
            args, extra = parser.parse_known_args(words)
        if extra:  # reported with the usage of the (sub)command that was given them
            deepest(parser, args).error(f"unrecognized arguments: {' '.join(extra)}")
    except UsageError as exc:
        ui.usage_error(exc.message, exc.usage)
        return EXIT_INPUT_ERROR
    except KeyboardInterrupt:
        ui.fail("interrupted", "interrupted", None, 130)
        return 130
    except Exception as exc:  # a bug in envforge: one line and a log, never a traceback
        return _internal_error(ui, exc, words)
    handler: str | Handler | None = getattr(args, "handler", None)
    if handler is None:
        ui.info(_listing().format_help().rstrip())  # every command listed
        return EXIT_INPUT_ERROR
    ui.json_mode = bool(getattr(args, "json", False)) or getattr(args, "format", None) == "json"
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return _run(handler, args, ui, words)
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _run(handler: str | Handler, args: argparse.Namespace, ui: Ui, words: list[str]) -> int:
    """Import and call the handler; the one place errors become a message and an exit code."""
    try:
        return handler_of(handler)(args, ui)
    except EnvforgeError as exc:
        ui.error(exc)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        ui.fail("interrupted", _with_notes("interrupted", exc), None, 130)
        return 130
    except _Stopped as exc:
        code = 128 + exc.signum
        ui.fail("stopped", _with_notes(f"stopped by signal {signal.Signals(exc.signum).name}", exc), None, code)
        return code
    except BrokenPipeError:  # `envforge lock diff ... | head`: the reader left; not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except ModuleNotFoundError as exc:  # an optional extra not installed: exit 2 with its install line
        missing: EnvforgeError | None = _load(_MISSING_EXTRA)(exc, _command_name(args))
        if missing is None:  # a module of the base install is missing: a broken install or a bug
            return _internal_error(ui, exc, words)
        ui.error(missing)
        return missing.exit_code
    except OSError as exc:  # an operating-system failure envforge did not anticipate: one line
        where = f" ({exc.filename})" if exc.filename else ""
        ui.fail("os-error", f"{exc.strerror or exc}{where}", None, EXIT_TOOL_FAILED)
        return EXIT_TOOL_FAILED
    except Exception as exc:  # a bug in envforge: one line and a log, never a traceback
        return _internal_error(ui, exc, words)


def run() -> NoReturn:
    """The program (the ``envforge`` console script, ``python -m envforge``): :func:`main`, then exit
    with its status. After a command that connected to a Ray cluster (``envforge fleet``), stdout and
    stderr are flushed and the process exits at once (``os._exit``), skipping Ray's driver shutdown at
    interpreter exit (about 0.6 s: it disconnects a driver that is leaving anyway; the cluster ends
    the job when the connection closes, as for any driver that exits). :func:`main` called in-process
    never exits."""
    code = main()
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing more can be written
                pass
        os._exit(code)
    sys.exit(code)


def _command_name(args: argparse.Namespace) -> str:
    """``envforge bench compare``: the command words ``args`` were parsed for (groups included)."""
    words = ["envforge"]
    name = getattr(args, "command", None)
    while isinstance(name, str):
        words.append(name)
        name = getattr(args, f"{name}_command", None)
    return " ".join(words)


def _with_notes(message: str, exc: BaseException) -> str:
    """``message`` and what the core noted on the way out (``build``: the step it was in)."""
    return " ".join([message, *getattr(exc, "__notes__", ())])


def _internal_error(ui: Ui, exc: BaseException, words: list[str]) -> int:
    log = _load(_CRASH_LOG)(exc, ["envforge", *words], version=__version__)
    summary = (str(exc).splitlines() or [""])[0][:200]
    ui.fail(
        "internal-error",
        f"internal error (a bug in envforge): {type(exc).__name__}{': ' if summary else ''}{summary}",
        "please report it with the log file",
        EXIT_INTERNAL_ERROR,
        log=str(log) if log else None,
    )
    return EXIT_INTERNAL_ERROR
