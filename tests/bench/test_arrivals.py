"""Open-loop arrivals: vLLM's get_request schedule (gamma gaps, rescaled to n / rate), pinned."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envforge.bench.arrivals import arrival_times


def vllm_schedule(count: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """vllm/benchmarks/serve.py get_request without ramp-up, as it runs after np.random.seed(seed)."""
    np.random.seed(seed)
    delay_ts = []
    for _ in range(count):
        theta = 1.0 / (rate * burstiness)
        delay_ts.append(np.random.gamma(shape=burstiness, scale=theta))
    for i in range(1, len(delay_ts)):
        delay_ts[i] += delay_ts[i - 1]
    factor = (count / rate) / delay_ts[-1]
    return [d * factor for d in delay_ts]


@pytest.mark.parametrize("burstiness", [1.0, 0.5, 4.0])
def test_the_schedule_is_vllms_for_the_same_seed(burstiness: float) -> None:
    assert arrival_times(50, 20.0, burstiness, seed=7) == pytest.approx(
        vllm_schedule(50, 20.0, burstiness, 7), rel=1e-12
    )


def test_schedule_shapes_pinned() -> None:
    t = arrival_times(4, 2.0, 1.0, seed=0)
    assert [round(x, 6) for x in t] == [0.423087, 1.090739, 1.581524, 2.0]  # last = n / rate
    assert arrival_times(3, math.inf) == (0.0, 0.0, 0.0)  # inf: all at once
    assert arrival_times(4, 4.0, math.inf) == pytest.approx((0.25, 0.5, 0.75, 1.0))  # constant gaps
    assert arrival_times(0, 1.0) == ()
    gaps = np.diff(arrival_times(2000, 100.0, 1.0, seed=1))
    assert gaps.mean() == pytest.approx(0.01, rel=0.01)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.1)  # Poisson: exponential gaps, CV 1
    bursty = np.diff(arrival_times(2000, 100.0, 0.25, seed=1))
    assert bursty.std() / bursty.mean() == pytest.approx(2.0, abs=0.2)  # gamma shape k: CV 1 / sqrt(k)


def test_bad_rates_raise() -> None:
    for args in [(1, 0.0), (1, -1.0), (1, 1.0, 0.0), (-1, 1.0)]:
        with pytest.raises(ValueError, match="need count >= 0, rate > 0 and burstiness > 0"):
            arrival_times(*args)
