"""CLI for ``envforge lock``: resolve recipe variants into PEP 751 locks, or check them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.output import Ui
from envforge.cli.parser import group, group_parser

__all__ = ["add_project_option", "project_of", "register"]


def add_project_option(p: argparse.ArgumentParser) -> None:
    """``--project DIR``: the project root (default: nearest directory above cwd with recipes/)."""
    p.add_argument("--project", type=Path, default=None,
                   help="project root (default: the nearest directory above the working directory with recipes/)")


def project_of(args: argparse.Namespace, ui: Ui, *, required: bool = True) -> Any:
    """The project a command acts on: ``--project DIR``, else the enclosing project, else the
    default home that ``envforge up`` made, which is then named on stderr (as ``up`` does).
    ``required=False`` (an environment given by path): no project is the working directory.

    :raises InputError: no project anywhere (the message says so and hints ``init`` / ``up``).
    """
    import os

    from envforge.core.errors import InputError
    from envforge.recipe.project import Project, locate_project

    if getattr(args, "project", None) is not None:
        return Project(Path(args.project).resolve())
    try:
        located = locate_project(Path.cwd(), os.environ)
    except InputError:
        if required:
            raise
        return Project(Path.cwd().resolve())
    if located.how == "default-home":
        ui.info(f"not inside an envforge project: using the default project {located.project.root} "
                "(made by `envforge up`); `envforge init` makes a project here instead")
    return located.project


def _lock_recipe(p: argparse.ArgumentParser) -> None:
    p.add_argument("recipe", nargs="?", metavar="RECIPE",
                   help="recipe name under recipes/ or a path (default: quickstart)")


def _lock_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--variant", help="one variant (default: every variant of the recipe)")
    p.add_argument("--check", action="store_true", help="never write; exit 1 and say why if a lock is stale")
    p.add_argument("--upgrade-package", action="append", default=[], metavar="P",
                   help="let P move to a newer version (others stay as locked)")
    p.add_argument("--offline", action="store_true", help="resolve from --find-links only; no network")
    p.add_argument("--find-links", action="append", type=Path, default=[], metavar="DIR",
                   help="a wheelhouse directory (for offline locks)")
    p.add_argument("--env-profile", help="env profile to record (default: from the target interconnect)")
    p.add_argument("--json", action="store_true", help="print a JSON report")
    add_project_option(p)


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register the ``lock`` group: ``envforge lock [RECIPE]`` (its subcommands: cli/lockdiff.py)."""
    group(sub, "lock", help="resolve a recipe into PEP 751 locks (or --check them); also: lock diff, lock textconv",
          description="Resolve a recipe's variants with uv into lockfiles/pylock.<recipe>-<variant>.toml. "
                      "RECIPE: a recipe name under recipes/ or a path (default: quickstart).",
          bare=(_lock_recipe, _lock_options), bare_usage="[RECIPE] [--variant V] [--check] [options]")
    group_parser(sub, "lock").set_defaults(handler=run_lock, recipe=None)


def run_lock(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.lock.check import check_lock
    from envforge.lock.write import lock_variant, patchset_refs
    from envforge.recipe.load import load_recipe

    project = project_of(args, ui)
    recipe = load_recipe(project.recipe_path(args.recipe))
    variants = [args.variant] if args.variant else list(recipe.variants)
    refs = patchset_refs(project.patchsets_dir, recipe.patchsets)
    stale = False
    rows = []
    for name in variants:
        variant = recipe.resolve(name, env_profile=args.env_profile)
        path = project.lock_path(variant.lock_name)
        if args.check:
            res = check_lock(variant, refs, path)
            stale |= not res.fresh
            rows.append({"lock": str(path), "fresh": res.fresh, "reasons": list(res.reasons)})
            if not args.json:
                ui.result(f"{path}: {'up to date' if res.fresh else 'stale'}")
                for r in res.reasons:
                    ui.result(f"  {r}")
            continue
        ui.progress(f"locking {variant.lock_name} (python {variant.python}, {variant.target.platform}) ...")
        out = lock_variant(variant, refs, path, find_links=args.find_links, offline=args.offline,
                           upgrade=args.upgrade_package, progress=ui.progress)
        rows.append({"lock": str(out.path), "packages": out.packages, "changed": out.changed})
        if not args.json:
            ui.result(f"{out.path}: {out.packages} packages{'' if out.changed else ' (unchanged)'}")
    if args.json:
        ui.emit_json("lock", {"locks": rows})
    return 1 if stale else 0
