"""Static verify: the environment against its lock, patch manifest, patchsets and env profile.

No GPU is needed. One probe in the environment's own interpreter (``env_probe.py``) gives the PEP 508
marker environment and what a ``multiprocessing`` spawn child sees of the env profile; everything
else reads files. See docs/verify.md for every finding kind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import copy_context
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge import patching
from envforge.core.errors import EnvforgeError, InputError
from envforge.core.mutex import environment_lock_path, exclusive
from envforge.core.plural import counted
from envforge.core.probe import probe_group, run_probe, stop_running_probes
from envforge.core.state import StateDir
from envforge.env.fingerprint import file_digest
from envforge.env.profile import ServedCommand, check_reach, installed_problems, read_installed
from envforge.installed.editable import editable_install
from envforge.lock.check import integrity_problems
from envforge.lock.model import read_lock
from envforge.patching.planning import editable_message
from envforge.recipe.platforms import host_problem, platform_problem
from envforge.verify.effective import effective_findings
from envforge.verify.findings import Check, Finding
from envforge.verify.inventory import EnvLock, Installed, installed_distributions
from envforge.verify.patched import patch_effect
from envforge.verify.provided import check_provided, provided_rows
from envforge.verify.records import (
    PatchedFile,
    cached_bytecode,
    check_patched_files,
    check_records,
    read_record,
    shared_files_note,
    stale_bytecode,
)
from envforge.installed.sharedlibs import other_major_links
from envforge.verify.startup import (
    StartupScan,
    blocking_startup_files,
    check_outside,
    hook_notes,
    scan_site_dir,
    startup_findings,
)
from envforge.verify.unapplied import out_of_range_findings
from envforge.verify.variables import engine_variable_findings, misread_findings
from envforge.verify.versions import check_cuda_major, check_families, check_torch_builds, check_versions

__all__ = ["StaticInputs", "StaticResult", "installed_profile", "patch_manifest", "probe_script", "run_static"]


@dataclass(frozen=True, slots=True)
class StaticInputs:
    """What static verify reads: the env's ``site_packages`` and ``python``, its lock, where the
    project keeps patchsets and the current lock for this environment, uv's cache, the base process
    environment for probes, whether to hash every file (``deep``), and the servers the recipe starts
    (``[[verify.smoke.servers]]``: what their launcher sets over the profile)."""

    site_packages: Path
    python: Path
    lock: EnvLock
    patchsets_dir: Path | None = None
    project_lock: Path | None = None
    uv_cache: Path | None = None
    base_env: Mapping[str, str] | None = None
    deep: bool = False
    servers: tuple[ServedCommand, ...] = ()


@dataclass(frozen=True, slots=True)
class StaticResult:
    """Findings, checks and notes of the static level; ``python`` the env's version; ``hashed`` = (files, bytes)."""

    findings: tuple[Finding, ...]
    checks: tuple[Check, ...]
    notes: tuple[str, ...]
    python: str | None
    hashed: tuple[int, int]


def probe_script(name: str) -> str:
    """Source text of a probe shipped in this package (``env_probe.py``, ``gpu_probe.py``)."""
    return (resources.files("envforge.verify") / name).read_text(encoding="utf-8")


class _Collector:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.checks: list[Check] = []
        self.notes: list[str] = []

    def add(self, name: str, found: Sequence[Finding], detail: str = "") -> None:
        self.findings.extend(found)
        self.checks.append(Check(name, "static", "findings" if found else "ok", detail))

    def skip(self, name: str, why: str) -> None:
        self.checks.append(Check(name, "static", "skipped", why))


