"""Per-request distributions of one level: mean, median, p90, p95, p99 and max, as vLLM computes them.

``vllm bench serve`` (``vllm/benchmarks/serve.py``, ``calculate_metrics``) reports each of TTFT,
TPOT, ITL and E2EL as ``np.mean``, ``np.median`` and ``np.percentile(values, p)``, i.e. numpy's
default ``"linear"`` method (type 7 of Hyndman and Fan); :func:`distribution` uses the same calls,
so a distribution over the same per-request values is the same number in both tools.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

__all__ = ["PERCENTILES", "Distribution", "distribution"]

#: The percentiles every distribution carries (vLLM: ``--metric-percentiles``, here fixed).
PERCENTILES = (90.0, 95.0, 99.0)


@dataclass(frozen=True, slots=True)
class Distribution:
    """``n`` values (ms) summarized: mean, median (p50), p90, p95, p99 (numpy's linear method) and max."""

    n: int
    mean: float
    median: float
    p90: float
    p95: float
    p99: float
    max: float

    def as_dict(self) -> dict[str, Any]:
        """Field order, floats rounded to 4 decimals."""
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Distribution:
        """Inverse of :meth:`as_dict`.

        :raises KeyError: a field is missing; :raises TypeError/ValueError: a field is not a number.
        """
        return cls(int(d["n"]), *(float(d[k]) for k in ("mean", "median", "p90", "p95", "p99", "max")))


def distribution(values: Sequence[float], *, scale: float = 1000.0) -> Distribution | None:
    """The distribution of ``values`` (seconds) in ms (``scale``), or None when there are none."""
    if not values:
        return None
    a = np.asarray(values, dtype=float) * scale
    p90, p95, p99 = (float(x) for x in np.percentile(a, PERCENTILES))
    return Distribution(len(a), float(np.mean(a)), float(np.median(a)), p90, p95, p99, float(np.max(a)))
