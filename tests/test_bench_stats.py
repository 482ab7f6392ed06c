"""Spread over repeats and the break-even accept length."""

from __future__ import annotations

import math

import pytest

from envforge.bench.stats import Summary, break_even_accept_length, summarize, t_quantile_975


def test_summary_of_three_repeats_uses_student_t() -> None:
    s = summarize([12.0, 10.0, 14.0])
    assert s is not None
    half = 4.303 * 2.0 / math.sqrt(3)
    assert (s.n, s.median, s.mean, s.min, s.max) == (3, 12.0, 12.0, 10.0, 14.0)
    assert s.ci_low == pytest.approx(12.0 - half) and s.ci_high == pytest.approx(12.0 + half)
    assert s.bounds() == (s.ci_low, s.ci_high)


def test_field_runs_88_6_to_107_7_give_a_wide_interval() -> None:
    s = summarize([88.6, 94.0, 107.7, 92.6, 89.0])
    assert s is not None and s.ci_low is not None and s.ci_high is not None
    assert s.ci_low < 90 < 100 < s.ci_high  # "94 tok/s" alone said nothing about the spread


def test_single_repeat_has_no_interval_and_bounds_fall_back_to_min_max() -> None:
    s = summarize([5.0])
    assert s == Summary(1, 5.0, 5.0, 5.0, 5.0, None, None)
    assert s.bounds() == (5.0, 5.0)
    assert summarize([]) is None


def test_interval_low_end_is_clamped_at_zero() -> None:
    s = summarize([1.0, 100.0])
    assert s is not None and s.ci_low == 0.0


def test_summary_round_trips_through_dict() -> None:
    s = summarize([1.0, 2.0, 4.0])
    assert s is not None
    assert Summary.from_dict(s.as_dict()) == Summary(**{k: (round(v, 4) if isinstance(v, float) else v)
                                                        for k, v in s.as_dict().items()})


def test_t_quantiles() -> None:
    assert t_quantile_975(1) == 12.706 and t_quantile_975(30) == 2.042 and t_quantile_975(31) == 1.96
    with pytest.raises(ValueError, match="^degrees of freedom must be >= 1, got 0$"):
        t_quantile_975(0)


def test_break_even_field_numbers() -> None:
    assert round(break_even_accept_length(30.0, 12.2), 2) == 2.46
    with pytest.raises(ValueError, match="^baseline decode step must be > 0 ms, got 0.0$"):
        break_even_accept_length(30.0, 0.0)
