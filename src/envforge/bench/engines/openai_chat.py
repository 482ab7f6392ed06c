"""The OpenAI-compatible chat completions API: ``POST /v1/chat/completions``, streamed, with usage.

The server applies its chat template to the messages (one user message: the prompt), as
``vllm bench serve --backend openai-chat`` sends them; the output tokens asked for are
``max_completion_tokens`` (vLLM's client, ``vllm/benchmarks/lib/endpoint_request_func.py``,
0.32.0; accepted by vLLM, SGLang and ``transformers serve``). Chunks carry ``choices[0].delta``:
every chunk with a choice is an arrival vLLM's client times, the first (``{"role": "assistant"}``,
no content) included; it and the finish chunk carry no token, a ``content`` (empty for a special
token) carries one. ``ignore_eos`` is probed as for completions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envforge.bench.engines.openai import OpenAIEngine

if TYPE_CHECKING:
    from envforge.bench.client import RequestOptions

__all__ = ["OpenAIChatEngine"]


class OpenAIChatEngine(OpenAIEngine):
    """Any OpenAI-compatible server's chat route (the server's chat template applied)."""

    name = "openai-chat"

    def request(self, prompt: str, opts: RequestOptions) -> tuple[str, dict[str, Any]]:
        _, body = super().request(prompt, opts)
        del body["prompt"]
        body["max_completion_tokens"] = body.pop("max_tokens")
        return "/v1/chat/completions", {
            "model": body.pop("model"),
            "messages": [{"role": "user", "content": prompt}],
            **body,
        }
