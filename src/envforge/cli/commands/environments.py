"""Registration of ``envforge envs`` (= ``envforge env list``) and ``envforge gc`` (handlers:
:mod:`envforge.cli.environments`)."""

from __future__ import annotations

import argparse
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.options import add_project_option
from envforge.cli.parser import group

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``envs``, the ``env`` group's ``list``, and ``gc``."""
    commands = group(
        sub,
        "env",
        help=SUMMARIES["env"],
        description="Built environments under envs/ and the env profile their processes see.",
    )
    for p in (
        sub.add_parser("envs", help=SUMMARIES["envs"], description=_LIST),
        commands.add_parser("list", help="every environment, its generations, which one is live", description=_LIST),
    ):
        p.add_argument("names", nargs="*", metavar="ENV", help="only these environments")
        p.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
        add_project_option(p)
        p.set_defaults(handler="envforge.cli.environments:run_list")
    g = sub.add_parser(
        "gc",
        help=SUMMARIES["gc"],
        description="Remove generations of each environment (or of ENV...): the live one and the "
        "--keep newest complete ones stay; leftovers of killed builds always go. "
        "Builds never prune by themselves.",
    )
    g.add_argument("names", nargs="*", metavar="ENV", help="only these environments")
    g.add_argument(
        "--keep",
        type=int,
        default=2,
        metavar="N",
        help="the N newest complete generations of each environment stay, and the live one (default: 2); "
        "with --keep 1 and the newest one live, nothing is left to roll back to",
    )
    g.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    add_project_option(g)
    g.set_defaults(handler="envforge.cli.environments:run_gc")


_LIST = (
    "Every environment under envs/: its generations (oldest first), which one is live (*), the recipe and "
    "variant each was built from, its lock digest, its own bytes (what removing it frees; files hardlinked from uv's cache are shown apart as shared) and age. `incomplete` marks what a killed "
    "build left (never live; `envforge gc` removes it)."
)
