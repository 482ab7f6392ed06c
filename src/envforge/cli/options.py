"""Options several commands share, for the registration modules (``envforge.cli.commands``).

argparse only: registering a command must not import the core (``envforge --help`` stays fast).
What an option means at run time is read by the handlers (``--project``: :func:`envforge.cli.project.project_of`).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

__all__ = ["add_project_option", "find_links_dir"]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")


def find_links_dir(text: str) -> Path:
    """``--find-links DIR``: a local directory of wheels (what envforge's offline builds read).

    :raises argparse.ArgumentTypeError: a URL (``http://...``; uv would read it as a relative
        path and print it, password and all, field case N37): exit 2, the URL not echoed.
    """
    if _URL.match(text):
        raise argparse.ArgumentTypeError(
            "takes a local directory of wheels, not a URL (the URL is not shown: it "
            "may carry a password); download the wheels and pass their directory"
        )
    return Path(text)


def add_project_option(p: argparse.ArgumentParser) -> None:
    """``--project DIR``: the project root (default: nearest directory above cwd with recipes/)."""
    p.add_argument(
        "--project",
        type=Path,
        default=None,
        metavar="DIR",
        help="project root (default: the nearest directory above the working directory with recipes/)",
    )
