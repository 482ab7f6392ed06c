"""CLI for smoke benchmarks: ``envforge bench [ENV]`` and ``envforge bench compare A.json B.json``
(registration: :mod:`envforge.cli.commands.bench`)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from envforge.bench.compare import DEFAULT_MIN_CHANGE, Comparison, compare
from envforge.bench.config import SWEEP_NEEDS_SLO, SmokeConfig, load_prompts, smoke_config, url_config
from envforge.bench.dataset import KEYS, reply_lengths
from envforge.bench.distribution import parse_percentiles
from envforge.bench.endpoint import Endpoint, ca_file
from envforge.bench.headers import request_headers
from envforge.bench.identity import identify
from envforge.bench.plot import plot_report
from envforge.bench.records import write_csv
from envforge.bench.report import SCHEMA_VERSION, BenchReport
from envforge.bench.result import LATENCY_KEYS, LevelResult
from envforge.bench.run import BenchPlan, machine_fingerprint, run_bench
from envforge.bench.slo import DEFAULT_ATTAINMENT, parse_slo
from envforge.bench.sweep import DEFAULT_MAX_STEPS, DEFAULT_PRECISION, RateSweep
from envforge.bench.vllmresult import from_vllm, paired, read_compared
from envforge.bench.workload import build_workload, find_tokenizer
from envforge.cli.benchoutputs import check_outputs
from envforge.cli.crashlog import crash_log_dir
from envforge.cli.output import Ui, envelope
from envforge.cli.project import project_of
from envforge.core.errors import CheckFailed, EnvforgeError, ExternalToolError, InputError
from envforge.core.fs import atomic_write
from envforge.core.extras import require
from envforge.core.plural import counted
from envforge.env.fingerprint import Fingerprint
from envforge.env.interpreter import isolate
from envforge.env.generations import describe_generation
from envforge.env.layout import resolve_environment
from envforge.env.profile import read_installed
from envforge.patching import read_manifest
from envforge.recipe.load import load_recipe

__all__: list[str] = []


def _activations(site_packages: Path | None, ui: Ui) -> tuple[tuple[str, str | None], ...]:
    """(patchset id, activation flag) of the patchsets applied in the environment (its manifest)."""
    if site_packages is None:
        return ()
    try:
        manifest = read_manifest(site_packages)
    except EnvforgeError as exc:
        ui.warn(f"cannot check patchset activation flags: {exc.message}")
        return ()
    return tuple((p.id, p.activation) for p in manifest.patchsets) if manifest else ()


def _url_config(args: argparse.Namespace, ui: Any, headers: tuple[tuple[str, str], ...], ca: str | None) -> Any:
    """The SmokeConfig of ``--url`` without a recipe's [verify.smoke]: ``--api``, else the engine the
    server says it is (envforge.bench.identity; the model too, when it serves exactly one), else sglang."""
    if args.api is not None:
        return url_config(api=args.api, model=args.model)
    try:
        endpoint = Endpoint.from_url(args.url, headers, ca)
    except ValueError as exc:
        raise InputError(f"--url: {exc}", hint="e.g. --url http://127.0.0.1:30000") from None
    found = identify(endpoint)
    if found.refused:
        raise ExternalToolError(
            f"--url {args.url}: nothing listens there (connection refused on GET /v1/models and GET /metrics)",
            tool="bench",
            argv=(),
            returncode=None,
            hint="start the server first, or check the host and port",
        )
    if found.api is None:
        ui.info(f"--url: engine not recognised ({found.evidence}); assuming sglang (give --api otherwise)")
        return url_config(api="sglang", model=args.model)
    model = args.model if args.model is not None or len(found.models) != 1 else found.models[0]
    ui.info(f"--url: {found.api} server ({found.evidence})" + (f", model '{model}'" if model else ""))
    return url_config(api=found.api, model=model)


def _config(
    args: argparse.Namespace, ui: Any, headers: tuple[tuple[str, str], ...], ca: str | None
) -> tuple[Any, Any, Any, Path | None]:
    """(SmokeConfig, Project or None, ResolvedVariant or None, the recipe's path or None): from the
    recipe's [verify.smoke], or for --url without one, from the flags and the server (:func:`_url_config`)."""
    if args.url is not None and args.recipe is None and args.env is None:
        return _url_config(args, ui, headers, ca), None, None, None
    project = project_of(args, ui)
    recipe_arg, variant_arg = args.recipe, args.variant
    if recipe_arg is None and args.env is not None:  # ENV's own recipe, as its generation records (issue 44)
        built = describe_generation(resolve_environment(project, args.env, args.env).path.resolve())
        if isinstance(built.get("recipe"), str) and project.recipes_dir.joinpath(f"{built['recipe']}.toml").is_file():
            recipe_arg = built["recipe"]
            variant_arg = variant_arg or (built.get("variant") if isinstance(built.get("variant"), str) else None)
            ui.info(f"{args.env}: recipe {recipe_arg}, variant {variant_arg} (what its generation was built from)")
    recipe = load_recipe(project.recipe_path(recipe_arg))
    resolved = recipe.resolve(variant_arg)
    if args.url is not None and not resolved.verify.get("smoke"):
        return _url_config(args, ui, headers, ca), project, resolved, recipe.path
    return smoke_config(resolved.verify, recipe.path), project, resolved, recipe.path


#: The flags that set the dataset (each is its recipe key with ``--``), the prompt file's aside.
_DATASET_FLAGS = ("dataset", "tokenizer", *(k for name, keys in KEYS.items() if name != "prompts" for k in keys))


def _replies(
    config: SmokeConfig, args: argparse.Namespace, smoke: Mapping[str, Any], recipe_path: Path | None, ui: Ui
) -> SmokeConfig:
    """Natural lengths from a ShareGPT file: each request asks for its reply's tokens, as vLLM's ``--dataset-name
    sharegpt`` does (:func:`envforge.bench.dataset.reply_lengths`), unless ``--max-new-tokens`` fixes them (vLLM's
    ``--sharegpt-output-len``) or a multi-turn run asks it of every turn; no tokenizer: ``max-new-tokens``, warned."""
    if (
        not config.natural
        or config.dataset is not None
        or config.turns > 1
        or args.max_new_tokens is not None
        or not any(p.reply is not None for p in config.prompts)
    ):
        return config
    named = {"tokenizer": str(Path.cwd() / args.tokenizer)} if args.tokenizer is not None else smoke
    base = recipe_path.parent if recipe_path is not None else Path.cwd()
    tokenizer = find_tokenizer(named, base, config.model)
    if tokenizer is None:
        ui.warn(
            f"natural lengths from a ShareGPT file: model '{config.model}' is not a directory with a "
            f"tokenizer.json and no --tokenizer is given, so every request asks for {config.max_new_tokens} "
            "tokens instead of its reply's length"
        )
        return config
    prompts, left_out = reply_lengths(config.prompts, tokenizer.count)
    if left_out:
        ui.warn(
            f"natural lengths from a ShareGPT file: {left_out} of {len(config.prompts)} prompts left out as "
            "vLLM leaves them out (prompt or reply under 4 tokens, prompt over 1,024, both over 2,048)"
        )
    return replace(config, prompts=prompts)


def _dataset(
    config: SmokeConfig, args: argparse.Namespace, smoke: Mapping[str, Any], recipe_path: Path | None
) -> SmokeConfig:
    """``config`` with the dataset the flags name (``--dataset`` and its settings over the recipe's
    settings of the same dataset; ``--prompts FILE`` alone means the prompt file), read and checked
    (:func:`envforge.bench.workload.build_workload`)."""
    flags = {
        k: getattr(args, k.replace("-", "_")) for k in _DATASET_FLAGS if getattr(args, k.replace("-", "_")) is not None
    }
    recipe_name = config.dataset.name if config.dataset is not None else "prompts"
    name = flags.get("dataset") or ("prompts" if args.prompts is not None else recipe_name)
    if args.prompts is not None and name != "prompts":
        raise InputError(
            f"--prompts {args.prompts} with dataset '{name}': a prompt file is dataset 'prompts'",
            hint="drop --prompts, or --dataset prompts",
        )
    if name != "prompts" and args.max_new_tokens is not None:
        raise InputError(
            f"--max-new-tokens {args.max_new_tokens} with dataset '{name}': each of its requests asks "
            "for its own output tokens",
            hint={
                "random": "set them with --random-output-len (and --random-range-ratio)",
                "shared-prefix": "set them with --gsp-output-len",
            }.get(name, "the trace records them"),
        )
    if not flags and args.model is None and name == recipe_name:
        return config
    for key in ("tokenizer", "trace"):
        if key in flags:
            flags[key] = str(Path.cwd() / flags[key])
    settings = {k: v for k, v in smoke.items() if k == "tokenizer" or k in KEYS.get(name, ())}
    settings.update(flags, dataset=name)
    where = f"{recipe_path}: verify.smoke." if recipe_path is not None else "--"

    def label(key: str) -> str:
        return f"--{key}" if key in flags else f"{where}{key}"

    dataset = build_workload(
        settings, base=recipe_path.parent if recipe_path is not None else Path.cwd(), model=config.model, label=label
    )
    return replace(config, dataset=dataset)


def _profile(site_packages: Path | None) -> tuple[str | None, dict[str, str]]:
    if site_packages is None:
        return None, {}
    installed = read_installed(site_packages)
    return (installed.profile, dict(installed.env)) if installed else (None, {})


def _bench(args: argparse.Namespace, ui: Ui) -> int:
    require("bench", "envforge bench")  # scipy is first needed for the intervals, after the whole run
    # the flags' own files and values first: refused before the recipe is read or --url is probed
    if args.slo_attainment is not None and not args.slo:
        raise InputError(
            f"--slo-attainment {args.slo_attainment:g} without --slo: there is no target to attain",
            hint="add the targets, e.g. --slo ttft:200 tpot:50, or drop --slo-attainment",
        )
    attainment = DEFAULT_ATTAINMENT if args.slo_attainment is None else args.slo_attainment
    slo = parse_slo(args.slo, attainment) if args.slo else None
    sweep = _sweep(args)
    percentiles = parse_percentiles(args.percentiles) if args.percentiles is not None else None
    headers = request_headers(args.header, os.environ)
    ca = ca_file(args.ca_cert) if args.ca_cert else None
    check_outputs(args)
    prompt_set = load_prompts(args.prompts) if args.prompts is not None else None
    config, project, resolved, recipe_path = _config(args, ui, headers, ca)
    config = config.with_overrides(
        concurrency=args.concurrency,
        repeats=args.repeats,
        requests=args.requests,
        warmup=args.warmup,
        max_new_tokens=args.max_new_tokens,
        port=args.port,
        load_timeout_s=args.load_timeout,
        model=args.model,
        request_timeout_s=args.request_timeout,
        idle_timeout_s=args.idle_timeout,
        interleave=args.interleave,
        slo=slo,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        seed=args.seed,
        sweep=sweep,
        metrics_interval_s=args.metrics_interval,
        percentiles=percentiles,
        output_lengths=args.output_lengths,
        turns=args.turns,
        headers=headers or None,
        save_detailed=(args.save_detailed or args.csv is not None) or None,
        ca_cert=ca,
    )
    if prompt_set is not None:
        prompts, digest = prompt_set
        config = config.with_overrides(prompts=prompts, prompts_digest=digest)
    smoke = (resolved.verify.get("smoke") or {}) if resolved is not None else {}
    config = _dataset(config, args, smoke, recipe_path)
    config = _replies(config, args, smoke, recipe_path, ui)
    config.check()
    if args.api is not None and args.api != config.api:
        raise InputError(
            f'--api {args.api} contradicts the recipe\'s [verify.smoke] api = "{config.api}"',
            hint="drop --api, or change api in the recipe",
        )
    env = None
    if args.url is None or args.env is not None:
        env = resolve_environment(project, args.env, resolved.lock_name)
    site_packages = env.site_packages if env else None
    fingerprint = Fingerprint(None, None, None, None)
    if env is not None and site_packages is not None:
        fingerprint, note = machine_fingerprint(site_packages, env.python, dict(os.environ))
        if note:
            ui.warn(note)
    profile_name, profile_env = _profile(site_packages)
    output: Path = args.output
    isolated = isolate(os.environ, keep=args.keep_pythonpath)  # B53: a PYTHONPATH checkout would shadow the env
    plan = BenchPlan(
        config=config,
        python=env.python if env else None,
        base_env=dict(isolated.environ),
        log_dir=output.parent / f"{output.stem}-logs",
        fingerprint=fingerprint,
        url=args.url,
        url_name=args.name,
        url_speculative=args.speculative,
        only=tuple(args.server),
        activations=_activations(site_packages, ui),
        profile_name=profile_name,
        profile_env=profile_env,
        site_packages=site_packages,
        recipe_drafter=resolved.verify.get("drafter") if resolved is not None else None,
        interpreter_notes=tuple(isolated.notes("bench servers", "--keep-pythonpath")),
    )
    report = run_bench(plan, progress=ui.progress, partial=lambda r: _write_partial(r, output, ui))
    _write(report, output, args, ui)
    if ui.json_mode:
        ui.emit_json("bench", report.as_dict(), version=SCHEMA_VERSION)
    else:
        _render(report, ui)
    if report.failures:
        _raise_failures(report, output)
    if report.speculation:
        _raise_speculation(report, output)
    if report.sweep:
        low = [x.line() for x in report.sweep if x.outcome == "low-fails"]
        if low:  # the sweep's own levels miss the gate by design: only "no rate meets it" is a failed check
            raise CheckFailed(
                "the sweep found no rate that meets the SLO:\n" + "\n".join(f"  {x}" for x in low),
                hint=f"lower LO of --sweep-rate, or relax --slo; the levels are in the report: {output}",
            )
        return 0
    misses = report.slo_misses()
    if misses:
        raise CheckFailed(
            "the SLO gate failed:\n" + "\n".join(f"  {m}" for m in misses),
            hint=f"the per-request distributions are in the report: {output}",
        )
    return 0


def _sweep(args: argparse.Namespace) -> RateSweep | None:
    """``--sweep-rate`` with its precision and step cap (flags checked before the recipe is read)."""
    if args.sweep_rate is None:
        extra = [
            f
            for f, v in (("--sweep-precision", args.sweep_precision), ("--sweep-steps", args.sweep_steps))
            if v is not None
        ]
        if extra:
            raise InputError(
                f"{' and '.join(extra)} without --sweep-rate: there is no sweep to tune",
                hint="add --sweep-rate LO:HI (requests/s), or drop them",
            )
        return None
    if not args.slo:
        raise InputError(SWEEP_NEEDS_SLO[0], hint=SWEEP_NEEDS_SLO[1])
    lo, hi = args.sweep_rate
    return RateSweep(
        lo,
        hi,
        DEFAULT_PRECISION if args.sweep_precision is None else args.sweep_precision,
        DEFAULT_MAX_STEPS if args.sweep_steps is None else args.sweep_steps,
    )


def _raise_speculation(report: BenchReport, output: Path) -> None:
    fs = report.speculation
    raise CheckFailed(
        f"{len(fs)} speculative level{'s' if len(fs) != 1 else ''} FAILED the speculation checks:\n"
        + "\n".join(f"  {f.line()}" for f in fs),
        hint=f"the tok/s of such a level measures a speculation that does not work; the report lists them: {output}",
    )


def _raise_failures(report: BenchReport, output: Path) -> None:
    fs = report.failures
    shown = "\n".join(f"  {f.line()}" for f in fs[:10])
    more = f"\n  ... and {len(fs) - 10} more (all in the report)" if len(fs) > 10 else ""
    servers = sorted({f.server for f in fs})
    raise ExternalToolError(
        f"{counted(len(fs), 'failed request')} (server {', '.join(servers)}); levels with "
        f"failures have no figures:\n{shown}{more}",
        tool="bench",
        argv=(),
        returncode=None,
        hint=f"a run with failed requests gives no trustworthy number; the report lists them: {output}",
    )


def _save(report: BenchReport, output: Path) -> None:
    """Write the report's JSON envelope to ``output`` atomically (a reader never sees half a report).

    :raises OSError: it cannot be written (nothing is left at ``output`` then)."""
    output.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(output, _report_bytes(report))


def _report_bytes(report: BenchReport) -> bytes:
    return (json.dumps(envelope("bench", report.as_dict(), SCHEMA_VERSION), indent=2) + "\n").encode("utf-8")


def _keep(report: BenchReport, output: Path, exc: OSError, ui: Ui) -> Path | None:
    """A report that cannot be written to ``output`` (a full disk, issue 41: a whole run was lost) is
    never lost: it goes to ``$XDG_STATE_HOME/envforge/bench-reports/`` (a second filesystem more often
    than not), else, as the last resort, to standard output. Returns the file it went to (None: stdout)."""
    why = exc.strerror or str(exc)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    kept = crash_log_dir(os.environ).parent / "bench-reports" / f"{output.stem}-{stamp}-{os.getpid()}.json"
    try:
        _save(report, kept)
    except OSError:
        ui.out.write(_report_bytes(report).decode("utf-8"))
        ui.out.flush()
        ui.warn(
            f"the report could not be written to {output} ({why}) nor to {kept.parent}: it is on standard "
            "output above, whole"
        )
        return None
    ui.warn(f"the report could not be written to {output} ({why}): it was written to {kept}")
    return kept


def _write_partial(report: BenchReport, output: Path, ui: Ui) -> None:
    """A run stopped part-way: its report of the completed repeats, no plot (the stop is not delayed)."""
    try:
        _save(report, output)
    except OSError as exc:
        _keep(report, output, exc, ui)
        return
    ui.warn(f"partial report (the repeats completed before the stop): {output}")


def _write(report: BenchReport, output: Path, args: argparse.Namespace, ui: Ui) -> None:
    """The report, then the plot. A report that cannot be written is kept elsewhere (:func:`_keep`) and the
    run exits 3 naming where; a plot that cannot be written leaves no file and only a warning.

    :raises ExternalToolError: the report went elsewhere than ``output``.
    """
    try:
        _save(report, output)
    except OSError as exc:
        kept = _keep(report, output, exc, ui)
        where = str(kept) if kept is not None else "standard output"
        raise ExternalToolError(
            f"--output {output}: {exc.strerror or exc}; the report was kept at {where}",
            tool="bench",
            argv=(),
            returncode=None,
            hint="free space where --output points, then move the kept report there",
        ) from None
    ui.info(f"report: {output}")
    if args.csv is not None:
        try:
            write_csv(report.requests, args.csv)
            ui.info(f"per-request records: {args.csv}")
        except OSError as exc:
            ui.warn(f"no CSV: {args.csv}: {exc.strerror or exc} (the report holds the same records)")
    if args.no_plot:
        return
    try:
        ui.info(f"plot: {plot_report(report, args.plot or output.with_suffix('.png'))}")
    except InputError as exc:
        if args.plot is not None:
            raise
        ui.warn(f"no plot: {exc.message} ({exc.hint})")
    except OSError as exc:
        ui.warn(f"no plot: {args.plot or output.with_suffix('.png')}: {exc.strerror or exc} (the report is whole)")


def _fmt(x: float | None, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def _median(lv: LevelResult, key: str) -> float | None:
    d = (lv.latency or {}).get(key)
    return d.median if d is not None else None


def _rate_cell(report: BenchReport) -> tuple[str, Any]:
    """The table's rate column (the sent requests/s of open-loop levels, "-" for closed loop): its
    head and a cell function, both empty when no level has a rate."""
    if all(lv.request_rate is None for s in report.servers for lv in s.levels):
        return "", lambda lv: ""
    return f" {'rate':>7}", lambda lv: f" {'-' if lv.request_rate is None else format(lv.request_rate, 'g'):>7}"


def _render(report: BenchReport, ui: Ui) -> None:
    rate_head, rate = _rate_cell(report)
    head = (
        f"{'server':<14} {'conc':>4}{rate_head} {'tok/s':>9} {'95% interval':>19} {'min..max':>17} {'req/s':>7} "
        f"{'TTFT ms':>8} {'TPOT ms':>8} {'ITL ms':>7} {'accept':>6}"
    )
    ui.result(head)
    for s in report.servers:
        for lv in s.levels:
            t = lv.tok_s
            if t is None:
                why = (
                    f"FAILED: {counted(lv.failed_requests, 'request')}"
                    if lv.failed_requests
                    else "refused: chunk counts"
                )
                ui.result(f"{s.name:<14} {lv.concurrency:>4}{rate(lv)} {why}")
                continue
            ci = f"[{_fmt(t.ci_low)}, {_fmt(t.ci_high)}]" if t.ci_low is not None else "(1 repeat)"
            ui.result(
                f"{s.name:<14} {lv.concurrency:>4}{rate(lv)} {t.median:>9.1f} {ci:>19} "
                f"{f'{t.min:.1f}..{t.max:.1f}':>17} {_fmt(lv.req_s.median if lv.req_s else None, '.2f'):>7} "
                f"{_fmt(_median(lv, 'ttft_ms')):>8} {_fmt(_median(lv, 'tpot_ms'), '.2f'):>8} "
                f"{_fmt(_median(lv, 'itl_ms'), '.2f'):>7} {_fmt(lv.accept_length, '.2f'):>6}"
            )
    _render_latency(report, ui)
    _render_gauges(report, ui)
    for s in report.servers:
        for lv in s.levels:
            g = lv.goodput
            at = "" if lv.request_rate is None else f" @ {lv.request_rate:g} requests/s"
            if g is not None:
                ui.result(
                    f"goodput {s.name} @ {lv.concurrency}{at}: {g.good} of {g.completed} requests met the SLO "
                    f"({g.attained:.1%}), {g.req_s:.2f} req/s: {'met' if g.met else 'MISSED'}"
                )
    for x in report.sweep:
        ui.result(x.line())
    for b in report.break_even:
        verdict = "pays" if b.pays else "does not pay"
        ui.result(
            f"break-even at concurrency {b.concurrency}: {b.speculative} vs {b.baseline}: verify cycle "
            f"{b.verify_cycle_ms:.1f} ms / decode step {b.decode_step_ms:.1f} ms = {b.break_even:.2f}; "
            f"measured accept length {b.accept_length:.2f}"
            + ("" if b.tokens_per_cycle is None else f" ({b.tokens_per_cycle:.2f} tokens per verify cycle)")
            + f": speculation {verdict}"
        )
    if any(s.speculative for s in report.servers) and not report.break_even:
        if all(s.speculative for s in report.servers):
            ui.result("break-even: needs a baseline (non-speculative) server measured in the same run")
        else:
            ui.result("break-even: no speculative server reported verify steps (spec_verify_ct)")
    for f in report.speculation:
        ui.result(f"FAILED level: {f.line()}")
    for w in report.warnings:
        ui.warn(w)


def _render_latency(report: BenchReport, ui: Ui) -> None:
    """Per level, the per-request distributions (ms): mean, median, p90, p95, p99, the chosen ``--percentiles``,
    max; open loop: the send lag (actual - intended send); multi-turn: TTFT and E2EL per turn (``ttft turn 2``)."""
    rows = [(s.name, lv) for s in report.servers for lv in s.levels if lv.latency]
    if not rows:
        return
    chosen = list(dict.fromkeys(k for _, lv in rows for d in (lv.latency or {}).values() if d for k, _ in d.chosen))
    keys = ["mean", "median", "p90", "p95", "p99", *chosen, "max"]
    rate_head, rate = _rate_cell(report)
    ui.result(f"{'per request ms':<14} {'conc':>4}{rate_head} {'metric':<16} " + " ".join(f"{k:>9}" for k in keys))
    for name, lv in rows:
        lag = {"send_lag_ms": lv.send_lag_ms} if lv.send_lag_ms is not None else {}
        turns = {f"{k} turn {t.turn}": t.latency.get(f"{k}_ms") for t in lv.turns for k in ("ttft", "e2el")}
        for key, d in [*((k, (lv.latency or {}).get(k)) for k in LATENCY_KEYS), *lag.items(), *turns.items()]:
            if d is not None:
                cells = " ".join(f"{'-':>9}" if (v := d.value(k)) is None else f"{v:>9.2f}" for k in keys)
                ui.result(f"{name:<14} {lv.concurrency:>4}{rate(lv)} {key.removesuffix('_ms'):<16} {cells}")


def _render_gauges(report: BenchReport, ui: Ui) -> None:
    """Per level with server metrics: the engine's requests running and waiting and its KV cache use
    (max and mean over the samples), the samples and the failed reads."""
    rows = [
        (s.name, lv, lv.server_metrics.summary())
        for s in report.servers
        for lv in s.levels
        if lv.server_metrics is not None
    ]
    if not rows:
        return
    rate_head, rate = _rate_cell(report)

    def cell(x: Any, spec: str) -> str:
        return "-" if x is None else f"{format(x['max'], spec)} / {format(x['mean'], spec)}"

    ui.result(
        f"{'engine load':<14} {'conc':>4}{rate_head} {'running max/mean':>17} {'waiting max/mean':>17} "
        f"{'KV cache max/mean':>18} {'samples':>7} {'failed':>6}"
    )
    for name, lv, x in rows:
        ui.result(
            f"{name:<14} {lv.concurrency:>4}{rate(lv)} {cell(x['running'], 'g'):>17} "
            f"{cell(x['waiting'], 'g'):>17} {cell(x['kv_cache_use'], '.1%'):>18} {x['samples']:>7} "
            f"{x['failed_scrapes']:>6}"
        )


def _compare(args: argparse.Namespace, ui: Ui) -> int:
    min_change = DEFAULT_MIN_CHANGE if args.min_change is None else args.min_change
    ra, rb = paired(read_compared(args.a), read_compared(args.b))
    for path, r in ((args.a, ra), (args.b, rb)):  # a run stopped part-way: fewer repeats than its settings say
        if any(w.startswith("partial report:") for w in r.warnings):
            ui.warn(
                f"{path} is a partial report (the run was stopped): its levels may have fewer repeats than "
                "its settings say, and servers or levels it did not reach are missing"
            )
        for w in r.warnings if from_vllm(r) else ():
            ui.warn(w)
    comparison = compare(ra, rb, allow_different_env=args.allow_different_env, min_change=min_change)
    if ui.json_mode:
        ui.emit_json("bench-compare", comparison.as_dict())
    else:
        _render_comparison(comparison, args.a, args.b, ui)
    return 0


def _render_comparison(c: Comparison, a: Path, b: Path, ui: Ui) -> None:
    for line in c.env_differences:
        ui.warn(f"different environments (allowed): {line}")
    for line in c.config_differences:
        ui.warn(f"different settings: {line}")
    ui.result(f"B = {b}  vs  A = {a}")
    ui.result(f"{'server':<14} {'conc':>4} {'A tok/s':>9} {'B tok/s':>9} {'B/A':>6} {'95% interval':>16}  verdict")
    for r in c.rows:
        at = "" if r.request_rate is None else f" @ {r.request_rate:g}/s"  # an open-loop level: its rate
        ui.result(
            f"{r.server + at:<14} {r.concurrency:>4} {r.a_tok_s:>9.1f} {r.b_tok_s:>9.1f} {r.ratio:>6.3f} "
            f"{'-' if r.ratio_low is None or r.ratio_high is None else f'[{r.ratio_low:.3f}, {r.ratio_high:.3f}]':>16}"
            f"  {r.verdict}"
        )
    ui.result(
        f"a change is called only when the whole interval lies beyond {1 + c.min_change:.2f} or below "
        f"{1 / (1 + c.min_change):.3f} (--min-change {c.min_change:g})"
    )
    for x in c.not_compared:
        ui.warn(f"not compared: {x}")
    for x in c.only_in_a:
        ui.info(f"only in A: {x}")
    for x in c.only_in_b:
        ui.info(f"only in B: {x}")
