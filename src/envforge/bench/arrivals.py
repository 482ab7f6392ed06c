"""Open-loop arrivals: when each request of a level is meant to be sent, as ``vllm bench serve`` does it.

vLLM (``vllm/benchmarks/serve.py``, ``get_request``): at ``request_rate`` R requests/s the gaps
between requests are drawn from a gamma distribution with shape ``burstiness`` B and scale
1 / (R x B), so the mean gap is 1 / R whatever B is: B = 1 is a Poisson process (exponential gaps),
B < 1 burstier, B > 1 more uniform, B = inf constant gaps of 1 / R. The first request waits its own
drawn gap too. The cumulative times are then rescaled so the last one lands at n / R exactly ("to
close the gap for stabilizing the throughput data from different random seeds"). R = inf sends
every request at t = 0 (then only the concurrency cap paces them).

The draws come from ``numpy.random.RandomState(seed).gamma``: the legacy generator vLLM's
``np.random.gamma`` uses after ``np.random.seed(seed)``, so the same seed, rate, burstiness and count
give the same schedule as vLLM when nothing else drew from its global state first.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["arrival_times"]


def arrival_times(count: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> tuple[float, ...]:
    """Intended send times (seconds from the start of the level) of ``count`` requests.

    :param rate: requests per second (> 0; ``math.inf``: all at 0).
    :param burstiness: the gamma shape (> 0; 1 = Poisson; ``math.inf``: constant gaps).
    :raises ValueError: a rate or burstiness that is not > 0, or a negative count.
    """
    if count < 0 or not rate > 0 or not burstiness > 0:
        raise ValueError(f"need count >= 0, rate > 0 and burstiness > 0, got {count}, {rate}, {burstiness}")
    if count == 0:
        return ()
    if math.isinf(rate):
        return (0.0,) * count
    if math.isinf(burstiness):
        gaps = np.full(count, 1.0 / rate)
    else:
        gaps = np.random.RandomState(seed).gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=count)
    times = np.cumsum(gaps)
    times *= (count / rate) / times[-1]
    return tuple(float(t) for t in times)
