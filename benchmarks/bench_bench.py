"""Client overhead of ``envforge bench``: its streaming client against a bare urllib loop.

Both clients send the same sequential requests to the same local server (a separate process that
streams SGLang ``/generate`` chunks with no delay, so client cost dominates) and do the same work per
chunk (read the line, parse the JSON, take a timestamp). Prints the median time per request of each
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

from envforge.bench.client import Endpoint, RequestOptions, send_request
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
            self.start_stream()
            for i in range(1, TOKENS + 1):
                finish = {"type": "length", "length": TOKENS} if i == TOKENS else None
                body = {"text": "x" * i, "output_ids": [1] * i,
                        "meta_info": {"id": "r", "finish_reason": finish, "completion_tokens": i}}
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


def envforge_client(url: str) -> None:
    r = send_request(Endpoint.from_url(url), engine("sglang"), "p", OPTS)
    assert r.ok and r.output_tokens == TOKENS, r.error


def timed(fn: object, url: str) -> float:
    start = time.perf_counter()
    for _ in range(REQUESTS):
        fn(url)  # type: ignore[operator]
    return (time.perf_counter() - start) / REQUESTS


def main() -> None:
    with spawned(__file__) as url:
        bare(url), envforge_client(url)  # warm-up
        b, e = [], []
        for _ in range(RUNS):
            b.append(timed(bare, url))
            e.append(timed(envforge_client, url))
        mb, me = statistics.median(b), statistics.median(e)
        print(f"bare urllib loop:  {mb * 1000:.2f} ms/request ({TOKENS} chunks; median of {RUNS} runs x {REQUESTS})")
        print(f"envforge client:   {me * 1000:.2f} ms/request")
        print(f"ratio envforge / bare: {me / mb:.2f} (of the medians); "
              f"{statistics.median(y / x for x, y in zip(b, e)):.2f} (median of the per-run ratios)")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    else:
        main()
