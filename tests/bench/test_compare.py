"""Comparing two bench reports: ratios, intervals, verdicts, refusals, and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tests.support.bench_reports import FP, one_level, report, summary, with_env

from envforge.bench.compare import compare
from envforge.bench.report import SCHEMA_VERSION, BenchReport
from envforge.bench.result import ServerResult
from envforge.bench.stats import Summary
from envforge.cli import main
from envforge.cli.output import envelope
from envforge.core.errors import InputError
from envforge.env.fingerprint import Fingerprint


def test_compare_same_environment_gives_ratios_with_intervals() -> None:
    a, b = report(), report(walls=[1.0, 1.05, 0.95])  # B twice as fast
    c = compare(a, b)
    rows = {r.server: r for r in c.rows}
    assert rows["baseline"].ratio == pytest.approx(2.0)
    assert rows["baseline"].ratio_low > 1.0 and rows["baseline"].verdict == "faster"
    assert compare(a, a).rows[0].verdict == "no clear change"
    assert compare(b, a).rows[0].verdict == "slower"
    assert c.env_differences == () and c.only_in_a == () and c.only_in_b == () and c.not_compared == ()


def test_compare_refuses_different_fingerprints_and_lists_them() -> None:
    other = replace(FP, lock_digest="sha256:cc", driver="590.10")
    with pytest.raises(InputError) as exc:
        compare(report(), report(fp=other))
    assert exc.value.message == (
        "the reports come from different or unknown environments; their numbers are not "
        "comparable:\n  lock_digest: sha256:aa != sha256:cc\n  driver: 580.65 != 590.10"
    )
    assert exc.value.hint == "compare anyway with --allow-different-env"
    allowed = compare(report(), report(fp=other), allow_different_env=True)
    assert allowed.env_differences == ("lock_digest: sha256:aa != sha256:cc", "driver: 580.65 != 590.10")


def test_cli_compare_refuses_then_allows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(envelope("bench", report().as_dict(), SCHEMA_VERSION)))
    b.write_text(json.dumps(envelope("bench", report(fp=replace(FP, gpu="H200")).as_dict(), SCHEMA_VERSION)))
    assert main(["bench", "compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert "error: the reports come from different or unknown environments" in err
    assert "gpu: RTX PRO 6000 != H200" in err
    assert main(["bench", "compare", str(a), str(b), "--allow-different-env"]) == 0
    out, err = capsys.readouterr()
    assert "warning: different environments (allowed): gpu: RTX PRO 6000 != H200" in err
    assert "baseline" in out and "1.000" in out and "no clear change" in out
    assert main(["bench", "compare", str(a), str(a), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "envforge.bench-compare/1" and doc["data"]["rows"][0]["ratio"] == 1.0


def test_compare_refuses_different_effective_variables_and_empty_fingerprints() -> None:
    a = with_env(report(), {"NCCL_MAX_NCHANNELS": "2"})
    b = with_env(report(), {"NCCL_MAX_NCHANNELS": "32", "NCCL_ALGO": "Ring"})
    with pytest.raises(InputError) as exc:
        compare(a, b)
    assert exc.value.message == (
        "the reports come from different or unknown environments; their numbers are not comparable:\n"
        "  server 'baseline': NCCL_ALGO: (unset) != Ring\n"
        "  server 'baseline': NCCL_MAX_NCHANNELS: 2 != 32\n"
        "  server 'eagle3': NCCL_ALGO: (unset) != Ring\n"
        "  server 'eagle3': NCCL_MAX_NCHANNELS: 2 != 32"
    )
    empty = Fingerprint(None, None, None, None)
    e = with_env(report(), {}, empty)
    with pytest.raises(InputError) as exc:
        compare(e, e)
    assert exc.value.message.splitlines()[1:] == [
        "  report A: the environment fingerprint is empty (no envforge lock: a plain virtual environment, or --url "
        "without ENV): these numbers are tied to no environment state, and `bench compare` never calls two such "
        "reports the same environment",
        "  report B: the environment fingerprint is empty (no envforge lock: a plain virtual environment, or --url "
        "without ENV): these numbers are tied to no environment state, and `bench compare` never calls two such "
        "reports the same environment",
    ]
    u = with_env(report(), None)
    with pytest.raises(InputError) as exc:
        compare(a, u)
    assert exc.value.message.splitlines()[1:] == [
        "  server 'baseline': the variables it ran with are unknown in B",
        "  server 'eagle3': the variables it ran with are unknown in B",
    ]
    assert compare(a, a).env_differences == ()
    allowed = compare(e, u, allow_different_env=True)
    assert allowed.env_differences[-2:] == (
        "server 'baseline': the variables it ran with are unknown in B",
        "server 'eagle3': the variables it ran with are unknown in B",
    )
    assert allowed.env_differences[1] == "lock_digest: unknown != sha256:aa"
    assert allowed.rows[0].verdict == "no clear change"


@pytest.mark.parametrize(
    ("a", "b", "verdict"),
    [
        (summary(95, 100, 105), summary(113.5, 118, 122.5), "faster"),  # low 1.081 ... but min-change below
        (summary(99, 100, 101), summary(112, 118, 124), "faster"),  # low 1.1089 > 1.10
        (summary(99, 100, 101), summary(110, 118, 124), "no clear change"),  # low 1.0891: drift could do that
        (summary(99, 100, 101), summary(80, 85, 89), "slower"),  # high 0.899 < 1/1.1 = 0.909
        (summary(99, 100, 101), summary(80, 85, 91.8), "no clear change"),  # high 0.9273
    ],
)
def test_verdict_needs_the_whole_interval_beyond_the_drift_margin(a: Summary, b: Summary, verdict: str) -> None:
    min_change = 0.0 if a.median == 100 and a.min == 95 else 0.10
    (row,) = compare(one_level(a), one_level(b), min_change=min_change).rows
    assert row.verdict == verdict


def test_drift_like_the_field_is_no_clear_change() -> None:
    """Two back-to-back runs of one server gave "1.18x [1.08, 1.28]": with the default margin, no change."""
    c = compare(one_level(summary(97.5, 100, 102.5)), one_level(summary(110.7, 118, 125.3)))
    (row,) = c.rows
    assert (round(row.ratio_low, 3), round(row.ratio_high, 3), row.verdict) == (1.08, 1.285, "no clear change")
    assert c.as_dict()["min_change"] == 0.1
    assert (
        compare(one_level(summary(97.5, 100, 102.5)), one_level(summary(110.7, 118, 125.3)), min_change=0.05)
        .rows[0]
        .verdict
        == "faster"
    )


def test_compare_skips_levels_without_figures_and_says_why() -> None:
    c = compare(one_level(summary(99, 100, 101)), one_level(None, failed=2))
    assert c.rows == () and c.not_compared == ("s @ 1: 2 failed requests in B",)
    c = compare(one_level(None), one_level(summary(99, 100, 101)))
    assert c.not_compared == ("s @ 1: no tok/s in A (refused)",)
    assert c.as_dict()["not_compared"] == ["s @ 1: no tok/s in A (refused)"]


def test_comparison_json_is_pinned() -> None:
    c = compare(one_level(summary(99, 100, 101)), one_level(summary(112, 118, 124)))
    assert c.as_dict() == {
        "min_change": 0.1,
        "rows": [
            {
                "server": "s",
                "concurrency": 1,
                "request_rate": None,
                "a_tok_s": 100.0,
                "b_tok_s": 118.0,
                "ratio": 1.18,
                "ratio_low": 1.1089,
                "ratio_high": 1.2525,
                "verdict": "faster",
            }
        ],
        "env_differences": [],
        "config_differences": [],
        "only_in_a": [],
        "only_in_b": [],
        "not_compared": [],
    }


def test_compare_zero_and_one_repeat_edges() -> None:
    zero = Summary(3, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    (row,) = compare(one_level(zero), one_level(summary(1, 2, 3))).rows
    assert (row.ratio, row.ratio_low, row.ratio_high, row.verdict) == (
        float("inf"),
        float("inf"),
        float("inf"),
        "faster",
    )
    # issue 42: one repeat has no interval; "0.8 [0.8, 0.8] slower" was false certainty
    one = Summary(1, 100.0, 100.0, 100.0, 100.0, None, None)
    (row,) = compare(one_level(one), one_level(Summary(1, 80.0, 80.0, 80.0, 80.0, None, None))).rows
    assert (row.ratio, row.ratio_low, row.ratio_high, row.verdict) == (
        0.8,
        None,
        None,
        "no interval (A and B: 1 repeat each; run --repeats >= 3)",
    )
    (row,) = compare(one_level(one), one_level(summary(60, 70, 80))).rows
    assert (row.ratio_low, row.verdict) == (None, "no interval (A: 1 repeat; run --repeats >= 3)")
    assert row.as_dict()["ratio_low"] is None and row.as_dict()["ratio_high"] is None


def test_compare_lists_settings_and_levels_present_on_one_side() -> None:
    a = replace(report(), config={"model": "m", "repeats": 3})
    b = replace(
        report(),
        config={"model": "m", "repeats": 5, "seed": 1},
        servers=(replace(report().servers[0], levels=(replace(report().servers[0].levels[0], concurrency=4),)),),
    )
    c = compare(a, b)
    assert c.config_differences == ("repeats: 3 != 5", "seed: None != 1")
    assert c.only_in_a == ("baseline @ 1", "eagle3 @ 1") and c.only_in_b == ("baseline @ 4",)
    assert c.rows == ()


def test_env_differences_name_the_side_whose_variables_are_unknown() -> None:
    known, unknown = with_env(report(), {"NCCL_X": "1"}), with_env(report(), None)
    assert compare(unknown, known, allow_different_env=True).env_differences == (
        "server 'baseline': the variables it ran with are unknown in A",
        "server 'eagle3': the variables it ran with are unknown in A",
    )
    assert compare(unknown, unknown, allow_different_env=True).env_differences[0] == (
        "server 'baseline': the variables it ran with are unknown in A and B"
    )
    fewer = replace(known, servers=known.servers[:1])
    assert compare(known, fewer).env_differences == ()


def test_open_loop_levels_are_paired_by_concurrency_and_rate() -> None:
    """A sweep measures one concurrency at several rates: a level is (concurrency, request rate)."""

    def at(rates: list[float | None], med: float) -> BenchReport:
        levels = tuple(
            replace(one_level(summary(med - 1, med, med + 1)).servers[0].levels[0], concurrency=8, request_rate=r)
            for r in rates
        )
        return BenchReport(FP, {}, (ServerResult("s", False, "u", None, None, levels, {}),), ())

    c = compare(at([1.0, 2.0, None], 100.0), at([2.0, 4.0, None], 100.0))
    assert [(r.concurrency, r.request_rate) for r in c.rows] == [(8, 2.0), (8, None)]
    assert c.as_dict()["rows"][0]["request_rate"] == 2.0
    assert (c.only_in_a, c.only_in_b) == (("s @ 8 @ 1 requests/s",), ("s @ 8 @ 4 requests/s",))
