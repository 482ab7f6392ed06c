"""``envforge bench`` end to end: a real ``transformers serve`` process on a tiny model made here,
real HTTP, real generated tokens; ``--url`` against a server replaying SGLang's EAGLE-3 stream."""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from tests.support.bench_support import (
    TRANSFORMERS_SERVE_TOML,
    make_tiny_model,
    replay_server,
    transformers_serve_python,
    venv_of,
)
from tests.support.vllm_support import free_port, processes_mentioning

from envforge.bench.arrivals import arrival_times
from envforge.cli import main

SHAREGPT = Path(__file__).parents[1] / "data" / "bench" / "sharegpt_small.json"
TRACE = Path(__file__).parents[1] / "data" / "bench" / "mooncake_trace_small.jsonl"

RECIPE = (
    """
[recipe]
name = "cpu"
python = "3.11"

[verify.smoke]
model = "{model}"
api = "openai"
port = {port}
max-new-tokens = 8
concurrency = [1, 2]
repeats = 2
requests = 2
warmup = 1
load-timeout-s = 300

[[verify.smoke.servers]]
name = "baseline"
"""
    + TRANSFORMERS_SERVE_TOML
    + """
[[verify.smoke.servers]]
name = "prompt-lookup"
speculative = true
model = "{model}-pld"
"""
    + TRANSFORMERS_SERVE_TOML
    + """
[[verify.smoke.servers]]
name = "stops-early"
model = "{model}-stops"
"""
    + TRANSFORMERS_SERVE_TOML
)


@pytest.mark.slow
def test_bench_starts_measures_and_stops_a_real_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model")
    # transformers' prompt-lookup decoding (n-gram speculative decoding), on by generation config
    pld = make_tiny_model(tmp_path / "model-pld")
    (pld / "generation_config.json").write_text('{"bos_token_id": 1, "prompt_lookup_num_tokens": 3}')
    make_tiny_model(tmp_path / "model-stops", stops_at_once=True)  # a model that stops early (B35)
    port = free_port()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "cpu.toml").write_text(RECIPE.format(model=model, port=port))
    out = tmp_path / "out" / "a.json"
    code = main(
        [
            "bench",
            str(venv_of(python)),
            "--project",
            str(tmp_path),
            "--recipe",
            "cpu",
            "--output",
            str(out),
            "--percentiles",
            "50,99.9,90",
        ]
    )
    stdout, stderr = capsys.readouterr()
    assert code == 3, stderr  # stops-early: every request fails
    doc = json.loads(out.read_text())
    assert doc["schema"] == "envforge.bench/4"
    base, spec, stops = doc["data"]["servers"]
    # transformers serve rejects unknown fields (HTTP 422): asked without ignore_eos, and the report says so
    assert [s["ignore_eos"] for s in (base, spec, stops)] == [False, False, False]
    assert "warning: server 'baseline' rejects ignore_eos (HTTP 422); asking without it" in stderr
    assert [(lv["tok_s"], lv["failed_requests"]) for lv in stops["levels"]] == [(None, 4), (None, 4)]
    failures = doc["data"]["failures"]
    # the ignore_eos probe, the warm-ups of max(1, c) at c = 1 and 2, then 2 repeats x 2 requests per level
    assert {f["server"] for f in failures} == {"stops-early"} and len(failures) == 1 + (1 + 2) + 2 * 2 * 2
    assert [f["repeat"] for f in failures].count(0) == 4
    assert failures[0]["status"] == 200 and failures[0]["repeat"] == 0
    assert re.fullmatch(
        r"[01] of 8 tokens \(finish reason 'stop'\): a request must yield exactly max-new-tokens",
        failures[0]["message"],
    ), failures[0]
    assert "error: 12 failed requests (server stops-early); levels with failures have no figures:" in stderr
    assert "stops-early       1 FAILED: 4 requests" in stdout
    assert (base["name"], base["speculative"], spec["name"], spec["speculative"]) == (
        "baseline",
        False,
        "prompt-lookup",
        True,
    )
    assert base["argv"][:5] == [str(python), "-m", "transformers.cli.transformers", "serve", str(model)]
    assert spec["argv"][4] == str(pld) and base["load_s"] > 0
    for srv in (base, spec):
        assert [lv["concurrency"] for lv in srv["levels"]] == [1, 2]
        for lv in srv["levels"]:
            assert lv["tok_s"]["n"] == 2 and lv["tok_s"]["median"] > 0
            assert lv["ttft_ms"]["median"] > 0 and lv["tpot_ms"]["median"] > 0 and lv["accept_length"] is None
            # at most 4 requests x 8 gaps: 8 chunks with text and the finish chunk without text that
            # transformers serve sends (timed, as vLLM's client times it); it merges tokens into one
            # chunk at times, so fewer
            itl = lv["latency"]["itl_ms"]
            assert itl["n"] <= 32 and itl["max"] >= itl["p99"] >= itl["p90"] >= itl["median"] > 0
            # --percentiles 50,99.9,90: p50 and p99.9 after max, p90 not repeated
            assert list(itl) == ["n", "mean", "median", "p90", "p95", "p99", "max", "p50", "p99.9"]
            assert itl["p50"] == itl["median"] and itl["p99"] <= itl["p99.9"] <= itl["max"]
            per_token = lv["latency"]["itl_per_token_ms"]
            # seen here: a request's chunks with text were 4-7 for usage's 8 tokens (several tokens in
            # one chunk): how the 8 spread over the chunks is unknown, no ITL per token; with 8 the
            # finish chunk's gap carries no token
            assert per_token is None if itl["n"] < 32 else per_token["n"] == 28
            assert [r["output_tokens"] for r in lv["repeats"]] == [16, 16]  # 2 requests x 8 tokens, every repeat
            assert lv["token_count"] == "server" and lv["failed_requests"] == 0  # usage.completion_tokens
    assert "'baseline' ready after" in stderr and "prompt-lookup: concurrency 2, repeat 2/2:" in stderr
    assert stdout.splitlines()[0].split()[:3] == ["server", "conc", "tok/s"]
    assert doc["data"]["config"]["percentiles"] == [50.0, 99.9, 90.0]
    head = next(line for line in stdout.splitlines() if line.startswith("per request ms"))
    assert head.split()[4:] == ["metric", "mean", "median", "p90", "p95", "p99", "p50", "p99.9", "max"]
    assert "break-even: no speculative server reported verify steps (spec_verify_ct)" in stdout
    assert (tmp_path / "out" / "a-logs" / "baseline.log").stat().st_size > 0
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "warning: no plot: plotting needs matplotlib" in stderr
    else:
        assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # stopped: nothing listens, and no process of it is left
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    assert processes_mentioning(str(model)) == []  # also matches model-pld
    # a plain venv: the fingerprint is empty, so even the same report is not "the same environment"
    assert main(["bench", "compare", str(out), str(out)]) == 2
    assert "report A: the environment fingerprint is empty" in capsys.readouterr().err
    assert main(["bench", "compare", str(out), str(out), "--allow-different-env"]) == 0
    assert "no clear change" in capsys.readouterr().out
    doc["data"]["fingerprint"]["lock_digest"] = "sha256:00"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    assert main(["bench", "compare", str(out), str(tmp_path / "b.json")]) == 2
    assert "  lock_digest: unknown != sha256:00" in capsys.readouterr().err


