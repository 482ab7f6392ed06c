"""One threaded HTTP server class for the tests' in-process servers (hub, index, metrics, stream).

A client that closes its connection (a keep-alive socket dropped, a download abandoned once the
answer was known) makes ``socketserver`` print a traceback to ``sys.stderr``. In-process, that is
the stream ``capsys`` reads for the CLI's own messages, so a test asserting what the CLI printed
could fail on the server's noise. :class:`QuietServer` drops client disconnects and keeps every
other handler error in ``errors``, printed to the real standard error (pytest shows it with the
test's output) rather than the captured one.
"""

from __future__ import annotations

import socketserver
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import ThreadingHTTPServer


class QuietServer(ThreadingHTTPServer):
    """A :class:`ThreadingHTTPServer` with daemon threads whose handler errors never reach ``capsys``.

    ``errors``: the handler exceptions other than :class:`ConnectionError` (broken pipe, reset,
    aborted), in the order they happened.
    """

    daemon_threads = True

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.errors: list[BaseException] = []

    def handle_error(self, request: object, client_address: object) -> None:
        error = sys.exc_info()[1]
        if error is None or isinstance(error, ConnectionError):
            return
        self.errors.append(error)
        print(f"test server: error handling a request from {client_address}:", file=sys.__stderr__)
        traceback.print_exc(file=sys.__stderr__)


@contextmanager
def serving(server: socketserver.TCPServer) -> Iterator[str]:
    """Serve ``server`` (bound to 127.0.0.1) in a daemon thread; yields its base URL
    ``http://127.0.0.1:PORT``; shut down and closed on exit."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
