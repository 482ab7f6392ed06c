"""Reading the server's metrics route in the background while a repeat is measured.

Before a server's first measured repeat, :func:`probe` asks its engine's metrics route once
(:attr:`envforge.bench.engines.base.Engine.metrics`): a route that does not answer 200 with at
least one of the engine's gauges is *not scraped*, said once for the server, never per sample. Then
around every measured repeat a :class:`Sampler` thread reads it every ``interval_s`` seconds,
the first time as the repeat starts, each read bounded (:func:`envforge.bench.transport.fetch`: the
whole answer within :func:`scrape_timeout` seconds and
:data:`~envforge.bench.transport.METRICS_MAX_BYTES` bytes). A read that fails, times out or cannot
be parsed is recorded as a :class:`~envforge.bench.gauges.Gap` and the next one is tried on time:
nothing the route does fails the run. A read that takes longer than the interval delays the next
one (no catching up). Memory is bounded: past :data:`MAX_SAMPLES` samples in one repeat every
second sample is dropped and the interval doubled; past :data:`MAX_GAPS` gaps the last one counts
the further failures.
"""

from __future__ import annotations

import http.client
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

from envforge.bench.gauges import Gap, GaugeSeries, GaugeValueError, Reading, Sample, parse_gauges, sample_of
from envforge.bench.transport import METRICS_MAX_BYTES, ReadLimit, fetch

if TYPE_CHECKING:
    from envforge.bench.client import Endpoint
    from envforge.bench.engines.base import Engine

__all__ = ["DEFAULT_INTERVAL_S", "MAX_GAPS", "MAX_SAMPLES", "Sampler", "probe", "read_gauges", "scrape_timeout"]

#: Seconds between two reads (``--metrics-interval``; AIPerf reads every 333 ms, GuideLLM none).
DEFAULT_INTERVAL_S = 0.5
#: Samples one repeat keeps before thinning (30 minutes at 0.5 s).
MAX_SAMPLES = 3600
#: Gaps one repeat keeps apart; later failures are counted in the last.
MAX_GAPS = 100


class ScrapeFailed(Exception):
    """One read of the metrics route failed; the message says how (never reaches the CLI)."""


def scrape_timeout(interval_s: float) -> float:
    """The most one read may take (seconds): twice the interval, at least 2 s, at most 10 s."""
    return min(10.0, max(2.0, 2.0 * interval_s))


def read_gauges(endpoint: Endpoint, engine: Engine, *, timeout_s: float) -> Reading:
    """``GET <endpoint><engine.metrics>`` and its gauges (:func:`envforge.bench.gauges.parse_gauges`).

    :raises ScrapeFailed: no answer, not HTTP 200, over a limit, not Prometheus text, or none of the
        engine's gauges in it (the message names the route and what happened).
    """
    route = engine.metrics
    try:
        status, body = fetch(
            endpoint.host,
            endpoint.port,
            "GET",
            endpoint.prefix + route,
            timeout_s=timeout_s,
            max_bytes=METRICS_MAX_BYTES,
            headers=endpoint.headers,
            scheme=endpoint.scheme,
            ca=endpoint.ca,
        )
    except ReadLimit as exc:
        raise ScrapeFailed(f"GET {route}: {exc.message}") from None
    except (OSError, http.client.HTTPException) as exc:
        raise ScrapeFailed(f"GET {route}: {type(exc).__name__}: {exc}") from None
    if status != 200:
        raise ScrapeFailed(f"GET {route} answered HTTP {status}")
    try:
        reading = parse_gauges(body.decode("utf-8", "replace"), engine.gauges)
    except GaugeValueError as exc:
        raise ScrapeFailed(f"GET {route}: {exc}") from None
    except ValueError as exc:
        raise ScrapeFailed(f"GET {route} is not Prometheus text: {exc}") from None
    if reading.empty:
        names = ", ".join(n for k in ("running", "waiting", "kv_cache_use") for n in engine.gauges.get(k, ()))
        raise ScrapeFailed(f"GET {route} has none of {names}")
    return reading


