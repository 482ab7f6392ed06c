"""GPU verify: the machine against the recipe target and the environment, through probes.

Every step is its own probe (``gpu_probe.py``) in the environment's interpreter under a hard
timeout (:func:`envforge.core.probe.run_probe` kills the whole process group), so a hung NCCL call
becomes an ``allreduce-timeout`` finding, never a hung verify (field case B12).

Driver floors are NVIDIA's "CUDA Toolkit and Corresponding Driver Versions" table (Linux x86_64,
GA releases) in the CUDA Toolkit release notes
(https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/, Table 3), and the minimum driver for
CUDA minor version compatibility per major (same page, Table 2).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envforge.core.probe import ProbeError, ProbeTimeout, run_probe
from envforge.verify.findings import Check, Finding
from envforge.verify.inventory import EnvLock
from envforge.verify.nccllibrary import nccl_library_findings
from envforge.verify.static import probe_script
from envforge.verify.topology import interconnect_check

__all__ = ["DRIVER_FLOORS", "EAGLE_STEP_BYTES", "GpuInputs", "GpuResult", "driver_floor", "run_gpu"]

#: CUDA toolkit (major.minor, GA) -> minimum Linux x86_64 driver (NVIDIA release notes, Table 3).
DRIVER_FLOORS: Mapping[str, str] = {
    "11.8": "520.61.05",
    "12.0": "525.60.13",
    "12.1": "530.30.02",
    "12.2": "535.54.03",
    "12.3": "545.23.06",
    "12.4": "550.54.14",
    "12.5": "555.42.02",
    "12.6": "560.28.03",
    "12.8": "570.26",
    "12.9": "575.51.03",
    "13.0": "580.65.06",
    "13.1": "590.44.01",
}
#: Minimum driver for CUDA minor version compatibility, per CUDA major (release notes, Table 2).
MINOR_COMPAT_FLOORS: Mapping[int, str] = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}

#: One EAGLE verify step's all-reduce: 3 tokens x 7168 hidden x 2 bytes (bf16).
EAGLE_STEP_BYTES = 3 * 7168 * 2
#: All-reduces per EAGLE verify step of Kimi-K2.5 at tensor parallel 8 (61 layers x 2), issue 9.
ALLREDUCES_PER_STEP = 122
#: The verify step time the field measured, ms (issue 9).
FIELD_VERIFY_STEP_MS = 30.0
#: A profile slower than this factor of NCCL's default at any size is a finding.
SLOWER_FACTOR = 1.2
_NATIVE = ("torch", "triton", "flashinfer", "sgl_kernel", "cupy")
_DEFAULT = "nccl-default"


@dataclass(frozen=True, slots=True)
class GpuInputs:
    """The env's ``python``, its lock, the recipe ``target`` (``compute-capability``, ``gpus``...),
    the env ``profiles`` to measure (name -> variables), the installed profile name, and limits.
    ``site_packages``: the env's purelib, where the lock's libnccl lives (``nvidia/nccl/lib``).
    ``required``: the user asked for the gpu level explicitly (``--level gpu``), so a machine
    without a GPU is a finding (``no-gpu``), not a skip."""

    python: Path
    lock: EnvLock
    target: Mapping[str, Any]
    profiles: Mapping[str, Mapping[str, str]]
    target_from_machine: bool = False
    base_env: Mapping[str, str] = field(default_factory=dict)
    sizes: tuple[int, ...] = (EAGLE_STEP_BYTES, 1 << 20, 16 << 20)
    step_timeout_s: float = 120.0
    installed_profile: str | None = None
    required: bool = False
    site_packages: Path | None = None


@dataclass(frozen=True, slots=True)
class GpuResult:
    """Findings, checks and notes of the GPU level; ``machine`` the info probe's JSON;
    ``measurements`` the op and all-reduce figures; ``target`` the target checked against."""

    findings: tuple[Finding, ...]
    checks: tuple[Check, ...]
    notes: tuple[str, ...]
    machine: Mapping[str, Any]
    measurements: Mapping[str, Any]
    target: Mapping[str, Any]


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split(".") if p.isdigit())


def driver_floor(cuda: str) -> str | None:
    """Minimum driver for CUDA ``major.minor`` (Table 3), or the major's minor-compat floor, or None."""
    mm = ".".join(cuda.split(".")[:2])
    if mm in DRIVER_FLOORS:
        return DRIVER_FLOORS[mm]
    return MINOR_COMPAT_FLOORS.get(int(cuda.split(".")[0]))


