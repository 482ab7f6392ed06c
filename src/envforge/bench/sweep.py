"""The saturation sweep: the highest open-loop request rate at which a server still meets the SLO.

``--sweep-rate LO:HI`` measures open-loop levels (:mod:`envforge.bench.arrivals`) at rates chosen
one after the other by :func:`next_rate`, each level as any other (its repeats, goodput and gate,
:mod:`envforge.bench.slo`): a level **passes** when it has no failed request and its goodput meets
the attainment (at least ``--slo-attainment`` of its completed requests met every ``--slo`` target,
vLLM's ``--goodput`` definition). The rule:

1. **Doubling**: LO, 2 LO, 4 LO, ... while they pass, the last one clamped to HI. LO failing ends
   the sweep (*low-fails*: no rate in the range meets the SLO); HI passing ends it too (*high-passes*:
   the limit lies above HI).
2. **Bisection** between the highest passing rate P and the lowest failing rate F: the next rate is
   (P + F) / 2, until F - P <= ``precision`` x P (*found*: the answer is P, known to within that).
3. At most ``max_steps`` levels in all: reaching the cap first ends the sweep with the bracket
   found so far (*step-cap*).

This is the search of ``vllm bench sweep serve_sla`` (``vllm/benchmarks/sweep/serve_sla.py``:
``_estimate_sla_bounds`` doubles the rate while the SLA holds, ``_find_sla_value`` bisects between
the highest passing and the lowest failing rate until they are 1 request/s apart), with a start and
an end given instead of the inf-rate run vLLM derives its start from, a relative precision instead
of whole requests/s (a CPU server saturates below 1 request/s, an H200 node above 100), and a cap on
levels. GuideLLM's ``--profile sweep`` (``src/guidellm/benchmark/profile.py``, ``SweepProfile``)
instead spaces its rates evenly between the synchronous and the throughput rate and judges none
of them. Rates are kept to 6 significant digits.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_MAX_STEPS",
    "DEFAULT_PRECISION",
    "OUTCOMES",
    "RateSweep",
    "SweepResult",
    "next_rate",
    "parse_range",
    "run_sweep",
]

#: Bisection stops when the first failing rate is within this fraction above the last passing one:
#: the run-to-run drift of a level (docs/bench.md, "Noise") is about as large.
DEFAULT_PRECISION = 0.1
#: The most levels one sweep measures (doubling 0.5 to 8 and three bisections take 8).
DEFAULT_MAX_STEPS = 12
#: How a sweep ended (see the module docstring).
OUTCOMES = ("found", "low-fails", "high-passes", "step-cap")


def _rate(x: float) -> float:
    return float(f"{x:.6g}")


def _decimal(text: str) -> float | None:
    """``text`` as a number when it is plain decimal digits (not ``1e3``, ``1_0``, ``inf``, ``-1``)."""
    return float(text) if re.fullmatch(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", text) else None


def parse_range(text: str) -> tuple[float, float]:
    """``"LO:HI"`` (requests/s, plain decimals) as ``(LO, HI)`` with 0 < LO < HI.

    :raises ValueError: another shape, a number that is not a positive finite decimal, or LO >= HI
        (the message says which).
    """
    lo_text, sep, hi_text = text.partition(":")
    lo, hi = _decimal(lo_text), _decimal(hi_text)
    if not sep or lo is None or hi is None or lo <= 0:
        raise ValueError(f"'{text}' is not LO:HI in requests/s, e.g. 0.5:16")
    if lo >= hi:
        raise ValueError(f"'{text}': LO must be below HI, e.g. 0.5:16")
    return _rate(lo), _rate(hi)


@dataclass(frozen=True, slots=True)
class RateSweep:
    """The search: from ``low`` to ``high`` requests/s, bisection to within ``precision`` (a fraction
    of the passing rate), at most ``max_steps`` levels."""

    low: float
    high: float
    precision: float = DEFAULT_PRECISION
    max_steps: int = DEFAULT_MAX_STEPS

    def as_dict(self) -> dict[str, Any]:
        """The settings, as the report's ``config["sweep-rate"]``."""
        return {"low": self.low, "high": self.high, "precision": self.precision, "max-steps": self.max_steps}


