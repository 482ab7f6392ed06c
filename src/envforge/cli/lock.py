"""CLI for ``envforge lock``: resolve recipe variants into PEP 751 locks, or check them (registration:
:mod:`envforge.cli.commands.lock`)."""

from __future__ import annotations

import argparse

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.core.errors import InputError
from envforge.core.plural import counted
from envforge.lock.check import check_lock
from envforge.lock.write import lock_variant, patchset_refs
from envforge.recipe.load import load_recipe
from envforge.recipe.project import Project

__all__ = ["run_lock"]


def run_lock(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge lock [RECIPE | --all]``: lock every variant (or ``--variant``) of the recipe (``--all``:
    of every recipe under recipes/), or ``--check`` them; exit 1 when a checked lock is stale. A
    ``--check`` of the default recipe in a project with others says which it checked."""
    project = project_of(args, ui)
    if args.all and (args.recipe or args.variant):
        raise InputError(
            f"--all with {'RECIPE' if args.recipe else '--variant'}: --all takes every recipe and variant",
            hint="drop one of them",
        )
    names = project.recipe_names() if args.all else [args.recipe]
    if args.check and args.recipe is None and not args.all and len(project.recipe_names()) > 1:
        others = len(project.recipe_names()) - 1
        ui.info(
            f"checking the project's default recipe ({project.recipe_path(None).stem}); "
            f"{counted(others, 'other recipe')} not checked: `envforge lock --check --all` checks every one"
        )
    stale = False
    rows: list[dict[str, object]] = []
    for recipe_name in names:
        stale |= _lock_recipe(project, recipe_name, args, ui, rows)
    if args.json:
        ui.emit_json("lock", {"locks": rows})
    return 1 if stale else 0


def _lock_recipe(
    project: Project, recipe_name: str | None, args: argparse.Namespace, ui: Ui, rows: list[dict[str, object]]
) -> bool:
    """Lock (or ``--check``) the variants of one recipe, appending a row each; True when one is stale."""
    recipe = load_recipe(project.recipe_path(recipe_name))
    variants = [args.variant] if args.variant else list(recipe.variants)
    stale = False
    for name in variants:
        variant = recipe.resolve(name, env_profile=args.env_profile)
        path = project.lock_path(variant.lock_name)
        refs = patchset_refs(project.patchsets_dir, variant.patchsets)  # without the variant's retired ones
        if args.check:
            res = check_lock(variant, refs, path, args.find_links)
            stale |= not res.fresh
            rows.append({"lock": str(path), "fresh": res.fresh, "reasons": list(res.reasons)})
            if not args.json:
                ui.result(f"{path}: {'up to date' if res.fresh else 'stale'}")
                for r in res.reasons:
                    ui.result(f"  {r}")
            continue
        ui.progress(f"locking {variant.lock_name} (python {variant.python}, {variant.target.platform}) ...")
        out = lock_variant(
            variant,
            refs,
            path,
            find_links=args.find_links,
            offline=args.offline,
            upgrade=args.upgrade_package,
            progress=ui.progress,
            local_paths=args.local_paths,
        )
        rows.append(
            {"lock": str(out.path), "packages": out.packages, "changed": out.changed, "warnings": list(out.warnings)}
        )
        for w in out.warnings:
            ui.warn(f"{variant.lock_name}: {w}")
        if not args.json:
            ui.result(f"{out.path}: {counted(out.packages, 'package')}{'' if out.changed else ' (unchanged)'}")
    return stale
