"""The saturation sweep's rule (envforge.bench.sweep) as a pure function: literal rate sequences for a
server whose SLO holds up to a threshold, the outcomes, the result lines and the JSON; the flags
refused with exit 2; and a sweep of a real ``transformers serve`` on CPU, which saturates at a few
requests/s."""

from __future__ import annotations

from pathlib import Path

import json

import pytest
from tests.support.bench_support import TRANSFORMERS_SERVE_TOML, make_tiny_model, transformers_serve_python, venv_of
from tests.support.vllm_support import free_port

from envforge.bench.sweep import RateSweep, SweepResult, next_rate, parse_range, run_sweep
from envforge.cli import main


def sweep(spec: RateSweep, threshold: float) -> SweepResult:
    """The sweep of a server that meets the SLO at every rate up to ``threshold`` and at none above."""
    return SweepResult("baseline", 8, spec, run_sweep(spec, lambda rate: rate <= threshold))


@pytest.mark.parametrize(
    ("spec", "threshold", "rates", "outcome", "best", "worst"),
    [
        # doubling 0.5, 1, 2; 2 fails: bisection 1.5, 1.75, 1.625; 1.75 - 1.625 <= 10 % of 1.625
        (RateSweep(0.5, 8.0), 1.7, [0.5, 1.0, 2.0, 1.5, 1.75, 1.625], "found", 1.625, 1.75),
        (RateSweep(0.5, 8.0), 0.3, [0.5], "low-fails", None, 0.5),
        (RateSweep(0.5, 8.0), 100.0, [0.5, 1.0, 2.0, 4.0, 8.0], "high-passes", 8.0, None),
        # the last doubling clamped to HI
        (RateSweep(1.0, 10.0), 100.0, [1.0, 2.0, 4.0, 8.0, 10.0], "high-passes", 10.0, None),
        # 10 - 9 is above 10 % of 9: one more bisection
        (RateSweep(1.0, 10.0), 9.0, [1.0, 2.0, 4.0, 8.0, 10.0, 9.0, 9.5], "found", 9.0, 9.5),
        (RateSweep(1.0, 10.0), 5.1, [1.0, 2.0, 4.0, 8.0, 6.0, 5.0, 5.5], "found", 5.0, 5.5),
        # the step cap ends it: with a bracket, and while still doubling
        (RateSweep(1.0, 10.0, 0.1, 5), 5.1, [1.0, 2.0, 4.0, 8.0, 6.0], "step-cap", 4.0, 6.0),
        (RateSweep(1.0, 1000.0, 0.1, 4), 100.0, [1.0, 2.0, 4.0, 8.0], "step-cap", 8.0, None),
        # a coarser precision stops earlier: 2 - 1 <= 100 % of 1
        (RateSweep(0.5, 8.0, 1.0), 1.7, [0.5, 1.0, 2.0], "found", 1.0, 2.0),
        # rates kept to 6 significant digits: 0.1 x 2 x 2 ... and midpoints stay short
        (RateSweep(0.1, 3.0), 0.7, [0.1, 0.2, 0.4, 0.8, 0.6, 0.7, 0.75], "found", 0.7, 0.75),
        (
            RateSweep(0.3, 1.0, 0.01),
            0.35,
            [0.3, 0.6, 0.45, 0.375, 0.3375, 0.35625, 0.346875, 0.351562, 0.349218],
            "found",
            0.349218,
            0.351562,
        ),
    ],
)
def test_rate_sequences(
    spec: RateSweep, threshold: float, rates: list[float], outcome: str, best: float | None, worst: float | None
) -> None:
    result = sweep(spec, threshold)
    assert [r for r, _ in result.levels] == rates
    assert (result.outcome, result.highest_passing_rate, result.lowest_failing_rate) == (outcome, best, worst)
    assert len(result.levels) <= spec.max_steps


def test_next_rate_reads_only_the_history() -> None:
    spec = RateSweep(0.5, 8.0)
    assert next_rate(spec, []) == 0.5
    assert next_rate(spec, [(0.5, True)]) == 1.0
    assert next_rate(spec, [(0.5, True), (1.0, False)]) == 0.75
    assert next_rate(spec, [(0.5, False)]) is None
    assert next_rate(RateSweep(0.5, 8.0, max_steps=1), [(0.5, True)]) is None


