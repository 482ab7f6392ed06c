"""Smoke benchmarks: is this stack fast on this box, compared honestly with the last run.

Modules follow the data flow: :mod:`~envforge.bench.config` (``[verify.smoke]`` and the prompt set)
-> :mod:`~envforge.bench.server` (lifecycle) -> :mod:`~envforge.bench.client` (HTTP, timing) with
:mod:`~envforge.bench.engines` (one class per serving engine: request body, chunk parser, routes,
counters) -> :mod:`~envforge.bench.stats` / :mod:`~envforge.bench.result` (spread, break-even) ->
:mod:`~envforge.bench.report` (the run, its JSON) / :mod:`~envforge.bench.compare` (two runs) ->
:mod:`~envforge.bench.plot` (PNG). :mod:`~envforge.bench.metrics` reads vLLM's ``GET /metrics``
counters around each repeat (``api = "vllm"``). :mod:`~envforge.bench.run` ties them together.
"""
