"""A report's ``method``: how a run's requests were made and sent, in words a reader can check
against the settings (``config``) of the same report."""

from __future__ import annotations

from typing import Any

from envforge.bench.config import SmokeConfig

__all__ = ["EXACT", "NATURAL", "report_method"]


#: ``method.output_lengths`` of each mode (``--output-lengths``).
EXACT = (
    "exact: every request asks for its output tokens with ignore_eos (where the server takes it) and must "
    "yield exactly that many; one that stops early fails and its level has no figures"
)
NATURAL = (
    "natural: no ignore_eos; the output tokens asked for are each request's max_tokens and the server stops "
    "where it stops (vLLM's default); figures are over the completed requests with their actual output "
    "lengths, and a level fails only on errors"
)


def report_method(cfg: SmokeConfig, *, interleaved: bool) -> dict[str, Any]:
    """The ``method`` object of a report (schema ``envforge.bench/4``): ``prompts``, ``order``
    (``"interleaved"`` or ``"sequential"``), ``load``, ``warmup``, ``dataset``, ``server_metrics`` and
    ``output_lengths``, in that order; every value is a sentence except ``dataset`` (:func:`dataset_method`)."""
    return {
        "prompts": "distinct per request, warm-up included (seed %d)" % cfg.seed,
        "order": "interleaved" if interleaved else "sequential",
        "load": load_method(cfg),
        "warmup": (
            f"before each level: max({cfg.warmup}, concurrency) requests at its concurrency" if cfg.warmup else "none"
        ),
        "dataset": dataset_method(cfg),
        "server_metrics": (
            f"the engine's metrics route every {cfg.metrics_interval_s:g} s during each "
            "measured repeat, where it has one (each server's server_metrics)"
            if cfg.metrics_interval_s > 0
            else "not read (--metrics-interval 0)"
        ),
        "output_lengths": NATURAL if cfg.natural else EXACT,
    }


def dataset_method(cfg: SmokeConfig) -> dict[str, Any]:
    """What was sent, for ``method.dataset``: a generated dataset's description (its settings, seed,
    tokenizer, length rule and the lengths drawn), or the prompt set's (name, count, digest, rule)."""
    if cfg.dataset is not None:
        return cfg.dataset.describe(cfg.seed, cfg.natural)
    asked = " at most (natural lengths)" if cfg.natural else ", checked exactly"
    if cfg.per_request:  # ShareGPT replies in natural mode (envforge.bench.dataset.reply_lengths)
        asked_n = [p.output_len or 0 for p in cfg.prompts]
        return {
            "name": "prompts",
            "prompts": len(cfg.prompts),
            "digest": cfg.prompts_digest,
            "lengths": "every request asks for its ShareGPT reply's length in the model's tokens (special tokens "
            "included) at most, as vLLM's --dataset-name sharegpt does; pairs vLLM leaves out (prompt "
            "or reply under 4 tokens, prompt over 1,024, both over 2,048) are left out",
            "output_tokens": {"min": min(asked_n), "max": max(asked_n), "total": sum(asked_n)},
        }
    return {
        "name": "prompts",
        "prompts": len(cfg.prompts),
        "digest": cfg.prompts_digest,
        "lengths": f"every request asks for max-new-tokens ({cfg.max_new_tokens}) output tokens{asked}; "
        "input tokens are not counted",
    }


def load_method(cfg: SmokeConfig) -> str:
    """How a level's requests were sent, for ``method.load``: trace replay, closed loop, or open loop
    at the rate (or each sweep level's rate) with the arrival process named."""
    trace = cfg.trace
    if trace is not None:
        return (
            f"trace replay: each repeat sends the first {cfg.requests_at(1)} of the trace's {trace.size} records, "
            f"from a new pass, at their recorded times x {trace.time_scale:g}, at most the level's concurrency "
            "in flight"
        )
    if not cfg.open_loop and cfg.sweep is None:
        return "closed loop: every request due at once, at most the level's concurrency in flight"
    kind = (
        "constant gaps"
        if cfg.burstiness == float("inf")
        else "Poisson arrivals"
        if cfg.burstiness == 1.0
        else f"gamma arrivals (burstiness {cfg.burstiness:g})"
    )
    rate = (
        f"{cfg.request_rate:g} requests/s"
        if cfg.sweep is None
        else f"each level at its rate of the sweep (--sweep-rate {cfg.sweep.low:g}:{cfg.sweep.high:g})"
    )
    return f"open loop: {rate}, {kind} (seed {cfg.seed}), at most the level's concurrency in flight"
