"""One server configuration's measurements over one or more starts: warm-up, the ``ignore_eos``
probe, each level's repeats (closed loop, paced open loop, a trace, or a rate sweep), the engine's
counters around each repeat and its gauges during it, and the per-server result.

:class:`Session` sends through :func:`envforge.bench.load.run_level` on one pool of kept-alive
connections per start of the server (:class:`envforge.bench.load.Connections`); what it has measured
so far is a result at any moment (:meth:`Session.result`), so a run stopped part-way still reports
the levels it finished.
"""

from __future__ import annotations

import math
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from envforge.bench.client import Endpoint, LevelRun, RequestOptions, post_status
from envforge.bench.config import SmokeConfig
from envforge.bench.dataset import Prompt
from envforge.bench.gauges import GaugeSeries
from envforge.bench.load import Connections, run_conversations, run_level
from envforge.bench.metrics import EngineWindow, describe
from envforge.bench.records import request_records
from envforge.bench.result import Failure, LevelResult, ServerResult, failures_of, level_result
from envforge.bench.sampler import Sampler, probe
from envforge.bench.server import RunningServer
from envforge.bench.sweep import SweepResult, run_sweep

__all__ = ["FLUSH_TIMEOUT_S", "SWEEP_SHORT", "LevelKey", "Session"]

Progress = Callable[[str], None]
#: A level of a server's run: its concurrency and open-loop rate (requests/s; ``math.inf``: closed loop).
LevelKey = tuple[int, float]
#: A sweep's highest passing level that completed fewer requests/s than this share of its rate was
#: too short to reach a steady queue (its drain after the last send alone costs less at a steady rate).
SWEEP_SHORT = 0.9
#: The longest a cache flush's whole answer may take (seconds), and at most the idle timeout.
FLUSH_TIMEOUT_S = 30.0
#: The share of a repeat's wall time bench's own reads of the metrics route may take before it warns.
SCRAPE_CPU_SHARE = 0.05


