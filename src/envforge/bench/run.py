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
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from envforge.bench.client import Endpoint
from envforge.bench.config import HOST, ServerConfig, SmokeConfig, inert_patch_warnings
from envforge.bench.method import report_method
from envforge.bench.report import BenchReport, report_warnings
from envforge.bench.breakeven import break_even_rows
from envforge.bench.result import ServerResult
from envforge.bench.server import ServerLaunch, running_server
from envforge.bench.session import Session
from envforge.bench.speculation import check_servers, drafter_warnings, drafters_of
from envforge.bench.variables import effective_env, env_digest, profile_overrides, recorded_values, server_environment
from envforge.core.errors import InputError
from envforge.core.probe import ProbeError, run_probe
from envforge.core.urls import redact_argv
from envforge.env.fingerprint import Fingerprint, fingerprint_of
from envforge.env.profile.effective import served_launcher

__all__ = ["BenchPlan", "machine_fingerprint", "run_bench"]

Progress = Callable[[str], None]


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
    interpreter_notes: tuple[str, ...] = ()  # the caller's PYTHONPATH/PYTHONHOME dropped from base_env (B53)

    def selected(self) -> tuple[ServerConfig, ...]:
        """The server configurations to run, in recipe order.

        :raises InputError: no configurations, or a name in ``only`` that the recipe does not define.
        """
        names = [s.name for s in self.config.servers]
        if not names:
            raise InputError(
                "[verify.smoke] defines no server configuration to start",
                hint='add [[verify.smoke.servers]] name = "baseline", args = [...], '
                "or measure a running server with --url",
            )
        unknown = [n for n in self.only if n not in names]
        if unknown:
            raise InputError(
                f"no server configuration named {', '.join(unknown)} in [verify.smoke]",
                hint=f"defined: {', '.join(names)}",
            )
        return tuple(s for s in self.config.servers if not self.only or s.name in self.only)


@dataclass(frozen=True, slots=True)
class _Started:
    config: ServerConfig
    launch: ServerLaunch
    env: dict[str, str]
    session: Session
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
    endpoint = Endpoint(HOST, cfg.port, headers=cfg.headers)
    launch = ServerLaunch(
        s.name,
        (str(plan.python), *tail),
        {**plan.base_env, **s.env},
        endpoint.url + cfg.health,
        plan.log_dir / f"{s.name}.log",
    )
    launcher, unknown = served_launcher(plan.site_packages, tail, cfg.api)
    eff = server_environment(plan.profile_env, plan.base_env, s.env, tail, launcher=launcher, unknown_launcher=unknown)
    more = [f"server '{s.name}': {w}" for w in eff.overrides(plan.profile_name)]
    if unknown:
        more.append(
            f"server '{s.name}': envforge has no launcher data for {unknown}: the variables its launch "
            "code sets are not in the report"
        )
    for w in more:
        progress(f"warning: {w}")
    session = Session(s.name, served or model, endpoint, cfg, progress, s.speculative)
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


def _run_started(plan: BenchPlan, progress: Progress, prepared: list[_Started]) -> list[str]:
    """Start, measure and stop every selected server; ``prepared`` receives each server as it is
    prepared (so a run stopped part-way still has what was measured). Returns the warnings."""
    cfg = plan.config
    warnings: list[str] = []
    for s in plan.selected():
        st, ws = _prepare(plan, s, progress)
        prepared.append(st)
        warnings += ws
    rounds = cfg.repeats if cfg.interleave else 1
    for _ in range(rounds):
        for st in prepared:
            with _started(st, cfg, progress):
                st.session.warm_up()
                st.session.measure(interleaved=cfg.interleave)
    return warnings


#: What ``run_bench`` calls with the report of a run stopped part-way (it then re-raises).
Partial = Callable[[BenchReport], None]


