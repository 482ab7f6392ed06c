"""A hostile local HTTP server for the bench tests: answers that never end, never finish a line or a
header, or are malformed, on 127.0.0.1, each bounded in time (a mode stops sending after
``LIFETIME_S``; the server lives as long as its ``with`` block or, as a script, ``LIFETIME_S + 5`` s).

Modes and the stream shape each reproduces (issue 27's fault report, rows #2, #4, #5, #14):

- ``goodsse``: a well-formed SGLang ``/generate`` stream of 8 tokens (cumulative ``completion_tokens``,
  ``finish_reason {"type": "length"}`` on the last chunk, ``data: [DONE]``); every other mode answers
  the routes it does not attack like this.
- ``healthbig``: ``GET`` (readiness) answers 200 and then an endless body of 1 MiB blocks.
- ``flushbig``: ``POST /flush_cache`` answers 200 and then an endless body of 1 MiB blocks.
- ``flushtrickle``: ``POST /flush_cache`` answers 200 and an SSE comment ``: ping`` every 0.2 s, never
  ending (a server that streams keep-alives to every POST).
- ``metricsbig``: ``GET /metrics`` answers 200 and then an endless body of 1 MiB blocks.
- ``hugeline``: the stream is one ``data: {"text": "xxx...`` line that never ends, sent fast.
- ``hugeline_slow``: the same line growing by 1 KiB every 0.1 s (bytes arrive, no line ends).
- ``slowloris``: the status line and headers of the stream one byte every 0.25 s.
- ``deepjson``: ``data: [[[[...`` 200,000 levels deep.
- ``scalar``: ``data: 5``; ``list``: ``data: [1, 2]``; ``metastr``: ``meta_info`` is the string ``"oops"``.
- ``tok_list``, ``tok_null``, ``tok_inf``: the last chunk's ``meta_info.completion_tokens`` is ``[8]``,
  ``null`` or ``Infinity`` (what Python's ``json`` writes for ``float("inf")``).

Script mode: ``python hostile_server.py PORT MODE [other args ignored]`` (a smoke server that bench
starts with the environment's interpreter; extra arguments such as ``--api-key`` are accepted).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["LIFETIME_S", "MODES", "Measured", "good_stream", "hostile_server", "run_measured"]

LIFETIME_S = 40.0
_BLOCK = b"A" * (1 << 20)
_SSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
_OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
_ENDLESS = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
MODES = (
    "goodsse",
    "healthbig",
    "flushbig",
    "flushtrickle",
    "metricsbig",
    "hugeline",
    "hugeline_slow",
    "slowloris",
    "deepjson",
    "scalar",
    "list",
    "metastr",
    "tok_list",
    "tok_null",
    "tok_inf",
)


def good_stream(n: int = 8, last_tokens: object = None) -> bytes:
    """An SGLang native stream of ``n`` chunks; the last chunk's ``completion_tokens`` is
    ``last_tokens`` when given (else ``n``)."""
    out = b""
    for i in range(1, n + 1):
        fin = {"type": "length"} if i == n else None
        ct = last_tokens if i == n and last_tokens is not None else i
        out += (
            b"data: "
            + json.dumps({"text": "x" * i, "meta_info": {"completion_tokens": ct, "finish_reason": fin}}).encode()
            + b"\n\n"
        )
    return out + b"data: [DONE]\n\n"


def _for(seconds: float) -> Iterator[None]:
    end = time.monotonic() + min(seconds, LIFETIME_S)
    while time.monotonic() < end:
        yield None


def _answer(s: socket.socket, mode: str, method: str, path: str) -> None:
    if (
        (mode == "healthbig" and method == "GET")
        or (mode == "flushbig" and path == "/flush_cache")
        or (mode == "metricsbig" and path == "/metrics")
    ):
        s.sendall(_ENDLESS)
        for _ in _for(LIFETIME_S):
            s.sendall(_BLOCK)
        return
    if mode == "flushtrickle" and path == "/flush_cache":
        s.sendall(_SSE)
        for _ in _for(LIFETIME_S):
            s.sendall(b": ping\n\n")
            time.sleep(0.2)
        return
    if path == "/flush_cache" or method == "GET":
        s.sendall(_OK)
        return
    if mode == "hugeline":
        s.sendall(_SSE + b'data: {"text": "')
        for _ in _for(LIFETIME_S):
            s.sendall(b"x" * (1 << 20))
        return
    if mode == "hugeline_slow":
        s.sendall(_SSE + b'data: {"text": "')
        for _ in _for(LIFETIME_S):
            s.sendall(b"x" * 1024)
            time.sleep(0.1)
        return
    if mode == "slowloris":
        for b, _ in zip(b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 1000, _for(LIFETIME_S)):
            s.sendall(bytes([b]))
            time.sleep(0.25)
        return
    bodies = {
        "deepjson": b"data: " + b"[" * 200_000 + b"\n\n",
        "scalar": b"data: 5\n\ndata: [DONE]\n\n",
        "list": b"data: [1, 2]\n\ndata: [DONE]\n\n",
        "metastr": b'data: {"text": "x", "meta_info": "oops"}\n\ndata: [DONE]\n\n',
        "tok_list": good_stream(last_tokens=[8]),
        "tok_null": good_stream(last_tokens="null"),
        "tok_inf": good_stream(last_tokens=float("inf")),
    }
    body = bodies.get(mode, good_stream())
    if mode == "tok_null":
        body = body.replace(b'"completion_tokens": "null"', b'"completion_tokens": null')
    s.sendall(_SSE + body)


class _Handler(socketserver.BaseRequestHandler):
    mode = "goodsse"

    def handle(self) -> None:
        s = self.request
        s.settimeout(LIFETIME_S)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            method, path = head.split(b"\r\n")[0].decode().split()[:2]
            length = 0
            for h in head.split(b"\r\n")[1:]:
                k, _, v = h.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v)
            while len(body) < length:
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
            _answer(s, self.mode, method, path)
        except OSError:
            pass  # the client went away: what a bounded client does


class _Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


@contextmanager
def hostile_server(mode: str, port: int = 0) -> Iterator[str]:
    """Serve ``mode`` (one of :data:`MODES`) on 127.0.0.1 (``port`` or a free one) in a thread;
    yields the base URL."""
    assert mode in MODES, mode
    handler = type("Handler", (_Handler,), {"mode": mode})
    server = _Server(("127.0.0.1", port), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@dataclass(frozen=True)
class Measured:
    """A finished child: exit status (-9 when it was killed at the time limit), its output, wall
    seconds and the peak resident set size of the program it runs, in KiB: the largest ``VmHWM`` of
    ``/proc/<pid>/status`` read while it runs (the high-water mark of its own memory after ``exec``).
    Not ``ru_maxrss`` of ``wait4``: Linux keeps the pre-``exec`` image's peak in it, and a child forked
    from a pytest process that has grown to 450 MB reported 455 MB for a 58 MB program (a CI run)."""

    returncode: int
    stdout: str
    stderr: str
    wall_s: float
    max_rss_kib: int


def run_measured(
    argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None, address_space_bytes: int = 4 << 30
) -> Measured:
    """Run ``argv`` under an address-space limit (so an unbounded reader cannot take the machine),
    kill it with SIGKILL after ``timeout_s`` seconds, and measure it."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space_bytes, address_space_bytes))

    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            preexec_fn=limit,
        )
        peak = 0
        while True:
            peak = max(peak, _hwm_kib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout_s:
                os.kill(proc.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.05)
        wall = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Measured(
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            wall,
            peak or usage.ru_maxrss,
        )


def _hwm_kib(pid: int) -> int:
    """``VmHWM`` of a running process in KiB (0 when it is gone or not yet readable)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


if __name__ == "__main__":
    with hostile_server(sys.argv[2], port=int(sys.argv[1])):
        print(f"serving {sys.argv[2]} on 127.0.0.1:{sys.argv[1]}", flush=True)
        time.sleep(LIFETIME_S + 5)
