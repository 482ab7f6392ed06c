"""Registration of ``envforge env show`` (handler: :mod:`envforge.cli.envprofile`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.parser import group

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``env show`` in the ``env`` group."""
    commands = group(
        sub,
        "env",
        help=SUMMARIES["env"],
        description="Built environments under envs/ and the env profile their processes see.",
    )
    p = commands.add_parser(
        "show",
        help="show the env profile a process of an environment sees, and where each value comes from",
        description="Start the environment's interpreter and report the env profile in effect: each "
        "variable, its value, and whether it came from the profile or from your own environment.",
    )
    p.add_argument(
        "env",
        nargs="?",
        metavar="ENV",
        help="environment name under envs/ or a path to a virtual environment (default: the project's)",
    )
    p.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    p.add_argument(
        "--project", type=Path, default=None, metavar="DIR", help="project directory (default: nearest with recipes/)"
    )
    p.set_defaults(handler="envforge.cli.envprofile:run_show")
