"""CLI for shell completion: ``envforge completion bash|zsh|fish``.

Completion is argcomplete's: the script this prints calls ``envforge`` back with argcomplete's
environment variables set, and ``envforge.cli.main`` hands the parser to
``argcomplete.autocomplete`` (imported only then, so ``envforge --help`` stays fast). Every
command, group, subcommand and option completes, from the same parser ``--help`` shows.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envforge.cli.output import Ui

__all__ = ["add_completers", "register"]

_HOW = {
    "bash": 'eval "$(envforge completion bash)"            # in ~/.bashrc',
    "zsh": 'eval "$(envforge completion zsh)"             # in ~/.zshrc (after compinit)',
    "fish": "envforge completion fish > ~/.config/fish/completions/envforge.fish",
}


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``completion``."""
    p = sub.add_parser("completion", help="print the shell completion script for bash, zsh or fish",
                       description="Print the completion script for SHELL on stdout. Install it with:\n  "
                                   + "\n  ".join(_HOW.values()),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("shell", choices=tuple(_HOW), metavar="SHELL", help="bash, zsh or fish")
    p.set_defaults(handler=_completion)


def _completion(args: argparse.Namespace, ui: Ui) -> int:
    from argcomplete.shell_integration import shellcode

    ui.out.write(shellcode(["envforge"], shell=args.shell))
    return 0


def _recipes(**_: Any) -> list[str]:
    from pathlib import Path

    from envforge.recipe.project import find_project

    return sorted(p.stem for p in find_project(Path.cwd()).recipes_dir.glob("*.toml"))


def _envs(**_: Any) -> list[str]:
    from pathlib import Path

    from envforge.recipe.project import find_project

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
