"""envforge bench --url and vLLM's own client, `vllm bench serve` (vllm.benchmarks.serve.main: what
`vllm bench serve` runs, vllm/entrypoints/cli/benchmark/serve.py), taking turns on one running server:
for each concurrency C and round r, envforge first (a subprocess), then vLLM (in this process), A B A B.

Both send the same N measured requests at concurrency C: PROMPTS_DIR/cC.jsonl holds exactly the prompts
envforge's --url run draws for them (prompts.py: positions C .. C+N-1 of its seed-0 order, after its C
warm-ups), given to vLLM's `custom` dataset with --disable-shuffle. Both warm up with C requests at
concurrency C (vLLM: --num-warmups C, its ready-check request off), 128 output tokens (MAX_NEW) with
ignore_eos, temperature 0, completions API, no chat template. Run with the environment's python (vllm).

Usage: python vbench.py URL MODEL_DIR SERVED NAME OUTDIR CONCS PROMPTS_DIR MAX_NEW ROUNDS SPECULATIVE(0|1) EF_CMD...
Writes OUTDIR/ef-NAME-cC-rR.json (+ .txt) and OUTDIR/vb-NAME-cC-rR.json (vLLM's --save-result) per run and
prints one "EF ..." / "VB ..." line per run.
"""

import json
import os
import subprocess
import sys
import time
import urllib.request

url, model_dir, served, name, outdir, concs, prompts_dir, max_new, rounds, spec = sys.argv[1:11]
ef_cmd = sys.argv[11:]
KEYS = [
    "completed",
    "failed",
    "total_output_tokens",
    "output_throughput",
    "median_ttft_ms",
    "median_tpot_ms",
    "median_itl_ms",
    "spec_decode_acceptance_length",
    "duration",
]


def envforge(c: int, n: int, r: int) -> None:
    out = f"{outdir}/ef-{name}-c{c}-r{r}"
    argv = [
        *ef_cmd,
        "bench",
        "--url",
        url,
        "--api",
        "vllm",
        "--model",
        served,
        "--name",
        name,
        *(["--speculative"] if spec == "1" else []),
        "--concurrency",
        str(c),
        "--repeats",
        "1",
        "--requests",
        str(n),
        "--warmup",
        str(c),
        "--max-new-tokens",
        max_new,
        "--output",
        f"{out}.json",
        "--no-plot",
    ]
    t = time.time()
    with open(f"{out}.txt", "w") as fh:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        rc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, env=env).returncode
    figures = {}
    try:
        lv = json.load(open(f"{out}.json"))["data"]["servers"][0]["levels"][0]
        lat = lv.get("latency") or {}
        figures = {
            "tok_s": (lv.get("tok_s") or {}).get("median"),
            "ttft_ms": (lat.get("ttft_ms") or {}).get("median"),
            "tpot_ms": (lat.get("tpot_ms") or {}).get("median"),
            "itl_ms": (lat.get("itl_ms") or {}).get("median"),
            "accept": lv.get("accept_length"),
        }
    except (OSError, ValueError, KeyError, IndexError) as exc:
        figures = {"error": repr(exc)}
    print("EF", name, c, r, f"rc={rc}", f"{time.time() - t:.1f}s", json.dumps(figures), flush=True)


def vllm(c: int, n: int, r: int) -> None:
    from vllm.benchmarks.serve import add_cli_args, main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    p = FlexibleArgumentParser()
    add_cli_args(p)
    args = p.parse_args(
        [
            "--backend",
            "openai",
            "--base-url",
            url,
            "--endpoint",
            "/v1/completions",
            "--model",
            model_dir,
            "--served-model-name",
            served,
            "--tokenizer",
            model_dir,
            "--dataset-name",
            "custom",
            "--dataset-path",
            f"{prompts_dir}/c{c}.jsonl",
            "--disable-shuffle",
            "--custom-output-len",
            max_new,
            "--skip-chat-template",
            "--ignore-eos",
            "--temperature",
            "0",
            "--num-prompts",
            str(n),
            "--max-concurrency",
            str(c),
            "--request-rate",
            "inf",
            "--num-warmups",
            str(c),
            "--ready-check-timeout-sec",
            "0",
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--metric-percentiles",
            "50",
            "--save-result",
            "--result-dir",
            outdir,
            "--result-filename",
            f"vb-{name}-c{c}-r{r}.json",
            "--request-id-prefix",
            f"vb-{name}-c{c}-r{r}-",
            "--disable-tqdm",
            "--seed",
            "0",
        ]
    )
    t = time.time()
    try:
        res = main(args)
        print("VB", name, c, r, f"{time.time() - t:.1f}s", json.dumps({k: res.get(k) for k in KEYS}), flush=True)
    except Exception as exc:  # noqa: BLE001 - one failed run must not cost the other levels
        print("VB", name, c, r, "FAILED", repr(exc)[:300], flush=True)


for c in [int(x) for x in concs.split(",")]:
    with open(f"{prompts_dir}/c{c}.jsonl") as fh:
        n = sum(1 for line in fh if line.strip())
    for r in range(1, int(rounds) + 1):
        envforge(c, n, r)
        vllm(c, n, r)
        urllib.request.urlopen(url + "/health", timeout=10).read()
