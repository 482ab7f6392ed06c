"""Benchmark results: per-level figures with their spread, failures and break-even, and their JSON.

Every request is accounted for: a level with a failed request gets no figures (its ``tok_s`` and
latencies are ``null`` and ``failed_requests`` says how many), and the report lists each failure. A
speculative server whose token counts are chunk counts gets no tok/s and no TPOT or ITL (``refused``
says why): one chunk carries a whole verify step (field case B23).

Names and formulas are vLLM's (``vllm/benchmarks/serve.py``, ``calculate_metrics``): per repeat the
medians of TTFT, TPOT and end-to-end time; per level, over every request of every repeat, the
distributions (:mod:`envforge.bench.distribution`) of TTFT, TPOT, ITL (the inter-chunk gaps of all
requests pooled, as vLLM pools them), ITL per token (each gap spread over the tokens its chunk
carried) and E2EL, plus request and output-token throughput.

An engine with counters (:attr:`envforge.bench.engines.base.Engine.has_counters`, e.g. vLLM) adds
its window to each repeat and level, saved as ``"engine": {"name": "<engine>", "counters": {...}}``
(schema ``envforge.bench/4``, :mod:`envforge.bench.report`). Each level also keeps its open-loop
rate and the server's own gauges over its repeats (:mod:`envforge.bench.gauges`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from envforge.bench.client import LevelRun, RequestResult
from envforge.bench.distribution import Distribution, distribution
from envforge.bench.engines import ENGINES
from envforge.bench.gauges import GaugeSeries
from envforge.bench.metrics import EngineWindow, sum_windows
from envforge.bench.slo import Goodput, Slo, goodput
from envforge.bench.stats import Summary, summarize
from envforge.bench.turns import TurnFigures, turn_figures

__all__ = [
    "REFUSED_CHUNKS",
    "Failure",
    "LevelResult",
    "LATENCY_KEYS",
    "RepeatResult",
    "ServerResult",
    "failures_of",
    "level_result",
    "repeat_result",
]


def _text(d: Mapping[str, Any], key: str, default: str | None = None) -> str:
    """``d[key]`` when it is a string (``default`` when absent and given); else ``TypeError``
    naming the key, which :func:`read_report` turns into an input error naming the file."""
    if key not in d and default is None:
        raise KeyError(key)
    value = d.get(key, default)
    if not isinstance(value, str):
        raise TypeError(f"'{key}' must be a string, got {type(value).__name__}")
    return value


def _number(d: Mapping[str, Any], key: str) -> float | None:
    """``d[key]`` when it is a finite number or absent/null (``None``); else ``TypeError``/``ValueError``."""
    value = d.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"'{key}' must be a number or null, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"'{key}' must be finite, got {value}")
    return float(value)


def _r(x: float | None, nd: int = 4) -> float | None:
    return None if x is None else round(x, nd)


def _median_ms(values: Sequence[float | None]) -> float | None:
    vs = [v * 1000.0 for v in values if v is not None]
    return statistics.median(vs) if vs else None


def _counters_dict(w: EngineWindow) -> dict[str, Any]:
    """``{"name": <engine>, "counters": {...}}``: the ``engine`` key of a repeat or level."""
    return {"name": w.engine, "counters": w.as_dict()}


def _counters_of(d: Mapping[str, Any]) -> EngineWindow | None:
    """The counters window under ``d["engine"]`` (None when absent or null).

    :raises ValueError: an engine name that is not in the registry.
    :raises TypeError: ``engine`` or its ``counters`` is not an object.
    """
    e = d.get("engine")
    if e is None:
        return None
    if not isinstance(e, Mapping) or not isinstance(e.get("counters"), Mapping):
        raise TypeError('\'engine\' must be an object {"name": ..., "counters": {...}}')
    name = _text(e, "name")
    if name not in ENGINES:
        raise ValueError(f"engine '{name}' is not one of {', '.join(ENGINES)}")
    return EngineWindow.from_dict(e["counters"], engine=name)


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed request: server, concurrency level, repeat (1-based; 0 = warm-up), the message and
    the status (HTTP status, or the ``status_code`` of a server abort; None for a connection error)."""

    server: str
    concurrency: int
    repeat: int
    message: str
    status: int | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "concurrency": self.concurrency,
            "repeat": self.repeat,
            "status": self.status,
            "message": self.message,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Failure:
        return cls(str(d["server"]), int(d["concurrency"]), int(d["repeat"]), str(d["message"]), d.get("status"))

    def line(self) -> str:
        """``server 'x', concurrency 4, repeat 2: <message> (status 503)``."""
        where = "warm-up" if self.repeat == 0 else f"concurrency {self.concurrency}, repeat {self.repeat}"
        status = f" (status {self.status})" if self.status is not None else ""
        return f"server '{self.server}', {where}: {self.message}{status}"


