"""A built environment on disk: its interpreter, site-packages and envforge state directory.

See docs/architecture.md: everything envforge writes inside an environment lives in
``<site-packages>/.envforge/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from envforge.core.errors import InputError
from envforge.core.state import StateDir
from envforge.lock.read import read_lock_file
from envforge.patching.planning import installed_version
from envforge.patching.patchset import load_patchsets
from envforge.recipe.project import Project

__all__ = ["Environment", "default_patchset_ids", "resolve_environment", "site_packages"]


def site_packages(env_dir: Path) -> Path:
    """The purelib directory of the virtual environment ``env_dir`` (``lib/python3.X/site-packages``).

    :raises InputError: ``env_dir`` is not a virtual environment with exactly one site-packages.
    """
    found = sorted(env_dir.glob("lib/python3*/site-packages"))
    if len(found) != 1:
        raise InputError(
            f"{env_dir} is not a virtual environment (no lib/python3.X/site-packages)",
            hint="build it with `envforge build RECIPE`, or pass --site-packages DIR",
        )
    return found[0]


@dataclass(frozen=True, slots=True)
class Environment:
    """A virtual environment: ``path`` as named (may be the ``envs/<name>`` symlink)."""

    path: Path

    @property
    def python(self) -> Path:
        """``<path>/bin/python``."""
        return self.path / "bin" / "python"

    @property
    def site_packages(self) -> Path:
        """The purelib directory (:func:`site_packages`; raises its InputError)."""
        return site_packages(self.path)

    @property
    def state_dir(self) -> StateDir:
        """The environment's ``.envforge/`` state (:class:`envforge.core.state.StateDir`)."""
        return StateDir(self.site_packages)


def resolve_environment(project: Project, name_or_path: str | None, default: str) -> Environment:
    """An environment argument: a path to a venv, or a name under ``envs/`` (default ``default``).

    :raises InputError: no such environment, with the names that exist (or, for a path, that it
        does not exist).
    """
    arg = name_or_path or default
    as_path = Path(arg)
    if "/" in arg and as_path.exists():
        return Environment(as_path)
    candidate = project.env_path(arg)
    if candidate.exists():
        return Environment(candidate)
    if "/" in arg:  # a path, not a name: envs/ is not where it was looked for
        raise InputError(
            f"environment {arg} does not exist",
            hint="give the path of a virtual environment, or an environment name under envs/",
        )
    if not project.recipes_dir.is_dir() and not project.envs_dir.is_dir():
        raise InputError(
            f"{project.root} is not an envforge project (no recipes/ or envs/ directory)",
            hint="run from an envforge project, pass --project DIR, or give a path to an environment",
        )
    known = (
        sorted(p.name for p in project.envs_dir.iterdir() if not p.name.startswith("."))
        if project.envs_dir.is_dir()
        else []
    )
    raise InputError(
        f"no environment '{arg}' in {project.envs_dir}",
        hint=f"build it with `envforge build`; existing: {', '.join(known) or 'none'}",
    )


def default_patchset_ids(site_packages: Path, patchsets_dir: Path) -> tuple[str, ...]:
    """The patchsets an environment gets when none are named: those its build lock lists
    (``<site-packages>/.envforge/pylock.toml``, ``[tool.envforge].patchsets[].id``), else every
    patchset in ``patchsets_dir`` whose distribution is installed in ``site_packages``.

    :raises InputError: the lock copy is not a valid lock (:func:`envforge.lock.read.read_lock_file`);
        a patchset file is invalid.
    """
    lock = StateDir(site_packages).lock_copy
    if lock.is_file():
        listed = read_lock_file(lock).envforge.get("patchsets")
        if isinstance(listed, list):
            return tuple(str(p["id"]) for p in listed if isinstance(p, dict) and "id" in p)
    return tuple(
        ps.id for ps in load_patchsets(patchsets_dir) if installed_version(site_packages, ps.distribution) is not None
    )