URL_RECIPE = """
[recipe]
name = "url"
python = "3.12"

[verify.smoke]
model = "default"
concurrency = [1, 2]
repeats = 2
requests = 2
warmup = 0
"""


def test_bench_url_measures_a_running_sglang_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "url.toml").write_text(URL_RECIPE)
    out = tmp_path / "spec.json"
    with replay_server({"/generate": "sglang_generate_stream_eagle3.sse"}, gap_s=0.002) as url:
        code = main(
            [
                "bench",
                "--url",
                url,
                "--name",
                "eagle3",
                "--speculative",
                "--project",
                str(tmp_path),
                "--recipe",
                "url",
                "--output",
                str(out),
                "--no-plot",
                "--json",
                "--max-new-tokens",
                "12",
            ]
        )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    data = json.loads(stdout)["data"]
    assert data == json.loads(out.read_text())["data"]
    (srv,) = data["servers"]
    assert (srv["name"], srv["speculative"], srv["url"], srv["argv"]) == ("eagle3", True, url, None)
    for lv in srv["levels"]:
        assert lv["accept_length"] == 3.0 and lv["verify_cycle_ms"] > 0
        assert [r["verify_steps"] for r in lv["repeats"]] == [8, 8]
    assert data["fingerprint"]["lock_digest"] is None and not out.with_suffix(".png").exists()