def failures_of(server: str, run: LevelRun, repeat: int) -> tuple[Failure, ...]:
    """The failed requests of one repeat (``repeat`` 0 for the warm-up) as :class:`Failure` rows."""
    return tuple(
        Failure(server, run.concurrency, repeat, r.error or "failed", r.status) for r in run.results if not r.ok
    )


#: The per-request distributions of a level, in report order (vLLM's metric names, in ms).
LATENCY_KEYS = ("ttft_ms", "tpot_ms", "itl_ms", "itl_per_token_ms", "e2el_ms")


def latency_of(results: Sequence[RequestResult], percentiles: Sequence[float] = ()) -> dict[str, Distribution | None]:
    """The distributions of ``results`` (completed requests) by :data:`LATENCY_KEYS`, each with the
    ``percentiles`` chosen; ITL per token is None when one request's chunk token counts are unknown
    (:meth:`RequestResult.itl_per_token_s`)."""
    per_token = [r.itl_per_token_s() for r in results]
    dist = partial(distribution, percentiles=percentiles)
    return {
        "ttft_ms": dist([r.ttft_s for r in results if r.ttft_s is not None]),
        "tpot_ms": dist([r.tpot_s for r in results if r.tpot_s is not None]),
        "itl_ms": dist([g for r in results for g in r.itl_s]),
        "itl_per_token_ms": None
        if any(x is None for x in per_token)
        else dist([g for x in per_token for g in x or ()]),
        "e2el_ms": dist([r.e2el_s for r in results if r.e2el_s is not None]),
    }


def _latency_dict(latency: Mapping[str, Distribution | None] | None) -> dict[str, Any] | None:
    if latency is None:
        return None
    return {k: None if latency.get(k) is None else latency[k].as_dict() for k in LATENCY_KEYS}  # type: ignore[union-attr]


def _latency_of_dict(d: Any) -> dict[str, Distribution | None] | None:
    if d is None:
        return None
    if not isinstance(d, Mapping):
        raise TypeError("'latency' must be an object or null")
    return {k: None if d.get(k) is None else Distribution.from_dict(d[k]) for k in LATENCY_KEYS}


@dataclass(frozen=True, slots=True)
class RepeatResult:
    """One measured repeat at one level: output tok/s and requests/s over the wall time; latencies
    are medians (ms; ``tpot_ms`` vLLM's TPOT).
    ``failed``: failed requests (their figures are left out of the level); ``token_count``:
    ``"server"``, ``"chunks"`` or ``"mixed"`` (how its output tokens were counted)."""

    tok_s: float
    wall_s: float
    requests: int
    output_tokens: int
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float
    verify_steps: int | None
    decode_s: float
    failed: int = 0
    token_count: str = "server"
    counters: EngineWindow | None = None  # the engine's counter deltas around the repeat (vLLM: GET /metrics)

    @property
    def req_s(self) -> float:
        """Completed requests per second of wall time (vLLM's request throughput)."""
        return (self.requests - self.failed) / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "tok_s": _r(self.tok_s),
            "req_s": _r(self.req_s),
            "wall_s": _r(self.wall_s),
            "requests": self.requests,
            "failed": self.failed,
            "output_tokens": self.output_tokens,
            "token_count": self.token_count,
            "ttft_ms": _r(self.ttft_ms),
            "tpot_ms": _r(self.tpot_ms),
            "e2e_ms": _r(self.e2e_ms),
            "verify_steps": self.verify_steps,
            "decode_s": _r(self.decode_s),
        }
        if self.counters is not None:
            d["engine"] = _counters_dict(self.counters)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RepeatResult:
        def opt(key: str) -> float | None:
            return _number(d, key)

        steps = d.get("verify_steps")

        def req(key: str) -> float:
            value = _number(d, key)
            if value is None:
                raise TypeError(f"'{key}' must be a number, got null")
            return value

        return cls(
            tok_s=req("tok_s"),
            wall_s=req("wall_s"),
            requests=int(d["requests"]),
            output_tokens=int(d["output_tokens"]),
            ttft_ms=opt("ttft_ms"),
            tpot_ms=opt("tpot_ms"),
            e2e_ms=req("e2e_ms"),
            verify_steps=None if steps is None else int(steps),
            decode_s=float(d.get("decode_s") or 0.0),
            failed=int(d.get("failed") or 0),
            token_count=str(d.get("token_count") or "server"),
            counters=_counters_of(d),
        )


