"""A multi-turn level's figures per turn, and their JSON (pinned literally)."""

from __future__ import annotations

import pytest

from envforge.bench.client import RequestResult
from envforge.bench.result import latency_of
from envforge.bench.turns import TurnFigures, turn_figures


def _r(turn: int | None, ttft_s: float) -> RequestResult:
    return RequestResult(ok=True, output_tokens=2, e2e_s=ttft_s + 0.01, ttft_s=ttft_s, e2el_s=ttft_s + 0.01, turn=turn)


def test_figures_per_turn_in_turn_order() -> None:
    results = [_r(1, 0.010), _r(2, 0.030), _r(1, 0.020), _r(3, 0.050), _r(2, 0.040)]
    turns = turn_figures(results, latency_of)
    assert [(t.turn, t.requests) for t in turns] == [(1, 2), (2, 2), (3, 1)]
    one = turns[0].latency["ttft_ms"]
    assert one is not None and (one.n, one.median) == (2, 15.0)
    assert turns[2].as_dict() == {
        "turn": 3,
        "requests": 1,
        "latency": {
            "ttft_ms": {"n": 1, "mean": 50.0, "median": 50.0, "p90": 50.0, "p95": 50.0, "p99": 50.0, "max": 50.0},
            "tpot_ms": None,
            "itl_ms": None,
            "itl_per_token_ms": None,
            "e2el_ms": {"n": 1, "mean": 60.0, "median": 60.0, "p90": 60.0, "p95": 60.0, "p99": 60.0, "max": 60.0},
        },
    }  # fmt: skip
    assert TurnFigures.from_dict(turns[2].as_dict()).as_dict() == turns[2].as_dict()  # as_dict rounds
    assert turn_figures([_r(None, 0.01)], latency_of) == ()
    with pytest.raises(TypeError) as exc:
        TurnFigures.from_dict({"turn": 1, "requests": 1, "latency": [1]})
    assert str(exc.value) == "'turns[].latency' must be an object"
    assert [t.latency["ttft_ms"].chosen for t in turn_figures(results[:1], latency_of, (50.0,))] == [  # type: ignore[union-attr]
        (("p50", 10.0),)
    ]
