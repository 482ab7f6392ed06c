"""Registration of ``envforge lock [RECIPE]`` (handler: :mod:`envforge.cli.lock`; its subcommands: ``lockdiff``)."""

from __future__ import annotations

import argparse
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.options import add_project_option, find_links_dir
from envforge.cli.parser import group, group_parser

__all__ = ["register"]


def _lock_recipe(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "recipe",
        nargs="?",
        metavar="RECIPE",
        help="recipe name under recipes/ or a path (default: the project's, docs/cli.md)",
    )


def _lock_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", metavar="VARIANT", help="one variant (default: every variant of the recipe)")
    p.add_argument("--check", action="store_true", help="never write; exit 1 and say why if a lock is stale")
    p.add_argument("--all", action="store_true", help="every recipe under recipes/ and every variant of each")
    p.add_argument(
        "--upgrade-package",
        action="append",
        default=[],
        metavar="P",
        help="let P move to a newer version (others stay as locked)",
    )
    p.add_argument("--offline", action="store_true", help="resolve from --find-links only; no network")
    p.add_argument(
        "--find-links",
        action="append",
        type=find_links_dir,
        default=[],
        metavar="DIR",
        help="a wheelhouse directory (for offline locks)",
    )
    p.add_argument(
        "--local-paths",
        action="store_true",
        help="with --offline: record wheelhouse files no lock of the project records by URL as local "
        "paths (a lock for this machine only; `lock --check` calls it stale without --find-links)",
    )
    p.add_argument(
        "--env-profile", metavar="PROFILE", help="env profile to record (default: from the target interconnect)"
    )
    p.add_argument("--json", action="store_true", help="print a JSON report")
    add_project_option(p)


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register the ``lock`` group: ``envforge lock [RECIPE]`` (its subcommands: commands/lockdiff.py)."""
    group(
        sub,
        "lock",
        help=SUMMARIES["lock"],
        description="Resolve a recipe's variants with uv into lockfiles/pylock.<recipe>-<variant>.toml. "
        "RECIPE: a recipe name under recipes/ or a path (default: the project's).",
        bare=(_lock_recipe, _lock_options),
        bare_usage="[RECIPE] [--variant VARIANT] [--check] [options]",
    )
    group_parser(sub, "lock").set_defaults(handler="envforge.cli.lock:run_lock", recipe=None)