def _token_count(kinds: set[str]) -> str:
    return kinds.pop() if len(kinds) == 1 else "mixed" if kinds else "server"


def repeat_result(run: LevelRun, counters: EngineWindow | None = None) -> RepeatResult:
    """Aggregate one :class:`LevelRun` over its successful requests; ``failed`` counts the others.

    ``counters``: the engine's counter deltas over the repeat (vLLM: :mod:`envforge.bench.metrics`);
    with speculation its drafts are the repeat's verify steps (steps with a proposed draft) and the
    decode time is every request's.
    """
    spec = counters.spec if counters is not None else None
    rs = [r for r in run.results if r.ok]
    tokens = sum(r.output_tokens for r in rs)
    steps = [r.verify_steps for r in rs if r.verify_steps is not None]
    verify = spec.drafts if spec is not None else sum(steps) if steps else None
    decode = sum(r.decode_s or 0.0 for r in rs if spec is not None or r.verify_steps is not None)
    return RepeatResult(
        tok_s=tokens / run.wall_s if run.wall_s > 0 else 0.0,
        wall_s=run.wall_s,
        requests=len(run.results),
        output_tokens=tokens,
        ttft_ms=_median_ms([r.ttft_s for r in rs]),
        tpot_ms=_median_ms([r.tpot_s for r in rs]),
        e2e_ms=_median_ms([r.e2e_s for r in rs]) or 0.0,
        verify_steps=verify,
        decode_s=decode,
        failed=len(run.results) - len(rs),
        token_count=_token_count({r.token_count for r in rs}),
        counters=counters,
    )


@dataclass(frozen=True, slots=True)
class LevelResult:
    """One concurrency level over its repeats: ``tok_s`` (output tokens/s), ``req_s``, and the medians
    ``ttft_ms``, ``tpot_ms``, ``e2e_ms`` of each repeat summarized over the repeats (95 % interval of
    the mean); ``latency`` the per-request distributions by :data:`LATENCY_KEYS` over every request
    of every repeat; ``goodput`` against the run's SLO (:mod:`envforge.bench.slo`); ``send_lag_ms``
    (open loop) the distribution of actual minus intended send times. ``accept_length`` = tokens / verify steps (speculative
    servers that report verify steps), or with engine counters 1 + accepted / drafts of
    ``counters.spec`` (the repeats' counter deltas summed); ``verify_cycle_ms`` = decode time / verify
    steps, with engine counters the engine's mean decode-step time (``counters.decode_step_ms``,
    :mod:`envforge.bench.metrics`).

    ``failed_requests`` > 0: no figure (``tok_s`` and every summary None). ``refused``: why tok/s,
    TPOT and ITL are None although every request succeeded (chunk-counted tokens on a speculative server).
    ``turns``: a multi-turn level's figures per turn (:mod:`envforge.bench.turns`), else empty.
    """

    concurrency: int
    repeats: tuple[RepeatResult, ...]
    tok_s: Summary | None
    ttft_ms: Summary | None
    tpot_ms: Summary | None
    e2e_ms: Summary | None
    accept_length: float | None
    verify_cycle_ms: float | None
    failed_requests: int = 0
    token_count: str = "server"
    refused: str | None = None
    counters: EngineWindow | None = None
    req_s: Summary | None = None
    latency: Mapping[str, Distribution | None] | None = None
    goodput: Goodput | None = None
    send_lag_ms: Distribution | None = None
    request_rate: float | None = None
    server_metrics: GaugeSeries | None = None
    turns: tuple[TurnFigures, ...] = ()

    @property
    def label(self) -> str:
        """``concurrency 4``, or with an open-loop rate ``concurrency 4, 2.5 requests/s``."""
        rate = "" if self.request_rate is None else f", {self.request_rate:g} requests/s"
        return f"concurrency {self.concurrency}{rate}"

    def as_dict(self) -> dict[str, Any]:
        def s(x: Summary | None) -> dict[str, Any] | None:
            return None if x is None else x.as_dict()

        d: dict[str, Any] = {
            "concurrency": self.concurrency,
            "request_rate": self.request_rate,
            "failed_requests": self.failed_requests,
            "token_count": self.token_count,
            "refused": self.refused,
            "tok_s": s(self.tok_s),
            "req_s": s(self.req_s),
            "ttft_ms": s(self.ttft_ms),
            "tpot_ms": s(self.tpot_ms),
            "e2e_ms": s(self.e2e_ms),
            "latency": _latency_dict(self.latency),
            "goodput": None if self.goodput is None else self.goodput.as_dict(),
            "send_lag_ms": None if self.send_lag_ms is None else self.send_lag_ms.as_dict(),
            "accept_length": _r(self.accept_length),
            "verify_cycle_ms": _r(self.verify_cycle_ms),
            "server_metrics": None if self.server_metrics is None else self.server_metrics.as_dict(),
        }
        if self.turns:
            d["turns"] = [t.as_dict() for t in self.turns]
        if self.counters is not None:
            d["engine"] = _counters_dict(self.counters)
        d["repeats"] = [r.as_dict() for r in self.repeats]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LevelResult:
        def s(x: Any) -> Summary | None:
            return None if x is None else Summary.from_dict(x)

        return cls(
            int(d["concurrency"]),
            tuple(RepeatResult.from_dict(r) for r in d.get("repeats", ())),
            s(d.get("tok_s")),
            s(d.get("ttft_ms")),
            s(d.get("tpot_ms")),
            s(d.get("e2e_ms")),
            _number(d, "accept_length"),
            _number(d, "verify_cycle_ms"),
            int(d.get("failed_requests") or 0),
            str(d.get("token_count") or "server"),
            None if d.get("refused") is None else _text(d, "refused"),
            _counters_of(d),
            s(d.get("req_s")),
            _latency_of_dict(d.get("latency")),
            None if d.get("goodput") is None else Goodput.from_dict(d["goodput"]),
            None if d.get("send_lag_ms") is None else Distribution.from_dict(d["send_lag_ms"]),
            _number(d, "request_rate"),
            _series_of(d.get("server_metrics")),
            tuple(TurnFigures.from_dict(t) for t in d.get("turns") or ()),
        )


