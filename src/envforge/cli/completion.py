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

__all__ = ["register"]

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