def test_bench_without_servers_or_url_says_what_to_add(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "url.toml").write_text(URL_RECIPE)
    venv = tmp_path / "envs" / "url-default"
    (venv / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    assert main(["bench", "--project", str(tmp_path), "--recipe", "url"]) == 2
    err = capsys.readouterr().err
    assert "error: [verify.smoke] defines no server configuration to start" in err
    assert "or measure a running server with --url" in err


SG_RECIPE = """
[recipe]
name = "sg"
python = "3.12"

[verify.smoke]
model = "default"
port = {port}
max-new-tokens = 12
concurrency = [1, 2]
repeats = 2
requests = 2
warmup = 1
load-timeout-s = 60

[[verify.smoke.servers]]
name = "baseline"
args = ["{script}", "{{port}}", "0.01", "/generate=sglang_generate_stream_12.sse"]

[[verify.smoke.servers]]
name = "eagle3"
speculative = true
args = ["{script}", "{{port}}", "0.02", "/generate=sglang_generate_stream_eagle3.sse",
        "--enable-flashinfer-allreduce-fusion"]
"""


def test_bench_runs_each_configuration_computes_break_even_and_warns_inert_patches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two server processes started by envforge with the environment's interpreter, streaming SGLang
    bodies (plain and EAGLE-3); the environment has a patch applied whose flag one of them lacks, an
    env profile, and the caller exports another value of a profile variable (B20)."""
    import sys

    from tests.support import bench_support
    from envforge.env.profile import install
    from envforge.patching.manifest import AppliedPatchset, Manifest, write_manifest

    env = tmp_path / "envs" / "sg-default"
    sp = env / "lib" / "python3.12" / "site-packages"
    sp.mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(sys.executable)
    write_manifest(
        sp,
        Manifest(
            (
                AppliedPatchset(
                    "sm120-flashinfer-allreduce-fusion",
                    "sha256:00",
                    "sglang",
                    "0.5.9",
                    "--enable-flashinfer-allreduce-fusion",
                ),
            )
        ),
    )
    (sp / ".envforge" / "pylock.toml").write_text('lock-version = "1.0"\n')
    install(sp, "pcie", {"NCCL_MAX_NCHANNELS": "2", "NCCL_BUFFSIZE": "131072"})
    monkeypatch.setenv("NCCL_MAX_NCHANNELS", "32")
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "checkout"))  # B53: an unpatched checkout would shadow the env
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "sg.toml").write_text(SG_RECIPE.format(port=free_port(), script=bench_support.__file__))
    out = tmp_path / "sg.json"
    code = main(["bench", "--project", str(tmp_path), "--recipe", "sg", "--output", str(out), "--no-plot"])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert (
        "warning: server 'baseline': patchset 'sm120-flashinfer-allreduce-fusion' is applied but inert: "
        "the launch arguments lack --enable-flashinfer-allreduce-fusion"
    ) in stderr
    assert "server 'eagle3'" not in stderr.replace("starting 'eagle3'", "")
    data = json.loads(out.read_text())["data"]
    assert data["fingerprint"]["patch_manifest_digest"].startswith("sha256:")
    assert data["fingerprint"]["python"] == sys.version.split()[0]
    assert [(b["concurrency"], b["accept_length"]) for b in data["break_even"]] == [(1, 3.0), (2, 3.0)]
    for b in data["break_even"]:
        # the report rounds its inputs to 4 decimals and the ratio to 3: compare within that rounding
        assert b["break_even_accept_length"] == pytest.approx(b["verify_cycle_ms"] / b["decode_step_ms"], abs=2e-3)
    lines = [x for x in stdout.splitlines() if x.startswith("break-even at concurrency 1:")]
    assert len(lines) == 1 and " measured accept length 3.00: speculation " in lines[0]
    assert data["warnings"] == [
        f"bench servers: PYTHONPATH={tmp_path / 'checkout'} dropped: it would put other code ahead of the "
        "environment's site-packages (--keep-pythonpath keeps it)",
        "NCCL_MAX_NCHANNELS=32 from the caller's environment overrides the env profile 'pcie' (NCCL_MAX_NCHANNELS=2)",
        "server 'baseline': patchset 'sm120-flashinfer-allreduce-fusion' is applied but "
        "inert: the launch arguments lack --enable-flashinfer-allreduce-fusion",
    ]
    assert (
        "warning: NCCL_MAX_NCHANNELS=32 from the caller's environment overrides the env profile 'pcie' "
        "(NCCL_MAX_NCHANNELS=2)"
    ) in stderr
    base_env = data["servers"][0]["env"]
    assert (base_env["NCCL_MAX_NCHANNELS"], base_env["NCCL_BUFFSIZE"]) == ("32", "131072")
    assert "HF_TOKEN" not in base_env and "hf_secret_value" not in out.read_text()
    assert "PYTHONPATH" not in base_env
    assert data["fingerprint"]["effective_env_digest"].startswith("sha256:")
    assert data["failures"] == [] and data["method"] == {
        "prompts": "distinct per request, warm-up included (seed 0)",
        "order": "sequential",
        "load": "closed loop: every request due at once, at most the level's concurrency in flight",
        "warmup": "before each level: max(1, concurrency) requests at its concurrency",
        "dataset": {
            "name": "prompts",
            "prompts": 32,
            "digest": data["config"]["prompts-digest"],
            "lengths": "every request asks for max-new-tokens (12) output tokens, checked exactly; input "
            "tokens are not counted",
        },
        "server_metrics": "the engine's metrics route every 0.5 s during each measured repeat, where it has one "
        "(each server's server_metrics)",
        "output_lengths": (
            "exact: every request asks for its output tokens with ignore_eos (where the server takes "
            "it) and must yield exactly that many; one that stops early fails and its level has no "
            "figures"
        ),
    }
    assert data["config"]["dataset"] == {"name": "prompts"} and data["config"]["max-new-tokens"] == 12
    assert data["config"]["output-lengths"] == "exact"
    assert [s["cache"] for s in data["servers"]] == ["flushed before each repeat (POST /flush_cache)"] * 2
    # the stand-in has no metrics route: said once per server, and its levels have no series
    assert [s["server_metrics"] for s in data["servers"]] == [
        "not scraped: GET /metrics answered HTTP 404; SGLang serves /metrics only when started with --enable-metrics"
    ] * 2
    assert stderr.count("baseline: server metrics not scraped: GET /metrics answered HTTP 404") == 1
    assert {lv["server_metrics"] for s in data["servers"] for lv in s["levels"]} == {None}
    # the same environment run with the profile's value: compare refuses, naming the variable
    monkeypatch.setenv("NCCL_MAX_NCHANNELS", "2")
    out2 = tmp_path / "sg2.json"
    assert (
        main(
            [
                "bench",
                "--project",
                str(tmp_path),
                "--recipe",
                "sg",
                "--output",
                str(out2),
                "--no-plot",
                "--server",
                "baseline",
                "--concurrency",
                "1",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["bench", "compare", str(out), str(out2)]) == 2
    err = capsys.readouterr().err
    assert "  effective_env_digest: sha256:" in err and "  server 'baseline': NCCL_MAX_NCHANNELS: 32 != 2" in err


def test_machine_fingerprint_runs_the_gpu_info_probe_in_the_environment(tmp_path: Path) -> None:
    import sys

    from envforge.bench.run import machine_fingerprint

    sp = tmp_path / "site-packages"
    sp.mkdir()
    fp, note = machine_fingerprint(sp, Path(sys.executable), dict(os.environ))
    assert note is None and fp.python == sys.version.split()[0]
    assert (fp.lock_digest, fp.gpu, fp.gpu_count) == (None, None, None)  # no GPU on this machine
    fp, note = machine_fingerprint(sp, tmp_path / "no-python", dict(os.environ))
    assert fp.python is None and note is not None
    assert note.startswith(f"no machine facts in the fingerprint: cannot start {tmp_path / 'no-python'}")


def test_bench_url_without_a_recipe_sends_distinct_prompts_and_flushes_the_cache(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--url needs no recipe (flags only). Against a stand-in of SGLang's /generate and /flush_cache
    (B34: a prefix cache serves repeated prompts): every request has its own prompt, the warm-up's
    are not measured ones, and the cache is flushed before every repeat."""
    log: list[tuple[str, bytes]] = []
    out = tmp_path / "u.json"
    with replay_server({"/generate": "sglang_generate_stream.sse"}, log=log) as url:
        code = main(
            [
                "bench",
                "--url",
                url,
                "--api",
                "sglang",
                "--max-new-tokens",
                "8",
                "--concurrency",
                "1,2",
                "--repeats",
                "2",
                "--warmup",
                "2",
                "--output",
                str(out),
                "--no-plot",
            ]
        )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    paths = [p for p, _ in log]
    prompts = [json.loads(b)["text"] for p, b in log if p == "/generate"]
    # per level a warm-up of max(2, concurrency) = 2, then 2 repeats of the default max(5 x c, 10) = 10
    assert len(prompts) == 2 * (2 + 2 * 10) and len(set(prompts)) == len(prompts)
    # level 1: warm-up (2), then per repeat: flush, then its requests; level 2 warms up after them
    assert paths[:3] == ["/generate", "/generate", "/flush_cache"] and paths.count("/flush_cache") == 4
    level2 = 2 + 2 * 11
    assert paths[level2 : level2 + 3] == ["/generate", "/generate", "/flush_cache"]
    data = json.loads(out.read_text())["data"]
    assert data["servers"][0]["cache"] == "flushed before each repeat (POST /flush_cache)"
    assert data["servers"][0]["env"] is None and data["config"]["model"] == "default"
    assert "warning: the environment fingerprint is empty (no envforge lock" in stderr
    assert "warning: server 'url': not started by envforge; the variables it runs with are unknown" in stderr


def test_bench_url_reads_the_server_gauges_during_each_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stand-in of SGLang whose GET /metrics answers SGLang's documented body (running 162, queued
    2826, token usage 0.28; tests/data/bench/README.md): every measured repeat has its samples, from
    the level's start, and the terminal a table of the engine's load. The real server: test_vllm_e2e."""
    out = tmp_path / "g.json"
    routes = {"/generate": "sglang_generate_stream.sse", "GET /metrics": "sglang_metrics.txt"}
    with replay_server(routes, gap_s=0.002) as url:
        code = main(
            [
                "bench",
                "--url",
                url,
                "--api",
                "sglang",
                "--max-new-tokens",
                "8",
                "--concurrency",
                "1",
                "--repeats",
                "2",
                "--requests",
                "2",
                "--warmup",
                "0",
                "--metrics-interval",
                "0.1",
                "--output",
                str(out),
                "--no-plot",
            ]
        )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    (srv,) = json.loads(out.read_text())["data"]["servers"]
    assert srv["server_metrics"] == "GET /metrics every 0.1 s during each measured repeat"
    (lv,) = srv["levels"]
    m = lv["server_metrics"]
    assert (m["source"], m["interval_s"], m["gaps"]) == (url + "/metrics", 0.1, [])
    assert [s["repeat"] for s in m["samples"]][0] == 1 and {s["repeat"] for s in m["samples"]} == {1, 2}
    assert {(s["running"], s["waiting"], s["kv_cache_use"], s["drafts"]) for s in m["samples"]} == {
        (162.0, 2826.0, 0.28, None)
    }
    times = [s["t_s"] for s in m["samples"]]
    assert times == sorted(times) and 0 <= times[0] < 1
    assert m["summary"] == {
        "samples": len(times),
        "failed_scrapes": 0,
        "running": {"max": 162.0, "mean": 162.0},
        "waiting": {"max": 2826.0, "mean": 2826.0},
        "kv_cache_use": {"max": 0.28, "mean": 0.28},
    }
    assert re.search(r"^url +1 +162 / 162 +2826 / 2826 +28\.0% / 28\.0% +\d+ +0$", stdout, re.M), stdout
    assert (
        "url: concurrency 1, repeat 1/2: " in stderr
        and "; engine: running <= 162, waiting <= 2826, KV cache <= 28.0%" in stderr
    )


def test_bench_url_failed_requests_exit_3_and_are_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stand-in of SGLang 0.5.9's abort chunk (B24): HTTP 200, finish_reason type abort, status 503."""
    out = tmp_path / "a.json"
    with replay_server({"/generate": "sglang_generate_stream_abort.sse"}) as url:
        code = main(
            [
                "bench",
                "--url",
                url,
                "--name",
                "sg",
                "--max-new-tokens",
                "8",
                "--concurrency",
                "1",
                "--repeats",
                "1",
                "--warmup",
                "0",
                "--requests",
                "1",
                "--output",
                str(out),
                "--no-plot",
            ]
        )
    stdout, stderr = capsys.readouterr()
    assert code == 3
    assert (
        "error: 1 failed request (server sg); levels with failures have no figures:\n"
        "  server 'sg', concurrency 1, repeat 1: aborted by the server: The server is overloaded; request "
        "aborted by the scheduler. (status 503)"
    ) in stderr
    assert f"hint: a run with failed requests gives no trustworthy number; the report lists them: {out}" in stderr
    data = json.loads(out.read_text())["data"]
    assert data["failures"] == [
        {
            "server": "sg",
            "concurrency": 1,
            "repeat": 1,
            "status": 503,
            "message": "aborted by the server: The server is overloaded; request aborted by the scheduler.",
        }
    ]
    assert data["servers"][0]["levels"][0]["tok_s"] is None
    assert "sg                1 FAILED: 1 request" in stdout


