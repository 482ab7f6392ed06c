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
    p.add_argument("--from-env", type=Path, metavar="PATH",
                   help="adopt an existing virtual environment: a recipe pinning what is installed, its lock, "
                        "a report of the files that differ from their RECORD (hand edits), and the hand-edited .py files "
                        "captured as patchsets/adopted-DIST.toml")
    p.add_argument("--name", metavar="NAME", help="recipe name for --from-env (default: the environment's directory name)")
    p.add_argument("--index-url", metavar="URL", help="the recipe's default index for --from-env (default: PyPI)")
    p.add_argument("--no-lock", action="store_true", help="with --from-env: write the recipe only, lock later")
    p.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    p.set_defaults(handler=_init)


def _init(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.recipe.scaffold import scaffold

    root = (args.dir or Path.cwd()).resolve()
    if args.from_env is not None:
        return _from_env(args, root, ui)
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
    ui.info(_next_steps(root, args.recipe, args.dir is not None))
    return 0


def _next_steps(root: Path, recipe: str, elsewhere: bool) -> str:
    """The ``next:`` line: commands that work in ``root`` as it is (``git config`` fails outside a
    repository, so a directory that is not one gets ``git init`` first)."""
    from envforge.recipe.scaffold import TEXTCONV_COMMAND, git_state

    where = f" in {root}" if elsewhere else ""
    up = f"`envforge up {recipe}`{where}"
    state = git_state(root)
    if state == "set":
        return f"next: {up}"
    if state == "unset":
        return f"next: `{TEXTCONV_COMMAND}` (once per clone), then {up}"
    return (f"next: {up}; to review lock changes with `git diff`, make it a git repository first: "
            f"`git init`, then `{TEXTCONV_COMMAND}`{where}")


def _from_env(args: argparse.Namespace, root: Path, ui: Ui) -> int:
    import json
    import re

    from envforge.lock.write import lock_variant, patchset_refs
    from envforge.workflows.adopt import PYPI, adopt_environment, capture_hand_edits, with_patchsets
    from envforge.core.errors import InputError
    from envforge.recipe.project import Project
    from envforge.recipe.load import load_recipe
    from envforge.patching.releases import default_cache
    from envforge.recipe.scaffold import scaffold

    env = args.from_env.resolve()
    name = args.name or re.sub(r"[^A-Za-z0-9_-]+", "-", env.name).strip("-_").lower() or "adopted"
    adoption = adopt_environment(env, name=name, index_url=args.index_url or PYPI)
    project = Project(root)
    recipe_path = project.recipes_dir / f"{name}.toml"
    if recipe_path.exists():
        raise InputError(f"{recipe_path} already exists", hint="pass --name NAME for another recipe name")
    scaffold(root, None)
    captures = capture_hand_edits(adoption, project.patchsets_dir, default_cache() / "releases")
    ids = tuple(c.patchset.stem for c in captures if c.patchset is not None)
    recipe_path.write_text(with_patchsets(adoption.recipe_text, ids), encoding="utf-8")
    report = {**adoption.as_dict(), "captured": [c.as_dict() for c in captures]}
    report_path = project.recipes_dir / f"{name}.adopted.json"
    report_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    lock_path = None
    if not args.no_lock:
        variant = load_recipe(recipe_path).resolve(None)
        lock_path = lock_variant(variant, patchset_refs(project.patchsets_dir, variant.patchsets),
                                 project.lock_path(variant.lock_name), progress=ui.progress).path
    if ui.json_mode:
        ui.emit_json("adopt", {**report, "recipe_file": str(recipe_path), "report_file": str(report_path),
                               "lock_file": None if lock_path is None else str(lock_path)})
    else:
        pinned = len(adoption.distributions) - len(adoption.not_from_an_index)
        ui.result(f"created {recipe_path.relative_to(root)}: {pinned} distributions pinned (python {adoption.python})")
        if lock_path is not None:
            ui.result(f"created {lock_path.relative_to(root)}")
        ui.result(f"created {report_path.relative_to(root)}")
        for d in adoption.not_from_an_index:
            ui.warn(f"{d.name} {d.version} was installed from {d.source} {d.url}: not in the recipe; add it by hand")
        for c in captures:
            if c.patchset is not None:
                ui.result(f"created {c.patchset.relative_to(root)}: captured {', '.join(c.captured)} "
                          f"({len(c.operations)} operations; review it, `envforge build` applies it)")
            for path, why in c.not_captured:
                ui.warn(f"hand edit: {path} ({c.distribution}) not captured: {why}")
    return 1 if adoption.edits or adoption.not_from_an_index else 0