def _series_of(d: Any) -> GaugeSeries | None:
    if d is None:
        return None
    if not isinstance(d, Mapping):
        raise TypeError("'server_metrics' must be an object or null")
    return GaugeSeries.from_dict(d)


REFUSED_CHUNKS = (
    "tokens were counted as chunks (the server sent no usage) and one chunk of a speculative "
    "server carries a whole verify step: no tok/s, TPOT or ITL"
)


def level_result(
    concurrency: int,
    runs: Sequence[LevelRun],
    counters: Sequence[EngineWindow] | None = None,
    *,
    speculative: bool = False,
    slo: Slo | None = None,
    request_rate: float | None = None,
    server_metrics: GaugeSeries | None = None,
    percentiles: Sequence[float] = (),
) -> LevelResult:
    """Summaries over the repeats ``runs`` of one level (at least one); none when a request failed.
    ``request_rate`` (requests/s, None: closed loop) and ``server_metrics`` are kept as they are,
    also for a level with failed requests.

    ``counters``: the engine's counter deltas, one per repeat (then the accept length is the
    engine's 1 + accepted / drafts over the level, None when no draft was proposed, and the verify
    cycle is the engine's mean decode-step time). ``slo``: targets to count the good requests of
    the level against (:mod:`envforge.bench.slo`: goodput over the repeats' summed wall time).
    ``percentiles``: the chosen ones each latency distribution carries beyond p90, p95, p99.
    """
    if counters:
        assert len(counters) == len(runs), "one counter window per repeat"
        reps = tuple(repeat_result(r, w) for r, w in zip(runs, counters))
    else:
        reps = tuple(repeat_result(r) for r in runs)
    failed = sum(r.failed for r in reps)
    count = _token_count({r.token_count for r in reps})
    extra: dict[str, Any] = {"request_rate": request_rate, "server_metrics": server_metrics}
    if failed:
        return LevelResult(concurrency, reps, None, None, None, None, None, None, failed, count, **extra)
    refused = REFUSED_CHUNKS if speculative and count != "server" else None
    tokens = sum(r.output_tokens for r in reps if r.verify_steps)
    steps = sum(r.verify_steps or 0 for r in reps)
    decode = sum(r.decode_s for r in reps if r.verify_steps)
    engine = sum_windows(counters) if counters else None
    common = _level_figures(runs, reps, refused, percentiles)
    if slo is not None and not refused:  # chunk-counted speculative tokens: no TPOT to hold to a target
        common["goodput"] = goodput([r for run in runs for r in run.results], sum(run.wall_s for run in runs), slo)
    if engine is not None:
        spec = engine.spec
        cycle = (
            engine.decode_step_ms if engine.decode_step_ms is not None else (decode * 1000.0 / steps if steps else None)
        )
        return LevelResult(
            concurrency=concurrency,
            repeats=reps,
            accept_length=spec.mean_acceptance_length if spec else None,
            verify_cycle_ms=cycle if spec and spec.drafts else None,
            token_count=count,
            refused=refused,
            counters=engine,
            **common,
            **extra,
        )
    return LevelResult(
        concurrency=concurrency,
        repeats=reps,
        accept_length=tokens / steps if steps else None,
        verify_cycle_ms=decode * 1000.0 / steps if steps else None,
        token_count=count,
        refused=refused,
        **common,
        **extra,
    )


