"""vLLM: the OpenAI-compatible API plus its Prometheus counters around each repeat.

Requests are :class:`~envforge.bench.engines.openai.OpenAIEngine`'s; vLLM accepts ``ignore_eos``
(``vllm/sampling_params.py``), so there is no probe. Around each measured repeat ``GET /metrics`` is
read and the deltas of the engine and speculative-decoding counters judged
(:func:`envforge.bench.metrics.check_window`): acceptance length, decode-step time, break-even.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envforge.bench.engines.openai import OpenAIEngine

if TYPE_CHECKING:
    from envforge.bench.client import Endpoint
    from envforge.bench.metrics import EngineCounters, EngineWindow

__all__ = ["VLLMEngine"]


class VLLMEngine(OpenAIEngine):
    """vLLM's ``/v1/completions`` with ``ignore_eos`` and the counters of ``GET /metrics``."""

    name = "vllm"
    probes_ignore_eos = False
    has_counters = True
    metrics = "/metrics"
    gauges = {
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        # renamed in vLLM 0.9 (vllm/v1/metrics/loggers.py: "Deprecated in 0.9 - Renamed as ...")
        "kv_cache_use": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "drafts": ("vllm:spec_decode_num_drafts_total",),
        "accepted": ("vllm:spec_decode_num_accepted_tokens_total",),
    }
    metrics_hint = "vLLM serves /metrics unless started with --disable-log-stats"

    def read_counters(self, endpoint: Endpoint, *, server: str) -> EngineCounters:
        from envforge.bench.metrics import scrape  # lazy: prometheus_client, off the CLI start-up path

        return scrape(endpoint, server=server)

    def window(
        self,
        server: str,
        speculative: bool,
        before: EngineCounters,
        after: EngineCounters,
        *,
        output_tokens: int,
        requests: int,
        source: str,
        where: str,
    ) -> tuple[EngineWindow, list[str]]:
        from envforge.bench.metrics import check_window  # lazy: prometheus_client, off the CLI start-up path

        return check_window(
            server,
            speculative,
            before,
            after,
            output_tokens=output_tokens,
            requests=requests,
            source=source,
            where=where,
        )
