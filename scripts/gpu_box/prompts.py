"""The measured prompts of one `envforge bench --url --api vllm --concurrency C --repeats 1 --requests N
--warmup C` run, in the order envforge sends them, as a JSON-lines file vLLM's `custom` dataset reads
(with --disable-shuffle): so `vllm bench serve` sends exactly the prompts envforge measured.

envforge's run draws positions 0 .. C-1 of its prompt order for the warm-up (C requests at concurrency C)
and C .. C+N-1 for the measured repeat (envforge.bench.run: warm_level, then one repeat; --api vllm sends
no ignore_eos probe), from the shipped prompt set in its seed-0 order (SmokeConfig.draw).

Usage (the tool venv's python: envforge importable): python prompts.py OUTDIR CONCS PER_STREAM MIN
  -> OUTDIR/cC.jsonl for each C of CONCS (1,4,16,32), N = max(PER_STREAM x C, MIN) lines {"prompt": ...}
"""

import json
import sys
from pathlib import Path

from envforge.bench.config import url_config

out, concs, per_stream, least = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
cfg = url_config(api="vllm", model="tiny")
out.mkdir(parents=True, exist_ok=True)
for c in (int(x) for x in concs.split(",")):
    n = max(per_stream * c, least)
    texts = cfg.draw(c, n)
    (out / f"c{c}.jsonl").write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts))
    print(f"c{c}: {n} prompts (envforge positions {c}..{c + n - 1}), {len(set(texts))} distinct")
