"""The load generator: closed loop in prompt order, cancelling at once, and open-loop pacing
(schedule, cap, send lag) over real HTTP to a local server replaying recorded streams."""

from __future__ import annotations

import json
import sys
import threading

import pytest
from tests.support.bench_support import replay_server

from envforge.bench.client import Cancel, Endpoint, LevelRun, RequestOptions, send_request
from envforge.bench.engines import engine
from envforge.bench.load import Connections, run_conversations, run_level

SGLANG, OPENAI, CHAT = engine("sglang"), engine("openai"), engine("openai-chat")
REPLY = "The sky looks blue because"  # the text of openai_completions_stream.sse


def opts(n: int) -> RequestOptions:
    return RequestOptions(model="m", max_new_tokens=n, temperature=0.0)


def test_cancel_stops_requests_in_flight_at_once() -> None:
    cancel = Cancel()
    with replay_server({"/generate": "keepalive:sglang_generate_stream.sse"}, gap_s=0.05) as url:
        threading.Timer(0.3, cancel.trip).start()
        # the keep-alive stream never ends by itself: that the level returns at all, with every
        # request "cancelled", is the proof (no wall-clock bound: a loaded machine turns one red)
        run = run_level(Endpoint.from_url(url), SGLANG, ["a", "b"], 2, opts(8), cancel=cancel)
        late = send_request(Endpoint.from_url(url), SGLANG, "p", opts(8), cancel=cancel)
    assert [r.error for r in run.results] == ["cancelled", "cancelled"]
    assert late.error == "cancelled"


def test_run_level_keeps_prompt_order_and_measures_wall_time() -> None:
    with replay_server({"/v1/completions": "openai_completions_stream.sse"}, gap_s=0.005) as url:
        run = run_level(Endpoint.from_url(url), OPENAI, [f"p{i}" for i in range(6)], 3, opts(5))
    assert run.concurrency == 3 and len(run.results) == 6
    assert all(r.ok and r.output_tokens == 5 for r in run.results)
    assert run.wall_s >= max(r.e2e_s for r in run.results)
    assert run.send_lag_s == ()  # closed loop: no schedule, no lag


def test_open_loop_sends_at_the_schedule_and_queues_under_the_cap() -> None:
    """Each request is sent at its intended time (never before); with the cap reached it waits, and
    its lag (actual - intended send time) says how long: no catching up beyond that."""
    schedule = (0.0, 0.05, 0.10, 0.15)
    switch = sys.getswitchinterval()
    with replay_server({"/v1/completions": "openai_completions_stream.sse"}, gap_s=0.001) as url:
        run = run_level(Endpoint.from_url(url), OPENAI, [f"p{i}" for i in range(4)], 4, opts(5), schedule=schedule)
        assert all(r.ok for r in run.results) and len(run.send_lag_s) == 4
        # never before its time; how late depends on the machine's load, so no upper bound here (issue 41:
        # a 0.03 s bound failed at load 7-17): the benchmarks (bench_send_lag.py) measure it
        assert all(lag >= 0 for lag in run.send_lag_s), run.send_lag_s
        assert run.wall_s >= 0.15 and sys.getswitchinterval() == switch  # restored after pacing
        # cap 1, each request ~0.08 s (8 events 10 ms apart): the 2nd..4th wait for the one before
    with replay_server({"/v1/completions": "openai_completions_stream.sse"}, gap_s=0.01) as url:
        capped = run_level(
            Endpoint.from_url(url), OPENAI, [f"p{i}" for i in range(4)], 1, opts(5), schedule=(0.0, 0.0, 0.0, 0.0)
        )
    lags = capped.send_lag_s
    assert all(r.ok for r in capped.results) and 0 <= lags[0] < lags[1] < lags[2] < lags[3]  # each waits longer
    assert lags[3] >= 3 * 0.05  # a lower bound: three requests of 8 events 10 ms apart ran first (load only adds)