def run_static(inp: StaticInputs) -> StaticResult:
    """Run every static check and return all findings at once.

    The probes in the environment's interpreter (env profile reach, marker environment) run in a
    thread while the file checks run here, so the wall time is the longer of the two. The threads run
    in a copy of the caller's context, so a :func:`envforge.core.probe.deadline` around this call holds
    for them too.

    :raises envforge.core.probe.ProbeError: the environment's interpreter cannot run (exit 3).
    """
    c = _Collector()
    if _wrong_machine(inp, c):  # one finding, not a pile of mismatches from an interpreter that cannot run
        return StaticResult(tuple(c.findings), tuple(c.checks), tuple(c.notes), None, (0, 0))
    sp = inp.site_packages
    _recover_interrupted(sp, c)
    profile = installed_profile(sp)
    expected_env = _expected_env(inp.lock, profile)
    _refuse_blocking_startup(inp)
    with _probe_threads() as pool:
        reach = pool.submit(copy_context().run, _reach, inp, expected_env)
        patched = patch_manifest(sp)
        pycs = [str(p) for p in cached_bytecode(sp, patched)]
        env_probe = pool.submit(copy_context().run, _env_probe, inp, pycs)  # site's start-up code: always asked
        installed = installed_distributions(sp)
        records = {d: read_record(d) for d in installed.values()}
        _stale(inp, c)
        scan = scan_site_dir(sp, records, profile=profile, patched=patched)
        probe: Mapping[str, Any] = env_probe.result()
        found, notes = check_versions(inp.lock, installed, probe.get("markers"), inp.uv_cache, python=inp.python)
        c.notes.extend(notes)
        c.add("versions", found, f"{len(inp.lock.packages)} locked, {len(installed)} installed")
        if rows := provided_rows(inp.lock.envforge):  # only for locks with [provided]: other reports keep their checks
            c.add("provided", *check_provided(inp.python, sp, rows, probe_script("provided_probe.py"), inp.base_env))
        c.add("families", check_families(installed))
        c.add(
            "metadata",
            metadata_findings(inp.lock, installed, probe.get("metadata"), sp),
            f"importlib.metadata: {counted(len(probe.get('metadata') or []), 'distribution')}",
        )
        _cuda(inp.lock, installed, c, sp, records)
        if "torch" in installed:
            c.add("torch-abi", *check_torch_builds(sp, installed, records, probe.get("markers")))
        else:
            c.skip("torch-abi", "torch is not installed")
        found_r, nfiles, nbytes = check_records(
            sp, installed.values(), {p.path: p for p in patched}, deep=inp.deep, records=records
        )
        c.add(
            "record",
            found_r,
            f"{'deep' if inp.deep else 'fast'}: {counted(nfiles, 'file')} hashed, {counted(nbytes, 'byte')}",
        )
        c.add(
            "patched-files",
            check_patched_files(sp, patched) + stale_bytecode(sp, probe.get("bytecode") or {}),
            f"{counted(len(patched), 'patched file')}, {len(pycs)} with cached bytecode",
        )
        shared = shared_files_note(sp, installed.values(), patched)
        if shared:
            c.notes.append(shared)
        _patches(inp, c)
        _startup(sp, scan, probe.get("site") or {}, c)
        c.add("patch-effect", patch_effect(inp.python, sp, inp.lock.envforge, inp.base_env))
        _profile(inp, profile, expected_env, reach.result(), c)
        found_e, notes_e, detail_e = effective_findings(sp, profile, inp.servers, inp.base_env or {})
        c.notes.extend(notes_e)
        c.add("effective-env", found_e, detail_e)
    return StaticResult(tuple(c.findings), tuple(c.checks), tuple(c.notes), probe.get("python"), (nfiles, nbytes))


def _recover_interrupted(sp: Path, c: _Collector) -> None:
    """Roll back a patch write interrupted by a crash (its intent record), under the environment
    lock, before reading any file: the files would otherwise be half patched (issue 18). What it
    did becomes a note; when it cannot, the patch-states check reports why."""
    if not StateDir(sp).patch_intent.exists():
        return
    try:
        with exclusive(environment_lock_path(sp)):
            c.notes.extend(patching.recover(sp))
    except (EnvforgeError, OSError) as exc:
        c.notes.append(f"an interrupted apply-patches was not rolled back: {exc}")


@contextmanager
def _probe_threads() -> Iterator[ThreadPoolExecutor]:
    """Two threads for the probes; on SIGTERM or Ctrl-C (any exception) the probes are killed and the
    threads not waited for, so verify stops at once instead of at the probes' timeouts (N46)."""
    pool = ThreadPoolExecutor(max_workers=2)
    with probe_group() as group:  # the probes submitted with a copy of this context: not another verify's
        try:
            yield pool
        except BaseException:
            stop_running_probes(group)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)


def _refuse_blocking_startup(inp: StaticInputs) -> None:
    """Before the environment's interpreter is started: a FIFO (or device) where it reads
    ``pyvenv.cfg``, a ``.pth`` or ``sitecustomize`` at every start would make each probe hang until
    its timeout (:func:`envforge.verify.startup.blocking_startup_files`).

    :raises InputError: such a file, named with what it is (nothing was started).
    """
    blocking = blocking_startup_files(inp.site_packages, inp.python)
    if blocking:
        shown = ", ".join(f"{path} ({kind})" for path, kind in blocking)
        raise InputError(
            f"the environment's interpreter reads {shown} at every start and would block on it; nothing was run",
            hint="remove it (a start-up file is a regular file), or rebuild the environment: `envforge build`",
        )


