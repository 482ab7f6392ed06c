"""The environment fingerprint: which exact state a verify or bench report was produced in.

Two benchmark results from different states must never be silently compared (the field baseline
drifted 82 -> 89 -> 92.6 tok/s because nobody recorded the state). A fingerprint holds the lock
digest, the patch manifest digest, the env profile and its digest, the Python version, and, where a
GPU probe ran, driver, GPU name, count and compute capability; bench adds the digest of the
effective ``NCCL_*``/``CUDA_*``/profile variables its servers started with (envforge.bench.variables).
``startup_digest`` covers the code Python's ``site`` module runs at every interpreter start from the
environment's site-packages (every ``*.pth`` file, ``sitecustomize``/``usercustomize``), owned by a
distribution or not: a new ``.pth`` changes the fingerprint (field case B36). Digests are defined in
docs/architecture.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.core.fs import sha256_hex
from envforge.core.state import StateDir
from envforge.core.textfile import SMALL_LIMIT, parse_json, read_state
from envforge.env.profile.effective import nccl_conf_digest
from envforge.lock.model import read_lock
from envforge.patching.manifest import rebuild_hint

__all__ = [
    "STARTUP_MODULES",
    "Fingerprint",
    "env_profile_digest",
    "file_digest",
    "fingerprint_of",
    "startup_digest",
    "startup_files",
]

#: The modules ``site`` imports at every interpreter start (the first one found on ``sys.path``).
STARTUP_MODULES = ("sitecustomize", "usercustomize")


def file_digest(path: Path, *, what: str = "file", hint: str | Callable[[], str] | None = None) -> str | None:
    """``sha256:<hex>`` of a file's bytes, or None when it does not exist.

    Read through :func:`envforge.core.textfile.read_state` (64 MiB at most): every file digested here is
    one envforge wrote (a lock, the patch manifest).

    :param what: how an error names the file, e.g. ``"patch manifest"``.
    :param hint: the next step an error gives (see :func:`~envforge.core.textfile.read_state`).
    :raises InputError: not a regular file (a FIFO, a device, a directory), unreadable, or too large.
    """
    try:
        return "sha256:" + sha256_hex(read_state(path, what=what, hint=hint))
    except FileNotFoundError:
        return None


def env_profile_digest(env: Mapping[str, str]) -> str:
    """``sha256:<hex>`` of the canonical JSON of an env profile mapping."""
    blob = json.dumps(dict(env), sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + sha256_hex(blob)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """The state of one environment on one machine. ``None`` means unknown / not probed."""

    lock_digest: str | None
    patch_manifest_digest: str | None
    env_profile: str | None
    env_profile_digest: str | None
    python: str | None = None
    driver: str | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    compute_capability: str | None = None
    platform: str | None = None  # the lock's target platform, e.g. aarch64-manylinux_2_34 (B27)
    effective_env_digest: str | None = None
    startup_digest: str | None = None  # the start-up files of site-packages (:func:`startup_digest`, B36)
    nccl_conf_digest: str | None = None  # NCCL's configuration files in effect (B44; env.profile.effective)

    @property
    def empty(self) -> bool:
        """No environment state is known (no envforge lock: a plain venv, or ``bench --url`` without
        an environment): two such fingerprints are not "the same environment"."""
        return self.lock_digest is None

    def as_dict(self) -> dict[str, Any]:
        """Keys in field order (JSON-able)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        """Inverse of :meth:`as_dict`; unknown keys are ignored, missing ones are None."""
        return cls(**{f.name: data.get(f.name) for f in fields(cls)})

    def describe(self) -> str:
        """One human line, never a raw ``None``: ``lock sha256:…, patches none, profile pcie
        sha256:…, no GPU, driver unknown`` (``gpu not probed`` when no GPU step ran)."""
        profile = "none" if self.env_profile is None else f"{self.env_profile} {self.env_profile_digest or ''}".rstrip()
        if self.gpu_count is None and self.gpu is None:
            gpu = "gpu not probed"
        elif not self.gpu_count:
            gpu = "no GPU"
        else:
            gpu = f"gpu {self.gpu_count}x {self.gpu or 'unknown model'}"
        return (
            f"lock {self.lock_digest or 'none'}, patches {self.patch_manifest_digest or 'none'}, "
            f"profile {profile}, {gpu}, driver {self.driver or 'unknown'}"
        )

    def differences(self, other: Fingerprint) -> list[str]:
        """Human lines ``key: A != B`` for every field that differs, in field order (``unknown``
        for a missing value)."""
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                out.append(f"{f.name}: {'unknown' if a is None else a} != {'unknown' if b is None else b}")
        return out


