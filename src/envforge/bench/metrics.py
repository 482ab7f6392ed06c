"""vLLM's speculative-decoding counters, scraped from ``GET /metrics`` around each measured repeat.

vLLM does not put speculative information into its OpenAI-compatible stream (one SSE chunk can carry
up to k+1 tokens of a verify step, with nothing saying so). Its Prometheus endpoint has four counters
that exist only while speculative decoding is on (``vllm/v1/spec_decode/metrics.py``,
``SpecDecodingProm``; each sample is labelled ``engine`` and ``model_name``):

=====================================================  =======================================================
``vllm:spec_decode_num_drafts_total``                  verify steps in which a draft was proposed
``vllm:spec_decode_num_draft_tokens_total``            draft tokens proposed
``vllm:spec_decode_num_accepted_tokens_total``         draft tokens accepted
``vllm:spec_decode_num_accepted_tokens_per_pos_total`` accepted tokens at draft position ``position`` (0..k-1)
=====================================================  =======================================================

plus, with or without speculation, ``vllm:generation_tokens_total`` (output tokens of every request)
and the histogram ``vllm:inter_token_latency_seconds``: one observation per request and decode step
(drafted or not), the time between two outputs of the request as stamped by the engine core
(``vllm/v1/metrics/stats.py``, ``IterationStats.update_from_output``), so it does not depend on how
the API server batches SSE chunks. Between two scrapes:

* mean acceptance length = 1 + Δaccepted / Δdrafts (the 1 is the token the target model adds to each
  verify step; vLLM's own ``SpecDecodingLogging`` uses the same formula);
* draft acceptance rate = Δaccepted / Δdraft_tokens;
* acceptance rate at position i = Δaccepted_per_pos[i] / Δdrafts;
* decode step (a verify cycle under speculation) = Δitl_sum / Δitl_count;
* tokens per decode step = (Δgeneration_tokens - requests) / Δitl_count (each request's first token
  comes from prefill). It equals the acceptance length only when every step proposed a draft; ngram
  proposes nothing where it finds no match, and those steps count here but not in Δdrafts.

Samples of one counter are summed over their label sets (several engines under data parallelism).
The text is parsed with ``prometheus_client``'s parser, not with regular expressions. A scrape that
fails, a body that is not Prometheus text, a counter set that is incomplete, a counter that went
backwards (the server restarted) or deltas that contradict each other raise :class:`MetricsError`;
nothing here ever stands in a default such as an acceptance length of 1.0 for a missing number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from envforge.bench.client import Endpoint
from envforge.bench.transport import METRICS_MAX_BYTES, HTTPError, ReadLimit, error_text, fetch
from envforge.core.errors import ExternalToolError

__all__ = [
    "ACCEPTED",
    "DRAFTS",
    "DRAFT_TOKENS",
    "GENERATION_TOKENS",
    "ITL_COUNT",
    "ITL_SUM",
    "PER_POSITION",
    "EngineCounters",
    "EngineWindow",
    "MetricsError",
    "SpecCounters",
    "SpecDecodeStats",
    "check_window",
    "describe",
    "engine_delta",
    "parse_metrics",
    "scrape",
    "spec_delta",
    "sum_stats",
    "sum_windows",
]

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
ITL_SUM = "vllm:inter_token_latency_seconds_sum"
ITL_COUNT = "vllm:inter_token_latency_seconds_count"
_SPEC = (DRAFTS, DRAFT_TOKENS, ACCEPTED)
SCRAPE_TIMEOUT_S = 10.0


class MetricsError(ExternalToolError):
    """vLLM's ``/metrics`` could not be read, parsed, or its counters do not add up (exit 3)."""

    def __init__(self, message: str, *, tool: str = "vllm", hint: str | None = None) -> None:
        super().__init__(message, tool=tool, argv=(), returncode=None, hint=hint)


@dataclass(frozen=True, slots=True)
class SpecCounters:
    """Speculative-decoding counter values of one scrape (cumulative since the server started);
    ``per_position[i]`` is the accepted-token count at draft position i (empty when not exported)."""

    drafts: float
    draft_tokens: float
    accepted: float
    per_position: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class EngineCounters:
    """The engine counters of one scrape: output tokens, the decode-step latency histogram's sum (s)
    and count, each None when absent, and the speculative counters (None without speculation)."""

    generation_tokens: float | None
    decode_s: float | None
    decode_steps: float | None
    spec: SpecCounters | None


