"""Registration of ``envforge lock diff`` and ``envforge lock textconv`` in the ``lock`` group
(handlers: :mod:`envforge.cli.lockdiff`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.parser import group

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``lock diff`` and ``lock textconv`` in the ``lock`` group."""
    commands = group(sub, "lock")
    p = commands.add_parser(
        "diff",
        help="compare two locks (files, git revisions, or a recipe's variants)",
        description="Compare locks: envforge lock diff OLD NEW | --git REV | RECIPE --variants. "
        "OLD and NEW are lock paths or REV:PATH.",
    )
    p.add_argument("sides", nargs="*", metavar="SIDE", help="OLD NEW, or RECIPE with --variants")
    p.add_argument("--git", metavar="REV", help="every lockfile changed between REV and the working tree")
    p.add_argument("--variants", action="store_true", help="matrix of one recipe's variant locks")
    p.add_argument(
        "--format",
        choices=("terminal", "markdown", "json"),
        default="terminal",
        help="output format (default: terminal)",
    )
    p.add_argument("--json", action="store_true", help="same as --format json")
    p.add_argument(
        "--all",
        action="store_true",
        dest="show_all",
        help="also show metadata-only churn (upload times, sizes, generator comments)",
    )
    p.add_argument("--exit-code", action="store_true", help="exit 1 when there are changes")
    p.add_argument(
        "--yanked",
        action="store_true",
        help="also ask NEW's indexes whether a locked version is yanked (online; exit 1 with --exit-code)",
    )
    p.add_argument(
        "--project", type=Path, metavar="DIR", help="project root for --variants (default: nearest with recipes/)"
    )
    p.set_defaults(handler="envforge.cli.lockdiff:run_diff")
    t = commands.add_parser(
        "textconv",
        help="readable text of a lock, for git diff (textconv)",
        description="Print a stable, readable form of one lockfile. Set up with "
        "`.gitattributes`: `pylock.*.toml diff=pylock` and "
        "`git config diff.pylock.textconv 'envforge lock textconv'`.",
    )
    t.add_argument("file", type=Path, metavar="FILE", help="the lockfile (git passes a temporary copy)")
    t.set_defaults(handler="envforge.cli.lockdiff:run_textconv")
