"""``envforge fleet`` reaching a cluster: a well-formed address where no Ray GCS answers is exit 3
within seconds with one error line and none of Ray's log lines, and the cluster's own error messages
(a dead raylet's log lines, which Ray prints to stdout) are not printed by the driver."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# ---- Ray's own output ------------------------------------------------------------------------

def test_the_clusters_error_messages_are_not_printed_by_the_driver(monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    worker = pytest.importorskip("ray._private.worker")
    from envforge.fleet import _quiet_ray_errors

    monkeypatch.setattr(worker, "_worker_logs_enabled", True)  # (restored after the test)
    worker.print_to_stdstream({"lines": ["Raylet is terminated."], "pid": "raylet", "is_err": False},
                              ignore_prefix=False)
    assert "Raylet is terminated." in capsys.readouterr().out  # what Ray does: a dying raylet on stdout
    _quiet_ray_errors()
    worker.print_to_stdstream({"lines": ["Raylet is terminated."], "pid": "raylet", "is_err": False},
                              ignore_prefix=False)
    worker.print_to_stdstream({"lines": ["a worker's stderr"], "pid": 42, "is_err": True}, ignore_prefix=False)
    assert capsys.readouterr() == ("", "")


# ---- an address where no Ray GCS answers ---------------------------------------------------------

@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections and never says anything."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()[1]
    finally:
        server.close()
        for conn in accepted:
            conn.close()


def _fleet_cli(address: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "envforge", "fleet", "verify", "quickstart-default", "--ray", address,
                          "--timeout", "10", "--project", str(ROOT)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "RAY_ADDRESS": ""})
    return res, time.monotonic() - start


HINT = ("  hint: start one with `ray start --head` (and `ray start --address HEAD:6379` on each node), then pass "
        "--ray HEAD:6379, or --ray auto on a node")


def test_a_silent_port_fails_within_seconds_with_one_line(silent_listener: int) -> None:
    pytest.importorskip("ray")
    res, took = _fleet_cli(f"127.0.0.1:{silent_listener}")
    assert res.returncode == 3, res.stderr
    assert res.stderr.splitlines() == [
        f"error: cannot connect to the Ray cluster at 127.0.0.1:{silent_listener}: something listens there, but "
        "gave no HTTP/2 answer (as a Ray GCS does) within 5 s", HINT]
    assert res.stdout == "" and took < 20


def test_an_unroutable_address_fails_within_seconds_without_ray_log_lines() -> None:
    """10.255.255.1 has no route from here (or, behind some proxies, answers as no GCS does): either way
    one error line, exit 3, in seconds, and none of Ray's C++ warnings (``gcs_client.cc``)."""
    pytest.importorskip("ray")
    res, took = _fleet_cli("10.255.255.1:6379")
    assert res.returncode == 3, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 2 and lines[1] == HINT, res.stderr
    assert lines[0].startswith("error: cannot connect to the Ray cluster at 10.255.255.1:6379: "), lines[0]
    assert res.stdout == "" and took < 20, took
