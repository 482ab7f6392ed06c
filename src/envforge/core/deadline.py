"""One caller's time limit for every child process envforge starts inside it.

A caller with a limit of its own (a fleet node's verify or build, which its driver gives up on at
``--timeout``) wraps its work in :func:`deadline`. The two runners of child processes, the probe
runner (:func:`envforge.core.probe.run_probe`) and the uv runner (:func:`envforge.uv.run.run_uv`), ask
:func:`cut` for their timeout: their own, or what is left of the deadline where that ends first.
Both kill the child's whole process group when it runs out, so the caller answers before its own
limit and nothing it started outlives it; an :class:`envforge.core.errors.ExternalToolError` raised that
way has ``deadline_s`` set to the caller's limit.

The deadline is a context variable: it holds in this thread, and in threads that run work in a copy
of this context (``pool.submit(contextvars.copy_context().run, fn, ...)``); a thread started without
that copy does not see it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

__all__ = ["Cut", "cut", "deadline"]

#: (time.monotonic() by which every child must have ended, the caller's limit in s) or None.
_END: ContextVar[tuple[float, float] | None] = ContextVar("envforge_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Within the block, every probe and uv run ends at most ``seconds`` from now (monotonic clock).
    Nested blocks keep the earlier end."""
    end = time.monotonic() + seconds
    outer = _END.get()
    token = _END.set(outer if outer is not None and outer[0] <= end else (end, seconds))
    try:
        yield
    finally:
        _END.reset(token)


@dataclass(frozen=True, slots=True)
class Cut:
    """The limit a child process runs under. ``timeout_s``: seconds it may run (None: no limit);
    ``limit_s``: the caller's deadline limit in seconds when that is what sets ``timeout_s`` (the
    child's own timeout would end later), else None."""

    timeout_s: float | None
    limit_s: float | None = None

    @property
    def expired(self) -> bool:
        """Nothing is left of the caller's deadline: the child must not be started."""
        return self.limit_s is not None and self.timeout_s is not None and self.timeout_s <= 0


def cut(timeout_s: float | None) -> Cut:
    """The limit for a child whose own timeout is ``timeout_s`` seconds (None: none), under the
    innermost :func:`deadline` of this context, if any."""
    end = _END.get()
    if end is None:
        return Cut(timeout_s)
    left = end[0] - time.monotonic()
    if timeout_s is not None and timeout_s <= left:
        return Cut(timeout_s)
    return Cut(max(left, 0.0), end[1])
