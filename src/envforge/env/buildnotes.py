"""What a build says about the generation it just installed, before it is made live: the notes of
``envforge build`` and ``up`` (printed as warnings; verify judges the same facts as findings).

- METADATA versions without the lock's local label (field case B04);
- engine variables of the env profile the installed engine does not read as written (B60,
  :mod:`envforge.env.enginevars`);
- extension modules linked against another CUDA major than the variant's (B54,
  :mod:`envforge.installed.sharedlibs`);
- extension modules linked against torch whose distribution pins another torch than the installed
  one (:mod:`envforge.installed.torchabi`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from envforge.env.enginevars import installed_problems
from envforge.installed.distributions import find_distribution
from envforge.installed.sharedlibs import link_notes
from envforge.installed.torchabi import torch_notes
from envforge.lock.model import read_lock

__all__ = ["installed_notes", "metadata_disagreements"]


def installed_notes(sp: Path, lock: Path, env: Mapping[str, str], cuda: str | None) -> tuple[str, ...]:
    """Every note on the generation whose purelib is ``sp``, built from ``lock`` with the env profile
    variables ``env`` for CUDA release ``cuda`` (None: none), one line each, in the order above."""
    return (*metadata_disagreements(sp, lock), *installed_problems(env, sp), *link_notes(sp, cuda), *torch_notes(sp))


def metadata_disagreements(sp: Path, lock: Path) -> list[str]:
    """Installed distributions whose METADATA version lacks the lock's local label (field case B04).

    sgl-kernel cu130 wheels were named ``...+cu130-...whl`` while their METADATA said the plain
    version (sglang issues 14327, 20953). uv installs them; envforge reports it, never silently.
    Only locked versions with a local label can disagree this way, so only those are read.
    Returns one line per disagreement naming both strings and the index.
    """
    out = []
    for entry in read_lock(lock).packages:
        want = entry.version or ""
        dist = find_distribution(sp, entry.name) if "+" in want else None
        got = dist.version if dist is not None else None
        if got is not None and got != want and want.split("+")[0] == got.split("+")[0]:
            out.append(
                f"{entry.name}: the lock and the wheel file name say {want} (index "
                f"{entry.index or 'unknown'}), its installed METADATA says {got} (field case B04)"
            )
    return out