def probe(endpoint: Endpoint, engine: Engine, *, interval_s: float) -> str | None:
    """None when ``engine``'s metrics route answers with its gauges; else why it is not scraped
    (``--metrics-interval 0``, no route, or the failed read with the engine's hint)."""
    if interval_s <= 0:
        return "not scraped (--metrics-interval 0)"
    if not engine.metrics or not engine.gauges:
        return f"not scraped (engine '{engine.name}' has no metrics route)"
    try:
        read_gauges(endpoint, engine, timeout_s=scrape_timeout(interval_s))
    except ScrapeFailed as exc:
        hint = f"; {engine.metrics_hint}" if engine.metrics_hint else ""
        return f"not scraped: {exc}{hint}"
    return None


class Sampler:
    """A thread reading ``engine``'s gauges every ``interval_s`` seconds while it is entered
    (``with Sampler(...) as s:``), samples timed in seconds from ``t0`` (``clock()`` at the start of
    the level) and tagged with ``repeat``; :meth:`series` after the block."""

    def __init__(
        self,
        endpoint: Endpoint,
        engine: Engine,
        *,
        interval_s: float,
        t0: float,
        repeat: int,
        clock: Callable[[], float] = time.monotonic,
        max_samples: int = MAX_SAMPLES,
    ) -> None:
        self._endpoint, self._engine, self._timeout = endpoint, engine, scrape_timeout(interval_s)
        self._source = endpoint.url + engine.metrics
        self._interval, self._t0, self._repeat, self._clock = interval_s, t0, repeat, clock
        self._max = max(2, max_samples)
        self._samples: list[Sample] = []
        self._gaps: list[Gap] = []
        self._failing = False  # the last read failed: a failure with its error extends its gap
        self._cpu = 0.0  # CPU seconds of this thread's reads (time.thread_time): the measurement's cost
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"bench-metrics-{repeat}", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Stop reading; wait for a read in flight (bounded) unless the block raised (Ctrl-C, a
        termination signal, a crash: the run stops at once, the daemon thread ends with its read)."""
        self._stop.set()
        if kind is None:
            self._thread.join(timeout=scrape_timeout(self._interval) + 1.0)

    def series(self) -> GaugeSeries:
        """What was read (a copy; complete once the block has ended)."""
        return GaugeSeries(self._source, self._interval, tuple(self._samples), tuple(self._gaps), self._cpu)

    def _loop(self) -> None:
        previous: Reading | None = None
        due = self._clock()
        while True:
            t = self._clock() - self._t0
            cpu = time.thread_time()
            try:
                reading = read_gauges(self._endpoint, self._engine, timeout_s=self._timeout)
            except ScrapeFailed as exc:
                self._cpu += time.thread_time() - cpu
                self._gap(t, str(exc))
                self._failing = True
            else:
                self._cpu += time.thread_time() - cpu
                self._failing = False
                self._samples.append(sample_of(reading, previous, t, self._repeat))
                previous = reading
                if len(self._samples) >= self._max:
                    self._thin()
            due = max(due + self._interval, self._clock())
            if self._stop.wait(due - self._clock()):
                return

    def _gap(self, t: float, error: str) -> None:
        last = self._gaps[-1] if self._gaps else None
        if last is not None and ((self._failing and last.error == error) or len(self._gaps) >= MAX_GAPS):
            self._gaps[-1] = Gap(last.from_s, t, last.repeat, last.scrapes + 1, last.error)
        else:
            self._gaps.append(Gap(t, t, self._repeat, 1, error))

    def _thin(self) -> None:
        """Keep every second sample (the later of each pair, its counters over both) and read half as often."""
        s = self._samples

        def add(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else a + b

        kept = [
            Sample(
                b.t_s,
                b.repeat,
                b.running,
                b.waiting,
                b.kv_cache_use,
                add(a.drafts, b.drafts),
                add(a.accepted, b.accepted),
            )
            for a, b in zip(s[0::2], s[1::2])
        ]
        self._samples = kept + ([s[-1]] if len(s) % 2 else [])
        self._interval *= 2
