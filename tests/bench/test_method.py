"""A report's ``method`` sentences, pinned literally for each way of sending requests."""

from __future__ import annotations

import math
from pathlib import Path

from tests.support.bench_support import make_tiny_model

from envforge.bench.config import url_config
from envforge.bench.method import dataset_method, load_method, report_method
from envforge.bench.sweep import RateSweep
from envforge.bench.workload import build_workload

TRACE = Path(__file__).parents[1] / "data" / "bench" / "mooncake_trace_small.jsonl"

CLOSED = "closed loop: every request due at once, at most the level's concurrency in flight"


def test_the_method_of_a_closed_loop_run_of_the_shipped_prompts() -> None:
    cfg = url_config(api="sglang", model=None).with_overrides(seed=3, warmup=2, max_new_tokens=12)
    assert report_method(cfg, interleaved=False) == {
        "prompts": "distinct per request, warm-up included (seed 3)",
        "order": "sequential",
        "load": CLOSED,
        "warmup": "before each level: max(2, concurrency) requests at its concurrency",
        "dataset": {
            "name": "prompts",
            "prompts": len(cfg.prompts),
            "digest": cfg.prompts_digest,
            "lengths": "every request asks for max-new-tokens (12) output tokens, checked exactly; input "
            "tokens are not counted",
        },
        "server_metrics": "the engine's metrics route every 0.5 s during each measured repeat, where it has one "
        "(each server's server_metrics)",
        "output_lengths": (
            "exact: every request asks for its output tokens with ignore_eos (where the server takes "
            "it) and must yield exactly that many; one that stops early fails and its level has no "
            "figures"
        ),
    }
    assert dataset_method(cfg)["name"] == "prompts"
    natural = report_method(cfg.with_overrides(output_lengths="natural"), interleaved=False)
    assert natural["output_lengths"] == (
        "natural: no ignore_eos; the output tokens asked for are each request's max_tokens and the server stops where "
        "it stops (vLLM's default); figures are over the completed requests with their actual output lengths, and a "
        "level fails only on errors"
    )
    assert natural["dataset"]["lengths"] == (
        "every request asks for max-new-tokens (12) output tokens at most "
        "(natural lengths); input tokens are not counted"
    )
    off = report_method(cfg.with_overrides(warmup=0, metrics_interval_s=0.0), interleaved=True)
    assert (off["order"], off["warmup"], off["server_metrics"]) == (
        "interleaved",
        "none",
        "not read (--metrics-interval 0)",
    )


def test_open_loop_names_the_rate_and_the_arrival_process() -> None:
    cfg = url_config(api="sglang", model=None).with_overrides(request_rate=8.0)
    assert load_method(cfg) == (
        "open loop: 8 requests/s, Poisson arrivals (seed 0), at most the level's concurrency in flight"
    )
    assert load_method(cfg.with_overrides(burstiness=math.inf, seed=2)) == (
        "open loop: 8 requests/s, constant gaps (seed 2), at most the level's concurrency in flight"
    )
    assert load_method(cfg.with_overrides(burstiness=0.5)) == (
        "open loop: 8 requests/s, gamma arrivals (burstiness 0.5) (seed 0), at most the level's concurrency in flight"
    )
    sweep = url_config(api="sglang", model=None).with_overrides(sweep=RateSweep(0.5, 8.0))
    assert load_method(sweep) == (
        "open loop: each level at its rate of the sweep (--sweep-rate 0.5:8), Poisson "
        "arrivals (seed 0), at most the level's concurrency in flight"
    )
    assert load_method(url_config(api="sglang", model=None)) == CLOSED


def test_a_trace_and_a_generated_dataset_say_what_was_sent(tmp_path: Path) -> None:
    model = make_tiny_model(tmp_path / "model")
    label = lambda k: f"--{k}"  # noqa: E731
    trace = build_workload(
        {"dataset": "trace", "trace": str(TRACE), "trace-time-scale": 0.5},
        base=TRACE.parent,
        model=str(model),
        label=label,
    )
    cfg = url_config(api="sglang", model=None).with_overrides(dataset=trace, requests=3)
    assert trace is not None and load_method(cfg) == (
        f"trace replay: each repeat sends the first 3 of the trace's {trace.size} records, from a new pass, at "
        "their recorded times x 0.5, at most the level's concurrency in flight"
    )
    assert dataset_method(cfg) == trace.describe(0) and dataset_method(cfg)["name"] == "trace"
    drawn = build_workload(
        {"dataset": "random", "random-input-len": 8, "random-output-len": 4},
        base=tmp_path,
        model=str(model),
        label=label,
    )
    random_cfg = url_config(api="sglang", model=None).with_overrides(dataset=drawn, seed=5)
    assert drawn is not None and dataset_method(random_cfg) == drawn.describe(5)
    assert dataset_method(random_cfg)["name"] == "random" and load_method(random_cfg) == CLOSED
