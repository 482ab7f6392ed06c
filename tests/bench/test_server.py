"""Server lifecycle on real processes: a server that never becomes ready, servers that die while
loading (a stdlib one and ``transformers serve`` on a broken model), a busy port. Each ends within
its bound with the right message and leaves no process of its group behind."""

from __future__ import annotations

import os
import re
import socket
import sys
import time
from pathlib import Path

import pytest
from tests.support.bench_support import make_tiny_model, server_python

from envforge.bench.server import (
    ServerCrashed,
    ServerLaunch,
    ServerTimeout,
    group_members,
    running_server,
    start_server,
)
from envforge.core.errors import InputError

# Answers 503 on /health forever, ignores SIGTERM, and has a child in its process group.
NEVER_READY = r"""
import http.server, signal, subprocess, sys
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
print("loading weights: 0%", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""

DIES = r"""
import sys, time
print("loading checkpoint shards: 1/4", flush=True)
time.sleep(0.5)
raise RuntimeError("CUDA error: out of memory while loading shard 2/4")
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launch(tmp_path: Path, argv: list[str], port: int, name: str = "srv") -> ServerLaunch:
    return ServerLaunch(
        name, tuple(argv), dict(os.environ), f"http://127.0.0.1:{port}/health", tmp_path / f"{name}.log"
    )


def gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return not group_members(pgid)


def test_never_ready_times_out_stops_the_group_with_sigkill(tmp_path: Path) -> None:
    port = free_port()
    lines: list[str] = []
    with pytest.raises(ServerTimeout) as exc:
        start_server(
            launch(tmp_path, [sys.executable, "-c", NEVER_READY, str(port)], port, "stuck"),
            load_timeout_s=2.0,
            progress=lines.append,
            progress_every_s=0.5,
            stop_grace_s=0.5,
        )
    assert exc.value.message == (
        f"server 'stuck' was not ready after 2 s (GET http://127.0.0.1:{port}/health: HTTP 503); stopped it"
    )
    assert exc.value.hint == (
        f"raise load-timeout-s in [verify.smoke] if it is still loading; full log: {tmp_path / 'stuck.log'}"
    )
    assert "loading weights: 0%" in exc.value.stderr_tail
    assert lines and re.match(r"waiting for 'stuck' \(pid \d+\): \d+ s of 2 s, health: ", lines[0])
    pgid = int(re.search(r"pid (\d+)", lines[0]).group(1))  # type: ignore[union-attr]
    assert gone(pgid)


def test_server_dying_while_loading_is_a_crash_with_its_log_tail(tmp_path: Path) -> None:
    port = free_port()
    with pytest.raises(ServerCrashed) as exc:
        start_server(launch(tmp_path, [sys.executable, "-c", DIES], port, "dies"), load_timeout_s=60)
    # ServerCrashed, not ServerTimeout: the death was seen while loading, not after load_timeout_s
    assert re.fullmatch(r"server 'dies' exited with status 1 while loading \(after \d+\.\d s\)", exc.value.message)
    assert exc.value.stderr_tail.splitlines()[0] == "loading checkpoint shards: 1/4"
    assert exc.value.stderr_tail.splitlines()[-1] == "RuntimeError: CUDA error: out of memory while loading shard 2/4"
    assert exc.value.exit_code == 3


