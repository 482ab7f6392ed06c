"""Spread over repeats and the break-even accept length."""

from __future__ import annotations

import math
import statistics

import pytest

from envforge.bench.stats import Summary, break_even_accept_length, summarize, t_quantile_975


def test_summary_of_three_repeats_uses_student_t() -> None:
    s = summarize([12.0, 10.0, 14.0])
    assert s is not None
    half = 4.303 * 2.0 / math.sqrt(3)
    assert (s.n, s.median, s.mean, s.min, s.max) == (3, 12.0, 12.0, 10.0, 14.0)
    assert s.ci_low == pytest.approx(12.0 - half, abs=1e-3) and s.ci_high == pytest.approx(12.0 + half, abs=1e-3)
    assert s.ci_high == pytest.approx(16.9683, abs=1e-4)
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
    assert Summary.from_dict(s.as_dict()) == Summary(
        **{k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.as_dict().items()}
    )


def test_t_quantiles_match_the_table_and_go_beyond_30_degrees_of_freedom() -> None:
    # NIST/SEMATECH e-Handbook 1.3.6.7.2, upper 0.975 critical values
    assert round(t_quantile_975(1), 3) == 12.706 and round(t_quantile_975(2), 3) == 4.303
    assert round(t_quantile_975(30), 3) == 2.042 and round(t_quantile_975(40), 3) == 2.021
    assert round(t_quantile_975(60), 3) == 2.000 and round(t_quantile_975(100), 3) == 1.984
    with pytest.raises(ValueError, match="^degrees of freedom must be >= 1, got 0$"):
        t_quantile_975(0)
    assert t_quantile_975(1) > 12.7


def test_interval_of_41_repeats_uses_t_with_40_degrees_of_freedom() -> None:
    values = [10.0] * 20 + [12.0] * 21
    s = summarize(values)
    assert s is not None and s.ci_high is not None and s.ci_low is not None
    half = 2.021075390306273 * statistics.stdev(values) / math.sqrt(41)
    assert s.ci_high == pytest.approx(s.mean + half, rel=1e-9) and s.ci_low == pytest.approx(s.mean - half, rel=1e-9)


def test_summary_as_dict_keys_and_rounding() -> None:
    s = Summary(3, 1.234567, 2.0, 0.5, 3.0, None, 4.444449)
    assert s.as_dict() == {
        "n": 3,
        "median": 1.2346,
        "mean": 2.0,
        "min": 0.5,
        "max": 3.0,
        "ci_low": None,
        "ci_high": 4.4444,
    }
    assert Summary.from_dict({"n": 2, "median": 1, "mean": 2, "min": 0, "max": 3}) == Summary(
        2, 1.0, 2.0, 0.0, 3.0, None, None
    )


def test_break_even_field_numbers() -> None:
    assert round(break_even_accept_length(30.0, 12.2), 2) == 2.46
    with pytest.raises(ValueError, match="^baseline decode step must be > 0 ms, got 0.0$"):
        break_even_accept_length(30.0, 0.0)
