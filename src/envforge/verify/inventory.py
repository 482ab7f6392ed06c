"""What the lock says and what is installed: the two inventories static verify compares.

The lock is the PEP 751 ``pylock.toml`` copied into ``<site-packages>/.envforge/`` at build time
(docs/architecture.md), read by :func:`envforge.lock.model.read_lock`. Installed distributions are the
``*.dist-info`` directories of the environment's own site-packages (PEP 376 / PEP 627), read without
importing anything from the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

from envforge.core.errors import InputError
from envforge.installed.distributions import Installed, direct_url, installed_distributions
from envforge.lock.model import Lock as EnvLock
from envforge.lock.model import LockedPackage, LockedWheel, read_lock

__all__ = [
    "EnvLock",
    "Installed",
    "LockedPackage",
    "LockedWheel",
    "direct_url",
    "installed_distributions",
    "read_env_lock",
]


_NO_LOCK_HINT = (
    "rebuild it with `envforge build` (it copies the lock into .envforge/); for an "
    "environment envforge did not build: `envforge init --from-env ENV`, then "
    "`envforge verify ENV --lock LOCK`"
)


def read_env_lock(path: Path, *, given: bool = False) -> EnvLock:
    """Read the lock an environment was built from (``.envforge/pylock.toml``), or the one the user
    named (``given``: ``verify --lock LOCK``).

    The environment's copy is envforge's own state (:func:`envforge.core.textfile.read_state`): a FIFO,
    device or directory in its place is named, never opened.

    :raises InputError: missing (the environment records no lock), not a regular file (the copy),
        not TOML, or without the keys verify reads (the message names the key).
    """
    if given:
        if not path.is_file():
            raise InputError(f"{path} does not exist: the environment records no lock", hint=_NO_LOCK_HINT)
        return read_lock(path)
    try:
        os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{path} does not exist: the environment records no lock", hint=_NO_LOCK_HINT) from None
    except OSError:
        pass  # read_lock names what is wrong
    return read_lock(path, state_hint=_NO_LOCK_HINT)
