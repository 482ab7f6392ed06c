"""The bench client: SGLang / OpenAI stream parsing on recorded bodies, and real HTTP to a local
server that replays them chunk by chunk."""

from __future__ import annotations

import json

import pytest
from bench_support import replay_server, sse_events

from envforge.bench.client import Endpoint, TokenEvent, request_body, run_level, send_request, timeline_of


def chunks(name: str, step_s: float = 0.1) -> list[tuple[float, dict[str, object]]]:
    """Parsed events of a recorded stream, the i-th at (i + 1) * step_s seconds ([DONE] dropped)."""
    out = []
    for i, raw in enumerate(e for e in sse_events(name) if b"[DONE]" not in e):
        out.append((round((i + 1) * step_s, 6), json.loads(raw.decode()[len("data: "):])))
    return out


def test_sglang_native_stream_counts_cumulative_completion_tokens() -> None:
    events, tokens, verify = timeline_of("sglang", chunks("sglang_generate_stream.sse"))
    assert tokens == 8 and verify is None
    assert events[0] == TokenEvent(0.1, 1) and events[-1] == TokenEvent(0.8, 8)


def test_sglang_eagle3_stream_gives_verify_steps_and_accept_length() -> None:
    events, tokens, verify = timeline_of("sglang", chunks("sglang_generate_stream_eagle3.sse"))
    assert (tokens, verify) == (12, 4)
    assert [e.tokens for e in events] == [1, 4, 7, 9, 12]
    assert tokens / verify == 3.0  # sglang's spec_accept_length in the same body
    last = chunks("sglang_generate_stream_eagle3.sse")[-1][1]
    assert last["meta_info"]["spec_accept_length"] == 3.0  # type: ignore[index]


def test_sglang_error_chunk_raises_its_message() -> None:
    with pytest.raises(ValueError, match=r"^The input \(40000 tokens\) is longer than the model's context "
                                         r"length \(32768 tokens\)\.$"):
        timeline_of("sglang", chunks("sglang_generate_stream_error.sse"))


def test_openai_stream_counts_text_chunks_and_takes_usage_total() -> None:
    events, tokens, verify = timeline_of("openai", chunks("openai_completions_stream.sse"))
    assert (len(events), tokens, verify) == (5, 5, None)


def test_request_bodies() -> None:
    assert request_body("sglang", "hi", model="m", max_new_tokens=8, temperature=0.0) == (
        "/generate", {"text": "hi", "stream": True,
                      "sampling_params": {"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True}})
    path, body = request_body("openai", "hi", model="m", max_new_tokens=8, temperature=0.0)
    assert path == "/v1/completions"
    assert body == {"model": "m", "prompt": "hi", "max_tokens": 8, "temperature": 0.0, "stream": True,
                    "stream_options": {"include_usage": True}}


def test_endpoint_from_url() -> None:
    assert Endpoint.from_url("http://127.0.0.1:30000/") == Endpoint("127.0.0.1", 30000, "")
    assert Endpoint.from_url("http://host:8/api").url == "http://host:8/api"
    with pytest.raises(ValueError, match="^'https://x' is not an http://HOST:PORT URL$"):
        Endpoint.from_url("https://x")


def test_send_request_over_http_times_each_chunk() -> None:
    with replay_server({"/generate": "sglang_generate_stream_eagle3.sse"}, gap_s=0.02) as url:
        r = send_request(Endpoint.from_url(url), "sglang", "p", model="m", max_new_tokens=12, temperature=0.0)
    assert r.ok and r.error is None
    assert (r.output_tokens, r.verify_steps) == (12, 4)
    assert r.ttft_s is not None and r.itl_s is not None and r.decode_s is not None
    assert 0 < r.ttft_s < r.e2e_s and r.decode_s > 0
    assert r.itl_s == pytest.approx(r.decode_s / 11)


def test_send_request_reports_server_error_chunk_http_status_and_refusal() -> None:
    routes = {"/generate": "sglang_generate_stream_error.sse"}
    with replay_server(routes) as url:
        err = send_request(Endpoint.from_url(url), "sglang", "p", model="m", max_new_tokens=4, temperature=0.0)
        missing = send_request(Endpoint.from_url(url), "openai", "p", model="m", max_new_tokens=4, temperature=0.0)
    assert not err.ok and err.error == ("ValueError: The input (40000 tokens) is longer than the model's "
                                        "context length (32768 tokens).")
    assert not missing.ok and missing.error == "HTTP 404 from /v1/completions: "
    port = int(url.rsplit(":", 1)[1])  # closed now
    refused = send_request(Endpoint("127.0.0.1", port), "sglang", "p", model="m", max_new_tokens=4, temperature=0.0)
    assert not refused.ok and refused.error is not None and refused.error.startswith("ConnectionRefusedError")


def test_run_level_keeps_prompt_order_and_measures_wall_time() -> None:
    with replay_server({"/v1/completions": "openai_completions_stream.sse"}, gap_s=0.005) as url:
        run = run_level(Endpoint.from_url(url), "openai", [f"p{i}" for i in range(6)], 3, model="m",
                        max_new_tokens=5, temperature=0.0)
    assert run.concurrency == 3 and len(run.results) == 6
    assert all(r.ok and r.output_tokens == 5 for r in run.results)
    assert run.wall_s >= max(r.e2e_s for r in run.results)
