"""Per-request distributions: numpy's linear percentiles (vLLM's calls), pinned on literal values."""

from __future__ import annotations

import pytest

from envforge.bench.distribution import PERCENTILES, Distribution, distribution, parse_percentiles, percentile_key
from envforge.core.errors import InputError


def test_distribution_is_numpy_linear_in_ms() -> None:
    # 1..10 ms: p90 = 9.1, p95 = 9.55, p99 = 9.91 (linear interpolation between order statistics)
    d = distribution([x / 1000 for x in range(1, 11)])
    assert d is not None and d.as_dict() == {
        "n": 10,
        "mean": 5.5,
        "median": 5.5,
        "p90": 9.1,
        "p95": 9.55,
        "p99": 9.91,
        "max": 10.0,
    }
    assert Distribution.from_dict(d.as_dict()).as_dict() == d.as_dict()
    assert PERCENTILES == (90.0, 95.0, 99.0)


def test_one_value_and_none() -> None:
    assert distribution([0.25]) == Distribution(1, 250.0, 250.0, 250.0, 250.0, 250.0, 250.0)
    assert distribution([]) is None
    assert distribution([3.0, 1.0], scale=1.0) == Distribution(2, 2.0, 2.0, 2.8, 2.9, 2.98, 3.0)


def test_chosen_percentiles_are_keyed_as_vllm_spells_them() -> None:
    # 1..10 ms: p50 = 5.5, p99.9 = 9.991, p1 = 1.09; p90 chosen again is not repeated
    d = distribution([x / 1000 for x in range(1, 11)], percentiles=(50.0, 99.9, 90.0, 1.0, 100.0))
    assert d is not None and d.as_dict() == {
        "n": 10,
        "mean": 5.5,
        "median": 5.5,
        "p90": 9.1,
        "p95": 9.55,
        "p99": 9.91,
        "max": 10.0,
        "p50": 5.5,
        "p99.9": 9.991,
        "p1": 1.09,
        "p100": 10.0,
    }
    assert [(k, round(v, 6)) for k, v in d.chosen] == [("p50", 5.5), ("p99.9", 9.991), ("p1", 1.09), ("p100", 10.0)]
    assert (d.value("p50"), d.value("p90"), d.value("median"), d.value("max"), d.value("p75")) == (
        5.5,
        9.1,
        5.5,
        10.0,
        None,
    )
    assert Distribution.from_dict(d.as_dict()).as_dict() == d.as_dict()
    assert Distribution.from_dict(
        {
            "n": 1,
            "mean": 1,
            "median": 1,
            "p90": 1,
            "p95": 1,
            "p99": 1,
            "max": 1,
            "p99.99": 2,
            "note": "x",
            "pX": 3,
            "p0": 4,
            "p101": 5,
        }
    ).chosen == (("p99.99", 2.0),)
    assert [percentile_key(p) for p in (50.0, 99.9, 99.0, 0.5, 100.0)] == ["p50", "p99.9", "p99", "p0.5", "p100"]


def test_parse_percentiles_in_order_without_duplicates() -> None:
    assert parse_percentiles("50,90,99,99.9") == (50.0, 90.0, 99.0, 99.9)
    assert parse_percentiles(" 99.9 , 50,99.9, 100") == (99.9, 50.0, 100.0)
    assert parse_percentiles("0.5") == (0.5,)


@pytest.mark.parametrize(
    ("text", "word"),
    [
        ("0", "0"),
        ("50,", ""),
        ("101", "101"),
        ("-5", "-5"),
        ("p99", "p99"),
        ("nan", "nan"),
        ("inf", "inf"),
        ("50,,90", ""),
    ],
)
def test_a_bad_percentile_is_refused_naming_it(text: str, word: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_percentiles(text)
    assert exc.value.message == f"--percentiles {text!r}: {word!r} is not a percentile (a number above 0, at most 100)"
    assert exc.value.hint == "give numbers separated by commas, e.g. --percentiles 50,90,99,99.9"


def test_more_than_twenty_percentiles_are_refused() -> None:
    assert len(parse_percentiles(",".join(str(p) for p in range(1, 21)))) == 20
    with pytest.raises(InputError) as exc:
        parse_percentiles(",".join(str(p) for p in range(1, 22)))
    assert exc.value.message == "--percentiles: 21 percentiles; at most 20 are reported"
