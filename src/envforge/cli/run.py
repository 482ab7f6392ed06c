"""CLI for ``envforge run [ENV] -- CMD``: split the words, plan, name the generation, exec
(registration: :mod:`envforge.cli.commands.run`; core: :mod:`envforge.workflows.run`)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.core.errors import InputError
from envforge.workflows.run import exec_run, plan_run

__all__ = ["run_command", "split_words"]

USAGE = "envforge run [ENV] -- CMD [ARG...]"


def split_words(words: list[str]) -> tuple[str | None, list[str]]:
    """``[ENV] -- CMD ...`` as (ENV or None, CMD words).

    :raises InputError: no ``--``, or more than one word before it.
    """
    if "--" not in words:
        shown = shlex.join(words) or "python"  # quoted for a shell: `python -c 'print(1)'` runs as given
        raise InputError(
            f"envforge run needs -- before the command: {USAGE}",
            hint=f"e.g. envforge run -- {shown} (the project's default environment), or envforge run ENV -- {shown}",
        )
    cut = words.index("--")
    before, command = words[:cut], words[cut + 1 :]
    if len(before) > 1:
        raise InputError(f"envforge run takes one environment before --, not {' '.join(before)}", hint=USAGE)
    return (before[0] if before else None), command


def run_command(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge run``: never returns when the command starts (this process becomes it)."""
    env, command = split_words(list(args.words))
    project = project_of(args, ui, required=not (env is not None and "/" in env))
    plan = plan_run(project, env, command, os.environ, keep_pythonpath=args.keep_pythonpath)
    ui.info(plan.describe())
    for note in plan.notes:
        ui.warn(note)
    sys.stdout.flush()
    sys.stderr.flush()
    exec_run(plan)
