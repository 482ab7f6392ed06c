"""The load generator: one repeat of a level's requests, closed loop or paced open loop, timed.

Requests run as asyncio tasks on one event loop over one aiohttp session of kept-alive, pooled
connections (:class:`Connections`), the shape of ``vllm bench serve``'s client
(``vllm/benchmarks/serve.py``: one ``aiohttp.ClientSession``, an ``asyncio.Semaphore`` of
``--max-concurrency``, a task per request). Closed loop: every request is due at once and at most
``concurrency`` are in flight, started in prompt order as senders free up (the semaphore is
first-come, first-served). Open loop: each request is due at its time from
:func:`envforge.bench.arrivals.arrival_times`, sleeps until then and waits for the semaphore while
the cap is reached (vLLM's semaphore under ``--max-concurrency``), with no catching up beyond that;
every request's send lag (actual minus intended send time) is kept. Pacing is measured by
``benchmarks/bench_send_lag.py`` beside ``vllm bench serve``'s client; the choice of client by
``benchmarks/bench_client_choice.py`` (docs/bench.md, "The HTTP client").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import aiohttp

from envforge.bench.client import Cancel, Clock, Endpoint, LevelRun, RequestOptions, RequestResult, stream_request
from envforge.bench.transport import new_session

if TYPE_CHECKING:
    from envforge.bench.engines.base import Engine

__all__ = ["Connections", "run_conversations", "run_level"]

T = TypeVar("T")


class Connections:
    """An event loop and one aiohttp session of at most ``size`` kept-alive connections, for the
    levels of one server: warm-up and measured repeats reuse the connections, as one
    ``vllm bench serve`` run does. Use as a context manager (or :meth:`close`); not thread-safe:
    every call from the thread that made it."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._runner = asyncio.Runner()
        self._session: aiohttp.ClientSession | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on this loop to its end (Ctrl-C cancels it, as ``asyncio.run``)."""
        return self._runner.run(coro)

    async def session(self) -> aiohttp.ClientSession:
        """The session, made on first use inside the loop."""
        if self._session is None or self._session.closed:
            self._session = new_session(self.size)
        return self._session

    def close(self) -> None:
        """Cancel whatever still runs on the loop, close the session's connections and the loop."""
        try:
            if self._session is not None and not self._session.closed:
                self._runner.run(self._session.close())
        finally:
            self._runner.close()

    def __enter__(self) -> Connections:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def run_level(
    endpoint: Endpoint,
    engine: Engine,
    prompts: Sequence[str],
    concurrency: int,
    opts: RequestOptions,
    *,
    cancel: Cancel | None = None,
    clock: Clock = time.perf_counter,
    schedule: Sequence[float] | None = None,
    max_new_tokens: Sequence[int] | None = None,
    connections: Connections | None = None,
) -> LevelRun:
    """Send ``prompts`` with at most ``concurrency`` requests in flight; results in prompt order.

    ``schedule`` (open loop, :func:`envforge.bench.arrivals.arrival_times`): the intended send time
    of each prompt in seconds from the start; each request waits until its time, whatever the
    others are doing, then while the cap is reached (vLLM's semaphore under ``--max-concurrency``);
    there is no catching up beyond that. Without a schedule every prompt is due at once (closed
    loop). ``max_new_tokens``: per request, parallel to ``prompts`` (None: ``opts.max_new_tokens``
    for all). ``connections``: the session to send on (default: one of its own for this level,
    closed after). On any exception in the calling thread (Ctrl-C, a termination signal) every
    request in flight is cancelled at once and the exception propagates without waiting for the
    streams to end.
    """
    if max_new_tokens is not None and len(max_new_tokens) != len(prompts):
        raise ValueError(f"{len(max_new_tokens)} output lengths for {len(prompts)} prompts")
    cancel = cancel or Cancel()
    per = (
        [opts] * len(prompts)
        if max_new_tokens is None
        else [opts if n == opts.max_new_tokens else replace(opts, max_new_tokens=n) for n in max_new_tokens]
    )
    return _on(
        connections,
        concurrency,
        cancel,
        lambda conns: _level(conns, endpoint, engine, prompts, per, concurrency, cancel, clock, schedule),
    )


def _on(
    connections: Connections | None,
    concurrency: int,
    cancel: Cancel,
    level: Callable[[Connections], Coroutine[Any, Any, LevelRun]],
) -> LevelRun:
    """Run ``level`` on ``connections`` (default: its own for this level, closed after); on any
    exception in the calling thread every request in flight is cancelled and the exception propagates."""
    own = connections is None
    conns = Connections(concurrency) if connections is None else connections
    try:
        run = conns.run(level(conns))
    except BaseException:
        cancel.trip()
        if own:
            conns.close()
        raise
    if own:
        conns.close()
    return run


