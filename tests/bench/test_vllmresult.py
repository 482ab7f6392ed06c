"""bench/vllmresult.py: a vllm bench serve result (the keys vllm/benchmarks/serve.py 0.32.0 writes)
read as a one-level report and compared. The real file of a real run: tests/bench/test_vllm_crosscheck.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envforge.bench.compare import compare
from envforge.bench.vllmresult import VLLM_SERVER, is_vllm_result, paired, read_compared, vllm_report
from envforge.cli import main
from envforge.core.errors import InputError

RESULT = {
    "date": "20261207-150000",
    "endpoint_type": "openai",
    "backend": "openai",
    "label": None,
    "model_id": "tiny",
    "tokenizer_id": "tiny",
    "num_prompts": 6,
    "request_rate": 8.0,
    "burstiness": 1.0,
    "max_concurrency": 2,
    "duration": 1.5,
    "completed": 6,
    "failed": 0,
    "total_input_tokens": 144,
    "total_output_tokens": 96,
    "request_throughput": 4.0,
    "request_goodput": None,
    "output_throughput": 64.0,
    "total_token_throughput": 160.0,
    "max_output_tokens_per_s": 80.0,
    "max_concurrent_requests": 2,
    "mean_ttft_ms": 9.0,
    "median_ttft_ms": 8.5,
    "std_ttft_ms": 1.0,
    "p99_ttft_ms": 12.0,
    "mean_tpot_ms": 2.2,
    "median_tpot_ms": 2.1,
    "std_tpot_ms": 0.1,
    "p99_tpot_ms": 2.5,
    "mean_itl_ms": 2.2,
    "median_itl_ms": 2.0,
    "std_itl_ms": 0.3,
    "p99_itl_ms": 3.0,
    "mean_e2el_ms": 75.0,
    "median_e2el_ms": 74.0,
    "std_e2el_ms": 2.0,
    "p99_e2el_ms": 80.0,
}


def test_a_result_is_one_level_of_one_repeat(tmp_path: Path) -> None:
    assert is_vllm_result(RESULT) and not is_vllm_result({"schema": "envforge.bench/4", **RESULT})
    assert not is_vllm_result({"completed": 1}) and not is_vllm_result([RESULT])
    r = vllm_report(RESULT, tmp_path / "v.json")
    (srv,) = r.servers
    (lv,) = srv.levels
    assert (srv.name, srv.speculative, srv.env, r.fingerprint.empty) == (VLLM_SERVER, False, None, True)
    assert (lv.concurrency, lv.request_rate, lv.failed_requests, lv.accept_length) == (2, 8.0, 0, None)
    assert lv.tok_s is not None and (lv.tok_s.n, lv.tok_s.median, lv.tok_s.ci_low) == (1, 64.0, None)
    assert lv.ttft_ms is not None and lv.ttft_ms.median == 8.5 and lv.req_s is not None and lv.req_s.median == 4.0
    assert r.config == {
        "model": "tiny",
        "concurrency": [2],
        "request-rate": 8.0,
        "burstiness": 1.0,
        "source": "vllm bench serve",
    }
    assert r.warnings == (
        f"{tmp_path / 'v.json'} is a vllm bench serve result (openai, 20261207-150000): one run of 6 completed "
        "requests, so its tok/s has no interval; it records no environment, no server variables and no "
        "per-request distributions; only model, concurrency, request rate and burstiness are compared as settings",
    )
    closed = vllm_report(
        {**RESULT, "request_rate": "inf", "max_concurrency": None, "failed": 2, "spec_decode_acceptance_length": 2.5},
        tmp_path / "v.json",
    )
    (lv,) = closed.servers[0].levels
    assert (lv.concurrency, lv.request_rate, lv.failed_requests, lv.tok_s, lv.accept_length) == (6, None, 2, None, 2.5)
    assert closed.servers[0].speculative


@pytest.mark.parametrize(
    ("key", "value"),
    [("completed", "6"), ("output_throughput", -1.0), ("max_concurrency", True), ("median_ttft_ms", float("nan"))],
)
def test_a_malformed_result_names_file_and_key(tmp_path: Path, key: str, value: object) -> None:
    with pytest.raises(InputError) as exc:
        vllm_report({**RESULT, key: value}, tmp_path / "v.json")
    assert exc.value.message == (
        f"{tmp_path / 'v.json'}: {key}: expected a number >= 0 in a vllm bench serve result, got {value!r}"
    )


def test_compare_pairs_the_result_with_the_only_server_and_says_what_it_cannot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = json.loads((Path(__file__).parents[2] / "docs" / "bench" / "cpu-demo.json").read_text())
    ours["data"]["servers"] = ours["data"]["servers"][:1]
    name = ours["data"]["servers"][0]["name"]
    level = ours["data"]["servers"][0]["levels"][0]
    (tmp_path / "a.json").write_text(json.dumps(ours))
    (tmp_path / "v.json").write_text(
        json.dumps({**RESULT, "request_rate": "inf", "max_concurrency": level["concurrency"]})
    )
    a, b = paired(read_compared(tmp_path / "a.json"), read_compared(tmp_path / "v.json"))
    assert [s.name for s in b.servers] == [name]
    c = compare(a, b, allow_different_env=True)
    (row,) = [r for r in c.rows if r.concurrency == level["concurrency"]]
    assert (row.server, row.b_tok_s, row.ratio_low, row.verdict) == (
        name,
        64.0,
        None,
        "no interval (B: 1 repeat; run --repeats >= 3)",
    )
    assert any(d.startswith("report B: the environment fingerprint is empty") for d in c.env_differences)
    assert all(d.split(":")[0] in ("model", "concurrency", "request-rate", "burstiness") for d in c.config_differences)
    assert main(["bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "v.json")]) == 2  # no fingerprint
    assert main(["bench", "compare", str(tmp_path / "a.json"), str(tmp_path / "v.json"), "--allow-different-env"]) == 0
    out, err = capsys.readouterr()
    assert f"warning: {tmp_path / 'v.json'} is a vllm bench serve result (openai, 20261207-150000)" in err
    assert "no interval (B: 1 repeat" in out
