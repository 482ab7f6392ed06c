"""Registration of ``envforge run`` (handler: :mod:`envforge.cli.run`)."""

from __future__ import annotations

import argparse
from typing import Any

from envforge.cli.commands import SUMMARIES

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``envforge run [ENV] -- CMD [ARG...]`` on the top-level subparsers."""
    p = sub.add_parser(
        "run",
        help=SUMMARIES["run"],
        usage="envforge run [--project DIR] [ENV] -- CMD [ARG...]",
        description="Run CMD in the live generation of ENV (default: the project's), by its "
        "resolved path: PATH with its bin/ first, VIRTUAL_ENV set, the env profile "
        "applied by the hook in its site-packages. A later rebuild or rollback does "
        "not change what the running command imports. Names the generation on "
        "stderr; the exit status is CMD's.",
    )
    p.add_argument("--project", metavar="DIR", help="project directory (default: nearest with recipes/)")
    p.add_argument(
        "--keep-pythonpath",
        action="store_true",
        help="keep the caller's PYTHONPATH/PYTHONHOME (dropped by default: they shadow the environment)",
    )
    p.add_argument(
        "words",
        nargs=argparse.REMAINDER,
        metavar="[ENV] -- CMD",
        help="the environment (a name under envs/ or a path), then -- and the command",
    )
    p.set_defaults(handler="envforge.cli.run:run_command")
