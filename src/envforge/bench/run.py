"""Run a smoke benchmark: each server configuration started, warmed up, measured, stopped.

Per configuration: start it with the environment's interpreter (its env profile comes with it: the
``.pth`` hook runs at start-up) plus the configuration's ``env``, wait until ready, send
``warmup`` requests (excluded), then for each concurrency level ``repeats`` rounds of requests, and
stop it. With ``url`` an already running server is measured instead and nothing is started or
stopped. Any failed request fails the run: a number made of partial results is not one to trust.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from envforge.bench.client import Endpoint, LevelRun, run_level
from envforge.bench.config import HOST, ServerConfig, SmokeConfig, inert_patch_warnings
from envforge.bench.metrics import SpecDecodeStats, check_spec, describe, scrape
from envforge.bench.report import BenchReport, LevelResult, ServerResult, break_even_rows, level_result
from envforge.bench.server import RunningServer, ServerLaunch, running_server
from envforge.errors import ExternalToolError, InputError
from envforge.fingerprint import Fingerprint, fingerprint_of
from envforge.probe import ProbeError, run_probe

__all__ = ["BenchPlan", "machine_fingerprint", "run_bench"]

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class BenchPlan:
    """What to run: the settings, the interpreter (None with ``url``), the base environment of the
    server processes, where server logs go, and which configurations (all when empty)."""

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


def _measure(name: str, model: str, endpoint: Endpoint, cfg: SmokeConfig, progress: Progress,
             server: RunningServer | None, speculative: bool) -> tuple[tuple[LevelResult, ...], list[str]]:
    warnings: list[str] = []

    def level(conc: int, count: int) -> LevelRun:
        prompts = [p.text for p in cfg.prompt_order(count)]
        run = run_level(endpoint, cfg.api, prompts, conc, model=model, max_new_tokens=cfg.max_new_tokens,
                        temperature=cfg.temperature)
        _check(name, run, server)
        return run

    def vllm_level(conc: int, count: int, where: str) -> tuple[LevelRun, SpecDecodeStats | None]:
        # vLLM's speculative counters around the repeat (envforge.bench.metrics)
        before = scrape(endpoint, server=name)
        run = level(conc, count)
        stats, w = check_spec(name, speculative, before, scrape(endpoint, server=name),
                              output_tokens=sum(r.output_tokens for r in run.results), requests=len(run.results),
                              source=endpoint.url + "/metrics", where=where)
        for line in w:
            progress(f"warning: {line}")
        warnings.extend(w)
        return run, stats

    if cfg.warmup:
        level(1, cfg.warmup)
    levels = []
    for conc in cfg.concurrency:
        runs, specs = [], []
        for rep in range(cfg.repeats):
            if cfg.api == "vllm":
                run, stats = vllm_level(conc, cfg.requests_at(conc), f"at concurrency {conc}, repeat {rep + 1}")
                if stats is not None:
                    specs.append(stats)
            else:
                run = level(conc, cfg.requests_at(conc))
            runs.append(run)
            tokens = sum(r.output_tokens for r in run.results)
            progress(f"{name}: concurrency {conc}, repeat {rep + 1}/{cfg.repeats}: "
                     f"{tokens / run.wall_s if run.wall_s else 0:.1f} tok/s")
        result = level_result(conc, runs, specs or None)
        if result.spec_decode is not None:
            progress(f"{name}: concurrency {conc}: " + "; ".join(describe(result.spec_decode)))
        levels.append(result)
    return tuple(levels), warnings


def _check(name: str, run: LevelRun, server: RunningServer | None) -> None:
    failed = [r for r in run.results if not r.ok]
    if failed and server is not None:
        try:  # a dying server drops its connections a moment before it can be reaped
            server.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            pass
    if server is not None and not server.alive():
        raise server.crashed(f"while being measured at concurrency {run.concurrency}")
    if failed:
        raise ExternalToolError(
            f"{len(failed)} of {len(run.results)} requests to server '{name}' failed at concurrency "
            f"{run.concurrency}: {failed[0].error}", tool=name, argv=server.launch.argv if server else (),
            returncode=None, stderr_tail=server.log_tail(10) if server else "",
            hint="a run with failed requests gives no trustworthy number; check the server log")


def _run_one(plan: BenchPlan, s: ServerConfig, progress: Progress) -> tuple[ServerResult, list[str]]:
    cfg = plan.config
    assert plan.python is not None
    model = s.model or cfg.model
    tail = s.argv_tail(model=model, port=cfg.port)
    warnings = [f"server '{s.name}': {w}" for w in inert_patch_warnings(tail, plan.activations)]
    for w in warnings:
        progress(f"warning: {w}")
    endpoint = Endpoint(HOST, cfg.port)
    launch = ServerLaunch(s.name, (str(plan.python), *tail), {**plan.base_env, **s.env},
                          endpoint.url + cfg.health, plan.log_dir / f"{s.name}.log")
    progress(f"starting '{s.name}': {' '.join(launch.argv)} (log: {launch.log_path})")
    with running_server(launch, load_timeout_s=cfg.load_timeout_s, progress=progress) as (server, load_s):
        progress(f"'{s.name}' ready after {load_s:.1f} s")
        levels, measured = _measure(s.name, model, endpoint, cfg, progress, server, s.speculative)
    return ServerResult(s.name, s.speculative, endpoint.url, launch.argv, load_s, levels), warnings + measured


def run_bench(plan: BenchPlan, *, progress: Progress = lambda _: None) -> BenchReport:
    """Run ``plan`` and return the report (fingerprint, settings, results, break-even, warnings).

    :raises InputError: unknown server name, bad ``url``, or a port already in use.
    :raises envforge.bench.server.ServerCrashed: a server exited while loading or being measured.
    :raises envforge.bench.server.ServerTimeout: a server was not ready within ``load-timeout-s``.
    :raises ExternalToolError: a request failed.
    :raises envforge.bench.metrics.MetricsError: ``api = "vllm"`` and ``/metrics`` failed, or its
        speculative counters contradict the configuration (see :func:`~envforge.bench.metrics.check_spec`).
    Every server envforge started is stopped (SIGTERM, then SIGKILL of its group) before returning.
    """
    results: list[ServerResult] = []
    warnings: list[str] = []
    if plan.url is not None:
        try:
            endpoint = Endpoint.from_url(plan.url)
        except ValueError as exc:
            raise InputError(f"--url: {exc}", hint="e.g. --url http://127.0.0.1:30000") from None
        levels, measured = _measure(plan.url_name, plan.config.model, endpoint, plan.config, progress, None,
                                    plan.url_speculative)
        warnings.extend(measured)
        results.append(ServerResult(plan.url_name, plan.url_speculative, endpoint.url, None, None, levels))
    else:
        for s in plan.selected():
            result, w = _run_one(plan, s, progress)
            results.append(result)
            warnings.extend(w)
    return BenchReport(plan.fingerprint, plan.config.as_dict(), tuple(results),
                       break_even_rows(results), tuple(warnings))



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
