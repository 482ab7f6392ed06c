"""CLI for env profiles: ``envforge env show [ENV] [--json] [--project DIR]`` (registration:
:mod:`envforge.cli.commands.envprofile`)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.core.errors import InputError
from envforge.core.state import StateDir
from envforge.core.textfile import SMALL_LIMIT, parse_json, read_state
from envforge.env.enginevars import installed_problems
from envforge.env.layout import resolve_environment
from envforge.env.profile import ProfileView, Served, ServedCommand, recipe_servers, recorded_profile, served, show
from envforge.env.profile.effective import ENVIRONMENT
from envforge.recipe.load import load_recipe
from envforge.recipe.project import Project

__all__ = ["run_show"]


def run_show(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge env show [ENV]``: 1 when the profile is installed but inert, or misread (a hook's
    warning, or an engine variable the installed engine does not read as written: B60)."""
    project = project_of(args, ui, required=not (args.env and "/" in args.env))
    name = args.env or project.default_environment()
    env = resolve_environment(project, name, name)
    view = show(env.python)
    inert = view.installed is not None and not view.active
    servers, note = _servers(project, view.site_packages)
    runs = served(view, servers, os.environ)
    profile_env = {v.name: v.profile_value for v in view.variables}
    unread = installed_problems(profile_env, view.site_packages)
    extra = [*([note] if note else []), *_served_warnings(view, runs), *unread]
    if ui.json_mode:
        data = view.as_dict()
        data["served"] = [r.as_dict() for r in runs]
        data["warnings"] = [*data["warnings"], *([_inert_warning(view, name)] if inert else []), *extra]
        ui.emit_json("env-show", data)
    else:
        _render(view, env.path, ui, name)
        _render_served(runs, ui)
        for line in extra:
            ui.warn(line)
    misread = any(w.startswith("envforge: env profile: ") for w in view.warnings) or bool(unread)
    return 1 if inert or misread else 0


def _inert_warning(view: ProfileView, env_arg: str) -> str:
    """What to say when a profile is recorded as installed but no hook ran: how to re-install it
    (``apply-patches ENV`` installs the profile the environment's lock records)."""
    recorded = view.installed.profile if view.installed else None
    head = f"profile '{recorded}' is installed in {view.site_packages} but no hook ran at start-up; "
    locked = recorded_profile(view.site_packages)
    if locked is not None and (locked[0] or locked[1]):
        return head + f"re-install it with `envforge apply-patches {env_arg}` (the .pth mode is the default)"
    return head + (
        "the environment's lock records no env profile, so `envforge apply-patches` cannot "
        "re-install it: rebuild the environment (`envforge build`)"
    )


def _render(view: ProfileView, env_path: Path, ui: Ui, env_arg: str) -> None:
    ui.result(f"environment: {env_path} ({view.python})")
    if view.installed is None and not view.active:
        ui.result("env profile: none installed")
        return
    recorded = view.installed.profile if view.installed else None
    where = view.hook or "no hook ran"
    name = (view.profile if view.active else recorded) or "default"
    ui.result(f"env profile: {name} ({view.mode or 'inactive'}: {where})")
    width = max((len(v.name) for v in view.variables), default=0)
    for v in view.variables:
        shown = "(unset)" if v.value is None else v.value
        note = f"  (profile: {v.profile_value})" if v.source != "profile" else ""
        ui.result(f"  {v.name.ljust(width)} = {shown}  [{v.source}]{note}")
    for line in view.warnings:
        ui.warn(line)
    if view.installed is not None and not view.active:
        ui.warn(_inert_warning(view, env_arg))


def _servers(project: Project | None, site_packages: Path) -> tuple[Sequence[ServedCommand], str | None]:
    """The ``[[verify.smoke.servers]]`` of the recipe the environment was built from (its
    ``.envforge/generation.json``), and a warning when that recipe cannot be read."""
    path = StateDir(site_packages).generation_record
    try:
        gen: Any = parse_json(read_state(path, what="generation record", limit=SMALL_LIMIT), label=str(path))
        recipe = gen.get("recipe") if isinstance(gen, Mapping) else None
        if project is None or not isinstance(recipe, str):
            return (), None
        recipe_path = project.recipe_path(recipe)
        if not recipe_path.is_file():
            return (), None
        return recipe_servers(load_recipe(recipe_path).data.get("verify", {})), None
    except FileNotFoundError:
        return (), None
    except InputError as exc:
        return (), f"envforge: served process: the recipe's servers are not shown: {exc.message}"


def _served_warnings(view: ProfileView, runs: Sequence[Served]) -> list[str]:
    """One line per profile value a launcher (or an NCCL file) overrides, and per engine version
    without launcher data."""
    out = []
    for r in runs:
        where = f"served process '{r.server}'" if r.server else "served process"
        if r.effective.unknown_launcher:
            out.append(
                f"envforge: {where}: envforge has no launcher data for {r.effective.unknown_launcher}: "
                "variables its launch code sets are not shown"
            )
        out += [
            f"envforge: {where}: {line}"
            for line in r.effective.overrides(view.profile or (view.installed.profile if view.installed else None))
        ]
    return out


def _render_served(runs: Sequence[Served], ui: Ui) -> None:
    """Each server's variables that do not come from the caller's environment, with their source."""
    for r in runs:
        if r.effective.launcher is None and not r.effective.conf_files:
            continue  # nothing beyond the profile section above
        shown = [v for v in r.effective.variables if v.source != ENVIRONMENT or v.overrides_profile]
        launcher = r.effective.launcher.label if r.effective.launcher else "no launcher"
        head = f"server '{r.server}', launcher {launcher}" if r.server else "no [verify.smoke] server"
        ui.result(f"served process ({head}):")
        width = max((len(v.name) for v in shown), default=0)
        for v in shown:
            value = "(per run)" if v.value is None else v.value
            note = f"  (profile: {v.profile_value})" if v.overrides_profile else ""
            ui.result(f"  {v.name.ljust(width)} = {value}  [{v.source}]{note}")
        for conf in r.effective.conf_files:
            ui.result(f"  NCCL reads {conf.path} ({conf.digest})")
