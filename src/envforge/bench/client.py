"""The benchmark client: streaming requests over HTTP, timed per token chunk.

Two APIs, both streamed as server-sent events (``data: <json>`` lines, optionally ending with
``data: [DONE]``):

* ``sglang``: SGLang's native ``POST /generate`` with ``{"text", "sampling_params", "stream": true}``.
  Every chunk carries ``meta_info``; ``meta_info["completion_tokens"]`` is the cumulative output
  token count and, when the server runs speculative decoding, the final chunk carries
  ``meta_info["spec_verify_ct"]`` (verify forward passes) and ``spec_accept_length`` =
  completion_tokens / spec_verify_ct (sglang ``srt/managers/tokenizer_manager.py``,
  ``_calculate_spec_decoding_metrics``; the stream itself is written by
  ``srt/entrypoints/http_server.py``, ``generate_request``). ``sampling_params.ignore_eos`` keeps the
  output length fixed.
* ``openai``: the OpenAI-compatible ``POST /v1/completions`` with ``"stream": true`` (SGLang, vLLM,
  ``transformers serve``). Each chunk with non-empty ``choices[0].text`` counts as one token; a final
  ``usage.completion_tokens``, when the server sends one, gives the exact total.

Per request: time to first token (TTFT), inter-token latency (decode time after the first chunk
divided by the tokens that followed it), output tokens, end-to-end time, verify steps. HTTP is the
standard library's :mod:`http.client`; one connection per request, one thread per concurrent stream.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "Endpoint",
    "LevelRun",
    "RequestResult",
    "TokenEvent",
    "get_status",
    "request_body",
    "run_level",
    "send_request",
    "timeline_of",
]

Clock = Callable[[], float]
REQUEST_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a server answers: ``host``, ``port`` and a path ``prefix`` (``""`` for the root)."""

    host: str
    port: int
    prefix: str = ""

    @classmethod
    def from_url(cls, url: str) -> Endpoint:
        """Parse ``http://host:port[/prefix]`` (only plain HTTP: the server is local or tunnelled)."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"'{url}' is not an http://HOST:PORT URL")
        return cls(parts.hostname, parts.port or 80, parts.path.rstrip("/"))

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{self.prefix}"

    def connection(self, timeout_s: float) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout_s)


@dataclass(frozen=True, slots=True)
class TokenEvent:
    """One streamed chunk: seconds since the request was sent, and the cumulative token count."""

    t_s: float
    tokens: int


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One request. Times in seconds; ``itl_s`` per token after the first chunk."""

    ok: bool
    output_tokens: int
    e2e_s: float
    ttft_s: float | None = None
    itl_s: float | None = None
    decode_s: float | None = None
    verify_steps: int | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LevelRun:
    """All requests of one repeat at one concurrency level; ``wall_s`` from first send to last end."""

    concurrency: int
    results: tuple[RequestResult, ...]
    wall_s: float


def get_status(url: str, timeout_s: float = 5.0) -> int | str:
    """GET ``url``: the HTTP status, or the connection error as text (``"connection refused"``)."""
    ep = Endpoint.from_url(url)
    conn = ep.connection(timeout_s)
    try:
        conn.request("GET", urlsplit(url).path or "/")
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except ConnectionRefusedError:
        return "connection refused"
    except (OSError, http.client.HTTPException) as exc:
        return f"{type(exc).__name__}: {exc}".rstrip(": ")
    finally:
        conn.close()


def request_body(api: str, prompt: str, *, model: str, max_new_tokens: int, temperature: float) -> tuple[str, dict[str, Any]]:
    """The path and JSON body of one streamed request for ``api`` (``"sglang"``, ``"openai"`` or ``"vllm"``)."""
    if api == "sglang":
        params = {"max_new_tokens": max_new_tokens, "temperature": temperature, "ignore_eos": True}
        return "/generate", {"text": prompt, "sampling_params": params, "stream": True}
    body: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_new_tokens, "temperature": temperature,
                            "stream": True, "stream_options": {"include_usage": True}}
    if api == "vllm":  # vLLM's extra sampling parameter: exactly max_tokens tokens (vllm/sampling_params.py)
        body["ignore_eos"] = True
    return "/v1/completions", body


def _sse_payloads(lines: Iterator[bytes]) -> Iterator[str]:
    for raw in lines:
        line = raw.decode("utf-8").strip()
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        yield payload


