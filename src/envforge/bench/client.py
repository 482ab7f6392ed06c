"""The benchmark client: streaming requests over HTTP, timed per chunk, every request accounted for.

Every engine streams server-sent events (``data: <json>`` lines, optionally ending with
``data: [DONE]``; SSE comment lines such as keep-alive pings are skipped). What a request body looks
like and what a chunk means is the engine's (:mod:`envforge.bench.engines`: ``sglang``'s native
``/generate``, the OpenAI-compatible ``/v1/completions`` of ``openai`` and ``vllm``); this module
sends, times and judges.

A request is **failed** (``ok=False``, ``error`` set, ``status`` the HTTP status or the abort's
``status_code``) when: the HTTP status is not 200; a chunk is an ``error`` object; the finish reason
is anything but ``length`` or ``stop`` (``abort`` included); the stream ends without a finish reason
(closed early); the output is not exactly ``max_new_tokens`` tokens; a chunk is malformed (not JSON,
nested too deeply, not an object, a field of the wrong type: ``meta_info`` a string, a token count
that is a list, null or infinite); a line is longer than
:data:`~envforge.bench.transport.MAX_LINE_BYTES`; no byte or no progress for ``idle_timeout_s``
(keep-alive pings, a line that grows without ending and headers sent byte by byte are no progress);
no end after ``timeout_s``; or the run is cancelled. These limits hold during every read
(:mod:`envforge.bench.transport`), not between lines.

Per request, with vLLM's names and formulas (``vllm/benchmarks/lib/endpoint_request_func.py`` and
``vllm/benchmarks/serve.py``, ``calculate_metrics``): time to first token (TTFT, send to the first
chunk with a token), end-to-end latency (E2EL, send to the last chunk with a token), time per output
token (TPOT = (E2EL - TTFT) / (output tokens - 1)), the inter-token latencies (ITL: the gaps between
consecutive chunks with tokens, and how many tokens each later chunk carried), output tokens,
verify steps. HTTP is aiohttp's under :mod:`envforge.bench.transport`'s bounds, on asyncio: one
session of kept-alive, pooled connections per run (:class:`envforge.bench.load.Connections`), as
``vllm bench serve`` does; :func:`send_request` is the one-request form with its own session. The
status routes (readiness, cache flush) read whole answers of at most
:data:`~envforge.bench.transport.STATUS_MAX_BYTES` within their timeout.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import aiohttp

from envforge.bench.engines.base import MalformedChunk, json_type
from envforge.bench.endpoint import Endpoint
from envforge.bench.transport import (
    MAX_LINE_BYTES,
    Budget,
    HTTPError,
    LineReader,
    ReadLimit,
    bounded,
    error_text,
    fetch,
    tls,
    run_sync,
)

if TYPE_CHECKING:  # the engines build on this module's Stream and RequestOptions
    from envforge.bench.engines.base import Engine

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_S",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "Cancel",
    "Endpoint",
    "LevelRun",
    "RequestOptions",
    "RequestResult",
    "Stream",
    "TokenEvent",
    "get_status",
    "post_status",
    "send_request",
    "stream_request",
    "timeline_of",
]

Clock = Callable[[], float]
DEFAULT_REQUEST_TIMEOUT_S = 600.0
DEFAULT_IDLE_TIMEOUT_S = 120.0
_OK_FINISH = ("length", "stop")
_BLANK = frozenset((b"\n", b"\r\n", b"\r"))


@dataclass(frozen=True, slots=True)
class RequestOptions:
    """What every request of a run asks for: ``max_new_tokens`` exactly (``ignore_eos`` when the
    server accepts it), or at most with ``natural`` (no ignore_eos; any output length completes the
    request), at ``temperature``; ``timeout_s`` total and ``idle_timeout_s`` without progress (seconds).
    ``history``: a conversation's earlier turns sent before the prompt, user and assistant texts
    alternating, oldest first (multi-turn chat, :func:`envforge.bench.load.run_conversations`);
    ``keep_text``: the result keeps the generated text (the next turn's history)."""

    model: str
    max_new_tokens: int
    temperature: float = 0.0
    ignore_eos: bool = True
    timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    natural: bool = False
    history: tuple[str, ...] = ()
    keep_text: bool = False


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One streamed chunk: seconds since the request was sent, and the cumulative token count."""

    t_s: float
    tokens: int


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One request. Times in seconds since the send: ``ttft_s``; ``e2el_s`` to the last chunk with a
    token (vLLM's E2EL) and ``e2e_s`` to the end of the stream; ``tpot_s`` = (E2EL - TTFT) / (output
    tokens - 1), None for one token; ``itl_s`` the gaps between consecutive chunks with tokens (one per
    chunk after the first) and ``itl_tokens`` the tokens each of those chunks carried by the stream's
    cumulative counts, empty when those counts do not end at ``output_tokens`` (chunks were counted
    and the server's usage says more tokens came: how they were spread over the chunks is unknown).

    ``status``: the HTTP status, or the ``status_code`` of a server abort. ``finish``: the finish
    reason (``"length"``, ``"stop"``, ``"abort"``, ...) or None. ``token_count``: ``"server"`` when
    the count is the server's (``usage`` / ``meta_info``), ``"chunks"`` when chunks were counted.
    ``text``: the generated text when the request asked to keep it (``RequestOptions.keep_text``),
    else None. ``turn``: the 1-based turn of a multi-turn conversation, None outside one.
    ``prompt_tokens``: the server's count of the input tokens (OpenAI ``usage.prompt_tokens``, SGLang
    ``meta_info.prompt_tokens``), None when it sent none.
    """

    ok: bool
    output_tokens: int
    e2e_s: float
    ttft_s: float | None = None
    tpot_s: float | None = None
    decode_s: float | None = None
    verify_steps: int | None = None
    error: str | None = None
    status: int | None = None
    finish: str | None = None
    token_count: str = "server"
    chunks: int = 0
    e2el_s: float | None = None
    itl_s: tuple[float, ...] = ()
    itl_tokens: tuple[int, ...] = ()
    text: str | None = None
    turn: int | None = None
    prompt_tokens: int | None = None

    def itl_per_token_s(self) -> tuple[float, ...] | None:
        """ITL per token: each gap divided over the tokens its chunk carried (a gap of a chunk with
        3 tokens counts 3 times, a third each). None when ``itl_tokens`` is unknown."""
        if len(self.itl_tokens) != len(self.itl_s):
            return None
        return tuple(g / k for g, k in zip(self.itl_s, self.itl_tokens) for _ in range(k))


@dataclass(frozen=True, slots=True)
class LevelRun:
    """All requests of one repeat at one concurrency level; ``wall_s`` from first send to last end.
    ``send_lag_s`` (open loop only): per request, its actual send time minus its intended one
    (seconds; waiting for the concurrency cap included); ``starts_s``: each one's send from the first."""

    concurrency: int
    results: tuple[RequestResult, ...]
    wall_s: float
    send_lag_s: tuple[float, ...] = ()
    starts_s: tuple[float, ...] = ()


@dataclass
class Cancel:
    """Stops every request in flight at once: :meth:`trip` sets the flag and cancels the asyncio
    task of every registered request (from any thread), so a request waiting for its server ends
    at once as ``"cancelled"``; a request not yet started never starts."""

    event: threading.Event = field(default_factory=threading.Event)
    _tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def register(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._tasks.add(task)

    def unregister(self, task: asyncio.Task[Any]) -> None:
        with self._lock:
            self._tasks.discard(task)

    def trip(self) -> None:
        """Cancel: no new request starts, every request in flight is cancelled."""
        self.event.set()
        with self._lock:
            tasks = list(self._tasks)
        for t in tasks:
            try:
                t.get_loop().call_soon_threadsafe(t.cancel)
            except RuntimeError:  # its loop is closed: the request is over
                pass


def get_status(
    url: str, timeout_s: float = 5.0, headers: tuple[tuple[str, str], ...] = (), ca: str | None = None
) -> int | str:
    """GET ``url`` (with ``headers``): the HTTP status, or why there is none as text (``"connection
    refused"``, ``"no complete answer after 5 s"``, ``"the answer is larger than 1048576 bytes"``).
    The whole answer must arrive within ``timeout_s`` seconds (headers included)."""
    return _status("GET", url, timeout_s, headers, ca)


def post_status(
    url: str, timeout_s: float = 30.0, headers: tuple[tuple[str, str], ...] = (), ca: str | None = None
) -> int | str:
    """POST ``url`` with an empty body (e.g. SGLang's ``/flush_cache``): the status or why there is
    none, as :func:`get_status`."""
    return _status("POST", url, timeout_s, headers, ca)


def _status(method: str, url: str, timeout_s: float, headers: tuple[tuple[str, str], ...], ca: str | None) -> int | str:
    ep = Endpoint.from_url(url)
    try:
        return fetch(
            ep.host,
            ep.port,
            method,
            urlsplit(url).path or "/",
            timeout_s=timeout_s,
            headers=headers,
            scheme=ep.scheme,
            ca=ca,
        )[0]
    except ReadLimit as exc:
        return exc.message
    except ConnectionRefusedError:
        return "connection refused"
    except (OSError, HTTPError) as exc:
        return error_text(exc)


def _chunk_error(obj: Mapping[str, Any]) -> tuple[str, int | None] | None:
    err = obj.get("error")
    if err is None:
        return None
    if isinstance(err, Mapping):
        code = err.get("code")
        return str(err.get("message", err)), code if isinstance(code, int) else None
    return str(err), None


class Stream:
    """The state of one response stream, fed chunk by chunk (parsed JSON objects).

    :meth:`feed` returns whether the chunk made progress (new tokens, a finish reason or usage); the
    ``engine`` parses each chunk (:meth:`~envforge.bench.engines.base.Engine.parse`).
    After the stream, ``events``, ``tokens``, ``verify``, ``finish``, ``abort`` (message, status) and
    ``token_count`` describe it.
    """

    __slots__ = (
        "engine", "events", "tokens", "verify", "finish", "abort", "usage", "chunks", "error", "arrival", "text",
        "prompt_tokens",
    )  # fmt: skip

    def __init__(self, engine: Engine, keep_text: bool = False) -> None:
        self.engine = engine
        self.text: list[str] | None = [] if keep_text else None  # the engine appends each chunk's text
        self.prompt_tokens: int | None = None  # the server's count of the input tokens (its usage)
        self.events: list[TokenEvent] = []
        self.tokens = 0
        self.verify: int | None = None
        self.finish: str | None = None
        self.abort: tuple[str, int | None] | None = None
        self.usage: int | None = None
        self.chunks = 0
        self.error: tuple[str, int | None] | None = None
        self.arrival = False  # set by the engine: this chunk is an arrival that carries no token

    def feed(self, t: float, obj: Mapping[str, Any]) -> bool:
        """Take one chunk received ``t`` seconds after the send; True when it made progress.

        :raises MalformedChunk: ``obj`` is not a JSON object, or the engine cannot read a field of it.
        """
        if not isinstance(obj, Mapping):
            raise MalformedChunk(f"a chunk is a JSON {json_type(obj)}, not an object")
        if (err := _chunk_error(obj)) is not None:
            self.error = err
            return True
        before = (self.finish, self.usage)
        new = self.engine.parse(self, obj)
        if new > self.tokens or self.arrival:
            self.arrival = False
            self.events.append(TokenEvent(t, new))
            self.tokens = new
            self.chunks += 1
            return True
        return (self.finish, self.usage) != before

    @property
    def token_count(self) -> str:
        return "server" if self.usage is not None else "chunks"

    @property
    def total(self) -> int:
        return self.usage if self.usage is not None else self.tokens


def timeline_of(engine: Engine, chunks: Iterable[tuple[float, Mapping[str, Any]]]) -> Stream:
    """The :class:`Stream` of parsed SSE chunks ``(seconds since send, json object)``."""
    stream = Stream(engine)
    for t, obj in chunks:
        stream.feed(t, obj)
    return stream


def _failure(stream: Stream, max_new_tokens: int, natural: bool = False) -> tuple[str, int | None] | None:
    """Why a complete stream is a failed request (message, status), or None when it is not; with
    ``natural`` lengths any token count completes it (vLLM's rule without ``--ignore-eos``)."""
    if stream.error is not None:
        return f"error chunk: {stream.error[0]}", stream.error[1]
    if stream.abort is not None:
        return f"aborted by the server: {stream.abort[0]}", stream.abort[1]
    if stream.finish is None:
        return f"the stream ended without a finish reason after {stream.total} tokens (closed early)", None
    if stream.finish not in _OK_FINISH:
        return f"finish reason '{stream.finish}' (only 'length' and 'stop' complete a request)", None
    if stream.total != max_new_tokens and not natural:
        counted = "" if stream.token_count == "server" else " (counted as chunks: the server sent no usage)"
        return (
            f"{stream.total} of {max_new_tokens} tokens{counted} (finish reason '{stream.finish}'): "
            f"a request must yield exactly max-new-tokens"
        ), None
    return None


def _result(stream: Stream, e2e: float) -> RequestResult:
    events, tokens = stream.events, stream.total
    common = {
        "output_tokens": tokens,
        "e2e_s": e2e,
        "verify_steps": stream.verify,
        "status": 200,
        "finish": stream.finish,
        "token_count": stream.token_count,
        "chunks": stream.chunks,
        "text": "".join(stream.text) if stream.text is not None else None,
        "prompt_tokens": stream.prompt_tokens,
    }
    if not events:
        return RequestResult(ok=True, **common)  # type: ignore[arg-type]
    first, last = events[0], events[-1]
    tpot = (last.t_s - first.t_s) / (tokens - 1) if tokens > 1 else None
    gaps = tuple(b.t_s - a.t_s for a, b in zip(events, events[1:]))
    carried = tuple(b.tokens - a.tokens for a, b in zip(events, events[1:])) if last.tokens == tokens else ()
    return RequestResult(
        ok=True,
        ttft_s=first.t_s,
        tpot_s=tpot,
        decode_s=last.t_s - first.t_s,
        e2el_s=last.t_s,
        itl_s=gaps,
        itl_tokens=carried,
        **common,  # type: ignore[arg-type]
    )


def _failed(
    t0: float, clock: Clock, error: str, status: int | None = None, stream: Stream | None = None
) -> RequestResult:
    return RequestResult(
        ok=False,
        output_tokens=stream.total if stream else 0,
        e2e_s=clock() - t0,
        error=error,
        status=status,
        finish=stream.finish if stream else None,
        token_count=stream.token_count if stream else "server",
        chunks=stream.chunks if stream else 0,
    )


#: How long a request waits, after ``data: [DONE]``, for the end of the body, so that its connection
#: can serve the next request (seconds; a server that keeps the stream open longer loses the connection).
DRAIN_S = 0.1


async def stream_request(
    session: aiohttp.ClientSession,
    endpoint: Endpoint,
    engine: Engine,
    prompt: str,
    opts: RequestOptions,
    *,
    cancel: Cancel | None = None,
    clock: Clock = time.perf_counter,
) -> RequestResult:
    """Send one streamed request on ``session`` and time its chunks. Never raises for a failed
    request: the returned :class:`RequestResult` has ``ok=False``, ``error`` and ``status`` set (see
    the module docstring for what fails a request); a request cancelled by ``cancel`` is
    ``"cancelled"``."""
    path, body = engine.request(prompt, opts)
    budget = Budget(timeout_s=opts.timeout_s, progress_s=opts.idle_timeout_s, max_bytes=None)
    t0 = clock()
    task = asyncio.current_task()
    if cancel is not None:
        if cancel.event.is_set():
            return _failed(t0, clock, "cancelled")
        if task is not None:
            cancel.register(task)
    stream = Stream(engine, opts.keep_text)
    reading = _Reading()
    data = json.dumps(body)
    try:
        async with bounded(budget) as progressed:
            async with await _post(session, endpoint.url + path, data, endpoint) as resp:
                reading.headers = True
                if resp.status != 200:
                    text = (await resp.content.read(300)).decode("utf-8", "replace").strip()
                    return _failed(t0, clock, f"HTTP {resp.status} from {path}: {text}", resp.status)
                lines = LineReader(resp.content, budget)
                why = await _read_stream(lines, stream, progressed, reading, t0, clock)
                e2e = clock() - t0
                if why is None:
                    why = _failure(stream, opts.max_new_tokens, opts.natural)
                    await _drain(lines)
        if why is not None:
            return _failed(t0, clock, why[0], why[1] if why[1] is not None else 200, stream)
        return _result(stream, e2e)
    except asyncio.CancelledError:
        if cancel is None or not cancel.event.is_set() or task is None:
            raise
        task.uncancel()
        return _failed(t0, clock, "cancelled", None, stream)
    except ReadLimit as exc:
        return _failed(t0, clock, _limit_message(exc, opts, stream, reading), None, stream)
    except (OSError, aiohttp.ClientError, ValueError) as exc:
        return _failed(t0, clock, error_text(exc), None, stream)
    finally:
        if cancel is not None and task is not None:
            cancel.unregister(task)


_HEADERS = {"Content-Type": "application/json", "Accept": "text/event-stream"}


async def _post(session: aiohttp.ClientSession, url: str, data: str, ep: Endpoint) -> aiohttp.ClientResponse:
    """POST ``data`` (with ``ep``'s headers and TLS); sent again on a new connection when the server
    closed a kept-alive one before answering (``ServerDisconnectedError`` before the status line,
    e.g. at its keep-alive timeout: nothing of the answer was lost)."""
    headers = {**_HEADERS, **dict(ep.headers)} if ep.headers else _HEADERS
    try:
        return await session.post(url, data=data, headers=headers, ssl=tls(ep.ca))
    except aiohttp.ServerDisconnectedError:
        return await session.post(url, data=data, headers=headers, ssl=tls(ep.ca))


async def _drain(lines: LineReader) -> None:
    """Read what follows ``[DONE]`` (the end of the chunked body) for at most :data:`DRAIN_S`, so
    aiohttp keeps the connection; a body that does not end by then closes it."""
    try:
        async with asyncio.timeout(DRAIN_S):
            while await lines.readline():
                pass
    except (TimeoutError, ReadLimit, aiohttp.ClientError, OSError):
        pass


def send_request(
    endpoint: Endpoint,
    engine: Engine,
    prompt: str,
    opts: RequestOptions,
    *,
    cancel: Cancel | None = None,
    clock: Clock = time.perf_counter,
) -> RequestResult:
    """:func:`stream_request` on a session of its own, run to its end on a new event loop (for one
    request from synchronous code; a run of many uses :class:`envforge.bench.load.Connections`)."""
    return run_sync(lambda session: stream_request(session, endpoint, engine, prompt, opts, cancel=cancel, clock=clock))


@dataclass(slots=True)
class _Reading:
    """Where a request's reading stands, for the message of a limit that runs out: whether the
    status line and headers are complete, whether complete lines without progress came since the
    last progress."""

    headers: bool = False
    idle_lines: bool = False


def _limit_message(exc: ReadLimit, opts: RequestOptions, stream: Stream, reading: _Reading) -> str:
    if exc.kind == "total":
        return f"no end after {opts.timeout_s:g} s (request timeout; {stream.total} tokens so far)"
    if exc.kind in ("idle", "progress") and not reading.headers:
        return f"no progress for {exc.limit:g} s (idle timeout; the status line and headers are not complete)"
    if exc.kind == "idle":
        return f"no data for {exc.limit:g} s (idle timeout)"
    if exc.kind == "progress":
        detail = (
            f"only keep-alive data after {stream.total} tokens"
            if reading.idle_lines
            else f"an unfinished line after {stream.total} tokens"
        )
        return f"no progress for {exc.limit:g} s (idle timeout; {detail})"
    if exc.kind == "line":
        return f"a stream line longer than {MAX_LINE_BYTES} bytes after {stream.total} tokens"
    return exc.message


class _Lines(Protocol):
    def readline(self) -> Awaitable[bytes]: ...


async def _read_stream(
    lines: _Lines, stream: Stream, progressed: Callable[[], None], reading: _Reading, t0: float, clock: Clock
) -> tuple[str, int | None] | None:
    """Feed ``stream`` line by line (:class:`~envforge.bench.transport.LineReader`: each line
    bounded; a limit that runs out raises :class:`~envforge.bench.transport.ReadLimit`), calling
    ``progressed()`` at each chunk that makes progress. A malformed chunk is returned as a failure;
    None when the stream ended (``[DONE]`` or the end of the body)."""
    blank = False
    while raw := await lines.readline():
        if raw in _BLANK:  # the empty line after each event is skipped; a run of them is keep-alive data
            if not blank:
                blank = True
                continue
        else:
            blank = False
        progress = False
        if raw.startswith(b"data:"):
            payload = raw[5:].strip()
            if payload == b"[DONE]":
                return None
            try:
                progress = stream.feed(clock() - t0, json.loads(payload))
            except RecursionError:
                return f"malformed chunk after {stream.total} tokens: JSON nested too deeply", None
            except MalformedChunk as exc:
                return f"malformed chunk after {stream.total} tokens: {exc}", None
            except ValueError as exc:  # not JSON, or not UTF-8
                return f"{type(exc).__name__}: {exc}", None
        if progress:
            progressed()
            reading.idle_lines = False
        else:
            reading.idle_lines = True
    return None
