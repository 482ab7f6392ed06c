"""Bounds on values a user gives that the recipe schema and the CLI both check (one owner each)."""

from __future__ import annotations

__all__ = ["MAX_CONCURRENCY", "MAX_SEED"]

#: The largest seed: numpy's legacy generator, which draws open-loop arrivals as vLLM's does, takes
#: a seed of 32 bits (``np.random.RandomState``: "Seed must be between 0 and 2**32 - 1").
MAX_SEED = 2**32 - 1
#: The most requests in flight at one level: warm-up sends ``concurrency`` requests, each a task and a
#: connection; past this a value is a typo, not a load (vLLM's own benchmarks go to a few thousand).
MAX_CONCURRENCY = 100_000
