"""The bench client: SGLang / OpenAI stream parsing on recorded bodies, real HTTP to a local
server that replays them chunk by chunk, and malformed replies (issue 27): a hostile local server's
shapes and property tests over arbitrary chunks and stream bodies."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.bench_support import replay_server, sse_events
from tests.support.hostile_server import hostile_server

from envforge.bench.client import (
    Endpoint,
    RequestOptions,
    Stream,
    TokenEvent,
    _failure,
    _read_stream,
    _Reading,
    _result,
    send_request,
    timeline_of,
)
from envforge.bench.engines import ENGINES, engine
from envforge.bench.engines.base import MalformedChunk
from envforge.bench.transport import Budget, LineReader

SGLANG, OPENAI = engine("sglang"), engine("openai")


def chunks(name: str, step_s: float = 0.1) -> list[tuple[float, dict[str, object]]]:
    """Parsed events of a recorded stream, the i-th at (i + 1) * step_s seconds ([DONE] dropped)."""
    out = []
    for i, raw in enumerate(e for e in sse_events(name) if b"[DONE]" not in e):
        out.append((round((i + 1) * step_s, 6), json.loads(raw.decode()[len("data: ") :])))
    return out


OPTS = RequestOptions(model="m", max_new_tokens=8, temperature=0.0)


def opts(n: int, **kw: object) -> RequestOptions:
    return RequestOptions(model="m", max_new_tokens=n, temperature=0.0, **kw)  # type: ignore[arg-type]


def test_sglang_native_stream_counts_cumulative_completion_tokens() -> None:
    st = timeline_of(SGLANG, chunks("sglang_generate_stream.sse"))
    assert (st.total, st.verify, st.finish, st.token_count, st.abort) == (8, None, "length", "server", None)
    assert st.events[0] == TokenEvent(0.1, 1) and st.events[-1] == TokenEvent(0.8, 8)


def test_sglang_eagle3_stream_gives_verify_steps_and_accept_length() -> None:
    st = timeline_of(SGLANG, chunks("sglang_generate_stream_eagle3.sse"))
    assert (st.total, st.verify) == (12, 4)
    assert [e.tokens for e in st.events] == [1, 4, 7, 9, 12]
    last = chunks("sglang_generate_stream_eagle3.sse")[-1][1]
    assert last["meta_info"]["spec_accept_length"] == 3.0  # type: ignore[index]


def test_sglang_abort_chunk_is_recorded_with_message_and_status() -> None:
    """Documented shape (B24, sglang 0.5.9): abort as an ordinary chunk, then [DONE], HTTP 200."""
    st = timeline_of(SGLANG, chunks("sglang_generate_stream_abort.sse"))
    assert st.finish == "abort"
    assert st.abort == ("The server is overloaded; request aborted by the scheduler.", 503)


def test_openai_stream_takes_usage_total_and_finish_reason() -> None:
    st = timeline_of(OPENAI, chunks("openai_completions_stream.sse"))
    assert (len(st.events), st.total, st.verify, st.finish, st.token_count) == (6, 5, None, "length", "server")
    # SGLang's finish chunk (no text) is an arrival vLLM's client times, and carries no token
    assert [e.tokens for e in st.events] == [1, 2, 3, 4, 5, 5]


def _chunk(text: str | None, finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}


def test_an_empty_text_chunk_is_a_token_as_vllm_times_it() -> None:
    """vLLM 0.32.0's client (``async_request_openai_completions``): every message with ``choices`` is
    a token's arrival, "text could be empty here e.g. for special tokens"; a finish chunk without
    text is timed and carries none."""
    feed = [
        (0.1, _chunk("a")),
        (0.2, _chunk("")),
        (0.3, _chunk(None)),
        (0.4, _chunk("b", "length")),
        (0.5, {"choices": [], "usage": {"completion_tokens": 4}}),
    ]
    st = timeline_of(OPENAI, feed)
    assert [(e.t_s, e.tokens) for e in st.events] == [(0.1, 1), (0.2, 2), (0.3, 3), (0.4, 4)]
    assert (st.total, st.token_count, st.chunks) == (4, "server", 4)
    bare = timeline_of(OPENAI, [(0.1, _chunk("a")), (0.2, _chunk("", "stop"))])
    assert [(e.t_s, e.tokens) for e in bare.events] == [(0.1, 1), (0.2, 1)]
    assert (bare.total, bare.token_count, bare.finish) == (1, "chunks", "stop")
    chat = timeline_of(
        OPENAI,
        [
            (0.1, {"choices": [{"delta": {"content": ""}, "finish_reason": None}]}),
            (0.2, {"choices": [{"delta": {}, "finish_reason": "stop"}]}),
        ],
    )
    assert [(e.t_s, e.tokens) for e in chat.events] == [(0.1, 1), (0.2, 1)]


def test_a_stream_keeps_its_text_only_when_asked_and_the_servers_prompt_tokens() -> None:
    """The text is the next turn's history in a multi-turn run (delta ``content`` or ``text``); the
    input tokens are the server's own count (OpenAI ``usage.prompt_tokens``, SGLang ``meta_info``)."""
    kept = Stream(OPENAI, keep_text=True)
    for t, obj in chunks("openai_completions_stream.sse"):
        kept.feed(t, obj)
    result = _result(kept, 1.0)
    assert (kept.text, result.text, result.prompt_tokens) == (
        ["The", " sky", " looks", " blue", " because", ""], "The sky looks blue because", 12
    )  # fmt: skip
    plain = timeline_of(OPENAI, chunks("openai_completions_stream.sse"))
    assert (plain.text, _result(plain, 1.0).text, plain.prompt_tokens) == (None, None, 12)
    chat = Stream(engine("openai-chat"), keep_text=True)
    for t, obj in [
        (0.1, {"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}]}),
        (0.2, {"choices": [{"delta": {"content": "Hi"}, "finish_reason": None}]}),
        (0.3, {"choices": [{"delta": {"content": " there"}, "finish_reason": "stop"}]}),
        (0.4, {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 9}}),
    ]:
        chat.feed(t, obj)
    assert (chat.text, chat.total, chat.prompt_tokens) == (["Hi", " there"], 2, 9)
    sglang = timeline_of(SGLANG, chunks("sglang_generate_stream.sse"))
    last = chunks("sglang_generate_stream.sse")[-1][1]["meta_info"]  # type: ignore[index]
    assert sglang.prompt_tokens == last["prompt_tokens"] and isinstance(sglang.prompt_tokens, int)
    with pytest.raises(MalformedChunk, match="^'usage.prompt_tokens' is a JSON array, not a count$"):
        timeline_of(OPENAI, [(0.1, {"choices": [], "usage": {"prompt_tokens": [1]}})])


def test_openai_stream_without_usage_counts_chunks_and_says_so() -> None:
    st = timeline_of(OPENAI, chunks("openai_completions_stream_spec_no_usage.sse"))
    assert (st.total, st.token_count, st.finish) == (3, "chunks", "length")  # 8 real tokens in 3 chunks


def test_request_bodies() -> None:
    assert SGLANG.request("hi", OPTS) == (
        "/generate",
        {
            "text": "hi",
            "stream": True,
            "sampling_params": {"max_new_tokens": 8, "temperature": 0.0, "ignore_eos": True},
        },
    )
    path, body = OPENAI.request("hi", OPTS)
    assert path == "/v1/completions"
    assert body == {
        "model": "m",
        "prompt": "hi",
        "max_tokens": 8,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    assert "ignore_eos" not in OPENAI.request("hi", opts(8, ignore_eos=False))[1]
    # natural output lengths: SGLang's /generate asks without it too
    assert SGLANG.request("hi", opts(8, ignore_eos=False))[1]["sampling_params"] == {
        "max_new_tokens": 8,
        "temperature": 0.0,
    }


def test_endpoint_from_url() -> None:
    assert Endpoint.from_url("http://127.0.0.1:30000/") == Endpoint("127.0.0.1", 30000, "")
    assert Endpoint.from_url("http://host:8/api").url == "http://host:8/api"
    assert Endpoint.from_url("https://host/v").url == "https://host:443/v"
    assert Endpoint.from_url("http://host").url == "http://host:80"
    tls = Endpoint.from_url("https://h:8443", (("X-A", "1"),), "/ca.pem")
    assert (tls.scheme, tls.ca, tls.headers) == ("https", "/ca.pem", (("X-A", "1"),))
    assert "X-A" not in repr(tls) and tls == Endpoint("h", 8443, scheme="https")
    with pytest.raises(ValueError, match="^'ftp://x' is not an http\\(s\\)://HOST:PORT URL$"):
        Endpoint.from_url("ftp://x")


def test_send_request_over_http_times_each_chunk() -> None:
    with replay_server({"/generate": "sglang_generate_stream_eagle3.sse"}, gap_s=0.02) as url:
        r = send_request(Endpoint.from_url(url), SGLANG, "p", opts(12))
    assert r.ok and r.error is None and (r.status, r.finish, r.token_count, r.chunks) == (200, "length", "server", 5)
    assert (r.output_tokens, r.verify_steps) == (12, 4)
    assert r.ttft_s is not None and r.tpot_s is not None and r.decode_s is not None and r.e2el_s is not None
    assert 0 < r.ttft_s < r.e2el_s <= r.e2e_s and r.decode_s > 0
    assert r.tpot_s == pytest.approx((r.e2el_s - r.ttft_s) / 11)  # vLLM: (E2EL - TTFT) / (tokens - 1)
    assert len(r.itl_s) == 4 and r.itl_tokens == (3, 3, 2, 3) and sum(r.itl_s) == pytest.approx(r.decode_s)


def test_tpot_and_itl_are_vllms_on_a_recorded_eagle3_stream() -> None:
    """vLLM (vllm/benchmarks/lib/endpoint_request_func.py): TTFT at the first chunk, ITL one gap per
    later chunk, E2EL at the last chunk; serve.py: TPOT = (E2EL - TTFT) / (output tokens - 1)."""
    r = _result(timeline_of(SGLANG, chunks("sglang_generate_stream_eagle3.sse")), 0.55)  # chunks at 0.1 .. 0.5 s
    assert (r.ttft_s, r.e2el_s, r.e2e_s, r.output_tokens) == (0.1, 0.5, 0.55, 12)
    assert r.tpot_s == pytest.approx(0.4 / 11)
    assert r.itl_s == pytest.approx((0.1, 0.1, 0.1, 0.1)) and r.itl_tokens == (3, 3, 2, 3)
    per_token = r.itl_per_token_s()
    assert per_token is not None and len(per_token) == 11 and sum(per_token) == pytest.approx(0.4)
    assert per_token[:3] == pytest.approx((0.1 / 3,) * 3) and per_token[6:8] == pytest.approx((0.05, 0.05))
    # chunks counted (one token each) but usage says 8: how the 8 spread over the 3 chunks is unknown
    st = timeline_of(OPENAI, chunks("openai_completions_stream_spec_no_usage.sse"))
    st.usage = 8
    spec = _result(st, 0.5)
    assert spec.itl_tokens == () and len(spec.itl_s) == 2 and spec.itl_per_token_s() is None


def test_every_failed_request_is_accounted_for() -> None:
    """Stand-ins for documented shapes no real server here produces: SGLang's abort chunk and an
    early-closed stream (B24, tests/data/bench/README.md), a chunk-counted stream cut short (B23)."""
    routes = {
        "/generate": "sglang_generate_stream_abort.sse",
        "/early/generate": "sglang_generate_stream_early_close.sse",
        "/err/generate": "sglang_generate_stream_error.sse",
        "/ok/generate": "sglang_generate_stream.sse",
        "/v1/completions": "openai_completions_stream_spec_no_usage.sse",
    }
    with replay_server(routes) as url:
        ep = Endpoint.from_url(url)
        abort = send_request(ep, SGLANG, "p", opts(30))
        early = send_request(Endpoint.from_url(url + "/early"), SGLANG, "p", opts(30))
        err = send_request(Endpoint.from_url(url + "/err"), SGLANG, "p", opts(4))
        short = send_request(Endpoint.from_url(url + "/ok"), SGLANG, "p", opts(30))
        chunky = send_request(ep, OPENAI, "p", opts(8))
        missing = send_request(Endpoint.from_url(url + "/nope"), OPENAI, "p", opts(4))
    assert (abort.ok, abort.status, abort.finish) == (False, 503, "abort")
    assert abort.error == "aborted by the server: The server is overloaded; request aborted by the scheduler."
    assert (early.ok, early.status, early.output_tokens) == (False, 200, 3)
    assert early.error == "the stream ended without a finish reason after 3 tokens (closed early)"
    assert not err.ok and err.error == (
        "error chunk: The input (40000 tokens) is longer than the model's context length (32768 tokens)."
    )
    assert not short.ok and short.error == (
        "8 of 30 tokens (finish reason 'length'): a request must yield exactly max-new-tokens"
    )
    assert not chunky.ok and chunky.token_count == "chunks"
    assert chunky.error == (
        "3 of 8 tokens (counted as chunks: the server sent no usage) (finish reason 'length'): "
        "a request must yield exactly max-new-tokens"
    )
    assert (missing.ok, missing.status, missing.error) == (False, 404, "HTTP 404 from /v1/completions: ")
    port = int(url.rsplit(":", 1)[1])  # closed now
    refused = send_request(Endpoint("127.0.0.1", port), SGLANG, "p", OPTS)
    assert not refused.ok and refused.error is not None and refused.error.startswith("ConnectionRefusedError")


def test_finish_reasons_other_than_length_or_stop_fail() -> None:
    body = [
        (0.1, {"choices": [{"text": "a", "finish_reason": None}]}),
        (0.2, {"choices": [{"text": "", "finish_reason": "content_filter"}]}),
        (0.2, {"choices": [], "usage": {"completion_tokens": 1}}),
    ]
    st = timeline_of(OPENAI, body)
    assert st.finish == "content_filter" and st.total == 1
    assert _failure(st, 1) == ("finish reason 'content_filter' (only 'length' and 'stop' complete a request)", None)
    st.finish = "stop"
    assert _failure(st, 1) is None


def test_keepalive_only_stream_fails_on_the_idle_timeout() -> None:
    """Stand-in: a server that sends one token, then only SSE keep-alive comments (': ping')."""
    with replay_server({"/generate": "keepalive:sglang_generate_stream.sse"}, gap_s=0.05) as url:
        start = time.monotonic()
        r = send_request(Endpoint.from_url(url), SGLANG, "p", opts(8, idle_timeout_s=0.5))
        idle = time.monotonic() - start
        start = time.monotonic()
        t = send_request(Endpoint.from_url(url), SGLANG, "p", opts(8, timeout_s=0.4, idle_timeout_s=30))
        total = time.monotonic() - start
    assert not r.ok and r.error == "no progress for 0.5 s (idle timeout; only keep-alive data after 1 tokens)"
    with replay_server({"/generate": "blanks:sglang_generate_stream.sse"}, gap_s=0.05) as url:
        b = send_request(Endpoint.from_url(url), SGLANG, "p", opts(8, idle_timeout_s=0.5))
    assert b.error == "no progress for 0.5 s (idle timeout; only keep-alive data after 1 tokens)"
    assert not t.ok and t.error == "no end after 0.4 s (request timeout; 1 tokens so far)"
    assert idle < 3 and total < 3


def test_silent_server_fails_on_the_idle_timeout() -> None:
    """Not a byte of the status line, as headers sent one byte at a time (test_transport): aiohttp
    parses the head, so a head that is not complete is what bench can say of both."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()  # accepts the connection (backlog) and never answers
        r = send_request(Endpoint("127.0.0.1", s.getsockname()[1]), SGLANG, "p", opts(8, idle_timeout_s=0.3))
    assert not r.ok and r.error == "no progress for 0.3 s (idle timeout; the status line and headers are not complete)"


# -- malformed replies (issue 27): a failed request with its reason, never an exception


@pytest.mark.parametrize(
    "mode, message",
    [
        ("deepjson", "malformed chunk after 0 tokens: JSON nested too deeply"),
        ("scalar", "malformed chunk after 0 tokens: a chunk is a JSON number, not an object"),
        ("list", "malformed chunk after 0 tokens: a chunk is a JSON array, not an object"),
        ("metastr", "malformed chunk after 0 tokens: 'meta_info' is a JSON string, not an object"),
        ("tok_list", "malformed chunk after 7 tokens: 'meta_info.completion_tokens' is a JSON array, not a count"),
        ("tok_null", "malformed chunk after 7 tokens: 'meta_info.completion_tokens' is a JSON null, not a count"),
        ("tok_inf", "malformed chunk after 7 tokens: 'meta_info.completion_tokens' is inf, not a count"),
    ],
)
def test_a_malformed_stream_is_a_failed_request_with_its_reason(mode: str, message: str) -> None:
    """Real HTTP to a hostile local server (tests/support/hostile_server.py names each shape);
    before issue 27 each was an exception out of the client (bench exit 70)."""
    with hostile_server(mode) as url:
        r = send_request(Endpoint.from_url(url), SGLANG, "p", opts(8))
    assert (r.ok, r.status, r.error) == (False, 200, message)


def test_openai_chunks_of_the_wrong_shape_are_malformed() -> None:
    for chunk, why in [
        ({"choices": "abc"}, "'choices' is a JSON string, not an array"),
        ({"choices": [5]}, "'choices[0]' is a JSON number, not an object"),
        ({"choices": [{"text": "", "delta": []}]}, "'delta' is a JSON array, not an object"),
        ({"usage": 3}, "'usage' is a JSON number, not an object"),
        ({"usage": {"completion_tokens": float("nan")}}, "'usage.completion_tokens' is nan, not a count"),
    ]:
        with pytest.raises(MalformedChunk) as exc:
            timeline_of(OPENAI, [(0.1, chunk)])
        assert str(exc.value) == why
    # what was accepted before stays accepted: a numeric string, a float (int() of it), a null usage
    st_ = timeline_of(
        OPENAI,
        [
            (0.1, {"choices": [{"text": "a"}], "usage": None}),
            (0.2, {"choices": [], "usage": {"completion_tokens": "8"}}),
        ],
    )
    assert (st_.tokens, st_.usage) == (1, 8)
    assert timeline_of(SGLANG, [(0.1, {"meta_info": {"completion_tokens": 8.5}})]).usage == 8


_KEYS = st.sampled_from(
    [
        "text",
        "meta_info",
        "completion_tokens",
        "finish_reason",
        "type",
        "message",
        "status_code",
        "spec_verify_ct",
        "choices",
        "usage",
        "delta",
        "content",
        "error",
        "code",
        "x",
    ]
)
_SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
)
_JSONISH = st.recursive(
    _SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=5), max_leaves=12
)
_CHUNK = st.dictionaries(_KEYS, _JSONISH, max_size=5) | _JSONISH


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(ENGINES), st.lists(_CHUNK, max_size=6))
def test_arbitrary_chunks_are_read_or_malformed_never_an_exception(name: str, chunks: list[object]) -> None:
    """Any JSON-ish chunks: every engine either reads them or raises MalformedChunk (the failed-
    request path), and judging the stream after them never raises."""
    stream = Stream(engine(name))
    try:
        for i, c in enumerate(chunks):
            stream.feed(0.1 * (i + 1), c)  # type: ignore[arg-type]
    except MalformedChunk:
        return
    why = _failure(stream, 8)
    assert why is None or isinstance(why[0], str)


_LINES = st.lists(
    st.one_of(
        st.builds(lambda v: b"data: " + json.dumps(v).encode() + b"\n", _CHUNK),
        st.binary(max_size=20).map(lambda b: b + b"\n"),
        st.sampled_from([b"\n", b": ping\n", b"data: [DONE]\n", b"data: " + b"[" * 5000 + b"\n", b"data: {\n"]),
    ),
    max_size=8,
)


class Pieces:
    """A body as aiohttp's ``StreamReader.readany`` hands it out: in pieces of the given sizes."""

    def __init__(self, body: bytes, sizes: list[int]) -> None:
        self.body, self.sizes = body, sizes or [len(body) or 1]

    async def readany(self) -> bytes:
        n = self.sizes[0] if len(self.sizes) == 1 else self.sizes.pop(0)
        out, self.body = self.body[:n], self.body[n:]
        return out


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(st.sampled_from(ENGINES), _LINES, st.lists(st.integers(1, 64), max_size=6))
def test_arbitrary_stream_bodies_end_as_a_result_or_a_reason(name: str, lines: list[bytes], sizes: list[int]) -> None:
    """Any body of lines (JSON-ish data chunks, raw bytes, deep nesting, cut JSON), arriving in
    any pieces: the stream reader returns None (the stream ended) or a (reason, status) failure,
    never raises."""
    stream = Stream(engine(name))
    reader = LineReader(Pieces(b"".join(lines), sizes), Budget(timeout_s=60))
    why = asyncio.run(_read_stream(reader, stream, lambda: None, _Reading(True), 0.0, time.perf_counter))
    assert why is None or (isinstance(why[0], str) and why[1] is None)
    assert _failure(stream, 8) is None or isinstance(_failure(stream, 8), tuple)


def test_natural_lengths_complete_a_request_with_fewer_tokens_but_not_an_error() -> None:
    short = timeline_of(
        OPENAI,
        [(0.1, _chunk("a")), (0.2, _chunk("b", "stop")), (0.3, {"choices": [], "usage": {"completion_tokens": 2}})],
    )
    assert _failure(short, 8) == (
        "2 of 8 tokens (finish reason 'stop'): a request must yield exactly max-new-tokens",
        None,
    )
    assert _failure(short, 8, natural=True) is None
    assert _failure(short, 2) is None
    cut = timeline_of(OPENAI, [(0.1, _chunk("a"))])  # no finish reason: closed early, in either mode
    assert _failure(cut, 8, natural=True) == (
        "the stream ended without a finish reason after 1 tokens (closed early)",
        None,
    )
    odd = timeline_of(OPENAI, [(0.1, _chunk("a", "content_filter"))])
    assert _failure(odd, 8, natural=True) == (
        "finish reason 'content_filter' (only 'length' and 'stop' complete a request)",
        None,
    )


def test_chat_request_body_is_vllm_bench_serve_s_openai_chat() -> None:
    chat = engine("openai-chat")
    assert chat.request("hi", OPTS) == (
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
            "max_completion_tokens": 8,
        },
    )
    assert "ignore_eos" not in chat.request("hi", opts(8, ignore_eos=False))[1]
    assert (chat.probes_ignore_eos, chat.has_counters) == (True, False)


def test_chat_stream_times_the_role_chunk_and_counts_content_chunks() -> None:
    """transformers serve's chat stream, as sent: the role first, content chunks (several tokens in
    one at times), a finish chunk without content, the usage chunk."""
    feed = [
        (0.1, {"choices": [{"delta": {"role": "assistant"}, "finish_reason": None}]}),
        (0.2, {"choices": [{"delta": {"content": "linking stability,"}, "finish_reason": None}]}),
        (0.3, {"choices": [{"delta": {"content": " into"}, "finish_reason": None}]}),
        (0.4, {"choices": [{"delta": {}, "finish_reason": "length"}]}),
        (0.5, {"choices": [], "usage": {"completion_tokens": 3}}),
    ]
    st = timeline_of(engine("openai-chat"), feed)
    assert [(e.t_s, e.tokens) for e in st.events] == [(0.1, 0), (0.2, 1), (0.3, 2), (0.4, 2)]
    assert (st.total, st.token_count, st.finish) == (3, "server", "length")
    with pytest.raises(MalformedChunk, match="delta"):
        timeline_of(engine("openai-chat"), [(0.1, {"choices": [{"delta": "x"}]})])