def test_first_sigterm_stops_a_run_stuck_on_a_keepalive_stream(tmp_path: Path) -> None:
    """Stand-in: a server started by bench that streams one token, then only ': ping' keep-alives.
    The first SIGTERM ends everything at once: bench exits, its server group is gone."""
    import signal
    import subprocess
    import sys
    import time

    from tests.support import bench_support

    port = free_port()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "ka.toml").write_text(f'''
[recipe]
name = "ka"
python = "3.12"

[verify.smoke]
model = "m"
port = {port}
warmup = 0
concurrency = [2]

[[verify.smoke.servers]]
name = "pings"
args = ["{bench_support.__file__}", "{{port}}", "0.2", "/generate=keepalive:sglang_generate_stream.sse"]
''')
    env = tmp_path / "envs" / "ka-default"
    (env / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(sys.executable)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envforge",
            "bench",
            "--project",
            str(tmp_path),
            "--recipe",
            "ka",
            "--output",
            str(tmp_path / "k.json"),
            "--no-plot",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")]),
        },
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # wait until it is measuring
        if "'pings' ready after" in line:
            break
    time.sleep(1.0)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    code = proc.wait(timeout=30)
    assert time.monotonic() - start < 60  # hang guard: the stop is proved by the code and message below
    assert code == 128 + signal.SIGTERM and "stopped by signal SIGTERM" in rest
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_interleave_starts_the_configurations_in_turns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--interleave: each round starts every configuration for one repeat of every level (A B A B)."""
    import re
    import sys

    from tests.support import bench_support

    env = tmp_path / "envs" / "sg-default"
    (env / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "sg.toml").write_text(SG_RECIPE.format(port=free_port(), script=bench_support.__file__))
    out = tmp_path / "i.json"
    code = main(
        [
            "bench",
            "--project",
            str(tmp_path),
            "--recipe",
            "sg",
            "--output",
            str(out),
            "--no-plot",
            "--interleave",
            "--concurrency",
            "1",
            "--repeats",
            "2",
            "--warmup",
            "0",
        ]
    )
    stderr = capsys.readouterr().err
    assert code == 0, stderr
    assert re.findall(r"starting '(\w+)'", stderr) == ["baseline", "eagle3", "baseline", "eagle3"]
    data = json.loads(out.read_text())["data"]
    assert data["method"]["order"] == "interleaved" and data["config"]["interleave"] is True
    assert [len(s["levels"][0]["repeats"]) for s in data["servers"]] == [2, 2]
    assert [f"repeat {i}/2" in stderr for i in (1, 2)] == [True, True]


def test_a_started_server_s_credentials_are_neither_printed_nor_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Row #22 of issue 27: `--api-key SECRET` in a smoke server's args was printed ("starting
    'hostile': ... --api-key SECRETargkey") and written into the report's argv."""
    import sys

    from tests.support import hostile_server

    port = free_port()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "sec.toml").write_text(f'''
[recipe]
name = "sec"
python = "3.12"

[verify.smoke]
model = "m"
port = {port}
max-new-tokens = 8
warmup = 0
requests = 1
repeats = 1
concurrency = [1]

[[verify.smoke.servers]]
name = "hostile"
args = ["{hostile_server.__file__}", "{{port}}", "goodsse", "--api-key", "SECRETargkey", "--hf-token=SECRETtok",
        "--index", "http://u:SECRETpw@127.0.0.1:1/simple"]
''')
    env = tmp_path / "envs" / "sec-default"
    (env / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(sys.executable)
    out = tmp_path / "s.json"
    code = main(["bench", "--project", str(tmp_path), "--recipe", "sec", "--output", str(out), "--no-plot"])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    argv = json.loads(out.read_text())["data"]["servers"][0]["argv"]
    assert argv == [
        str(env / "bin" / "python"),
        hostile_server.__file__,
        str(port),
        "goodsse",
        "--api-key",
        "<redacted>",
        "--hf-token=<redacted>",
        "--index",
        "http://<credentials>@127.0.0.1:1/simple",
    ]
    assert (
        f"starting 'hostile': {env / 'bin' / 'python'} {hostile_server.__file__} {port} goodsse --api-key "
        "<redacted> --hf-token=<redacted> --index http://<credentials>@127.0.0.1:1/simple"
    ) in stderr
    everything = stdout + stderr + out.read_text()
    assert "SECRET" not in everything


@pytest.mark.parametrize(
    "mode, message",
    [
        ("deepjson", "malformed chunk after 0 tokens: JSON nested too deeply"),
        ("scalar", "malformed chunk after 0 tokens: a chunk is a JSON number, not an object"),
        ("metastr", "malformed chunk after 0 tokens: 'meta_info' is a JSON string, not an object"),
        ("tok_inf", "malformed chunk after 7 tokens: 'meta_info.completion_tokens' is inf, not a count"),
    ],
)
def test_bench_url_on_a_malformed_stream_exits_3_with_the_reason_in_the_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str, message: str
) -> None:
    """Row #14 of issue 27: these were an internal error (exit 70, RecursionError, AttributeError,
    OverflowError) and no report was written."""
    from tests.support.hostile_server import hostile_server

    out = tmp_path / "m.json"
    with hostile_server(mode) as url:
        code = main(
            [
                "bench",
                "--url",
                url,
                "--max-new-tokens",
                "8",
                "--concurrency",
                "1",
                "--repeats",
                "1",
                "--warmup",
                "0",
                "--requests",
                "1",
                "--output",
                str(out),
                "--no-plot",
            ]
        )
    stderr = capsys.readouterr().err
    assert code == 3, stderr
    assert f"  server 'url', concurrency 1, repeat 1: {message} (status 200)" in stderr
    assert [f["message"] for f in json.loads(out.read_text())["data"]["failures"]] == [message]


