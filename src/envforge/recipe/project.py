"""The project layout: where recipes, patchsets, lockfiles and environments live.

A project is a directory with ``recipes/`` (and usually ``patchsets/``, ``lockfiles/``, ``envs/``).
Core functions receive a :class:`Project`; only the CLI decides where it is (``--project`` or the
nearest directory above the working directory that has ``recipes/``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envforge.core.errors import InputError
from envforge.recipe.scaffold import default_project_dir, embedded_root

__all__ = ["DEFAULT_RECIPE", "Located", "Project", "enclosing_project", "find_project", "locate_project"]

DEFAULT_RECIPE = "quickstart"


@dataclass(frozen=True, slots=True)
class Project:
    """Paths of one envforge project rooted at ``root``."""

    root: Path

    @property
    def recipes_dir(self) -> Path:
        return self.root / "recipes"

    @property
    def patchsets_dir(self) -> Path:
        return self.root / "patchsets"

    @property
    def lockfiles_dir(self) -> Path:
        return self.root / "lockfiles"

    @property
    def envs_dir(self) -> Path:
        return self.root / "envs"

    def lock_path(self, lock_name: str) -> Path:
        """``lockfiles/pylock.<recipe>-<variant>.toml`` (PEP 751 file name)."""
        return self.lockfiles_dir / f"pylock.{lock_name}.toml"

    def env_path(self, lock_name: str) -> Path:
        """``envs/<recipe>-<variant>``: the symlink to the live generation."""
        return self.envs_dir / lock_name

    def recipe_path(self, name_or_path: str | None) -> Path:
        """Resolve a recipe argument: a path to a ``.toml`` file, or a name under ``recipes/``.

        ``None`` means the embedded default recipe (``quickstart``): the project's copy when it
        has one, else the copy shipped inside the envforge package.

        :raises InputError: no such recipe.
        """
        if name_or_path is None:
            own = self.recipes_dir / f"{DEFAULT_RECIPE}.toml"
            if own.is_file():
                return own
            return embedded_root() / "recipes" / f"{DEFAULT_RECIPE}.toml"
        as_path = Path(name_or_path)
        if as_path.suffix == ".toml" or "/" in name_or_path:
            if not as_path.is_file():
                raise InputError(f"recipe file {name_or_path} does not exist")
            return as_path
        candidate = self.recipes_dir / f"{name_or_path}.toml"
        if not self.recipes_dir.is_dir():
            raise InputError(f"{self.root} is not an envforge project (no recipes/ directory)",
                             hint="run from an envforge project or pass --project DIR")
        if not candidate.is_file():
            known = sorted(p.stem for p in self.recipes_dir.glob("*.toml")) if self.recipes_dir.is_dir() else []
            raise InputError(f"no recipe named '{name_or_path}' in {self.recipes_dir}",
                             hint=f"known recipes: {', '.join(known) or 'none'}")
        return candidate


def enclosing_project(start: Path) -> Project | None:
    """The nearest directory at or above ``start`` that has ``recipes/``, or None."""
    start = start.resolve()
    for d in (start, *start.parents):
        if (d / "recipes").is_dir():
            return Project(d)
    return None


def find_project(start: Path) -> Project:
    """The nearest directory at or above ``start`` that has ``recipes/``; else the default project
    that ``envforge up`` made outside any project (:func:`envforge.recipe.scaffold.default_project_dir`,
    from ``ENVFORGE_HOME`` / ``XDG_DATA_HOME``) when it exists; else ``start`` itself."""
    found = enclosing_project(start)
    if found is not None:
        return found
    default = default_project_dir(os.environ)
    return Project(default) if (default / "recipes").is_dir() else Project(start.resolve())


@dataclass(frozen=True, slots=True)
class Located:
    """Which project a command outside ``--project`` acts on: ``how`` is ``"enclosing"`` (the
    nearest directory at or above the start with ``recipes/``) or ``"default-home"`` (the project
    ``envforge up`` made outside any project, :func:`envforge.recipe.scaffold.default_project_dir`)."""

    project: Project
    how: str


def locate_project(start: Path, environ: Mapping[str, str]) -> Located:
    """The project a command run in ``start`` acts on: the enclosing one, else the default home
    when it exists (``recipes/`` in it).

    :raises InputError: neither: no project here, with ``envforge init`` / ``envforge up`` as the fix
        (never a message about a missing sub-directory of a directory that is not a project).
    """
    found = enclosing_project(start)
    if found is not None:
        return Located(found, "enclosing")
    home = default_project_dir(environ)
    if (home / "recipes").is_dir():
        return Located(Project(home), "default-home")
    raise InputError(f"not inside an envforge project: no recipes/ directory in {start.resolve()} or above, "
                     f"and no default project at {home}",
                     hint="`envforge init` makes a project here; `envforge up` builds the quickstart in the "
                          "default project")
