"""CLI for ``envforge init [DIR] [--recipe NAME]``: scaffold a project from the embedded files."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envforge.cli.output import Ui

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``init``."""
    p = sub.add_parser("init", help="scaffold a project: recipes/, patchsets/, lockfiles/, .gitattributes, .gitignore",
                       description="Write an envforge project into DIR (default: the working directory): the "
                                   "embedded recipe NAME with its patchsets and committed lock, .gitattributes with "
                                   "the lock textconv and a .gitignore for envs/. Existing files are kept.")
    p.add_argument("dir", nargs="?", type=Path, default=None, metavar="DIR", help="project directory (default: .)")
    p.add_argument("--recipe", default="quickstart", metavar="NAME",
                   help="the embedded recipe to start from (default: quickstart)")
    p.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    p.set_defaults(handler=_init)


def _init(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.scaffold import scaffold

    root = (args.dir or Path.cwd()).resolve()
    res = scaffold(root, args.recipe)
    if ui.json_mode:
        ui.emit_json("init", {"root": str(root), "recipe": args.recipe,
                              "created": [str(p.relative_to(root)) for p in res.created],
                              "kept": [str(p.relative_to(root)) for p in res.kept]})
        return 0
    for p in res.created:
        ui.result(f"created {p.relative_to(root)}")
    for p in res.kept:
        ui.info(f"kept    {p.relative_to(root)} (already there)")
    ui.info("next: `git config diff.pylock.textconv 'envforge lock textconv'` (once per clone), "
            f"then `envforge up {args.recipe}`" + ("" if args.dir is None else f" in {root}"))
    return 0
