"""Client overhead of ``envforge bench``: its streaming client against a bare urllib loop and a bare
aiohttp loop (the library bench streams with: what any aiohttp client must do).

The clients send the same sequential requests to the same local server (a separate process that
streams SGLang ``/generate`` chunks with no delay, so client cost dominates) and do the same work per
chunk (read the line, parse the JSON, take a timestamp); envforge sends them as a level of concurrency 1
(one session, as ``envforge bench`` does) and checks each request as it does in a run. Prints the
median time per request of each
over 15 runs, the ratio of those medians, and the median of the per-run ratios (each run times the
bare loop and envforge back to back, so a ratio of one run sees the same machine load on both
sides: on a shared machine it is the steadier figure); a ratio near 1 means the client adds nothing
measurable to what any HTTP client must do.

Run: ``python benchmarks/bench_bench.py``
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import urllib.request

from stub_server import QuietHandler, serve_forever, spawned

from envforge.bench.client import Endpoint, RequestOptions
from envforge.bench.load import run_level
from envforge.bench.engines import engine

RUNS = 15
REQUESTS = 40
TOKENS = 256
OPTS = RequestOptions(model="m", max_new_tokens=TOKENS, temperature=0.0)


def serve(port: int) -> None:
    """Stream ``TOKENS`` SGLang-format chunks per POST /generate (chunked encoding), then [DONE]."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.read_body()
            self.start_stream(close=True)  # one connection per request, said so
            for i in range(1, TOKENS + 1):
                finish = {"type": "length", "length": TOKENS} if i == TOKENS else None
                body = {
                    "text": "x" * i,
                    "output_ids": [1] * i,
                    "meta_info": {"id": "r", "finish_reason": finish, "completion_tokens": i},
                }
                event = b"data: " + json.dumps(body).encode() + b"\n\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b"data: [DONE]\n\n"), b"data: [DONE]\n\n"))
            self.wfile.write(b"0\r\n\r\n")
            self.close_connection = True

    serve_forever(port, Handler)


def bare(url: str) -> None:
    body = json.dumps({"text": "p", "sampling_params": {"max_new_tokens": TOKENS}, "stream": True}).encode()
    req = urllib.request.Request(url + "/generate", data=body, headers={"Content-Type": "application/json"})
    stamps = []
    with urllib.request.urlopen(req) as resp:
        for line in resp:
            if line.startswith(b"data:") and b"[DONE]" not in line:
                json.loads(line[5:])
                stamps.append(time.perf_counter())
    assert len(stamps) == TOKENS


def bare_loop(url: str) -> None:
    for _ in range(REQUESTS):
        bare(url)


def bare_aiohttp(url: str) -> None:
    """The same requests on one aiohttp session, lines split as bench splits them, no checks."""
    import asyncio

    import aiohttp

    body = json.dumps({"text": "p", "sampling_params": {"max_new_tokens": TOKENS}, "stream": True})

    async def main() -> None:
        async with aiohttp.ClientSession() as session:
            for _ in range(REQUESTS):
                stamps = []
                async with session.post(
                    url + "/generate", data=body, headers={"Content-Type": "application/json"}
                ) as resp:
                    buf = b""
                    while data := await resp.content.readany():
                        buf += data
                        *lines, buf = buf.split(b"\n")
                        for line in lines:
                            if line.startswith(b"data:") and b"[DONE]" not in line:
                                json.loads(line[5:])
                                stamps.append(time.perf_counter())
                assert len(stamps) == TOKENS

    asyncio.run(main())


def envforge_client(url: str) -> None:
    """``REQUESTS`` requests one after the other, as a level of concurrency 1 sends them."""
    run = run_level(Endpoint.from_url(url), engine("sglang"), ["p"] * REQUESTS, 1, OPTS)
    assert all(r.ok and r.output_tokens == TOKENS for r in run.results), run.results[0].error


def timed(fn: object, url: str) -> float:
    start = time.perf_counter()
    fn(url)  # type: ignore[operator]
    return (time.perf_counter() - start) / REQUESTS


def main() -> None:
    with spawned(__file__) as url:
        bare(url), bare_aiohttp(url), envforge_client(url)  # warm-up
        b, a, e = [], [], []
        for _ in range(RUNS):
            b.append(timed(bare_loop, url))
            a.append(timed(bare_aiohttp, url))
            e.append(timed(envforge_client, url))
        mb, ma, me = statistics.median(b), statistics.median(a), statistics.median(e)
        print(f"bare urllib loop:  {mb * 1000:.2f} ms/request ({TOKENS} chunks; median of {RUNS} runs x {REQUESTS})")
        print(f"bare aiohttp loop: {ma * 1000:.2f} ms/request")
        print(f"envforge client:   {me * 1000:.2f} ms/request")
        for name, ref, m in (("bare urllib", b, mb), ("bare aiohttp", a, ma)):
            print(
                f"ratio envforge / {name}: {me / m:.2f} (of the medians); "
                f"{statistics.median(y / x for x, y in zip(ref, e)):.2f} (median of the per-run ratios)"
            )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    else:
        main()
