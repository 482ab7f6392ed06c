"""A local stand-in server for the client benchmarks: this script run again as a separate process.

A benchmark that times a client starts itself again with ``--serve PORT`` (so the server's work
does not share the client's interpreter), waits until the port takes connections, and stops the
server when done. Used by ``bench_bench.py`` (SGLang ``/generate`` chunks) and ``bench_send_lag.py``
(OpenAI ``/v1/completions`` chunks); each brings its own request handler.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """An HTTP/1.1 handler that logs nothing; a subclass writes ``do_POST``."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def read_body(self) -> bytes:
        """The request's body, ``Content-Length`` bytes of it (0 when the header is absent)."""
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def start_stream(self, *, close: bool = False) -> None:
        """Send the head of a 200 server-sent-events answer in chunked encoding (the body follows
        in chunks); ``close``: say ``Connection: close`` too."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        if close:
            self.send_header("Connection", "close")
        self.end_headers()


def serve_forever(
    port: int, handler: type[BaseHTTPRequestHandler], *, backlog: int = 5, daemon_threads: bool = False
) -> None:
    """Serve ``handler`` on 127.0.0.1:``port`` until killed, one thread a connection.

    ``backlog``: the listen queue (``request_queue_size``; 5 is the standard library's);
    ``daemon_threads``: whether connection threads are daemons. Errors of clients that close idle
    connections (the readiness probe) are not reported.
    """

    class Server(ThreadingHTTPServer):
        request_queue_size = backlog

        def handle_error(self, request: object, client_address: object) -> None:
            pass  # clients closing idle connections (the readiness probe) are not errors here

    Server.daemon_threads = daemon_threads
    Server(("127.0.0.1", port), handler).serve_forever()


@contextlib.contextmanager
def spawned(script: str, *, wait_s: float = 10.0) -> Iterator[str]:
    """Run ``python script --serve PORT`` on a free port; yield its ``http://127.0.0.1:PORT`` URL.

    Waits up to ``wait_s`` seconds for the port to take a connection (then yields anyway, as the
    benchmarks always did); terminates and reaps the server on exit.
    """
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, script, "--serve", str(port)])
    try:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait()
