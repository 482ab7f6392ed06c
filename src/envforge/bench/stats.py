"""Statistics over benchmark repeats, and the break-even accept length of speculative decoding.

Repeats are few (3 to 10), so the 95% interval of the mean uses Student's t distribution with
``n - 1`` degrees of freedom (two-sided quantiles from the standard table, e.g. NIST/SEMATECH
e-Handbook of Statistical Methods, section 1.3.6.7.2); beyond 30 degrees of freedom the normal
quantile 1.96 is used.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Summary", "break_even_accept_length", "summarize", "t_quantile_975"]

# Two-sided 95% (upper 0.975) quantiles of Student's t, by degrees of freedom 1..30.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
         2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
         2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile_975(df: int) -> float:
    """Upper 0.975 quantile of Student's t with ``df`` degrees of freedom (``df >= 1``)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return _T975[df - 1] if df <= len(_T975) else 1.96


@dataclass(frozen=True, slots=True)
class Summary:
    """Spread of one quantity over repeats (same unit as the inputs: tok/s, ms).

    ``ci_low``/``ci_high`` bound the 95% interval of the mean (the low end clamped at 0: every
    quantity measured here is non-negative); ``None`` with a single repeat.
    """

    n: int
    median: float
    mean: float
    min: float
    max: float
    ci_low: float | None
    ci_high: float | None

    def as_dict(self) -> dict[str, Any]:
        """Field order, floats rounded to 4 decimals for stable, readable reports."""
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Summary:
        """Inverse of :meth:`as_dict`."""
        return cls(n=int(data["n"]), median=float(data["median"]), mean=float(data["mean"]),
                   min=float(data["min"]), max=float(data["max"]),
                   ci_low=None if data.get("ci_low") is None else float(data["ci_low"]),
                   ci_high=None if data.get("ci_high") is None else float(data["ci_high"]))

    def bounds(self) -> tuple[float, float]:
        """The 95% interval, or ``(min, max)`` when there is none (a single repeat)."""
        if self.ci_low is None or self.ci_high is None:
            return self.min, self.max
        return self.ci_low, self.ci_high


def summarize(values: Sequence[float]) -> Summary | None:
    """Median, mean, min, max and the 95% t interval of the mean of ``values``; None when empty."""
    if not values:
        return None
    n = len(values)
    mean = statistics.fmean(values)
    lo = hi = None
    if n > 1:
        half = t_quantile_975(n - 1) * statistics.stdev(values) / math.sqrt(n)
        lo, hi = max(0.0, mean - half), mean + half
    return Summary(n=n, median=statistics.median(values), mean=mean, min=min(values), max=max(values),
                   ci_low=lo, ci_high=hi)


def break_even_accept_length(verify_cycle_ms: float, decode_step_ms: float) -> float:
    """The accept length at which speculative decoding pays: verify cycle time / baseline step time.

    A speculative cycle (draft + verify) of ``verify_cycle_ms`` yields on average the accept
    length in tokens; plain decoding yields one token per ``decode_step_ms``. Speculation is faster
    when ``accept_length / verify_cycle_ms > 1 / decode_step_ms``, i.e. when the accept length
    exceeds the ratio returned. Field numbers: 30 ms / 12.2 ms = 2.46.

    :raises ValueError: a non-positive step time.
    """
    if decode_step_ms <= 0:
        raise ValueError(f"baseline decode step must be > 0 ms, got {decode_step_ms}")
    return verify_cycle_ms / decode_step_ms