def test_busy_port_is_refused_before_starting(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(InputError) as exc:
            start_server(launch(tmp_path, [sys.executable, "-c", "pass"], port), load_timeout_s=5)
    assert exc.value.message == (
        f"port {port} on 127.0.0.1 is already in use; a server started there would not be the one answering"
    )
    assert not (tmp_path / "srv.log").exists()


def test_ready_server_is_stopped_on_exit_including_children(tmp_path: Path) -> None:
    port = free_port()
    ready = NEVER_READY.replace("send_response(503)", "send_response(200)")
    with running_server(
        launch(tmp_path, [sys.executable, "-c", ready, str(port)], port, "ok"), load_timeout_s=30, stop_grace_s=0.5
    ) as (server, load_s):
        pgid = server.pgid
        assert server.alive() and load_s < 30
        deadline = time.monotonic() + 5
        while len(group_members(pgid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(group_members(pgid)) == 2
    assert gone(pgid)


@pytest.mark.slow
def test_transformers_serve_on_a_broken_model_crashes_while_loading(tmp_path: Path) -> None:
    """Real server (transformers serve), real failure: the checkpoint's config is truncated."""
    python = server_python()
    if python is None:
        pytest.skip("transformers serve is not installed (pip install -e '.[bench-test]')")
    model = make_tiny_model(tmp_path / "model")
    (model / "config.json").write_text('{"model_type": "llama", "hidden_size": ')
    port = free_port()
    argv = [
        str(python),
        "-m",
        "transformers.cli.transformers",
        "serve",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--device",
        "cpu",
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    start = time.monotonic()
    with pytest.raises(ServerCrashed) as exc:
        start_server(
            ServerLaunch("broken", tuple(argv), env, f"http://127.0.0.1:{port}/health", tmp_path / "broken.log"),
            load_timeout_s=120,
            stop_grace_s=2,
        )
    assert time.monotonic() - start < 120
    assert re.fullmatch(r"server 'broken' exited with status \d+ while loading \(after \d+\.\d s\)", exc.value.message)
    assert exc.value.stderr_tail.splitlines()[-1] == (
        f"OSError: It looks like the config file at '{model / 'config.json'}' is not a valid JSON file."
    )
    assert exc.value.hint == f"full log: {tmp_path / 'broken.log'}"


DIES_ON_FIRST_REQUEST = r"""
import http.server, os, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def do_POST(self):
        print("worker 3: NCCL error: unhandled system error", flush=True)
        os._exit(7)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_server_dying_while_measured_is_a_crash_not_a_number(tmp_path: Path) -> None:
    from envforge.bench.config import Prompt, ServerConfig, SmokeConfig
    from envforge.bench.run import BenchPlan, run_bench
    from envforge.env.fingerprint import Fingerprint

    port = free_port()
    cfg = SmokeConfig(
        model="m",
        api="sglang",
        servers=(ServerConfig("fragile", ("-c", DIES_ON_FIRST_REQUEST, "{port}")),),
        prompts=(Prompt(0, "hi"),),
        prompts_digest="sha256:00",
        concurrency=(1,),
        repeats=1,
        warmup=0,
        port=port,
        health="/health",
        load_timeout_s=30,
    )
    plan = BenchPlan(cfg, Path(sys.executable), dict(os.environ), tmp_path, Fingerprint(None, None, None, None))
    with pytest.raises(ServerCrashed) as exc:
        run_bench(plan)
    assert exc.value.message == "server 'fragile' exited with status 7 while being measured at concurrency 1"
    assert exc.value.stderr_tail == "worker 3: NCCL error: unhandled system error"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_a_second_signal_during_the_stop_grace_kills_the_group_at_once(tmp_path: Path) -> None:
    """The server and its child ignore SIGTERM; a second interruption 0.3 s into a 300 s grace (a
    scheduler's time limit, a second Ctrl-C) SIGKILLs the whole group before it goes on. The bound
    below is the grace itself: a stop that waited for it would take 300 s, a loaded machine never does."""
    import signal

    port = free_port()
    ready = NEVER_READY.replace("send_response(503)", "send_response(200)")
    server, _ = start_server(
        launch(tmp_path, [sys.executable, "-c", ready, str(port)], port, "stubborn"),
        load_timeout_s=30,
        stop_grace_s=300,
    )

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            server.stop()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - start < 300
    deadline = time.monotonic() + 5
    while not gone(server.pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert gone(server.pgid)
    server.stop()  # already stopped: nothing to do
