"""CLI for built environments: ``envforge envs`` (= ``envforge env list``) and ``envforge gc``
(registration: :mod:`envforge.cli.commands.environments`)."""

from __future__ import annotations

import argparse
import time

from envforge.cli.output import Ui, size_text
from envforge.cli.project import project_of
from envforge.core.plural import counted
from envforge.env.inventory import collect_garbage, list_environments
from envforge.env.processes import warning_lines

__all__ = ["run_gc", "run_list"]


def run_list(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge envs`` / ``env list``: every environment and its generations."""
    envs = list_environments(project_of(args, ui), args.names)
    if ui.json_mode:
        ui.emit_json("envs", {"environments": [e.as_dict() for e in envs]})
        return 0
    if not envs:
        ui.info("no environments yet: `envforge up` or `envforge build RECIPE` makes one")
        return 0
    now = time.time()
    for env in envs:
        ui.result(f"{env.name}  (live: {env.live or 'none'})")
        for g in env.generations:
            mark = "*" if g.live else " "
            what = (
                f"{g.recipe}/{g.variant}  {(g.lock_digest or 'lock unknown')[:19]}"
                if g.complete
                else "incomplete (a killed build; `envforge gc` removes it)"
            )
            if g.held_back and g.made_live:
                what += f"  failed verify when built ({', '.join(g.held_back)}); made live by `envforge rollback --to`"
            elif g.held_back:
                what += f"  held back: failed verify ({', '.join(g.held_back)}), never live"
            ui.result(f"  {mark} {g.name}  {what}  {_usage(g.own_bytes, g.shared_bytes)}  {_age(now - g.built_at)}")
        for line in warning_lines(env.name, env.stale):
            ui.warn(line)
    return 0


def run_gc(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge gc``: remove old generations (the live one and the ``--keep`` newest stay)."""
    res = collect_garbage(project_of(args, ui), keep=args.keep, names=args.names)
    if ui.json_mode:
        ui.emit_json(
            "gc",
            {
                "removed": [
                    {"env": e, "generation": g, "own_bytes": own, "shared_bytes": shared}
                    for e, g, own, shared in res.removed
                ],
                "kept": [{"env": e, "generation": g} for e, g in res.kept],
                "in_use": [{"env": e, "generation": g, "pid": pid, "command": cmd} for e, g, pid, cmd in res.in_use],
                "freed_bytes": res.freed_bytes,
            },
        )
        return 0
    for env, gen, own, shared in res.removed:
        ui.result(f"removed {env}/{gen}  {_usage(own, shared)}")
    for env, gen, pid, cmd in res.in_use:
        ui.warn(f"kept {env}/{gen}: in use by pid {pid} ({cmd}); run gc again once it has stopped")
    ui.info(
        f"gc: removed {counted(len(res.removed), 'generation')}, freed {size_text(res.freed_bytes)}; "
        f"kept {len(res.kept)}"
        + (
            ""
            if not any(r[3] for r in res.removed)
            else "; files hardlinked from uv's cache stay (`uv cache prune` frees those)"
        )
    )
    return 0


def _usage(own: int, shared: int) -> str:
    """``1.3 MiB own (+73.0 MiB shared with uv's cache)``; only the own part when nothing is shared."""
    return f"{size_text(own)} own" + (f" (+{size_text(shared)} shared with uv's cache)" if shared else "")


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= span:
            return f"{s // span} {unit} ago"
    return f"{s} s ago"
