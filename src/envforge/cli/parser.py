"""argparse pieces of the CLI: command groups and usage errors that do not exit.

Command groups are real nested argparse subparsers (``envforge lock diff``, ``envforge patches
list``): each group is a parser whose ``COMMAND`` positional is a subparsers action. A group may
also run on its own with its own arguments (``envforge lock RECIPE`` next to ``envforge lock
diff``, ``envforge bench [ENV]`` next to ``envforge bench compare``): the first word picks a
subcommand when it names one, otherwise the words go to the group's *bare* parser. A group
without a bare form prints its help when called bare.

Usage errors raise :class:`UsageError` instead of exiting, so ``envforge.cli.main`` renders them
like every other error (``--json`` included). Numeric options are read by the shared ``type=``
functions :func:`seconds` and :func:`integer`, so every command refuses NaN, infinities, negative,
zero and out-of-range values the same way: exit 2, ``argument --timeout: must be ...``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

__all__ = [
    "MAX_SECONDS",
    "PORT",
    "Parser",
    "UsageError",
    "deepest",
    "group",
    "group_parser",
    "integer",
    "output_file",
    "seconds",
]

#: The most seconds a time option takes (about 31 years). Past about 1e10 s a socket or lock timeout
#: overflows (``timestamp out of range for platform time_t``) and Ray's waits overflow their
#: milliseconds, so a larger value would crash instead of waiting.
MAX_SECONDS = 1e9

Options = Callable[[argparse.ArgumentParser], None]


class UsageError(Exception):
    """A command line argparse could not parse (exit 2).

    :param message: argparse's message, e.g. ``argument --format: invalid choice: 'x'``.
    :param usage: the usage line(s) of the (sub)command that failed.
    """

    def __init__(self, message: str, usage: str) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


class Parser(argparse.ArgumentParser):
    """An :class:`argparse.ArgumentParser` whose errors raise :class:`UsageError`, and whose
    commands of several positionals take options between them (:meth:`parse_known_args`)."""

    _intermixing = False

    def error(self, message: str) -> NoReturn:
        raise UsageError(message, self.format_usage().rstrip())

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """As argparse's, but a command of several positionals (``patches import DIFF [ENV]``) is
        parsed with :meth:`argparse.ArgumentParser.parse_known_intermixed_args`: ``DIFF --id x
        --reason y ENV`` gives ENV, where plain argparse (3.11 to 3.13) leaves it unrecognized (an
        optional positional matches nothing at the first chunk). Groups (a subparsers positional)
        and ``REMAINDER`` commands, which intermixed parsing refuses, parse as before."""
        if self._intermixing or not self._intermixable():
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # parse_known_intermixed_args calls parse_known_args itself
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def _intermixable(self) -> bool:
        positionals = self._get_positional_actions()
        grouped = {id(a) for g in self._mutually_exclusive_groups for a in g._group_actions}
        return (
            len(positionals) > 1
            and not any(id(a) in grouped for a in positionals)
            and not any(a.nargs in (argparse.PARSER, argparse.REMAINDER) for a in positionals)
        )

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if isinstance(action, _Commands) and action.bare is not None:
            return  # not a subcommand: the words go to the group's bare form
        if isinstance(action, argparse._SubParsersAction) and value not in action.choices:
            raise argparse.ArgumentError(action, _unknown_command(value, list(action.choices)))
        super()._check_value(action, value)


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """The ``COMMAND`` positional of a group; words that name no subcommand go to ``bare``."""

    bare: argparse.ArgumentParser | None = None

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        words: Sequence[str] = values
        if self.bare is not None and words and words[0] not in self._name_parser_map:
            for key, value in vars(self.bare.parse_args(list(words))).items():
                setattr(namespace, key, value)
            return
        super().__call__(parser, namespace, values, option_string)


def _unknown_command(word: str, commands: list[str]) -> str:
    """The usage error for a command word that names no command: the nearest command by
    :func:`difflib.get_close_matches` (``envforge verfy``: ``did you mean 'verify'?``), then the choices."""
    # lazy: difflib (about 2.5 ms) only for a mistyped command, never for --help
    import difflib

    close = difflib.get_close_matches(word, commands, n=1, cutoff=0.6)
    guess = f"; did you mean '{close[0]}'?" if close else ""
    return f"invalid choice: {word!r}{guess} (choose from {', '.join(map(repr, commands))})"


def group(
    sub: "argparse._SubParsersAction[Any]",
    name: str,
    *,
    help: str | None = None,
    description: str | None = None,
    bare: tuple[Options, Options] | None = None,
    bare_usage: str = "",
) -> "argparse._SubParsersAction[Any]":
    """The subcommands of group ``name`` under ``sub``, created on first use.

    Several CLI modules add to one group (``lock`` and ``lockdiff`` both to ``lock``); the first
    call creates it with ``help``/``description``, later calls return the same action.

    :param bare: ``(positionals, options)`` adders when the group runs on its own (``envforge lock
        RECIPE``); the caller sets the bare handler with ``set_defaults`` on the returned action's
        parent (see :func:`group_parser`). Without it, a bare call prints the group's help.
    :param bare_usage: the bare form's arguments for the usage line, e.g. ``"[RECIPE] [options]"``.
    """
    existing = sub.choices.get(name)
    if existing is not None:
        return _commands_of(existing)
    prog = f"{sub._prog_prefix} {name}"
    usage = f"{prog} {bare_usage}\n       {prog} COMMAND ..." if bare else None
    p = sub.add_parser(name, help=help, description=description, usage=usage)
    commands: _Commands = p.add_subparsers(
        dest=f"{name}_command", metavar="COMMAND", title="commands", action=_Commands, prog=prog
    )
    if bare is None:
        p.set_defaults(handler=_help_of(p))
        return commands
    positionals, options = bare
    options(p)
    loose = Parser(prog=prog, usage=usage, add_help=False)
    positionals(loose)
    options(loose)
    # `envforge bench ENV --help`: the words after ENV are parsed here; --help prints the group's help
    loose.add_argument("-h", "--help", action=_HelpOf, nargs=0, parser=p, help=argparse.SUPPRESS)
    for action in loose._actions:  # do not overwrite options given before the first word
        if action.option_strings:
            action.default = argparse.SUPPRESS
    commands.bare = loose
    return commands


class _HelpOf(argparse.Action):
    """``--help`` that prints another parser's help (the group's, for its bare form) and exits 0."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, *, parser: argparse.ArgumentParser, **kwargs: Any
    ) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.parser = parser

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        self.parser.print_help()
        self.parser.exit()


