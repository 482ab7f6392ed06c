"""Results: per-level figures, failures, the engine counters of a level and its JSON."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.support.bench_reports import bad, ok, run, vllm_server

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.metrics import EngineWindow, SpecDecodeStats
from envforge.bench.result import REFUSED_CHUNKS, Failure, LevelResult, failures_of, level_result, repeat_result


def test_level_result_tok_s_accept_length_and_verify_cycle() -> None:
    lv = level_result(4, [run(4, 2.0, 4, verify=40, decode_s=1.2), run(4, 4.0, 4, verify=40, decode_s=1.2)])
    assert lv.tok_s.median == pytest.approx((200 + 100) / 2)  # 400 tokens over 2 s and over 4 s
    assert lv.accept_length == pytest.approx(2.5)
    assert lv.verify_cycle_ms == pytest.approx(30.0)
    assert lv.tpot_ms is not None and lv.tpot_ms.median == pytest.approx(12.2)


def test_failed_requests_leave_the_level_without_figures_and_are_listed() -> None:
    runs = [LevelRun(4, (ok(), bad("aborted by the server: overloaded", 503)), 2.0), LevelRun(4, (ok(), ok()), 2.0)]
    lv = level_result(4, runs)
    assert lv.as_dict() == {
        "concurrency": 4,
        "request_rate": None,
        "failed_requests": 1,
        "token_count": "server",
        "refused": None,
        "tok_s": None,
        "req_s": None,
        "ttft_ms": None,
        "tpot_ms": None,
        "e2e_ms": None,
        "latency": None,
        "goodput": None,
        "send_lag_ms": None,
        "accept_length": None,
        "verify_cycle_ms": None,
        "server_metrics": None,
        "repeats": [
            {
                "tok_s": 50.0,
                "req_s": 0.5,
                "wall_s": 2.0,
                "requests": 2,
                "failed": 1,
                "output_tokens": 100,
                "token_count": "server",
                "ttft_ms": 50.0,
                "tpot_ms": 10.0,
                "e2e_ms": 1000.0,
                "verify_steps": None,
                "decode_s": 0.0,
            },
            {
                "tok_s": 100.0,
                "req_s": 1.0,
                "wall_s": 2.0,
                "requests": 2,
                "failed": 0,
                "output_tokens": 200,
                "token_count": "server",
                "ttft_ms": 50.0,
                "tpot_ms": 10.0,
                "e2e_ms": 1000.0,
                "verify_steps": None,
                "decode_s": 0.0,
            },
        ],
    }
    (f,) = failures_of("eagle3", runs[0], 1)
    assert f.as_dict() == {
        "server": "eagle3",
        "concurrency": 4,
        "repeat": 1,
        "status": 503,
        "message": "aborted by the server: overloaded",
    }
    assert f.line() == "server 'eagle3', concurrency 4, repeat 1: aborted by the server: overloaded (status 503)"
    assert Failure("s", 1, 0, "x", None).line() == "server 's', warm-up: x"
    assert Failure.from_dict(f.as_dict()) == f


def test_speculative_chunk_counts_refuse_tok_s_tpot_and_itl() -> None:
    runs = [LevelRun(1, (ok(token_count="chunks"),), 1.0)]
    spec = level_result(1, runs, speculative=True)
    assert (spec.tok_s, spec.tpot_ms, spec.token_count) == (None, None, "chunks")
    assert spec.refused == (
        "tokens were counted as chunks (the server sent no usage) and one chunk of a "
        "speculative server carries a whole verify step: no tok/s, TPOT or ITL"
    )
    assert spec.ttft_ms is not None and spec.ttft_ms.median == 50.0
    plain = level_result(1, runs)
    assert plain.refused is None and plain.tok_s is not None and plain.tok_s.median == 100.0
    mixed = level_result(1, [LevelRun(1, (ok(), ok(token_count="chunks")), 1.0)])
    assert mixed.token_count == "mixed"


def test_level_result_with_vllm_counters_is_pinned() -> None:
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, tpot_s=0.004, decode_s=0.1)
    windows = [
        EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5))),
        EngineWindow(1, 32, 12, 0.12, SpecDecodeStats(8, 24, 16, (8, 5, 3))),
    ]
    lv = level_result(1, [LevelRun(1, (r,), 0.25), LevelRun(1, (r,), 0.5)], windows)
    d = lv.as_dict()
    # accept 1 + 36 / 16; cycle = the engine's decode step 0.22 s / 22 steps; (64 - 2) / 22 tokens a step
    assert (d["accept_length"], d["verify_cycle_ms"], d["failed_requests"], d["refused"]) == (3.25, 10.0, 0, None)
    assert d["tok_s"] == {
        "n": 2,
        "median": 96.0,
        "mean": 96.0,
        "min": 64.0,
        "max": 128.0,
        "ci_low": 0.0,
        "ci_high": 502.5986,
    }  # 96 + 12.7062 x 32
    assert d["engine"] == {
        "name": "vllm",
        "counters": {
            "source": "vllm /metrics",
            "requests": 2,
            "generation_tokens": 64,
            "decode_steps": 22,
            "decode_s": 0.22,
            "decode_step_ms": 10.0,
            "tokens_per_step": 2.8182,
            "spec_decode": {
                "drafts": 16,
                "draft_tokens": 48,
                "accepted": 36,
                "per_position_accepted": [16, 12, 8],
                "mean_acceptance_length": 3.25,
                "draft_acceptance_rate": 0.75,
                "per_position_rates": [1.0, 0.75, 0.5],
            },
        },
    }
    assert list(d) == [
        "concurrency",
        "request_rate",
        "failed_requests",
        "token_count",
        "refused",
        "tok_s",
        "req_s",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "latency",
        "goodput",
        "send_lag_ms",
        "accept_length",
        "verify_cycle_ms",
        "server_metrics",
        "engine",
        "repeats",
    ]
    assert d["repeats"][0] == {
        "tok_s": 128.0,
        "req_s": 4.0,
        "wall_s": 0.25,
        "requests": 1,
        "failed": 0,
        "output_tokens": 32,
        "token_count": "server",
        "ttft_ms": 50.0,
        "tpot_ms": 4.0,
        "e2e_ms": 200.0,
        "verify_steps": 8,
        "decode_s": 0.1,
        "engine": {
            "name": "vllm",
            "counters": {
                "source": "vllm /metrics",
                "requests": 1,
                "generation_tokens": 32,
                "decode_steps": 10,
                "decode_s": 0.1,
                "decode_step_ms": 10.0,
                "tokens_per_step": 3.1,
                "spec_decode": {
                    "drafts": 8,
                    "draft_tokens": 24,
                    "accepted": 20,
                    "per_position_accepted": [8, 7, 5],
                    "mean_acceptance_length": 3.5,
                    "draft_acceptance_rate": 0.8333,
                    "per_position_rates": [1.0, 0.875, 0.625],
                },
            },
        },
    }
    assert LevelResult.from_dict(d).as_dict() == d
    assert LevelResult.from_dict(d).counters == EngineWindow(2, 64, 22, 0.22, SpecDecodeStats(16, 48, 36, (16, 12, 8)))


def test_sglang_level_accept_length_and_cycle_only_from_requests_with_verify_steps() -> None:
    spec = RequestResult(ok=True, output_tokens=30, e2e_s=1.0, ttft_s=0.1, tpot_s=0.01, decode_s=0.3, verify_steps=10)
    plain = RequestResult(ok=True, output_tokens=50, e2e_s=1.0, ttft_s=0.1, tpot_s=0.01, decode_s=0.7)
    lv = level_result(2, [LevelRun(2, (spec, plain), 1.0)])
    assert (lv.accept_length, lv.verify_cycle_ms) == (8.0, 30.0)  # repeat: 80 tokens / 10 steps; 0.3 s / 10
    rep = lv.repeats[0]
    assert (rep.verify_steps, rep.decode_s, rep.output_tokens, rep.requests) == (10, 0.3, 80, 2)
    none = level_result(2, [LevelRun(2, (plain,), 1.0)])
    assert (none.accept_length, none.verify_cycle_ms, none.repeats[0].verify_steps) == (None, None, None)
    empty = repeat_result(LevelRun(1, (), 0.0))
    assert (empty.tok_s, empty.e2e_ms, empty.ttft_ms, empty.token_count) == (0.0, 0.0, None, "server")


def test_vllm_levels_without_drafts_or_engine_step_time() -> None:
    (plain,) = vllm_server("plain", False, EngineWindow(1, 32, 31, 0.124)).levels
    assert (plain.accept_length, plain.verify_cycle_ms, plain.counters) == (None, None, EngineWindow(1, 32, 31, 0.124))
    assert plain.tok_s is not None and plain.tok_s.median == 128.0 and plain.tpot_ms is not None
    (idle,) = vllm_server("d", True, EngineWindow(1, 32, 31, 0.124, SpecDecodeStats(0, 0, 0, (0, 0, 0)))).levels
    assert (idle.accept_length, idle.verify_cycle_ms, idle.repeats[0].verify_steps) == (None, None, 0)
    (no_step,) = vllm_server("d", True, EngineWindow(1, 32, None, None, SpecDecodeStats(8, 24, 20, (8, 7, 5)))).levels
    assert (no_step.accept_length, no_step.verify_cycle_ms) == (3.5, 12.5)  # 0.1 s of decode / 8 drafts
    (failed,) = vllm_server(
        "d", True, EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5))), failed=True
    ).levels
    assert (failed.tok_s, failed.accept_length, failed.counters, failed.failed_requests) == (None, None, None, 1)
    r = RequestResult(
        ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, tpot_s=0.004, decode_s=0.1, token_count="chunks"
    )
    refused = level_result(
        1, [LevelRun(1, (r,), 0.25)], [EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20))], speculative=True
    )
    assert (refused.tok_s, refused.tpot_ms, refused.accept_length, refused.refused) == (None, None, 3.5, REFUSED_CHUNKS)
    assert refused.ttft_ms is not None and refused.e2e_ms is not None and refused.token_count == "chunks"


def test_level_latency_distributions_are_vllms_pinned() -> None:
    # two requests of 4 tokens: chunks at 0.1, 0.2, 0.3, 0.5 s and at 0.2, 0.3 (2 tokens), 0.4 s
    a = RequestResult(
        ok=True,
        output_tokens=4,
        e2e_s=0.51,
        ttft_s=0.1,
        tpot_s=(0.5 - 0.1) / 3,
        decode_s=0.4,
        e2el_s=0.5,
        itl_s=(0.1, 0.1, 0.2),
        itl_tokens=(1, 1, 1),
    )
    b = RequestResult(
        ok=True,
        output_tokens=4,
        e2e_s=0.41,
        ttft_s=0.2,
        tpot_s=(0.4 - 0.2) / 3,
        decode_s=0.2,
        e2el_s=0.4,
        itl_s=(0.1, 0.1),
        itl_tokens=(2, 1),
    )
    lv = level_result(2, [LevelRun(2, (a, b), 0.6)])
    d = lv.as_dict()["latency"]
    assert list(d) == ["ttft_ms", "tpot_ms", "itl_ms", "itl_per_token_ms", "e2el_ms"]
    # np.percentile's linear method: p90 of [100, 100, 100, 100, 200] = 100 + 0.6 x 100
    assert d["itl_ms"] == {
        "n": 5,
        "mean": 120.0,
        "median": 100.0,
        "p90": 160.0,
        "p95": 180.0,
        "p99": 196.0,
        "max": 200.0,
    }
    # per token: the 2-token chunk's 100 ms gap counts twice, 50 ms each
    assert d["itl_per_token_ms"] == {
        "n": 6,
        "mean": 100.0,
        "median": 100.0,
        "p90": 150.0,
        "p95": 175.0,
        "p99": 195.0,
        "max": 200.0,
    }
    assert d["ttft_ms"] == {
        "n": 2,
        "mean": 150.0,
        "median": 150.0,
        "p90": 190.0,
        "p95": 195.0,
        "p99": 199.0,
        "max": 200.0,
    }
    assert d["tpot_ms"] == {
        "n": 2,
        "mean": 100.0,
        "median": 100.0,
        "p90": 126.6667,
        "p95": 130.0,
        "p99": 132.6667,
        "max": 133.3333,
    }
    assert d["e2el_ms"] == {
        "n": 2,
        "mean": 450.0,
        "median": 450.0,
        "p90": 490.0,
        "p95": 495.0,
        "p99": 499.0,
        "max": 500.0,
    }
    assert lv.req_s is not None and lv.req_s.median == pytest.approx(2 / 0.6)
    assert LevelResult.from_dict(lv.as_dict()).as_dict() == lv.as_dict()
    unknown = replace(b, itl_tokens=())  # chunks counted, usage says more: how they spread is unknown
    assert level_result(2, [LevelRun(2, (a, unknown), 0.6)]).as_dict()["latency"]["itl_per_token_ms"] is None
    # --percentiles 50,99.9,90: each distribution gains p50 and p99.9 after max (p90 is there already)
    chosen = level_result(2, [LevelRun(2, (a, b), 0.6)], percentiles=(50.0, 99.9, 90.0)).as_dict()["latency"]
    assert chosen["itl_ms"] == {
        "n": 5,
        "mean": 120.0,
        "median": 100.0,
        "p90": 160.0,
        "p95": 180.0,
        "p99": 196.0,
        "max": 200.0,
        "p50": 100.0,
        "p99.9": 199.6,
    }
    assert chosen["e2el_ms"] == {
        "n": 2,
        "mean": 450.0,
        "median": 450.0,
        "p90": 490.0,
        "p95": 495.0,
        "p99": 499.0,
        "max": 500.0,
        "p50": 450.0,
        "p99.9": 499.9,
    }
    assert [list(chosen[k])[-2:] for k in chosen] == [["p50", "p99.9"]] * 5
    assert LevelResult.from_dict({**lv.as_dict(), "latency": chosen}).as_dict()["latency"] == chosen