def _reach(inp: StaticInputs, expected: Mapping[str, str]) -> Any:
    """envprofile's spawn-child check with the profile variables removed from the caller's env."""
    if not expected:
        return None
    caller = {k: v for k, v in (inp.base_env or {}).items() if k not in expected}
    return check_reach(inp.python, expected, caller_env=caller)


def _env_probe(inp: StaticInputs, pycs: list[str]) -> Mapping[str, Any]:
    result = run_probe(
        inp.python,
        probe_script("env_probe.py"),
        args=[json.dumps({"bytecode": pycs})],
        env=dict(inp.base_env or {}),
        timeout_s=60.0,
    )
    data: Mapping[str, Any] = result.data
    return data


def _startup(sp: Path, scan: StartupScan, site: Mapping[str, Any], c: _Collector) -> None:
    """Code that runs at every interpreter start and that no RECORD owns (B36; :mod:`.startup`):
    in site-packages from the file scan, elsewhere from what the probe's ``site`` ran."""
    outside, found_out = check_outside(sp, site)
    hooks = [*scan.hooks, *outside]
    c.notes.extend(hook_notes(hooks, scan.unowned, sp))
    unowned = sum(h.owner is None for h in hooks)
    c.add(
        "startup",
        startup_findings(scan) + found_out,
        f"{len(hooks)} start-up hooks ({unowned} owned by nothing), {len(scan.unowned)} other unowned files",
    )


def _stale(inp: StaticInputs, c: _Collector) -> None:
    """The env's lock copy and the project's lock are both what ``envforge lock`` wrote
    (``packages-digest``), the project's lock exists, and the env was built from it."""
    fix = "regenerate the lock with `envforge lock` (review the diff), then rebuild with `envforge build`"
    found = [
        Finding("lock-integrity", str(inp.lock.path), "the lock `envforge lock` wrote", p, fix)
        for p in integrity_problems(inp.lock)
    ]
    if inp.project_lock is None:
        c.add("lock-integrity", found)
        c.skip("lock-current", "the environment records no project (verify it from its project to compare locks)")
        return
    if not inp.project_lock.is_file():
        c.add("lock-integrity", found)
        c.add(
            "lock-current",
            [
                Finding(
                    "missing-lock",
                    str(inp.project_lock),
                    "the project's lock for this environment",
                    "no such file",
                    "restore it (`git checkout -- FILE`) or regenerate it with `envforge lock`",
                )
            ],
        )
        return
    try:
        project = read_lock(inp.project_lock)
        found += [
            Finding("lock-integrity", str(inp.project_lock), "the lock `envforge lock` wrote", p, fix)
            for p in integrity_problems(project)
        ]
    except InputError as exc:
        found.append(Finding("lock-integrity", str(inp.project_lock), "a valid lock", exc.message, fix))
    c.add("lock-integrity", found)
    have, want = file_digest(inp.lock.path), file_digest(inp.project_lock)
    stale = (
        []
        if have == want
        else [
            Finding(
                "stale-environment",
                str(inp.project_lock),
                f"the environment built from {want}",
                f"built from {have}",
                "rebuild: `envforge build` (the environment predates the current lock)",
            )
        ]
    )
    c.add("lock-current", stale)


def _wrong_machine(inp: StaticInputs, c: _Collector) -> bool:
    """The lock's platform (``[tool.envforge] inputs.platform``) cannot run on this machine (B27)."""
    plat = inp.lock.envforge.get("inputs", {}).get("platform")
    if not isinstance(plat, str):
        c.skip("platform", "the lock names no platform ([tool.envforge] inputs.platform)")
        return False
    why = platform_problem(plat) or host_problem(plat)
    c.add(
        "platform",
        []
        if why is None
        else [
            Finding(
                "platform",
                plat,
                f"a machine that runs {plat} wheels",
                why,
                "verify on a machine of the lock's platform, or build the variant locked for this machine's platform "
                "(a variant's `platform` key)",
            )
        ],
        plat,
    )
    return why is not None


