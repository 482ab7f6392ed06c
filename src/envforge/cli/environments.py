"""CLI for built environments: ``envforge envs`` (= ``envforge env list``) and ``envforge gc``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envforge.cli.output import Ui

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``envs``, the ``env`` group's ``list``, and ``gc``."""
    from envforge.cli.lock import add_project_option
    from envforge.cli.parser import group

    commands = group(sub, "env", help="environments: list, show (the env profile a process sees)",
                     description="Built environments under envs/ and the env profile their processes see.")
    for p in (sub.add_parser("envs", help="every environment, its generations, which one is live (= env list)",
                             description=_LIST),
              commands.add_parser("list", help="every environment, its generations, which one is live",
                                  description=_LIST)):
        p.add_argument("names", nargs="*", metavar="ENV", help="only these environments")
        p.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
        add_project_option(p)
        p.set_defaults(handler=_list)
    g = sub.add_parser("gc", help="remove old generations (keep the live one and the --keep newest)",
                       description="Remove generations of each environment (or of ENV...): the live one and the "
                                   "--keep newest complete ones stay; leftovers of killed builds always go. "
                                   "Builds never prune by themselves.")
    g.add_argument("names", nargs="*", metavar="ENV", help="only these environments")
    g.add_argument("--keep", type=int, default=2, metavar="N",
                   help="complete generations to keep per environment besides the live one (default: 2)")
    g.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    add_project_option(g)
    g.set_defaults(handler=_gc)


_LIST = ("Every environment under envs/: its generations (oldest first), which one is live (*), the recipe and "
         "variant each was built from, its lock digest, its own bytes (what removing it frees; files hardlinked from uv's cache are shown apart as shared) and age. `incomplete` marks what a killed "
         "build left (never live; `envforge gc` removes it).")


def _project(args: argparse.Namespace, ui: Ui) -> Any:
    from envforge.cli.lock import project_of

    return project_of(args, ui)


def _list(args: argparse.Namespace, ui: Ui) -> int:
    import time

    from envforge.env.inventory import list_environments

    envs = list_environments(_project(args, ui), args.names)
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
            what = (f"{g.recipe}/{g.variant}  {(g.lock_digest or 'lock unknown')[:19]}" if g.complete
                    else "incomplete (a killed build; `envforge gc` removes it)")
            ui.result(f"  {mark} {g.name}  {what}  {_usage(g.own_bytes, g.shared_bytes)}  {_age(now - g.built_at)}")
    return 0


def _gc(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.env.inventory import collect_garbage

    res = collect_garbage(_project(args, ui), keep=args.keep, names=args.names)
    if ui.json_mode:
        ui.emit_json("gc", {"removed": [{"env": e, "generation": g, "own_bytes": own, "shared_bytes": shared}
                                        for e, g, own, shared in res.removed],
                            "kept": [{"env": e, "generation": g} for e, g in res.kept],
                            "freed_bytes": res.freed_bytes})
        return 0
    for env, gen, own, shared in res.removed:
        ui.result(f"removed {env}/{gen}  {_usage(own, shared)}")
    ui.info(f"gc: removed {len(res.removed)} generation(s), freed {_size(res.freed_bytes)}; "
            f"kept {len(res.kept)}" + ("" if not any(r[3] for r in res.removed) else
                                        "; files hardlinked from uv's cache stay (`uv cache prune` frees those)"))
    return 0


def _usage(own: int, shared: int) -> str:
    """``1.3 MiB own (+73.0 MiB shared with uv's cache)``; only the own part when nothing is shared."""
    return f"{_size(own)} own" + (f" (+{_size(shared)} shared with uv's cache)" if shared else "")


def _size(n: int) -> str:
    """``512 B``, ``1.5 KiB``, ``4.2 GiB``."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= span:
            return f"{s // span} {unit} ago"
    return f"{s} s ago"
