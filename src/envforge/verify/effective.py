"""Static verify of the served process's environment: what the engine's launcher and NCCL's
configuration files do to the env profile (field cases B38, B44).

Computed from data (:func:`envforge.env.profile.effective.effective_environment`; nothing is
started): for each ``[[verify.smoke.servers]]`` entry of the recipe (none: one run without a
launcher), a ``launcher-override`` finding per profile variable the engine's launch code gives
another value, and one note per variable only an NCCL configuration file sets (in effect for every
NCCL process of the machine, written in no recipe; the fingerprint's ``nccl_conf_digest`` holds the
files). NCCL applies a file's value only where the environment has none (``setenv(name, value, 0)``),
so a file never overrides a profile value: a file value the profile shadows is not reported.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envforge.core.plural import counted
from envforge.env.profile.effective import ServedCommand, effective_environment, served_launcher
from envforge.verify.findings import Finding

__all__ = ["effective_findings"]


def effective_findings(
    site_packages: Path,
    record: Mapping[str, Any] | None,
    servers: Sequence[ServedCommand],
    environ: Mapping[str, str] | None = None,
    *,
    home: Path | None = None,
) -> tuple[list[Finding], list[str], str]:
    """(the findings, notes, the check's detail line) for the environment at ``site_packages`` whose
    installed profile record (``.envforge/env-profile.json``) is ``record`` (None: no profile),
    started by ``servers`` from ``environ`` (default: this process's environment).

    ``home``: the user's home directory NCCL reads ``.nccl.conf`` from (default: the password
    database's, as NCCL has it).
    """
    profile_name = record.get("profile") if record else None
    profile = {str(k): str(v) for k, v in dict(record.get("env") or {}).items()} if record else {}
    environ = os.environ if environ is None else environ
    found: list[Finding] = []
    notes: list[str] = []
    conf_seen: set[tuple[str, str]] = set()
    launchers: list[str] = []
    for s in servers or (None,):
        args = s.args if s is not None else ()
        launcher, unknown = served_launcher(site_packages, args, s.api if s is not None else None)
        eff = effective_environment(
            profile,
            args,
            environ,
            server_env=s.env if s is not None else None,
            launcher=launcher,
            unknown_launcher=unknown,
            home=home,
        )
        where = f"server '{s.name}'" if s is not None else "the served process"
        if launcher is not None:
            launchers.append(launcher.label)
        for v in eff.variables:
            if v.overrides_profile and v.source.startswith("launcher "):
                value = "a per-run value" if v.value is None else v.value
                found.append(
                    Finding(
                        "launcher-override",
                        f"{where}: {v.name}",
                        f"{v.profile_value} (env profile '{profile_name or 'default'}')",
                        f"{value} ({v.source} sets it after the profile's hook ran)",
                        f"the engine's launch code wins over the profile: drop {v.name} from the recipe's [env.*] "
                        "table, or change the server's flags; accept it with [[verify.accept]] if intended",
                        from_recipe=True,
                    )
                )
        for v in eff.conf_only():
            if (v.name, v.source) in conf_seen:
                continue
            conf_seen.add((v.name, v.source))
            notes.append(
                f"{v.name}={v.value} from {v.source} is in effect for NCCL and in no recipe: set it in "
                "the recipe's [env.*] table to pin it (the profile wins over the file)"
            )
    confs = ", ".join(str(c.path) for c in eff.conf_files) or "no NCCL configuration file"
    detail = f"{counted(len(servers), 'server')}, launcher {', '.join(sorted(set(launchers))) or 'none'}, {confs}"
    return found, notes, detail
