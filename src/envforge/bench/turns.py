"""A multi-turn level's figures per turn: the later turns carry the conversation so far.

Each turn of a conversation resends everything before it (:func:`envforge.bench.load.run_conversations`),
so its time to first token grows with the turn; the level's own distributions pool every turn, as
SGLang's ``bench_serving.py`` (0.5.9) pools them, and these say how each turn fared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envforge.bench.client import RequestResult
from envforge.bench.distribution import Distribution

__all__ = ["TurnFigures", "turn_figures"]

#: ``latency_of``'s shape: completed requests and the chosen percentiles -> distributions by name.
Latency = Callable[[Sequence[RequestResult], Sequence[float]], Mapping[str, Distribution | None]]


@dataclass(frozen=True, slots=True)
class TurnFigures:
    """One turn (1 the first) over every conversation of a level that reached it: ``requests``
    sent at that turn, and their ``latency`` distributions (ms, the level's keys)."""

    turn: int
    requests: int
    latency: Mapping[str, Distribution | None]

    def as_dict(self) -> dict[str, Any]:
        """``{"turn", "requests", "latency": {key: distribution or null}}``."""
        return {
            "turn": self.turn,
            "requests": self.requests,
            "latency": {k: None if v is None else v.as_dict() for k, v in self.latency.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TurnFigures:
        """Read back :meth:`as_dict`. :raises KeyError, TypeError, ValueError: not that shape."""
        latency = d["latency"]
        if not isinstance(latency, Mapping):
            raise TypeError("'turns[].latency' must be an object")
        return cls(
            int(d["turn"]),
            int(d["requests"]),
            {str(k): None if v is None else Distribution.from_dict(v) for k, v in latency.items()},
        )


def turn_figures(
    results: Sequence[RequestResult], latency_of: Latency, percentiles: Sequence[float] = ()
) -> tuple[TurnFigures, ...]:
    """Per turn, in turn order, the figures of ``results`` (a level's completed requests); empty
    when none belongs to a conversation (``turn`` None)."""
    by_turn: dict[int, list[RequestResult]] = {}
    for r in results:
        if r.turn is not None:
            by_turn.setdefault(r.turn, []).append(r)
    return tuple(TurnFigures(turn, len(rs), latency_of(rs, percentiles)) for turn, rs in sorted(by_turn.items()))