class _Out:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.checks: list[Check] = []
        self.notes: list[str] = []
        self.measurements: dict[str, Any] = {}

    def add(self, name: str, found: list[Finding], detail: str = "") -> None:
        self.findings.extend(found)
        self.checks.append(Check(name, "gpu", "findings" if found else "ok", detail))

    def skip(self, name: str, why: str) -> None:
        self.checks.append(Check(name, "gpu", "skipped", why))

    def result(self, machine: Mapping[str, Any], target: Mapping[str, Any]) -> GpuResult:
        return GpuResult(
            tuple(self.findings), tuple(self.checks), tuple(self.notes), machine, self.measurements, target
        )


def _probe(inp: GpuInputs, cfg: Mapping[str, Any], timeout_s: float | None = None) -> Any:
    return run_probe(
        inp.python,
        probe_script("gpu_probe.py"),
        args=[json.dumps(cfg)],
        env=dict(inp.base_env),
        timeout_s=timeout_s or inp.step_timeout_s,
    ).data


def _f(kind: str, subject: str, expected: str, actual: str, fix: str) -> Finding:
    return Finding(kind, subject, expected, actual, fix, level="gpu")


def run_gpu(inp: GpuInputs) -> GpuResult:
    """Run the GPU checks. On a machine without NVIDIA GPUs every check is skipped with the reason,
    or, when ``inp.required``, the ``gpu`` check has a ``no-gpu`` finding."""
    out = _Out()
    try:
        machine = _probe(inp, {"mode": "info"})
    except ProbeError as exc:
        out.add(
            "gpu-info",
            [
                _f(
                    "gpu-probe-failed",
                    str(inp.python),
                    "the GPU info probe prints JSON",
                    str(exc).splitlines()[0],
                    "run the environment's python by hand and read the error",
                )
            ],
        )
        return out.result({}, dict(inp.target))
    out.measurements["machine"] = machine
    if not _usable(machine, out, inp.required):
        return out.result(machine, dict(inp.target))
    target = _target(inp, machine, out)
    matches = _hardware(inp, machine, target, out)
    _interconnect(inp, target, out)
    _software(inp, machine, out)
    if not matches:
        why = "the GPUs are not the recipe target; pass --target-from-machine to run them against this machine"
        out.skip("native-ops", why)
        out.skip("allreduce", why)
        return out.result(machine, target)
    _ops(inp, out)
    _allreduce(inp, machine, out)
    return out.result(machine, target)


def _usable(machine: Mapping[str, Any], out: _Out, required: bool = False) -> bool:
    """GPUs present and usable from the environment's torch; else a skip or a finding."""
    if not machine.get("devices_present"):
        why = "no NVIDIA GPU on this machine (no /dev/nvidiactl, no NVML driver)"
        if required:
            out.add(
                "gpu",
                [
                    _f(
                        "no-gpu",
                        "gpu level",
                        "an NVIDIA GPU (the gpu level was asked for explicitly)",
                        why,
                        "run `envforge verify --level gpu` on the GPU machine the recipe targets; here, "
                        "leave out --level gpu (the recipe's default levels skip the gpu level without a GPU)",
                    )
                ],
            )
        else:
            out.skip("gpu", why)
        return False
    if not machine.get("cuda_available") or not machine.get("gpus"):
        why = machine.get("torch_error") or "torch.cuda.is_available() is False or no device is visible"
        out.add(
            "cuda",
            [
                _f(
                    "cuda-unavailable",
                    "torch",
                    "CUDA usable from the environment's torch",
                    why,
                    "install the locked torch build for this CUDA variant (`envforge build`) and check the driver",
                )
            ],
        )
        return False
    out.add("cuda", [], f"torch {machine['torch']}, CUDA runtime {machine['cuda_runtime']}, NCCL {machine.get('nccl')}")
    return True


def _target(inp: GpuInputs, machine: Mapping[str, Any], out: _Out) -> dict[str, Any]:
    target = dict(inp.target)
    if not inp.target_from_machine:
        return target
    gpus = machine["gpus"]
    mine = {"gpu": gpus[0]["name"], "compute-capability": gpus[0]["capability"], "gpus": len(gpus)}
    out.notes.append(
        "target taken from this machine (--target-from-machine): "
        f"{len(gpus)}x {mine['gpu']}, capability {mine['compute-capability']}; the recipe says "
        f"{target.get('gpus', '?')}x {target.get('gpu', '?')}, capability "
        f"{target.get('compute-capability', '?')}"
    )
    return {**target, **mine}


