"""Options several commands share, for the registration modules (``envforge.cli.commands``).

argparse only: registering a command must not import the core (``envforge --help`` stays fast).
What an option means at run time is read by the handlers (``--project``: :func:`envforge.cli.project.project_of`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_project_option"]


def add_project_option(p: argparse.ArgumentParser) -> None:
    """``--project DIR``: the project root (default: nearest directory above cwd with recipes/)."""
    p.add_argument("--project", type=Path, default=None,
                   help="project root (default: the nearest directory above the working directory with recipes/)")
