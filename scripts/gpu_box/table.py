"""One markdown table: envforge bench next to vLLM's own `vllm bench serve`, per server and concurrency.

Usage: python table.py RESULTS_DIR  (reads ef-NAME.json, envforge's --url reports, and vb-NAME.json)
For the same running server: completed requests and output tokens must agree exactly; median TTFT,
TPOT (envforge's "ITL" is per output token, i.e. vLLM's TPOT) and tok/s within 10 %. vLLM's ITL
(the gap between chunks: the verify cycle under speculation) is shown for reference, not compared.
Stdlib only; run here on what came back from the device.
"""
import json
import sys
from pathlib import Path


def envforge_levels(path):
    data = json.loads(path.read_text())["data"]
    out = {}
    for server in data["servers"]:
        for lv in server["levels"]:
            reps = lv.get("repeats") or []
            out[lv["concurrency"]] = {
                "completed": sum(r["requests"] - r["failed"] for r in reps),
                "tokens": sum(r["output_tokens"] for r in reps),
                "tok_s": (lv.get("tok_s") or {}).get("median"),
                "ttft": (lv.get("ttft_ms") or {}).get("median"),
                "tpot": (lv.get("itl_ms") or {}).get("median"),
                "accept": (lv.get("accept_length") or {}).get("median") if isinstance(lv.get("accept_length"), dict)
                else lv.get("accept_length"),
            }
    return out


def ratio(a, b):
    return None if a is None or not b else a / b


def cell(x, nd=1):
    return "-" if x is None else f"{x:.{nd}f}"


def main(root):
    rows = ["| server | conc | completed ef / vLLM | tokens ef / vLLM | tok/s ef / vLLM | TTFT ms ef / vLLM "
            "| ef ITL = TPOT ms / vLLM TPOT | vLLM ITL ms | accept ef / vLLM | within 10 % |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for vb in sorted(root.glob("vb-*.json")):
        name = vb.stem[3:]
        ef_path = root / f"ef-{name}.json"
        if not ef_path.is_file():
            continue
        ef = envforge_levels(ef_path)
        for v in json.loads(vb.read_text()):
            c = v["concurrency"]
            e = ef.get(c)
            if e is None:
                continue
            same = e["completed"] == v["completed"] and e["tokens"] == v["total_output_tokens"]
            rs = [ratio(e["tok_s"], v["output_throughput"]), ratio(e["ttft"], v["median_ttft_ms"]),
                  ratio(e["tpot"], v["median_tpot_ms"])]
            off = [n for n, r in zip(("tok/s", "TTFT", "TPOT"), rs) if r is None or abs(r - 1) > 0.10]
            verdict = ("yes" if same and not off else
                       ("counts differ; " if not same else "") + (f"{', '.join(off)} off" if off else ""))
            rows.append(f"| {name} | {c} | {e['completed']} / {v['completed']} | {e['tokens']} / "
                        f"{v['total_output_tokens']} | {cell(e['tok_s'], 0)} / {cell(v['output_throughput'], 0)} | "
                        f"{cell(e['ttft'])} / {cell(v['median_ttft_ms'])} | {cell(e['tpot'], 2)} / "
                        f"{cell(v['median_tpot_ms'], 2)} | {cell(v['median_itl_ms'], 2)} | "
                        f"{cell(e['accept'], 3)} / {cell(v.get('spec_decode_acceptance_length'), 3)} | {verdict} |")
    print("\n".join(rows))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
