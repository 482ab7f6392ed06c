"""The effective environment of the served process: each variable's value and where it came from.

A server started from an environment runs with, in the order the process builds it:

1. its environment: the caller's (``environment``) and, for a bench server, the configuration's
   ``env`` (``server env``), which wins over the caller's;
2. the env profile, applied by the start-up hook only where a variable is absent (``profile``;
   :mod:`envforge.env.profile.source`);
3. what the engine's launcher assigns in ``os.environ`` afterwards (``launcher sglang-0.5.9``, with
   the flag that selects the write: ``launcher sglang-0.5.9 (--enable-symm-mem)``; the data and its
   source: :mod:`envforge.recipe.launchers`; field case B38);
4. NCCL's configuration files, read when NCCL initialises (``nccl.conf <path>``; field case B44).

NCCL's files, as NCCL 2.23 through |NCCL_VERSION| reads them (``src/misc/param.cc``,
``initEnvFunc`` and ``setEnvFile``; the environment-variable documentation's introduction): the
file ``$NCCL_CONF_FILE`` when that variable is set and not empty, else ``~/.nccl.conf`` of the
user's home directory *as the password database gives it* (``getpwuid(getuid())->pw_dir``:
``$HOME`` is not read), then ``/etc/nccl.conf``. Each line: a line starting with ``#`` is skipped,
the name is the text before the first ``=`` (a line without one is skipped), the value is the rest
of the line verbatim (no trimming, at most 1023 bytes). Each value is applied with
``setenv(name, value, 0)``: a variable already in the environment wins, so does the first file
and, within a file, the first line that sets it.

:func:`effective_environment` computes all of it from data (no process is started); ``env show``,
verify and bench call it, so they say the same thing.
"""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from envforge.installed.distributions import installed_distributions
from envforge.recipe.envvars import NCCL_VERSION
from envforge.recipe.launchers import Launcher, launcher_for

__doc__ = (__doc__ or "").replace("|NCCL_VERSION|", NCCL_VERSION)

__all__ = [
    "ENVIRONMENT",
    "ETC_NCCL_CONF",
    "PROFILE",
    "SERVER_ENV",
    "TRACKED_PREFIXES",
    "EffectiveEnvironment",
    "EffectiveVariable",
    "NcclConf",
    "ServedCommand",
    "conf_files_digest",
    "engine_of",
    "effective_environment",
    "nccl_conf_digest",
    "nccl_conf_paths",
    "parse_nccl_conf",
    "read_nccl_confs",
    "recipe_servers",
    "served_launcher",
    "shown",
]

#: Sources that are not a launcher or a file.
ENVIRONMENT: Final = "environment"
SERVER_ENV: Final = "server env"
PROFILE: Final = "profile"
#: The system-wide file NCCL reads last.
ETC_NCCL_CONF: Final = Path("/etc/nccl.conf")
#: Variables of the caller's environment recorded even when nothing else sets them.
TRACKED_PREFIXES: Final = ("NCCL_", "CUDA_", "TORCH_NCCL_")
_SECRET = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|(^|_)KEY($|_)", re.IGNORECASE)
_NCCL_MAX = 1023  # setEnvFile's envVar/envValue buffers: 1024 bytes with the terminating NUL
_CONF_LIMIT = 1 << 20


def shown(name: str, value: str | None) -> str | None:
    """``value``, or ``"<redacted>"`` when ``name`` looks like a secret (``TOKEN``, ``SECRET``,
    ``PASSWORD``, ``CREDENTIAL``, ``KEY``)."""
    return "<redacted>" if value is not None and _SECRET.search(name) else value


def parse_nccl_conf(text: str) -> dict[str, str]:
    """``KEY=VALUE`` lines as NCCL's ``setEnvFile`` reads them (see the module docstring).

    >>> parse_nccl_conf("# c\\nNCCL_BUFFSIZE=128K\\nNCCL_BUFFSIZE=4\\nnoequals\\nNCCL_SOCKET_IFNAME==eth0\\n")
    {'NCCL_BUFFSIZE': '128K', 'NCCL_SOCKET_IFNAME': '=eth0'}
    """
    out: dict[str, str] = {}
    for line in text.split("\n"):
        if line.startswith("#") or "=" not in line:
            continue
        name, _, value = line.partition("=")
        name, value = name[:_NCCL_MAX], value[:_NCCL_MAX]
        if name and name not in out:  # setenv(name, value, 0): the first line wins
            out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class NcclConf:
    """One NCCL configuration file that exists: its ``path``, ``sha256:<hex>`` of its bytes, its values."""

    path: Path
    digest: str
    values: Mapping[str, str]

    @property
    def source(self) -> str:
        """``nccl.conf /etc/nccl.conf``: how a variable's source names this file."""
        return f"nccl.conf {self.path}"


