"""Registration of ``envforge verify`` (handler: :mod:`envforge.cli.verify`)."""

from __future__ import annotations

import argparse
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.parser import seconds

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``envforge verify`` on the top-level subparsers."""
    p = sub.add_parser(
        "verify",
        help=SUMMARIES["verify"],
        description="Report every finding at once: exit 0 clean, 1 findings, 2 input error, "
        "3 a tool (the environment's interpreter) failed.",
    )
    p.add_argument(
        "env", nargs="?", metavar="ENV", help="environment name under envs/ or a path to one (default: the project's)"
    )
    p.add_argument(
        "--level",
        default=None,
        metavar="LEVELS",
        help="comma-separated levels: static, gpu, drafter (default: the recipe's [verify] levels, else static)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema envforge.verify/1)")
    p.add_argument("--junit", metavar="FILE", help="also write the report as JUnit XML to FILE")
    p.add_argument("--deep", action="store_true", help="hash every installed file (default: changed ones only)")
    p.add_argument(
        "--target-from-machine",
        action="store_true",
        help="check GPU count and capability against this machine instead of the recipe target",
    )
    p.add_argument(
        "--step-timeout",
        type=seconds(minimum=1),
        default=120.0,
        metavar="SECONDS",
        help="hard limit for each GPU probe step in seconds (default: 120)",
    )
    p.add_argument(
        "--yanked",
        action="store_true",
        help="also ask the lock's indexes whether a locked version is yanked (online; a `yanked` "
        "finding; an index that cannot be read is a note)",
    )
    p.add_argument("--project", metavar="DIR", help="project directory (default: nearest with recipes/)")
    p.add_argument(
        "--lock",
        metavar="FILE",
        help="verify against this lock instead of the one the environment records (an environment "
        "envforge did not build, adopted with `envforge init --from-env`)",
    )
    p.set_defaults(handler="envforge.cli.verify:run_verify")
