"""vLLM's own open-loop client, timed: run by a vLLM environment's interpreter for bench_send_lag.py.

Sends ``N`` requests at ``RATE`` requests/s (burstiness 1, Poisson, seed ``SEED``) to an
OpenAI-compatible ``/v1/completions`` at ``URL`` exactly as ``vllm bench serve`` does: its
``get_request`` schedule (``vllm/benchmarks/serve.py``), its ``async_request_openai_completions``
(``vllm/benchmarks/lib/endpoint_request_func.py``), one ``asyncio.create_task`` per request on an
``aiohttp`` session with an unlimited connector (as ``benchmark()`` builds it without
``--max-concurrency``), after ``freeze_gc_heap()`` as ``vllm bench serve`` calls it. Prints JSON: each request's actual send time (``start_time``, perf_counter
seconds) in order, and how many succeeded.

Run: ``<vllm venv>/bin/python benchmarks/send_lag_vllm.py URL RATE N SEED``
"""

from __future__ import annotations

import asyncio
import json
import sys

import aiohttp
import numpy as np
from vllm.benchmarks.datasets import SampleRequest
from vllm.benchmarks.lib.endpoint_request_func import RequestFuncInput, async_request_openai_completions
from vllm.benchmarks.serve import get_request
from vllm.utils.gc_utils import freeze_gc_heap


async def main(url: str, rate: float, n: int, seed: int) -> None:
    freeze_gc_heap()  # as vllm bench serve's main does before benchmark(): no GC pauses over the static heap
    np.random.seed(seed)  # what vllm bench serve does with --seed before get_request draws its gaps
    requests = [SampleRequest(prompt=f"p{i}", prompt_len=1, expected_output_len=8) for i in range(n)]
    connector = aiohttp.TCPConnector(
        limit=0,
        limit_per_host=0,
        ttl_dns_cache=300,
        use_dns_cache=True,
        keepalive_timeout=60,
        enable_cleanup_closed=True,
        force_close=False,
    )
    async with aiohttp.ClientSession(
        connector=connector, trust_env=True, timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)
    ) as session:
        tasks = []
        async for request, _ in get_request(requests, rate, 1.0):
            inp = RequestFuncInput(
                prompt=request.prompt,
                api_url=url + "/v1/completions",
                prompt_len=1,
                output_len=8,
                model="m",
                ignore_eos=True,
            )
            tasks.append(asyncio.create_task(async_request_openai_completions(inp, session)))
        outputs = await asyncio.gather(*tasks)
    print(json.dumps({"start": [o.start_time for o in outputs], "ok": sum(o.success for o in outputs)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
