"""Which HTTP client should ``envforge bench`` stream with? Measured, not chosen by default.

A stand-in server (a separate process, asyncio, HTTP/1.1 keep-alive, chunked server-sent events in
the OpenAI completions shape) streams ``--tokens`` one-token chunks per request, one every
``--gap-ms``, each stamped with the server's ``time.monotonic()`` just before it is written. Each
client runs in a process of its own (``--client NAME``) and streams ``--requests`` requests with at
most ``--concurrency`` in flight (closed loop), parsing every chunk's JSON and taking
``time.perf_counter()`` when it has it. On Linux both clocks are ``CLOCK_MONOTONIC``, so receive
time minus the server's stamp is the **delivery lag** of that chunk: how long the client took to
see a chunk the server had already written (the loopback's own share is microseconds). That lag is
what a client adds to TTFT and ITL; its first-chunk part is what it adds to TTFT (connect and send
included on top). Also the client's CPU time (``resource.getrusage``) per 1000 chunks.

Clients: ``envforge`` (envforge's own :func:`envforge.bench.load.run_level`, whatever transport it
uses now), ``httpx-threads`` (one ``httpx2.Client`` pool shared by one thread per stream),
``httpx-async`` (``httpx2.AsyncClient`` on asyncio), ``requests-threads`` (a ``requests.Session``
per thread), ``aiohttp`` (one ``aiohttp.ClientSession`` on asyncio, reading as ``vllm bench serve``
does: ``iter_any`` split on blank lines; ``vllm/benchmarks/lib/endpoint_request_func.py``). A client
whose library is not installed is skipped, said so. Rounds alternate the clients.

Run: ``python benchmarks/bench_client_choice.py [--concurrency 1,32] [--gap-ms 2] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

CLIENTS = ("envforge", "httpx-threads", "httpx-async", "requests-threads", "aiohttp")
MODULE = {"httpx-threads": "httpx2", "httpx-async": "httpx2", "requests-threads": "requests", "aiohttp": "aiohttp"}

Chunks = list[tuple[float, float]]  # (client receive perf_counter, server monotonic stamp) per chunk


# ---------------------------------------------------------------- the stand-in server


def serve(port: int, tokens: int, gap_s: float) -> None:
    """Serve POST /v1/completions on 127.0.0.1:``port`` until killed (asyncio, keep-alive)."""

    def event(obj: dict[str, Any]) -> bytes:
        data = b"data: " + json.dumps(obj).encode() + b"\n\n"
        return b"%x\r\n%s\r\n" % (len(data), data)

    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        start = time.monotonic()
        for i in range(1, tokens + 1):
            due = start + (i - 1) * gap_s
            if (wait := due - time.monotonic()) > 0:
                await asyncio.sleep(wait)
            writer.write(
                event(
                    {
                        "choices": [
                            {
                                "index": 0,
                                "text": "x",
                                "stamp": time.monotonic(),
                                "finish_reason": "length" if i == tokens else None,
                            }
                        ]
                    }
                )
            )
            await writer.drain()
        writer.write(event({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": tokens}}))
        data = b"data: [DONE]\n\n"
        writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))
        await writer.drain()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                await reader.readexactly(length)
                await answer(writer)
                if b"connection: close" in head.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(connection, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# ---------------------------------------------------------------- the clients

BODY = {
    "model": "m",
    "prompt": "p",
    "max_tokens": 0,
    "temperature": 0.0,
    "stream": True,
    "stream_options": {"include_usage": True},
    "ignore_eos": True,
}


def _take(line: bytes, out: Chunks) -> None:
    if line.startswith(b"data:") and line[5:].strip() != b"[DONE]":
        obj = json.loads(line[5:])
        now = time.perf_counter()
        if obj["choices"]:
            out.append((now, obj["choices"][0]["stamp"]))


def envforge_client(url: str, n: int, conc: int, tokens: int) -> list[Chunks]:
    from envforge.bench.client import Endpoint, RequestOptions
    from envforge.bench.engines.openai import OpenAIEngine
    from envforge.bench.load import run_level

    streams: dict[int, Chunks] = {}  # per Stream object (threads or tasks alike)
    alive: list[Any] = []  # every Stream kept, so that no id is reused
    lock = threading.Lock()

    class Stamped(OpenAIEngine):
        def parse(self, stream: Any, obj: Any) -> int:
            now = time.perf_counter()
            if obj.get("choices"):
                with lock:
                    if id(stream) not in streams:
                        alive.append(stream)
                    chunks = streams.setdefault(id(stream), [])
                chunks.append((now, obj["choices"][0]["stamp"]))
            return super().parse(stream, obj)

    opts = RequestOptions(model="m", max_new_tokens=tokens)
    run = run_level(Endpoint.from_url(url), Stamped(), ["p"] * n, conc, opts)
    assert all(r.ok for r in run.results), next(r.error for r in run.results if not r.ok)
    return list(streams.values())


def threads_client(one: Callable[[], Chunks], n: int, conc: int) -> list[Chunks]:
    with ThreadPoolExecutor(conc) as pool:
        return list(pool.map(lambda _: one(), range(n)))


def httpx_threads(url: str, n: int, conc: int, tokens: int) -> list[Chunks]:
    import httpx2

    body = dict(BODY, max_tokens=tokens)
    with httpx2.Client(limits=httpx2.Limits(max_connections=conc), timeout=60) as client:

        def one() -> Chunks:
            out: Chunks = []
            with client.stream("POST", url + "/v1/completions", json=body) as resp:
                for line in resp.iter_lines():
                    _take(line.encode(), out)
            return out

        return threads_client(one, n, conc)


def requests_threads(url: str, n: int, conc: int, tokens: int) -> list[Chunks]:
    import requests

    body = dict(BODY, max_tokens=tokens)
    local = threading.local()

    def one() -> Chunks:
        session = getattr(local, "session", None) or requests.Session()
        local.session = session
        out: Chunks = []
        with session.post(url + "/v1/completions", json=body, stream=True, timeout=60) as resp:
            for line in resp.iter_lines():
                _take(line, out)
        return out

    return threads_client(one, n, conc)


async def _gather(one: Callable[[], Any], n: int, conc: int) -> list[Chunks]:
    sem = asyncio.Semaphore(conc)

    async def limited() -> Chunks:
        async with sem:
            return await one()

    return list(await asyncio.gather(*(limited() for _ in range(n))))


def httpx_async(url: str, n: int, conc: int, tokens: int) -> list[Chunks]:
    import httpx2

    body = dict(BODY, max_tokens=tokens)

    async def main() -> list[Chunks]:
        async with httpx2.AsyncClient(limits=httpx2.Limits(max_connections=conc), timeout=60) as client:

            async def one() -> Chunks:
                out: Chunks = []
                async with client.stream("POST", url + "/v1/completions", json=body) as resp:
                    async for line in resp.aiter_lines():
                        _take(line.encode(), out)
                return out

            return await _gather(one, n, conc)

    return asyncio.run(main())


def aiohttp_client(url: str, n: int, conc: int, tokens: int) -> list[Chunks]:
    import aiohttp

    body = dict(BODY, max_tokens=tokens)

    async def main() -> list[Chunks]:
        connector = aiohttp.TCPConnector(limit=conc, keepalive_timeout=60)
        async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=60)) as session:

            async def one() -> Chunks:
                out: Chunks = []
                async with session.post(url + "/v1/completions", json=body) as resp:
                    buf = b""
                    async for piece in resp.content.iter_any():
                        buf += piece
                        while b"\n\n" in buf:
                            message, buf = buf.split(b"\n\n", 1)
                            _take(message.strip(), out)
                return out

            return await _gather(one, n, conc)

    return asyncio.run(main())


RUN = {
    "envforge": envforge_client,
    "httpx-threads": httpx_threads,
    "httpx-async": httpx_async,
    "requests-threads": requests_threads,
    "aiohttp": aiohttp_client,
}


def client_main(name: str, url: str, n: int, conc: int, tokens: int) -> None:
    """In a process of its own: one warm-up wave, then the measured requests; JSON on stdout."""
    RUN[name](url, conc, conc, tokens)
    before = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    per = RUN[name](url, n, conc, tokens)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    assert all(len(c) == tokens for c in per), [len(c) for c in per]
    lags = [[(r - s) * 1000.0 for r, s in c] for c in per]
    print(
        json.dumps(
            {
                "first": [c[0] for c in lags],
                "all": [x for c in lags for x in c],
                "cpu_s": cpu,
                "wall_s": wall,
                "chunks": sum(len(c) for c in per),
            }
        )
    )


# ---------------------------------------------------------------- the driver


def available(name: str) -> bool:
    mod = MODULE.get(name)
    if mod is None:
        return True
    try:
        __import__(mod)
    except ImportError:
        return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", default="1,32")
    ap.add_argument("--requests-per-stream", type=int, default=4, help="requests = this x concurrency")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--gap-ms", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--json", help="write every round's figures here")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--client", help=argparse.SUPPRESS)
    ap.add_argument("--url", help=argparse.SUPPRESS)
    ap.add_argument("-n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("-c", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve is not None:
        return serve(a.serve, a.tokens, a.gap_ms / 1000.0)
    if a.client is not None:
        return client_main(a.client, a.url, a.n, a.c, a.tokens)

    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    me = os.path.abspath(__file__)
    server = subprocess.Popen(
        [sys.executable, me, "--serve", str(port), "--tokens", str(a.tokens), "--gap-ms", str(a.gap_ms)]
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.05)
        clients = [c for c in a.clients.split(",") if c]
        for c in clients:
            if not available(c):
                print(f"skipped {c}: {MODULE[c]} is not installed in {sys.executable}", file=sys.stderr)
        clients = [c for c in clients if available(c)]
        results: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for conc in (int(x) for x in a.concurrency.split(",")):
            for rnd in range(a.rounds):
                for c in clients:
                    out = subprocess.run(
                        [
                            sys.executable,
                            me,
                            "--client",
                            c,
                            "--url",
                            url,
                            "-n",
                            str(conc * a.requests_per_stream),
                            "-c",
                            str(conc),
                            "--tokens",
                            str(a.tokens),
                        ],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    results.setdefault(str(conc), {}).setdefault(c, []).append(json.loads(out.stdout))
                print(f"concurrency {conc}: round {rnd + 1} of {a.rounds} done", file=sys.stderr)
        load = os.getloadavg()[0]
    finally:
        server.terminate()
        server.wait()
    print(
        f"{a.tokens} chunks a request, one every {a.gap_ms:g} ms; {a.requests_per_stream} x concurrency requests; "
        f"{a.rounds} rounds; {os.cpu_count()} CPUs, load average {load:.1f} after"
    )
    print(
        "| concurrency | client | first-chunk lag p50 / p99 ms | chunk lag p50 / p99 / max ms | "
        "client CPU ms per 1000 chunks | tok/s |"
    )
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for conc, per in results.items():
        for c, runs in per.items():
            first = np.array([x for r in runs for x in r["first"]])
            every = np.array([x for r in runs for x in r["all"]])
            cpu = 1000.0 * sum(r["cpu_s"] for r in runs) / sum(r["chunks"] for r in runs) * 1000.0
            tps = float(np.median([r["chunks"] / r["wall_s"] for r in runs]))
            print(
                f"| {conc} | {c} | {np.percentile(first, 50):.2f} / {np.percentile(first, 99):.2f} | "
                f"{np.percentile(every, 50):.2f} / {np.percentile(every, 99):.2f} / {every.max():.1f} | "
                f"{cpu:.1f} | {tps:.0f} |"
            )
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "load_average": load, "results": results}, f)


if __name__ == "__main__":
    main()
