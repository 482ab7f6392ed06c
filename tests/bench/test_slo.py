"""SLO targets and goodput (vLLM's definition), and the gate: exit 1 against a real ``transformers serve``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.bench_support import TRANSFORMERS_SERVE_TOML, make_tiny_model, transformers_serve_python, venv_of
from tests.support.vllm_support import free_port

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.result import level_result
from envforge.bench.slo import Goodput, Slo, goodput, parse_slo
from envforge.cli import main
from envforge.core.errors import InputError


def req(ttft: float, tpot: float | None, e2el: float, ok: bool = True) -> RequestResult:
    return RequestResult(ok=ok, output_tokens=8, e2e_s=e2el, ttft_s=ttft, tpot_s=tpot, e2el_s=e2el)


def test_parse_slo_takes_vllms_goodput_keys() -> None:
    assert parse_slo(["ttft:200", "tpot:50"]) == Slo({"ttft": 200.0, "tpot": 50.0}, 0.9)
    assert parse_slo(["ttft:0.5", "tpot:.25", "e2el:7."]) == Slo({"ttft": 0.5, "tpot": 0.25, "e2el": 7.0}, 0.9)
    assert parse_slo(["ttft:200 e2el:1500"], 0.99).as_dict() == {
        "targets_ms": {"ttft": 200.0, "e2el": 1500.0},
        "attainment": 0.99,
    }


@pytest.mark.parametrize(
    ("items", "attainment", "message"),
    [
        (["itl:5"], 0.9, "--slo itl:5: expected METRIC:MS with METRIC one of ttft, tpot, e2el"),
        (["ttft"], 0.9, "--slo ttft: expected METRIC:MS with METRIC one of ttft, tpot, e2el"),
        (["ttft:fast"], 0.9, "--slo ttft:fast: the target must be a positive number of milliseconds"),
        (["ttft:0"], 0.9, "--slo ttft:0: the target must be a positive number of milliseconds"),
        (["ttft:inf"], 0.9, "--slo ttft:inf: the target must be a positive number of milliseconds"),
        (["ttft:1_0"], 0.9, "--slo ttft:1_0: the target must be a positive number of milliseconds"),
        (["ttft:1e3"], 0.9, "--slo ttft:1e3: the target must be a positive number of milliseconds"),
        (["ttft:nan"], 0.9, "--slo ttft:nan: the target must be a positive number of milliseconds"),
        (["ttft:1", "ttft:2"], 0.9, "--slo: 'ttft' is given twice (1 and 2)"),
        (["ttft:1"], 0.0, "--slo-attainment 0: must be a fraction in (0, 1]"),
    ],
)
def test_parse_slo_refuses_bad_targets(items: list[str], attainment: float, message: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_slo(items, attainment)
    assert exc.value.message == message


def test_goodput_counts_requests_meeting_every_target() -> None:
    slo = Slo({"ttft": 200.0, "tpot": 50.0})
    results = [
        req(0.1, 0.04, 1.0),
        req(0.3, 0.01, 1.0),
        req(0.2, 0.05, 1.0),  # good, ttft too slow, good (<=)
        req(0.1, None, 0.1),  # one token: TPOT 0 for the SLO, as vLLM's all_tpots
        req(0.1, 0.06, 1.0),
        req(9.0, 9.0, 9.0, ok=False),
    ]  # tpot too slow; failed: not counted
    g = goodput(results, 2.0, slo)
    assert g == Goodput(good=3, completed=5, req_s=1.5, attained=0.6, met=False)
    assert g.as_dict() == {"good": 3, "completed": 5, "req_s": 1.5, "attained": 0.6, "met": False}
    assert Goodput.from_dict(g.as_dict()) == g
    assert goodput(results, 2.0, Slo({"e2el": 5000.0})) == Goodput(5, 5, 2.5, 1.0, True)
    assert goodput(results, 2.0, Slo()) is None and goodput([], 1.0, slo) is None


def test_level_goodput_is_over_every_repeat() -> None:
    runs = [LevelRun(2, (req(0.1, 0.01, 0.5), req(0.1, 0.01, 0.5)), 1.0), LevelRun(2, (req(0.5, 0.01, 0.9),), 1.0)]
    lv = level_result(2, runs, slo=Slo({"ttft": 200.0}, attainment=0.5))
    assert lv.goodput == Goodput(2, 3, 1.0, 2 / 3, True)
    assert lv.as_dict()["goodput"] == {"good": 2, "completed": 3, "req_s": 1.0, "attained": 0.6667, "met": True}
    assert level_result(2, runs).goodput is None


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
concurrency = [1]
repeats = 1
requests = 3
warmup = 1
load-timeout-s = 300

[[verify.smoke.servers]]
name = "baseline"
"""
    + TRANSFORMERS_SERVE_TOML
)


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        (["--slo", "foo:3"], "--slo foo:3: expected METRIC:MS with METRIC one of ttft, tpot, e2el"),
        (["--prompts", "{tmp}/missing.jsonl"], "prompt set {tmp}/missing.jsonl does not exist"),
        (["--slo-attainment", "0.5"], "--slo-attainment 0.5 without --slo: there is no target to attain"),
    ],
)
def test_bad_slo_or_prompts_is_refused_before_the_recipe_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str], message: str
) -> None:
    """The recipe has no [verify.smoke]; the bad flag is still what is reported, so it is fixed first."""
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text('[recipe]\nname = "r"\npython = "3.12"\n')
    code = main(["bench", "--project", str(tmp_path), "--recipe", "r", *(f.format(tmp=tmp_path) for f in flag)])
    stderr = capsys.readouterr().err
    assert code == 2, stderr
    assert stderr.splitlines()[0] == "error: " + message.format(tmp=tmp_path)


@pytest.mark.slow
def test_a_missed_slo_gate_exits_1_on_a_real_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A TTFT target of 1 microsecond no real server meets; a TPOT target of 100 s every one does."""
    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model")
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "cpu.toml").write_text(RECIPE.format(model=model, port=free_port()))
    out = tmp_path / "a.json"
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
            "--slo",
            "ttft:0.001",
            "tpot:100000",
        ]
    )
    stdout, stderr = capsys.readouterr()
    assert code == 1, stderr
    data = json.loads(out.read_text())["data"]
    assert data["config"]["slo"] == {"targets_ms": {"ttft": 0.001, "tpot": 100000.0}, "attainment": 0.9}
    (lv,) = data["servers"][0]["levels"]
    assert lv["goodput"] == {"good": 0, "completed": 3, "req_s": 0.0, "attained": 0.0, "met": False}
    assert "goodput baseline @ 1: 0 of 3 requests met the SLO (0.0%), 0.00 req/s: MISSED" in stdout
    assert (
        "error: the SLO gate failed:\n  server 'baseline', concurrency 1: 0 of 3 requests (0.0%) met "
        "ttft <= 0.001 ms, tpot <= 100000 ms; the gate needs 90%"
    ) in stderr
