"""CLI for ``envforge verify``: parse, call :func:`envforge.verify.verify`, render, return the exit code."""

from __future__ import annotations

import argparse
from typing import Any

from envforge.cli.parser import seconds

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``envforge verify`` on the top-level subparsers."""
    p = sub.add_parser("verify",
                       help="prove an environment is what its lock and patchsets say (and the GPU box suits it)",
                       description="Report every finding at once: exit 0 clean, 1 findings, 2 input error, "
                                   "3 a tool (the environment's interpreter) failed.")
    p.add_argument("env", nargs="?", metavar="ENV",
                   help="environment name under envs/ or a path to one (default: quickstart-default)")
    p.add_argument("--level", default=None, metavar="LEVELS",
                   help="comma-separated levels: static, gpu, drafter (default: the recipe's [verify] levels, "
                        "else static)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema envforge.verify/1)")
    p.add_argument("--junit", metavar="FILE", help="also write the report as JUnit XML to FILE")
    p.add_argument("--deep", action="store_true", help="hash every installed file (default: changed ones only)")
    p.add_argument("--target-from-machine", action="store_true",
                   help="check GPU count and capability against this machine instead of the recipe target")
    p.add_argument("--step-timeout", type=seconds(minimum=1), default=120.0, metavar="S",
                   help="hard limit for each GPU probe step in seconds (default: 120)")
    p.add_argument("--project", metavar="DIR", help="project directory (default: nearest with recipes/)")
    p.add_argument("--lock", metavar="FILE",
                   help="verify against this lock instead of the one the environment records (an environment "
                        "envforge did not build, adopted with `envforge init --from-env`)")
    p.set_defaults(handler=_verify)


def _uv_cache(environ: Any) -> Any:
    from pathlib import Path

    if environ.get("UV_CACHE_DIR"):
        return Path(environ["UV_CACHE_DIR"])
    base = Path(environ["XDG_CACHE_HOME"]) if environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "uv"


def _verify(args: argparse.Namespace, ui: Any) -> int:
    import os
    from pathlib import Path

    from envforge.env.layout import resolve_environment
    from envforge.cli.lock import project_of
    from envforge.recipe.project import DEFAULT_RECIPE
    from envforge.verify import VerifyOptions, verify
    from envforge.verify.report import as_json, as_junit, as_text

    project = project_of(args, ui, required=not (args.env and "/" in args.env))
    env = resolve_environment(project, args.env, f"{DEFAULT_RECIPE}-default")
    levels = tuple(lv.strip() for lv in args.level.split(",") if lv.strip()) if args.level else None
    if levels and "gpu" in levels:
        ui.progress("verify: GPU probes run in the environment's interpreter (each step under a hard timeout)")
    report = verify(env, project, VerifyOptions(
        levels=levels, deep=args.deep, target_from_machine=args.target_from_machine,
        base_env=dict(os.environ), uv_cache=_uv_cache(os.environ), step_timeout_s=args.step_timeout,
        hub_endpoint=os.environ.get("HF_ENDPOINT"), lock=Path(args.lock) if args.lock else None))
    if args.junit:
        Path(args.junit).write_bytes(as_junit(report))
    if ui.json_mode:
        ui.emit_json("verify", as_json(report))
    else:
        for line in as_text(report):
            ui.result(line)
    return report.exit_code
