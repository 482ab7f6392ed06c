"""The OpenAI-compatible completions API: ``POST /v1/completions``, streamed, with usage.

Requests carry ``"stream": true`` and ``stream_options.include_usage`` (SGLang, vLLM,
``transformers serve``, TensorRT-LLM's ``trtllm-serve``). ``choices[0].finish_reason`` arrives on
the last content chunk; the token count is ``usage.completion_tokens`` of the final chunk. Every
chunk with a choice is an arrival (TTFT, ITL), its text empty (a special token) or not, as vLLM's
client times them; a finish chunk without text carries no token. Without usage the client counts
the chunks that carry one and says so
(``token_count == "chunks"``): under speculative decoding one chunk carries a whole verify step
(field case B23). ``ignore_eos`` is sent
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
    gauges = {
        "running": ("vllm:num_requests_running", "sglang:num_running_reqs"),
        "waiting": ("vllm:num_requests_waiting", "sglang:num_queue_reqs"),
        "kv_cache_use": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"),
    }
    metrics_hint = (
        "an OpenAI-compatible server may have no Prometheus route (transformers serve has none); "
        "vLLM's and SGLang's gauges are read where it has one"
    )

    def request(self, prompt: str, opts: RequestOptions) -> tuple[str, dict[str, Any]]:
        body: dict[str, Any] = {
            "model": opts.model,
            "prompt": prompt,
            "max_tokens": opts.max_new_tokens,
            "temperature": opts.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if opts.ignore_eos:
            body["ignore_eos"] = True
        return "/v1/completions", body

    def parse(self, stream: Stream, obj: Mapping[str, Any]) -> int:
        usage = mapping_field(obj, "usage")
        if usage.get("completion_tokens") is not None:
            stream.usage = count_field(usage["completion_tokens"], "usage.completion_tokens")
        if usage.get("prompt_tokens") is not None:
            stream.prompt_tokens = count_field(usage["prompt_tokens"], "usage.prompt_tokens")
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
        # every chunk with a choice is an arrival vLLM's client times (TTFT, ITL), its text empty or
        # not (vllm/benchmarks/lib/endpoint_request_func.py, 0.32.0: "Note that text could be empty
        # here e.g. for special tokens"); one with no text that ends the stream (SGLang's finish
        # chunk) carries no token
        finishing = first.get("finish_reason") is not None
        if "delta" in first:  # chat: a chunk without content (the role, the finish) carries no token
            content = mapping_field(first, "delta").get("content")
            token = bool(content) or (content == "" and not finishing)
        else:
            content = first.get("text")
            token = bool(content) or not finishing
        if stream.text is not None and isinstance(content, str):
            stream.text.append(content)
        if token:
            return stream.tokens + 1  # its text, empty for a special token
        stream.arrival = True
        return stream.tokens
