"""The OpenAI-compatible chat completions API: ``POST /v1/chat/completions``, streamed, with usage.

The server applies its chat template to the messages (one user message: the prompt), as
``vllm bench serve --backend openai-chat`` sends them; a turn of a multi-turn conversation is sent
after the conversation so far (``RequestOptions.history``: user and assistant messages alternating),
as SGLang's ``bench_serving.py`` (0.5.9, ``wrap_multi_turn_request_func``) sends it; the output tokens asked for are
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

_ROLES = ("user", "assistant")


class OpenAIChatEngine(OpenAIEngine):
    """Any OpenAI-compatible server's chat route (the server's chat template applied)."""

    name = "openai-chat"
    conversations = True

    def request(self, prompt: str, opts: RequestOptions) -> tuple[str, dict[str, Any]]:
        _, body = super().request(prompt, opts)
        del body["prompt"]
        body["max_completion_tokens"] = body.pop("max_tokens")
        history = [{"role": _ROLES[i % 2], "content": text} for i, text in enumerate(opts.history)]
        return "/v1/chat/completions", {
            "model": body.pop("model"),
            "messages": [*history, {"role": "user", "content": prompt}],
            **body,
        }
