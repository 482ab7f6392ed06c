"""The variables a benchmarked server really ran with (field cases B20, B38, B44).

A started server's environment is the caller's environment plus the server configuration's ``env``
(recipe ``[[verify.smoke.servers]] env``); the environment's env profile is applied at interpreter
start by the ``.pth`` hook with ``setdefault`` (:mod:`envforge.env.profile`), so a variable the
caller exported wins over the profile, by design. Container images export ``NCCL_*`` defaults
(Megatron-Bridge issue 3350), so two runs of one environment can differ in exactly the settings the
profile exists for. Then the engine's launcher overwrites some variables (sglang 0.5.9 sets
``CUDA_DEVICE_MAX_CONNECTIONS=8``, and with ``--enable-symm-mem`` ``NCCL_CUMEM_ENABLE=1``: B38),
and NCCL adds what its configuration files set (B44). This module records the result with
:func:`envforge.env.profile.effective.effective_environment`, the function ``env show`` and verify
use, so the report and ``env show`` agree, and says where the caller overrode the profile.

Tracked: every ``NCCL_*``, ``CUDA_*`` and ``TORCH_NCCL_*`` variable of the caller, every variable of
the profile, of the server configuration's ``env``, of the launcher's writes and of NCCL's files.
Values of variables whose names look like secrets (``TOKEN``, ``SECRET``, ``PASSWORD``, ``KEY``,
``CREDENTIAL``) are recorded as ``"<redacted>"``; a value the launcher computes per run
(``SGLANG_RUN_ID``) as ``"<per run>"``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from envforge.env.profile.effective import TRACKED_PREFIXES, EffectiveEnvironment, effective_environment, shown
from envforge.recipe.launchers import Launcher

__all__ = [
    "PER_RUN",
    "TRACKED_PREFIXES",
    "effective_env",
    "env_digest",
    "profile_overrides",
    "recorded_values",
    "server_environment",
]

#: How a report records a value the launcher computes per run.
PER_RUN = "<per run>"


def server_environment(
    profile: Mapping[str, str],
    caller: Mapping[str, str],
    server: Mapping[str, str] | None = None,
    argv: Sequence[str] = (),
    *,
    launcher: Launcher | None = None,
    unknown_launcher: str | None = None,
    conf_paths: Sequence[Path] | None = None,
    home: Path | None = None,
) -> EffectiveEnvironment:
    """What a server started with ``argv`` runs with, each variable with its source: ``server``
    (the configuration's ``env``) over ``caller`` over ``profile``, then ``launcher``'s writes,
    then NCCL's files (``conf_paths``; default: those NCCL reads, see
    :func:`~envforge.env.profile.effective.nccl_conf_paths`)."""
    return effective_environment(
        profile,
        argv,
        caller,
        server_env=server,
        launcher=launcher,
        unknown_launcher=unknown_launcher,
        conf_paths=conf_paths,
        home=home,
    )


def recorded_values(eff: EffectiveEnvironment) -> dict[str, str]:
    """name -> the value a report records (secrets redacted, per-run values as :data:`PER_RUN`)."""
    return {k: PER_RUN if v is None else v for k, v in eff.values().items()}


def effective_env(
    profile: Mapping[str, str],
    caller: Mapping[str, str],
    server: Mapping[str, str] | None = None,
    argv: Sequence[str] = (),
    *,
    launcher: Launcher | None = None,
    conf_paths: Sequence[Path] | None = None,
    home: Path | None = None,
) -> dict[str, str]:
    """The tracked variables a server started with, sorted by name (:func:`server_environment`,
    :func:`recorded_values`).

    >>> effective_env({"NCCL_MAX_NCHANNELS": "2"}, {"NCCL_MAX_NCHANNELS": "32", "HOME": "/root"}, conf_paths=[])
    {'NCCL_MAX_NCHANNELS': '32'}
    """
    return recorded_values(
        server_environment(profile, caller, server, argv, launcher=launcher, conf_paths=conf_paths, home=home)
    )


def profile_overrides(profile_name: str | None, profile: Mapping[str, str], caller: Mapping[str, str]) -> list[str]:
    """One warning per profile variable the caller's environment overrides with another value.

    >>> profile_overrides("pcie", {"NCCL_MAX_NCHANNELS": "2"}, {"NCCL_MAX_NCHANNELS": "32"})
    ["NCCL_MAX_NCHANNELS=32 from the caller's environment overrides the env profile 'pcie' (NCCL_MAX_NCHANNELS=2)"]
    """
    return [
        f"{k}={shown(k, caller[k])} from the caller's environment overrides the env profile "
        f"'{profile_name}' ({k}={shown(k, v)})"
        for k, v in sorted(profile.items())
        if k in caller and caller[k] != v
    ]


def env_digest(env: Mapping[str, str]) -> str:
    """``sha256:<hex>`` of the canonical JSON (sorted keys, no spaces) of ``env``."""
    blob = json.dumps(dict(env), sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()