def nccl_conf_paths(env: Mapping[str, str], home: Path | None = None) -> tuple[Path, ...]:
    """The files NCCL reads in a process whose environment is ``env``, first wins.

    ``home``: the user's home directory (default: the password database's, as NCCL has it).
    """
    user = env.get("NCCL_CONF_FILE")
    if user:
        return Path(user), ETC_NCCL_CONF
    if home is None:
        try:
            home = Path(pwd.getpwuid(os.getuid()).pw_dir)
        except KeyError:  # no passwd entry: NCCL reads no user file either
            return (ETC_NCCL_CONF,)
    return home / ".nccl.conf", ETC_NCCL_CONF


def read_nccl_confs(paths: Sequence[Path]) -> tuple[NcclConf, ...]:
    """The files of ``paths`` that exist and are regular files (NCCL skips what ``fopen`` cannot
    open; a FIFO is not opened here, it would block), at most 1 MiB read of each."""
    out = []
    for path in paths:
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                continue
            with open(path, "rb") as fh:
                data = fh.read(_CONF_LIMIT)
        except OSError:
            continue
        text = data.decode("utf-8", errors="replace")
        out.append(NcclConf(path, "sha256:" + hashlib.sha256(data).hexdigest(), parse_nccl_conf(text)))
    return tuple(out)


def conf_files_digest(confs: Sequence[NcclConf]) -> str | None:
    """``sha256:<hex>`` of the canonical JSON ``[[path, digest], ...]`` of ``confs`` in order (None: no file)."""
    if not confs:
        return None
    blob = json.dumps([[str(c.path), c.digest] for c in confs], separators=(",", ":")).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def nccl_conf_digest(env: Mapping[str, str], home: Path | None = None) -> str | None:
    """:func:`conf_files_digest` of the files NCCL reads in a process whose environment is ``env``
    (the fingerprint's ``nccl_conf_digest``: machine state, like the driver)."""
    return conf_files_digest(read_nccl_confs(nccl_conf_paths(env, home)))


@dataclass(frozen=True, slots=True)
class EffectiveVariable:
    """One variable of the served process: ``value`` (None: a per-run value the launcher computes),
    ``source`` (see the module docstring), and ``profile_value`` when the env profile sets it."""

    name: str
    value: str | None
    source: str
    profile_value: str | None = None

    @property
    def overrides_profile(self) -> bool:
        """The profile sets this variable and the process runs with another value."""
        return self.profile_value is not None and self.value != self.profile_value

    def as_dict(self) -> dict[str, Any]:
        """JSON-able (secret-looking values redacted), keys in a fixed order."""
        return {
            "name": self.name,
            "value": shown(self.name, self.value),
            "source": self.source,
            "profile-value": shown(self.name, self.profile_value),
        }