@pytest.mark.parametrize(
    ("spec", "threshold", "line"),
    [
        (
            RateSweep(0.5, 8.0),
            1.7,
            "sweep 'baseline' (concurrency 8): 1.625 requests/s is the highest rate that met the "
            "SLO; 1.75 missed it (within 10% after 6 levels)",
        ),
        (
            RateSweep(0.5, 8.0),
            0.3,
            "sweep 'baseline' (concurrency 8): the lowest rate, 0.5 requests/s, already missed the "
            "SLO: no rate in 0.5..8 meets it",
        ),
        (
            RateSweep(0.5, 8.0),
            100.0,
            "sweep 'baseline' (concurrency 8): the highest rate, 8 requests/s, still met the SLO: "
            "the limit lies above it",
        ),
        (
            RateSweep(1.0, 10.0, 0.1, 5),
            5.1,
            "sweep 'baseline' (concurrency 8): 4 requests/s is the highest rate that met "
            "the SLO, 6 missed it; the step cap (5 levels) ended the search before 10%",
        ),
        (
            RateSweep(1.0, 1000.0, 0.1, 4),
            100.0,
            "sweep 'baseline' (concurrency 8): 8 requests/s is the highest rate that "
            "met the SLO and none missed it yet; the step cap (4 levels) ended the "
            "search below 1000",
        ),
    ],
)
def test_result_lines(spec: RateSweep, threshold: float, line: str) -> None:
    assert sweep(spec, threshold).line() == line


def test_result_json_round_trips() -> None:
    result = sweep(RateSweep(1.0, 10.0, 0.1, 5), 5.1)
    d = result.as_dict()
    assert d == {
        "server": "baseline",
        "concurrency": 8,
        "low": 1.0,
        "high": 10.0,
        "precision": 0.1,
        "max_steps": 5,
        "levels": [
            {"request_rate": 1.0, "met": True},
            {"request_rate": 2.0, "met": True},
            {"request_rate": 4.0, "met": True},
            {"request_rate": 8.0, "met": False},
            {"request_rate": 6.0, "met": False},
        ],
        "highest_passing_rate": 4.0,
        "lowest_failing_rate": 6.0,
        "outcome": "step-cap",
        "line": result.line(),
    }
    assert SweepResult.from_dict(d) == result
    assert RateSweep(0.5, 16.0).as_dict() == {"low": 0.5, "high": 16.0, "precision": 0.1, "max-steps": 12}
    with pytest.raises(TypeError, match="'sweep.levels' must be an array"):
        SweepResult.from_dict({**d, "levels": None})


def test_parse_range() -> None:
    assert parse_range("0.5:16") == (0.5, 16.0) and parse_range(".25:2.") == (0.25, 2.0)
    for text in ("16", "0:4", "-1:4", "1e3:2e3", "1:inf", "nan:4", "1_0:20", "a:b", "1:2:3", " 1:2"):
        with pytest.raises(ValueError, match="is not LO:HI in requests/s, e.g. 0.5:16"):
            parse_range(text)
    with pytest.raises(ValueError, match="'4:4': LO must be below HI, e.g. 0.5:16"):
        parse_range("4:4")


RECIPE = """
[recipe]
name = "r"
python = "3.12"

[verify.smoke]
model = "m"
concurrency = [1, 4]
"""


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--sweep-rate", "1:4"], "--sweep-rate needs --slo: the sweep looks for the highest rate that meets it"),
        (["--sweep-precision", "0.2"], "--sweep-precision without --sweep-rate: there is no sweep to tune"),
        (
            ["--sweep-steps", "3", "--sweep-precision", "0.2"],
            "--sweep-precision and --sweep-steps without --sweep-rate: there is no sweep to tune",
        ),
        (
            ["--sweep-rate", "1:4", "--slo", "ttft:100"],
            "--sweep-rate measures one concurrency cap, but 2 levels are set (1, 4)",
        ),
        (
            ["--sweep-rate", "1:4", "--slo", "ttft:100", "--concurrency", "4", "--request-rate", "2"],
            "--sweep-rate and --request-rate 2 contradict each other: the sweep picks the rates",
        ),
        (
            ["--sweep-rate", "1:4", "--slo", "ttft:100", "--concurrency", "4", "--interleave"],
            "--sweep-rate cannot interleave servers: each rate is chosen from the levels before it",
        ),
    ],
)
def test_sweep_flags_are_refused_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "r.toml").write_text(RECIPE)
    assert main(["bench", "--project", str(tmp_path), "--recipe", "r", *flags]) == 2
    assert capsys.readouterr().err.splitlines()[0] == f"error: {message}"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("4:1", "argument --sweep-rate: '4:1': LO must be below HI, e.g. 0.5:16"),
        ("fast", "argument --sweep-rate: 'fast' is not LO:HI in requests/s, e.g. 0.5:16"),
    ],
)
def test_a_bad_sweep_range_is_a_usage_error(capsys: pytest.CaptureFixture[str], value: str, message: str) -> None:
    assert main(["bench", "--sweep-rate", value]) == 2
    assert message in capsys.readouterr().err


