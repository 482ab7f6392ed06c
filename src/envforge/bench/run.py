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
report says so. An engine with counters (``api = "vllm"``) has them read around each repeat.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from envforge.bench.client import Endpoint, LevelRun, RequestOptions, post_status
from envforge.bench.load import Connections, run_level
from envforge.bench.config import HOST, ServerConfig, SmokeConfig, inert_patch_warnings
from envforge.bench.metrics import EngineWindow, describe
from envforge.bench.report import BenchReport, report_warnings
from envforge.bench.result import Failure, ServerResult, break_even_rows, failures_of, level_result
from envforge.bench.server import RunningServer, ServerLaunch, running_server
from envforge.bench.speculation import check_servers, drafter_warnings, drafters_of
from envforge.bench.variables import effective_env, env_digest, profile_overrides, recorded_values, server_environment
from envforge.core.errors import InputError
from envforge.core.probe import ProbeError, run_probe
from envforge.core.urls import redact_argv
from envforge.env.fingerprint import Fingerprint, fingerprint_of
from envforge.env.profile.effective import served_launcher

__all__ = ["BenchPlan", "machine_fingerprint", "run_bench"]

Progress = Callable[[str], None]
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
        self.windows: dict[int, list[EngineWindow]] = {c: [] for c in cfg.concurrency}
        self.warnings: list[str] = []
        self.opts = RequestOptions(model=model, max_new_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                   ignore_eos=True, timeout_s=cfg.request_timeout_s,
                                   idle_timeout_s=cfg.idle_timeout_s)
        self.drawn = 0
        self.probed = not self.engine.probes_ignore_eos
        self.flush = cfg.flush_cache
        self.cache = "not flushed (no flush route)" if not self.flush else ""
        self.runs: dict[int, list[LevelRun]] = {c: [] for c in cfg.concurrency}
        self.failures: list[Failure] = []
        self.server: RunningServer | None = None
        self.load_s: float | None = None
        self.connections: Connections | None = None

    def close(self) -> None:
        """Close the kept-alive connections (after each start of the server, and at the end)."""
        if self.connections is not None:
            conns, self.connections = self.connections, None
            conns.close()

    def _send(self, conc: int, count: int, *, paced: bool = False) -> LevelRun:
        """``count`` new prompts at concurrency ``conc``; ``paced`` (a measured repeat): at the
        open-loop request rate, or a trace's recorded times from the start of a new pass. A
        generated dataset's requests each ask for their own output tokens."""
        cfg = self.cfg
        start = cfg.repeat_start(self.drawn) if paced else self.drawn
        items = cfg.draw_requests(start, count)
        self.drawn = start + count
        lengths = [p.output_len or cfg.max_new_tokens for p in items] if cfg.per_request else None
        if self.connections is None:  # one session of kept-alive connections per start of the server
            self.connections = Connections(max(self.cfg.concurrency))
        run = run_level(self.endpoint, self.engine, [p.text for p in items], conc, self.opts,
                        schedule=cfg.schedule(items) if paced else None, max_new_tokens=lengths,
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

    def _counted_repeat(self, conc: int, rep: int) -> LevelRun:
        """The engine's counters read before and after the repeat, their window judged."""
        eng = self.engine
        before = eng.read_counters(self.endpoint, server=self.name)
        run = self._send(conc, self.cfg.requests_at(conc), paced=True)
        after = eng.read_counters(self.endpoint, server=self.name)
        window, w = eng.window(self.name, self.speculative, before, after,
                               output_tokens=sum(r.output_tokens for r in run.results), requests=len(run.results),
                               source=eng.counters_url(self.endpoint), where=f"at concurrency {conc}, repeat {rep}")
        for line in w:
            self.progress(f"warning: {line}")
        self.warnings.extend(w)
        self.windows[conc].append(window)
        return run

    def repeat(self, conc: int) -> None:
        self.warm_level(conc)
        self._flush()
        rep = len(self.runs[conc]) + 1
        if self.engine.has_counters:
            run = self._counted_repeat(conc, rep)
        else:
            run = self._send(conc, self.cfg.requests_at(conc), paced=True)
        self.runs[conc].append(run)
        self.failures.extend(failures_of(self.name, run, rep))
        ok = [r for r in run.results if r.ok]
        tokens = sum(r.output_tokens for r in ok)
        failed = len(run.results) - len(ok)
        tail = f", {failed} FAILED" if failed else ""
        self.progress(f"{self.name}: concurrency {conc}, repeat {rep}/{self.cfg.repeats}: "
                      f"{tokens / run.wall_s if run.wall_s else 0:.1f} tok/s{tail}")

    def result(self, argv: tuple[str, ...] | None, env: Mapping[str, str] | None,
               sources: Mapping[str, str] | None = None) -> ServerResult:
        levels = []
        for c, runs in self.runs.items():
            if runs:
                lv = level_result(c, runs, self.windows[c] or None, speculative=self.speculative, slo=self.cfg.slo)
                if lv.counters is not None and lv.counters.spec is not None:
                    self.progress(f"{self.name}: concurrency {c}: " + "; ".join(describe(lv.counters.spec)))
                levels.append(lv)
        return ServerResult(self.name, self.speculative, self.endpoint.url, argv, self.load_s, tuple(levels), env,
                            self.opts.ignore_eos, self.cache, sources)


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


def _run_started(plan: BenchPlan, progress: Progress) -> tuple[list[ServerResult], list[Failure], list[str]]:
    cfg = plan.config
    prepared = [_prepare(plan, s, progress) for s in plan.selected()]
    warnings = [w for _, ws in prepared for w in ws]
    rounds = cfg.repeats if cfg.interleave else 1
    for _ in range(rounds):
        for st, _ws in prepared:
            with _started(st, cfg, progress):
                st.session.warm_up()
                for conc in cfg.concurrency:
                    for _rep in range(1 if cfg.interleave else cfg.repeats):
                        st.session.repeat(conc)
    results = [st.session.result(redact_argv(st.launch.argv), st.env, st.sources) for st, _ in prepared]
    failures = [f for st, _ in prepared for f in st.session.failures]
    return results, failures, warnings + [w for st, _ in prepared for w in st.session.warnings]


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
            for conc in cfg.concurrency:
                for _ in range(cfg.repeats):
                    session.repeat(conc)
        finally:
            session.close()
        results, failures = [session.result(None, None)], list(session.failures)
        warnings = list(session.warnings)
    else:
        warnings = profile_overrides(plan.profile_name, plan.profile_env, plan.base_env)
        for w in warnings:
            progress(f"warning: {w}")
        fingerprint = replace(fingerprint, effective_env_digest=env_digest(
            effective_env(plan.profile_env, plan.base_env)))
        results, failures, more = _run_started(plan, progress)
        warnings += more
    warnings += report_warnings(fingerprint, results)
    # servers run in envforge's working directory (no cwd given): a relative drafter directory there is local
    warnings += drafter_warnings(results, plan.recipe_drafter, is_dir=os.path.isdir)
    warnings += [f"failed request: {f.line()}" for f in failures]
    method = {"prompts": "distinct per request, warm-up included (seed %d)" % cfg.seed,
              "order": "interleaved" if cfg.interleave and plan.url is None else "sequential",
              "load": _load_method(cfg),
              "warmup": (f"before each level: max({cfg.warmup}, concurrency) requests at its concurrency"
                         if cfg.warmup else "none"),
              "dataset": _dataset_method(cfg)}
    return BenchReport(fingerprint, cfg.as_dict(), tuple(results), break_even_rows(results), tuple(warnings),
                       tuple(failures), method, drafters_of(results, is_dir=os.path.isdir),
                       check_servers(results))


def _dataset_method(cfg: SmokeConfig) -> dict[str, Any]:
    """What was sent, for ``method.dataset``: a generated dataset's description (its settings, seed,
    tokenizer, length rule and the lengths drawn), or the prompt set's."""
    if cfg.dataset is not None:
        return cfg.dataset.describe(cfg.seed)
    return {"name": "prompts", "prompts": len(cfg.prompts), "digest": cfg.prompts_digest,
            "lengths": f"every request asks for max-new-tokens ({cfg.max_new_tokens}) output tokens, checked "
                       "exactly; input tokens are not counted"}


def _load_method(cfg: SmokeConfig) -> str:
    """How a level's requests were sent, for ``method.load``."""
    trace = cfg.trace
    if trace is not None:
        return (f"trace replay: each repeat sends the first {cfg.requests_at(1)} of the trace's {trace.size} records, "
                f"from a new pass, at their recorded times x {trace.time_scale:g}, at most the level's concurrency "
                "in flight")
    if not cfg.open_loop:
        return "closed loop: every request due at once, at most the level's concurrency in flight"
    kind = ("constant gaps" if cfg.burstiness == float("inf") else "Poisson arrivals" if cfg.burstiness == 1.0
            else f"gamma arrivals (burstiness {cfg.burstiness:g})")
    return (f"open loop: {cfg.request_rate:g} requests/s, {kind} (seed {cfg.seed}), at most the level's "
            f"concurrency in flight")


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
