"""Bounded HTTP: every answer bench reads from a server is bounded in bytes and in time.

HTTP is aiohttp's (``aiohttp.ClientSession`` on asyncio: connections kept alive and pooled, the
status line and headers parsed by its llhttp parser with its own bounds, 8190 bytes a header line,
128 headers). The client was chosen by measurement against requests, httpx and envforge's earlier
``http.client`` threads: ``benchmarks/bench_client_choice.py`` and docs/bench.md, "The HTTP client".

Every route bench touches (readiness, the cache flush, the streamed requests, the metrics scrape)
is read under one :class:`Budget`:

- ``timeout_s``: a total deadline for the whole answer, connecting, status line and headers included;
- ``progress_s`` (streams): at most this long without *progress*, which the reader of the answer
  declares (:meth:`Budget.progressed`: a chunk with new tokens); a line that grows slowly, headers
  sent one byte at a time or keep-alive pings are no progress;
- ``max_bytes``: the body's size (None: bounded by time only);
- lines: :class:`LineReader` returns at most :data:`MAX_LINE_BYTES` bytes of one line.

The deadline is watched by one timer around the whole answer (:func:`bounded`), moved on by
progress (:meth:`Budget.deadline`), so no limit waits for a line, a header or a body to end. A limit that
runs out raises :class:`ReadLimit` with its ``kind`` and a message; callers turn it into a failed
request or a status text, never into a crash. An SSE stream is split into lines here and each line
dropped once parsed, so its memory is bounded by the line limit and aiohttp's read buffer; its
length only by time: SGLang's native stream repeats the cumulative text in every chunk, so a long
generation's stream is legitimately gigabytes.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Protocol, TypeVar

import aiohttp

__all__ = [
    "KEEPALIVE_S",
    "MAX_LINE_BYTES",
    "METRICS_MAX_BYTES",
    "STATUS_MAX_BYTES",
    "Budget",
    "HTTPError",
    "LineReader",
    "ReadLimit",
    "bounded",
    "error_text",
    "fetch",
    "new_session",
    "os_error",
    "read_all",
    "run_sync",
    "tls",
]

#: The longest line of a stream (bytes): SGLang's cumulative text of a 32k-token answer fits easily.
MAX_LINE_BYTES = 8 << 20
#: The largest answer of a status route (readiness, cache flush).
STATUS_MAX_BYTES = 1 << 20
#: The largest ``/metrics`` answer (vLLM's is some hundred KiB with per-position counters; a larger one
#: is read as a failed scrape: parsing 30 MiB took seconds of the load generator's CPU, issue 41).
METRICS_MAX_BYTES = 8 << 20

T = TypeVar("T")

#: How long an idle connection is kept for the next request (seconds): under uvicorn's default
#: keep-alive timeout of 5 s (vLLM's and SGLang's API servers, ``transformers serve``), so the client
#: closes an idle connection before the server does and never sends on one the server is closing.
KEEPALIVE_S = 4.0


class ReadLimit(Exception):
    """A read ran out of one of its limits. ``kind``: ``"total"`` (the deadline), ``"idle"`` (no
    byte for ``progress_s`` since the last progress), ``"progress"`` (bytes, but no progress for
    ``progress_s``), ``"size"`` (more than ``max_bytes``) or ``"line"`` (a line longer than
    :data:`MAX_LINE_BYTES`); ``limit`` the number (seconds or bytes) that ran out. Never reaches
    the CLI: callers make it a failed request."""

    def __init__(self, kind: str, limit: float, message: str) -> None:
        super().__init__(message)
        self.kind, self.limit, self.message = kind, limit, message


class HTTPError(Exception):
    """The answer is not HTTP, or the connection broke in the middle of it (aiohttp's own errors
    other than ``OSError``: a disconnect, a malformed status line or chunk, a header over its
    bounds). ``str()`` is ``"<aiohttp error name>: <its message>"``."""


class Budget:
    """The limits of one answer (see the module docstring); times are ``time.monotonic()`` seconds
    from construction (the clock asyncio's loop runs on). Mutable: it counts the bytes received and
    moves the progress deadline."""

    __slots__ = ("timeout_s", "progress_s", "max_bytes", "end", "progress_by", "received", "_received_at_progress")

    def __init__(
        self, *, timeout_s: float, progress_s: float | None = None, max_bytes: int | None = STATUS_MAX_BYTES
    ) -> None:
        now = time.monotonic()
        self.timeout_s = timeout_s
        self.progress_s = progress_s
        self.max_bytes = max_bytes
        self.end = now + timeout_s
        self.progress_by = now + progress_s if progress_s is not None else None
        self.received = 0
        self._received_at_progress = 0

    def progressed(self) -> None:
        """The reader made progress now: the progress deadline starts again."""
        if self.progress_s is not None:
            self.progress_by = time.monotonic() + self.progress_s
            self._received_at_progress = self.received

    def deadline(self) -> float:
        """The ``time.monotonic()`` at which the nearest limit runs out (total or progress)."""
        return self.end if self.progress_by is None else min(self.end, self.progress_by)

    def expired(self) -> ReadLimit:
        """The limit whose deadline (:meth:`deadline`) has just passed: the total one when its time
        is up, else the progress one."""
        return self.limit("total" if time.monotonic() >= self.end or self.progress_by is None else "progress")

    def limit(self, kind: str) -> ReadLimit:
        """The :class:`ReadLimit` of ``kind`` (``"total"``, ``"progress"`` or ``"size"``) with its
        message. No progress while not a byte arrived since the last progress is kind ``"idle"``
        (with the progress limit as its number).

        :raises ValueError: another kind."""
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
        raise ValueError(f"no limit of kind {kind!r}")

    def count(self, n: int) -> None:
        """``n`` more bytes arrived.

        :raises ReadLimit: more than ``max_bytes`` in all.
        """
        self.received += n
        if self.max_bytes is not None and self.received > self.max_bytes:
            raise self.limit("size")


@asynccontextmanager
async def bounded(budget: Budget) -> AsyncIterator[Callable[[], None]]:
    """Run the block under ``budget``'s deadline; yields ``progressed()``, which declares progress
    (:meth:`Budget.progressed`: it only moves the deadline, costing nothing per chunk).

    One timer watches the deadline: when it fires early because progress moved the deadline on,
    it waits again for the new one; when the deadline has passed, it cancels the block's task.

    :raises ReadLimit: the deadline passed inside the block (:meth:`Budget.expired`).
    """
    loop = asyncio.get_running_loop()  # its clock is time.monotonic(), the budget's
    task = asyncio.current_task()
    assert task is not None
    expired = False
    timer: asyncio.TimerHandle  # set below, before check() can run

    def check() -> None:
        nonlocal timer, expired
        if time.monotonic() >= budget.deadline():
            expired = True
            task.cancel()
        else:
            timer = loop.call_at(budget.deadline(), check)

    timer = loop.call_at(budget.deadline(), check)
    try:
        yield budget.progressed
    except asyncio.CancelledError:
        if not expired:
            raise
        task.uncancel()
        raise budget.expired() from None
    finally:
        timer.cancel()


class _Content(Protocol):
    """What :class:`LineReader` reads: aiohttp's ``StreamReader`` (``response.content``)."""

    def readany(self) -> Awaitable[bytes]: ...


class LineReader:
    """The lines of a body, each at most :data:`MAX_LINE_BYTES` bytes with its ending; every byte
    read is counted in ``budget``. A piece of the body is cut into lines in place (an offset into
    it), never copied once per line."""

    __slots__ = ("_content", "_budget", "_buf", "_pos", "_eof")

    def __init__(self, content: _Content, budget: Budget) -> None:
        self._content, self._budget = content, budget
        self._buf = b""
        self._pos = 0
        self._eof = False

    async def readline(self) -> bytes:
        """The next line with its ``\n`` (the last may have none); ``b""`` at the end of the body.

        :raises ReadLimit: kind ``"line"``, a line longer than :data:`MAX_LINE_BYTES`.
        """
        while True:
            buf, pos = self._buf, self._pos
            cut = buf.find(b"\n", pos)
            if cut >= 0:
                if cut + 1 - pos > MAX_LINE_BYTES:
                    break
                self._pos = cut + 1
                return buf[pos : cut + 1]
            if len(buf) - pos > MAX_LINE_BYTES:
                break
            if self._eof:
                self._buf, self._pos = b"", 0
                return buf[pos:]
            data = await self._content.readany()
            if not data:
                self._eof = True
            else:
                self._budget.count(len(data))
                self._buf, self._pos = (buf[pos:] + data if pos < len(buf) else data), 0
        self._buf, self._pos = b"", 0
        raise ReadLimit("line", MAX_LINE_BYTES, f"a line longer than {MAX_LINE_BYTES} bytes")


def os_error(exc: aiohttp.ClientConnectorError | aiohttp.ClientOSError) -> OSError:
    """The operating system's error under an aiohttp connection error (``ConnectionRefusedError``
    for a port nobody listens on), as the standard library would have raised it."""
    inner = getattr(exc, "os_error", None)
    return inner if isinstance(inner, OSError) else OSError(str(exc))


def new_session(connections: int) -> aiohttp.ClientSession:
    """An aiohttp session of at most ``connections`` connections kept alive for :data:`KEEPALIVE_S`
    seconds of idleness, no timeouts of its own
    (every answer is read under a :class:`Budget`), no decompression, no cookies, no proxies from
    the environment. Must be created and closed inside a running event loop."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=max(1, connections), keepalive_timeout=KEEPALIVE_S),
        timeout=aiohttp.ClientTimeout(total=None),
        auto_decompress=False,
        trust_env=False,
        cookie_jar=aiohttp.DummyCookieJar(),
    )


async def read_all(content: _Content, budget: Budget) -> bytes:
    """The whole body, every byte counted in ``budget`` (``max_bytes``).

    :raises ReadLimit: kind ``"size"``.
    """
    parts = []
    while data := await content.readany():
        budget.count(len(data))
        parts.append(data)
    return b"".join(parts)


@functools.lru_cache(maxsize=8)
def tls(ca: str | None) -> ssl.SSLContext | bool:
    """What aiohttp verifies an https server with: the system's CAs (``True``) or a context that
    trusts the CA certificates in the PEM file ``ca`` (one per file, built once).

    :raises OSError: ``ca`` cannot be read; :raises ssl.SSLError: it holds no certificate.
    """
    return True if ca is None else ssl.create_default_context(cafile=ca)


async def _fetch(
    session: aiohttp.ClientSession,
    url: str,
    method: str,
    budget: Budget,
    headers: tuple[tuple[str, str], ...] = (),
    ca: str | None = None,
) -> tuple[int, bytes]:
    async with bounded(budget):
        async with session.request(
            method, url, headers=dict(headers) or None, ssl=tls(ca)
        ) as resp:  # aiohttp sends POST with Content-Length: 0
            return resp.status, await read_all(resp.content, budget)


def run_sync(make: Callable[[aiohttp.ClientSession], Awaitable[T]], connections: int = 1) -> T:
    """``make(session)`` run to its end on a new event loop with a new session (closed after)."""

    async def main() -> T:
        async with new_session(connections) as session:
            return await make(session)

    return asyncio.run(main())


def fetch(
    host: str,
    port: int,
    method: str,
    path: str,
    *,
    timeout_s: float,
    max_bytes: int = STATUS_MAX_BYTES,
    headers: tuple[tuple[str, str], ...] = (),
    scheme: str = "http",
    ca: str | None = None,
) -> tuple[int, bytes]:
    """``method path`` (an empty body for POST, the ``headers`` given; ``scheme`` ``https``: the
    server verified with :func:`tls` of ``ca``) and its whole answer within ``timeout_s`` seconds
    and ``max_bytes`` bytes of body: the HTTP status and the body.

    :raises ReadLimit: a limit ran out (the answer is dropped).
    :raises OSError: the connection failed (``ConnectionRefusedError``, a reset).
    :raises HTTPError: the answer is not HTTP or broke off.
    """
    budget = Budget(timeout_s=timeout_s, max_bytes=max_bytes)
    url = f"{scheme}://{host}:{port}{path}"
    try:
        return run_sync(lambda s: _fetch(s, url, method, budget, headers, ca))
    except (aiohttp.ClientConnectorError, aiohttp.ClientOSError) as exc:
        raise os_error(exc) from None
    except aiohttp.ClientError as exc:
        raise HTTPError(f"{type(exc).__name__}: {exc}") from None


def error_text(exc: BaseException) -> str:
    """``"<name>: <message>"`` of a connection or protocol error, with the operating system's
    error under aiohttp's connection errors (``ConnectionRefusedError: [Errno 111] ...``)."""
    if isinstance(exc, (aiohttp.ClientConnectorError, aiohttp.ClientOSError)):
        exc = os_error(exc)
    if isinstance(exc, HTTPError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}".rstrip(": ")