async def _level(
    conns: Connections,
    endpoint: Endpoint,
    engine: Engine,
    prompts: Sequence[str],
    per: Sequence[RequestOptions],
    concurrency: int,
    cancel: Cancel,
    clock: Clock,
    schedule: Sequence[float] | None,
) -> LevelRun:
    session = await conns.session()
    senders = asyncio.Semaphore(concurrency)
    t0 = clock()

    async def one(i: int) -> tuple[float, RequestResult, float]:
        if schedule is not None and (wait := t0 + schedule[i] - clock()) > 0:
            await asyncio.sleep(wait)
        async with senders:
            start = clock()
            r = await stream_request(session, endpoint, engine, prompts[i], per[i], cancel=cancel, clock=clock)
            return start, r, clock()

    done = await asyncio.gather(*(one(i) for i in range(len(prompts))))
    wall = max(d[2] for d in done) - min(d[0] for d in done) if done else 0.0
    lags = tuple(d[0] - (t0 + at) for d, at in zip(done, schedule)) if schedule is not None else ()
    first = min((d[0] for d in done), default=0.0)
    return LevelRun(concurrency, tuple(d[1] for d in done), wall, lags, tuple(d[0] - first for d in done))


def run_conversations(
    endpoint: Endpoint,
    engine: Engine,
    conversations: Sequence[Sequence[str]],
    concurrency: int,
    opts: RequestOptions,
    *,
    cancel: Cancel | None = None,
    clock: Clock = time.perf_counter,
    schedule: Sequence[float] | None = None,
    connections: Connections | None = None,
) -> LevelRun:
    """Multi-turn: each conversation's user turns in order, each sent with the conversation so far
    (its earlier turns and the server's own replies to them) once the reply to the turn before has
    ended; a conversation holds one of the ``concurrency`` senders from its first turn to its last,
    as SGLang's ``bench_serving.py`` (0.5.9, ``wrap_multi_turn_request_func`` under its semaphore)
    runs one. A failed turn ends its conversation (the turns after it are not sent).

    Results are per turn (``turn`` 1, 2, ...), conversation after conversation. ``schedule`` (open
    loop): each conversation's intended start in seconds; ``send_lag_s`` holds those starts' lags.
    The other arguments are :func:`run_level`'s. ``engine`` must send a history (``conversations``).

    :raises ValueError: the engine cannot send a conversation, or a conversation has no turn.
    """
    if not engine.conversations:
        raise ValueError(f"engine '{engine.name}' sends no conversation history")
    if any(not c for c in conversations):
        raise ValueError("a conversation without a turn")
    cancel = cancel or Cancel()
    return _on(
        connections,
        concurrency,
        cancel,
        lambda conns: _talks(conns, endpoint, engine, conversations, opts, concurrency, cancel, clock, schedule),
    )


async def _talks(
    conns: Connections,
    endpoint: Endpoint,
    engine: Engine,
    conversations: Sequence[Sequence[str]],
    opts: RequestOptions,
    concurrency: int,
    cancel: Cancel,
    clock: Clock,
    schedule: Sequence[float] | None,
) -> LevelRun:
    session = await conns.session()
    senders = asyncio.Semaphore(concurrency)
    t0 = clock()

    async def talk(i: int) -> tuple[float, list[tuple[float, RequestResult, float]]]:
        if schedule is not None and (wait := t0 + schedule[i] - clock()) > 0:
            await asyncio.sleep(wait)
        turns = conversations[i]
        out: list[tuple[float, RequestResult, float]] = []
        history: tuple[str, ...] = ()
        async with senders:
            begun = clock()
            for k, prompt in enumerate(turns, start=1):
                per = replace(opts, history=history, keep_text=k < len(turns))
                start = clock()
                r = await stream_request(session, endpoint, engine, prompt, per, cancel=cancel, clock=clock)
                out.append((start, replace(r, text=None, turn=k), clock()))
                if not r.ok:
                    break
                history = (*history, prompt, r.text or "")
        return begun, out

    talks = await asyncio.gather(*(talk(i) for i in range(len(conversations))))
    done = [d for _, turns in talks for d in turns]
    wall = max(d[2] for d in done) - min(d[0] for d in done) if done else 0.0
    lags = tuple(begun - (t0 + at) for (begun, _), at in zip(talks, schedule)) if schedule is not None else ()
    first = min((d[0] for d in done), default=0.0)
    return LevelRun(concurrency, tuple(d[1] for d in done), wall, lags, tuple(d[0] - first for d in done))
