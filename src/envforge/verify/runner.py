"""One verify run: read the environment's state, run the requested levels, build the report.

:func:`verify` is the one public entry point of :mod:`envforge.verify`. It reads
``<site-packages>/.envforge/`` (generation.json, pylock.toml, patches.json, env-profile.json), runs
``static`` (files, no GPU) and ``gpu`` (probes in the environment's interpreter), and returns a
:class:`~envforge.verify.findings.VerifyReport` with every finding and the fingerprint.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.core.kinds import LEVELS, Level, belongs_to, check_levels
from envforge.core.plural import counted
from envforge.core.state import StateDir
from envforge.core.textfile import SMALL_LIMIT, parse_json, read_state
from envforge.drafter import ENGINE_FACTS, drafter_checks
from envforge.drafter.hub import offline_mode
from envforge.env.fingerprint import fingerprint_of
from envforge.env.layout import Environment
from envforge.env.profile import recipe_servers
from envforge.env.processes import can_scan, stale_processes
from envforge.patching.manifest import rebuild_hint
from envforge.recipe.load import load_recipe
from envforge.recipe.project import Project
from envforge.verify.acceptance import acceptances_from, apply_acceptances
from envforge.verify.findings import Check, Finding, VerifyReport
from envforge.verify.gpu import GpuInputs, run_gpu
from envforge.verify.drafterscope import drafter_scope, installed_delegations
from envforge.verify.inventory import EnvLock, read_env_lock
from envforge.verify.static import StaticInputs, installed_profile, run_static

__all__ = ["VerifyOptions", "nvidia_proc_facts", "verify"]


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    """How to verify: ``levels`` (subset of :data:`LEVELS`; None: the recipe's ``[verify] levels``
    that verify owns, else ``static``; levels given here are asked for explicitly, so a machine
    without a GPU is a ``no-gpu`` finding when they include ``gpu``), ``deep`` hashing, the target taken from
    the machine, the process environment probes start from (``base_env``), uv's cache directory,
    all-reduce settings for the GPU level, a ``clock`` (``time.monotonic``-like) for elapsed time,
    ``today`` (a :class:`datetime.date`; None: the local date) for the expiry of accepted findings,
    and ``yanked``: the static level also asks the lock's indexes (:mod:`envforge.verify.yanks`)."""

    levels: tuple[str, ...] | None = None
    deep: bool = False
    target_from_machine: bool = False
    base_env: Mapping[str, str] = field(default_factory=dict)
    uv_cache: Path | None = None
    allreduce_sizes: tuple[int, ...] = (43008, 1 << 20, 16 << 20)
    step_timeout_s: float = 120.0
    proc: Path = Path("/proc")
    hub_endpoint: str | None = None
    hub_cache: Path | None = None
    clock: Any = None
    today: Any = None
    lock: Path | None = None  # verify against this lock, not the environment's copy (an adopted env)
    yanked: bool = False  # also ask the lock's indexes whether a locked version is yanked (online, B48)
    index_cache: Path | None = None  # where index listings are kept for ``yanked`` (None: none)


def _generation(sp: Path) -> Mapping[str, Any]:
    """``.envforge/generation.json`` (what the build recorded), or {} when there is none.

    :raises InputError: not a regular file (a FIFO, a device, a directory), larger than 1 MiB, or
        not JSON; the message names the file, the hint how to rebuild.
    """
    path = StateDir(sp).generation_record
    try:
        raw = read_state(path, what="generation record", limit=SMALL_LIMIT, hint=lambda: rebuild_hint(sp))
    except FileNotFoundError:
        return {}
    data: Any = parse_json(raw, label=str(path))
    return data if isinstance(data, Mapping) else {}


def _project_lock(project: Project | None, gen: Mapping[str, Any], lock_tool: Mapping[str, Any]) -> Path | None:
    if project is None:
        return None
    recipe, variant = gen.get("recipe") or lock_tool.get("recipe"), gen.get("variant") or lock_tool.get("variant")
    if gen.get("lock"):
        p = Path(gen["lock"])
        return p if p.is_absolute() else project.root / p
    return project.lock_path(f"{recipe}-{variant}") if recipe and variant else None


