"""Registration of ``envforge build``, ``envforge rollback`` and ``envforge up`` (handlers: :mod:`envforge.cli.build`, :mod:`envforge.cli.up`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.options import add_project_option, find_links_dir

__all__ = ["register"]


def _recipe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "recipe",
        nargs="?",
        metavar="RECIPE",
        help="recipe name under recipes/ or a path (default: the project's, docs/cli.md)",
    )
    p.add_argument("--variant", metavar="VARIANT", help="variant to build (default: the recipe's only variant)")
    p.add_argument("--env-profile", metavar="PROFILE", help="env profile (default: from the target interconnect)")
    p.add_argument(
        "--python", type=Path, default=None, metavar="PYTHON", help="interpreter to use instead of discovery"
    )
    p.add_argument(
        "--env-mode",
        choices=("pth", "sitecustomize"),
        default="pth",
        help="how the env profile is installed (default: a .pth start-up hook)",
    )
    p.add_argument("--offline", action="store_true", help="install from --find-links only; no network")
    p.add_argument(
        "--find-links",
        action="append",
        type=find_links_dir,
        default=[],
        metavar="DIR",
        help="a wheelhouse directory (with --offline)",
    )
    p.add_argument(
        "--link-mode",
        choices=("clone", "copy", "hardlink", "symlink"),
        default=None,
        metavar="MODE",
        help="how uv puts files from its cache into the generation: clone, copy, hardlink or symlink "
        "(default: $UV_LINK_MODE, else the recipe's [recipe] link-mode, else uv's: hardlink on Linux); recorded "
        "in generation.json. "
        "copy keeps an in-place edit of an installed file out of uv's cache",
    )
    add_project_option(p)


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``build``, ``rollback`` and ``up``."""
    p = sub.add_parser(
        "build",
        help=SUMMARIES["build"],
        description="Build a new generation of envs/<recipe>-<variant> from the variant's committed "
        "lock: uv venv and uv pip sync of exactly the locked wheels, the patchsets the "
        "lock lists, the env profile's start-up hook, then point envs/<recipe>-<variant> "
        "at it. The lock must be up to date (`envforge lock --check`); nothing is "
        "resolved here. RECIPE defaults to the project's (docs/cli.md).",
    )
    _recipe_args(p)
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--json", action="store_true", help="print the build (or the plan) as JSON")
    p.set_defaults(handler="envforge.cli.build:run_build")
    r = sub.add_parser(
        "rollback",
        help=SUMMARIES["rollback"],
        description="Point envs/ENV at the generation before the live one, or at generation "
        "--to gN, older or newer (roll forward again), also when none is live yet (a "
        "generation `up` held back). `envforge envs` lists them.",
    )
    r.add_argument("env", metavar="ENV", help="environment name, e.g. quickstart-default")
    r.add_argument("--to", metavar="GEN", help="the generation to make live, e.g. g0002 (default: the previous one)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    add_project_option(r)
    r.set_defaults(handler="envforge.cli.build:run_rollback")
    u = sub.add_parser(
        "up",
        help=SUMMARIES["up"],
        description="The main job, one command from a recipe to a verified environment: lock the "
        "variant when it has no lock yet (a stale lock stops with the reason), build a "
        "new generation unless the live one was built from this lock (--rebuild builds "
        "anyway), then verify it at the recipe's levels. A new generation is verified "
        "before envs/<recipe>-<variant> points at it: one that fails verify is held back "
        "(the link keeps its generation) and the next `up` from the same lock stops with "
        "the cause instead of building it again (--rebuild tries again; `envforge rollback ENV --to gN` makes it "
        "live anyway). Exit 0 only when "
        "verify is clean. RECIPE defaults to the project's (docs/cli.md).",
    )
    _recipe_args(u)
    u.add_argument(
        "--rebuild", action="store_true", help="build a new generation even when the live one was built from this lock"
    )
    u.add_argument("--json", action="store_true", help="print the lock check, build and verify report as JSON")
    u.set_defaults(handler="envforge.cli.up:run_up")
