"""envforge bench next to vLLM's own `vllm bench serve`, per server (mode) and concurrency: markdown tables.

Usage: python table.py RESULTS_DIR   (stdlib only; run on the device or here, on what came back)

Reads, in RESULTS_DIR, either the interleaved runs of scripts/gpu_box/vbench.py, one level each,
    ef-MODE-cC-rR.json  envforge bench --url report (schema envforge.bench/3)
    vb-MODE-cC-rR.json  vLLM's --save-result of the run after it (same server, prompts, request count)
or the older layout of one run per tool and server (docs/gpu/vllm-h200 of 2026-12-02),
    ef-MODE.json (every level, schema envforge.bench/2 or /3) and vb-MODE.json (vbench's list of summaries).

Names are vLLM's (vllm/benchmarks/serve.py): TTFT, TPOT (per request: (latency - TTFT) / (tokens - 1)) and
ITL (the gaps between chunks, pooled over requests) as medians in ms; tok/s is output tokens over the
measured wall time. envforge's schema 3 carries vLLM's per-request distributions (level "latency");
schema 2 had only per-repeat medians and called the per-token figure "ITL": that is TPOT here, and its
ITL is unknown. For one running server the two tools must agree exactly on completed requests and
output tokens; the medians are compared within 10 % (tok/s, TTFT, TPOT, ITL). With several A B pairs a
tool's figure is the median over its runs, and the second table lists every pair.
"""

import json
import re
import statistics
import sys
from pathlib import Path

METRICS = ("tok_s", "ttft", "tpot", "itl")
LABEL = {"tok_s": "tok/s", "ttft": "TTFT", "tpot": "TPOT", "itl": "ITL"}
TOLERANCE = 0.10
RUN = re.compile(r"^(?P<tool>ef|vb)-(?P<mode>.+)-c(?P<c>\d+)-r(?P<r>\d+)\.json$")


def _median(d):
    return d.get("median") if isinstance(d, dict) else None


def envforge_levels(data):
    """concurrency -> figures of every level of one envforge report (``data`` of the envelope)."""
    schema2 = data.get("schema") == "envforge.bench/2"
    out = {}
    for server in data["data"]["servers"]:
        for lv in server["levels"]:
            reps = lv.get("repeats") or []
            lat = lv.get("latency") or {}
            out[lv["concurrency"]] = {
                "completed": sum(r["requests"] - r.get("failed", 0) for r in reps),
                "tokens": sum(r["output_tokens"] for r in reps),
                "tok_s": _median(lv.get("tok_s")),
                "ttft": _median(lat.get("ttft_ms")) if lat.get("ttft_ms") else _median(lv.get("ttft_ms")),
                "tpot": _median(lv.get("itl_ms"))
                if schema2
                else (_median(lat.get("tpot_ms")) if lat.get("tpot_ms") else _median(lv.get("tpot_ms"))),
                "itl": None if schema2 else _median(lat.get("itl_ms")),
                "accept": lv.get("accept_length"),
                "failed_levels": [],
            }
    for f in data["data"].get("speculation") or []:  # bench's speculation checks: a failed level
        c = f.get("concurrency")
        if c in out:
            out[c]["failed_levels"].append(f.get("rule") or f.get("kind") or "failed")
    return out


def vllm_figures(v):
    return {
        "completed": v.get("completed"),
        "tokens": v.get("total_output_tokens"),
        "tok_s": v.get("output_throughput"),
        "ttft": v.get("median_ttft_ms"),
        "tpot": v.get("median_tpot_ms"),
        "itl": v.get("median_itl_ms"),
        "accept": v.get("spec_decode_acceptance_length"),
    }


def collect(root):
    """{(mode, c): [(round, envforge figures or None, vLLM figures or None), ...]} from RESULTS_DIR."""
    runs = {}
    for p in sorted(root.glob("*.json")):
        m = RUN.match(p.name)
        if not m:
            continue
        key, r = (m["mode"], int(m["c"])), int(m["r"])
        slot = runs.setdefault(key, {}).setdefault(r, [None, None])
        data = json.loads(p.read_text())
        if m["tool"] == "ef":
            slot[0] = envforge_levels(data).get(int(m["c"]))
        else:
            slot[1] = vllm_figures(data)
    if not runs:  # the older layout: ef-MODE.json with every level, vb-MODE.json a list of summaries
        for vb in sorted(root.glob("vb-*.json")):
            mode = vb.stem[3:]
            ef_path = root / f"ef-{mode}.json"
            if RUN.match(vb.name) or not ef_path.is_file():
                continue
            ef = envforge_levels(json.loads(ef_path.read_text()))
            for v in json.loads(vb.read_text()):
                runs.setdefault((mode, v["concurrency"]), {})[1] = [ef.get(v["concurrency"]), vllm_figures(v)]
    return {k: [(r, *pair) for r, pair in sorted(v.items())] for k, v in runs.items()}


