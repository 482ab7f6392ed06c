"""Service-level objectives and goodput: how many requests per second met every latency target.

The definition is vLLM's (``vllm/benchmarks/serve.py``, ``calculate_metrics``, after DistServe): a
completed request is *good* when its TTFT, TPOT and E2EL are each at most the target given for it
(targets in ms; a request of one token has TPOT 0 for this test), and the **request goodput** is
the good requests divided by the measured wall time. ``--slo ttft:200 tpot:50`` is vLLM's
``--goodput ttft:200 tpot:50``.

The gate (exit 1) is DistServe's SLO attainment: a level passes when at least ``attainment`` of its
completed requests are good (default 0.9, DistServe's 90 %).
"""

from __future__ import annotations

import re

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envforge.bench.client import RequestResult
from envforge.core.errors import InputError

__all__ = ["DEFAULT_ATTAINMENT", "SLO_KEYS", "Goodput", "Slo", "goodput", "parse_slo"]

#: The metrics a target may name, in report order (vLLM's ``--goodput`` keys).
SLO_KEYS = ("ttft", "tpot", "e2el")
#: The share of good requests a level needs to pass the gate (DistServe's 90 % attainment).
DEFAULT_ATTAINMENT = 0.9


@dataclass(frozen=True, slots=True)
class Slo:
    """Targets in ms by metric (``ttft``, ``tpot``, ``e2el``) and the attainment a level needs."""

    targets: Mapping[str, float] = field(default_factory=dict)
    attainment: float = DEFAULT_ATTAINMENT

    def as_dict(self) -> dict[str, Any]:
        return {
            "targets_ms": {k: self.targets[k] for k in SLO_KEYS if k in self.targets},
            "attainment": self.attainment,
        }


def parse_slo(items: Iterable[str], attainment: float = DEFAULT_ATTAINMENT) -> Slo:
    """``["ttft:200", "tpot:50"]`` (also ``"ttft:200 tpot:50"`` in one item) as an :class:`Slo`.

    :raises InputError: an unknown metric, a value that is not a positive number, a metric given
        twice, or an attainment outside (0, 1].
    """
    targets: dict[str, float] = {}
    for item in (x for text in items for x in text.split()):
        key, sep, value = item.partition(":")
        if key not in SLO_KEYS or not sep:
            raise InputError(
                f"--slo {item}: expected METRIC:MS with METRIC one of {', '.join(SLO_KEYS)}",
                hint="e.g. --slo ttft:200 tpot:50",
            )
        try:  # plain decimal digits only: float() would also take '1_0', ' 5', 'nan' and '1e3'
            ms = float(value) if re.fullmatch(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", value) else -1.0
        except ValueError:
            ms = -1.0
        if not ms > 0 or ms == float("inf"):
            raise InputError(
                f"--slo {item}: the target must be a positive number of milliseconds",
                hint="e.g. --slo ttft:200 tpot:50",
            )
        if key in targets:
            raise InputError(
                f"--slo: '{key}' is given twice ({targets[key]:g} and {ms:g})", hint="give each metric once"
            )
        targets[key] = ms
    if not 0 < attainment <= 1:
        raise InputError(
            f"--slo-attainment {attainment:g}: must be a fraction in (0, 1]",
            hint="e.g. --slo-attainment 0.9 for 90 % of the requests",
        )
    return Slo(targets, attainment)


@dataclass(frozen=True, slots=True)
class Goodput:
    """One level against the SLO: ``good`` of ``completed`` requests met every target; ``req_s``
    good requests per second of wall time; ``attained`` = good / completed; ``met``: attained >=
    the SLO's attainment."""

    good: int
    completed: int
    req_s: float
    attained: float
    met: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "good": self.good,
            "completed": self.completed,
            "req_s": round(self.req_s, 4),
            "attained": round(self.attained, 4),
            "met": self.met,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Goodput:
        return cls(int(d["good"]), int(d["completed"]), float(d["req_s"]), float(d["attained"]), bool(d["met"]))


def _is_good(r: RequestResult, targets: Mapping[str, float]) -> bool:
    values = {"ttft": r.ttft_s, "tpot": r.tpot_s if r.tpot_s is not None else 0.0, "e2el": r.e2el_s}
    return all(
        values[k] is not None and values[k] * 1000.0 <= ms  # type: ignore[operator]
        for k, ms in targets.items()
    )


def goodput(results: Sequence[RequestResult], wall_s: float, slo: Slo) -> Goodput | None:
    """The goodput of the completed requests in ``results`` over ``wall_s`` seconds; None without
    targets or without completed requests."""
    done = [r for r in results if r.ok]
    if not slo.targets or not done:
        return None
    good = sum(_is_good(r, slo.targets) for r in done)
    attained = good / len(done)
    return Goodput(good, len(done), good / wall_s if wall_s > 0 else 0.0, attained, attained >= slo.attainment)
