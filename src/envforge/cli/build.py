"""CLI for ``envforge build`` and ``envforge rollback`` (``envforge up``, the main job, is
:mod:`envforge.cli.up`: a build never imports verify); registration: :mod:`envforge.cli.commands.build`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.core.errors import InputError
from envforge.env import build
from envforge.env.generations import rollback
from envforge.env.processes import stale_processes, warning_lines
from envforge.recipe import project as proj
from envforge.recipe.load import load_recipe
from envforge.recipe.project import Project
from envforge.recipe.scaffold import default_project_dir, scaffold
from envforge.uv.interpreter import Interpreter, find_python

__all__ = ["build_inputs", "build_plan", "render_build", "run_build", "run_rollback", "warn_stale"]


def build_inputs(args: argparse.Namespace, ui: Ui, *, up: bool = False) -> tuple[Project, Any, Interpreter]:
    """(project, resolved variant, interpreter) of a build; ``up`` outside a project makes the
    default home, ``build`` uses it only when it exists and names it (cli.project.project_of)."""
    if up and args.project is None and proj.enclosing_project(Path.cwd()) is None:
        project = _default_project(args, ui)
    else:
        project = project_of(args, ui)
    recipe = load_recipe(project.recipe_path(args.recipe))
    variant = recipe.resolve(args.variant, env_profile=args.env_profile)
    return project, variant, find_python(variant.python, args.python)


def build_plan(args: argparse.Namespace, project: Project, variant: Any, python: Interpreter) -> Any:
    """The BuildPlan of the arguments (:func:`envforge.env.build.plan_build`)."""
    link_mode = args.link_mode or os.environ.get("UV_LINK_MODE") or variant.link_mode
    return build.plan_build(
        project,
        variant,
        python,
        find_links=args.find_links,
        offline=args.offline,
        env_mode=args.env_mode,
        link_mode=link_mode,
    )


def _default_project(args: argparse.Namespace, ui: Ui) -> Any:
    """``envforge up`` outside a project: the embedded quickstart project in the user data directory."""
    root = default_project_dir(os.environ)
    if (
        args.recipe is not None
        and not (root / "recipes" / f"{args.recipe}.toml").is_file()
        and "/" not in args.recipe
        and not args.recipe.endswith(".toml")
    ):
        raise InputError(
            f"not inside an envforge project, and the default project {root} has no recipe '{args.recipe}'",
            hint="`envforge init` makes a project in this directory",
        )
    made = scaffold(root, git_files=False)
    ui.info(
        f"not inside an envforge project: using {root} (the embedded quickstart project"
        f"{', created now' if made.created else ''}); `envforge init` makes a project here instead"
    )
    return Project(root)


def render_build(ui: Ui, result: Any) -> None:
    """The build's notes (warnings) and ``envs/<env> -> gN``."""
    for note in result.notes:
        ui.warn(note)
    ui.result(f"{_shown(result.link)} -> {result.generation.name}")


def warn_stale(ui: Ui, link: Path) -> None:
    """After a flip: a warning line per process still running from another generation (B39)."""
    for line in warning_lines(link.name, stale_processes(link)):
        ui.warn(line)


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it is below it (as the user typed it)."""
    cwd = Path.cwd()
    return path.relative_to(cwd) if path.is_relative_to(cwd) else path


def run_build(args: argparse.Namespace, ui: Ui) -> int:
    project, variant, python = build_inputs(args, ui)
    plan = build_plan(args, project, variant, python)
    if args.dry_run:
        if ui.json_mode:
            ui.emit_json(
                "build-plan",
                {
                    "env": plan.link.name,
                    "generation": plan.generation.name,
                    "lock": str(plan.lock),
                    "plan": list(plan.describe()),
                },
            )
            return 0
        for line in plan.describe():
            ui.result(line)
        return 0
    ui.progress(f"building {plan.link.name} ({plan.generation.name}) ...")
    res = build.execute_build(plan, progress=ui.progress, terminal=ui.terminal())
    warn_stale(ui, res.link)
    if ui.json_mode:
        ui.emit_json(
            "build",
            {
                "env": res.link.name,
                "link": str(res.link),
                "generation": res.generation.name,
                "steps": [{"name": st.name, "seconds": round(st.seconds, 3), "detail": st.detail} for st in res.steps],
                "notes": list(res.notes),
            },
        )
        return 0
    render_build(ui, res)
    return 0


def run_rollback(args: argparse.Namespace, ui: Ui) -> int:
    project = project_of(args, ui)
    res = rollback(project, args.env, to=args.to)
    warn_stale(ui, res.link)
    if ui.json_mode:
        ui.emit_json(
            "rollback",
            {"env": args.env, "link": str(res.link), "previous": res.previous.name, "current": res.current.name},
        )
        return 0
    ui.result(f"{_shown(res.link)}: {res.previous.name} -> {res.current.name}")
    return 0