def _bracket(history: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """(highest passing rate, lowest failing rate above it); None for either when there is none."""
    best = max((r for r, met in history if met), default=None)
    worst = min((r for r, met in history if not met and (best is None or r > best)), default=None)
    return best, worst


def next_rate(spec: RateSweep, history: Sequence[tuple[float, bool]]) -> float | None:
    """The next rate to measure after ``history`` (``(rate, passed)`` in the order measured), or
    None when the sweep is over (the module docstring's rule)."""
    if not history:
        return spec.low
    if len(history) >= spec.max_steps:
        return None
    best, worst = _bracket(history)
    if best is None:
        return None
    if worst is None:
        return None if best >= spec.high else _rate(min(2.0 * best, spec.high))
    if worst - best <= spec.precision * best:
        return None
    return _rate((best + worst) / 2.0)


def run_sweep(spec: RateSweep, measure: Callable[[float], bool]) -> tuple[tuple[float, bool], ...]:
    """Measure rates by :func:`next_rate` until it says stop; ``measure(rate)`` runs one level and
    says whether it passed. Returns ``(rate, passed)`` in the order measured."""
    history: list[tuple[float, bool]] = []
    while (rate := next_rate(spec, history)) is not None:
        history.append((rate, measure(rate)))
    return tuple(history)


@dataclass(frozen=True, slots=True)
class SweepResult:
    """One server's sweep at concurrency cap ``concurrency``: ``levels`` ``(rate, passed)`` in the
    order measured."""

    server: str
    concurrency: int
    spec: RateSweep
    levels: tuple[tuple[float, bool], ...]

    @property
    def highest_passing_rate(self) -> float | None:
        """The highest rate that met the SLO (requests/s); None when none did."""
        return _bracket(self.levels)[0]

    @property
    def lowest_failing_rate(self) -> float | None:
        """The lowest rate above :attr:`highest_passing_rate` that missed it (the lowest of all when none
        passed); None when none did."""
        return _bracket(self.levels)[1]

    @property
    def outcome(self) -> str:
        """One of :data:`OUTCOMES`."""
        best, worst = _bracket(self.levels)
        if best is None:
            return "low-fails"
        if worst is None:
            return "high-passes" if best >= self.spec.high else "step-cap"
        return "found" if worst - best <= self.spec.precision * best else "step-cap"

    def line(self) -> str:
        """The result line, e.g. ``sweep 'baseline' (concurrency 8): 1.625 requests/s is the highest
        rate that met the SLO; 1.75 missed it (within 10% after 6 levels)``."""
        s, best, worst, n = self.spec, self.highest_passing_rate, self.lowest_failing_rate, len(self.levels)
        head, outcome = f"sweep '{self.server}' (concurrency {self.concurrency}): ", self.outcome
        if outcome == "low-fails":
            return head + (
                f"the lowest rate, {s.low:g} requests/s, already missed the SLO: no rate in "
                f"{s.low:g}..{s.high:g} meets it"
            )
        if outcome == "high-passes":
            return head + f"the highest rate, {s.high:g} requests/s, still met the SLO: the limit lies above it"
        line = head + f"{best:g} requests/s is the highest rate that met the SLO"
        if outcome == "found":
            return line + f"; {worst:g} missed it (within {s.precision:.0%} after {n} levels)"
        cap = f"the step cap ({s.max_steps} levels) ended the search"
        if worst is None:
            return line + f" and none missed it yet; {cap} below {s.high:g}"
        return line + f", {worst:g} missed it; {cap} before {s.precision:.0%}"

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, one entry of the report's ``sweep``."""
        return {
            "server": self.server,
            "concurrency": self.concurrency,
            "low": self.spec.low,
            "high": self.spec.high,
            "precision": self.spec.precision,
            "max_steps": self.spec.max_steps,
            "levels": [{"request_rate": r, "met": m} for r, m in self.levels],
            "highest_passing_rate": self.highest_passing_rate,
            "lowest_failing_rate": self.lowest_failing_rate,
            "outcome": self.outcome,
            "line": self.line(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepResult:
        """Inverse of :meth:`as_dict` (the bracket, outcome and line are recomputed from the levels)."""
        if not isinstance(d.get("levels"), list):
            raise TypeError("'sweep.levels' must be an array")
        spec = RateSweep(float(d["low"]), float(d["high"]), float(d["precision"]), int(d["max_steps"]))
        return cls(
            str(d["server"]),
            int(d["concurrency"]),
            spec,
            tuple((float(x["request_rate"]), bool(x["met"])) for x in d["levels"]),
        )
