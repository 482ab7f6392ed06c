"""Per-request distributions: numpy's linear percentiles (vLLM's calls), pinned on literal values."""

from __future__ import annotations

from envforge.bench.distribution import PERCENTILES, Distribution, distribution


def test_distribution_is_numpy_linear_in_ms() -> None:
    # 1..10 ms: p90 = 9.1, p95 = 9.55, p99 = 9.91 (linear interpolation between order statistics)
    d = distribution([x / 1000 for x in range(1, 11)])
    assert d is not None and d.as_dict() == {"n": 10, "mean": 5.5, "median": 5.5, "p90": 9.1, "p95": 9.55, "p99": 9.91, "max": 10.0}
    assert Distribution.from_dict(d.as_dict()).as_dict() == d.as_dict()
    assert PERCENTILES == (90.0, 95.0, 99.0)


def test_one_value_and_none() -> None:
    assert distribution([0.25]) == Distribution(1, 250.0, 250.0, 250.0, 250.0, 250.0, 250.0)
    assert distribution([]) is None
    assert distribution([3.0, 1.0], scale=1.0) == Distribution(2, 2.0, 2.0, 2.8, 2.9, 2.98, 3.0)
