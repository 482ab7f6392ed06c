"""The load generator: one repeat of a level's requests, closed loop or paced open loop, timed.

Closed loop: every request is due at once and at most ``concurrency`` are in flight (a pool of that
many senders, one thread each; :func:`envforge.bench.client.send_request` per request). Open loop:
each request is due at its time from :func:`envforge.bench.arrivals.arrival_times` and waits for a
free sender while the cap is reached (vLLM's semaphore under ``--max-concurrency``), with no
catching up beyond that; every request's send lag (actual minus intended send time) is kept.
Pacing is measured by ``benchmarks/bench_send_lag.py`` beside ``vllm bench serve``'s client.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from envforge.bench.client import Cancel, Clock, Endpoint, LevelRun, RequestOptions, RequestResult, send_request

if TYPE_CHECKING:
    from envforge.bench.engines.base import Engine

__all__ = ["PACED_LEAD_S", "PACED_SWITCH_INTERVAL_S", "run_level"]


def run_level(endpoint: Endpoint, engine: Engine, prompts: Sequence[str], concurrency: int, opts: RequestOptions, *,
              cancel: Cancel | None = None, clock: Clock = time.perf_counter,
              schedule: Sequence[float] | None = None, max_new_tokens: Sequence[int] | None = None) -> LevelRun:
    """Send ``prompts`` with at most ``concurrency`` requests in flight; results in prompt order.

    ``schedule`` (open loop, :func:`envforge.bench.arrivals.arrival_times`): the intended send time
    of each prompt in seconds from the start; each request is handed to the pool of ``concurrency``
    senders at its time, whatever the others are doing, and waits there while the cap is reached
    (vLLM's semaphore under ``--max-concurrency``); there is no catching up beyond that. Without a
    schedule every prompt is due at once (closed loop). On any exception in the calling thread
    (Ctrl-C, a termination signal) every request in flight is cancelled at once and the exception
    propagates without waiting for the streams to end.

    ``max_new_tokens`` (parallel to ``prompts``): each request's own output tokens, asked for and
    checked exactly; None: ``opts.max_new_tokens`` for every request.
    """
    cancel = cancel or Cancel()
    if max_new_tokens is not None and len(max_new_tokens) != len(prompts):
        raise ValueError(f"{len(max_new_tokens)} output lengths for {len(prompts)} prompts")
    each = [opts] * len(prompts) if max_new_tokens is None else [replace(opts, max_new_tokens=n) for n in max_new_tokens]

    def one(i: int, due: float | None = None) -> tuple[float, RequestResult, float]:
        if due is not None and (wait := due - clock()) > 0:
            cancel.event.wait(wait)  # the sender waits out the last moments itself: one wake-up, not two
        start = clock()
        r = send_request(endpoint, engine, prompts[i], each[i], cancel=cancel, clock=clock)
        return start, r, clock()

    pool = ThreadPoolExecutor(max_workers=concurrency)
    t0 = clock()
    try:
        if schedule is None:
            done = list(pool.map(one, range(len(prompts))))
        else:
            with _switching(PACED_SWITCH_INTERVAL_S):
                done = [f.result() for f in _paced(pool, one, range(len(prompts)), schedule, t0, clock, cancel)]
    except BaseException:
        cancel.trip()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    wall = max(d[2] for d in done) - min(d[0] for d in done) if done else 0.0
    lags = tuple(d[0] - (t0 + at) for d, at in zip(done, schedule)) if schedule is not None else ()
    return LevelRun(concurrency, tuple(d[1] for d in done), wall, lags)


#: The interpreter's thread switch interval while a level is paced (seconds; CPython's default is
#: 0.005): a sender whose time has come waits for the thread holding the GIL at most this long, so
#: the default would put up to 5 ms on a send (measured: benchmarks/bench_send_lag.py).
PACED_SWITCH_INTERVAL_S = 0.0002


@contextmanager
def _switching(interval_s: float) -> Iterator[None]:
    """``sys.setswitchinterval(interval_s)`` for the block, the previous interval restored after."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(interval_s)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


#: How long before its intended time a request is handed to a sender (seconds), which then waits
#: for the time itself: the hand-over's wake-up is off the send's critical path.
PACED_LEAD_S = 0.002


def _paced(pool: ThreadPoolExecutor, one: Callable[[int, float], Any], prompts: Sequence[int],
           schedule: Sequence[float], t0: float, clock: Clock, cancel: Cancel) -> list[Future[Any]]:
    """Hand each prompt (its index) to ``pool`` :data:`PACED_LEAD_S` before ``t0 + schedule[i]``
    (sleeping in between), due at that time; the futures."""
    futures = []
    for p, at in zip(prompts, schedule):
        wait = t0 + at - PACED_LEAD_S - clock()
        if wait > 0 and cancel.event.wait(wait):
            break
        futures.append(pool.submit(one, p, t0 + at))
    return futures
