"""``envforge bench`` end to end: a real ``transformers serve`` process on a tiny model made here,
real HTTP, real generated tokens; ``--url`` against a server replaying SGLang's EAGLE-3 stream."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from bench_support import make_tiny_model, replay_server, server_python, venv_of

from envforge.cli import main

RECIPE = '''
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
args = ["-m", "transformers.cli.transformers", "serve", "{{model}}", "--host", "{{host}}", "--port", "{{port}}",
        "--device", "cpu"]
env = {{ HF_HUB_OFFLINE = "1", OMP_NUM_THREADS = "1" }}

[[verify.smoke.servers]]
name = "prompt-lookup"
speculative = true
model = "{model}-pld"
args = ["-m", "transformers.cli.transformers", "serve", "{{model}}", "--host", "{{host}}", "--port", "{{port}}",
        "--device", "cpu"]
env = {{ HF_HUB_OFFLINE = "1", OMP_NUM_THREADS = "1" }}
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line contains ``text`` (read from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.slow
def test_bench_starts_measures_and_stops_a_real_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    python = server_python()
    if python is None:
        pytest.skip("transformers serve is not installed (pip install -e '.[bench-test]')")
    model = make_tiny_model(tmp_path / "model")
    # transformers' prompt-lookup decoding (n-gram speculative decoding), on by generation config
    pld = make_tiny_model(tmp_path / "model-pld")
    (pld / "generation_config.json").write_text('{"bos_token_id": 1, "prompt_lookup_num_tokens": 3}')
    port = free_port()
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "cpu.toml").write_text(RECIPE.format(model=model, port=port))
    out = tmp_path / "out" / "a.json"
    code = main(["bench", str(venv_of(python)), "--project", str(tmp_path), "--recipe", "cpu", "--output", str(out)])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "envforge.bench/1"
    base, spec = doc["data"]["servers"]
    assert (base["name"], base["speculative"], spec["name"], spec["speculative"]) == \
        ("baseline", False, "prompt-lookup", True)
    assert base["argv"][:5] == [str(python), "-m", "transformers.cli.transformers", "serve", str(model)]
    assert spec["argv"][4] == str(pld) and base["load_s"] > 0
    for srv in (base, spec):
        assert [lv["concurrency"] for lv in srv["levels"]] == [1, 2]
        for lv in srv["levels"]:
            assert lv["tok_s"]["n"] == 2 and lv["tok_s"]["median"] > 0
            assert lv["ttft_ms"]["median"] > 0 and lv["itl_ms"]["median"] > 0 and lv["accept_length"] is None
            assert [r["output_tokens"] for r in lv["repeats"]] == [16, 16]  # 2 requests x 8 tokens, every repeat
    assert "'baseline' ready after" in stderr and "prompt-lookup: concurrency 2, repeat 2/2:" in stderr
    assert stdout.splitlines()[0].split()[:3] == ["server", "conc", "tok/s"]
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
    # the same report compared with itself: ratio 1; with another fingerprint: refused
    assert main(["bench", "compare", str(out), str(out)]) == 0
    assert "no clear change" in capsys.readouterr().out
    doc["data"]["fingerprint"]["lock_digest"] = "sha256:00"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    assert main(["bench", "compare", str(out), str(tmp_path / "b.json")]) == 2
    assert "lock_digest: None != sha256:00" in capsys.readouterr().err


URL_RECIPE = '''
[recipe]
name = "url"
python = "3.12"

[verify.smoke]
model = "default"
concurrency = [1, 2]
repeats = 2
requests = 2
warmup = 0
'''


def test_bench_url_measures_a_running_sglang_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "url.toml").write_text(URL_RECIPE)
    out = tmp_path / "spec.json"
    with replay_server({"/generate": "sglang_generate_stream_eagle3.sse"}, gap_s=0.002) as url:
        code = main(["bench", "--url", url, "--name", "eagle3", "--speculative", "--project", str(tmp_path),
                     "--recipe", "url", "--output", str(out), "--no-plot", "--json"])
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


SG_RECIPE = '''
[recipe]
name = "sg"
python = "3.12"

[verify.smoke]
model = "default"
port = {port}
concurrency = [1, 2]
repeats = 2
requests = 2
warmup = 1
load-timeout-s = 60

[[verify.smoke.servers]]
name = "baseline"
args = ["{script}", "{{port}}", "0.01", "/generate=sglang_generate_stream.sse"]

[[verify.smoke.servers]]
name = "eagle3"
speculative = true
args = ["{script}", "{{port}}", "0.02", "/generate=sglang_generate_stream_eagle3.sse",
        "--enable-flashinfer-allreduce-fusion"]
'''


def test_bench_runs_each_configuration_computes_break_even_and_warns_inert_patches(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two server processes started by envforge with the environment's interpreter, streaming SGLang
    bodies (plain and EAGLE-3); the environment has a patch applied whose flag one of them lacks."""
    import sys

    import bench_support

    from envforge.patching.manifest import AppliedPatchset, Manifest, write_manifest

    env = tmp_path / "envs" / "sg-default"
    sp = env / "lib" / "python3.12" / "site-packages"
    sp.mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(sys.executable)
    write_manifest(sp, Manifest((AppliedPatchset("sm120-flashinfer-allreduce-fusion", "sha256:00", "sglang", "0.5.9",
                                                 "--enable-flashinfer-allreduce-fusion"),)))
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "sg.toml").write_text(SG_RECIPE.format(port=free_port(), script=bench_support.__file__))
    out = tmp_path / "sg.json"
    code = main(["bench", "--project", str(tmp_path), "--recipe", "sg", "--output", str(out), "--no-plot"])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert ("warning: server 'baseline': patchset 'sm120-flashinfer-allreduce-fusion' is applied but inert: "
            "the launch arguments lack --enable-flashinfer-allreduce-fusion") in stderr
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
    assert data["warnings"] == ["server 'baseline': patchset 'sm120-flashinfer-allreduce-fusion' is applied but "
                                "inert: the launch arguments lack --enable-flashinfer-allreduce-fusion"]


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
