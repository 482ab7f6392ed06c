"""Break-even rows: the accept length at which speculation pays, from the client's figures or the engine's."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.support.bench_reports import report, server, vllm_server

from envforge.bench.breakeven import break_even_rows
from envforge.bench.metrics import EngineWindow, SpecDecodeStats


def test_break_even_row_from_measured_step_and_cycle() -> None:
    (row,) = report().break_even
    assert (row.baseline, row.speculative, row.concurrency) == ("baseline", "eagle3", 1)
    assert row.decode_step_ms == pytest.approx(12.2) and row.verify_cycle_ms == pytest.approx(30.0)
    assert round(row.break_even, 2) == 2.46 and row.accept_length == pytest.approx(2.5) and row.pays


def test_break_even_needs_a_baseline_and_measured_levels() -> None:
    base = server("baseline", False, [2.0])
    spec = server("eagle3", True, [2.0], verify=40, decode_s=1.2)
    assert break_even_rows([spec]) == ()
    assert break_even_rows([base]) == ()
    other = replace(spec, levels=(replace(spec.levels[0], concurrency=4),))
    assert break_even_rows([base, other]) == ()
    no_cycle = replace(spec, levels=(replace(spec.levels[0], verify_cycle_ms=None),))
    assert break_even_rows([base, no_cycle]) == ()
    slow = server("eagle3", True, [2.0], verify=40, decode_s=2.4)  # cycle 60 ms: break-even 4.92 > 2.5
    (row,) = break_even_rows([base, slow, server("second", False, [2.0])])
    assert (row.baseline, row.pays, round(row.break_even, 3)) == ("baseline", False, 4.918)
    assert row.as_dict() == {
        "baseline": "baseline",
        "speculative": "eagle3",
        "concurrency": 1,
        "decode_step_ms": 12.2,
        "verify_cycle_ms": 60.0,
        "break_even_accept_length": 4.918,
        "accept_length": 2.5,
        "pays": False,
    }


def test_vllm_break_even_uses_engine_step_times_and_tokens_per_step() -> None:
    base = vllm_server("plain", False, EngineWindow(1, 32, 31, 0.124))  # 4 ms a step
    # 32 tokens in 10 steps of 10 ms: 3.1 tokens a step against break-even 10 / 4 = 2.5
    spec = vllm_server("draft", True, EngineWindow(1, 32, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5))))
    (row,) = break_even_rows([spec, base])
    assert row.as_dict() == {
        "baseline": "plain",
        "speculative": "draft",
        "concurrency": 1,
        "decode_step_ms": 4.0,
        "verify_cycle_ms": 10.0,
        "break_even_accept_length": 2.5,
        "accept_length": 3.5,
        "pays": True,
        "tokens_per_cycle": 3.1,
    }
    slow = vllm_server("draft", True, EngineWindow(1, 32, 10, 0.14, SpecDecodeStats(8, 24, 20, (8, 7, 5))))
    (row,) = break_even_rows([base, slow])  # 14 ms a step: break-even 3.5 > 3.1 tokens a step
    assert (row.pays, round(row.break_even, 3), row.tokens_per_cycle) == (False, 3.5, 3.1)
    # no engine step time on one side: the ITL-based row (baseline ITL 4 ms; cycle = 0.1 s / 8 drafts)
    no_step = vllm_server("plain", False, EngineWindow(1, 32, None, None))
    (row,) = break_even_rows([no_step, spec])
    assert row.as_dict() == {
        "baseline": "plain",
        "speculative": "draft",
        "concurrency": 1,
        "decode_step_ms": 4.0,
        "verify_cycle_ms": 10.0,
        "break_even_accept_length": 2.5,
        "accept_length": 3.5,
        "pays": True,
    }
    assert break_even_rows([vllm_server("plain", False, EngineWindow(1, 32, 31, 0.124), failed=True), spec]) == ()
    no_tokens = vllm_server("draft", True, EngineWindow(1, None, 10, 0.1, SpecDecodeStats(8, 24, 20, (8, 7, 5))))
    (row,) = break_even_rows([base, no_tokens])
    assert row.tokens_per_cycle is None and row.decode_step_ms == 4.0 and "tokens_per_cycle" not in row.as_dict()
