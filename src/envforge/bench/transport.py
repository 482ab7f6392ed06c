"""Bounded HTTP reads: every byte bench reads from a server is bounded in bytes and in time.

Every route bench touches (readiness, the cache flush, the streamed requests, the metrics scrape)
reads through :class:`BoundedConnection`, whose socket reads go through one :class:`Budget`:

- ``timeout_s``: a total deadline for the whole answer, status line and headers included;
- ``idle_s``: at most this long without a single byte;
- ``progress_s`` (streams): at most this long without *progress*, which the reader of the answer
  declares (:meth:`Budget.progressed`: a chunk with new tokens); a line that grows slowly, headers
  sent one byte at a time or keep-alive pings are no progress;
- ``max_bytes``: the answer's size, headers and framing included (None: bounded by time only);
- lines: :func:`read_line` returns at most :data:`MAX_LINE_BYTES` bytes of one line.

Each limit is checked before every ``recv`` (the socket timeout is what is left of the nearest one),
so no limit waits for a line, a header or a body to end. A limit that runs out raises
:class:`ReadLimit` with its ``kind`` and a message; callers turn it into a failed request or a
status text, never into a crash. HTTP itself is the standard library's :mod:`http.client` (its own
bounds: 64 KiB per header line, 100 headers).

An SSE stream is read line by line and each line dropped once parsed, so its memory is bounded by
the line limit; its length only by time: SGLang's native stream repeats the cumulative text in every
chunk, so a long generation's stream is legitimately gigabytes.
"""

from __future__ import annotations

import http.client
import io
import socket
import time
from typing import Any

__all__ = [
    "MAX_LINE_BYTES",
    "METRICS_MAX_BYTES",
    "STATUS_MAX_BYTES",
    "BoundedConnection",
    "Budget",
    "ReadLimit",
    "fetch",
    "read_line",
]

#: The longest line of a stream (bytes): SGLang's cumulative text of a 32k-token answer fits easily.
MAX_LINE_BYTES = 8 << 20
#: The largest answer of a status route (readiness, cache flush), headers included.
STATUS_MAX_BYTES = 1 << 20
#: The largest ``/metrics`` answer (vLLM's is some hundred KiB with per-position counters).
METRICS_MAX_BYTES = 32 << 20


class ReadLimit(Exception):
    """A read ran out of one of its limits. ``kind``: ``"total"`` (the deadline), ``"idle"`` (no
    byte for ``idle_s``), ``"progress"`` (no progress for ``progress_s``), ``"size"`` (more than
    ``max_bytes``) or ``"line"`` (a line longer than :data:`MAX_LINE_BYTES`); ``limit`` the number
    (seconds or bytes) that ran out. Never reaches the CLI: callers make it a failed request."""

    def __init__(self, kind: str, limit: float, message: str) -> None:
        super().__init__(message)
        self.kind, self.limit, self.message = kind, limit, message


class Budget:
    """The limits of one answer (see the module docstring); times are ``time.monotonic()`` seconds
    from construction. Mutable: it counts the bytes received and moves the progress deadline."""

    __slots__ = ("timeout_s", "idle_s", "progress_s", "max_bytes", "end", "progress_by", "received", "_why",
                 "_received_at_progress")

    def __init__(self, *, timeout_s: float, idle_s: float | None = None, progress_s: float | None = None,
                 max_bytes: int | None = STATUS_MAX_BYTES) -> None:
        now = time.monotonic()
        self.timeout_s = timeout_s
        self.idle_s = min(timeout_s, idle_s) if idle_s is not None else timeout_s
        self.progress_s = progress_s
        self.max_bytes = max_bytes
        self.end = now + timeout_s
        self.progress_by = now + progress_s if progress_s is not None else None
        self.received = 0
        self._received_at_progress = 0
        self._why = "idle"

    def progressed(self) -> None:
        """The reader made progress now: the progress deadline starts again."""
        if self.progress_s is not None:
            self.progress_by = time.monotonic() + self.progress_s
            self._received_at_progress = self.received

    def wait_s(self) -> float:
        """Seconds the next ``recv`` may wait: what is left of the nearest limit (> 0).

        :raises ReadLimit: the deadline or the progress deadline has passed.
        """
        now = time.monotonic()
        waits = [(self.idle_s, "idle"), (self.end - now, "total")]
        if self.progress_by is not None:
            waits.append((self.progress_by - now, "progress"))
        wait, why = min(waits)
        if wait <= 0:
            raise self.limit(why)
        self._why = why
        return wait

    def timed_out(self) -> ReadLimit:
        """The limit that set the timeout of the ``recv`` that just timed out."""
        return self.limit(self._why)

    def limit(self, kind: str) -> ReadLimit:
        """The :class:`ReadLimit` of ``kind`` with its message. No progress while not a byte arrived
        since the last progress is kind ``"idle"`` (with the progress limit as its number)."""
        if kind == "total":
            return ReadLimit(kind, self.timeout_s, f"no complete answer after {self.timeout_s:g} s")
        if kind == "progress":
            assert self.progress_s is not None
            if self.received == self._received_at_progress:
                return ReadLimit("idle", self.progress_s, f"no data for {self.progress_s:g} s")
            return ReadLimit(kind, self.progress_s, f"no progress for {self.progress_s:g} s")
        if kind == "size":
            assert self.max_bytes is not None
            return ReadLimit(kind, self.max_bytes, f"the answer is larger than {self.max_bytes} bytes")
        return ReadLimit("idle", self.idle_s, f"no data for {self.idle_s:g} s")

    def count(self, n: int) -> None:
        """``n`` more bytes arrived.

        :raises ReadLimit: more than ``max_bytes`` in all.
        """
        self.received += n
        if self.max_bytes is not None and self.received > self.max_bytes:
            raise self.limit("size")