class Session:
    """One server configuration's measurements, possibly over several starts (interleaving)."""

    def __init__(
        self, name: str, model: str, endpoint: Endpoint, cfg: SmokeConfig, progress: Progress, speculative: bool
    ) -> None:
        self.name, self.endpoint, self.cfg, self.progress = name, endpoint, cfg, progress
        self.engine = cfg.engine
        self.speculative = speculative
        self.warmed: set[int] = set()
        self.windows: dict[LevelKey, list[EngineWindow]] = {}
        self.warnings: list[str] = []
        self.opts = RequestOptions(
            model=model,
            max_new_tokens=cfg.max_new_tokens,
            temperature=cfg.temperature,
            ignore_eos=not cfg.natural,
            timeout_s=cfg.request_timeout_s,
            idle_timeout_s=cfg.idle_timeout_s,
            natural=cfg.natural,
        )
        self.drawn = 0
        self.probed = cfg.natural or not self.engine.probes_ignore_eos  # natural: ignore_eos is never sent
        self.flush = cfg.flush_cache
        self.cache = "not flushed (no flush route)" if not self.flush else ""
        self.runs: dict[LevelKey, list[LevelRun]] = {}
        self.failures: list[Failure] = []
        self.server: RunningServer | None = None
        self.load_s: float | None = None
        self.connections: Connections | None = None
        self.gauges: dict[LevelKey, list[GaugeSeries]] = {}
        self.level_t0: dict[LevelKey, float] = {}  # time.monotonic() at the start of a level's first repeat
        self.scraped: bool | None = None  # whether the server's gauges are read (None: not asked yet)
        self.scrape_warned = False  # the cost of reading them was warned about
        self.metrics = "not scraped (nothing measured)"  # how they are read, or why not
        self.swept: SweepResult | None = None
        self.sent: tuple[list[Prompt], list[int]] = ([], [])  # the last _send's prompts and output tokens asked
        self.records: list[dict[str, Any]] = []  # --save-detailed: per-request records of the measured repeats

    def close(self) -> None:
        """Close the kept-alive connections (after each start of the server, and at the end)."""
        if self.connections is not None:
            conns, self.connections = self.connections, None
            conns.close()

    def _send(self, conc: int, count: int, *, paced: bool = False, rate: float | None = None) -> LevelRun:
        """``count`` new prompts at concurrency ``conc``; ``paced`` (a measured repeat): at ``rate``
        requests/s (default the configured open-loop rate; ``math.inf``: closed loop), or a trace's
        recorded times from the start of a new pass. A generated dataset's requests each ask for
        their own output tokens. Multi-turn (``turns`` above 1): ``count`` conversations, each turn a
        request asking for ``max_new_tokens``."""
        cfg = self.cfg
        start = cfg.repeat_start(self.drawn) if paced else self.drawn
        items = cfg.draw_requests(start, count)
        self.drawn = start + count
        if self.connections is None:  # one session of kept-alive connections per start of the server
            self.connections = Connections(max(self.cfg.concurrency))
        if cfg.turns > 1:
            run = run_conversations(
                self.endpoint,
                self.engine,
                [(p.text, *p.turns[: cfg.turns - 1]) for p in items],
                conc,
                self.opts,
                schedule=cfg.schedule(items, rate) if paced else None,
                connections=self.connections,
            )
            sent = _turns_sent(items, run)
            self.sent = (sent, [cfg.max_new_tokens] * len(sent))
            self._check_alive(run)
            return run
        lengths = [p.output_len or cfg.max_new_tokens for p in items] if cfg.per_request else None
        self.sent = (items, lengths or [cfg.max_new_tokens] * len(items))
        run = run_level(
            self.endpoint,
            self.engine,
            [p.text for p in items],
            conc,
            self.opts,
            schedule=cfg.schedule(items, rate) if paced else None,
            max_new_tokens=lengths,
            connections=self.connections,
        )
        self._check_alive(run)
        return run

    def _check_alive(self, run: LevelRun) -> None:
        server = self.server
        if server is None:
            return
        if any(not r.ok for r in run.results):
            try:  # a dying server drops its connections a moment before it can be reaped
                server.proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                pass
        if not server.alive():
            raise server.crashed(f"while being measured at concurrency {run.concurrency}")

    def _probe_ignore_eos(self) -> int:
        """One request with ignore_eos; a rejection of the field turns it off. Returns the number of
        warm-up requests it used (1)."""
        run = self._send(1, 1)
        r = run.results[0]
        if not r.ok and r.status in (400, 422) and "ignore_eos" in (r.error or ""):
            self.opts = replace(self.opts, ignore_eos=False)
            self.progress(f"warning: server '{self.name}' rejects ignore_eos (HTTP {r.status}); asking without it")
            run = self._send(1, 1)
        self.failures.extend(failures_of(self.name, run, 0))
        self.probed = True
        return 1

    def warm_up(self) -> None:
        """After a start: the ``ignore_eos`` probe (once per session), then nothing until a level."""
        if not self.probed:
            self._probe_ignore_eos()
        self.warmed = set()

    def warm_level(self, conc: int) -> None:
        """Before a level's first repeat after each start: :meth:`SmokeConfig.warmup_at` requests at
        the level's concurrency, closed loop (excluded from the results; failures are warm-up ones)."""
        if conc in self.warmed:
            return
        self.warmed.add(conc)
        count = self.cfg.warmup_at(conc)
        if count:
            self.failures.extend(failures_of(self.name, self._send(conc, count), 0))

    def _flush(self) -> None:
        if not self.flush:
            return
        # The flush answers at once; until its answer is complete nothing progresses, so it has
        # the idle timeout (at most FLUSH_TIMEOUT_S) for its whole answer.
        status = post_status(
            self.endpoint.url + self.flush,
            headers=self.endpoint.headers,
            ca=self.endpoint.ca,
            timeout_s=min(FLUSH_TIMEOUT_S, self.opts.idle_timeout_s, self.opts.timeout_s),
        )
        if status == 200:
            self.cache = f"flushed before each repeat (POST {self.flush})"
            return
        answer = f"HTTP {status}" if isinstance(status, int) else status
        self.cache = f"not flushed: POST {self.flush} answered {answer}"
        self.progress(f"warning: server '{self.name}': {self.cache}; prompts are distinct anyway")
        self.flush = ""

    def _counted_repeat(self, key: LevelKey, rep: int) -> LevelRun:
        """The engine's counters read before and after the repeat, their window judged."""
        eng, (conc, rate) = self.engine, key
        before = eng.read_counters(self.endpoint, server=self.name)
        run = self._send(conc, self.cfg.requests_at(conc), paced=True, rate=rate)
        after = eng.read_counters(self.endpoint, server=self.name)
        where = f"at concurrency {conc}" + ("" if math.isinf(rate) else f", {rate:g} requests/s")
        window, w = eng.window(
            self.name,
            self.speculative,
            before,
            after,
            output_tokens=sum(r.output_tokens for r in run.results),
            requests=len(run.results),
            source=eng.counters_url(self.endpoint),
            where=f"{where}, repeat {rep}",
        )
        for line in w:
            self.progress(f"warning: {line}")
        self.warnings.extend(w)
        self.windows.setdefault(key, []).append(window)
        return run

    @contextmanager
    def _sampling(self, key: LevelKey, rep: int) -> Iterator[Sampler | None]:
        """The server's gauges read in the background during the block (None: not scraped; the
        first call asks the route once and says so when it is not)."""
        interval = self.cfg.metrics_interval_s
        if self.scraped is None:
            why = probe(self.endpoint, self.engine, interval_s=interval)
            self.scraped = why is None
            self.metrics = why or f"GET {self.engine.metrics} every {interval:g} s during each measured repeat"
            if why is not None:
                self.progress(f"{self.name}: server metrics {why}")
        if not self.scraped:
            yield None
            return
        t0 = self.level_t0.setdefault(key, time.monotonic())
        with Sampler(self.endpoint, self.engine, interval_s=interval, t0=t0, repeat=rep) as sampler:
            yield sampler
        self.gauges.setdefault(key, []).append(sampler.series())

    def repeat(self, conc: int, rate: float | None = None) -> None:
        """One measured repeat at concurrency ``conc`` and open-loop ``rate`` (requests/s; default the
        configured one, ``math.inf`` closed loop)."""
        key = (conc, self.cfg.request_rate if rate is None else rate)
        self.warm_level(conc)
        self._flush()
        runs = self.runs.setdefault(key, [])
        rep = len(runs) + 1
        with self._sampling(key, rep) as sampler:
            if self.engine.has_counters:
                run = self._counted_repeat(key, rep)
            else:
                run = self._send(conc, self.cfg.requests_at(conc), paced=True, rate=key[1])
        runs.append(run)
        if self.cfg.save_detailed:
            rate = None if math.isinf(key[1]) else key[1]
            self.records += request_records(self.name, conc, rate, rep, run, *self.sent)
        self.failures.extend(failures_of(self.name, run, rep))
        ok = [r for r in run.results if r.ok]
        tokens = sum(r.output_tokens for r in ok)
        failed = len(run.results) - len(ok)
        tail = f", {failed} FAILED" if failed else ""
        if sampler is not None:
            tail += _engine_load(sampler.series())
            self._scrape_cost(key, rep, sampler.series(), run.wall_s)
        self.progress(
            f"{self.name}: {_label(key)}, repeat {rep}/{self.cfg.repeats}: "
            f"{tokens / run.wall_s if run.wall_s else 0:.1f} tok/s{tail}"
        )

    def _scrape_cost(self, key: LevelKey, rep: int, series: GaugeSeries, wall_s: float) -> None:
        """Warn (once per server) when reading the metrics route took more than :data:`SCRAPE_CPU_SHARE`
        of a repeat's wall time in bench's own process: the load generator shared its CPU with it,
        so the measurement may be disturbed (issue 41: 7.5 s of CPU per read of a 30 MiB body)."""
        cpu = series.read_cpu_s or 0.0
        if wall_s <= 0 or cpu <= SCRAPE_CPU_SHARE * wall_s or self.scrape_warned:
            return
        self.scrape_warned = True
        w = (
            f"server '{self.name}': {_label(key)}, repeat {rep}: reading {series.source} took {cpu * 1000:.0f} ms of "
            f"bench's CPU, {cpu / wall_s:.0%} of the repeat's {wall_s:.2f} s: the load generator shared its CPU with "
            "it, so latencies may be longer than the server's; raise --metrics-interval, or pass --metrics-interval 0"
        )
        self.progress(f"warning: {w}")
        self.warnings.append(w)

    @property
    def measured(self) -> bool:
        """At least one measured repeat completed (a run stopped now has something to report)."""
        return any(self.runs.values())

    def _level(self, key: LevelKey, runs: list[LevelRun]) -> LevelResult:
        # a repeat stopped part-way may have left its counter window or gauges without its run: only
        # the completed repeats' are taken (each is appended before its run)
        conc, rate, n = *key, len(runs)
        return level_result(
            conc,
            runs,
            self.windows.get(key, [])[:n] or None,
            speculative=self.speculative,
            slo=self.cfg.slo,
            request_rate=None if math.isinf(rate) else rate,
            server_metrics=GaugeSeries.joined(self.gauges.get(key, [])[:n]),
            percentiles=self.cfg.percentiles,
        )

    def measure(self, *, interleaved: bool = False) -> None:
        """After a start: every level (one repeat each when ``interleaved``), or the sweep."""
        cfg = self.cfg
        if cfg.sweep is not None:
            self.swept = self.sweep()
            return
        for conc in cfg.concurrency:
            for _rep in range(1 if interleaved else cfg.repeats):
                self.repeat(conc)

    def sweep(self) -> SweepResult:
        """The saturation sweep of ``cfg.sweep`` at the one concurrency cap: each rate a level of
        ``repeats`` repeats, passed when it has no failed request and its goodput met the gate."""
        cfg, conc = self.cfg, self.cfg.concurrency[0]
        assert cfg.sweep is not None

        def measure(rate: float) -> bool:
            for _ in range(cfg.repeats):
                self.repeat(conc, rate)
            lv = self._level((conc, rate), self.runs[(conc, rate)])
            g = lv.goodput
            met = not lv.failed_requests and g is not None and g.met
            why = (
                f"{lv.failed_requests} failed requests"
                if lv.failed_requests
                else "no goodput"
                if g is None
                else f"{g.good} of {g.completed} requests ({g.attained:.1%}) met the SLO"
            )
            self.progress(f"{self.name}: sweep: {rate:g} requests/s {'met' if met else 'MISSED'} the gate: {why}")
            return met

        result = SweepResult(self.name, conc, cfg.sweep, run_sweep(cfg.sweep, measure))
        self.progress(result.line())
        best = result.highest_passing_rate
        done = self._level((conc, best), self.runs[(conc, best)]).req_s if best is not None else None
        if best is not None and done is not None and done.median < SWEEP_SHORT * best:
            # the server fell behind the rate, but the level ended before its queue made the SLO miss
            w = (
                f"server '{self.name}': at {best:g} requests/s, the highest rate that met the SLO, it completed "
                f"{done.median:.3g} requests/s: {cfg.requests_at(conc)} requests ended the level before a queue "
                f"could build up; a longer level (--requests) may miss the SLO at this rate"
            )
            self.progress(f"warning: {w}")
            self.warnings.append(w)
        return result

    def result(
        self, argv: tuple[str, ...] | None, env: Mapping[str, str] | None, sources: Mapping[str, str] | None = None
    ) -> ServerResult:
        levels = []
        for key, runs in self.runs.items():
            if runs:
                lv = self._level(key, runs)
                if lv.counters is not None and lv.counters.spec is not None:
                    self.progress(f"{self.name}: {lv.label}: " + "; ".join(describe(lv.counters.spec)))
                levels.append(lv)
        return ServerResult(
            self.name,
            self.speculative,
            self.endpoint.url,
            argv,
            self.load_s,
            tuple(levels),
            env,
            self.opts.ignore_eos,
            self.cache,
            sources,
            self.metrics,
        )


def _label(key: LevelKey) -> str:
    conc, rate = key
    return f"concurrency {conc}" + ("" if math.isinf(rate) else f", {rate:g} requests/s")


def _engine_load(series: GaugeSeries) -> str:
    """``; engine: running <= 4, waiting <= 2, KV cache <= 12.5%`` for a progress line ("" without samples)."""
    s = series.summary()
    parts = [f"{k} <= {s[k]['max']:g}" for k in ("running", "waiting") if s[k] is not None]
    if s["kv_cache_use"] is not None:
        parts.append(f"KV cache <= {s['kv_cache_use']['max']:.1%}")
    return f"; engine: {', '.join(parts)}" if parts else ""


def _turns_sent(conversations: list[Prompt], run: LevelRun) -> list[Prompt]:
    """The prompt of each turn a multi-turn ``run`` sent (its results, conversation after
    conversation, each with its ``turn``): the conversation's id, the turn's text."""
    sent: list[Prompt] = []
    index = -1
    for r in run.results:
        index += r.turn == 1
        p = conversations[index]
        turn = r.turn or 1
        sent.append(Prompt(p.id, p.text if turn == 1 else p.turns[turn - 2]))
    return sent
