"""The OpenAI-compatible completions API: ``POST /v1/completions``, streamed, with usage.

Requests carry ``"stream": true`` and ``stream_options.include_usage`` (SGLang, vLLM,
``transformers serve``, TensorRT-LLM's ``trtllm-serve``). ``choices[0].finish_reason`` arrives on
the last content chunk; the token count is ``usage.completion_tokens`` of the final chunk. Without
usage the client counts chunks with text and says so (``token_count == "chunks"``): under
speculative decoding one chunk carries a whole verify step (field case B23). ``ignore_eos`` is sent
when the server accepts it (vLLM, SGLang); a server that rejects unknown fields answers HTTP 400/422
naming it (``transformers serve``: 422 "Unexpected fields in the request"), so this engine probes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envforge.bench.engines.base import Engine, MalformedChunk, count_field, json_type, list_field, mapping_field

if TYPE_CHECKING:
    from envforge.bench.client import RequestOptions, Stream

__all__ = ["OpenAIEngine"]


class OpenAIEngine(Engine):
    """Any OpenAI-compatible server; subclass it for an engine that adds routes or counters."""

    name = "openai"
    probes_ignore_eos = True
    # vLLM and SGLang behind api = "openai" keep their own /metrics; transformers serve has none
    metrics = "/metrics"
    gauges = {"running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
              "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
              "kv_cache_use": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage")}
    metrics_hint = ("an OpenAI-compatible server may have no Prometheus route (transformers serve has none); "
                    "vLLM's and SGLang's gauges are read where it has one")

    def request(self, prompt: str, opts: RequestOptions) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {"model": opts.model, "prompt": prompt, "max_tokens": opts.max_new_tokens,
                                "temperature": opts.temperature, "stream": True,
                                "stream_options": {"include_usage": True}}
        if opts.ignore_eos:
            body["ignore_eos"] = True
        return "/v1/completions", body

    def parse(self, stream: Stream, obj: Mapping[str, Any]) -> int:
        usage = mapping_field(obj, "usage")
        if usage.get("completion_tokens") is not None:
            stream.usage = count_field(usage["completion_tokens"], "usage.completion_tokens")
        choices = list_field(obj, "choices")
        if not choices:
            return stream.tokens
        first = choices[0]
        if not isinstance(first, Mapping):
            raise MalformedChunk(f"'choices[0]' is a JSON {json_type(first)}, not an object")
        if first.get("finish_reason") is not None:
            stream.finish = str(first["finish_reason"])
            if stream.finish == "abort":
                stream.abort = ("aborted by the server", None)
        text = first.get("text") or mapping_field(first, "delta").get("content")
        return stream.tokens + 1 if text else stream.tokens