@dataclass(frozen=True, slots=True)
class EffectiveEnvironment:
    """What :func:`effective_environment` found. ``launcher``: the launcher applied (None: none);
    ``unknown_launcher``: ``sglang 0.5.10`` when the engine is known but its version has no data;
    ``conf_files``: the NCCL files that exist, in the order NCCL reads them."""

    variables: tuple[EffectiveVariable, ...]
    launcher: Launcher | None = None
    unknown_launcher: str | None = None
    conf_files: tuple[NcclConf, ...] = ()

    def values(self) -> dict[str, str | None]:
        """name -> value (secret-looking ones redacted), sorted by name."""
        return {v.name: shown(v.name, v.value) for v in self.variables}

    def sources(self) -> dict[str, str]:
        """name -> where the value came from, sorted by name."""
        return {v.name: v.source for v in self.variables}

    def overrides(self, profile_name: str | None) -> list[str]:
        """One line per profile variable the launcher or a configuration file gives another value
        (the caller's own overrides: :func:`envforge.bench.variables.profile_overrides`)."""
        return [
            f"{v.name}={shown(v.name, v.value) if v.value is not None else '<per run>'} from {v.source} "
            f"overrides the env profile '{profile_name or 'default'}' ({v.name}={shown(v.name, v.profile_value)})"
            for v in self.variables
            if v.overrides_profile and v.source not in (ENVIRONMENT, SERVER_ENV)
        ]

    def conf_only(self) -> tuple[EffectiveVariable, ...]:
        """Variables only an NCCL configuration file sets: in effect, in no recipe."""
        return tuple(v for v in self.variables if v.source.startswith("nccl.conf "))

    def conf_digest(self) -> str | None:
        """:func:`conf_files_digest` of the files NCCL reads."""
        return conf_files_digest(self.conf_files)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order."""
        return {
            "launcher": self.launcher.label if self.launcher else None,
            "unknown-launcher": self.unknown_launcher,
            "nccl-conf-files": [{"path": str(c.path), "digest": c.digest} for c in self.conf_files],
            "variables": [v.as_dict() for v in self.variables],
        }


def effective_environment(
    profile: Mapping[str, str],
    argv: Sequence[str],
    environ: Mapping[str, str],
    *,
    server_env: Mapping[str, str] | None = None,
    launcher: Launcher | None = None,
    unknown_launcher: str | None = None,
    conf_paths: Sequence[Path] | None = None,
    home: Path | None = None,
) -> EffectiveEnvironment:
    """The served process's variables and their sources, sorted by name.

    :param profile: the env profile's variables.
    :param argv: the server's command line (its flags select launcher writes).
    :param environ: the caller's environment.
    :param server_env: a bench server configuration's ``env`` (wins over ``environ``).
    :param launcher: the engine's launcher (:func:`served_launcher`), None for none.
    :param conf_paths: NCCL's files (default: :func:`nccl_conf_paths` of the process's environment
        after the launcher ran, ``home`` passed on).

    Recorded: every variable of the profile, the server env, the launcher's writes and the NCCL
    files in effect, and every ``NCCL_*``/``CUDA_*``/``TORCH_NCCL_*`` variable of ``environ``.
    """
    env = dict(environ)
    source = {k: ENVIRONMENT for k in environ}
    for k, v in (server_env or {}).items():
        env[k], source[k] = v, SERVER_ENV
    for k, v in profile.items():
        if k not in env:
            env[k], source[k] = v, PROFILE
    tracked = set(profile) | set(server_env or {}) | {k for k in environ if k.startswith(TRACKED_PREFIXES)}
    written: dict[str, str | None] = {}
    if launcher is not None:
        for name, w in launcher.apply(env, argv).items():
            flag = next((f for f in w.flags if f in argv), None)
            source[name] = f"launcher {launcher.label}" + (f" ({flag})" if flag else "")
            written[name] = w.value
            if w.value is not None:
                env[name] = w.value
                tracked.add(name)
            elif name in tracked:
                env.pop(name, None)
    confs = read_nccl_confs(conf_paths if conf_paths is not None else nccl_conf_paths(env, home))
    for conf in confs:
        for k, v in conf.values.items():
            if k not in env and k not in written:
                env[k], source[k] = v, conf.source
                tracked.add(k)
    variables = tuple(
        EffectiveVariable(k, written[k] if k in written else env.get(k), source.get(k, ENVIRONMENT), profile.get(k))
        for k in sorted(tracked)
    )
    return EffectiveEnvironment(variables, launcher, unknown_launcher, confs)


@dataclass(frozen=True, slots=True)
class ServedCommand:
    """One server a recipe starts (``[[verify.smoke.servers]]``): its ``name``, ``args`` after the
    interpreter (placeholders such as ``{model}`` left as they are: only flags matter here), its
    ``env`` and the smoke ``api``."""

    name: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    api: str | None = None


def recipe_servers(verify: Mapping[str, Any]) -> tuple[ServedCommand, ...]:
    """The servers of a recipe's parsed ``[verify]`` table (empty: no ``[verify.smoke]`` servers).
    Entries without a list of string ``args`` are left out (the recipe loader reports them)."""
    smoke = verify.get("smoke") if isinstance(verify, Mapping) else None
    if not isinstance(smoke, Mapping):
        return ()
    api = smoke.get("api") if isinstance(smoke.get("api"), str) else None
    out = []
    for i, s in enumerate(smoke.get("servers") or ()):
        if not isinstance(s, Mapping) or not isinstance(s.get("args"), list):
            continue
        given = s.get("env")
        env: Mapping[Any, Any] = given if isinstance(given, Mapping) else {}
        out.append(
            ServedCommand(
                str(s.get("name") or f"server-{i + 1}"),
                tuple(str(a) for a in s["args"]),
                {str(k): str(v) for k, v in env.items()},
                api,
            )
        )
    return tuple(out)


def engine_of(argv: Sequence[str], api: str | None = None) -> str | None:
    """The engine whose launcher runs for ``argv``: ``sglang`` for ``-m sglang.launch_server`` (or a
    ``[verify.smoke] api = "sglang"`` server), else None."""
    if any(a.startswith("sglang.launch_server") for a in argv) or api == "sglang":
        return "sglang"
    return None


def served_launcher(
    site_packages: Path | None, argv: Sequence[str], api: str | None = None
) -> tuple[Launcher | None, str | None]:
    """(the launcher of the engine ``argv`` starts at its version installed in ``site_packages``,
    ``"<engine> <version>"`` when envforge has no data for that version); (None, None) when the
    command starts no known engine or the engine is not installed."""
    engine = engine_of(argv, api)
    if engine is None or site_packages is None:
        return None, None
    found = installed_distributions(site_packages).get(engine)
    if found is None:
        return None, None
    launcher = launcher_for(engine, found.version)
    return launcher, None if launcher is not None else f"{engine} {found.version}"
