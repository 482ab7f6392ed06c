"""``envforge run [ENV] -- CMD``: a command in the live generation of an environment.

The command runs in the generation the ``envs/<name>`` link points at when it starts, by its
resolved path, never through the link: a rebuild or a rollback that flips the link later does not
change what an already running process imports (field case B39). ``PATH`` has the generation's
``bin/`` first and ``VIRTUAL_ENV`` names it, as an activated virtual environment has; the env
profile applies through the hook installed in the generation's site-packages (every Python
process started from it runs the hook). :func:`plan_run` decides, :func:`exec_run` replaces the
current process with the command, so its exit status, signals and terminal are the command's own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from envforge.core.errors import InputError
from envforge.env.interpreter import isolate
from envforge.env.layout import resolve_environment
from envforge.recipe.project import Project

__all__ = ["RunPlan", "command_environment", "exec_run", "plan_run"]


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What :func:`exec_run` starts: ``argv`` (``argv[0]`` resolved on the generation's ``PATH``),
    ``environ`` (the whole environment of the command), ``generation`` (the resolved directory of
    the live generation) and ``env`` (the environment's name or path as given)."""

    env: str
    generation: Path
    argv: tuple[str, ...]
    environ: Mapping[str, str]
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        """The line ``run`` writes on stderr first: which generation runs the command."""
        return f"envforge run: {self.env} -> {self.generation.name} ({self.generation})"


def command_environment(generation: Path, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` as an activated ``generation`` sees it: ``PATH`` with ``<generation>/bin`` first,
    ``VIRTUAL_ENV`` set to ``generation``, ``PYTHONHOME`` removed (it would point the interpreter
    at another prefix). ``PYTHONPATH`` is the caller's business: :func:`plan_run` decides it."""
    environ = {k: v for k, v in base.items() if k != "PYTHONHOME"}
    bin_dir = str(generation / "bin")
    rest = [p for p in base.get("PATH", os.defpath).split(os.pathsep) if p and p != bin_dir]
    environ["PATH"] = os.pathsep.join([bin_dir, *rest])
    environ["VIRTUAL_ENV"] = str(generation)
    return environ


def plan_run(
    project: Project, env: str | None, command: Sequence[str], base: Mapping[str, str], *, keep_pythonpath: bool = False
) -> RunPlan:
    """Where and how ``command`` runs: in the live generation of ``env`` (a name under ``envs/``,
    a path to a virtual environment, or None: :meth:`Project.default_environment`). The caller's
    ``PYTHONPATH`` is dropped (B53: it would shadow the patched environment) unless
    ``keep_pythonpath``; :attr:`RunPlan.notes` says which.

    :raises InputError: no command; no such environment; it has no ``bin/python``; ``command[0]``
        is not found on the generation's ``PATH``.
    """
    if not command:
        raise InputError("no command to run", hint="envforge run [ENV] -- CMD [ARG...]")
    name = env or project.default_environment()
    generation = resolve_environment(project, name, name).path.resolve()
    if not (generation / "bin" / "python").exists():
        raise InputError(
            f"{generation} is not a virtual environment (no bin/python)", hint="build it with `envforge build RECIPE`"
        )
    isolated = isolate(base, keep=keep_pythonpath)
    environ = command_environment(generation, isolated.environ)
    found = shutil.which(command[0], path=environ["PATH"])
    if found is None:
        raise InputError(
            f"command not found: {command[0]} (PATH of {name}: {generation / 'bin'} first)",
            hint="install it in the recipe, or give a path to it",
        )
    return RunPlan(
        name, generation, (found, *command[1:]), environ, tuple(isolated.notes("envforge run", "--keep-pythonpath"))
    )


def exec_run(plan: RunPlan) -> NoReturn:
    """Replace this process with the command (``os.execve``): its exit status is the process's.

    :raises OSError: the operating system cannot start it (e.g. not executable).
    """
    os.execve(plan.argv[0], list(plan.argv), dict(plan.environ))
