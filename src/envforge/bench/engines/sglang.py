"""SGLang's native API: ``POST /generate``, streamed, with ``meta_info`` in every chunk.

Every chunk carries ``meta_info``; ``meta_info["completion_tokens"]`` is the cumulative output
token count, ``meta_info["finish_reason"]`` is ``null`` until the last chunk, then
``{"type": "length" | "stop" | "abort", ...}``; an abort carries ``message`` and ``status_code``
and is streamed like any chunk, followed by ``data: [DONE]``, under HTTP 200 (sglang 0.5.9,
``srt/managers/tokenizer_manager.py``; field case B24). With speculative decoding the final chunk
carries ``meta_info["spec_verify_ct"]`` (verify forward passes; ``_calculate_spec_decoding_metrics``).
``sampling_params.ignore_eos`` keeps the output length fixed. Readiness: ``GET /health_generate``;
``POST /flush_cache`` empties the prefix cache. ``GET /metrics`` (with ``--enable-metrics``) has the
scheduler's gauges (``python/sglang/srt/metrics/collector.py``, ``SchedulerMetricsCollector``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envforge.bench.engines.base import Engine, count_field, mapping_field

if TYPE_CHECKING:
    from envforge.bench.client import RequestOptions, Stream

__all__ = ["SGLangEngine"]


class SGLangEngine(Engine):
    """SGLang's ``/generate`` (no model name: the server serves one)."""

    name = "sglang"
    health = "/health_generate"
    flush = "/flush_cache"
    needs_model = False
    metrics = "/metrics"
    gauges = {
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_use": ("sglang:token_usage",),
    }
    metrics_hint = "SGLang serves /metrics only when started with --enable-metrics"

    def request(self, prompt: str, opts: RequestOptions) -> tuple[str, dict[str, Any]]:
        params = {
            "max_new_tokens": opts.max_new_tokens,
            "temperature": opts.temperature,
            **({"ignore_eos": True} if opts.ignore_eos else {}),
        }
        return "/generate", {"text": prompt, "sampling_params": params, "stream": True}

    def parse(self, stream: Stream, obj: Mapping[str, Any]) -> int:
        meta = mapping_field(obj, "meta_info")
        if "spec_verify_ct" in meta:
            stream.verify = count_field(meta["spec_verify_ct"], "meta_info.spec_verify_ct")
        fin = meta.get("finish_reason")
        if fin is None:
            pass
        elif isinstance(fin, Mapping):
            stream.finish = str(fin.get("type"))
            if stream.finish == "abort":
                code = fin.get("status_code")
                stream.abort = (str(fin.get("message") or "no message"), code if isinstance(code, int) else None)
        else:
            stream.finish = str(fin)
        stream.usage = count_field(meta.get("completion_tokens", stream.tokens), "meta_info.completion_tokens")
        if meta.get("prompt_tokens") is not None:
            stream.prompt_tokens = count_field(meta["prompt_tokens"], "meta_info.prompt_tokens")
        return stream.usage
