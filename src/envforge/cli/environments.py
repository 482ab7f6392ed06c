"""CLI for built environments: ``envforge envs`` (= ``envforge env list``) and ``envforge gc``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envforge.cli.output import Ui

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``envs``, the ``env`` group's ``list``, and ``gc``."""
    from envforge.cli.lock import add_project_option
    from envforge.cli.parser import group

    commands = group(sub, "env", help="environments: list, show (the env profile a process sees)",
                     description="Built environments under envs/ and the env profile their processes see.")
    for p in (sub.add_parser("envs", help="every environment, its generations, which one is live (= env list)"),
              commands.add_parser("list", help="every environment, its generations, which one is live")):
        p.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
        add_project_option(p)
        p.set_defaults(handler=_list)


def _list(args: argparse.Namespace, ui: Ui) -> int:
    raise NotImplementedError
