"""The environment lock: one ``flock(2)`` file that serialises every writer of an environment.

``envforge build`` holds ``envs/.generations/<name>/.lock`` while it makes a generation (and
refuses to start while another process holds it); ``apply-patches`` and a verify that recovers an
interrupted patch take the same file, waiting for it, so two writers never interleave. A
site-packages directory outside envforge's generations is locked by
``<site-packages>/.envforge/.lock``. ``flock`` locks are released by the kernel when the holder
dies (SIGKILL included), so a killed writer never leaves the lock held (flock(2), Linux man-pages).
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from envforge.core.state import GENERATIONS_DIR, MUTEX_NAME, StateDir, is_generation_name

__all__ = ["environment_lock_path", "exclusive"]


def environment_lock_path(site_packages: Path) -> Path:
    """The lock file of the environment ``site_packages`` belongs to.

    ``<root>/.lock`` when ``site_packages`` (symlinks resolved) is
    ``<root>/gNNNN/lib/python3.X/site-packages`` with ``<root>`` under ``.generations`` (the file
    ``envforge build`` locks), else ``<site-packages>/.envforge/.lock``.
    """
    real = site_packages.resolve()
    gen = real.parent.parent.parent
    if is_generation_name(gen.name) and gen.parent.parent.name == GENERATIONS_DIR and real.parent.parent.name == "lib":
        return gen.parent / MUTEX_NAME
    return StateDir(real).mutex


@contextmanager
def exclusive(path: Path, *, on_wait: Callable[[], None] | None = None, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created with its directory) for the ``with`` body,
    waiting for another holder to finish; ``on_wait`` is called once when it has to wait.

    The one mutex of an environment: build (its whole run, the flip included), ``gc``, ``rollback``
    and ``apply-patches`` each take it before they read what they will change, so no decision is
    made on a listing another process changes under it.

    :param wait: False: never wait, raise :class:`BlockingIOError` at once when another holds it.
    Not re-entrant: a second ``exclusive`` on the same file in one process waits for ever (flock
    locks belong to the open file description).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                raise
            if on_wait is not None:
                on_wait()
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
