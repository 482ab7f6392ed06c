"""Where envforge keeps its state on disk: the one owner of every ``.envforge/`` path and generation name.

Everything envforge writes inside an environment lives in ``<site-packages>/.envforge/``
(docs/architecture.md, "The environment on disk"); generations are ``envs/.generations/<env>/gNNNN``
behind the ``envs/<env>`` symlink. Other modules ask this one for a path; none spells a name itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "GENERATIONS_DIR",
    "MUTEX_NAME",
    "STATE_DIR",
    "StateDir",
    "generation_name",
    "generation_number",
    "is_generation_name",
]

#: The state directory inside a site-packages.
STATE_DIR = ".envforge"
#: The directory under ``envs/`` that holds every environment's generations.
GENERATIONS_DIR = ".generations"
#: The build mutex file of an environment's generation root (``envs/.generations/<env>/.lock``).
MUTEX_NAME = ".lock"

_GENERATION = re.compile(r"^g(\d{4,})$")


def generation_name(number: int) -> str:
    """``g0001`` for 1: four digits at least, more past 9999.

    :raises ValueError: ``number`` is below 1.
    """
    if number < 1:
        raise ValueError(f"generation numbers start at 1, not {number}")
    return f"g{number:04d}"


def generation_number(name: str) -> int | None:
    """The number of a generation name (``g0012`` -> 12), or None for any other name."""
    m = _GENERATION.match(name)
    return int(m.group(1)) if m else None


def is_generation_name(name: str) -> bool:
    """Whether ``name`` is a generation's directory name (``g`` and four or more digits)."""
    return _GENERATION.match(name) is not None


@dataclass(frozen=True, slots=True)
class StateDir:
    """The ``.envforge/`` directory of one site-packages, and every file envforge keeps there."""

    site_packages: Path

    @property
    def path(self) -> Path:
        """``<site-packages>/.envforge``."""
        return self.site_packages / STATE_DIR

    @property
    def generation_record(self) -> Path:
        """``generation.json``: what build made this generation from (written by build)."""
        return self.path / "generation.json"

    @property
    def lock_copy(self) -> Path:
        """``pylock.toml``: a byte copy of the lock the generation was built from (written by build)."""
        return self.path / "pylock.toml"

    @property
    def patch_manifest(self) -> Path:
        """``patches.json``: the applied patchsets and every file they changed (written by patching)."""
        return self.path / "patches.json"

    @property
    def patch_intent(self) -> Path:
        """``patch-intent.json``: the files an apply in progress may have replaced (crash recovery)."""
        return self.path / "patch-intent.json"

    @property
    def originals(self) -> Path:
        """``originals/``: original bytes of patched files, by sha256, for byte-exact revert."""
        return self.path / "originals"

    @property
    def profile_record(self) -> Path:
        """``env-profile.json``: the installed env profile (written by the env profile installer)."""
        return self.path / "env-profile.json"

    @property
    def provided_record(self) -> Path:
        """``provided.json``: the base interpreter whose ``[provided]`` distributions the generation
        sees, and its site directories (written by build, :mod:`envforge.env.provided`)."""
        return self.path / "provided.json"

    @property
    def mutex(self) -> Path:
        """``.lock``: the mutex of a site-packages outside envforge's generations."""
        return self.path / MUTEX_NAME
