"""CLI for ``envforge build``, ``envforge rollback`` and ``envforge up`` (the main job)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.lock import add_project_option
from envforge.cli.output import Ui

__all__ = ["register"]


def _recipe_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("recipe", nargs="?", help="recipe name under recipes/ or a path (default: quickstart)")
    p.add_argument("--variant", help="variant to build (default: the recipe's only variant)")
    p.add_argument("--env-profile", help="env profile (default: from the target interconnect)")
    p.add_argument("--python", type=Path, default=None, help="interpreter to use instead of discovery")
    p.add_argument("--env-mode", choices=("pth", "sitecustomize"), default="pth",
                   help="how the env profile is installed (default: a .pth start-up hook)")
    p.add_argument("--offline", action="store_true", help="install from --find-links only; no network")
    p.add_argument("--find-links", action="append", type=Path, default=[], metavar="DIR",
                   help="a wheelhouse directory (with --offline)")
    add_project_option(p)


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``build``, ``rollback`` and ``up``."""
    p = sub.add_parser("build", help="build envs/<recipe>-<variant> from its lock (a new generation)")
    _recipe_args(p)
    p.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    p.add_argument("--json", action="store_true", help="print the build (or the plan) as JSON")
    p.set_defaults(handler=run_build)
    r = sub.add_parser("rollback", help="point envs/<name> back at the previous generation (or --to gN)",
                       description="Point envs/ENV at the generation before the live one, or at generation "
                                   "--to gN, older or newer (roll forward again). `envforge envs` lists them.")
    r.add_argument("env", help="environment name, e.g. quickstart-default")
    r.add_argument("--to", metavar="GEN", help="the generation to make live, e.g. g0002 (default: the previous one)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    add_project_option(r)
    r.set_defaults(handler=run_rollback)
    u = sub.add_parser("up", help="the main job: check the lock, build, patch, verify (default recipe: quickstart)")
    _recipe_args(u)
    u.add_argument("--rebuild", action="store_true",
                   help="build a new generation even when the live one was built from this lock")
    u.add_argument("--json", action="store_true", help="print the lock check, build and verify report as JSON")
    u.set_defaults(handler=run_up)


def _plan(args: argparse.Namespace, ui: Ui, *, up: bool = False):  # type: ignore[no-untyped-def]
    """(project, BuildPlan); ``up`` outside a project makes the default home, ``build`` uses it
    only when it exists and names it (cli.lock.project_of)."""
    from envforge.env import build
    from envforge.recipe import project as proj
    from envforge.cli.lock import project_of
    from envforge.uv.interpreter import find_python
    from envforge.recipe.load import load_recipe

    if up and args.project is None and proj.enclosing_project(Path.cwd()) is None:
        project = _default_project(args, ui)
    else:
        project = project_of(args, ui)
    recipe = load_recipe(project.recipe_path(args.recipe))
    variant = recipe.resolve(args.variant, env_profile=args.env_profile)
    python = find_python(variant.python, args.python)
    return project, build.plan_build(project, variant, python, find_links=args.find_links, offline=args.offline,
                                      env_mode=args.env_mode)


def _default_project(args: argparse.Namespace, ui: Ui) -> Any:
    """``envforge up`` outside a project: the embedded quickstart project in the user data directory."""
    import os

    from envforge.core.errors import InputError
    from envforge.recipe.project import Project
    from envforge.recipe.scaffold import default_project_dir, scaffold

    root = default_project_dir(os.environ)
    if args.recipe is not None and not (root / "recipes" / f"{args.recipe}.toml").is_file() and "/" not in args.recipe \
            and not args.recipe.endswith(".toml"):
        raise InputError(f"not inside an envforge project, and the default project {root} has no recipe "
                         f"'{args.recipe}'", hint="`envforge init` makes a project in this directory")
    made = scaffold(root, git_files=False)
    ui.info(f"not inside an envforge project: using {root} (the embedded quickstart project"
            f"{', created now' if made.created else ''}); `envforge init` makes a project here instead")
    return Project(root)


def _render_build(ui: Ui, result: Any) -> None:
    for note in result.notes:
        ui.warn(note)
    ui.result(f"{_shown(result.link)} -> {result.generation.name}")


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it is below it (as the user typed it)."""
    cwd = Path.cwd()
    return path.relative_to(cwd) if path.is_relative_to(cwd) else path


def run_build(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.env import build
    _, plan = _plan(args, ui)
    if args.dry_run:
        if ui.json_mode:
            ui.emit_json("build-plan", {"env": plan.link.name, "generation": plan.generation.name,
                                        "lock": str(plan.lock), "plan": list(plan.describe())})
            return 0
        for line in plan.describe():
            ui.result(line)
        return 0
    ui.progress(f"building {plan.link.name} ({plan.generation.name}) ...")
    res = build.execute_build(plan, progress=ui.progress, terminal=ui.terminal())
    if ui.json_mode:
        ui.emit_json("build", {
            "env": res.link.name, "link": str(res.link), "generation": res.generation.name,
            "steps": [{"name": st.name, "seconds": round(st.seconds, 3), "detail": st.detail} for st in res.steps],
            "notes": list(res.notes)})
        return 0
    _render_build(ui, res)
    return 0


def run_rollback(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.env import build
    from envforge.cli.lock import project_of

    project = project_of(args, ui)
    res = build.rollback(project, args.env, to=args.to)
    if ui.json_mode:
        ui.emit_json("rollback", {"env": args.env, "link": str(res.link), "previous": res.previous.name,
                                  "current": res.current.name})
        return 0
    ui.result(f"{_shown(res.link)}: {res.previous.name} -> {res.current.name}")
    return 0


def run_up(args: argparse.Namespace, ui: Ui) -> int:
    import os

    from envforge.cli.verify import _uv_cache
    from envforge.workflows.up import run_main_job
    from envforge.verify import VerifyOptions
    from envforge.verify.report import as_json, as_text

    project, plan = _plan(args, ui, up=True)
    options = VerifyOptions(base_env=dict(os.environ), uv_cache=_uv_cache(os.environ),
                            hub_endpoint=os.environ.get("HF_ENDPOINT"))
    res = run_main_job(project, plan, options, rebuild=args.rebuild, progress=ui.info, terminal=ui.terminal())
    if ui.json_mode:
        ui.emit_json("up", {
            "lock": {"path": str(res.lock.path), "fresh": res.lock.fresh, "reasons": list(res.lock.reasons)},
            "build": None if res.build is None else {
                "generation": res.build.generation.name,
                "steps": [{"name": st.name, "seconds": round(st.seconds, 3), "detail": st.detail} for st in res.build.steps],
                "notes": list(res.build.notes)},
            "reused": None if res.reused is None else res.reused.name,
            "verify": None if res.report is None else as_json(res.report),
            "damaged": None if res.damaged is None else as_json(res.damaged)})
        return res.exit_code
    for reason in res.lock.reasons:
        ui.info(f"  {reason}")
    if not res.lock.fresh:
        ui.info(f"  run `envforge lock {plan.variant.recipe} --variant {plan.variant.variant}` and review the change")
        return res.exit_code
    for note in res.build.notes if res.build is not None else ():
        ui.warn(note)
    for line in as_text(res.report) if res.report is not None else ():
        ui.result(line)
    return res.exit_code
