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

plus ``vllm:generation_tokens_total`` (all output tokens, every request). Between two scrapes:

* mean acceptance length = 1 + Δaccepted / Δdrafts (the 1 is the token the target model adds to each
  verify step; vLLM's own ``SpecDecodingLogging`` uses the same formula);
* draft acceptance rate = Δaccepted / Δdraft_tokens;
* acceptance rate at position i = Δaccepted_per_pos[i] / Δdrafts.

Samples of one counter are summed over their label sets (several engines under data parallelism).
The text is parsed with ``prometheus_client``'s parser, not with regular expressions. A scrape that
fails, a body that is not Prometheus text, a counter set that is incomplete, a counter that went
backwards (the server restarted) or deltas that contradict each other raise :class:`MetricsError`;
nothing here ever stands in a default such as an acceptance length of 1.0 for a missing number.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from envforge.bench.client import Endpoint
from envforge.errors import ExternalToolError

__all__ = [
    "ACCEPTED",
    "DRAFTS",
    "DRAFT_TOKENS",
    "GENERATION_TOKENS",
    "PER_POSITION",
    "MetricsError",
    "SpecCounters",
    "SpecDecodeStats",
    "check_spec",
    "describe",
    "parse_metrics",
    "scrape",
    "spec_delta",
    "sum_stats",
]

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
_SPEC = (DRAFTS, DRAFT_TOKENS, ACCEPTED)
SCRAPE_TIMEOUT_S = 10.0


class MetricsError(ExternalToolError):
    """vLLM's ``/metrics`` could not be read, parsed, or its counters do not add up (exit 3)."""

    def __init__(self, message: str, *, tool: str = "vllm", hint: str | None = None) -> None:
        super().__init__(message, tool=tool, argv=(), returncode=None, hint=hint)


@dataclass(frozen=True, slots=True)
class SpecCounters:
    """Counter values of one scrape (cumulative since the server started).

    ``per_position[i]`` is the accepted-token count at draft position i (empty when the server
    exports none); ``generation_tokens`` is None when ``vllm:generation_tokens_total`` is absent.
    """

    drafts: float
    draft_tokens: float
    accepted: float
    per_position: tuple[float, ...] = ()
    generation_tokens: float | None = None


def parse_metrics(text: str, *, source: str = "/metrics") -> SpecCounters | None:
    """The speculative-decoding counters in a Prometheus text body (``text/plain; version=0.0.4``).

    :param source: where the text came from, for messages (e.g. ``http://127.0.0.1:8000/metrics``).
    :returns: the counters, or None when the body has none of them (the server runs no speculative
        decoding: vLLM registers them only with a speculative config).
    :raises MetricsError: the body is not Prometheus text, only some of the three counters exist,
        or a per-position sample has no integer ``position`` label.
    """
    sums: dict[str, float] = {}
    positions: dict[int, float] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == PER_POSITION:
                    try:
                        pos = int(sample.labels["position"])
                    except (KeyError, ValueError):
                        raise MetricsError(f"{source}: {PER_POSITION} sample without an integer 'position' "
                                           f"label: {sample.labels}") from None
                    positions[pos] = positions.get(pos, 0.0) + sample.value
                elif sample.name in _SPEC or sample.name == GENERATION_TOKENS:
                    sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    except ValueError as exc:
        raise MetricsError(f"{source} is not Prometheus text: {exc}",
                           hint="is this a vLLM server? api = \"vllm\" reads vLLM's GET /metrics") from None
    present = [n for n in _SPEC if n in sums]
    if not present and not positions:
        return None
    missing = [n for n in _SPEC if n not in sums]
    if missing:
        raise MetricsError(f"{source} has only some speculative-decoding counters: missing {', '.join(missing)}",
                           hint="vLLM exports drafts, draft tokens and accepted tokens together; "
                                "is this vLLM >= 0.10 (V1 engine)?")
    if positions and sorted(positions) != list(range(len(positions))):
        raise MetricsError(f"{source}: {PER_POSITION} positions {sorted(positions)} are not 0..k-1")
    per_pos = tuple(positions[i] for i in range(len(positions)))
    return SpecCounters(sums[DRAFTS], sums[DRAFT_TOKENS], sums[ACCEPTED], per_pos, sums.get(GENERATION_TOKENS))


def scrape(endpoint: Endpoint, *, timeout_s: float = SCRAPE_TIMEOUT_S, server: str = "vllm") -> SpecCounters | None:
    """``GET <endpoint>/metrics`` and :func:`parse_metrics` it.

    :raises MetricsError: connection error, timeout, or an HTTP status other than 200 (message names
        the URL and the server), or an unparsable body.
    """
    url = endpoint.url + "/metrics"
    conn = endpoint.connection(timeout_s)
    try:
        conn.request("GET", endpoint.prefix + "/metrics")
        resp = conn.getresponse()
        body = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise MetricsError(f"cannot read the speculative-decoding counters of server '{server}' from {url}: "
                           f"{type(exc).__name__}: {exc}", tool=server) from None
    finally:
        conn.close()
    if resp.status != 200:
        raise MetricsError(f"GET {url} answered HTTP {resp.status} (server '{server}'): "
                           f"{body[:200].decode('utf-8', 'replace').strip()}", tool=server,
                           hint="api = \"vllm\" needs vLLM's Prometheus endpoint; it is on unless "
                                "the server was started with --disable-log-stats")
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
    generation_tokens: int | None = None

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
        return {"source": "vllm /metrics", "drafts": self.drafts, "draft_tokens": self.draft_tokens,
                "accepted": self.accepted, "per_position_accepted": list(self.per_position_accepted),
                "generation_tokens": self.generation_tokens,
                "mean_acceptance_length": r(self.mean_acceptance_length),
                "draft_acceptance_rate": r(self.draft_acceptance_rate),
                "per_position_rates": None if rates is None else [round(x, 4) for x in rates]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SpecDecodeStats:
        """Inverse of :meth:`as_dict` (the rates are recomputed from the counts)."""
        gen = d.get("generation_tokens")
        return cls(int(d["drafts"]), int(d["draft_tokens"]), int(d["accepted"]),
                   tuple(int(x) for x in d.get("per_position_accepted") or ()), None if gen is None else int(gen))


def _count(name: str, before: float, after: float, source: str) -> int:
    delta = after - before
    if delta < 0:
        raise MetricsError(f"{source}: {name} went backwards ({before:g} -> {after:g}): the server restarted "
                           f"during the measurement", hint="run the benchmark again against a stable server")
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
    per_pos = tuple(_count(f"{PER_POSITION}{{position=\"{i}\"}}", b[i], a[i], source) for i in range(n))
    gen = None
    if before.generation_tokens is not None and after.generation_tokens is not None:
        gen = _count(GENERATION_TOKENS, before.generation_tokens, after.generation_tokens, source)
    stats = SpecDecodeStats(drafts, draft_tokens, accepted, per_pos, gen)
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
        raise MetricsError(f"{source}: the speculative-decoding counters contradict each other: "
                           + "; ".join(problems))
    return stats


def sum_stats(windows: Iterable[SpecDecodeStats]) -> SpecDecodeStats | None:
    """The sum of several windows' deltas (None for none); generation tokens only when every window has them."""
    ws = list(windows)
    if not ws:
        return None
    n = max(len(w.per_position_accepted) for w in ws)
    per_pos = tuple(sum(w.per_position_accepted[i] if i < len(w.per_position_accepted) else 0 for w in ws)
                    for i in range(n))
    gens = [w.generation_tokens for w in ws]
    return SpecDecodeStats(sum(w.drafts for w in ws), sum(w.draft_tokens for w in ws), sum(w.accepted for w in ws),
                           per_pos, None if any(g is None for g in gens) else sum(g for g in gens if g is not None))


def check_spec(server: str, speculative: bool, before: SpecCounters | None, after: SpecCounters | None, *,
               output_tokens: int, requests: int, source: str = "/metrics",
               where: str = "") -> tuple[SpecDecodeStats | None, list[str]]:
    """Judge one measured window of a vLLM server against what its configuration says.

    :param speculative: the configuration is marked speculative (``speculative = true`` / ``--speculative``).
    :param output_tokens: tokens bench received in the window; ``requests``: requests it sent.
    :param where: e.g. ``"at concurrency 4, repeat 2"``, for messages.
    :returns: the deltas (None for a non-speculative server) and warnings: no draft proposed although
        tokens were decoded (acceptance length then None, never 1.0), or vLLM generated another number
        of tokens than bench received (other clients share the server; the counters include theirs).
    :raises MetricsError: a speculative server without the counters, a non-speculative one with them,
        or counters that went backwards or contradict each other.
    """
    at = f" {where}" if where else ""
    if not speculative:
        if before is not None or after is not None:
            raise MetricsError(
                f"server '{server}' is not marked speculative but {source} has vLLM's speculative-decoding "
                f"counters: it runs speculative decoding, so its decode step is no baseline", tool=server,
                hint="set speculative = true for it (--speculative with --url), or start it without "
                     "--speculative-config")
        return None, []
    if before is None or after is None:
        raise MetricsError(
            f"server '{server}' is marked speculative but {source} has no vllm:spec_decode_* counters{at}: "
            f"it runs without speculative decoding", tool=server,
            hint="start it with --speculative-config (vLLM registers these counters only then), "
                 "or drop speculative = true / --speculative")
    stats = spec_delta(before, after, source=source)
    warnings = []
    decoded = output_tokens - requests  # each request's first token comes from prefill, not a verify step
    if stats.drafts == 0 and decoded > 0:
        warnings.append(f"server '{server}'{at}: vLLM proposed no draft in {decoded} decoded tokens "
                        f"(vllm:spec_decode_num_drafts_total did not move); no acceptance length for this window")
    if stats.generation_tokens is not None and stats.generation_tokens != output_tokens:
        warnings.append(f"server '{server}'{at}: vLLM generated {stats.generation_tokens} tokens but bench "
                        f"received {output_tokens}: other clients use this server and its speculative counters "
                        f"include their requests")
    return stats, warnings


def describe(stats: SpecDecodeStats) -> Sequence[str]:
    """Human-readable lines: acceptance length, draft acceptance rate, per-position rates."""
    mal, rate, pos = stats.mean_acceptance_length, stats.draft_acceptance_rate, stats.per_position_rates
    return [f"mean acceptance length {'-' if mal is None else f'{mal:.3f}'} "
            f"(1 + {stats.accepted} accepted / {stats.drafts} drafts)",
            f"draft acceptance rate {'-' if rate is None else f'{rate:.3f}'} "
            f"({stats.accepted} of {stats.draft_tokens} draft tokens)",
            "per-position acceptance " + ("-" if not pos else ", ".join(f"{x:.3f}" for x in pos))]
