"""Registration of ``envforge completion bash|zsh|fish`` (handler: :mod:`envforge.cli.completion`)."""

from __future__ import annotations

import argparse
from typing import Any

from envforge.cli.commands import SUMMARIES

__all__ = ["register"]

_HOW = {
    "bash": 'eval "$(envforge completion bash)"            # in ~/.bashrc',
    "zsh": 'eval "$(envforge completion zsh)"             # in ~/.zshrc (after compinit)',
    "fish": "envforge completion fish > ~/.config/fish/completions/envforge.fish",
}


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``completion``."""
    p = sub.add_parser(
        "completion",
        help=SUMMARIES["completion"],
        description="Print the completion script for SHELL on stdout. Install it with:\n  "
        + "\n  ".join(_HOW.values()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("shell", choices=tuple(_HOW), metavar="SHELL", help="bash, zsh or fish")
    p.set_defaults(handler="envforge.cli.completion:run_completion")