def fingerprint_of(site_packages: Path, gpu: Mapping[str, Any] | None = None) -> Fingerprint:
    """Fingerprint of the environment whose site-packages is ``site_packages``.

    Reads ``.envforge/pylock.toml``, ``.envforge/patches.json`` and ``.envforge/env-profile.json``
    (docs/architecture.md). ``gpu`` is the GPU probe's JSON (keys ``driver``, ``name``, ``count``,
    ``capability``, ``python``) when one ran.

    :raises InputError: one of those files is not a regular file (a FIFO, a device, a directory),
        is too large, or (the profile record) is not JSON; the message names it.
    """
    state = StateDir(site_packages)
    hint = partial(rebuild_hint, site_packages)
    profile: Mapping[str, Any] = {}
    try:
        raw = read_state(state.profile_record, what="env profile record", limit=SMALL_LIMIT, hint=hint)
    except FileNotFoundError:
        pass
    else:
        found = parse_json(raw, label=str(state.profile_record))
        profile = found if isinstance(found, Mapping) else {}
    g = gpu or {}
    return Fingerprint(
        lock_digest=file_digest(state.lock_copy, what="lock copy", hint=hint),
        patch_manifest_digest=file_digest(state.patch_manifest, what="patch manifest", hint=hint),
        env_profile=profile.get("profile"),
        env_profile_digest=env_profile_digest(profile["env"]) if "env" in profile else None,
        python=g.get("python"),
        driver=g.get("driver"),
        gpu=g.get("name"),
        gpu_count=g.get("count"),
        compute_capability=g.get("capability"),
        platform=_lock_platform(state.lock_copy),
        startup_digest=startup_digest(site_packages),
        nccl_conf_digest=nccl_conf_digest({**profile.get("env", {}), **os.environ}),
    )


def _module_file(name: str, module: str) -> bool:
    """``name`` is a file the import system loads as top-level ``module``: source, sourceless
    bytecode or an extension module (``sitecustomize.cpython-312-x86_64-linux-gnu.so``)."""
    if name in (f"{module}.py", f"{module}.pyc"):
        return True
    return name.startswith(f"{module}.") and name.endswith((".so", ".pyd"))


def startup_files(site_packages: Path) -> tuple[str, ...]:
    """Names, relative to ``site_packages`` and sorted, of its regular files that Python's ``site``
    module runs or reads at every interpreter start: each top-level ``*.pth`` (site reads all of them,
    in name order, and executes their ``import`` lines), and each ``sitecustomize``/``usercustomize``
    module file or package ``__init__`` (:data:`STARTUP_MODULES`). ``()`` when the directory cannot
    be listed. Symlinks are followed; a FIFO or device is never listed."""
    try:
        names = sorted(os.listdir(site_packages))
    except OSError:
        return ()
    out = []
    for name in names:
        path = site_packages / name
        if name.endswith(".pth") or any(_module_file(name, m) for m in STARTUP_MODULES):
            if path.is_file():
                out.append(name)
        elif name in STARTUP_MODULES and path.is_dir():
            out += [
                f"{name}/{init}"
                for init in sorted(os.listdir(path))
                if _module_file(init, "__init__") and (path / init).is_file()
            ]
    return tuple(out)


def startup_digest(site_packages: Path) -> str | None:
    """``sha256:<hex>`` of the canonical JSON (``sort_keys``, compact separators) of
    ``{name: "sha256:<hex> of its bytes"}`` over :func:`startup_files`, so adding, removing or
    editing any of them changes it; None when ``site_packages`` is not a directory.

    :raises InputError: a start-up file is larger than 64 MiB or unreadable (names it).
    """
    if not site_packages.is_dir():
        return None
    digests = {name: file_digest(site_packages / name, what="start-up file") for name in startup_files(site_packages)}
    blob = json.dumps(digests, sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + sha256_hex(blob)


def _lock_platform(lock: Path) -> str | None:
    """``[tool.envforge] inputs.platform`` of the environment's lock copy, or None."""
    if not lock.is_file():
        return None
    try:
        plat = read_lock(lock).envforge.get("inputs", {}).get("platform")
    except InputError:
        return None  # verify reports an unreadable lock itself
    return plat if isinstance(plat, str) else None
