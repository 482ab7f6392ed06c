"""The project layout: where recipes, patchsets, lockfiles and environments live.

A project is a directory with ``recipes/`` (and usually ``patchsets/``, ``lockfiles/``, ``envs/``).
Core functions receive a :class:`Project`; only the CLI decides where it is (``--project`` or the
nearest directory above the working directory that has ``recipes/``).

Commands given no recipe or environment use the project's own, as uv and pixi do
(:meth:`Project.default_recipe`, :meth:`Project.default_environment`): the recipe the project names
(``default = "NAME"`` under ``[project]`` in ``envforge.toml`` at its root), else its only recipe,
else ``quickstart``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from envforge.core.errors import InputError
from envforge.core.textfile import SMALL_LIMIT, load_toml
from envforge.recipe.load import load_recipe
from envforge.recipe.model import DEFAULT_VARIANT
from envforge.recipe.scaffold import default_project_dir, embedded_root

__all__ = [
    "DEFAULT_RECIPE",
    "PROJECT_FILE",
    "Located",
    "Project",
    "enclosing_project",
    "find_project",
    "locate_project",
]

DEFAULT_RECIPE = "quickstart"
PROJECT_FILE = "envforge.toml"


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

    def named_default(self) -> str | None:
        """The recipe the project names as its default: ``default = "NAME"`` under ``[project]`` in
        ``envforge.toml`` at the root; None when the file or the key is absent.

        :raises InputError: the file is not valid TOML, or ``default`` is not a non-empty string.
        """
        path = self.root / PROJECT_FILE
        if not path.is_file():
            return None
        data = load_toml(path, what="project file", limit=SMALL_LIMIT)[0]
        table = data.get("project", {})
        value = table.get("default") if isinstance(table, Mapping) else None
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise InputError(
                f"{path}: [project] default must be a recipe name (a string), not {value!r}",
                hint=f'e.g. default = "{DEFAULT_RECIPE}"',
            )
        return value

    def default_recipe(self) -> Path:
        """The recipe a command given none uses: (1) the one :meth:`named_default` names, (2) the
        only recipe in ``recipes/``, (3) ``recipes/quickstart.toml``, (4) with no recipe in
        ``recipes/``, the embedded quickstart (the copy shipped inside the envforge package).

        :raises InputError: the named default is not in ``recipes/``; several recipes, none of them
            quickstart, and no default named (the message lists them and says how to name one).
        """
        named = self.named_default()
        if named is not None:
            candidate = self.recipes_dir / f"{named}.toml"
            if not candidate.is_file():
                raise InputError(
                    f"{self.root / PROJECT_FILE} names the default recipe '{named}', "
                    f"but {self.recipes_dir} has no {named}.toml",
                    hint=f"known recipes: {', '.join(self.recipe_names()) or 'none'}",
                )
            return candidate
        names = self.recipe_names()
        if len(names) == 1:
            return self.recipes_dir / f"{names[0]}.toml"
        if DEFAULT_RECIPE in names or not names:
            own = self.recipes_dir / f"{DEFAULT_RECIPE}.toml"
            return own if own.is_file() else embedded_root() / "recipes" / f"{DEFAULT_RECIPE}.toml"
        raise InputError(
            f"which recipe? {self.recipes_dir} has {', '.join(names)} and {self.root / PROJECT_FILE} names no default",
            hint=f"name one (e.g. `envforge up {names[0]}`), or set the project's default: "
            f'default = "{names[0]}" under [project] in {PROJECT_FILE}',
        )

    def recipe_names(self) -> tuple[str, ...]:
        """The recipes in ``recipes/`` (file stems), sorted; empty without ``recipes/``."""
        return tuple(sorted(p.stem for p in self.recipes_dir.glob("*.toml"))) if self.recipes_dir.is_dir() else ()

    def default_environment(self) -> str:
        """The environment a command given none uses: the default recipe's when the project names
        one (:meth:`named_default`), else the only environment under ``envs/``, else the default
        recipe's (:meth:`default_recipe`). A recipe's environment is ``<recipe>-<variant>`` for its
        only variant, else for its ``default`` variant.

        :raises InputError: as :meth:`default_recipe`; the recipe cannot be read.
        """
        if self.named_default() is None:
            built = (
                sorted(p.name for p in self.envs_dir.iterdir() if not p.name.startswith("."))
                if self.envs_dir.is_dir()
                else []
            )
            if len(built) == 1:
                return built[0]
        recipe = load_recipe(self.default_recipe())
        variant = recipe.variants[0] if len(recipe.variants) == 1 else DEFAULT_VARIANT
        return f"{recipe.name}-{variant}"

    def recipe_path(self, name_or_path: str | None) -> Path:
        """Resolve a recipe argument: a path to a ``.toml`` file, or a name under ``recipes/``.

        ``None`` means the project's default recipe (:meth:`default_recipe`).

        :raises InputError: no such recipe.
        """
        if name_or_path is None:
            return self.default_recipe()
        as_path = Path(name_or_path)
        if as_path.suffix == ".toml" or "/" in name_or_path:
            if not as_path.is_file():
                raise InputError(f"recipe file {name_or_path} does not exist")
            return as_path
        candidate = self.recipes_dir / f"{name_or_path}.toml"
        if not self.recipes_dir.is_dir():
            raise InputError(
                f"{self.root} is not an envforge project (no recipes/ directory)",
                hint="run from an envforge project or pass --project DIR",
            )
        if not candidate.is_file():
            raise InputError(
                f"no recipe named '{name_or_path}' in {self.recipes_dir}",
                hint=f"known recipes: {', '.join(self.recipe_names()) or 'none'}",
            )
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
    raise InputError(
        f"not inside an envforge project: no recipes/ directory in {start.resolve()} or above, "
        f"and no default project at {home}",
        hint="`envforge init` makes a project here; `envforge up` builds the quickstart in the default project",
    )
