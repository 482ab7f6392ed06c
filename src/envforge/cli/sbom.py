"""CLI for ``envforge sbom [ENV] [-o FILE]``: the CycloneDX SBOM of an environment
(:mod:`envforge.env.sbom`). Registration: :mod:`envforge.cli.commands.sbom`."""

from __future__ import annotations

import argparse
import json

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.core.fs import atomic_write
from envforge.env.layout import resolve_environment
from envforge.env.sbom import SBOM_SPEC, environment_sbom

__all__: list[str] = []


def _sbom(args: argparse.Namespace, ui: Ui) -> int:
    env_arg = args.env
    project = project_of(args, ui, required=not (env_arg and "/" in env_arg))
    env = resolve_environment(project, env_arg, default=env_arg or project.default_environment())
    name = env.path.name if "/" in (env_arg or "") else (env_arg or project.default_environment())
    sbom = environment_sbom(env.site_packages, project.patchsets_dir, name=name)
    for line in sbom.warnings:
        ui.warn(line)
    if ui.json_mode and not args.output:
        ui.emit_json("sbom", json.loads(sbom.text))
        return 0
    if args.output:
        atomic_write(args.output, sbom.text.encode("utf-8"))
        ui.info(f"wrote {args.output}: {SBOM_SPEC}, {sbom.components} components of {sbom.name} {sbom.generation}")
    else:
        ui.result(sbom.text.rstrip("\n"))
    for row in sbom.patched:
        ui.info(f"  patched {row}")
    return 0