def _hardware(inp: GpuInputs, machine: Mapping[str, Any], target: Mapping[str, Any], out: _Out) -> bool:
    gpus = machine["gpus"]
    want_n, want_cc = target.get("gpus"), target.get("compute-capability")
    fix_target = (
        "run on the recipe's target hardware, or pass --target-from-machine to check the rest against this machine"
    )
    count = (
        []
        if want_n is None or want_n == len(gpus)
        else [
            _f(
                "gpu-count",
                "visible GPUs",
                f"{want_n} ({target.get('gpu', 'recipe target')})",
                str(len(gpus)),
                fix_target,
            )
        ]
    )
    out.add("gpu-count", count, f"{len(gpus)} visible")
    caps = [
        _f(
            "capability",
            f"GPU {g['index']} {g['name']}",
            f"{want_cc} ({target.get('gpu', 'recipe target')})",
            g["capability"],
            fix_target,
        )
        for g in gpus
        if want_cc and g["capability"] != want_cc
    ]
    want_model = target.get("gpu")
    models = [
        _f(
            "gpu-model",
            f"GPU {g['index']} {g['name']}",
            f"{want_model} (recipe target)",
            g["name"],
            "run on the recipe's target GPU: its memory and bandwidth size the recipe's serving flags "
            "(--mem-fraction-static, batch sizes), or pass --target-from-machine",
        )
        for g in gpus
        if isinstance(want_model, str) and not gpu_model_matches(want_model, g["name"])
    ]
    out.add("capability", caps + models, ", ".join(f"GPU {g['index']}: {g['capability']}" for g in gpus))
    arch = machine.get("arch_list", [])
    wanted = {g["capability"]: f"GPU {g['index']} {g['name']}" for g in gpus}
    if want_cc:
        wanted.setdefault(want_cc, f"recipe target {target.get('gpu', '')}".strip())
    bad = [
        _f(
            "arch-list",
            who,
            f"kernels for sm_{cc.replace('.', '')} in torch.cuda.get_arch_list()",
            ", ".join(arch) or "(empty)",
            "install a torch build compiled for this architecture (a newer CUDA variant)",
        )
        for cc, who in wanted.items()
        if not _arch_ok(cc, arch)
    ]
    out.add("arch-list", bad, " ".join(arch))
    return not count and not caps


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def gpu_model_matches(target: str, name: str) -> bool:
    """Whether the GPU ``name`` the driver reports (``NVIDIA H100 80GB HBM3``) is the recipe's
    ``[target] gpu`` (``H200``, ``RTX PRO 6000 Blackwell``): every word of the target, in order,
    among the name's words (case and punctuation ignored). ``H200`` is not ``H100``; ``H100`` is
    ``NVIDIA H100 80GB HBM3`` and ``NVIDIA H100 NVL``."""
    want, have = _tokens(target), _tokens(name)
    it = iter(have)
    return bool(want) and all(w in it for w in want)


def _interconnect(inp: GpuInputs, target: Mapping[str, Any], out: _Out) -> None:
    try:
        topo = _probe(inp, {"mode": "topology"})
    except ProbeError as exc:
        topo = {"source": None, "gpus": [], "links": {}, "tried": [f"topology probe: {str(exc).splitlines()[0]}"]}
    out.measurements["topology"] = topo
    status, found, detail = interconnect_check(target.get("interconnect"), topo)
    if status == "skipped":
        out.skip("interconnect", detail)
    else:
        out.add("interconnect", found, detail)


def _arch_ok(cc: str, arch: list[str]) -> bool:
    """A cubin for the same major and a lower or equal minor, or PTX (compute_XY) <= cc, runs."""
    major, minor = (int(p) for p in cc.split("."))
    for a in arch:
        kind, _, num = a.partition("_")
        digits = "".join(ch for ch in num if ch.isdigit())
        if len(digits) < 2:
            continue
        amaj, amin = int(digits[:-1]), int(digits[-1])
        if num.endswith(("a", "f")) and (amaj, amin) != (major, minor):
            continue
        if kind == "sm" and amaj == major and amin <= minor:
            return True
        if kind == "compute" and (amaj, amin) <= (major, minor):
            return True
    return False


