"""vLLM's own client, `vllm bench serve` (vllm.benchmarks.serve.main: what `vllm bench serve` runs,
vllm/entrypoints/cli/benchmark/serve.py), over several concurrency levels in one process. Same prompts
as envforge bench: its shipped smoke.jsonl through the `custom` dataset, no chat template, ignore_eos,
temperature 0; 6 x C measured requests per level (envforge's 3 repeats of 2 x C) after 2 warm-ups.
Copied from the measured H200 recipe of 2026-12-01; run by scripts/gpu_box.sh with the environment's python.

Usage: python vbench.py URL MODEL_DIR SERVED_NAME NAME OUTDIR CONCS PROMPTS_JSONL MAX_NEW
Writes OUTDIR/vb-NAME.json (one summary per level) and prints one "VB name c {...}" line per level.
"""
import json
import sys
import time
import urllib.request

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

url, model_dir, served, name, outdir, concs, prompts, max_new = sys.argv[1:9]
KEYS = ["completed", "failed", "total_output_tokens", "output_throughput", "median_ttft_ms", "median_tpot_ms",
        "median_itl_ms", "spec_decode_acceptance_length", "duration"]
summary = []
for c in [int(x) for x in concs.split(",")]:
    p = FlexibleArgumentParser()
    add_cli_args(p)
    args = p.parse_args([
        "--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", model_dir, "--served-model-name", served, "--tokenizer", model_dir,
        "--dataset-name", "custom", "--dataset-path", prompts, "--custom-output-len", max_new,
        "--skip-chat-template", "--ignore-eos", "--temperature", "0",
        "--num-prompts", str(6 * c), "--max-concurrency", str(c), "--request-rate", "inf",
        "--num-warmups", "2", "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50",
        "--save-result", "--result-dir", outdir, "--result-filename", f"vb-{name}-c{c}.json",
        "--request-id-prefix", f"vb-{name}-c{c}-", "--disable-tqdm", "--seed", "0"])
    t = time.time()
    r = main(args)
    keep = {k: v for k, v in r.items() if not isinstance(v, list)}
    keep.update(concurrency=c, wall_s=round(time.time() - t, 2))
    summary.append(keep)
    print("VB", name, c, json.dumps({k: keep.get(k) for k in KEYS}), flush=True)
    urllib.request.urlopen(url + "/health", timeout=10).read()
with open(f"{outdir}/vb-{name}.json", "w") as fh:
    json.dump(summary, fh, indent=1)