def parse_metrics(text: str, *, source: str = "/metrics") -> EngineCounters:
    """The engine counters in a Prometheus text body (``text/plain; version=0.0.4``).

    :param source: where the text came from, for messages (e.g. ``http://127.0.0.1:8000/metrics``).
    :returns: the counters; ``spec`` is None when the body has no speculative-decoding counter (the
        server runs no speculative decoding: vLLM registers them only with a speculative config).
    :raises MetricsError: the body is not Prometheus text, only some of the three counters exist,
        or a per-position sample has no integer ``position`` label.
    """
    sums: dict[str, float] = {}
    positions: dict[int, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                wanted = (
                    sample.name == PER_POSITION
                    or sample.name in _SPEC
                    or sample.name in (GENERATION_TOKENS, ITL_SUM, ITL_COUNT)
                )
                if wanted and not (
                    math.isfinite(sample.value) and sample.value >= 0
                ):  # issue 41: NaN reached the report
                    raise MetricsError(
                        f"{source}: {sample.name} is {sample.value!r}, not a count >= 0",
                        hint="a counter is a finite number >= 0: the server's metrics are broken",
                    )
                if sample.name == PER_POSITION:
                    try:
                        pos = int(sample.labels["position"])
                    except (KeyError, ValueError):
                        raise MetricsError(
                            f"{source}: {PER_POSITION} sample without an integer 'position' label: {sample.labels}"
                        ) from None
                    positions[pos] = positions.get(pos, 0.0) + sample.value
                elif sample.name in _SPEC or sample.name in (GENERATION_TOKENS, ITL_SUM, ITL_COUNT):
                    sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    except ValueError as exc:
        raise MetricsError(
            f"{source} is not Prometheus text: {exc}",
            hint='is this a vLLM server? api = "vllm" reads vLLM\'s GET /metrics',
        ) from None
    engine = EngineCounters(sums.get(GENERATION_TOKENS), sums.get(ITL_SUM), sums.get(ITL_COUNT), None)
    present = [n for n in _SPEC if n in sums]
    if not present and not positions:
        return engine
    missing = [n for n in _SPEC if n not in sums]
    if missing:
        raise MetricsError(
            f"{source} has only some speculative-decoding counters: missing {', '.join(missing)}",
            hint="vLLM exports drafts, draft tokens and accepted tokens together; is this vLLM >= 0.10 (V1 engine)?",
        )
    if positions and sorted(positions) != list(range(len(positions))):
        raise MetricsError(f"{source}: {PER_POSITION} positions {sorted(positions)} are not 0..k-1")
    per_pos = tuple(positions[i] for i in range(len(positions)))
    return replace(engine, spec=SpecCounters(sums[DRAFTS], sums[DRAFT_TOKENS], sums[ACCEPTED], per_pos))


def scrape(endpoint: Endpoint, *, timeout_s: float = SCRAPE_TIMEOUT_S, server: str = "vllm") -> EngineCounters:
    """``GET <endpoint>/metrics`` and :func:`parse_metrics` it.

    The whole answer must arrive within ``timeout_s`` seconds and
    :data:`~envforge.bench.transport.METRICS_MAX_BYTES` bytes (:func:`envforge.bench.transport.fetch`).

    :raises MetricsError: connection error, timeout, an answer too large, or an HTTP status other
        than 200 (message names the URL and the server), or an unparsable body.
    """
    url = endpoint.url + "/metrics"
    try:
        status, body = fetch(
            endpoint.host,
            endpoint.port,
            "GET",
            endpoint.prefix + "/metrics",
            timeout_s=timeout_s,
            max_bytes=METRICS_MAX_BYTES,
            headers=endpoint.headers,
            scheme=endpoint.scheme,
            ca=endpoint.ca,
        )
    except ReadLimit as exc:
        raise MetricsError(
            f"cannot read the speculative-decoding counters of server '{server}' from {url}: {exc.message}", tool=server
        ) from None
    except (OSError, HTTPError) as exc:
        raise MetricsError(
            f"cannot read the speculative-decoding counters of server '{server}' from {url}: {error_text(exc)}",
            tool=server,
        ) from None
    if status != 200:
        raise MetricsError(
            f"GET {url} answered HTTP {status} (server '{server}'): {body[:200].decode('utf-8', 'replace').strip()}",
            tool=server,
            hint='api = "vllm" needs vLLM\'s Prometheus endpoint; it is on unless '
            "the server was started with --disable-log-stats",
        )
    return parse_metrics(body.decode("utf-8", "replace"), source=url)


@dataclass(frozen=True, slots=True)
class SpecDecodeStats:
    """Counter deltas over a window (one repeat, or a level summed over its repeats).

    Counts are integers; the rates are None when their denominator is 0 (no draft in the window),
    never 1.0 or 0.0 stand-ins.
    """

    drafts: int
    draft_tokens: int
    accepted: int
    per_position_accepted: tuple[int, ...] = ()

    @property
    def mean_acceptance_length(self) -> float | None:
        """1 + accepted / drafts: tokens per verify step in which a draft was proposed."""
        return 1.0 + self.accepted / self.drafts if self.drafts else None

    @property
    def draft_acceptance_rate(self) -> float | None:
        """accepted / draft tokens, in [0, 1]."""
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    @property
    def per_position_rates(self) -> tuple[float, ...] | None:
        """accepted at position i / drafts, for i = 0..k-1 (None without drafts)."""
        return tuple(n / self.drafts for n in self.per_position_accepted) if self.drafts else None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able; rates rounded to 4 decimals; ``source`` names the counters' origin."""

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        rates = self.per_position_rates
        return {
            "drafts": self.drafts,
            "draft_tokens": self.draft_tokens,
            "accepted": self.accepted,
            "per_position_accepted": list(self.per_position_accepted),
            "mean_acceptance_length": r(self.mean_acceptance_length),
            "draft_acceptance_rate": r(self.draft_acceptance_rate),
            "per_position_rates": None if rates is None else [round(x, 4) for x in rates],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SpecDecodeStats:
        """Inverse of :meth:`as_dict` (the rates are recomputed from the counts)."""
        return cls(
            int(d["drafts"]),
            int(d["draft_tokens"]),
            int(d["accepted"]),
            tuple(int(x) for x in d.get("per_position_accepted") or ()),
        )


def _count(name: str, before: float, after: float, source: str) -> int:
    delta = after - before
    if delta < 0:
        raise MetricsError(
            f"{source}: {name} went backwards ({before:g} -> {after:g}): the server restarted during the measurement",
            hint="run the benchmark again against a stable server",
        )
    if delta != int(delta):
        raise MetricsError(f"{source}: {name} moved by {delta:g}, not a whole number of events")
    return int(delta)


def spec_delta(before: SpecCounters, after: SpecCounters, *, source: str = "/metrics") -> SpecDecodeStats:
    """Deltas ``after - before`` of every counter, checked against each other.

    :raises MetricsError: a counter went backwards; accepted > draft tokens; draft tokens > 0 without
        a draft (or the reverse); the per-position deltas do not sum to the accepted delta; a
        position accepted more often than there were drafts.
    """
    drafts = _count(DRAFTS, before.drafts, after.drafts, source)
    draft_tokens = _count(DRAFT_TOKENS, before.draft_tokens, after.draft_tokens, source)
    accepted = _count(ACCEPTED, before.accepted, after.accepted, source)
    n = max(len(before.per_position), len(after.per_position))
    b = before.per_position + (0.0,) * (n - len(before.per_position))
    a = after.per_position + (0.0,) * (n - len(after.per_position))
    per_pos = tuple(_count(f'{PER_POSITION}{{position="{i}"}}', b[i], a[i], source) for i in range(n))
    stats = SpecDecodeStats(drafts, draft_tokens, accepted, per_pos)
    problems = []
    if accepted > draft_tokens:
        problems.append(f"{accepted} tokens accepted of {draft_tokens} drafted")
    if (drafts == 0) != (draft_tokens == 0):
        problems.append(f"{drafts} drafts but {draft_tokens} draft tokens")
    if per_pos and sum(per_pos) != accepted:
        problems.append(f"per-position accepted tokens sum to {sum(per_pos)}, not {accepted}")
    if any(x > drafts for x in per_pos):
        problems.append(f"a position accepted more tokens ({max(per_pos)}) than there were drafts ({drafts})")
    if problems:
        raise MetricsError(f"{source}: the speculative-decoding counters contradict each other: " + "; ".join(problems))
    return stats


def sum_stats(windows: Iterable[SpecDecodeStats]) -> SpecDecodeStats | None:
    """The sum of several windows' deltas (None for none)."""
    ws = list(windows)
    if not ws:
        return None
    n = max(len(w.per_position_accepted) for w in ws)
    per_pos = tuple(
        sum(w.per_position_accepted[i] if i < len(w.per_position_accepted) else 0 for w in ws) for i in range(n)
    )
    return SpecDecodeStats(
        sum(w.drafts for w in ws), sum(w.draft_tokens for w in ws), sum(w.accepted for w in ws), per_pos
    )


@dataclass(frozen=True, slots=True)
class EngineWindow:
    """What the engine did in a window (one repeat, or a level's repeats summed).

    ``requests``: requests bench sent; ``generation_tokens``: Δvllm:generation_tokens_total;
    ``decode_steps`` / ``decode_s``: Δcount / Δsum of vllm:inter_token_latency_seconds (seconds);
    None where the server exports no such metric. ``spec``: speculative deltas, None without.
    ``engine``: the registry name of the engine whose counters these are (:mod:`envforge.bench.engines`).
    """

    requests: int
    generation_tokens: int | None
    decode_steps: int | None
    decode_s: float | None
    spec: SpecDecodeStats | None = None
    engine: str = "vllm"

    @property
    def decode_step_ms(self) -> float | None:
        """Mean engine time per request and decode step (a verify cycle under speculation), ms."""
        if self.decode_s is None or not self.decode_steps:
            return None
        return self.decode_s * 1000.0 / self.decode_steps

    @property
    def tokens_per_step(self) -> float | None:
        """(generation tokens - requests) / decode steps: output tokens per decode step, every step counted."""
        if self.generation_tokens is None or not self.decode_steps:
            return None
        return (self.generation_tokens - self.requests) / self.decode_steps

    def as_dict(self) -> dict[str, Any]:
        """JSON-able (``decode_s`` rounded to 9 decimals, derived values to 4); ``engine`` is not in
        it: a report stores it beside (``{"name": engine, "counters": as_dict()}``)."""

        def r(x: float | None, nd: int = 4) -> float | None:
            return None if x is None else round(x, nd)

        return {
            "source": f"{self.engine} /metrics",
            "requests": self.requests,
            "generation_tokens": self.generation_tokens,
            "decode_steps": self.decode_steps,
            "decode_s": r(self.decode_s, 9),
            "decode_step_ms": r(self.decode_step_ms),
            "tokens_per_step": r(self.tokens_per_step),
            "spec_decode": None if self.spec is None else self.spec.as_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], *, engine: str = "vllm") -> EngineWindow:
        """Inverse of :meth:`as_dict` (derived values recomputed) for the counters of ``engine``."""

        def opt(key: str) -> int | None:
            return None if d.get(key) is None else int(d[key])

        return cls(
            int(d["requests"]),
            opt("generation_tokens"),
            opt("decode_steps"),
            None if d.get("decode_s") is None else float(d["decode_s"]),
            SpecDecodeStats.from_dict(d["spec_decode"]) if d.get("spec_decode") else None,
            engine,
        )


def sum_windows(windows: Sequence[EngineWindow]) -> EngineWindow | None:
    """Several windows of one engine summed (None for none); a count is None when any window lacks
    it; the sum's ``engine`` is the first window's."""
    if not windows:
        return None

    def total(values: Sequence[Any]) -> Any:
        return None if any(v is None for v in values) else sum(values)

    specs = [w.spec for w in windows]
    return EngineWindow(
        sum(w.requests for w in windows),
        total([w.generation_tokens for w in windows]),
        total([w.decode_steps for w in windows]),
        total([w.decode_s for w in windows]),
        None if any(s is None for s in specs) else sum_stats(s for s in specs if s is not None),
        windows[0].engine,
    )


def engine_delta(
    before: EngineCounters, after: EngineCounters, *, requests: int, source: str = "/metrics"
) -> EngineWindow:
    """``after - before`` of every engine counter (:func:`spec_delta` for the speculative ones).

    :raises MetricsError: a counter went backwards or the speculative deltas contradict each other.
    """

    def delta(name: str, b: float | None, a: float | None) -> int | None:
        return None if a is None or b is None else _count(name, b, a, source)

    spec = spec_delta(before.spec, after.spec, source=source) if before.spec and after.spec else None
    decode_s = None
    if after.decode_s is not None and before.decode_s is not None:
        if after.decode_s < before.decode_s:
            raise MetricsError(
                f"{source}: {ITL_SUM} went backwards ({before.decode_s:g} -> {after.decode_s:g}): "
                f"the server restarted during the measurement",
                hint="run the benchmark again against a stable server",
            )
        decode_s = after.decode_s - before.decode_s
    return EngineWindow(
        requests,
        delta(GENERATION_TOKENS, before.generation_tokens, after.generation_tokens),
        delta(ITL_COUNT, before.decode_steps, after.decode_steps),
        decode_s,
        spec,
    )


def check_window(
    server: str,
    speculative: bool,
    before: EngineCounters,
    after: EngineCounters,
    *,
    output_tokens: int,
    requests: int,
    source: str = "/metrics",
    where: str = "",
) -> tuple[EngineWindow, list[str]]:
    """Judge one measured window of a vLLM server against what its configuration says.

    :param speculative: the configuration is marked speculative (``speculative = true`` / ``--speculative``).
    :param output_tokens: tokens bench received in the window; ``requests``: requests it sent.
    :param where: e.g. ``"at concurrency 4, repeat 2"``, for messages.
    :returns: the window and warnings: no draft proposed although tokens were decoded (acceptance
        length then None, never 1.0); decode steps without a draft (the acceptance length then
        overstates the tokens per verify cycle); vLLM generated another number of tokens than bench
        received (other clients share the server; the counters include theirs); no decode-step
        histogram (no engine-side step time).
    :raises MetricsError: a speculative server without the counters, a non-speculative one with them,
        or counters that went backwards or contradict each other.
    """
    at = f" {where}" if where else ""
    if not speculative and (before.spec is not None or after.spec is not None):
        raise MetricsError(
            f"server '{server}' is not marked speculative but {source} has vLLM's speculative-decoding "
            f"counters: it runs speculative decoding, so its decode step is no baseline",
            tool=server,
            hint="set speculative = true for it (--speculative with --url), or start it without --speculative-config",
        )
    if speculative and (before.spec is None or after.spec is None):
        raise MetricsError(
            f"server '{server}' is marked speculative but {source} has no vllm:spec_decode_* counters{at}: "
            f"it runs without speculative decoding",
            tool=server,
            hint="start it with --speculative-config (vLLM registers these counters only then), "
            "or drop speculative = true / --speculative",
        )
    window = engine_delta(before, after, requests=requests, source=source)
    warnings = []
    decoded = output_tokens - requests  # each request's first token comes from prefill, not a decode step
    spec = window.spec
    if spec is not None and spec.drafts == 0 and decoded > 0:
        warnings.append(
            f"server '{server}'{at}: vLLM proposed no draft in {decoded} decoded tokens "
            f"(vllm:spec_decode_num_drafts_total did not move); no acceptance length for this window"
        )
    elif spec is not None and window.decode_steps is not None and window.decode_steps > spec.drafts:
        warnings.append(
            f"server '{server}'{at}: {window.decode_steps - spec.drafts} of {window.decode_steps} "
            f"decode steps proposed no draft; the acceptance length counts drafted steps only, "
            f"break-even uses the tokens per decode step"
        )
    if window.generation_tokens is not None and window.generation_tokens != output_tokens:
        warnings.append(
            f"server '{server}'{at}: vLLM generated {window.generation_tokens} tokens but bench "
            f"received {output_tokens}: other clients use this server and its counters "
            f"include their requests"
        )
    if window.decode_steps is None or window.decode_s is None:
        warnings.append(
            f"server '{server}'{at}: {source} has no vllm:inter_token_latency_seconds histogram; "
            f"the decode step comes from the stream's chunk timing"
        )
    return window, warnings


def describe(stats: SpecDecodeStats) -> Sequence[str]:
    """Human-readable lines: acceptance length, draft acceptance rate, per-position rates."""
    mal, rate, pos = stats.mean_acceptance_length, stats.draft_acceptance_rate, stats.per_position_rates
    return [
        f"mean acceptance length {'-' if mal is None else f'{mal:.3f}'} "
        f"(1 + {stats.accepted} accepted / {stats.drafts} drafts)",
        f"draft acceptance rate {'-' if rate is None else f'{rate:.3f}'} "
        f"({stats.accepted} of {stats.draft_tokens} draft tokens)",
        "per-position acceptance " + ("-" if not pos else ", ".join(f"{x:.3f}" for x in pos)),
    ]
