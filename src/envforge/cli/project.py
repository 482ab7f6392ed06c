"""The project a command acts on (``--project DIR``, the enclosing project, or the default home)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from envforge.cli.output import Ui
from envforge.core.errors import InputError
from envforge.recipe.project import Project, locate_project

__all__ = ["project_of"]


def project_of(args: argparse.Namespace, ui: Ui, *, required: bool = True) -> Project:
    """The project a command acts on: ``--project DIR``, else the enclosing project, else the
    default home that ``envforge up`` made, which is then named on stderr (as ``up`` does).
    ``required=False`` (an environment given by path): no project is the working directory.

    :raises InputError: no project anywhere (the message says so and hints ``init`` / ``up``).
    """
    if getattr(args, "project", None) is not None:
        return Project(Path(args.project).resolve())
    try:
        located = locate_project(Path.cwd(), os.environ)
    except InputError:
        if required:
            raise
        return Project(Path.cwd().resolve())
    if located.how == "default-home":
        ui.info(
            f"not inside an envforge project: using the default project {located.project.root} "
            "(made by `envforge up`); `envforge init` makes a project here instead"
        )
    return located.project
