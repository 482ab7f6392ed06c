"""CLI for ``envforge verify``: parse, call :func:`envforge.verify.verify`, render, return the exit code
(registration: :mod:`envforge.cli.commands.verify`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.core.errors import InputError
from envforge.env.layout import resolve_environment
from envforge.patching.memo import default_cache
from envforge.uv.run import cache_dir
from envforge.verify import VerifyOptions, verify
from envforge.verify.report import as_json, as_junit, as_text

__all__ = ["run_verify"]


def run_verify(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge verify [ENV]``: the report's exit code (0 clean, 1 findings, 2 input error, 3 a tool failed)."""
    levels = tuple(lv.strip() for lv in args.level.split(",") if lv.strip()) if args.level else None
    if args.yanked and levels is not None and "static" not in levels:
        raise InputError(
            "--yanked adds the check `yanked` to the static level, which was not asked for",
            hint=f"add static: --level static,{','.join(levels)}",
        )
    project = project_of(args, ui, required=not (args.env and "/" in args.env))
    env = resolve_environment(project, args.env, args.env or project.default_environment())
    if levels and "gpu" in levels:
        ui.progress("verify: GPU probes run in the environment's interpreter (each step under a hard timeout)")
    report = verify(
        env,
        project,
        VerifyOptions(
            levels=levels,
            deep=args.deep,
            target_from_machine=args.target_from_machine,
            base_env=dict(os.environ),
            uv_cache=cache_dir(),
            step_timeout_s=args.step_timeout,
            hub_endpoint=os.environ.get("HF_ENDPOINT"),
            lock=Path(args.lock) if args.lock else None,
            yanked=args.yanked,
            index_cache=default_cache() if args.yanked else None,
        ),
    )
    if args.junit:
        Path(args.junit).write_bytes(as_junit(report))
    if ui.json_mode:
        ui.emit_json("verify", as_json(report))
    else:
        for line in as_text(report):
            ui.result(line)
    return report.exit_code
