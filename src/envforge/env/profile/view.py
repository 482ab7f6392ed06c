"""What processes started from an environment's interpreter see of its env profile.

Through the probe runner (:func:`envforge.core.probe.run_probe`), the only code that starts the
environment's interpreter: :func:`show` reads what the hook applied and where each value comes
from, :func:`check_reach` whether a ``multiprocessing`` spawn child applies the profile itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envforge.core.probe import run_probe
from envforge.core.state import StateDir
from envforge.env.profile.effective import EffectiveEnvironment, ServedCommand, effective_environment, served_launcher
from envforge.env.profile.installation import InstalledProfile, read_installed
from envforge.env.profile.source import profile_problems

__all__ = ["ProfileView", "ReachReport", "Served", "ShownVariable", "check_reach", "served", "show"]


@dataclass(frozen=True, slots=True)
class ShownVariable:
    """One profile variable as a child process sees it.

    ``source`` is ``"profile"`` (the hook set it), ``"caller"`` (the caller exported it, the
    profile's value was not applied) or ``"unset"`` (absent: the hook did not run).
    """

    name: str
    value: str | None
    profile_value: str
    source: str


@dataclass(frozen=True, slots=True)
class ProfileView:
    """What :func:`show` found: the record in site-packages and what the interpreter really did.

    ``active`` is true when a hook ran at start-up; ``hook`` is the file it ran from; ``warnings``
    are the hook's stderr lines (``envforge: ...``).
    """

    python: Path
    site_packages: Path
    installed: InstalledProfile | None
    active: bool
    mode: str | None
    hook: str | None
    profile: str | None
    variables: tuple[ShownVariable, ...]
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order."""
        return {
            "python": str(self.python),
            "site-packages": str(self.site_packages),
            "installed": self.installed.as_dict() if self.installed else None,
            "active": self.active,
            "mode": self.mode,
            "hook": self.hook,
            "profile": self.profile,
            "variables": [
                {"name": v.name, "value": v.value, "profile-value": v.profile_value, "source": v.source}
                for v in self.variables
            ],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class ReachReport:
    """Whether a ``multiprocessing`` spawn child sees the profile (see :func:`check_reach`).

    ``expected`` per variable: the caller's value where the caller exported one, else the
    profile's; ``seen``: what the spawn child read (``None``: unset).
    """

    python: Path
    flags: tuple[str, ...]
    expected: Mapping[str, str]
    seen: Mapping[str, str | None] = field(default_factory=dict)

    @property
    def missing(self) -> tuple[str, ...]:
        """Variables the child saw with another value than expected, or not at all."""
        return tuple(k for k, v in self.expected.items() if self.seen.get(k) != v)

    @property
    def ok(self) -> bool:
        return not self.missing

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order."""
        return {
            "python": str(self.python),
            "flags": list(self.flags),
            "ok": self.ok,
            "expected": dict(self.expected),
            "seen": dict(self.seen),
            "missing": list(self.missing),
        }


_SHOW_PROBE = r"""
import json, os, stat, sys, sysconfig
purelib = sysconfig.get_paths()["purelib"]
mod, mode, p = sys.modules.get("_envforge_env"), "pth", ""
if mod is None:
    mod, mode, p = sys.modules.get("sitecustomize"), "sitecustomize", "_ENVFORGE_"
    if mod is not None and not hasattr(mod, "_ENVFORGE_ENV"):
        mod = None
env = dict(getattr(mod, p + "ENV", {}) or {})
try:
    record = os.path.join(purelib, *RECORD_PARTS)
    if not stat.S_ISREG(os.stat(record).st_mode):  # a FIFO would block open() for ever
        raise OSError(record + ": not a regular file")
    with open(record) as fh:
        recorded = dict(json.loads(fh.read(1 << 20)).get("env", {}))
except Exception:
    recorded = {}
keys = sorted(set(env) | set(recorded))
print(json.dumps({
    "purelib": purelib, "active": mod is not None, "mode": mode if mod is not None else None,
    "hook": getattr(mod, "__file__", None), "profile": getattr(mod, p + "PROFILE", None),
    "env": {**recorded, **env}, "applied": list(getattr(mod, p + "APPLIED", ())),
    "environ": {k: os.environ.get(k) for k in keys},
}))
""".replace("RECORD_PARTS", repr(StateDir(Path()).profile_record.parts))  # (".envforge", "env-profile.json")


def show(python: Path, *, env: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> ProfileView:
    """What a process started from ``python`` sees of the env profile, and where each value comes from.

    ``warnings`` carry the hook's own warning lines and one line per variable of the installed
    profile that NCCL, CUDA or the process would misread (:func:`profile_problems`), so an
    environment built before a recipe was validated still says it.

    Starts ``python`` once through :func:`envforge.core.probe.run_probe` with the caller's environment
    ``env`` (default: this process's) and reads the hook's own record of what it applied.

    :raises envforge.core.probe.ProbeError: the interpreter could not run the probe.
    :raises InputError: the env's profile record is unreadable.
    """
    result = run_probe(python, _SHOW_PROBE, env=env, timeout_s=timeout_s)
    data = result.data
    applied = set(data["applied"])
    variables = []
    for name, profile_value in sorted(data["env"].items()):
        value = data["environ"].get(name)
        source = "profile" if name in applied else "caller" if value is not None else "unset"
        variables.append(ShownVariable(name, value, profile_value, source))
    warnings = tuple(line for line in result.stderr.splitlines() if line.startswith("envforge:"))
    warnings += tuple(f"envforge: env profile: {line}" for line in profile_problems(data["env"]))
    site = Path(data["purelib"])
    return ProfileView(
        python=python,
        site_packages=site,
        installed=read_installed(site),
        active=data["active"],
        mode=data["mode"],
        hook=data["hook"],
        profile=data["profile"],
        variables=tuple(variables),
        warnings=warnings,
    )


_REACH_PROBE = r"""
import json, multiprocessing, os, sys
keys = json.loads(sys.argv[1])
mod, p = sys.modules.get("_envforge_env"), ""
if mod is None:
    mod, p = sys.modules.get("sitecustomize"), "_ENVFORGE_"
kept = {k: os.environ.get(k) for k in getattr(mod, p + "KEPT", ()) if k in keys}
for k in getattr(mod, p + "APPLIED", ()):
    os.environ.pop(k, None)  # the child must apply these itself, not inherit them
with multiprocessing.get_context("spawn").Pool(1) as pool:
    seen = pool.map(os.getenv, keys)
print(json.dumps({"kept": kept, "seen": dict(zip(keys, seen))}))
"""


def check_reach(
    python: Path,
    env: Mapping[str, str],
    *,
    flags: Sequence[str] = (),
    caller_env: Mapping[str, str] | None = None,
    timeout_s: float = 60.0,
) -> ReachReport:
    """Does a ``multiprocessing`` spawn child of ``python`` see the profile ``env`` (name -> value)?

    The probe removes the variables its own hook applied before spawning, so the child passes only
    if its own start-up applies the profile; variables the caller exported are expected with the
    caller's value. ``flags`` are interpreter flags (``("-I",)``); the spawn child inherits them.

    :param caller_env: the probe's environment (default: this process's).
    :raises envforge.core.probe.ProbeError: the interpreter could not run the probe.
    """
    keys = sorted(env)
    result = run_probe(
        python, _REACH_PROBE, args=[json.dumps(keys)], env=caller_env, timeout_s=timeout_s, interpreter_flags=flags
    )
    kept = result.data["kept"]
    expected = {k: kept[k] if kept.get(k) is not None else env[k] for k in keys}
    return ReachReport(python, tuple(flags), expected, dict(result.data["seen"]))


@dataclass(frozen=True, slots=True)
class Served:
    """The effective environment of one server the recipe starts from this environment (``server``
    None: no ``[verify.smoke]`` server, so no launcher: the profile and NCCL's files only)."""

    server: str | None
    args: tuple[str, ...]
    effective: EffectiveEnvironment

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order."""
        return {"server": self.server, "args": list(self.args), **self.effective.as_dict()}


def served(
    view: ProfileView, servers: Sequence[ServedCommand], environ: Mapping[str, str], *, home: Path | None = None
) -> tuple[Served, ...]:
    """What each server in ``servers`` runs with (:func:`effective_environment`): the profile's
    variables as the view recorded them, then the engine's launcher at the version installed in
    the view's site-packages, then NCCL's configuration files. One entry without a server when
    ``servers`` is empty."""
    profile = {v.name: v.profile_value for v in view.variables}
    out = []
    for s in servers or (None,):
        args = s.args if s is not None else ()
        launcher, unknown = served_launcher(view.site_packages, args, s.api if s is not None else None)
        eff = effective_environment(
            profile,
            args,
            environ,
            server_env=s.env if s is not None else None,
            launcher=launcher,
            unknown_launcher=unknown,
            home=home,
        )
        out.append(Served(s.name if s is not None else None, tuple(args), eff))
    return tuple(out)