def test_a_level_keeps_its_connections_alive() -> None:
    """12 requests at concurrency 3 travel on at most 3 connections (aiohttp's pool, as ``vllm bench
    serve``); a second level on the same Connections reuses them."""
    peers: list[int] = []
    with replay_server({"/v1/completions": "openai_completions_stream.sse"}, gap_s=0.002, peers=peers) as url:
        with Connections(3) as conns:
            first = run_level(
                Endpoint.from_url(url), OPENAI, [f"p{i}" for i in range(12)], 3, opts(5), connections=conns
            )
            second = run_level(
                Endpoint.from_url(url), OPENAI, [f"q{i}" for i in range(6)], 3, opts(5), connections=conns
            )
    assert all(r.ok for r in first.results + second.results)
    assert len(peers) == 18 and len(set(peers)) <= 3, peers


def test_each_request_asks_for_and_is_checked_against_its_own_output_tokens() -> None:
    """``max_new_tokens`` per request (a generated dataset's lengths): each body asks for its own count
    (``max_tokens``, with ``ignore_eos``), and each stream is checked against that count: the
    recording yields 5 tokens, so the request that asked for 3 fails and the others pass."""
    log: list[tuple[str, bytes]] = []
    with replay_server({"/v1/completions": "openai_completions_stream.sse"}, log=log) as url:
        for schedule in (None, (0.0, 0.01, 0.02)):
            log.clear()
            run = run_level(
                Endpoint.from_url(url),
                OPENAI,
                ["a", "b", "c"],
                2,
                opts(99),
                schedule=schedule,
                max_new_tokens=[5, 3, 5],
            )
            asked = {json.loads(body)["prompt"]: json.loads(body)["max_tokens"] for _, body in log}
            assert asked == {"a": 5, "b": 3, "c": 5}
            assert all(json.loads(body)["ignore_eos"] is True for _, body in log)
            assert [r.ok for r in run.results] == [True, False, True]
            assert run.results[1].error is not None and run.results[1].error.startswith("5 of 3 tokens")
    with pytest.raises(ValueError, match="2 output lengths for 3 prompts"):
        run_level(Endpoint("127.0.0.1", 9), OPENAI, ["a", "b", "c"], 1, opts(5), max_new_tokens=[1, 2])


def _user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


ANSWER = {"role": "assistant", "content": REPLY}


def test_run_conversations_sends_each_turn_with_the_conversation_so_far() -> None:
    """SGLang's multi-turn rule (bench_serving.py 0.5.9): each turn is the conversation so far with
    the server's own replies; results per turn, conversation after conversation; no text kept."""
    log: list[tuple[str, bytes]] = []
    with replay_server({"/v1/chat/completions": "openai_completions_stream.sse"}, log=log) as url:
        run = run_conversations(Endpoint.from_url(url), CHAT, [("q1", "q2", "q3"), ("r1", "r2")], 1, opts(5))
    assert [(r.ok, r.turn, r.output_tokens, r.text) for r in run.results] == [
        (True, 1, 5, None), (True, 2, 5, None), (True, 3, 5, None), (True, 1, 5, None), (True, 2, 5, None)
    ]  # fmt: skip
    assert [(path, json.loads(body)["messages"]) for path, body in log] == [
        ("/v1/chat/completions", [_user("q1")]),
        ("/v1/chat/completions", [_user("q1"), ANSWER, _user("q2")]),
        ("/v1/chat/completions", [_user("q1"), ANSWER, _user("q2"), ANSWER, _user("q3")]),
        ("/v1/chat/completions", [_user("r1")]),
        ("/v1/chat/completions", [_user("r1"), ANSWER, _user("r2")]),
    ]
    assert len(run.starts_s) == 5 and run.starts_s == tuple(sorted(run.starts_s)) and run.send_lag_s == ()
    assert run.wall_s >= sum(r.e2e_s for r in run.results)  # one sender: one request at a time


