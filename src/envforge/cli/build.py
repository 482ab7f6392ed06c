"""CLI for ``envforge build``, ``envforge rollback`` and ``envforge up`` (the main job); registration:
:mod:`envforge.cli.commands.build`."""

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
from envforge.uv.interpreter import find_python
from envforge.uv.run import cache_dir
from envforge.verify import VerifyOptions
from envforge.verify.report import as_json, as_text
from envforge.workflows.up import lock_if_missing, run_main_job

__all__ = ["run_build", "run_rollback", "run_up"]


def _plan(args: argparse.Namespace, ui: Ui, *, up: bool = False):  # type: ignore[no-untyped-def]
    """(project, BuildPlan, the lock ``up`` wrote or None); ``up`` outside a project makes the
    default home, ``build`` uses it only when it exists and names it (cli.project.project_of);
    ``up`` locks a variant that has no lock yet (workflows.up.lock_if_missing)."""
    if up and args.project is None and proj.enclosing_project(Path.cwd()) is None:
        project = _default_project(args, ui)
    else:
        project = project_of(args, ui)
    recipe = load_recipe(project.recipe_path(args.recipe))
    variant = recipe.resolve(args.variant, env_profile=args.env_profile)
    python = find_python(variant.python, args.python)
    locked = (
        lock_if_missing(project, variant, find_links=args.find_links, offline=args.offline, progress=ui.info)
        if up
        else None
    )
    link_mode = args.link_mode or os.environ.get("UV_LINK_MODE") or variant.link_mode
    return (
        project,
        build.plan_build(
            project,
            variant,
            python,
            find_links=args.find_links,
            offline=args.offline,
            env_mode=args.env_mode,
            link_mode=link_mode,
        ),
        locked,
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


def _render_build(ui: Ui, result: Any) -> None:
    for note in result.notes:
        ui.warn(note)
    ui.result(f"{_shown(result.link)} -> {result.generation.name}")


def _warn_stale(ui: Ui, link: Path) -> None:
    """After a flip: a warning line per process still running from another generation (B39)."""
    for line in warning_lines(link.name, stale_processes(link)):
        ui.warn(line)


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it is below it (as the user typed it)."""
    cwd = Path.cwd()
    return path.relative_to(cwd) if path.is_relative_to(cwd) else path


def run_build(args: argparse.Namespace, ui: Ui) -> int:
    _, plan, _ = _plan(args, ui)
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
    _warn_stale(ui, res.link)
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
    _render_build(ui, res)
    return 0


def run_rollback(args: argparse.Namespace, ui: Ui) -> int:
    project = project_of(args, ui)
    res = rollback(project, args.env, to=args.to)
    _warn_stale(ui, res.link)
    if ui.json_mode:
        ui.emit_json(
            "rollback",
            {"env": args.env, "link": str(res.link), "previous": res.previous.name, "current": res.current.name},
        )
        return 0
    ui.result(f"{_shown(res.link)}: {res.previous.name} -> {res.current.name}")
    return 0


def run_up(args: argparse.Namespace, ui: Ui) -> int:
    project, plan, locked = _plan(args, ui, up=True)
    options = VerifyOptions(base_env=dict(os.environ), uv_cache=cache_dir(), hub_endpoint=os.environ.get("HF_ENDPOINT"))
    res = run_main_job(
        project, plan, options, rebuild=args.rebuild, progress=ui.info, terminal=ui.terminal(), locked=locked
    )
    if res.build is not None and res.held is None:  # made live: who still runs another generation (B39)
        _warn_stale(ui, plan.link)
    if ui.json_mode:
        ui.emit_json(
            "up",
            {
                "lock": {
                    "path": str(res.lock.path),
                    "fresh": res.lock.fresh,
                    "reasons": list(res.lock.reasons),
                    "created": res.locked is not None,
                },
                "build": None
                if res.build is None
                else {
                    "generation": res.build.generation.name,
                    "steps": [
                        {"name": st.name, "seconds": round(st.seconds, 3), "detail": st.detail}
                        for st in res.build.steps
                    ],
                    "notes": list(res.build.notes),
                },
                "reused": None if res.reused is None else res.reused.name,
                "verify": None if res.report is None else as_json(res.report),
                "damaged": None if res.damaged is None else as_json(res.damaged),
                "held": None if res.held is None else res.held.name,
                "stopped": res.stopped,
            },
        )
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
