"""A real SIGTERM sent to a running ``envforge`` process once it has reached a given point.

The verify tests that prove a signal stops a long wait at once (a hashing thread on a FIFO or a large
file, a probe stuck in a start-up hook) all do the same: poll until the process is where it should
be, send SIGTERM, time how long it takes to end; every wait bounded, the process killed if it stays.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable


def sigterm_when(proc: subprocess.Popen[str], ready: Callable[[], bool], *, wait_s: float = 60.0) -> tuple[float, str]:
    """Poll ``ready()`` every 50 ms, then send ``proc`` SIGTERM; return (seconds it took to exit, its stderr).

    ``proc`` was started with ``stdout`` and ``stderr`` pipes, in text mode. Fails the test
    (``AssertionError`` with its output) when it exits before ``ready()`` or ``ready()`` is not true
    within ``wait_s`` seconds; ``subprocess.TimeoutExpired`` when it does not exit within ``wait_s``
    of the signal. A process still running on the way out is killed and reaped.
    """
    try:
        start = time.monotonic()
        while not ready():
            assert proc.poll() is None and time.monotonic() - start < wait_s, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=wait_s)
        return time.monotonic() - sent, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
