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
import sys
import time
from pathlib import Path

import pytest
from tests.support.hostile_server import Measured, hostile_server, run_measured
from tests.support.vllm_support import free_port

from envforge.bench.client import Endpoint, RequestOptions, get_status, post_status, send_request
from envforge.bench.engines import engine
from envforge.bench.metrics import MetricsError, scrape
from envforge.bench.transport import MAX_LINE_BYTES, Budget, LineReader, ReadLimit

SRC = Path(__file__).resolve().parents[2] / "src"
RSS_CAP_KIB = 400 * 1024  # bench itself is ~60 MiB; a bounded reader adds at most a line (8 MiB) and buffers
SGLANG = engine("sglang")


def bench(url: str, tmp_path: Path, *extra: str, timeout_s: float = 40.0) -> tuple[Measured, dict | None]:
    """``envforge bench --url url`` (2 requests of 8 tokens, no warm-up), measured; and its report."""
    out = tmp_path / "r.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(SRC.parent)]),
           "XDG_STATE_HOME": str(tmp_path / "state"), "ENVFORGE_CACHE_DIR": str(tmp_path / "cache")}
    m = run_measured([sys.executable, "-m", "envforge", "bench", "--url", url, "--concurrency", "1", "--repeats", "1",
                      "--requests", "2", "--warmup", "0", "--max-new-tokens", "8", "--output", str(out), "--no-plot",
                      *extra], timeout_s=timeout_s, env=env)
    return m, (json.loads(out.read_text())["data"] if out.exists() else None)


def messages(report: dict | None) -> list[str]:
    assert report is not None
    return [f["message"] for f in report["failures"]]


def test_an_endless_flush_answer_is_cut_at_the_status_limit(tmp_path: Path) -> None:
    with hostile_server("flushbig") as url:
        m, _ = bench(url, tmp_path)
    assert m.returncode == 0, m.stderr[-2000:]
    assert ("warning: server 'url': not flushed: POST /flush_cache answered the answer is larger than 1048576 "
            "bytes; prompts are distinct anyway") in m.stderr
    assert m.max_rss_kib < RSS_CAP_KIB and m.wall_s < 30


def test_a_trickling_flush_answer_ends_at_the_idle_timeout(tmp_path: Path) -> None:
    with hostile_server("flushtrickle") as url:
        m, report = bench(url, tmp_path, "--idle-timeout", "2")
    assert m.returncode == 0, m.stderr[-2000:]
    assert report is not None and report["servers"][0]["cache"] == (
        "not flushed: POST /flush_cache answered no complete answer after 2 s")
    assert m.wall_s < 20


def test_one_endless_stream_line_is_a_failed_request_in_bounded_memory(tmp_path: Path) -> None:
    with hostile_server("hugeline") as url:
        m, report = bench(url, tmp_path, "--request-timeout", "8")
    assert m.returncode == 3, m.stderr[-2000:]
    assert messages(report) == [f"a stream line longer than {MAX_LINE_BYTES} bytes after 0 tokens"] * 2
    assert m.max_rss_kib < RSS_CAP_KIB and m.wall_s < 30


def test_a_slowly_growing_line_ends_at_the_idle_timeout(tmp_path: Path) -> None:
    with hostile_server("hugeline_slow") as url:
        m, report = bench(url, tmp_path, "--idle-timeout", "2", "--request-timeout", "20")
    assert m.returncode == 3, m.stderr[-2000:]
    assert messages(report) == ["no progress for 2 s (idle timeout; an unfinished line after 0 tokens)"] * 2
    assert m.wall_s < 20


def test_slow_headers_end_at_the_request_timeout_and_the_idle_timeout(tmp_path: Path) -> None:
    with hostile_server("slowloris") as url:
        m, report = bench(url, tmp_path, "--idle-timeout", "30", "--request-timeout", "2")
        assert m.returncode == 3, m.stderr[-2000:]
        assert messages(report) == ["no end after 2 s (request timeout; 0 tokens so far)"] * 2
        assert m.wall_s < 20
        m, report = bench(url, tmp_path, "--idle-timeout", "2", "--request-timeout", "30")
    assert m.returncode == 3, m.stderr[-2000:]
    assert messages(report) == [
        "no progress for 2 s (idle timeout; the status line and headers are not complete)"] * 2
    assert m.wall_s < 20


def test_an_endless_metrics_answer_is_a_metrics_error(tmp_path: Path) -> None:
    with hostile_server("metricsbig") as url:
        m, _ = bench(url, tmp_path, "--api", "vllm", "--model", "m")
    assert m.returncode == 3, m.stderr[-2000:]
    assert (f"error: cannot read the speculative-decoding counters of server 'url' from {url}/metrics: "
            "the answer is larger than 33554432 bytes") in m.stderr
    assert m.max_rss_kib < RSS_CAP_KIB and m.wall_s < 30


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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(SRC.parent)]),
           "XDG_STATE_HOME": str(tmp_path / "state"), "ENVFORGE_CACHE_DIR": str(tmp_path / "cache")}
    m = run_measured([sys.executable, "-m", "envforge", "bench", "--project", str(tmp_path), "--recipe", "hb",
                      "--output", str(tmp_path / "h.json"), "--no-plot"], timeout_s=60, env=env)
    assert m.returncode == 3, m.stderr[-2000:]
    assert (f"error: server 'hostile' was not ready after 4 s (GET http://127.0.0.1:{port}/health_generate: "
            "the answer is larger than 1048576 bytes); stopped it") in m.stderr
    assert m.max_rss_kib < RSS_CAP_KIB and m.wall_s < 45


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
    assert exc.value.message == (f"cannot read the speculative-decoding counters of server 's' from {url}/metrics: "
                                 "the answer is larger than 33554432 bytes")


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
    b = Budget(timeout_s=10, idle_s=3, progress_s=5, max_bytes=100)
    assert b.idle_s == 3 and 2.9 < b.wait_s() <= 3
    b.count(100)
    with pytest.raises(ReadLimit) as exc:
        b.count(1)
    assert (exc.value.kind, exc.value.limit, exc.value.message) == ("size", 100, "the answer is larger than 100 bytes")
    # no progress while bytes came is "progress"; while none came, "idle"
    assert (b.limit("progress").kind, b.limit("progress").message) == ("progress", "no progress for 5 s")
    b.progressed()
    assert (b.limit("progress").kind, b.limit("progress").message) == ("idle", "no data for 5 s")
    assert b.limit("total").message == "no complete answer after 10 s"
    gone = Budget(timeout_s=0.0)
    with pytest.raises(ReadLimit) as exc:
        gone.wait_s()
    assert exc.value.kind in ("total", "idle")
    assert Budget(timeout_s=2, idle_s=9).idle_s == 2  # idle never longer than the whole deadline


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
    lines, budget = lines_of(b"data: {\"a\"", b": 1}\n\nda", b"ta: [DONE]\n", b"\n", b"tail")
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
    assert b.deadline() > first
    assert Budget(timeout_s=1, progress_s=5).deadline() == pytest.approx(Budget(timeout_s=1).end, abs=0.01)
