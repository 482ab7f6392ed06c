"""Registration of ``envforge sbom`` (handler: :mod:`envforge.cli.sbom`)."""

from __future__ import annotations

import argparse
from typing import Any

from envforge.cli.commands import SUMMARIES
from envforge.cli.options import add_project_option
from envforge.cli.parser import output_file

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``envforge sbom [ENV] [-o FILE]`` on the top-level subparsers."""
    p = sub.add_parser(
        "sbom",
        help=SUMMARIES["sbom"],
        description="Write a CycloneDX 1.6 JSON SBOM of the live generation of ENV (default: the "
        "project's): every installed distribution with its version, local version "
        "label, index and the hashes of its locked wheel, and for each distribution "
        "envforge patched, pedigree.patches with each patchset's id, reason, digest "
        "and unified diff. Validated against the CycloneDX 1.6 schema before it is "
        "written. See docs/sbom.md.",
    )
    p.add_argument("env", nargs="?", metavar="ENV", help="environment name under envs/ or a path")
    p.add_argument("-o", "--output", type=output_file, metavar="PATH", help="write here instead of stdout")
    p.add_argument("--json", action="store_true", help="print the SBOM inside a versioned JSON envelope on stdout")
    add_project_option(p)
    p.set_defaults(handler="envforge.cli.sbom:_sbom")
