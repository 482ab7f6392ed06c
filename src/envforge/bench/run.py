"""Run a smoke benchmark: each server configuration started, warmed up, measured, stopped.

Per configuration: start it with the environment's interpreter (its env profile comes with it: the
``.pth`` hook runs at start-up) plus the configuration's ``env``, wait until ready, send
``warmup`` requests (excluded), then for each concurrency level ``repeats`` rounds of requests, and
stop it. With ``interleave`` the configurations take turns instead: each round starts every
configuration in recipe order for one repeat of every level (A B A B ...). With ``url`` an already
running server is measured and nothing is started or stopped.

Every request is accounted for: failed requests are recorded (server, level, repeat, message,
status) and the levels they belong to get no figures; the caller decides the exit status from
``BenchReport.failures``. Every request of a server's run has its own prompt (warm-up included,
:meth:`SmokeConfig.draw`), and where the server offers a cache flush route it is called before each
repeat. For an engine that probes ``ignore_eos`` (``api = "openai"``) the first request asks for it;
a server that rejects the field (HTTP 400/422 naming it) is asked without it from then on, and the
report says so. An engine with counters (``api = "vllm"``) has them read around each repeat. While
each repeat is measured the server's metrics route is read in the background for its gauges (requests
running and waiting, KV cache use: :mod:`envforge.bench.sampler`), unless it has none (said once). With
a rate sweep (``config.sweep``) each server's levels are open-loop rates chosen one after the other by
:mod:`envforge.bench.sweep` until the highest rate meeting the SLO is bracketed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from envforge.bench.client import Endpoint, LevelRun, RequestOptions, post_status
from envforge.bench.load import Connections, run_level
from envforge.bench.config import HOST, ServerConfig, SmokeConfig, inert_patch_warnings
from envforge.bench.gauges import GaugeSeries
from envforge.bench.method import report_method
from envforge.bench.metrics import EngineWindow, describe
from envforge.bench.report import BenchReport, report_warnings
from envforge.bench.result import Failure, LevelResult, ServerResult, break_even_rows, failures_of, level_result
from envforge.bench.sampler import Sampler, probe
from envforge.bench.server import RunningServer, ServerLaunch, running_server
from envforge.bench.speculation import check_servers, drafter_warnings, drafters_of
from envforge.bench.sweep import SweepResult, run_sweep
from envforge.bench.variables import effective_env, env_digest, profile_overrides, recorded_values, server_environment
from envforge.core.errors import InputError
from envforge.core.probe import ProbeError, run_probe
from envforge.core.urls import redact_argv
from envforge.env.fingerprint import Fingerprint, fingerprint_of
from envforge.env.profile.effective import served_launcher

__all__ = ["BenchPlan", "machine_fingerprint", "run_bench"]

Progress = Callable[[str], None]
#: A level of a server's run: its concurrency and open-loop rate (requests/s; ``math.inf``: closed loop).
LevelKey = tuple[int, float]
#: A sweep's highest passing level that completed fewer requests/s than this share of its rate was
#: too short to reach a steady queue (its drain after the last send alone costs less at a steady rate).
SWEEP_SHORT = 0.9
#: The longest a cache flush's whole answer may take (seconds), and at most the idle timeout.
FLUSH_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class BenchPlan:
    """What to run: the settings, the interpreter (None with ``url``), the base environment of the
    server processes (the caller's), where server logs go, which configurations (all when empty),
    and the environment's env profile (name and variables) that the ``.pth`` hook applies."""

    config: SmokeConfig
    python: Path | None
    base_env: Mapping[str, str]
    log_dir: Path
    fingerprint: Fingerprint
    url: str | None = None
    url_name: str = "url"
    url_speculative: bool = False
    only: tuple[str, ...] = ()
    activations: tuple[tuple[str, str | None], ...] = field(default_factory=tuple)
    profile_name: str | None = None
    profile_env: Mapping[str, str] = field(default_factory=dict)
    site_packages: Path | None = None  # the engine's installed version picks its launcher's writes
    recipe_drafter: Mapping[str, Any] | None = None  # [verify.drafter]: the drafter verify checked (B42)

    def selected(self) -> tuple[ServerConfig, ...]:
        """The server configurations to run, in recipe order.

        :raises InputError: no configurations, or a name in ``only`` that the recipe does not define.
        """
        names = [s.name for s in self.config.servers]
        if not names:
            raise InputError("[verify.smoke] defines no server configuration to start",
                             hint='add [[verify.smoke.servers]] name = "baseline", args = [...], '
                                  "or measure a running server with --url")
        unknown = [n for n in self.only if n not in names]
        if unknown:
            raise InputError(f"no server configuration named {', '.join(unknown)} in [verify.smoke]",
                             hint=f"defined: {', '.join(names)}")
        return tuple(s for s in self.config.servers if not self.only or s.name in self.only)


class _Session:
    """One server configuration's measurements, possibly over several starts (interleaving)."""

    def __init__(self, name: str, model: str, endpoint: Endpoint, cfg: SmokeConfig, progress: Progress,
                 speculative: bool) -> None:
        self.name, self.endpoint, self.cfg, self.progress = name, endpoint, cfg, progress
        self.engine = cfg.engine
        self.speculative = speculative
        self.warmed: set[int] = set()
        self.windows: dict[LevelKey, list[EngineWindow]] = {}
        self.warnings: list[str] = []
        self.opts = RequestOptions(model=model, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                   ignore_eos=True, timeout_s=cfg.request_timeout_s,
                                   idle_timeout_s=cfg.idle_timeout_s)
        self.drawn = 0
        self.probed = not self.engine.probes_ignore_eos
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
        self.metrics = "not scraped (nothing measured)"  # how they are read, or why not
        self.swept: SweepResult | None = None

    def close(self) -> None:
        """Close the kept-alive connections (after each start of the server, and at the end)."""
        if self.connections is not None:
            conns, self.connections = self.connections, None
            conns.close()

    def _send(self, conc: int, count: int, *, paced: bool = False, rate: float | None = None) -> LevelRun:
        """``count`` new prompts at concurrency ``conc``; ``paced`` (a measured repeat): at ``rate``
        requests/s (default the configured open-loop rate; ``math.inf``: closed loop), or a trace's
        recorded times from the start of a new pass. A generated dataset's requests each ask for
        their own output tokens."""
        cfg = self.cfg
        start = cfg.repeat_start(self.drawn) if paced else self.drawn
        items = cfg.draw_requests(start, count)
        self.drawn = start + count
        lengths = [p.output_len or cfg.max_new_tokens for p in items] if cfg.per_request else None
        if self.connections is None:  # one session of kept-alive connections per start of the server
            self.connections = Connections(max(self.cfg.concurrency))
        run = run_level(self.endpoint, self.engine, [p.text for p in items], conc, self.opts,
                        schedule=cfg.schedule(items, rate) if paced else None, max_new_tokens=lengths,
                        connections=self.connections)
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
        status = post_status(self.endpoint.url + self.flush,
                             timeout_s=min(FLUSH_TIMEOUT_S, self.opts.idle_timeout_s, self.opts.timeout_s))
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
        window, w = eng.window(self.name, self.speculative, before, after,
                               output_tokens=sum(r.output_tokens for r in run.results), requests=len(run.results),
                               source=eng.counters_url(self.endpoint), where=f"{where}, repeat {rep}")
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
        self.failures.extend(failures_of(self.name, run, rep))
        ok = [r for r in run.results if r.ok]
        tokens = sum(r.output_tokens for r in ok)
        failed = len(run.results) - len(ok)
        tail = f", {failed} FAILED" if failed else ""
        if sampler is not None:
            tail += _engine_load(sampler.series())
        self.progress(f"{self.name}: {_label(key)}, repeat {rep}/{self.cfg.repeats}: "
                      f"{tokens / run.wall_s if run.wall_s else 0:.1f} tok/s{tail}")

    def _level(self, key: LevelKey, runs: list[LevelRun]) -> LevelResult:
        conc, rate = key
        return level_result(conc, runs, self.windows.get(key) or None, speculative=self.speculative,
                            slo=self.cfg.slo, request_rate=None if math.isinf(rate) else rate,
                            server_metrics=GaugeSeries.joined(self.gauges.get(key, [])))

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
            why = (f"{lv.failed_requests} failed requests" if lv.failed_requests else "no goodput" if g is None
                   else f"{g.good} of {g.completed} requests ({g.attained:.1%}) met the SLO")
            self.progress(f"{self.name}: sweep: {rate:g} requests/s {'met' if met else 'MISSED'} the gate: {why}")
            return met
        result = SweepResult(self.name, conc, cfg.sweep, run_sweep(cfg.sweep, measure))
        self.progress(result.line())
        best = result.highest_passing_rate
        done = self._level((conc, best), self.runs[(conc, best)]).req_s if best is not None else None
        if best is not None and done is not None and done.median < SWEEP_SHORT * best:
            # the server fell behind the rate, but the level ended before its queue made the SLO miss
            w = (f"server '{self.name}': at {best:g} requests/s, the highest rate that met the SLO, it completed "
                 f"{done.median:.3g} requests/s: {cfg.requests_at(conc)} requests ended the level before a queue "
                 f"could build up; a longer level (--requests) may miss the SLO at this rate")
            self.progress(f"warning: {w}")
            self.warnings.append(w)
        return result

    def result(self, argv: tuple[str, ...] | None, env: Mapping[str, str] | None,
               sources: Mapping[str, str] | None = None) -> ServerResult:
        levels = []
        for key, runs in self.runs.items():
            if runs:
                lv = self._level(key, runs)
                if lv.counters is not None and lv.counters.spec is not None:
                    self.progress(f"{self.name}: {lv.label}: " + "; ".join(describe(lv.counters.spec)))
                levels.append(lv)
        return ServerResult(self.name, self.speculative, self.endpoint.url, argv, self.load_s, tuple(levels), env,
                            self.opts.ignore_eos, self.cache, sources, self.metrics)


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


@dataclass(frozen=True, slots=True)
class _Started:
    config: ServerConfig
    launch: ServerLaunch
    env: dict[str, str]
    session: _Session
    sources: dict[str, str]


def _prepare(plan: BenchPlan, s: ServerConfig, progress: Progress) -> tuple[_Started, list[str]]:
    cfg = plan.config
    assert plan.python is not None
    model = s.model or cfg.model
    served = s.served_model_name or cfg.served_model_name  # the name requests carry (vLLM --served-model-name)
    tail = s.argv_tail(model=model, port=cfg.port, served_model_name=served)
    warnings = [f"server '{s.name}': {w}" for w in inert_patch_warnings(tail, plan.activations)]
    for w in warnings:
        progress(f"warning: {w}")
    endpoint = Endpoint(HOST, cfg.port)
    launch = ServerLaunch(s.name, (str(plan.python), *tail), {**plan.base_env, **s.env},
                          endpoint.url + cfg.health, plan.log_dir / f"{s.name}.log")
    launcher, unknown = served_launcher(plan.site_packages, tail, cfg.api)
    eff = server_environment(plan.profile_env, plan.base_env, s.env, tail, launcher=launcher, unknown_launcher=unknown)
    more = [f"server '{s.name}': {w}" for w in eff.overrides(plan.profile_name)]
    if unknown:
        more.append(f"server '{s.name}': envforge has no launcher data for {unknown}: the variables its launch "
                    "code sets are not in the report")
    for w in more:
        progress(f"warning: {w}")
    session = _Session(s.name, served or model, endpoint, cfg, progress, s.speculative)
    return _Started(s, launch, recorded_values(eff), session, eff.sources()), warnings + more


@contextmanager
def _started(st: _Started, cfg: SmokeConfig, progress: Progress) -> Iterator[None]:
    progress(f"starting '{st.config.name}': {' '.join(redact_argv(st.launch.argv))} (log: {st.launch.log_path})")
    with running_server(st.launch, load_timeout_s=cfg.load_timeout_s, progress=progress) as (server, load_s):
        progress(f"'{st.config.name}' ready after {load_s:.1f} s")
        st.session.server = server
        if st.session.load_s is None:
            st.session.load_s = load_s
        try:
            yield
        finally:
            st.session.server = None
            st.session.close()


def _run_started(plan: BenchPlan, progress: Progress) -> tuple[list[_Session], list[ServerResult], list[str]]:
    cfg = plan.config
    prepared = [_prepare(plan, s, progress) for s in plan.selected()]
    warnings = [w for _, ws in prepared for w in ws]
    rounds = cfg.repeats if cfg.interleave else 1
    for _ in range(rounds):
        for st, _ws in prepared:
            with _started(st, cfg, progress):
                st.session.warm_up()
                st.session.measure(interleaved=cfg.interleave)
    results = [st.session.result(redact_argv(st.launch.argv), st.env, st.sources) for st, _ in prepared]
    return [st.session for st, _ in prepared], results, warnings


def run_bench(plan: BenchPlan, *, progress: Progress = lambda _: None) -> BenchReport:
    """Run ``plan`` and return the report (fingerprint, settings, method, results, break-even,
    failures, warnings, drafters, failed speculation checks). Failed requests do not raise: they are
    in ``report.failures``; levels that fail a speculation check are in ``report.speculation``
    (:mod:`envforge.bench.speculation`).

    :raises InputError: unknown server name, bad ``url``, or a port already in use.
    :raises envforge.bench.server.ServerCrashed: a server exited while loading or being measured.
    :raises envforge.bench.server.ServerTimeout: a server was not ready within ``load-timeout-s``.
    :raises envforge.bench.metrics.MetricsError: an engine with counters (``api = "vllm"``) and
        ``/metrics`` failed, or its speculative counters contradict the configuration (see
        :func:`~envforge.bench.metrics.check_window`).
    Every server envforge started is stopped (SIGTERM, then SIGKILL of its group) before returning,
    also on Ctrl-C or a termination signal (requests in flight are cancelled at once).
    """
    cfg = plan.config
    cfg.check()
    fingerprint = plan.fingerprint
    warnings: list[str] = []
    if plan.url is not None:
        try:
            endpoint = Endpoint.from_url(plan.url)
        except ValueError as exc:
            raise InputError(f"--url: {exc}", hint="e.g. --url http://127.0.0.1:30000") from None
        session = _Session(plan.url_name, cfg.model, endpoint, cfg, progress, plan.url_speculative)
        try:
            session.warm_up()
            session.measure()
        finally:
            session.close()
        sessions, results = [session], [session.result(None, None)]
    else:
        warnings = profile_overrides(plan.profile_name, plan.profile_env, plan.base_env)
        for w in warnings:
            progress(f"warning: {w}")
        fingerprint = replace(fingerprint, effective_env_digest=env_digest(
            effective_env(plan.profile_env, plan.base_env)))
        sessions, results, more = _run_started(plan, progress)
        warnings += more
    failures = [f for x in sessions for f in x.failures]
    warnings += [w for x in sessions for w in x.warnings]
    warnings += report_warnings(fingerprint, results)
    # servers run in envforge's working directory (no cwd given): a relative drafter directory there is local
    warnings += drafter_warnings(results, plan.recipe_drafter, is_dir=os.path.isdir)
    warnings += [f"failed request: {f.line()}" for f in failures]
    method = report_method(cfg, interleaved=cfg.interleave and plan.url is None)
    return BenchReport(fingerprint, cfg.as_dict(), tuple(results), break_even_rows(results), tuple(warnings),
                       tuple(failures), method, drafters_of(results, is_dir=os.path.isdir),
                       check_servers(results), tuple(x.swept for x in sessions if x.swept is not None))


def machine_fingerprint(site_packages: Path, python: Path, env: Mapping[str, str],
                        *, timeout_s: float = 120.0) -> tuple[Fingerprint, str | None]:
    """The environment's fingerprint with the machine facts (Python, driver, GPU name, count,
    compute capability) from verify's GPU info probe (``envforge/verify/gpu_probe.py``, mode
    ``info``), run by the environment's interpreter, so bench and verify reports carry the same
    fingerprint and reports from different GPUs never compare as equal.

    :returns: the fingerprint, and a note when the probe could not run (machine facts then None).
    """
    try:
        script = (resources.files("envforge.verify") / "gpu_probe.py").read_text(encoding="utf-8")
        data: Any = run_probe(python, script, args=[json.dumps({"mode": "info"})], env=env,
                              timeout_s=timeout_s).data
    except (ImportError, OSError, ProbeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return fingerprint_of(site_packages), f"no machine facts in the fingerprint: {first}"
    info: Mapping[str, Any] = data if isinstance(data, dict) else {}
    gpus = info.get("gpus") or []
    gpu: dict[str, Any] = {"python": info.get("python"), "driver": info.get("driver")}
    if gpus:
        gpu.update(name=gpus[0].get("name"), count=len(gpus), capability=gpus[0].get("capability"))
    return fingerprint_of(site_packages, gpu=gpu), None
