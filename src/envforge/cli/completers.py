"""Shell completion at work: argcomplete answers from the parser, RECIPE and ENV from the project.

``envforge.cli.main`` calls :func:`complete` (by reference, so nothing here is imported unless
argcomplete's environment variables are set: the shell is asking for completions).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import argcomplete

from envforge.recipe.project import find_project

__all__ = ["add_completers", "complete"]


def _recipes(**_: Any) -> list[str]:
    return sorted(p.stem for p in find_project(Path.cwd()).recipes_dir.glob("*.toml"))


def _envs(**_: Any) -> list[str]:
    envs = find_project(Path.cwd()).envs_dir
    return sorted(p.name for p in envs.iterdir() if p.is_symlink()) if envs.is_dir() else []


def add_completers(parser: argparse.ArgumentParser) -> None:
    """Complete RECIPE with the project's recipe names and ENV with its environments (argcomplete
    ``completer`` attributes, set only while completing)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                add_completers(sub)
            bare = getattr(action, "bare", None)
            if bare is not None:  # `envforge lock <TAB>`: its subcommands and the recipes
                words = _recipes if any(a.dest == "recipe" and not a.option_strings for a in bare._actions) else _envs
                names = sorted(action.choices)
                action.completer = lambda **kw: [*names, *words(**kw)]  # type: ignore[attr-defined]
        elif not action.option_strings and action.dest in ("recipe", "env", "names"):
            action.completer = _recipes if action.dest == "recipe" else _envs  # type: ignore[attr-defined]


def complete(parser: argparse.ArgumentParser) -> None:
    """Answer the shell's completion request for ``parser`` (the full parser): add the completers,
    then argcomplete writes the completions and ends the process (``os._exit``); it returns
    only when argcomplete's environment variables are not set."""
    add_completers(parser)
    argcomplete.autocomplete(parser)