def _chunk_error(obj: Mapping[str, Any]) -> str | None:
    err = obj.get("error")
    if err is None:
        return None
    return str(err.get("message", err)) if isinstance(err, Mapping) else str(err)


def timeline_of(api: str, chunks: Sequence[tuple[float, Mapping[str, Any]]]) -> tuple[list[TokenEvent], int, int | None]:
    """Token timeline from parsed SSE chunks ``(seconds since send, json object)``.

    :returns: events (one per chunk that added tokens), total output tokens, verify steps or None.
    :raises ValueError: a chunk carries an ``error`` object.
    """
    events: list[TokenEvent] = []
    tokens, verify, reported = 0, None, None
    for t, obj in chunks:
        if (err := _chunk_error(obj)) is not None:
            raise ValueError(err)
        if api == "sglang":
            meta = obj.get("meta_info") or {}
            new = int(meta.get("completion_tokens", tokens))
            if "spec_verify_ct" in meta:
                verify = int(meta["spec_verify_ct"])
        else:
            first = (obj.get("choices") or [{}])[0]
            text = first.get("text") or (first.get("delta") or {}).get("content")
            new = tokens + 1 if text else tokens
            if (obj.get("usage") or {}).get("completion_tokens") is not None:
                reported = int(obj["usage"]["completion_tokens"])
        if new > tokens:
            events.append(TokenEvent(t, new))
            tokens = new
    return events, reported if reported is not None else tokens, verify


def _result(events: list[TokenEvent], tokens: int, verify: int | None, e2e: float) -> RequestResult:
    if not events:
        return RequestResult(ok=True, output_tokens=tokens, e2e_s=e2e, verify_steps=verify)
    first, last = events[0], events[-1]
    decode = last.t_s - first.t_s
    after_first = tokens - first.tokens
    itl = decode / after_first if after_first > 0 else None
    return RequestResult(ok=True, output_tokens=tokens, e2e_s=e2e, ttft_s=first.t_s, itl_s=itl,
                         decode_s=decode, verify_steps=verify)


def send_request(endpoint: Endpoint, api: str, prompt: str, *, model: str, max_new_tokens: int,
                 temperature: float, timeout_s: float = REQUEST_TIMEOUT_S, clock: Clock = time.perf_counter) -> RequestResult:
    """Send one streamed request and time its chunks. Never raises for a failed request: the
    returned :class:`RequestResult` has ``ok=False`` and ``error`` set (HTTP status and body start,
    connection error, or the server's ``error`` chunk)."""
    path, body = request_body(api, prompt, model=model, max_new_tokens=max_new_tokens, temperature=temperature)
    conn = endpoint.connection(timeout_s)
    t0 = clock()
    try:
        conn.request("POST", endpoint.prefix + path, body=json.dumps(body),
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            text = resp.read(300).decode("utf-8", "replace").strip()
            return RequestResult(ok=False, output_tokens=0, e2e_s=clock() - t0,
                                 error=f"HTTP {resp.status} from {path}: {text}")
        chunks = [(clock() - t0, json.loads(p)) for p in _sse_payloads(iter(resp.readline, b""))]
        e2e = clock() - t0
        events, tokens, verify = timeline_of(api, chunks)
        return _result(events, tokens, verify, e2e)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return RequestResult(ok=False, output_tokens=0, e2e_s=clock() - t0,
                             error=f"{type(exc).__name__}: {exc}")
    finally:
        conn.close()


def run_level(endpoint: Endpoint, api: str, prompts: Sequence[str], concurrency: int, *, model: str,
              max_new_tokens: int, temperature: float, timeout_s: float = REQUEST_TIMEOUT_S,
              clock: Clock = time.perf_counter) -> LevelRun:
    """Send ``prompts`` with at most ``concurrency`` requests in flight; results in prompt order."""
    def one(p: str) -> tuple[float, RequestResult, float]:
        start = clock()
        r = send_request(endpoint, api, p, model=model, max_new_tokens=max_new_tokens,
                         temperature=temperature, timeout_s=timeout_s, clock=clock)
        return start, r, clock()

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        done = list(pool.map(one, prompts))
    wall = max(d[2] for d in done) - min(d[0] for d in done) if done else 0.0
    return LevelRun(concurrency, tuple(d[1] for d in done), wall)
