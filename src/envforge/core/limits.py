"""Bounds on values a user gives that the recipe schema and the CLI both check (one owner each)."""

from __future__ import annotations

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_DATASET_TOKENS",
    "MAX_REPEATS",
    "MAX_TURNS",
    "MAX_REQUESTS",
    "MAX_REQUEST_TOKENS",
    "MAX_SEED",
    "MAX_TRACE_LINE",
    "MAX_TRACE_SPAN_S",
]

#: The largest seed: numpy's legacy generator, which draws open-loop arrivals as vLLM's does, takes
#: a seed of 32 bits (``np.random.RandomState``: "Seed must be between 0 and 2**32 - 1").
MAX_SEED = 2**32 - 1
#: The most requests in flight at one level: warm-up sends ``concurrency`` requests, each a task and a
#: connection; past this a value is a typo, not a load (vLLM's own benchmarks go to a few thousand).
MAX_CONCURRENCY = 100_000
#: The most input or output tokens of one request bench makes or replays: the longest context a model
#: card advertises in 2026 is 10M tokens (Llama 4 Scout); past this a value is a typo (issue 41: a trace's
#: ``input_length`` of 1e9 took bench past 2 GB of memory before a request was sent).
MAX_REQUEST_TOKENS = 10_000_000
#: The most tokens of text a generated dataset keeps at once (shared-prefix: groups x system prompt
#: tokens, which it keeps as text): about 100 MB of text.
MAX_DATASET_TOKENS = 25_000_000
#: The longest line of a trace, in bytes: a Mooncake line of a 10M-token request has 19,532 hash ids
#: (about 200 KB); a 600 MB line was parsed whole before (issue 41).
MAX_TRACE_LINE = 16 << 20
#: The longest replay of a trace, in seconds after ``--trace-time-scale``: a week (Mooncake's released
#: traces span an hour); a record 10^15 ms after the one before waited silently for millennia (issue 41).
MAX_TRACE_SPAN_S = 7 * 24 * 3600
#: The most requests of one level and repeat (and of the warm-up): each is a prompt kept in memory.
MAX_REQUESTS = 10_000_000
#: The most repeats of one level.
MAX_REPEATS = 10_000
#: The most user turns of one conversation a multi-turn run sends (``--turns``): each turn resends the
#: whole conversation so far, so the request body grows with every turn.
MAX_TURNS = 1_000