@pytest.mark.slow
def test_open_loop_at_a_request_rate_on_a_real_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--request-rate 20 with Poisson arrivals, capped at 2 in flight, against a real transformers serve,
    prompts from a ShareGPT-format file: the report says how requests were sent and how late each left."""
    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "cpu.toml").write_text(RECIPE.format(model=model, port=free_port()))
    out = tmp_path / "o.json"
    code = main(
        [
            "bench",
            str(venv_of(python)),
            "--project",
            str(tmp_path),
            "--recipe",
            "cpu",
            "--server",
            "baseline",
            "--request-rate",
            "20",
            "--burstiness",
            "1",
            "--max-concurrency",
            "2",
            "--requests",
            "6",
            "--repeats",
            "1",
            "--output",
            str(out),
            "--no-plot",
            "--prompts",
            str(SHAREGPT),
        ]
    )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    data = json.loads(out.read_text())["data"]
    assert (data["config"]["request-rate"], data["config"]["burstiness"], data["config"]["concurrency"]) == (
        20.0,
        1.0,
        [2],
    )
    assert data["method"]["load"] == (
        "open loop: 20 requests/s, Poisson arrivals (seed 0), at most the level's concurrency in flight"
    )
    assert data["method"]["warmup"] == "before each level: max(1, concurrency) requests at its concurrency"
    (lv,) = data["servers"][0]["levels"]
    assert lv["failed_requests"] == 0 and lv["repeats"][0]["requests"] == 6
    # a ShareGPT-format file as the prompt set: its 3 distinct first turns, by the file's digest
    assert data["config"]["prompts"] == 3
    assert data["config"]["prompts-digest"] == "sha256:" + hashlib.sha256(SHAREGPT.read_bytes()).hexdigest()
    assert lv["send_lag_ms"]["n"] == 6 and lv["send_lag_ms"]["median"] >= 0
    # wall time runs from the first send to the last end: at least the span between the first and the last
    # drawn arrival (seed 0: 0.0446 s and 0.3 s, the schedule's end scaled to n / rate)
    first, *_, last = arrival_times(6, 20.0, 1.0, 0)
    assert (round(first, 4), last) == (0.0446, 0.3)
    assert lv["repeats"][0]["wall_s"] >= last - first


@pytest.mark.slow
def test_datasets_give_each_request_its_own_output_tokens_on_a_real_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``bench --url`` against a real ``transformers serve`` (the tiny model, which never stops early):
    the random dataset draws each request's output tokens (vLLM's range), every request yields exactly
    its own count (a request off by one would be a failed request), and each repeat's output tokens
    are the sum of its positions' drawn counts; then the small Mooncake trace is replayed at a tenth
    of its recorded times with its recorded output tokens, and a shared-prefix set is sent. The
    tokenizer is the model directory's."""
    from envforge.bench.server import ServerLaunch, running_server
    from envforge.bench.workload import build_workload

    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    launch = ServerLaunch(
        "tiny",
        (
            str(python),
            "-m",
            "transformers.cli.transformers",
            "serve",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--device",
            "cpu",
        ),
        {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"},
        f"{url}/health",
        tmp_path / "serve.log",
    )
    base = ["bench", "--url", url, "--api", "openai", "--model", str(model), "--no-plot", "--json"]
    with running_server(launch, load_timeout_s=300):
        code = main(
            [
                *base,
                "--output",
                str(tmp_path / "random.json"),
                "--dataset",
                "random",
                "--random-input-len",
                "12",
                "--random-output-len",
                "6",
                "--random-range-ratio",
                "0.5",
                "--concurrency",
                "1,2",
                "--repeats",
                "2",
                "--requests",
                "3",
                "--warmup",
                "1",
            ]
        )
        random_out, stderr = capsys.readouterr()
        assert code == 0, stderr
        code = main(
            [
                *base,
                "--output",
                str(tmp_path / "trace.json"),
                "--dataset",
                "trace",
                "--trace",
                str(TRACE),
                "--trace-time-scale",
                "0.1",
                "--concurrency",
                "2",
                "--repeats",
                "2",
                "--warmup",
                "1",
            ]
        )
        trace_out, stderr = capsys.readouterr()
        assert code == 0, stderr
        code = main(
            [
                *base,
                "--output",
                str(tmp_path / "gsp.json"),
                "--dataset",
                "shared-prefix",
                "--gsp-num-groups",
                "2",
                "--gsp-prompts-per-group",
                "3",
                "--gsp-system-prompt-len",
                "40",
                "--gsp-question-len",
                "8",
                "--gsp-output-len",
                "4",
                "--concurrency",
                "2",
                "--repeats",
                "1",
                "--requests",
                "6",
                "--warmup",
                "0",
            ]
        )
        gsp_out, stderr = capsys.readouterr()
        assert code == 0, stderr
    gsp = json.loads(gsp_out)["data"]
    assert gsp["failures"] == [] and [r["output_tokens"] for r in gsp["servers"][0]["levels"][0]["repeats"]] == [24]
    assert gsp["method"]["dataset"]["input_tokens"] == {"min": 48, "mean": 48.0, "max": 48}  # 40 + 8, one pass
    data = json.loads(random_out)["data"]
    assert data["failures"] == [] and data["config"]["max-new-tokens"] is None
    # positions: the ignore_eos probe and its retry without it (transformers serve answers 422), then per
    # level its warm-up (max(1, concurrency)) and 2 repeats of 3 requests
    drawn = build_workload(
        {"dataset": "random", "random-input-len": 12, "random-output-len": 6, "random-range-ratio": 0.5},
        base=tmp_path,
        model=str(model),
        label=str,
    ).items(0, 17, seed=0)
    lens = [p.output_len or 0 for p in drawn]
    assert len(set(lens)) > 2 and min(lens) >= 3 and max(lens) <= 9  # [floor(6 x 0.5), ceil(6 x 1.5)]
    (srv,) = data["servers"]
    assert [[r["output_tokens"] for r in lv["repeats"]] for lv in srv["levels"]] == [
        [sum(lens[3:6]), sum(lens[6:9])],
        [sum(lens[11:14]), sum(lens[14:17])],
    ]
    assert all(r["failed"] == 0 and r["requests"] == 3 for lv in srv["levels"] for r in lv["repeats"])
    ds = data["method"]["dataset"]
    assert (ds["name"], ds["prompts"], ds["seed"], ds["off_target"]) == ("random", 17, 0, 0)
    assert ds["output_tokens"] == {"min": min(lens), "mean": round(sum(lens) / 17, 2), "max": max(lens)}
    assert ds["tokenizer"]["path"] == str(model / "tokenizer.json")
    assert data["config"]["dataset"]["random-range-ratio"] == 0.5
    trace = json.loads(trace_out)["data"]
    assert trace["failures"] == [] and trace["method"]["load"] == (
        "trace replay: each repeat sends the first 6 of the trace's 6 records, from a new pass, at their recorded "
        "times x 0.1, at most the level's concurrency in flight"
    )
    (lv,) = trace["servers"][0]["levels"]
    assert [(r["requests"], r["output_tokens"]) for r in lv["repeats"]] == [(6, 6 + 3 + 8 + 1 + 5 + 12)] * 2
    assert all(r["wall_s"] >= 0.3 for r in lv["repeats"])  # the last record is due 3000 ms x 0.1 after the first
    assert lv["send_lag_ms"]["n"] == 12
    tds = trace["method"]["dataset"]
    # probe and retry, 2 warm-ups (records 0-3 of pass 0), then passes 1 and 2: 6 + 6
    assert (tds["prompts"], tds["input_tokens"]["max"], tds["off_target"]) == (16, 700, 0)


@pytest.mark.slow
def test_a_run_stopped_by_sigterm_still_reports_the_repeats_it_completed(tmp_path: Path) -> None:
    """A real ``transformers serve`` measured at concurrency 1, 2 and 4; SIGTERM arrives once the
    first level's repeat is done (inside the second level, or at worst between levels): bench exits
    143, stops the server, and the report it writes holds exactly the repeats completed before,
    its first warning saying it is partial."""
    import signal
    import subprocess
    import sys

    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model")
    port = free_port()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "cpu.toml").write_text(RECIPE.format(model=model, port=port))
    out = tmp_path / "stopped.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envforge",
            "bench",
            str(venv_of(python)),
            "--project",
            str(tmp_path),
            "--recipe",
            "cpu",
            "--server",
            "baseline",
            "--concurrency",
            "1,2,4",
            "--repeats",
            "1",
            "--requests",
            "8",
            "--max-new-tokens",
            "32",
            "--output",
            str(out),
            "--no-plot",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2] / "src"), os.environ.get("PYTHONPATH", "")]),
        },
    )
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith("baseline: concurrency 1, repeat 1/1:"):
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    code = proc.wait(timeout=60)
    stderr = "".join(seen) + rest
    assert code == 128 + signal.SIGTERM, stderr
    assert f"warning: partial report (the repeats completed before the stop): {out}" in rest
    assert "stopped by signal SIGTERM" in rest
    data = json.loads(out.read_text())["data"]
    assert data["warnings"][0] == (
        "partial report: the run was stopped (SIGTERM); it holds only the repeats completed before"
    )
    (server,) = data["servers"]
    done = [int(m) for m in re.findall(r"^baseline: concurrency (\d+), repeat 1/1:", stderr, re.M)]
    assert [lv["concurrency"] for lv in server["levels"]] == done and done[0] == 1 and len(done) < 3
    assert server["levels"][0]["failed_requests"] == 0 and server["levels"][0]["repeats"][0]["requests"] == 8
    with pytest.raises(OSError):  # the server is stopped with the run
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


