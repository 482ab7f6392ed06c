"""CLI for shell completion: ``envforge completion bash|zsh|fish`` prints argcomplete's script.

That script calls ``envforge`` back with argcomplete's environment variables set; then
``envforge.cli.main`` hands the parser to :func:`envforge.cli.completers.complete`. Every command,
group, subcommand and option completes, from the same parser ``--help`` shows. Registration:
:mod:`envforge.cli.commands.completion`.
"""

from __future__ import annotations

import argparse

from argcomplete.shell_integration import shellcode

from envforge.cli.output import Ui

__all__ = ["run_completion"]


def run_completion(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge completion SHELL``: the completion script on stdout."""
    ui.out.write(shellcode(["envforge"], shell=args.shell))
    return 0
