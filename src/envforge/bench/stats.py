"""Statistics over benchmark repeats, and the break-even accept length of speculative decoding.

Repeats are few (3 to 10), so the 95% interval of the mean uses Student's t distribution with
``n - 1`` degrees of freedom, its quantile from :func:`scipy.stats.t.ppf` at every number of degrees
of freedom (never the normal 1.96: at 40 degrees of freedom the 0.975 quantile is 2.021).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Summary", "break_even_accept_length", "summarize", "t_quantile_975"]


def t_quantile_975(df: float) -> float:
    """Upper 0.975 quantile of Student's t with ``df`` degrees of freedom (``df >= 1``; fractional
    for Welch's approximation), from :func:`scipy.stats.t.ppf`.

    :raises ValueError: ``df < 1``.
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    from scipy.stats import t as student_t  # lazy: scipy is heavy; loaded only when an interval is computed

    return float(student_t.ppf(0.975, df))


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
        return cls(
            n=int(data["n"]),
            median=float(data["median"]),
            mean=float(data["mean"]),
            min=float(data["min"]),
            max=float(data["max"]),
            ci_low=None if data.get("ci_low") is None else float(data["ci_low"]),
            ci_high=None if data.get("ci_high") is None else float(data["ci_high"]),
        )

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
    return Summary(
        n=n, median=statistics.median(values), mean=mean, min=min(values), max=max(values), ci_low=lo, ci_high=hi
    )


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