def _cuda(
    lock: EnvLock,
    installed: Mapping[str, Installed],
    c: _Collector,
    sp: Path,
    records: Mapping[Installed, Sequence[Any]],
) -> None:
    cuda = lock.envforge.get("cuda")
    if not cuda:
        c.skip("cuda-major", "the lock names no CUDA version ([tool.envforge] cuda)")
        return
    accepted = {str(e.get("name")) for e in lock.envforge.get("cuda-exceptions", []) if isinstance(e, Mapping)}
    found = [f for f in check_cuda_major(installed.values(), str(cuda)) if f.subject.split()[0] not in accepted]
    found += _linked(sp, str(cuda), records, accepted)
    c.add("cuda-major", found, f"variant cuda {cuda}" + (f", {len(accepted)} reviewed exceptions" if accepted else ""))


def metadata_findings(lock: EnvLock, installed: Mapping[str, Installed], seen: Any, sp: Path) -> list[Finding]:
    """What ``importlib.metadata`` reports in the environment's interpreter: for each locked
    distribution installed in this site-packages, the first distribution of that name it finds
    (the one ``importlib.metadata.version`` returns) must be that installed dist-info, with its
    version. (The installed version against the lock is the ``versions`` check's.)"""
    if not isinstance(seen, list):
        return []
    first: dict[str, tuple[Any, Any]] = {}
    for row in seen:
        if isinstance(row, list) and len(row) == 3 and isinstance(row[0], str):
            first.setdefault(canonicalize_name(row[0]), (row[1], row[2]))
    out = []
    for name in sorted({canonicalize_name(p.name) for p in lock.packages}):
        dist = installed.get(name)
        if dist is None or name not in first:
            continue
        version, path = first[name]
        same = isinstance(path, str) and os.path.realpath(path) == os.path.realpath(dist.dist_info)
        if version == dist.version and same:
            continue
        out.append(
            Finding(
                "metadata-mismatch",
                f"{dist.name} {dist.version}",
                f"importlib.metadata reads {dist.name} {dist.version} from {dist.dist_info.name} in this site-packages",
                f"it reads {dist.name} {version} from {path if isinstance(path, str) else 'elsewhere'}",
                "remove the other copy's directory from PYTHONPATH or the .pth that adds it (the first "
                "dist-info on sys.path wins), or rebuild (`envforge build`)",
            )
        )
    return out


def _linked(sp: Path, cuda: str, records: Mapping[Installed, Sequence[Any]], accepted: set[str]) -> list[Finding]:
    """A shared object linked against another CUDA major's runtime (B54): its ``DT_NEEDED``
    entries, whatever the wheel's name or label say (:mod:`envforge.installed.sharedlibs`)."""
    owner = {str(e.path): d for d, rows in records.items() for e in rows}
    out = []
    for link in other_major_links(sp, cuda):
        dist = owner.get(link.path)
        if dist is not None and dist.name in accepted:
            continue
        who = f"{dist.name} {dist.version}: " if dist is not None else ""
        major = cuda.split(".", 1)[0]
        out.append(
            Finding(
                "cuda-library",
                f"{who}{link.path}",
                f"CUDA {major} libraries (the variant's CUDA {cuda})",
                f'NEEDED {link.library}, CUDA {link.major}: `import` fails with "{link.library}: cannot '
                "open shared object file\" unless another CUDA runtime is on the loader's path",
                f"install the CUDA {major} build of {dist.name if dist else 'its distribution'} (a +cu{major}x "
                "wheel, or the index that serves it) and re-lock, or list it in the variant's "
                "cuda-exceptions with the reason",
            )
        )
    return out


def patch_manifest(sp: Path) -> list[PatchedFile]:
    """Files envforge patched, from the patch manifest (``.envforge/patches.json``); [] when none."""
    manifest = patching.read_manifest(sp)
    if manifest is None:
        return []
    return [
        PatchedFile(str(f.path), _hex(f.original_sha256), _hex(f.new_sha256), str(f.patchset)) for f in manifest.files
    ]


def _hex(digest: str) -> str:
    return digest.removeprefix("sha256:")