def _level_figures(
    runs: Sequence[LevelRun], reps: Sequence[RepeatResult], refused: str | None, percentiles: Sequence[float] = ()
) -> dict[str, Any]:
    """The throughput summaries and latency distributions of a level without failures; a refused
    level (chunk-counted speculative tokens) has no tok/s, TPOT or ITL."""
    results = [r for run in runs for r in run.results]
    latency = latency_of(results, percentiles)
    lag = distribution([x for run in runs for x in run.send_lag_s])
    if refused:
        latency.update(tpot_ms=None, itl_ms=None, itl_per_token_ms=None)
    turns = () if refused else turn_figures(results, latency_of, percentiles)
    return {
        "tok_s": None if refused else summarize([r.tok_s for r in reps]),
        "req_s": summarize([r.req_s for r in reps]),
        "ttft_ms": summarize([r.ttft_ms for r in reps if r.ttft_ms is not None]),
        "tpot_ms": None if refused else summarize([r.tpot_ms for r in reps if r.tpot_ms is not None]),
        "e2e_ms": summarize([r.e2e_ms for r in reps]),
        "latency": latency,
        "send_lag_ms": lag,
        "turns": turns,
    }


@dataclass(frozen=True, slots=True)
class ServerResult:
    """All levels of one server configuration; ``argv`` when envforge started it, ``url`` always.

    ``env``: the tracked variables it started with (None when envforge did not start it);
    ``env_sources``: where each of them came from (``profile``, ``environment``, ``server env``,
    ``launcher sglang-0.5.9 (--enable-symm-mem)``, ``nccl.conf <path>``: envforge.bench.variables);
    ``ignore_eos``: whether requests asked for a fixed length (False: the server rejected the field);
    ``cache``: ``"flushed before each repeat"``, or why not; ``server_metrics``: how the server's
    gauges were read (``"GET /metrics every 0.5 s during each measured repeat"``), or why not.
    """

    name: str
    speculative: bool
    url: str
    argv: tuple[str, ...] | None
    load_s: float | None
    levels: tuple[LevelResult, ...]
    env: Mapping[str, str] | None = None
    ignore_eos: bool = True
    cache: str = "not flushed"
    env_sources: Mapping[str, str] | None = None
    server_metrics: str = "not scraped"

    def level(self, concurrency: int, request_rate: float | None = None) -> LevelResult | None:
        """The level at ``concurrency`` and ``request_rate`` (None: closed loop), the first if several."""
        return next(
            (lv for lv in self.levels if (lv.concurrency, lv.request_rate) == (concurrency, request_rate)), None
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "speculative": self.speculative,
            "url": self.url,
            "argv": list(self.argv) if self.argv is not None else None,
            "load_s": _r(self.load_s, 2),
            "env": dict(self.env) if self.env is not None else None,
            "env_sources": dict(self.env_sources) if self.env_sources is not None else None,
            "ignore_eos": self.ignore_eos,
            "cache": self.cache,
            "server_metrics": self.server_metrics,
            "levels": [lv.as_dict() for lv in self.levels],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ServerResult:
        env = d.get("env")
        sources = d.get("env_sources")
        argv = d.get("argv")
        if argv is not None and (not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)):
            raise TypeError("'argv' must be a list of strings or null")
        return cls(
            _text(d, "name"),
            bool(d.get("speculative")),
            _text(d, "url", ""),
            tuple(argv) if argv is not None else None,
            _number(d, "load_s"),
            tuple(LevelResult.from_dict(x) for x in d.get("levels", ())),
            {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else None,
            bool(d.get("ignore_eos", True)),
            str(d.get("cache") or "not flushed"),
            {str(k): str(v) for k, v in sources.items()} if isinstance(sources, Mapping) else None,
            str(d.get("server_metrics") or "not scraped"),
        )
