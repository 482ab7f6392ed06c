"""The variables a benchmarked server really ran with (field case B20).

A started server's environment is the caller's environment plus the server configuration's ``env``
(recipe ``[[verify.smoke.servers]] env``); the environment's env profile is applied at interpreter
start by the ``.pth`` hook with ``setdefault`` (:mod:`envforge.env.profile`), so a variable the
caller exported wins over the profile, by design. Container images export ``NCCL_*`` defaults
(Megatron-Bridge issue 3350), so two runs of one environment can differ in exactly the settings the
profile exists for. This module computes the effective values and says where the caller overrode
the profile.

Tracked: every ``NCCL_*``, ``CUDA_*`` and ``TORCH_NCCL_*`` variable of the caller, every variable of
the profile and every variable of the server configuration's ``env``. Values of variables whose
names look like secrets (``TOKEN``, ``SECRET``, ``PASSWORD``, ``KEY``, ``CREDENTIAL``) are recorded
as ``"<redacted>"``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping

__all__ = ["TRACKED_PREFIXES", "effective_env", "env_digest", "profile_overrides"]

TRACKED_PREFIXES = ("NCCL_", "CUDA_", "TORCH_NCCL_")
_SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|(^|_)KEY($|_)", re.IGNORECASE)


def _shown(name: str, value: str) -> str:
    return "<redacted>" if _SECRET.search(name) else value


def effective_env(profile: Mapping[str, str], caller: Mapping[str, str],
                  server: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tracked variables a server started with, sorted by name.

    Precedence as the process sees them: ``server`` (the configuration's ``env``) over ``caller``
    (the environment bench runs in) over ``profile`` (the env profile, applied with ``setdefault``).

    >>> effective_env({"NCCL_MAX_NCHANNELS": "2"}, {"NCCL_MAX_NCHANNELS": "32", "HOME": "/root"})
    {'NCCL_MAX_NCHANNELS': '32'}
    """
    server = server or {}
    names = set(profile) | set(server) | {k for k in caller if k.startswith(TRACKED_PREFIXES)}
    out = {}
    for name in sorted(names):
        value = server[name] if name in server else caller[name] if name in caller else profile[name]
        out[name] = _shown(name, value)
    return out


def profile_overrides(profile_name: str | None, profile: Mapping[str, str], caller: Mapping[str, str]) -> list[str]:
    """One warning per profile variable the caller's environment overrides with another value.

    >>> profile_overrides("pcie", {"NCCL_MAX_NCHANNELS": "2"}, {"NCCL_MAX_NCHANNELS": "32"})
    ["NCCL_MAX_NCHANNELS=32 from the caller's environment overrides the env profile 'pcie' (NCCL_MAX_NCHANNELS=2)"]
    """
    return [f"{k}={_shown(k, caller[k])} from the caller's environment overrides the env profile "
            f"'{profile_name}' ({k}={_shown(k, v)})"
            for k, v in sorted(profile.items()) if k in caller and caller[k] != v]


def env_digest(env: Mapping[str, str]) -> str:
    """``sha256:<hex>`` of the canonical JSON (sorted keys, no spaces) of ``env``."""
    blob = json.dumps(dict(env), sort_keys=True, separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()