def verify(env: Environment, project: Project | None, options: VerifyOptions) -> VerifyReport:
    """Verify ``env`` at ``options.levels``; every finding at once.

    :raises InputError: unknown level, or the environment has no recorded lock (exit 2).
    :raises envforge.core.probe.ProbeError: the environment's interpreter cannot run (exit 3).
    """
    given = check_levels(options.levels or ())
    now = options.clock or time.monotonic
    start = now()
    sp = env.site_packages
    lock = read_env_lock(options.lock, given=True) if options.lock else read_env_lock(StateDir(sp).lock_copy)
    gen = _generation(sp)
    recipe = _recipe_data(project, gen)
    levels = given or check_levels(_recipe_levels(recipe))
    if options.yanked and "static" not in levels:  # the recipe's [verify] levels: never a check silently left out
        raise InputError(
            "--yanked adds the check `yanked` to the static level, which does not run here",
            hint=f"add static: --level static,{','.join(levels)}",
        )
    findings: list[Finding] = []
    checks: list[Check] = []
    notes: list[str] = []
    python = None
    if "static" in levels:
        st = run_static(
            StaticInputs(
                site_packages=sp,
                python=env.python,
                lock=lock,
                patchsets_dir=project.patchsets_dir if project else None,
                project_lock=_project_lock(project, gen, lock.envforge),
                uv_cache=options.uv_cache,
                base_env=options.base_env,
                deep=options.deep,
                servers=recipe_servers(recipe.get("verify", {})),
            )
        )
        findings += st.findings
        checks += st.checks
        notes += st.notes
        python = st.python
        if options.yanked:  # online: the lock's indexes asked (B48)
            from envforge.verify.yanks import yanked_check  # lazy: httpx2, only with --yanked

            found_y, check_y, notes_y = yanked_check(lock, options.index_cache)
            findings += found_y
            checks.append(check_y)
            notes += notes_y
        if env.path.is_symlink():  # an envforge generation link: who still runs another generation
            found_p, check_p = _processes(env.path, options.proc)
            findings += found_p
            checks.append(check_p)
    gpu_data: Mapping[str, Any] | None = None
    measurements: dict[str, Any] = {}
    target = dict(lock.envforge.get("target", {}))
    if "gpu" in levels:
        g = run_gpu(
            GpuInputs(
                python=env.python,
                lock=lock,
                target=target,
                profiles=_profiles(recipe, sp),
                target_from_machine=options.target_from_machine,
                base_env=options.base_env,
                sizes=options.allreduce_sizes,
                step_timeout_s=options.step_timeout_s,
                installed_profile=(installed_profile(sp) or {}).get("profile"),
                site_packages=sp,
                required=options.levels is not None,
            )
        )
        findings += g.findings
        checks += g.checks
        notes += g.notes
        measurements = dict(g.measurements)
        gpu_data = g.machine
        target = dict(g.target)
    if "drafter" in levels:
        found_d, check_d = _drafter(recipe, options, project.root / "drafters" if project else None, lock, sp)
        findings += found_d
        checks.append(check_d)
    fp = fingerprint_of(sp, gpu=_fp_gpu(gpu_data or nvidia_proc_facts(options.proc), python))
    asked = given if options.levels is not None else tuple(lv for lv in levels if lv != "gpu")
    findings += _nothing_checked(asked, checks, findings)
    findings = _name_commands(
        findings,
        env,
        project,
        gen.get("recipe") or lock.envforge.get("recipe"),
        gen.get("variant") or lock.envforge.get("variant"),
    )
    entries = acceptances_from(recipe, gen.get("variant") or lock.envforge.get("variant"))
    if not options.yanked:  # `yanked` is looked for only with --yanked: its entries are not unmatched without
        entries = tuple(e for e in entries if e.kind != "yanked")
    failing, accepted = apply_acceptances(
        findings, entries, levels=levels, today=options.today or datetime.date.today()
    )
    checks = _settled(checks, failing, [a.finding for a in accepted])
    if entries:
        lapsed = [f for f in failing if f.kind.startswith("acceptance-")]
        checks.append(
            Check(
                "accept",
                "static",
                "findings" if lapsed else "ok",
                f"{counted(len(entries), '[[verify.accept]] entry', '[[verify.accept]] entries')}, {counted(len(accepted), 'finding')} accepted",
            )
        )
    return VerifyReport(
        environment=str(env.path),
        levels=tuple(lv for lv in LEVELS if lv in levels),
        fingerprint=fp,
        findings=tuple(failing),
        checks=tuple(checks),
        notes=tuple(notes),
        measurements=measurements,
        target=target,
        elapsed_s=round(now() - start, 3),
        accepted=tuple(accepted),
    )