def _patches(inp: StaticInputs, c: _Collector) -> None:
    wanted = list(inp.lock.envforge.get("patchsets", []))
    if not wanted:
        c.skip("patch-states", "the lock names no patchsets")
        return
    if inp.patchsets_dir is None or not inp.patchsets_dir.is_dir():
        c.skip("patch-states", f"no patchsets directory ({inp.patchsets_dir})")
        return
    ids = [p["id"] for p in wanted]
    found: list[Finding] = []
    try:
        patchsets = patching.load_patchsets(inp.patchsets_dir, ids)
        by_id = {p["id"]: p.get("digest") for p in wanted}
        found += [
            Finding(
                "patchset-changed",
                ps.id,
                f"digest {by_id[ps.id]} (recorded in the lock)",
                f"digest {ps.digest}",
                "relock (`envforge lock`) and rebuild, or restore the patchset file",
            )
            for ps in patchsets
            if by_id.get(ps.id) and by_id[ps.id] != ps.digest
        ]
        report = patching.plan(inp.site_packages, patchsets)
    except EnvforgeError as exc:
        found.append(
            Finding(
                "patch-state",
                ", ".join(ids),
                "every operation already-applied",
                exc.message,
                exc.hint or "run `envforge apply-patches` and read its error",
            )
        )
        c.add("patch-states", found)
        return
    editable = _editable(inp.site_packages, patchsets, found)
    found += out_of_range_findings(inp.site_packages, [ps for ps in patchsets if ps.id not in editable])  # B41
    for r in report.results:
        if r.patchset in editable:
            continue
        if r.state in ("applied", "drifted"):
            actual = "not applied (apply would change the file)" if r.state == "applied" else f"drifted: {r.message}"
            found.append(
                Finding(
                    "patch-state",
                    f"{r.patchset}: {r.file} ({r.operation})",
                    "already-applied",
                    actual,
                    "run `envforge apply-patches`"
                    if r.state == "applied"
                    else "undo the edit, or rebuild the environment: `envforge build` (a fresh "
                    "generation, patched from its lock)",
                )
            )
    c.add("patch-states", found, counted(len(report.results), "operation"))


def _editable(sp: Path, patchsets: Sequence[Any], found: list[Finding]) -> set[str]:
    """An ``editable-install`` finding per distribution a locked patchset targets that is installed
    editable (B21); returns the ids of those patchsets (their operations are not judged one by one)."""
    ids: set[str] = set()
    for dist in sorted({ps.distribution for ps in patchsets}):
        ed = editable_install(sp, dist)
        if ed is None:
            continue
        mine = [ps for ps in patchsets if ps.distribution == dist]
        ids |= {ps.id for ps in mine}
        found.append(
            Finding(
                "editable-install",
                f"{ed.distribution} {ed.version}",
                "installed from a wheel into site-packages, where patchsets act",
                f"an editable install from {ed.project} ({', '.join(ps.id for ps in mine)} not applied)",
                editable_message(mine[0], mine[0].files[0], ed, sp).split("Next step: ", 1)[1],
            )
        )
    return ids


def installed_profile(sp: Path) -> Mapping[str, Any] | None:
    """The installed env profile record (``.envforge/env-profile.json``) as a mapping, or None."""
    record = read_installed(sp)
    return record.as_dict() if record is not None else None


def _expected_env(lock: EnvLock, profile: Mapping[str, Any] | None) -> dict[str, str]:
    if "env" in lock.envforge:
        return {str(k): str(v) for k, v in lock.envforge["env"].items()}
    return dict(profile.get("env", {})) if profile else {}


def _profile(
    inp: StaticInputs, profile: Mapping[str, Any] | None, expected: Mapping[str, str], reach: Any, c: _Collector
) -> None:
    if not expected:
        c.skip("env-profile", "the lock sets no env profile variables")
        return
    found: list[Finding] = []
    name = inp.lock.envforge.get("env-profile")
    fix = "reinstall the locked profile: `envforge apply-patches` (or `envforge build`)"
    if profile is None:
        found.append(
            Finding(
                "env-profile",
                "hook",
                f"profile {name or '?'} installed (.envforge/env-profile.json)",
                "no env profile installed",
                fix,
            )
        )
    elif dict(profile.get("env", {})) != dict(expected):
        found.append(
            Finding(
                "env-profile",
                "profile",
                f"{name}: {dict(expected)}",
                f"{profile.get('profile')}: {dict(profile.get('env', {}))}",
                fix,
            )
        )
    for problem in installed_problems(inp.site_packages):
        subject, _, why = problem.partition(": ")
        found.append(Finding("env-profile", Path(subject).name, "the startup hook envforge wrote", why, fix))
    for key in reach.missing:
        seen = reach.seen.get(key)
        found.append(
            Finding(
                "env-profile", key, f"{reach.expected[key]} in a spawned child", "unset" if seen is None else seen, fix
            )
        )
    reviewed = [str(e).split(":", 1)[0] for e in inp.lock.envforge.get("inputs", {}).get("nccl-unknown", [])]
    found += misread_findings(expected, reviewed)
    found += engine_variable_findings(expected, inp.site_packages)
    c.add("env-profile", found, counted(len(expected), "variable"))
