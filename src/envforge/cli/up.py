"""CLI for ``envforge up``, the main job: lock when missing, build, verify; registration:
:mod:`envforge.cli.commands.build`."""

from __future__ import annotations

import argparse
import os

from envforge.cli.build import build_inputs, build_plan, warn_stale
from envforge.cli.output import Ui
from envforge.uv.run import cache_dir
from envforge.verify import VerifyOptions
from envforge.verify.report import as_json, as_text
from envforge.workflows.up import lock_if_missing, run_main_job

__all__ = ["run_up"]


def run_up(args: argparse.Namespace, ui: Ui) -> int:
    """Lock the variant when it has no lock, build unless the live generation was built from it,
    verify; render what happened (text or ``--json``)."""
    project, variant, python = build_inputs(args, ui, up=True)
    locked = lock_if_missing(project, variant, find_links=args.find_links, offline=args.offline, progress=ui.info)
    plan = build_plan(args, project, variant, python)
    options = VerifyOptions(base_env=dict(os.environ), uv_cache=cache_dir(), hub_endpoint=os.environ.get("HF_ENDPOINT"))
    res = run_main_job(
        project, plan, options, rebuild=args.rebuild, progress=ui.info, terminal=ui.terminal(), locked=locked
    )
    if res.build is not None and res.held is None:  # made live: who still runs another generation (B39)
        warn_stale(ui, plan.link)
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