@pytest.mark.parametrize(
    ("flags", "message", "hint"),
    [
        (
            ["--output", "{d}/r.png"],
            "--output {d}/r.png: the plot would be written over the report",
            "give the report a .json name, --plot PATH elsewhere, or --no-plot",
        ),
        (
            ["--output", "{d}/q.json", "--plot", "{d}/q.json"],
            "--output {d}/q.json: the plot would be written over the report",
            "give the report a .json name, --plot PATH elsewhere, or --no-plot",
        ),
        (
            ["--prompts", "{d}/p.jsonl", "--output", "{d}/p.jsonl"],
            "--output {d}/p.jsonl is the --prompts file: the run would write over its own input",
            "write the report elsewhere",
        ),
        (
            ["--prompts", "{d}/p.jsonl", "--plot", "{d}/p.jsonl"],
            "--plot {d}/p.jsonl is the --prompts file: the run would write over its own input",
            "write the plot elsewhere",
        ),
        (
            ["--dataset", "trace", "--trace", "{d}/p.jsonl", "--output", "{d}/p.jsonl", "--no-plot"],
            "--output {d}/p.jsonl is the --trace file: the run would write over its own input",
            "write the report elsewhere",
        ),
        (
            ["--output", "/proc/envforge-test/r.json"],
            "--output /proc/envforge-test/r.json: cannot write in /proc/envforge-test: No such file or directory",
            "give --output a path in a writable directory",
        ),
        (
            ["--output", "{d}/r.json", "--csv", "{d}/r.json"],
            "--csv {d}/r.json: the records would be written over the report or the plot",
            "give the CSV a .csv name of its own",
        ),
        (
            ["--output", "{d}/r.json", "--csv", "{d}/r.png"],
            "--csv {d}/r.png: the records would be written over the report or the plot",
            "give the CSV a .csv name of its own",
        ),
        (
            ["--prompts", "{d}/p.jsonl", "--csv", "{d}/p.jsonl"],
            "--csv {d}/p.jsonl is the --prompts file: the run would write over its own input",
            "write the CSV elsewhere",
        ),
        (
            ["--csv", "/proc/envforge-test/r.csv"],
            "--csv /proc/envforge-test/r.csv: cannot write in /proc/envforge-test: No such file or directory",
            "give --csv a path in a writable directory",
        ),
        (["--csv", "{d}"], "--csv {d}: is a directory", "give --csv a file name, e.g. {d}/bench.csv"),
    ],
)
def test_outputs_that_would_be_lost_or_overwrite_an_input_are_refused_before_measuring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str, hint: str
) -> None:
    """Refused with exit 2 before the URL is even asked (nothing listens on port 9), and nothing written."""
    (tmp_path / "p.jsonl").write_text('{"prompt": "a"}\n')
    (tmp_path / "file").write_text("a file, not a directory")
    d = str(tmp_path)
    assert main(["bench", "--url", "http://127.0.0.1:9", *[f.format(d=d) for f in flags]]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[:2] == [f"error: {message.format(d=d)}", f"  hint: {hint.format(d=d)}"]
    assert (tmp_path / "p.jsonl").read_text() == '{"prompt": "a"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "p.jsonl"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--seed", "4294967296"], "argument --seed: must be an integer from 0 to 4294967295, got '4294967296'"),
        (
            ["--concurrency", "1,100001"],
            "argument --concurrency/--max-concurrency: '1,100001': concurrency levels must be <= 100000",
        ),
        (
            ["--percentiles", "50,0"],
            "--percentiles '50,0': '0' is not a percentile (a number above 0, at most 100)\n"
            "  hint: give numbers separated by commas, e.g. --percentiles 50,90,99,99.9",
        ),
    ],
)
def test_a_seed_or_concurrency_out_of_range_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert main(["bench", "--url", "http://127.0.0.1:9", *flags]) == 2
    assert f"error: {message}" in capsys.readouterr().err


