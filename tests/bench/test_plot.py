"""The report's PNG (envforge.bench.plot): tok/s per level, against the request rate for a sweep, and a
panel of the engine's load per server whose metrics were read."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import pytest
from tests.support.bench_reports import FP, report, run

from envforge.bench.gauges import GaugeSeries, Sample
from envforge.bench.report import BenchReport
from envforge.bench.result import ServerResult, level_result
from envforge.bench.slo import Slo

pytest.importorskip("matplotlib")
from envforge.bench.plot import plot_report  # noqa: E402


def size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG from its IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_a_report_without_metrics_is_one_panel(tmp_path: Path) -> None:
    assert size(plot_report(report(), tmp_path / "a.png")) == (800, 500)


def test_a_sweep_plots_against_the_rate_with_the_engine_load_below(tmp_path: Path) -> None:
    series = GaugeSeries(
        "u", 0.5, (Sample(0.0, 1, 1.0, 0.0, 0.1), Sample(0.5, 1, 4.0, 2.0, 0.3), Sample(2.0, 2, 3.0, None, None))
    )
    slo = Slo({"ttft": 100.0})  # every request of run(): TTFT 50 ms
    levels = tuple(
        level_result(8, [run(8, w, 4)], slo=slo, request_rate=rate, server_metrics=series)
        for rate, w in ((0.5, 2.0), (1.0, 2.0), (2.0, 2.0))
    )
    assert all(lv.goodput is not None and lv.goodput.met for lv in levels)
    missed = replace(levels[2].goodput, met=False) if levels[2].goodput is not None else None
    levels = (*levels[:2], replace(levels[2], goodput=missed))
    s = ServerResult("baseline", False, "u", None, None, levels, {})
    bare = ServerResult("other", False, "u", None, None, (replace(levels[0], server_metrics=None),), {})
    path = plot_report(BenchReport(FP, {"model": "m"}, (s, bare), ()), tmp_path / "out" / "s.png")
    assert size(path) == (800, 850)  # one load panel: the server without metrics has none