SERVE_RECIPE = (
    """
[recipe]
name = "cpu"
python = "3.11"

[verify.smoke]
model = "{model}"
api = "openai"
port = {port}
max-new-tokens = 32
repeats = 1
warmup = 1
load-timeout-s = 300

[[verify.smoke.servers]]
name = "baseline"
"""
    + TRANSFORMERS_SERVE_TOML
)


@pytest.mark.slow
def test_a_sweep_finds_where_a_real_server_stops_meeting_the_slo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """transformers serve (a 4-layer tiny Llama, one thread, on a 2-core machine other jobs share) handles
    one request at a time in tens of ms and 24 at once in about 12 times that: the E2EL target is 6 times
    its median alone, measured first, so the machine's load on the day scales both sides alike."""
    python = transformers_serve_python()
    model = make_tiny_model(tmp_path / "model", hidden=128, layers=4)
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "cpu.toml").write_text(SERVE_RECIPE.format(model=model, port=free_port()))
    common = ["bench", str(venv_of(python)), "--project", str(tmp_path), "--recipe", "cpu"]
    assert (
        main([*common, "--output", str(tmp_path / "alone.json"), "--no-plot", "--concurrency", "1", "--requests", "5"])
        == 0
    )
    alone = json.loads((tmp_path / "alone.json").read_text())["data"]["servers"][0]["levels"][0]
    target = round(6 * alone["latency"]["e2el_ms"]["median"])
    capsys.readouterr()
    out = tmp_path / "sweep.json"
    code = main(
        [
            *common,
            "--output",
            str(out),
            "--concurrency",
            "24",
            "--requests",
            "24",
            "--sweep-rate",
            "1:256",
            "--sweep-precision",
            "0.25",
            "--slo",
            f"e2el:{target}",
        ]
    )
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr[-3000:]
    data = json.loads(out.read_text())["data"]
    (sweep,) = data["sweep"]
    history = [(x["request_rate"], x["met"]) for x in sweep["levels"]]
    spec = RateSweep(1.0, 256.0, 0.25, 12)
    assert [r for r, _ in history] == [next_rate(spec, history[:i]) for i in range(len(history))]  # the rule
    assert next_rate(spec, history) is None and history[0] == (1.0, True)
    assert sweep["outcome"] in ("found", "step-cap"), sweep["line"]  # 24 at once missed E2EL <= 6 x alone
    best, worst = sweep["highest_passing_rate"], sweep["lowest_failing_rate"]
    assert 1.0 <= best < worst <= 256.0
    (srv,) = data["servers"]
    assert [(lv["concurrency"], lv["request_rate"]) for lv in srv["levels"]] == [(24, r) for r, _ in history]
    assert [lv["goodput"]["met"] and not lv["failed_requests"] for lv in srv["levels"]] == [m for _, m in history]
    assert data["config"]["sweep-rate"] == {"low": 1.0, "high": 256.0, "precision": 0.25, "max-steps": 12}
    assert data["method"]["load"] == (
        "open loop: each level at its rate of the sweep (--sweep-rate 1:256), Poisson "
        "arrivals (seed 0), at most the level's concurrency in flight"
    )
    assert sweep["line"] in stdout and "baseline: sweep: 1 requests/s met the gate: " in stderr
    print(sweep["line"], f"(E2EL <= {target} ms)")
    # transformers serve has no metrics route: said once, no series
    assert srv["server_metrics"].startswith("not scraped: GET /metrics answered HTTP 404")
    assert stderr.count("server metrics not scraped") == 1
    assert out.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
