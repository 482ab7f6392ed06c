"""CLI for env profiles: ``envforge env show [ENV] [--json] [--project DIR]`` (registration:
:mod:`envforge.cli.commands.envprofile`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.env.layout import resolve_environment
from envforge.env.profile import ProfileView, recorded_profile, show

__all__ = ["run_show"]


def run_show(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge env show [ENV]``: 1 when the profile is installed but inert, or misread."""
    project = project_of(args, ui, required=not (args.env and "/" in args.env))
    name = args.env or project.default_environment()
    env = resolve_environment(project, name, name)
    view = show(env.python)
    inert = view.installed is not None and not view.active
    if ui.json_mode:
        data = view.as_dict()
        data["warnings"] = [*data["warnings"], *([_inert_warning(view, name)] if inert else [])]
        ui.emit_json("env-show", data)
    else:
        _render(view, env.path, ui, name)
    misread = any(w.startswith("envforge: env profile: ") for w in view.warnings)
    return 1 if inert or misread else 0


def _inert_warning(view: ProfileView, env_arg: str) -> str:
    """What to say when a profile is recorded as installed but no hook ran: how to re-install it
    (``apply-patches ENV`` installs the profile the environment's lock records)."""
    recorded = view.installed.profile if view.installed else None
    head = f"profile '{recorded}' is installed in {view.site_packages} but no hook ran at start-up; "
    locked = recorded_profile(view.site_packages)
    if locked is not None and (locked[0] or locked[1]):
        return head + f"re-install it with `envforge apply-patches {env_arg}` (the .pth mode is the default)"
    return head + ("the environment's lock records no env profile, so `envforge apply-patches` cannot "
                   "re-install it: rebuild the environment (`envforge build`)")


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