def group_parser(sub: "argparse._SubParsersAction[Any]", name: str) -> argparse.ArgumentParser:
    """The parser of group ``name`` (for ``set_defaults`` of its bare form)."""
    parser: argparse.ArgumentParser = sub.choices[name]
    return parser


def deepest(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)parser of the command ``args`` were parsed for, for its usage line in errors."""
    while True:
        action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, action.dest, None) if action is not None and action.dest else None
        if action is None or chosen not in action.choices:
            return parser
        parser = action.choices[chosen]


def _commands_of(parser: argparse.ArgumentParser) -> "argparse._SubParsersAction[Any]":
    for action in parser._actions:
        if isinstance(action, _Commands):
            return action
    raise ValueError(f"{parser.prog} is a command, not a group")  # a registration bug


def _help_of(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace, Any], int]:
    def show_help(_args: argparse.Namespace, ui: Any) -> int:
        ui.info(parser.format_help().rstrip())
        return 2

    return show_help


def _file_to_write(text: str, option: str, example: str) -> Path:
    """The checks every written file shares: refused when empty or an existing directory."""
    path = Path(text)
    if not text:
        raise argparse.ArgumentTypeError(f"empty path; give the file to write, e.g. {option} {example}")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a directory; give a file name in it, e.g. {path / example}")
    return path


def output_file(text: str) -> Path:
    """An argparse ``type=`` for a file a command writes (``-o``/``--output``): refused as a usage
    error naming the option when it is empty, an existing directory, or in a directory that does not
    exist (``argument -o/--output: /no/such: no directory /no; make it first ...``), so the write
    never fails half way with the name of its temp file (:func:`envforge.core.fs.atomic_write`).

    :raises argparse.ArgumentTypeError: as above.
    """
    path = _file_to_write(text, "-o", "out.json")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"{text}: no directory {path.parent}; make it first (mkdir -p "
            f"{path.parent}) or give a file in an existing directory"
        )
    return path


def report_file(text: str) -> Path:
    """An argparse ``type=`` for a report file whose command makes its missing parent directories
    (``bench --output runs/today/a.json``): refused as a usage error when it is empty, an existing
    directory, or under something that is not a directory (``a.txt/x.json``), as :func:`output_file`.

    :raises argparse.ArgumentTypeError: as above.
    """
    path = _file_to_write(text, "--output", "bench.json")
    ancestor = next((a for a in path.absolute().parents if a.exists()), None)
    if ancestor is not None and not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {ancestor} is not a directory; give a file in a directory")
    return path


def seconds(minimum: float = 0.0, maximum: float = MAX_SECONDS) -> Callable[[str], float]:
    """An argparse ``type=``: a finite number of seconds above 0, at least ``minimum`` and at most
    ``maximum`` (both in seconds; default :data:`MAX_SECONDS`).

    The returned function raises :class:`argparse.ArgumentTypeError` (argparse makes it a usage
    error naming the option: ``argument --timeout: must be a finite number of seconds from 5 to
    1,000,000,000, got 'nan'``; without ``minimum``: ``must be a positive finite number of seconds
    (at most 1,000,000,000)``) for text that is no number, NaN, an infinity, 0 or below, or outside
    the range.
    """
    what = (
        f"a finite number of seconds from {minimum:g} to {maximum:,.0f}"
        if minimum > 0
        else f"a positive finite number of seconds (at most {maximum:,.0f})"
    )

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and value > 0 and minimum <= value <= maximum):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value

    parse.__name__ = "seconds"
    return parse


def integer(minimum: int, maximum: int | None = None, *, noun: str = "an integer") -> Callable[[str], int]:
    """An argparse ``type=``: a decimal integer ``>= minimum`` (and ``<= maximum`` when given).

    The returned function raises :class:`argparse.ArgumentTypeError` (a usage error naming the
    option: ``argument --port: must be a TCP port from 1 to 65535, got '70000'``) for anything else:
    ``1.5``, ``nan``, ``inf``, a value out of range.
    """
    limits = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {noun} {limits}, got {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"must be {noun} {limits}, got {text!r}")
        return value

    parse.__name__ = "integer"
    return parse


#: A TCP port (``--port``): 1 to 65535.
PORT = integer(1, 65535, noun="a TCP port")
