"""Registration of ``envforge init [DIR] [--recipe RECIPE | --from-env PATH]`` (handler: :mod:`envforge.cli.init`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.commands import SUMMARIES

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``init``."""
    p = sub.add_parser(
        "init",
        help=SUMMARIES["init"],
        description="Write an envforge project into DIR (default: the working directory): the "
        "embedded recipe RECIPE with its patchsets and committed lock, .gitattributes with "
        "the lock textconv and a .gitignore for envs/. Existing files are kept.",
    )
    p.add_argument("dir", nargs="?", type=Path, default=None, metavar="DIR", help="project directory (default: .)")
    p.add_argument(
        "--recipe",
        default="quickstart",
        metavar="RECIPE",
        help="the embedded recipe to start from (default: quickstart)",
    )
    p.add_argument(
        "--from-env",
        type=Path,
        metavar="PATH",
        help="adopt an existing virtual environment: a recipe pinning what is installed, its lock, "
        "a report of the files that differ from their RECORD (hand edits), and the hand-edited .py files "
        "captured as patchsets/adopted-DIST.toml",
    )
    p.add_argument(
        "--name", metavar="NAME", help="recipe name for --from-env (default: the environment's directory name)"
    )
    p.add_argument("--index-url", metavar="URL", help="the recipe's default index for --from-env (default: PyPI)")
    p.add_argument("--no-lock", action="store_true", help="with --from-env: write the recipe only, lock later")
    p.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    p.set_defaults(handler="envforge.cli.init:run_init")
