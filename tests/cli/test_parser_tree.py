"""The whole argparse tree of ``envforge`` (issue 29, uv's and pnpm's habits): every command's
``--help`` has a description paragraph, every argument has help text, every argument that takes a
value names it with an explicit metavar, and one option string shows one metavar everywhere
(``--project DIR``, ``--recipe RECIPE``, ``--variant VARIANT``)."""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Iterator

from envforge.cli import build_parser

_NO_HELP_NEEDED = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)


def commands(
    parser: argparse.ArgumentParser | None = None, words: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(command words, parser)`` for every parser of the tree, groups included."""
    parser = parser or build_parser()
    yield " ".join(("envforge", *words)), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*words, name))


def _arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if not isinstance(a, _NO_HELP_NEEDED)]


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0 and action.choices is None  # choices show as {a,b}


def test_the_tree_is_walked_whole() -> None:
    names = {name for name, _ in commands()}
    assert {
        "envforge",
        "envforge build",
        "envforge up",
        "envforge lock diff",
        "envforge patches new",
        "envforge fleet agent stop",
        "envforge drafter check",
        "envforge bench compare",
    } <= names
    assert len(names) >= 35


def test_every_command_has_a_description_paragraph() -> None:
    assert [name for name, p in commands() if not (p.description or "").strip()] == []


def test_every_argument_has_help_text() -> None:
    missing = [
        f"{name} {a.option_strings or a.dest}"
        for name, p in commands()
        for a in _arguments(p)
        if not (a.help or "").strip()
    ]
    assert missing == []


def test_every_argument_that_takes_a_value_names_it() -> None:
    implicit = [
        f"{name} {a.option_strings or a.dest}"
        for name, p in commands()
        for a in _arguments(p)
        if _takes_value(a) and not a.metavar
    ]
    assert implicit == []


def test_one_metavar_per_option_everywhere() -> None:
    shown: dict[str, set[str]] = defaultdict(set)
    for _, p in commands():
        for a in _arguments(p):
            if a.option_strings and _takes_value(a):
                shown[a.option_strings[-1]].add(str(a.metavar))
    assert {option: metavars for option, metavars in shown.items() if len(metavars) > 1} == {}
    assert (shown["--project"], shown["--recipe"], shown["--variant"], shown["--output"], shown["--json"]) == (
        {"DIR"},
        {"RECIPE"},
        {"VARIANT"},
        {"PATH"},
        set(),
    )


def test_env_is_a_positional_everywhere_it_names_an_environment() -> None:
    """ENV is a positional in every command that takes an environment (``patches new DIST [ENV]``,
    ``patches export PATCHSET [ENV]`` as ``verify [ENV]``); ``--env`` is only fleet allreduce's
    ``NAME=VALUE`` (a variable for every rank)."""
    parse = build_parser().parse_args
    assert (
        parse(["patches", "new", "sglang", "team-default"]).env,
        parse(["patches", "export", "fix-x", "team-default"]).env,
        parse(["patches", "new", "sglang"]).env,
    ) == ("team-default", "team-default", None)
    envs = [name for name, p in commands() for a in _arguments(p) if "--env" in a.option_strings]
    assert envs == ["envforge fleet allreduce"]


#: Commands whose output is not a result to wrap: a lock's text for git (textconv), the command's own
#: output and exit status (run), a shell script (completion). docs/cli.md says so.
NO_JSON = {"envforge lock textconv", "envforge run", "envforge completion"}


def test_every_command_with_a_result_takes_json() -> None:
    leaves = [
        (name, p)
        for name, p in commands()
        if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)
        or name in ("envforge lock", "envforge bench")
    ]  # groups that run on their own
    without = {name for name, p in leaves if not any("--json" in a.option_strings for a in p._actions)}
    assert without == NO_JSON
