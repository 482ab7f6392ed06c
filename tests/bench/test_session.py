"""Session: what it has measured is a result at any moment, so a run stopped part-way reports
exactly its completed repeats (the rest of Session runs against real servers in test_e2e.py)."""

from __future__ import annotations

import math

from envforge.bench.client import Endpoint, LevelRun, RequestResult
from envforge.bench.config import url_config
from envforge.bench.gauges import GaugeSeries, Sample
from envforge.bench.session import Session


def _session() -> Session:
    cfg = url_config(api="sglang", model=None).with_overrides(concurrency=(2,), repeats=3)
    return Session("sg", "m", Endpoint("127.0.0.1", 9), cfg, lambda _: None, False)


def _run(tokens: int) -> LevelRun:
    r = RequestResult(
        ok=True, output_tokens=tokens, e2e_s=0.2, ttft_s=0.05, tpot_s=0.15 / (tokens - 1), decode_s=0.15, e2el_s=0.2
    )
    return LevelRun(2, (r, r), 0.25)


def test_measured_only_after_a_completed_repeat() -> None:
    s = _session()
    assert not s.measured
    s.runs[(2, math.inf)] = []  # a level begun, no repeat completed
    assert not s.measured
    assert s.result(None, None).levels == ()
    s.runs[(2, math.inf)].append(_run(16))
    assert s.measured


def test_a_repeat_stopped_after_its_gauges_were_kept_is_left_out() -> None:
    """Gauges are appended when a repeat's sampling ends, its run just after: a stop between the
    two leaves one more series than runs, and the level takes the completed repeats' only."""
    s = _session()
    key = (2, math.inf)
    s.runs[key] = [_run(16)]
    s.gauges[key] = [
        GaugeSeries("u", 0.5, (Sample(t_s=0.1, repeat=1, running=2, waiting=0, kv_cache_use=0.01),)),
        GaugeSeries("u", 0.5, (Sample(t_s=0.9, repeat=2, running=2, waiting=7, kv_cache_use=0.5),)),
    ]
    (lv,) = s.result(None, None).levels
    assert lv.server_metrics is not None and [x.t_s for x in lv.server_metrics.samples] == [0.1]
    assert lv.concurrency == 2 and len(lv.repeats) == 1


def test_reading_the_metrics_route_that_takes_more_than_5_percent_of_a_repeat_is_warned_once() -> None:
    """Issue 41: a 30 MiB /metrics body cost 7.5 s of bench's CPU per read and the report said nothing."""
    s = _session()
    key = (2, math.inf)
    cheap = GaugeSeries("http://127.0.0.1:9/metrics", 0.5, (), read_cpu_s=0.05)
    s._scrape_cost(key, 1, cheap, 1.0)  # 5 %: at the bound, no warning
    assert s.warnings == []
    costly = GaugeSeries("http://127.0.0.1:9/metrics", 0.5, (), read_cpu_s=0.6)
    s._scrape_cost(key, 2, costly, 2.0)
    assert s.warnings == [
        "server 'sg': concurrency 2, repeat 2: reading http://127.0.0.1:9/metrics took 600 ms of bench's CPU, 30% of "
        "the repeat's 2.00 s: the load generator shared its CPU with it, so latencies may be longer than the "
        "server's; raise --metrics-interval, or pass --metrics-interval 0"
    ]
    s._scrape_cost(key, 3, costly, 2.0)
    assert len(s.warnings) == 1