def ratio(a, b):
    return None if a is None or not b else a / b


def cell(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def _med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _counts(pairs, key):
    """``"96 / 96"`` when every pair agrees on one value each, else every pair's ``e/v``."""
    es, vs = [e[key] if e else None for _, e, _ in pairs], [v[key] if v else None for _, _, v in pairs]
    if len(set(es)) == 1 and len(set(vs)) == 1:
        return f"{es[0] if es[0] is not None else '-'} / {vs[0] if vs[0] is not None else '-'}"
    return ", ".join(f"{e if e is not None else '-'}/{v if v is not None else '-'}" for e, v in zip(es, vs))


def verdict(e, v, same):
    """``yes`` when the counts agree and every median both tools have is within 10 %; else what is off.
    A median only one tool has (schema 2's ITL) is named, not judged."""
    if e is None or v is None:
        return "missing: " + ("envforge" if e is None else "vLLM")
    off = [
        LABEL[k] for k in METRICS if e[k] is not None and v[k] is not None and abs(ratio(e[k], v[k]) - 1) > TOLERANCE
    ]
    unknown = [LABEL[k] for k in METRICS if e[k] is None or v[k] is None]
    parts = (["counts differ"] if not same else []) + ([f"{', '.join(off)} off"] if off else [])
    text = "; ".join(parts) or "yes"
    return text + (f" ({', '.join(unknown)}: one tool has no figure)" if unknown else "")


def main(root):
    runs = collect(root)
    if not runs:
        print(f"no ef-*/vb-* results in {root}")
        return 1
    head = [
        "| mode | conc | pairs | completed ef / vLLM | output tokens ef / vLLM | tok/s ef / vLLM | TTFT ms ef / vLLM "
        "| TPOT ms ef / vLLM | ITL ms ef / vLLM | accept ef / vLLM | within 10 % |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    detail = [
        "| mode | conc | pair | tok/s ef / vLLM | TTFT ms ef / vLLM (ef - vLLM) | TPOT ms ef / vLLM "
        "| ITL ms ef / vLLM | accept ef / vLLM | bench's speculation checks |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (mode, c), pairs in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        whole = [(e, v) for _, e, v in pairs if e is not None and v is not None]
        same = all(e["completed"] == v["completed"] and e["tokens"] == v["tokens"] for e, v in whole)
        partial = len(pairs) - len(whole)
        es, vs = [e for _, e, _ in pairs if e], [v for _, _, v in pairs if v]
        em = {k: _med([e[k] for e in es]) for k in (*METRICS, "accept")} if es else None
        vm = {k: _med([v[k] for v in vs]) for k in (*METRICS, "accept")} if vs else None
        g = lambda d, k: None if d is None else d[k]  # noqa: E731
        head.append(
            f"| {mode} | {c} | {len(pairs)} | {_counts(pairs, 'completed')} | {_counts(pairs, 'tokens')} "
            f"| {cell(g(em, 'tok_s'), 0)} / {cell(g(vm, 'tok_s'), 0)} | {cell(g(em, 'ttft'))} / {cell(g(vm, 'ttft'))} "
            f"| {cell(g(em, 'tpot'), 2)} / {cell(g(vm, 'tpot'), 2)} | {cell(g(em, 'itl'), 2)} / {cell(g(vm, 'itl'), 2)} "
            f"| {cell(g(em, 'accept'), 3)} / {cell(g(vm, 'accept'), 3)} | {verdict(em, vm, same)}"
            f"{f'; {partial} pair(s) without both runs' if partial else ''} |"
        )
        for r, e, v in pairs:
            gap = None if g(e, "ttft") is None or g(v, "ttft") is None else e["ttft"] - v["ttft"]
            failed = ", ".join(e["failed_levels"]) if e and e["failed_levels"] else "-"
            detail.append(
                f"| {mode} | {c} | {r} | {cell(g(e, 'tok_s'), 0)} / {cell(g(v, 'tok_s'), 0)} "
                f"| {cell(g(e, 'ttft'))} / {cell(g(v, 'ttft'))} ({'-' if gap is None else f'{gap:+.1f}'}) "
                f"| {cell(g(e, 'tpot'), 2)} / {cell(g(v, 'tpot'), 2)} | {cell(g(e, 'itl'), 2)} / {cell(g(v, 'itl'), 2)} "
                f"| {cell(g(e, 'accept'), 3)} / {cell(g(v, 'accept'), 3)} | {failed} |"
            )
    print("\n".join(head))
    if any(len(p) > 1 for p in runs.values()):
        print("\nEvery pair (envforge first, then vLLM, on the same server):\n")
        print("\n".join(detail))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
