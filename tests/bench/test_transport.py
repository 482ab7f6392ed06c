"""Bounded reads (issue 27): every route bench touches, against real hostile servers on 127.0.0.1.

Each CLI test runs ``envforge bench`` as a child under an address-space limit and a time limit and
asserts its exit status, the literal failure reason, its wall time and its own peak RSS
(``wait4``). Before issue 27 each of these either grew without bound (health, flush, one endless
line: gigabytes) or ran past every timeout (a trickling flush, a slowly growing line, slow headers).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import aiohttp
import pytest
from tests.support.hostile_server import Measured, hostile_server, run_measured
from tests.support.vllm_support import free_port

from envforge.bench.client import Endpoint, RequestOptions, get_status, post_status, send_request
from envforge.bench.engines import engine
from envforge.bench.metrics import MetricsError, scrape
from envforge.bench.transport import (
    KEEPALIVE_S,
    MAX_LINE_BYTES,
    Budget,
    HTTPError,
    LineReader,
    ReadLimit,
    error_text,
    fetch,
    new_session,
    os_error,
    read_all,
    run_sync,
)

SRC = Path(__file__).resolve().parents[2] / "src"
RSS_CAP_KIB = 400 * 1024  # bench itself is ~60 MiB; a bounded reader adds at most a line (8 MiB) and buffers
SGLANG = engine("sglang")


def bench(url: str, tmp_path: Path, *extra: str, timeout_s: float = 120.0) -> tuple[Measured, dict | None]:
    """``envforge bench --url url`` (2 requests of 8 tokens, no warm-up), measured; and its report."""
    out = tmp_path / "r.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(SRC.parent)]),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ENVFORGE_CACHE_DIR": str(tmp_path / "cache"),
    }
    m = run_measured(
        [
            sys.executable,
            "-m",
            "envforge",
            "bench",
            "--url",
            url,
            "--concurrency",
            "1",
            "--repeats",
            "1",
            "--requests",
            "2",
            "--warmup",
            "0",
            "--max-new-tokens",
            "8",
            "--output",
            str(out),
            "--no-plot",
            *extra,
        ],
        timeout_s=timeout_s,
        env=env,
    )
    return m, (json.loads(out.read_text())["data"] if out.exists() else None)


def messages(report: dict | None) -> list[str]:
    assert report is not None
    return [f["message"] for f in report["failures"]]


def test_an_endless_flush_answer_is_cut_at_the_status_limit(tmp_path: Path) -> None:
    with hostile_server("flushbig") as url:
        m, _ = bench(url, tmp_path)
    assert m.returncode == 0, m.stderr[-2000:]
    assert (
        "warning: server 'url': not flushed: POST /flush_cache answered the answer is larger than 1048576 "
        "bytes; prompts are distinct anyway"
    ) in m.stderr
    assert m.max_rss_kib < RSS_CAP_KIB


def test_a_trickling_flush_answer_ends_at_the_idle_timeout(tmp_path: Path) -> None:
    with hostile_server("flushtrickle") as url:
        m, report = bench(url, tmp_path, "--idle-timeout", "2")
    assert m.returncode == 0, m.stderr[-2000:]
    assert report is not None and report["servers"][0]["cache"] == (
        "not flushed: POST /flush_cache answered no complete answer after 2 s"
    )


def test_one_endless_stream_line_is_a_failed_request_in_bounded_memory(tmp_path: Path) -> None:
    with hostile_server("hugeline") as url:
        m, report = bench(url, tmp_path, "--request-timeout", "8")
    assert m.returncode == 3, m.stderr[-2000:]
    assert messages(report) == [f"a stream line longer than {MAX_LINE_BYTES} bytes after 0 tokens"] * 2
    assert m.max_rss_kib < RSS_CAP_KIB


def test_a_slowly_growing_line_ends_at_the_idle_timeout(tmp_path: Path) -> None:
    with hostile_server("hugeline_slow") as url:
        m, report = bench(url, tmp_path, "--idle-timeout", "2", "--request-timeout", "20")
    assert m.returncode == 3, m.stderr[-2000:]
    assert messages(report) == ["no progress for 2 s (idle timeout; an unfinished line after 0 tokens)"] * 2


def test_slow_headers_end_at_the_request_timeout_and_the_idle_timeout(tmp_path: Path) -> None:
    with hostile_server("slowloris") as url:
        m, report = bench(url, tmp_path, "--idle-timeout", "30", "--request-timeout", "2")
        assert m.returncode == 3, m.stderr[-2000:]
        assert messages(report) == ["no end after 2 s (request timeout; 0 tokens so far)"] * 2
        m, report = bench(url, tmp_path, "--idle-timeout", "2", "--request-timeout", "30")
    assert m.returncode == 3, m.stderr[-2000:]
    assert messages(report) == ["no progress for 2 s (idle timeout; the status line and headers are not complete)"] * 2


def test_an_endless_metrics_answer_is_a_metrics_error(tmp_path: Path) -> None:
    with hostile_server("metricsbig") as url:
        m, _ = bench(url, tmp_path, "--api", "vllm", "--model", "m")
    assert m.returncode == 3, m.stderr[-2000:]
    assert (
        f"error: cannot read the speculative-decoding counters of server 'url' from {url}/metrics: "
        "the answer is larger than 8388608 bytes"
    ) in m.stderr
    assert m.max_rss_kib < RSS_CAP_KIB


def test_an_endless_health_answer_never_makes_a_server_ready(tmp_path: Path) -> None:
    """A server started by bench whose readiness route answers 200 with an endless body (row #2:
    12.4 GB in 45 s): not ready, stopped after load-timeout-s, in bounded memory."""
    from tests.support import hostile_server as script

    port = free_port()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "hb.toml").write_text(f'''
[recipe]
name = "hb"
python = "3.12"

[verify.smoke]
model = "m"
port = {port}
warmup = 0
load-timeout-s = 4

[[verify.smoke.servers]]
name = "hostile"
args = ["{script.__file__}", "{{port}}", "healthbig"]
''')
    env_dir = tmp_path / "envs" / "hb-default"
    (env_dir / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (env_dir / "bin").mkdir()
    (env_dir / "bin" / "python").symlink_to(sys.executable)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), str(SRC.parent)]),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "ENVFORGE_CACHE_DIR": str(tmp_path / "cache"),
    }
    m = run_measured(
        [
            sys.executable,
            "-m",
            "envforge",
            "bench",
            "--project",
            str(tmp_path),
            "--recipe",
            "hb",
            "--output",
            str(tmp_path / "h.json"),
            "--no-plot",
        ],
        timeout_s=120,
        env=env,
    )
    assert m.returncode == 3, m.stderr[-2000:]
    assert (
        f"error: server 'hostile' was not ready after 4 s (GET http://127.0.0.1:{port}/health_generate: "
        "the answer is larger than 1048576 bytes); stopped it"
    ) in m.stderr
    assert m.max_rss_kib < RSS_CAP_KIB


# -- the client's routes in-process: the same bounds, the same messages


def test_status_routes_are_bounded_in_bytes_and_time() -> None:
    with hostile_server("healthbig") as url:
        assert get_status(url + "/health", timeout_s=5) == "the answer is larger than 1048576 bytes"
    with hostile_server("flushtrickle") as url:
        assert post_status(url + "/flush_cache", timeout_s=0.6) == "no complete answer after 0.6 s"
    with hostile_server("slowloris") as url:
        assert get_status(url + "/generate", timeout_s=5) == 200  # a GET of this server answers at once
    with hostile_server("goodsse") as url:
        assert (get_status(url + "/health"), post_status(url + "/flush_cache")) == (200, 200)


def test_metrics_scrape_is_bounded() -> None:
    with hostile_server("metricsbig") as url, pytest.raises(MetricsError) as exc:
        scrape(Endpoint.from_url(url), server="s")
    assert exc.value.message == (
        f"cannot read the speculative-decoding counters of server 's' from {url}/metrics: "
        "the answer is larger than 8388608 bytes"
    )


def test_stream_limits_hold_during_a_read_not_between_lines() -> None:
    opts = RequestOptions(model="m", max_new_tokens=8, timeout_s=1.5, idle_timeout_s=30)
    with hostile_server("hugeline_slow") as url:
        r = send_request(Endpoint.from_url(url), SGLANG, "p", opts)
    assert (r.ok, r.status, r.error) == (False, None, "no end after 1.5 s (request timeout; 0 tokens so far)")
    assert r.e2e_s < 5
    with hostile_server("goodsse") as url:
        ok = send_request(Endpoint.from_url(url), SGLANG, "p", opts)
    assert (ok.ok, ok.output_tokens, ok.finish) == (True, 8, "length")


def test_budget_limits_and_messages() -> None:
    b = Budget(timeout_s=10, progress_s=5, max_bytes=100)
    b.count(100)
    with pytest.raises(ReadLimit) as exc:
        b.count(1)
    assert (exc.value.kind, exc.value.limit, exc.value.message) == ("size", 100, "the answer is larger than 100 bytes")
    # no progress while bytes came is "progress"; while none came, "idle"
    assert (b.limit("progress").kind, b.limit("progress").message) == ("progress", "no progress for 5 s")
    b.progressed()
    assert (b.limit("progress").kind, b.limit("progress").message) == ("idle", "no data for 5 s")
    assert b.limit("total").message == "no complete answer after 10 s"


class Pieces:
    def __init__(self, *pieces: bytes) -> None:
        self.pieces = list(pieces)

    async def readany(self) -> bytes:
        return self.pieces.pop(0) if self.pieces else b""


def lines_of(*pieces: bytes) -> tuple[list[bytes], Budget]:
    budget = Budget(timeout_s=10, max_bytes=None)
    reader = LineReader(Pieces(*pieces), budget)

    async def all_lines() -> list[bytes]:
        out = []
        while line := await reader.readline():
            out.append(line)
        return out

    return asyncio.run(all_lines()), budget


def test_line_reader_joins_pieces_and_keeps_endings() -> None:
    lines, budget = lines_of(b'data: {"a"', b": 1}\n\nda", b"ta: [DONE]\n", b"\n", b"tail")
    assert lines == [b'data: {"a": 1}\n', b"\n", b"data: [DONE]\n", b"\n", b"tail"]
    assert budget.received == 10 + 8 + 11 + 1 + 4


def test_line_reader_refuses_a_line_over_the_limit_across_pieces() -> None:
    half = b"x" * (MAX_LINE_BYTES // 2 + 1)
    with pytest.raises(ReadLimit) as exc:
        lines_of(b"data: ", half, half, b"\n")
    assert (exc.value.kind, exc.value.message) == ("line", f"a line longer than {MAX_LINE_BYTES} bytes")
    exact, _ = lines_of(b"y" * (MAX_LINE_BYTES - 1), b"\n")
    assert len(exact[0]) == MAX_LINE_BYTES  # the limit itself is a line


def test_deadline_moves_with_progress_only() -> None:
    b = Budget(timeout_s=10, progress_s=2)
    first = b.deadline()
    assert first == pytest.approx(b.progress_by)
    time.sleep(0.01)
    b.progressed()
    assert first < b.deadline() < b.end
    assert Budget(timeout_s=1, progress_s=5).deadline() == pytest.approx(Budget(timeout_s=1).end, abs=0.01)


def test_each_limit_has_its_kind_number_and_message() -> None:
    b = Budget(timeout_s=10, progress_s=2.5, max_bytes=64)
    as_tuple = lambda e: (e.kind, e.limit, e.message, str(e))  # noqa: E731
    assert as_tuple(b.limit("total")) == ("total", 10, "no complete answer after 10 s", "no complete answer after 10 s")
    assert as_tuple(b.limit("progress")) == ("idle", 2.5, "no data for 2.5 s", "no data for 2.5 s")
    b.count(1)
    assert as_tuple(b.limit("progress")) == ("progress", 2.5, "no progress for 2.5 s", "no progress for 2.5 s")
    assert as_tuple(b.limit("size")) == (
        "size",
        64,
        "the answer is larger than 64 bytes",
        "the answer is larger than 64 bytes",
    )
    with pytest.raises(ValueError, match="no limit of kind 'idle'"):
        b.limit("idle")


def test_expired_names_the_limit_whose_deadline_passed() -> None:
    assert Budget(timeout_s=0.0).expired().kind == "total"  # the whole deadline, also without progress_s
    assert Budget(timeout_s=60).expired().kind == "total"  # no progress limit: only the total one can run out
    b = Budget(timeout_s=60, progress_s=0.0)
    assert (b.expired().kind, b.expired().limit) == ("idle", 0.0)  # the progress limit, no byte since
    b.count(3)
    assert b.expired().kind == "progress"
    ended = Budget(timeout_s=0.0, progress_s=30)
    assert ended.expired().kind == "total"  # the total deadline at the same moment: it is the one named


def test_a_line_reader_at_its_limits_and_after() -> None:
    # a body whose last line, without its ending, is exactly the limit: returned as it is
    exact, _ = lines_of(b"z" * MAX_LINE_BYTES)
    assert [len(x) for x in exact] == [MAX_LINE_BYTES]
    with pytest.raises(ReadLimit):
        lines_of(b"z" * (MAX_LINE_BYTES + 1))
    # several lines in one piece, then a piece that starts a new line exactly after the last ending
    lines, budget = lines_of(b"a\nbb\nccc\n", b"dd\n")
    assert lines == [b"a\n", b"bb\n", b"ccc\n", b"dd\n"] and budget.received == 12
    # after the end, the reader says so again without asking the body for more
    body = Pieces(b"x\n")
    reader = LineReader(body, Budget(timeout_s=5, max_bytes=None))

    async def three() -> list[bytes]:
        return [await reader.readline(), await reader.readline(), await reader.readline()]

    assert asyncio.run(three()) == [b"x\n", b"", b""]
    # a line over the limit drops what was buffered; the next read starts afresh
    long_then_short = Pieces(b"q" * (MAX_LINE_BYTES + 2), b"ok\n")
    reader = LineReader(long_then_short, Budget(timeout_s=5, max_bytes=None))

    async def after_limit() -> tuple[str, bytes]:
        try:
            await reader.readline()
        except ReadLimit as exc:
            return exc.kind, await reader.readline()
        return "none", b""

    assert asyncio.run(after_limit()) == ("line", b"ok\n")
    # a second line of a piece that fits the limit, though it ends past the limit's offset in the piece
    fits, _ = lines_of(b"a\n" + b"b" * (MAX_LINE_BYTES - 2) + b"\n")
    assert [len(x) for x in fits] == [2, MAX_LINE_BYTES - 1]
    # the whole body of several pieces, each counted
    body_budget = Budget(timeout_s=5, max_bytes=None)
    assert asyncio.run(read_all(Pieces(b"ab", b"", b"cd"), body_budget)) == b"ab" and body_budget.received == 2
    body_budget = Budget(timeout_s=5, max_bytes=None)
    assert asyncio.run(read_all(Pieces(b"ab", b"cd"), body_budget)) == b"abcd" and body_budget.received == 4
    # a line over the limit that has its ending in the same piece
    with pytest.raises(ReadLimit) as exc:
        lines_of(b"ok\n" + b"w" * MAX_LINE_BYTES + b"\n")
    assert (exc.value.kind, exc.value.limit) == ("line", MAX_LINE_BYTES)


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None]] = []

    def _answer(self) -> None:
        _Recorder.seen.append((self.command, self.path, self.headers.get("Content-Length")))
        body = f"{self.command} {self.path}".encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


def test_fetch_sends_an_empty_body_with_post_only_and_returns_status_and_body() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        _Recorder.seen.clear()
        assert fetch("127.0.0.1", port, "POST", "/flush_cache", timeout_s=5) == (201, b"POST /flush_cache")
        assert fetch("127.0.0.1", port, "GET", "/health", timeout_s=5) == (200, b"GET /health")
        assert _Recorder.seen == [("POST", "/flush_cache", "0"), ("GET", "/health", None)]
        with pytest.raises(ReadLimit) as exc:
            fetch("127.0.0.1", port, "GET", "/a-long-path", timeout_s=5, max_bytes=4)
        assert exc.value.kind == "size"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_errors_are_the_operating_systems_or_http_errors() -> None:
    port = free_port()
    with pytest.raises(ConnectionRefusedError) as refused:
        fetch("127.0.0.1", port, "GET", "/health", timeout_s=5)
    assert error_text(refused.value).startswith("ConnectionRefusedError: [Errno 111] ")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def not_http() -> None:
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
        conn.close()

    threading.Thread(target=not_http, daemon=True).start()
    try:
        with pytest.raises(HTTPError) as bad:
            fetch("127.0.0.1", listener.getsockname()[1], "GET", "/health", timeout_s=5)
    finally:
        listener.close()
    assert str(bad.value).startswith(("ClientResponseError: ", "ServerDisconnectedError: "))
    assert error_text(bad.value) == str(bad.value)


def test_error_text_and_os_error() -> None:
    assert error_text(HTTPError("ServerDisconnectedError: Server disconnected")) == (
        "ServerDisconnectedError: Server disconnected"
    )
    assert error_text(ConnectionResetError(104, "Connection reset by peer")) == (
        "ConnectionResetError: [Errno 104] Connection reset by peer"
    )
    assert error_text(TimeoutError()) == "TimeoutError"
    assert error_text(ValueError("BOX")) == "ValueError: BOX"
    inner = ConnectionRefusedError(111, "Connect call failed")
    wrapped = aiohttp.ClientOSError(*inner.args)
    assert isinstance(os_error(wrapped), OSError) and str(os_error(wrapped)) == str(wrapped)
    assert error_text(wrapped) == f"OSError: {wrapped}"


def test_a_new_session_pools_keeps_alive_and_trusts_nothing_from_the_environment() -> None:
    async def settings() -> tuple[object, ...]:
        async with new_session(0) as s:
            c = s.connector
            assert isinstance(c, aiohttp.TCPConnector)
            return (
                c.limit,
                c._keepalive_timeout,
                s.auto_decompress,
                s.trust_env,
                type(s.cookie_jar).__name__,
                s.timeout.total,
            )

    assert asyncio.run(settings()) == (1, KEEPALIVE_S, False, False, "DummyCookieJar", None)
    assert KEEPALIVE_S == 4.0


def test_run_sync_runs_on_a_new_loop_with_a_session_it_closes() -> None:
    kept: list[aiohttp.ClientSession] = []

    async def use(s: aiohttp.ClientSession) -> int:
        kept.append(s)
        assert s.connector is not None and s.connector.limit == 3
        return 7

    assert run_sync(use, connections=3) == 7 and kept[0].closed
