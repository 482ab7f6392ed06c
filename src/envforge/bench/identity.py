"""Which engine a running server is, from its own answers, so ``bench --url`` needs no ``--api``.

Two routes, asked in this order (each answer bounded by :func:`envforge.bench.transport.fetch`):

1. ``GET /v1/models``: vLLM's OpenAI-compatible server answers model cards with
   ``"owned_by": "vllm"`` (``vllm/entrypoints/openai/protocol.py``, ``ModelCard``), SGLang's with
   ``"owned_by": "sglang"`` (``sglang/srt/entrypoints/openai/protocol.py``, ``ModelCard``). The card
   ids are the served model names (what ``--model`` names).
2. ``GET /metrics``: Prometheus metric names ``vllm:*`` (vLLM, ``vllm/v1/metrics/loggers.py``) or
   ``sglang:*`` (SGLang with ``--enable-metrics``).

Anything else (no answer, another owner such as ``transformers serve``'s, no such metric) leaves the
engine unknown: the caller keeps its default and says so. Nothing here raises; a refused connection
(nothing listens at the address) is said in ``refused``, so the caller can stop before a benchmark of
failed requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from envforge.bench.client import Endpoint
from envforge.bench.transport import METRICS_MAX_BYTES, HTTPError, ReadLimit, error_text, fetch

__all__ = ["ServerIdentity", "identify"]

IDENTIFY_TIMEOUT_S = 10.0
_MODELS_MAX_BYTES = 1 << 20
_OWNERS = {"vllm": "vllm", "sglang": "sglang"}


@dataclass(frozen=True, slots=True)
class ServerIdentity:
    """``api``: the engine's registry name (``"vllm"``, ``"sglang"``; None: not recognised);
    ``models``: the ids ``/v1/models`` listed (empty when it did not answer); ``evidence``: what
    said so, for the user (``"GET /v1/models: owned_by 'vllm'"``), or why nothing did; ``refused``:
    both routes were refused at connect (ECONNREFUSED: nothing listens there)."""

    api: str | None
    models: tuple[str, ...]
    evidence: str
    refused: bool = False


def _get(endpoint: Endpoint, route: str, max_bytes: int, timeout_s: float) -> bytes | str:
    """The body of a 200 answer, or a short reason (str) why there is none."""
    try:
        status, body = fetch(
            endpoint.host,
            endpoint.port,
            "GET",
            endpoint.prefix + route,
            timeout_s=timeout_s,
            max_bytes=max_bytes,
            headers=endpoint.headers,
            scheme=endpoint.scheme,
            ca=endpoint.ca,
        )
    except ReadLimit as exc:
        return exc.message
    except (OSError, HTTPError) as exc:
        return error_text(exc)
    return body if status == 200 else f"HTTP {status}"


def _models(body: bytes) -> tuple[tuple[str, ...], set[str]]:
    """(model ids, owners) of a ``/v1/models`` answer; empty for anything else."""
    try:
        doc = json.loads(body)
    except (ValueError, RecursionError):
        return (), set()
    cards = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(cards, list):
        return (), set()
    cards = [c for c in cards if isinstance(c, dict)]
    ids = tuple(c["id"] for c in cards if isinstance(c.get("id"), str))
    return ids, {c["owned_by"] for c in cards if isinstance(c.get("owned_by"), str)}


def _metric_engine(text: str) -> str | None:
    """``vllm`` / ``sglang`` when a metric line (or its ``# HELP`` / ``# TYPE``) is named ``<engine>:*``."""
    for line in text.splitlines():
        parts = line.split()
        name = parts[2] if line.startswith("#") and len(parts) > 2 else parts[0] if parts else ""
        for prefix in _OWNERS:
            if name.startswith(prefix + ":"):
                return _OWNERS[prefix]
    return None


def identify(endpoint: Endpoint, *, timeout_s: float = IDENTIFY_TIMEOUT_S) -> ServerIdentity:
    """Ask the server at ``endpoint`` which engine it is (the module's two routes, in order).

    :returns: the identity; ``api`` None when neither route names a known engine.
    """
    answer = _get(endpoint, "/v1/models", _MODELS_MAX_BYTES, timeout_s)
    ids: tuple[str, ...] = ()
    why = [f"GET /v1/models: {answer}" if isinstance(answer, str) else ""]
    if not isinstance(answer, str):
        ids, owners = _models(answer)
        known = sorted(owners & set(_OWNERS))
        if len(known) == 1:
            return ServerIdentity(_OWNERS[known[0]], ids, f"GET /v1/models: owned_by '{known[0]}'")
        why = [f"GET /v1/models: owned_by {', '.join(map(repr, sorted(owners))) or 'missing'}"]
    metrics = _get(endpoint, "/metrics", METRICS_MAX_BYTES, timeout_s)
    if isinstance(metrics, str):
        why.append(f"GET /metrics: {metrics}")
    else:
        engine = _metric_engine(metrics.decode("utf-8", "replace"))
        if engine is not None:
            return ServerIdentity(engine, ids, f"GET /metrics: metric names '{engine}:*'")
        why.append("GET /metrics: no vllm:* or sglang:* metric")
    refused = all(isinstance(a, str) and a.startswith("ConnectionRefusedError") for a in (answer, metrics))
    return ServerIdentity(None, ids, "; ".join(w for w in why if w), refused)