def _software(inp: GpuInputs, machine: Mapping[str, Any], out: _Out) -> None:
    runtime = machine.get("cuda_runtime") or ""
    want = inp.lock.envforge.get("cuda")
    if not want:
        out.skip("cuda-runtime", "the lock names no CUDA version ([tool.envforge] cuda)")
    else:
        same = runtime.split(".")[:2] == str(want).split(".")[:2]
        out.add(
            "cuda-runtime",
            []
            if same
            else [
                _f(
                    "cuda-runtime",
                    "torch.version.cuda",
                    f"{want} (variant)",
                    runtime or "none",
                    "install the torch build of the variant's CUDA (`envforge build`)",
                )
            ],
            f"torch CUDA {runtime}",
        )
    driver, floor = machine.get("driver"), driver_floor(runtime) if runtime else None
    source = f"CUDA {runtime}, NVIDIA release notes"
    recipe_min = inp.target.get("cuda-driver-min")  # [target] cuda-driver-min: the recipe's own floor
    if isinstance(recipe_min, str) and recipe_min.strip() and (floor is None or _vtuple(recipe_min) > _vtuple(floor)):
        floor, source = recipe_min.strip(), "the recipe's [target] cuda-driver-min"
    if not driver or not floor:
        out.skip("driver-floor", f"driver {driver or 'unknown'}, no floor known for CUDA {runtime or '?'}")
    else:
        low = _vtuple(driver) < _vtuple(floor)
        found = (
            [
                _f(
                    "driver-floor",
                    "NVIDIA driver",
                    f">= {floor} ({source})",
                    driver,
                    "upgrade the driver, or use a variant built for an older CUDA",
                )
            ]
            if low
            else []
        )
        out.add("driver-floor", found, f"driver {driver} >= {floor} ({source})")
    libs = machine.get("nccl_libraries") or {}
    loaded = list(libs.get("loaded", []))
    out.add(
        "nccl",
        nccl_library_findings(libs, inp.site_packages),
        f"NCCL {machine.get('nccl') or 'unknown'}" + (f" loaded from {', '.join(loaded)}" if loaded else ""),
    )


def _ops(inp: GpuInputs, out: _Out) -> None:
    rows = []
    found = []
    for pkg in _NATIVE:
        try:
            r = _probe(inp, {"mode": "op", "package": pkg})
        except ProbeTimeout as exc:
            r = {"package": pkg, "ok": False, "error": str(exc).splitlines()[0]}
        except ProbeError as exc:
            r = {"package": pkg, "ok": False, "error": str(exc).splitlines()[0]}
        if not r["ok"] and r.get("error", "").startswith("ModuleNotFoundError") and f"'{pkg}'" in r["error"]:
            continue  # not installed: nothing to run
        rows.append(r)
        if not r["ok"]:
            found.append(
                _f(
                    "native-op",
                    pkg,
                    "a small operation runs",
                    r["error"],
                    "install the locked build of this package for this GPU and CUDA (`envforge build`)",
                )
            )
    out.measurements["native_ops"] = rows
    out.add("native-ops", found, ", ".join(f"{r['package']}: {'ok' if r['ok'] else 'failed'}" for r in rows))


def _nccl_vars(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(("NCCL_", "TORCH_NCCL_"))}


def _allreduce(inp: GpuInputs, machine: Mapping[str, Any], out: _Out) -> None:
    world = len(machine["gpus"])
    if world < 2:
        out.skip("allreduce", f"{world} GPU visible: an all-reduce needs 2 or more")
        return
    keys = sorted({k for env in inp.profiles.values() for k in env})
    runs: dict[str, Mapping[str, Any]] = {}
    before = len(out.findings)
    plan: dict[str, Mapping[str, str]] = {_DEFAULT: {}}
    plan.update({n: e for n, e in sorted(inp.profiles.items()) if _nccl_vars(e)})
    for name, env in plan.items():
        cfg = {
            "mode": "allreduce",
            "world": world,
            "sizes": list(inp.sizes),
            "set": dict(env),
            "unset": keys if name == _DEFAULT else [],
            "deadline_s": max(1.0, min(inp.step_timeout_s - 10, inp.step_timeout_s * 0.8)),
        }
        runs[name] = _one_allreduce(inp, cfg, machine, name, out)
    same = [n for n, e in inp.profiles.items() if not _nccl_vars(e)]
    if same:
        out.notes.append(f"profiles {', '.join(sorted(same))} set no NCCL variables: NCCL's default applies")
    failed = out.findings[before:]
    del out.findings[before:]
    out.measurements["allreduce"] = _table(runs, world, machine, inp.sizes)
    out.add("allreduce", failed + _slower(runs, inp), f"world size {world}, sizes {list(inp.sizes)} bytes")