class _BoundedRaw(io.RawIOBase):
    """The socket's bytes, each ``recv`` under the budget's limits (over the socket's own raw file,
    so the socket stays open while the answer is read, as with :meth:`socket.socket.makefile`)."""

    def __init__(self, sock: socket.socket, budget: Budget) -> None:
        super().__init__()
        self._sock, self._budget = sock, budget
        self._inner = sock.makefile("rb", buffering=0)

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        self._sock.settimeout(self._budget.wait_s())
        try:
            n = self._inner.readinto(b) or 0
        except TimeoutError:
            raise self._budget.timed_out() from None
        self._budget.count(n)
        return n

    def close(self) -> None:
        self._inner.close()
        super().close()


class _BoundedSocket:
    """A socket whose ``makefile`` (what :class:`http.client.HTTPResponse` reads) is bounded;
    everything else (``sendall``, ``shutdown``, ``close``) is the socket's."""

    def __init__(self, sock: socket.socket, budget: Budget) -> None:
        self._sock, self._budget = sock, budget

    def makefile(self, mode: str = "rb", *args: Any, **kwargs: Any) -> io.BufferedReader:
        return io.BufferedReader(_BoundedRaw(self._sock, self._budget))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class BoundedConnection(http.client.HTTPConnection):
    """An :class:`http.client.HTTPConnection` whose answer is read under ``budget`` (connecting too:
    the connect timeout is the budget's idle limit)."""

    def __init__(self, host: str, port: int, budget: Budget) -> None:
        super().__init__(host, port, timeout=budget.idle_s)
        self.budget = budget

    def connect(self) -> None:
        super().connect()
        self.sock = _BoundedSocket(self.sock, self.budget)  # type: ignore[assignment]


def read_line(resp: http.client.HTTPResponse) -> bytes:
    """The next line of ``resp`` with its line ending (``b""`` at the end of the body).

    :raises ReadLimit: kind ``"line"``, the line is longer than :data:`MAX_LINE_BYTES`; or a limit of
        the connection's budget ran out while reading it.
    """
    line = resp.readline(MAX_LINE_BYTES + 1)
    if len(line) > MAX_LINE_BYTES:
        raise ReadLimit("line", MAX_LINE_BYTES, f"a line longer than {MAX_LINE_BYTES} bytes")
    return line


def fetch(host: str, port: int, method: str, path: str, *, timeout_s: float,
          max_bytes: int = STATUS_MAX_BYTES) -> tuple[int, bytes]:
    """``method path`` (an empty body for POST) and its whole answer within ``timeout_s`` seconds
    and ``max_bytes`` bytes (headers included): the HTTP status and the body.

    :raises ReadLimit: a limit ran out (the answer is dropped).
    :raises OSError: the connection failed (refused, reset).
    :raises http.client.HTTPException: the answer is not HTTP.
    """
    conn = BoundedConnection(host, port, Budget(timeout_s=timeout_s, max_bytes=max_bytes))
    try:
        conn.request(method, path, body=b"" if method == "POST" else None)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()