def _settled(checks: list[Check], failing: list[Finding], accepted: list[Finding]) -> list[Check]:
    """A check whose every finding a ``[[verify.accept]]`` entry accepted is ``ok`` (its detail
    says so): the JUnit report and the exit code then agree (shared case test_junit_accepted)."""

    def mine(c: Check, found: list[Finding]) -> bool:
        return any(f.level == c.level and belongs_to(f.kind, c.name) for f in found)

    return [
        replace(c, status="ok", detail=f"{c.detail}; every finding accepted".lstrip("; "))
        if c.status == "findings" and mine(c, accepted) and not mine(c, failing)
        else c
        for c in checks
    ]


def _processes(link: Path, proc: Path) -> tuple[list[Finding], Check]:
    """``stale-process`` findings for processes still running from a generation of ``link`` that is
    no longer live, or started through it before its last flip (:mod:`envforge.env.processes`, B39);
    skipped without a Linux ``/proc``."""
    if not can_scan(proc):
        return [], Check("processes", "static", "skipped", f"no Linux {proc} to read processes from")
    live = link.resolve().name
    found = [
        Finding(
            "stale-process",
            f"pid {p.pid}",
            f"every process of {link.name} runs the live generation {live}",
            f"{p.command}: {p.why}" + (f" (native code loaded from {', '.join(p.loaded)})" if p.loaded else ""),
            f"restart it from envs/.generations/{link.name}/{live}/bin/python (a server pinned to its "
            "generation keeps importing from it after a build or rollback)",
        )
        for p in stale_processes(link, proc=proc)
    ]
    return found, Check(
        "processes",
        "static",
        "findings" if found else "ok",
        f"{counted(len(found), 'process')} of another generation" if found else f"none outside {live}",
    )


def _nothing_checked(asked: tuple[Level, ...], checks: list[Check], findings: list[Finding]) -> list[Finding]:
    """A ``nothing-to-check`` finding per level asked for (``--level``, or the recipe's ``[verify]
    levels`` except ``gpu``, which a CPU machine skips by design) whose checks were all skipped and
    that found nothing: a run asked to prove something must not pass having proved nothing."""
    out = []
    for lv in asked:
        if any(c.level == lv and c.status != "skipped" for c in checks) or any(f.level == lv for f in findings):
            continue
        why = "; ".join(c.detail for c in checks if c.level == lv) or "no check of this level applies"
        out.append(
            Finding(
                "nothing-to-check",
                f"--level {lv}",
                f"at least one {lv} check that runs",
                why,
                f"give the {lv} level something to check (for drafter: a [verify.drafter] table with "
                "repo and revision in the recipe), or do not ask for it",
                level=lv,
            )
        )
    return out


def _name_commands(
    findings: list[Finding], env: Environment, project: Project | None, recipe: Any, variant: Any
) -> list[Finding]:
    """Complete the envforge commands in the findings' fixes for this environment: the checks write
    `` `envforge apply-patches` ``, `` `envforge build` `` and `` `envforge lock` ``, which act on the
    default environment; the user needs ``apply-patches <env>`` and ``build <recipe> --variant <v>``."""
    named = project is not None and env.path.parent.absolute() == project.envs_dir.absolute()
    target = env.path.name if named else str(env.path)
    rv = f" {recipe} --variant {variant}" if recipe and variant else ""
    words = {
        "`envforge apply-patches`": f"`envforge apply-patches {target}`",
        "`envforge build`": f"`envforge build{rv}`",
        "`envforge lock`": f"`envforge lock{rv}`",
    }

    def fix(text: str) -> str:
        for old, new in words.items():
            text = text.replace(old, new)
        return text

    return [replace(f, fix=fix(f.fix)) for f in findings]


def _recipe_data(project: Project | None, gen: Mapping[str, Any]) -> Mapping[str, Any]:
    """The parsed recipe the generation was built from (its ``[verify]`` levels, drafter and
    ``[[verify.accept]]`` entries), or ``{}`` when there is no project or the file is gone.

    :raises InputError: the recipe exists but is invalid. Verify never drops the levels and
        acceptances a recipe asks for because one of its keys is wrong: it would say "clean"
        without running the checks the recipe requires.
    """
    if project is None or not gen.get("recipe"):
        return {}
    try:
        path = project.recipe_path(str(gen["recipe"]))
    except InputError:  # the recipe was removed or renamed since the build
        return {}
    if not path.is_file():
        return {}
    return load_recipe(path).data