def _one_allreduce(
    inp: GpuInputs, cfg: Mapping[str, Any], machine: Mapping[str, Any], name: str, out: _Out
) -> Mapping[str, Any]:
    vars_ = _nccl_vars({**{k: v for k, v in inp.base_env.items() if k not in cfg["unset"]}, **cfg["set"]})
    try:
        r: Mapping[str, Any] = _probe(inp, cfg, timeout_s=inp.step_timeout_s)
    except ProbeError as exc:
        timed = isinstance(exc, ProbeTimeout)
        r = {"timed_out": timed, "error": str(exc).splitlines()[0], "env": vars_}
    subject = f"all-reduce, profile {name}, world size {cfg['world']}"
    detail = f"NCCL {machine.get('nccl')}, variables {r.get('env', vars_)}"
    if r.get("timed_out"):
        out.findings.append(
            _f(
                "allreduce-timeout",
                subject,
                f"finishes within {inp.step_timeout_s:g} s",
                f"hung and was killed; {detail}",
                "try NCCL_P2P_DISABLE=1 (B12), another NCCL version, or check the GPUs' links",
            )
        )
    elif r.get("error") or any(r.get("returncodes", [])) or not all(row["ok"] for row in r.get("rows", [])):
        why = r.get("error") or f"rank exit codes {r.get('returncodes')}; {r.get('logs')}"
        if r.get("rows") and not all(row["ok"] for row in r["rows"]):
            why = "wrong sum at " + ", ".join(str(row["bytes"]) for row in r["rows"] if not row["ok"])
        out.findings.append(
            _f(
                "allreduce-failed",
                subject,
                "correct sums at every size",
                f"{why}; {detail}",
                "run with NCCL_DEBUG=INFO to see why; try NCCL_P2P_DISABLE=1 (B12)",
            )
        )
    return r


def _table(
    runs: Mapping[str, Mapping[str, Any]], world: int, machine: Mapping[str, Any], sizes: tuple[int, ...]
) -> dict[str, Any]:
    profiles = {
        name: {
            "env": dict(r.get("env", {})),
            "us": {str(row["bytes"]): row["us"] for row in r.get("rows", [])},
            "us_runs": {str(row["bytes"]): row["us_runs"] for row in r.get("rows", [])},
            "iters": {str(row["bytes"]): row["iters"] for row in r.get("rows", [])},
        }
        for name, r in runs.items()
    }
    table: dict[str, Any] = {
        "world_size": world,
        "nccl": machine.get("nccl"),
        "dtype": "bfloat16",
        "sizes_bytes": list(sizes),
        "method": "per-call latency: CUDA events on rank 0 around N back-to-back all_reduce calls after 10 "
        "warm-ups, median of 5 repetitions, one process per GPU, NCCL backend",
        "profiles": profiles,
    }
    base = profiles.get(_DEFAULT, {}).get("us", {}).get(str(EAGLE_STEP_BYTES))
    if base is not None:
        table["per_step_budget"] = {
            "allreduces_per_step": ALLREDUCES_PER_STEP,
            "bytes_each": EAGLE_STEP_BYTES,
            "by_profile_ms": {
                n: round(ALLREDUCES_PER_STEP * p["us"][str(EAGLE_STEP_BYTES)] / 1000.0, 3)
                for n, p in profiles.items()
                if str(EAGLE_STEP_BYTES) in p["us"]
            },
            "field_verify_step_ms": FIELD_VERIFY_STEP_MS,
            "world_size": world,
            "note": f"122 all-reduces (61 layers x 2) x the {EAGLE_STEP_BYTES}-byte latency at world size {world}; "
            "the field runs tensor parallel 8 (issue 9)",
        }
    return table


def _slower(runs: Mapping[str, Mapping[str, Any]], inp: GpuInputs) -> list[Finding]:
    base = {row["bytes"]: row["us"] for row in runs.get(_DEFAULT, {}).get("rows", [])}
    out = []
    for name, r in runs.items():
        if name == _DEFAULT or (inp.installed_profile and name != inp.installed_profile):
            continue
        for row in r.get("rows", []):
            ref = base.get(row["bytes"])
            if ref and row["us"] > SLOWER_FACTOR * ref:
                out.append(
                    _f(
                        "env-profile-slower",
                        f"profile {name}, all-reduce {row['bytes']} bytes",
                        f"<= {SLOWER_FACTOR:.2f}x NCCL's default ({ref} us)",
                        f"{row['us']} us ({row['us'] / ref:.2f}x) with {_nccl_vars(r.get('env', {}))}",
                        "use the profile for this interconnect (e.g. [env.nvlink]) or drop these variables",
                    )
                )
    return out
