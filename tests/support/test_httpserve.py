"""The tests' HTTP server keeps a client's reset connection out of the captured standard error."""

from __future__ import annotations

import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler

import pytest
from tests.support.httpserve import QuietServer


class _Slow(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802
        time.sleep(0.2)  # the client resets the connection meanwhile
        for _ in range(50):
            self.wfile.write(b"x" * 65536)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def test_a_reset_connection_is_not_printed(capsys: pytest.CaptureFixture[str]) -> None:
    server = QuietServer(("127.0.0.1", 0), _Slow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = socket.create_connection(server.server_address[:2])
        client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # an RST, as a client abandoning a download sends
        time.sleep(0.6)
    finally:
        server.shutdown()
        server.server_close()
    assert server.errors == []
    assert capsys.readouterr() == ("", "")


def test_a_handler_bug_is_kept(capsys: pytest.CaptureFixture[str]) -> None:
    class Broken(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            raise ValueError("bug in the test server")

    server = QuietServer(("127.0.0.1", 0), Broken)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(server.server_address[:2]) as client:
            client.sendall(b"GET / HTTP/1.0\r\n\r\n")
            client.recv(1)
        time.sleep(0.2)
    finally:
        server.shutdown()
        server.server_close()
    assert [str(e) for e in server.errors] == ["bug in the test server"]
    assert capsys.readouterr().err == ""