def _recipe_levels(recipe: Mapping[str, Any]) -> tuple[str, ...]:
    """The recipe's ``[verify] levels`` that verify runs (``smoke`` belongs to ``envforge bench``)."""
    wanted = recipe.get("verify", {}).get("levels", [])
    return tuple(lv for lv in wanted if lv in LEVELS) or ("static",)


def _drafter(
    recipe: Mapping[str, Any], options: VerifyOptions, local_root: Path | None, lock: EnvLock, site_packages: Path
) -> tuple[list[Finding], Check]:
    """The recipe's ``[verify.drafter]`` checks through :func:`envforge.drafter.drafter_checks`
    (offline: the copy fetched under ``local_root``, ``drafters/`` of the project), for the engine
    versions ``lock`` installs and the hooks the installed engine code has
    (:mod:`envforge.verify.drafterscope`)."""
    settings = recipe.get("verify", {}).get("drafter")
    if not settings:
        return [], Check("drafter", "drafter", "skipped", "the recipe has no [verify.drafter] table")
    scope = drafter_scope(lock)
    issues = drafter_checks(
        settings,
        cache_dir=options.hub_cache,
        endpoint=options.hub_endpoint,
        local_root=local_root,
        engines=scope.engines,
        patched_for=lambda arch: installed_delegations(site_packages, arch),
    )
    found = [
        Finding(
            i.kind,
            i.subject + (f" ({', '.join(i.engines)})" if i.engines else ""),
            i.expected,
            i.actual,
            i.fix,
            level="drafter",
        )
        for i in issues
    ]
    known = ", ".join(f"{f.engine} {f.version}" for f in ENGINE_FACTS)
    found += [
        Finding(
            "drafter-engine-unproven",
            f"{name} {version}",
            f"an engine version envforge has facts for ({known})",
            f"{name} {version}: the auxiliary-layer verdict is not proven for it",
            "check the drafter on that version by hand (or serve a version envforge has facts for); "
            "docs/drafters.md, Engine versions",
            level="drafter",
        )
        for name, version in scope.unproven
    ]
    offline = (
        f" (offline, HF_HUB_OFFLINE: the copy recorded under {local_root}, re-hashed)"
        if offline_mode() and local_root is not None
        else ""
    )
    return found, Check(
        "drafter", "drafter", "findings" if found else "ok", f"{settings['repo']}@{settings['revision']}{offline}"
    )


def nvidia_proc_facts(proc: Path) -> dict[str, Any]:
    """Driver version and GPU models from the NVIDIA kernel module's ``/proc`` files, without
    starting any interpreter (so a static-only report still names GPU and driver); {} without them.

    Reads ``driver/nvidia/version`` (``NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04 ...``)
    and ``driver/nvidia/gpus/*/information`` (``Model: NVIDIA H200``).
    """
    base = proc / "driver" / "nvidia"
    try:
        words = (base / "version").read_text().split("Kernel Module", 1)[1].split()
    except (OSError, IndexError):
        return {}
    gpus: list[dict[str, Any]] = []
    for info in sorted(base.glob("gpus/*/information")):
        model = next(
            (line.split(":", 1)[1].strip() for line in info.read_text().splitlines() if line.startswith("Model:")),
            "unknown",
        )
        gpus.append({"index": len(gpus), "name": model, "capability": None})
    return {"driver": words[0] if words else None, "gpus": gpus}


def _fp_gpu(machine: Mapping[str, Any] | None, python: str | None) -> dict[str, Any]:
    m = dict(machine or {})
    gpus = m.get("gpus") or []
    out: dict[str, Any] = {"python": python or m.get("python"), "driver": m.get("driver")}
    if gpus:
        out.update(name=gpus[0]["name"], count=len(gpus), capability=gpus[0]["capability"])
    return out


def _profiles(recipe: Mapping[str, Any], sp: Path) -> dict[str, dict[str, str]]:
    """Env profiles to measure: the recipe's ``[env.*]`` tables (each merged over ``[env.default]``),
    or only the installed one when the recipe cannot be found."""
    profiles: Mapping[str, Mapping[str, str]] = recipe.get("env", {})
    base = dict(profiles.get("default", {}))
    out = {name: {**base, **env} for name, env in profiles.items()}
    prof = installed_profile(sp)
    if prof is not None:
        out.setdefault(str(prof.get("profile")), dict(prof.get("env", {})))
    return out
