"""CLI for ``envforge init [DIR] [--recipe RECIPE]``: scaffold a project from the embedded files, or
adopt an environment (``--from-env``: :func:`envforge.workflows.adopt.adopt_into_project`).
Registration: :mod:`envforge.cli.commands.init`."""

from __future__ import annotations

import argparse
from pathlib import Path

from envforge.cli.output import Ui
from envforge.core.errors import EnvforgeError
from envforge.core.plural import counted
from envforge.recipe.load import load_recipe
from envforge.recipe.platforms import host_problem
from envforge.recipe.project import Project
from envforge.recipe.scaffold import TEXTCONV_COMMAND, git_state, scaffold
from envforge.workflows.adopt import AdoptedProject, adopt_into_project

__all__ = ["run_init"]


def run_init(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge init``: 0, or with ``--from-env`` 1 when hand edits or distributions that are not
    from an index were found."""
    root = (args.dir or Path.cwd()).resolve()
    if args.from_env is not None:
        res = adopt_into_project(
            args.from_env,
            root,
            name=args.name,
            index_url=args.index_url,
            lock_it=not args.no_lock,
            progress=ui.progress,
        )
        return _render_adopted(res, root, ui)
    made = scaffold(root, args.recipe)
    if ui.json_mode:
        ui.emit_json(
            "init",
            {
                "root": str(root),
                "recipe": args.recipe,
                "created": [str(p.relative_to(root)) for p in made.created],
                "kept": [str(p.relative_to(root)) for p in made.kept],
            },
        )
        return 0
    for p in made.created:
        ui.result(f"created {p.relative_to(root)}")
    for p in made.kept:
        ui.info(f"kept    {p.relative_to(root)} (already there)")
    ui.info(_next_steps(root, args.recipe, args.dir is not None))
    return 0


def _next_steps(root: Path, recipe: str, elsewhere: bool) -> str:
    """The ``next:`` line: commands that work in ``root`` as it is (``git config`` fails outside a
    repository, so a directory that is not one gets ``git init`` first)."""
    where = f" in {root}" if elsewhere else ""
    up = f"`envforge up {recipe}{_variant_flag(root, recipe)}`{where}"
    state = git_state(root)
    if state == "set":
        return f"next: {up}"
    if state == "unset":
        return f"next: `{TEXTCONV_COMMAND}` (once per clone), then {up}"
    return (
        f"next: {up}; to review lock changes with `git diff`, make it a git repository first: "
        f"`git init`, then `{TEXTCONV_COMMAND}`{where}"
    )


def _variant_flag(root: Path, recipe: str) -> str:
    """`` --variant V`` when the recipe has several variants (``up`` then needs one, issue 44: the
    suggested step failed): the first, in the recipe's order, with a committed lock whose platform
    this machine runs, else the first; "" for a recipe of one variant (or one that does not load)."""
    try:
        loaded = load_recipe(Project(root).recipe_path(recipe))
    except EnvforgeError:
        return ""
    if len(loaded.variants) < 2:
        return ""
    for name in loaded.variants:
        variant = loaded.resolve(name)
        if Project(root).lock_path(variant.lock_name).is_file() and host_problem(variant.target.platform) is None:
            return f" --variant {name}"
    return f" --variant {loaded.variants[0]}"


def _render_adopted(res: AdoptedProject, root: Path, ui: Ui) -> int:
    adoption = res.adoption
    if ui.json_mode:
        ui.emit_json("adopt", res.as_dict())
    else:
        pinned = len(adoption.distributions) - len(adoption.not_from_an_index)
        ui.result(
            f"created {res.recipe_file.relative_to(root)}: {counted(pinned, 'distribution')} pinned "
            f"(python {adoption.python})"
        )
        if res.lock_file is not None:
            ui.result(f"created {res.lock_file.relative_to(root)}")
        ui.result(f"created {res.report_file.relative_to(root)}")
        for d in adoption.not_from_an_index:
            ui.warn(
                f"{d.name} {d.version} was installed from {d.source} {d.url}: not in the recipe; add it by hand"
                + (
                    "; its direct_url.json URL carried credentials, removed from every file written"
                    if d.credentials_removed
                    else ""
                )
            )
        for c in res.captures:
            if c.patchset is not None:
                ui.result(
                    f"created {c.patchset.relative_to(root)}: captured {', '.join(c.captured)} "
                    f"({counted(len(c.operations), 'operation')}; review it, `envforge build` applies it)"
                )
            for path, why in c.not_captured:
                ui.warn(f"hand edit: {path} ({c.distribution}) not captured: {why}")
    return 1 if adoption.edits or adoption.not_from_an_index else 0