def test_compare_says_when_a_report_is_partial(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = Path(__file__).parents[2] / "docs" / "bench"
    doc = json.loads((docs / "cpu-demo.json").read_text())
    doc["data"]["warnings"] = [
        "partial report: the run was stopped (SIGTERM); it holds only the repeats completed before",
        *doc["data"]["warnings"],
    ]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(doc))
    assert main(["bench", "compare", str(partial), str(docs / "cpu-demo-b.json"), "--allow-different-env"]) == 0
    err = capsys.readouterr().err
    assert (
        f"warning: {partial} is a partial report (the run was stopped): its levels may have fewer repeats than "
        "its settings say, and servers or levels it did not reach are missing"
    ) in err
    assert err.count("is a partial report") == 1


NATURAL_RECIPE = (
    """
[recipe]
name = "cpu"
python = "3.11"

[verify.smoke]
model = "{model}"
api = "openai"
port = {port}
max-new-tokens = 8
concurrency = [1, 2]
repeats = 2
requests = 2
warmup = 1
load-timeout-s = 300

[[verify.smoke.servers]]
name = "stops-early"
"""
    + TRANSFORMERS_SERVE_TOML
)


def test_natural_output_lengths_complete_requests_that_stop_early_on_a_real_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--output-lengths natural`` (vLLM's default): the real server's model stops at once (the
    exact mode's failing case in the test above); no ignore_eos is asked, every request completes
    with the tokens it got, the levels have figures and the report says which mode it used."""
    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model", stops_at_once=True)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "cpu.toml").write_text(NATURAL_RECIPE.format(model=model, port=free_port()))
    out = tmp_path / "n.json"
    code = main(
        [
            "bench",
            str(venv_of(python)),
            "--project",
            str(tmp_path),
            "--recipe",
            "cpu",
            "--output",
            str(out),
            "--no-plot",
            "--output-lengths",
            "natural",
        ]
    )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    data = json.loads(out.read_text())["data"]
    assert data["failures"] == [] and data["config"]["output-lengths"] == "natural"
    assert data["method"]["output_lengths"].startswith("natural: no ignore_eos;")
    (srv,) = data["servers"]
    assert srv["ignore_eos"] is False  # not asked, so not probed: no "rejects ignore_eos" warning
    assert "ignore_eos" not in stderr and not any("ignore_eos" in w for w in data["warnings"])
    for lv in srv["levels"]:
        assert lv["failed_requests"] == 0 and lv["token_count"] == "server"
        outputs = [r["output_tokens"] for r in lv["repeats"]]
        assert len(outputs) == 2 and all(0 <= n < 2 * 8 for n in outputs)  # 2 requests, each fewer than 8 tokens
        assert lv["e2e_ms"]["median"] > 0 and lv["req_s"]["median"] > 0
    assert "FAILED" not in stdout


def test_natural_lengths_from_a_sharegpt_file_ask_for_each_replys_tokens_on_a_real_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's ``--dataset-name sharegpt`` rule in natural mode: each request's max_tokens is its
    reply's length in the model's tokens (the tiny model's word-level tokenizer.json: one token a
    word), pairs vLLM leaves out are left out with a warning; the model never stops early, so every
    request yields exactly its reply's length."""
    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model")
    replies = {
        "the cache holds keys": "values of earlier tokens are kept",
        "a drafter proposes tokens": "the target verifies them",
        "short": "too short a prompt: left out",
        "why batch the requests": "to fill the device",
    }
    (tmp_path / "sharegpt.json").write_text(
        json.dumps(
            [
                {"conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]}
                for q, a in replies.items()
            ]
        )
    )
    (tmp_path / "recipes").mkdir()
    recipe = NATURAL_RECIPE.replace("max-new-tokens = 8\n", 'prompts = "../sharegpt.json"\n').replace(
        '"stops-early"', '"sharegpt"'
    )
    (tmp_path / "recipes" / "cpu.toml").write_text(recipe.format(model=model, port=free_port()))
    out = tmp_path / "s.json"
    code = main(
        [
            "bench",
            str(venv_of(python)),
            "--project",
            str(tmp_path),
            "--recipe",
            "cpu",
            "--output",
            str(out),
            "--no-plot",
            "--output-lengths",
            "natural",
            "--save-detailed",
        ]
    )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert (
        "natural lengths from a ShareGPT file: 1 of 4 prompts left out as vLLM leaves them out (prompt or reply "
        "under 4 tokens, prompt over 1,024, both over 2,048)"
    ) in stderr
    data = json.loads(out.read_text())["data"]
    assert data["config"]["max-new-tokens"] is None and data["failures"] == []
    assert data["method"]["dataset"]["output_tokens"] == {"min": 4, "max": 6, "total": 14}
    kept = [(q, a) for q, a in replies.items() if q != "short"]  # renumbered 0, 1, 2 in file order
    recs = data["requests"]
    assert len(recs) == 2 * 2 * 2 and all(r["ok"] for r in recs)
    for r in recs:
        q, a = kept[r["prompt_id"]]
        assert r["asked_tokens"] == r["output_tokens"] == len(a.split())
        # its prompt's tokens in the first pass over the set; later passes tag the text ("[2] ..."): not counted
        assert r["input_tokens"] in (len(q.split()), None)


def test_chat_completions_with_an_api_key_on_a_real_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``api = "openai-chat"`` (vLLM's ``--backend openai-chat``): a real ``transformers serve``
    renders each prompt with the model's chat template and streams ``delta`` chunks (the role
    first, then content); every request yields its 8 tokens, and the API key from
    ``OPENAI_API_KEY`` is nowhere in the report, its logs or the output."""
    key = "sk-envforge-test-5f1d2c9a"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model")
    (tmp_path / "recipes").mkdir()
    recipe = NATURAL_RECIPE.replace('api = "openai"', 'api = "openai-chat"').replace('"stops-early"', '"chat"')
    (tmp_path / "recipes" / "cpu.toml").write_text(recipe.format(model=model, port=free_port()))
    out = tmp_path / "c.json"
    code = main(
        [
            "bench",
            str(venv_of(python)),
            "--project",
            str(tmp_path),
            "--recipe",
            "cpu",
            "--output",
            str(out),
            "--no-plot",
            "--header",
            "X-Envforge-Test=chat",
            "--csv",
            str(tmp_path / "c.csv"),
        ]
    )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    text = out.read_text()
    data = json.loads(text)["data"]
    # --csv: one record per measured request (2 levels x 2 repeats x 2 requests), in the report and the CSV
    recs = data["requests"]
    assert [(r["concurrency"], r["repeat"], r["index"]) for r in recs] == [
        (c, rep, i) for c in (1, 2) for rep in (1, 2) for i in (0, 1)
    ]
    assert all(r["ok"] and r["output_tokens"] == r["asked_tokens"] == 8 and r["server"] == "chat" for r in recs)
    assert all(r["ttft_ms"] <= r["e2el_ms"] <= r["e2e_ms"] and len(r["itl_ms"]) >= 2 for r in recs)
    rows = (tmp_path / "c.csv").read_text().splitlines()
    assert len(rows) == 1 + 8 and rows[0].startswith(
        "server,concurrency,request_rate,repeat,index,prompt_id,turn,sent_ms"
    )
    assert data["config"]["api"] == "openai-chat" and data["failures"] == []
    (srv,) = data["servers"]
    for lv in srv["levels"]:
        assert [r["output_tokens"] for r in lv["repeats"]] == [16, 16] and lv["token_count"] == "server"
        # 2 repeats x 2 requests, each: the role chunk, 1-8 content chunks, the finish chunk: 2-9 gaps
        assert 4 * 2 <= lv["latency"]["itl_ms"]["n"] <= 4 * 9 and lv["ttft_ms"]["median"] > 0
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.log"))
    for seen in (text, stdout, stderr, logs):
        assert key not in seen and "X-Envforge-Test" not in seen


def test_a_multi_turn_chat_run_on_a_real_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--turns 3`` on a real ``transformers serve`` through ``/v1/chat/completions``: each
    conversation's user turns in order, each with the conversation so far and the server's own
    replies; the server's own count of the input tokens grows from turn to turn; figures per turn."""
    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model")
    talks = [
        ["the cache holds keys", "and what of values", "why keep them at all"],
        ["a drafter proposes tokens", "who checks them"],
        ["why batch the requests", "on one device", "at what cost"],
    ]
    (tmp_path / "sharegpt.json").write_text(
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
    (tmp_path / "recipes").mkdir()
    recipe = (
        NATURAL_RECIPE.replace('api = "openai"', 'api = "openai-chat"')
        .replace("max-new-tokens = 8\n", 'max-new-tokens = 4\nprompts = "../sharegpt.json"\nturns = 3\n')
        .replace("concurrency = [1, 2]", "concurrency = [2]")
        .replace('"stops-early"', '"talk"')
    )
    (tmp_path / "recipes" / "cpu.toml").write_text(recipe.format(model=model, port=free_port()))
    out = tmp_path / "t.json"
    argv = ["bench", str(venv_of(python)), "--project", str(tmp_path), "--recipe", "cpu", "--output", str(out)]
    code = main([*argv, "--no-plot", "--save-detailed"])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    data = json.loads(out.read_text())["data"]
    assert data["config"]["turns"] == 3 and data["failures"] == []
    recs = data["requests"]
    # 2 repeats x 2 conversations (requests = 2), each with all of its turns, in conversation order
    by_talk: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in recs:
        assert r["ok"] and r["output_tokens"] == r["asked_tokens"] == 4
        by_talk.setdefault((r["repeat"], r["prompt_id"]), []).append(r)
    assert len(by_talk) == 4
    for (_, pid), turns in by_talk.items():
        assert [r["turn"] for r in turns] == list(range(1, len(talks[pid]) + 1))
        sizes = [r["prompt_tokens"] for r in turns]  # the server's count: the history is sent
        assert all(isinstance(n, int) for n in sizes) and sizes == sorted(set(sizes)), sizes
    (lv,) = data["servers"][0]["levels"]
    assert [t["turn"] for t in lv["turns"]] == [1, 2, 3][: len(lv["turns"])] and len(lv["turns"]) >= 2
    assert sum(t["requests"] for t in lv["turns"]) == len(recs)
    assert lv["turns"][0]["latency"]["ttft_ms"]["n"] == lv["turns"][0]["requests"]
    assert "ttft turn 2" in stdout and "e2el turn 2" in stdout