def run_bench(plan: BenchPlan, *, progress: Progress = lambda _: None, partial: Partial | None = None) -> BenchReport:
    """Run ``plan`` and return the report (fingerprint, settings, method, results, break-even,
    failures, warnings, drafters, failed speculation checks). Failed requests do not raise: they are
    in ``report.failures``; levels that fail a speculation check are in ``report.speculation``
    (:mod:`envforge.bench.speculation`).

    A run stopped part-way (Ctrl-C, a termination signal, a server that crashed or timed out, any
    error once measuring has begun) still reports what it measured: ``partial`` is called with a
    report of the levels completed so far, its first warning saying it is partial and why, and then
    the exception propagates unchanged. Nothing is called when no level was completed.

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
    prepared: list[_Started] = []
    url_session: Session | None = None
    if plan.url is not None:
        try:
            endpoint = Endpoint.from_url(plan.url, cfg.headers, cfg.ca_cert)
        except ValueError as exc:
            raise InputError(f"--url: {exc}", hint="e.g. --url http://127.0.0.1:30000") from None
        url_session = Session(plan.url_name, cfg.model, endpoint, cfg, progress, plan.url_speculative)
    else:
        warnings = [*plan.interpreter_notes, *profile_overrides(plan.profile_name, plan.profile_env, plan.base_env)]
        for w in warnings:
            progress(f"warning: {w}")
        fingerprint = replace(
            fingerprint, effective_env_digest=env_digest(effective_env(plan.profile_env, plan.base_env))
        )

    def report(more: list[str]) -> BenchReport:
        sessions = [url_session] if url_session is not None else [st.session for st in prepared]
        results = (
            [url_session.result(None, None)]
            if url_session is not None
            else [st.session.result(redact_argv(st.launch.argv), st.env, st.sources) for st in prepared]
        )
        return _report(plan, fingerprint, more + warnings, sessions, results)

    try:
        if url_session is not None:
            try:
                url_session.warm_up()
                url_session.measure()
            finally:
                url_session.close()
        else:
            warnings += _run_started(plan, progress, prepared)
        return report([])  # a stop while it is made (scipy's first import takes a second) is a stop too
    except BaseException as exc:
        if partial is not None:
            prepared[:] = [st for st in prepared if st.session.measured]  # servers not reached are absent
            if url_session.measured if url_session is not None else prepared:
                partial(
                    report(
                        [
                            f"partial report: the run was stopped ({_stop_reason(exc)}); it holds only the "
                            "repeats completed before"
                        ]
                    )
                )
        raise


def _stop_reason(exc: BaseException) -> str:
    """Why a run stopped, in a few words: ``Ctrl-C``, ``SIGTERM`` (a signal carried as ``signum``),
    or the first line of the error."""
    if isinstance(exc, KeyboardInterrupt):
        return "Ctrl-C"
    signum = getattr(exc, "signum", None)
    if isinstance(signum, int):
        try:
            return signal.Signals(signum).name
        except ValueError:
            return f"signal {signum}"
    text = str(getattr(exc, "message", "") or exc)
    return text.splitlines()[0] if text else type(exc).__name__


def _report(
    plan: BenchPlan, fingerprint: Fingerprint, warnings: list[str], sessions: list[Session], results: list[ServerResult]
) -> BenchReport:
    """The report of ``sessions`` (their ``results``), with the run's ``warnings`` first."""
    cfg = plan.config
    failures = [f for x in sessions for f in x.failures]
    warnings = warnings + [w for x in sessions for w in x.warnings]
    warnings += report_warnings(fingerprint, results, natural=cfg.natural)
    # servers run in envforge's working directory (no cwd given): a relative drafter directory there is local
    warnings += drafter_warnings(results, plan.recipe_drafter, is_dir=os.path.isdir)
    warnings += [f"failed request: {f.line()}" for f in failures]
    method = report_method(cfg, interleaved=cfg.interleave and plan.url is None)
    return BenchReport(
        fingerprint,
        cfg.as_dict(),
        tuple(results),
        break_even_rows(results),
        tuple(warnings),
        tuple(failures),
        method,
        drafters_of(results, is_dir=os.path.isdir),
        check_servers(results),
        tuple(x.swept for x in sessions if x.swept is not None),
        tuple(r for x in sessions for r in x.records),
    )


def machine_fingerprint(
    site_packages: Path, python: Path, env: Mapping[str, str], *, timeout_s: float = 120.0
) -> tuple[Fingerprint, str | None]:
    """The environment's fingerprint with the machine facts (Python, driver, GPU name, count,
    compute capability) from verify's GPU info probe (``envforge/verify/gpu_probe.py``, mode
    ``info``), run by the environment's interpreter, so bench and verify reports carry the same
    fingerprint and reports from different GPUs never compare as equal.

    :returns: the fingerprint, and a note when the probe could not run (machine facts then None).
    """
    try:
        script = (resources.files("envforge.verify") / "gpu_probe.py").read_text(encoding="utf-8")
        data: Any = run_probe(python, script, args=[json.dumps({"mode": "info"})], env=env, timeout_s=timeout_s).data
    except (ImportError, OSError, ProbeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return fingerprint_of(site_packages), f"no machine facts in the fingerprint: {first}"
    info: Mapping[str, Any] = data if isinstance(data, dict) else {}
    gpus = info.get("gpus") or []
    gpu: dict[str, Any] = {"python": info.get("python"), "driver": info.get("driver")}
    if gpus:
        gpu.update(name=gpus[0].get("name"), count=len(gpus), capability=gpus[0].get("capability"))
    return fingerprint_of(site_packages, gpu=gpu), None