def test_a_conversation_holds_its_sender_and_a_failed_turn_ends_it() -> None:
    log: list[tuple[str, bytes]] = []
    with replay_server({"/v1/chat/completions": "openai_completions_stream.sse"}, log=log, gap_s=0.001) as url:
        run = run_conversations(Endpoint.from_url(url), CHAT, [("a1", "a2"), ("b1", "b2"), ("c1",)], 2, opts(5))
    assert [r.turn for r in run.results] == [1, 2, 1, 2, 1]
    firsts = [json.loads(body)["messages"][-1]["content"] for _, body in log]
    # two senders: a and b start together, a's and b's second turns follow their own first turns, c waits
    assert firsts.index("a2") > firsts.index("a1") and firsts.index("b2") > firsts.index("b1")
    assert firsts.index("c1") > min(firsts.index("a2"), firsts.index("b2"))
    with replay_server({"/v1/chat/completions": "sglang_generate_stream_error.sse"}) as url:
        failed = run_conversations(Endpoint.from_url(url), CHAT, [("a1", "a2", "a3"), ("b1",)], 1, opts(5))
    assert [(r.ok, r.turn) for r in failed.results] == [(False, 1), (False, 1)]  # a2, a3 never sent


def test_only_an_engine_that_sends_a_history_runs_conversations() -> None:
    with pytest.raises(ValueError) as exc:
        run_conversations(Endpoint("127.0.0.1", 9), OPENAI, [("q1", "q2")], 1, opts(5))
    assert str(exc.value) == "engine 'openai' sends no conversation history"
    with pytest.raises(ValueError) as exc:
        run_conversations(Endpoint("127.0.0.1", 9), CHAT, [("q1",), ()], 1, opts(5))
    assert str(exc.value) == "a conversation without a turn"
    assert [engine(n).conversations for n in ("sglang", "openai", "vllm", "openai-chat")] == [False, False, False, True]


def test_conversations_in_open_loop_start_at_their_times_on_kept_connections() -> None:
    """Each conversation starts at its scheduled time (never before: its lag is >= 0 and within the
    run), the starts are from the first send, and a second run on the same Connections reuses them."""
    peers: list[int] = []
    with replay_server({"/v1/chat/completions": "openai_completions_stream.sse"}, gap_s=0.001, peers=peers) as url:
        with Connections(2) as conns:
            run = run_conversations(
                Endpoint.from_url(url),
                CHAT,
                [("a1", "a2"), ("b1",)],
                2,
                opts(5),
                schedule=(0.0, 0.2),
                connections=conns,
            )
            again = run_conversations(Endpoint.from_url(url), CHAT, [("c1", "c2")], 2, opts(5), connections=conns)
    assert run.concurrency == 2 and [r.turn for r in run.results] == [1, 2, 1]
    assert len(run.send_lag_s) == 2 and all(0 <= lag <= run.wall_s for lag in run.send_lag_s), run.send_lag_s
    assert run.starts_s[0] == 0.0 and run.starts_s[2] >= 0.2  # b1, the second conversation, at its time
    assert again.send_lag_s == () and all(r.ok for r in run.results + again.results)
    assert len(peers) == 5 and len(set(peers)) <= 2, peers
    assert run_conversations(Endpoint.from_url(url), CHAT, [], 3, opts(5)) == LevelRun(3, (), 0.0, (), ())


def test_cancel_stops_every_conversation_at_once() -> None:
    cancel = Cancel()
    with replay_server({"/v1/chat/completions": "keepalive:openai_completions_stream.sse"}, gap_s=0.05) as url:
        threading.Timer(0.3, cancel.trip).start()
        run = run_conversations(Endpoint.from_url(url), CHAT, [("a1", "a2"), ("b1",)], 2, opts(8), cancel=cancel)
    assert [(r.error, r.turn) for r in run.results] == [("cancelled", 1), ("cancelled", 1)]  # a2 never sent
