"""Env profiles: environment variables (NCCL and friends) that reach every process of an environment.

A profile is a recipe table ``[env.<name>]`` (``recipe.py`` picks it: ``--env-profile``, the
variant's ``env-profile``, or the target interconnect, over ``[env.default]``). :func:`install`
puts it into an environment's site-packages so that *every* interpreter start applies it: the
server, its ``multiprocessing`` spawn children, ``subprocess`` children, ``python -I`` and
``PYTHONNOUSERSITE=1`` runs alike.

Two modes (field case B11, docs/design.md decision 5):

``pth`` (default)
    ``envforge-env.pth`` holds one ``import`` line (``site`` executes such lines, see the
    :mod:`site` documentation) that imports ``_envforge_env.py``, a module envforge writes with the
    values embedded. Every site-packages directory processes its ``.pth`` files, whichever
    ``sitecustomize`` the interpreter imports.
``sitecustomize``
    A marked block in ``<site-packages>/sitecustomize.py``, merged into an existing file without
    clobbering it. Only the first ``sitecustomize`` on ``sys.path`` is imported and Debian/Ubuntu
    Pythons ship one in ``/usr/lib/python3.X``, so install asks the target interpreter which one it
    imports and refuses with :class:`SitecustomizeShadowed` when another file wins.

In both modes the hook sets each variable only when it is absent (``os.environ.setdefault``
semantics: a value the caller exports wins), prints nothing, and never fails the interpreter start:
a broken or missing hook module gives one warning line on stderr. ``python -S`` skips the ``site``
module and with it every ``.pth`` file and ``sitecustomize``: the one documented limitation.

What was written is recorded in ``<site-packages>/.envforge/env-profile.json``
(docs/architecture.md) so :func:`revert` removes exactly that, leaving the rest byte-identical.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envforge.core.errors import CheckFailed, InputError
from envforge.core.probe import env_python, run_probe

__all__ = [
    "BLOCK_BEGIN",
    "BLOCK_END",
    "HOOK_MODULE",
    "MODES",
    "PTH_FILE",
    "RECORD",
    "InstalledProfile",
    "ProfileInstall",
    "ProfileRevert",
    "ProfileView",
    "ReachReport",
    "ShownVariable",
    "SitecustomizeShadowed",
    "block_source",
    "check_reach",
    "hook_source",
    "install",
    "profile_problems",
    "installed_problems",
    "pth_source",
    "read_installed",
    "revert",
    "show",
]

SCHEMA = 1
MODES = ("pth", "sitecustomize")
PTH_FILE = "envforge-env.pth"
HOOK_MODULE = "_envforge_env"
SITECUSTOMIZE = "sitecustomize.py"
RECORD = ".envforge/env-profile.json"
BLOCK_BEGIN = "# >>> envforge env profile >>> (written by envforge; `--revert` removes this block)"
BLOCK_END = "# <<< envforge env profile <<<"
_HOOK_HEADER = "# Written by envforge: env profile"
# Directories envforge may cause to exist; removed on revert when empty and absent before install.
_TRACKED_DIRS = (".envforge", "__pycache__")
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class SitecustomizeShadowed(CheckFailed):
    """Another ``sitecustomize`` earlier on ``sys.path`` would be imported instead of envforge's (exit 1)."""


# ---------------------------------------------------------------------------------------------
# Value types


@dataclass(frozen=True, slots=True)
class InstalledProfile:
    """The record ``.envforge/env-profile.json`` of an installed profile.

    ``files`` are paths relative to site-packages that the hook occupies; ``absent_before`` the
    directories that did not exist before install; ``sitecustomize`` (sitecustomize mode only) has
    ``created`` (bool), ``separator`` (text inserted before the block) and ``original-sha256``.
    """

    profile: str | None
    mode: str
    env: Mapping[str, str]
    files: tuple[str, ...]
    absent_before: tuple[str, ...] = ()
    sitecustomize: Mapping[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The record's JSON shape, keys in a fixed order."""
        return {"schema": SCHEMA, "profile": self.profile, "mode": self.mode, "env": dict(self.env),
                "files": list(self.files), "absent-before": list(self.absent_before),
                "sitecustomize": dict(self.sitecustomize) if self.sitecustomize is not None else None}


@dataclass(frozen=True, slots=True)
class ProfileInstall:
    """What :func:`install` wrote: ``files`` relative to ``site_packages`` (empty: nothing to do)."""

    site_packages: Path
    profile: str | None
    mode: str
    env: Mapping[str, str]
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ProfileRevert:
    """What :func:`revert` did: ``removed`` files, ``restored`` files (block taken out), ``notes``."""

    site_packages: Path
    profile: str | None
    removed: tuple[str, ...] = ()
    restored: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


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
        return {"python": str(self.python), "site-packages": str(self.site_packages),
                "installed": self.installed.as_dict() if self.installed else None,
                "active": self.active, "mode": self.mode, "hook": self.hook, "profile": self.profile,
                "variables": [{"name": v.name, "value": v.value, "profile-value": v.profile_value,
                               "source": v.source} for v in self.variables],
                "warnings": list(self.warnings)}


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
        return {"python": str(self.python), "flags": list(self.flags), "ok": self.ok,
                "expected": dict(self.expected), "seen": dict(self.seen), "missing": list(self.missing)}


# ---------------------------------------------------------------------------------------------
# Generated sources (deterministic: same profile and env, same bytes)


def _body(prefix: str, profile: str | None, env: Mapping[str, str]) -> list[str]:
    """The hook code; ``prefix`` namespaces its names (``""`` in the module, ``_ENVFORGE_`` in a block)."""
    p = prefix
    lines = [f"{p}PROFILE = {profile!r}", f"{p}ENV = {{"]
    lines += [f"    {k!r}: {v!r}," for k, v in sorted(env.items())]
    lines += [
        "}",
        f"{p}APPLIED = ()",
        f"{p}KEPT = ()",
        "try:",
        "    import os as _envforge_os",
        f"    {p}APPLIED = tuple(k for k in {p}ENV if k not in _envforge_os.environ)",
        f"    {p}KEPT = tuple(k for k in {p}ENV if k not in {p}APPLIED)",
        f"    for _envforge_k in {p}APPLIED:",
        f"        _envforge_os.environ[_envforge_k] = {p}ENV[_envforge_k]",
        "except Exception as _envforge_exc:",
        "    import sys as _envforge_sys",
        "    if _envforge_sys.stderr is not None:",
        "        _envforge_sys.stderr.write('envforge: env profile %r not applied: %s: %s\\n' % (",
        f"            {p}PROFILE, type(_envforge_exc).__name__, str(_envforge_exc).partition('\\n')[0]))",
    ]
    return lines


def hook_source(profile: str | None, env: Mapping[str, str]) -> str:
    """Source of ``_envforge_env.py`` (pth mode): ``PROFILE``, ``ENV``, ``APPLIED``, ``KEPT``."""
    head = [f"{_HOOK_HEADER} {profile!r}. Do not edit: `envforge build` and `envforge apply-patches`",
            f"# rewrite it, `--revert` removes it. Imported at interpreter start by {PTH_FILE}; sets each",
            "# variable only when the caller has not (setdefault semantics). See docs/env-profiles.md."]
    return "\n".join([*head, *_body("", profile, env)]) + "\n"


def block_source(profile: str | None, env: Mapping[str, str]) -> str:
    """The marked block merged into ``sitecustomize.py`` (sitecustomize mode), ending in a newline."""
    return "\n".join([BLOCK_BEGIN, *_body("_ENVFORGE_", profile, env), BLOCK_END]) + "\n"


def pth_source() -> str:
    """The one line of ``envforge-env.pth``: import the hook; on failure, one warning line, no traceback.

    CPython 3.12 processes a venv's site-packages twice at start-up (``site.venv()`` and
    ``site.main()`` both call ``addsitepackages``), so the line is idempotent: a failed import is
    remembered as ``sys.modules['_envforge_env'] = None`` and warned about once.
    """
    code = (f"if '{HOOK_MODULE}' not in sys.modules:\n try:\n  import {HOOK_MODULE}\n except Exception as e:\n"
            f"  sys.modules['{HOOK_MODULE}'] = None\n"
            "  sys.stderr is None or sys.stderr.write('envforge: env profile hook not loaded (%s: %s); "
            "its variables are not set: run `envforge apply-patches` to repair or `--revert` to remove "
            f"{PTH_FILE}\\n' % (type(e).__name__, str(e).partition('\\n')[0]))")
    return f"import sys; exec({code!r})\n"


# ---------------------------------------------------------------------------------------------
# Install / revert


def _validate(profile: str | None, env: Mapping[str, str], mode: str) -> None:
    if mode not in MODES:
        raise InputError(f"env profile mode '{mode}' is not one of: {', '.join(MODES)}",
                         hint="use `pth` (the default) or `sitecustomize`")
    if profile is not None and not _PROFILE_NAME.match(profile):
        raise InputError(f"env profile name '{profile}' is not valid; use letters, digits, '-' and '_'")
    for key, value in env.items():
        if not _ENV_VAR.match(key):
            raise InputError(f"env profile '{profile}': '{key}' is not a valid environment variable name")
        if not isinstance(value, str) or "\0" in value:
            raise InputError(f"env profile '{profile}': {key} must be a string without NUL characters")
    found = profile_problems(env)
    if found:
        raise InputError(f"env profile '{profile}' cannot be installed:\n" + "\n".join("  " + f for f in found),
                         hint="fix the recipe's [env.*] table, re-lock, and rebuild (see docs/env-profiles.md)")


def profile_problems(env: Mapping[str, object]) -> tuple[str, ...]:
    """``"NAME: what is wrong"`` for each variable of a profile NCCL, CUDA or the process would
    misread (:func:`envforge.recipe.envvars.problems`), and for each variable read at process start
    (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``PYTHON*``: field case B31), which a start-up hook sets
    for child processes only. Empty: nothing to say."""
    from envforge.recipe.envvars import problems, startup_reader

    out = []
    for name, value in sorted(env.items()):
        out += [f"{name}: {msg}" for msg in problems(name, value)]
        if (reader := startup_reader(name)) is not None:
            out.append(f"{name}: read by {reader} when a process starts, before this hook runs: "
                       "child processes get it, the process itself runs without it")
    return tuple(out)


def _write(path: Path, data: bytes) -> None:
    """Write through a temp file and ``os.replace`` (never a half-written hook), keeping an
    existing file's mode, else ``0o666 & ~umask``: a 0600 ``.pth`` on a shared ``envs/`` would be
    skipped silently by other users' Pythons."""
    from envforge.core.fs import atomic_write

    atomic_write(path, data)


def _drop_bytecode(site_packages: Path, stem: str) -> None:
    """Remove ``__pycache__/<stem>.*.pyc``: a same-size rewrite within a second would keep stale bytecode."""
    for pyc in sorted((site_packages / "__pycache__").glob(f"{stem}.*.pyc")):
        pyc.unlink(missing_ok=True)


def _check_foreign(path: Path, ours: bytes) -> None:
    """Refuse to overwrite a file envforge did not write (``ours``: the start of envforge's bytes).

    :raises InputError: ``path`` holds other bytes, or is not a regular file (a FIFO, a directory, ...).
    """
    try:
        data = _read_hook(path)
    except FileNotFoundError:
        return
    if not data.startswith(ours):
        raise InputError(f"{path} exists and was not written by envforge; refusing to overwrite it",
                         hint="move it away, or use the sitecustomize mode")


def _read_hook(path: Path) -> bytes:
    """The bytes of a hook file (``.pth``, hook module, ``sitecustomize.py``), at most 1 MiB.

    :raises FileNotFoundError: it does not exist.
    :raises InputError: not a regular file (a FIFO would block the read for ever), or larger.
    """
    from envforge.core.textfile import SMALL_LIMIT, read_state

    return read_state(path, what="env profile hook", limit=SMALL_LIMIT,
                      hint="move it away, then reinstall the profile: `envforge apply-patches`")


def install(site_packages: Path, profile: str | None, env: Mapping[str, str], *, mode: str = "pth",
            python: Path | None = None, probe_env: Mapping[str, str] | None = None) -> ProfileInstall:
    """Install the env profile ``profile`` (variables ``env``) into ``site_packages``.

    A previous install is reverted first, so re-installing replaces cleanly (also across modes).
    ``profile is None`` with an empty ``env`` installs nothing. Bytes written are deterministic.

    :param mode: ``"pth"`` (default) or ``"sitecustomize"``.
    :param python: the interpreter using ``site_packages`` (sitecustomize mode only: asked which
        ``sitecustomize`` it imports); default ``<venv>/bin/python`` three levels above.
    :param probe_env: environment of that interpreter probe (default: this process's).
    :raises InputError: bad mode, profile name or variable, or a foreign file in the way.
    :raises SitecustomizeShadowed: sitecustomize mode, and another ``sitecustomize`` wins.
    """
    _validate(profile, env, mode)
    env = dict(sorted(env.items()))
    empty = profile is None and not env
    previous = read_installed(site_packages)
    was_absent = set(previous.absent_before if previous else ())
    absent = tuple(d for d in _TRACKED_DIRS if d in was_absent or not (site_packages / d).exists())
    if mode == "sitecustomize" and not empty:  # before touching anything: a refusal changes nothing
        _check_shadowing(site_packages, python or _venv_python(site_packages), probe_env)
    if previous is not None:
        revert(site_packages)
    if empty:
        return ProfileInstall(site_packages, None, mode, env, ())
    if mode == "pth":
        files, extra = _install_pth(site_packages, profile, env), None
    else:
        files, extra = _install_block(site_packages, profile, env)
    record = InstalledProfile(profile, mode, env, files, absent, extra)
    (site_packages / ".envforge").mkdir(exist_ok=True)
    _write(site_packages / RECORD, (json.dumps(record.as_dict(), indent=2) + "\n").encode())
    return ProfileInstall(site_packages, profile, mode, env, files)


def _venv_python(site_packages: Path) -> Path:
    """``<venv>/bin/python`` for ``<venv>/lib/python3.X/site-packages``."""
    venv = site_packages.parent.parent.parent
    if site_packages.parent.parent.name != "lib" or not env_python(venv).exists():
        raise InputError(f"cannot tell which interpreter uses {site_packages}, so cannot check which "
                         "sitecustomize it imports", hint="pass the environment, or use the .pth mode (the default)")
    return env_python(venv)


def _install_pth(site_packages: Path, profile: str | None, env: Mapping[str, str]) -> tuple[str, ...]:
    module = f"{HOOK_MODULE}.py"
    _check_foreign(site_packages / module, _HOOK_HEADER.encode())
    _check_foreign(site_packages / PTH_FILE, pth_source().encode())
    _write(site_packages / module, hook_source(profile, env).encode())
    _drop_bytecode(site_packages, HOOK_MODULE)
    _write(site_packages / PTH_FILE, pth_source().encode())
    return (PTH_FILE, module)


def _strip_block(text: str) -> tuple[str, bool]:
    """``text`` without envforge's marked block (and the block's own line ends); found or not."""
    start = text.find(BLOCK_BEGIN + "\n")
    end = text.find(BLOCK_END + "\n", start)
    if start < 0 or end < 0:
        return text, False
    return text[:start] + text[end + len(BLOCK_END) + 1:], True


def _install_block(site_packages: Path, profile: str | None,
                   env: Mapping[str, str]) -> tuple[tuple[str, ...], dict[str, Any]]:
    path = site_packages / SITECUSTOMIZE
    try:
        original, created = _read_hook(path).decode("utf-8"), False
    except FileNotFoundError:
        original, created = "", True
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text; envforge will not merge a block into it",
                         hint="use the .pth mode (the default)") from None
    original, _ = _strip_block(original)  # a stale block from a lost record
    separator = "\n" if original and not original.endswith("\n") else ""
    _write(path, (original + separator + block_source(profile, env)).encode())
    _drop_bytecode(site_packages, "sitecustomize")
    extra = {"created": created, "separator": separator,
             "original-sha256": hashlib.sha256(original.encode()).hexdigest()}
    return (SITECUSTOMIZE,), extra


_SITECUSTOMIZE_PROBE = r"""
import importlib.machinery, json, sys
mod = sys.modules.get("sitecustomize")
if mod is not None:
    origin = getattr(mod, "__file__", None)
else:
    path = sys.path[1:] if sys.path and sys.path[0] == "" else sys.path
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    origin = spec.origin if spec is not None else None
print(json.dumps({"origin": origin, "path": sys.path}))
"""


def _check_shadowing(site_packages: Path, python: Path, probe_env: Mapping[str, str] | None) -> None:
    """Raise :class:`SitecustomizeShadowed` when ``python`` would import another ``sitecustomize``."""
    data = run_probe(python, _SITECUSTOMIZE_PROBE, env=probe_env, timeout_s=60.0).data
    ours = site_packages / SITECUSTOMIZE
    dirs = [os.path.realpath(p or ".") for p in data["path"]]
    here = os.path.realpath(site_packages)
    if here not in dirs:
        raise InputError(f"{site_packages} is not on sys.path of {python}; its sitecustomize.py would never run",
                         hint="pass the environment's own interpreter, or use the .pth mode (the default)")
    origin = data["origin"]
    if origin is None or os.path.realpath(origin) == os.path.realpath(ours):
        return
    other_dir = os.path.realpath(os.path.dirname(origin))  # the file itself may be a link (Debian: to /etc)
    if (dirs.index(other_dir) if other_dir in dirs else -1) < dirs.index(here):
        raise SitecustomizeShadowed(
            f"sitecustomize mode would not run: {python} imports {origin}, which precedes {ours} on "
            "sys.path (only the first `sitecustomize` is imported)",
            hint="use the .pth mode (the default: `--env-mode pth`); a .pth hook runs whichever "
                 "sitecustomize the interpreter imports")


def revert(site_packages: Path) -> ProfileRevert:
    """Remove exactly what :func:`install` added; everything else stays byte-identical.

    pth mode: the ``.pth`` file, the hook module and its bytecode. sitecustomize mode: the marked
    block (the file is deleted only when envforge created it). Then the record, and directories in
    ``absent-before`` when left empty. Nothing installed: a no-op.

    :raises InputError: the record is unreadable.
    """
    record = read_installed(site_packages)
    if record is None:
        return ProfileRevert(site_packages, None)
    removed: list[str] = []
    restored: list[str] = []
    notes: list[str] = []
    if record.mode == "sitecustomize":
        _revert_block(site_packages, record, removed, restored, notes)
    else:
        for name in record.files:
            if (site_packages / name).exists():
                (site_packages / name).unlink()
                removed.append(name)
        _drop_bytecode(site_packages, HOOK_MODULE)
    (site_packages / RECORD).unlink()
    for d in record.absent_before:
        if (site_packages / d).is_dir() and not any((site_packages / d).iterdir()):
            (site_packages / d).rmdir()
    return ProfileRevert(site_packages, record.profile, tuple(removed), tuple(restored), tuple(notes))


def _revert_block(site_packages: Path, record: InstalledProfile, removed: list[str],
                  restored: list[str], notes: list[str]) -> None:
    path = site_packages / SITECUSTOMIZE
    extra = record.sitecustomize or {}
    _drop_bytecode(site_packages, "sitecustomize")
    try:
        data = _read_hook(path)
    except FileNotFoundError:
        notes.append(f"{path} no longer exists; nothing to take out")
        return
    text, found = _strip_block(data.decode("utf-8", errors="surrogateescape"))
    if not found:
        notes.append(f"{path} has no envforge block any more; left as it is")
        return
    sep = str(extra.get("separator", ""))
    if sep and text.endswith(sep):
        text = text[:-len(sep)]
    if extra.get("created") and not text:
        path.unlink()
        removed.append(SITECUSTOMIZE)
        return
    data = text.encode("utf-8", errors="surrogateescape")
    if hashlib.sha256(data).hexdigest() != extra.get("original-sha256"):
        notes.append(f"{path} was edited after install; only the envforge block was taken out")
    _write(path, data)
    restored.append(SITECUSTOMIZE)


def read_installed(site_packages: Path) -> InstalledProfile | None:
    """The installed profile's record, or ``None`` when no profile is installed.

    :raises InputError: the record exists but is not a regular file, is larger than 1 MiB, or is not
        a valid schema-1 record (names the file).
    """
    from envforge.patching.manifest import rebuild_hint
    from envforge.core.textfile import SMALL_LIMIT, read_state

    path = site_packages / RECORD
    try:
        data = json.loads(read_state(path, what="env profile record", limit=SMALL_LIMIT,
                                     hint=lambda: rebuild_hint(site_packages)))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise InputError(f"{path}: not a readable env profile record: {exc}",
                         hint="remove the hook files by hand, then re-install the profile") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("mode") not in MODES:
        raise InputError(f"{path}: not an env profile record of schema {SCHEMA} "
                         f"(schema={data.get('schema') if isinstance(data, dict) else None!r})",
                         hint="this envforge may be older than the one that wrote it")
    return InstalledProfile(profile=data.get("profile"), mode=data["mode"], env=dict(data.get("env", {})),
                            files=tuple(data.get("files", ())),
                            absent_before=tuple(data.get("absent-before", ())),
                            sitecustomize=data.get("sitecustomize"))


def installed_problems(site_packages: Path) -> tuple[str, ...]:
    """Differences between the recorded profile and the hook files on disk (for verify); empty: intact.

    Each entry names the file and what is wrong: missing, not a regular file (a FIFO, a directory:
    never opened) or larger than 1 MiB, or not the bytes envforge writes for the recorded profile
    (edited by hand, or written by another envforge). Line ends are compared as text reads them.

    :raises InputError: the record is unreadable.
    """
    record = read_installed(site_packages)
    if record is None:
        return ()
    if record.mode == "sitecustomize":
        expected = {SITECUSTOMIZE: block_source(record.profile, record.env)}
    else:
        expected = {PTH_FILE: pth_source(), f"{HOOK_MODULE}.py": hook_source(record.profile, record.env)}
    problems = []
    for name, text in expected.items():
        path = site_packages / name
        try:
            found = _read_hook(path).decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
        except FileNotFoundError:
            problems.append(f"{path}: missing (the env profile '{record.profile}' is recorded as installed)")
            continue
        except InputError as exc:  # a FIFO, a directory, too large: named, never read
            problems.append(exc.message)
            continue
        if record.mode == "sitecustomize" and text not in found:
            problems.append(f"{path}: the envforge block is missing or was edited")
        elif record.mode == "pth" and found != text:
            problems.append(f"{path}: not the bytes envforge writes for env profile '{record.profile}'")
    return tuple(problems)


# ---------------------------------------------------------------------------------------------
# What processes see (through the probe runner: the only code that starts the env's interpreter)


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
    record = os.path.join(purelib, ".envforge", "env-profile.json")
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
"""


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
    return ProfileView(python=python, site_packages=site, installed=read_installed(site),
                       active=data["active"], mode=data["mode"], hook=data["hook"],
                       profile=data["profile"], variables=tuple(variables), warnings=warnings)


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


def check_reach(python: Path, env: Mapping[str, str], *, flags: Sequence[str] = (),
                caller_env: Mapping[str, str] | None = None, timeout_s: float = 60.0) -> ReachReport:
    """Does a ``multiprocessing`` spawn child of ``python`` see the profile ``env`` (name -> value)?

    The probe removes the variables its own hook applied before spawning, so the child passes only
    if its own start-up applies the profile; variables the caller exported are expected with the
    caller's value. ``flags`` are interpreter flags (``("-I",)``); the spawn child inherits them.

    :param caller_env: the probe's environment (default: this process's).
    :raises envforge.core.probe.ProbeError: the interpreter could not run the probe.
    """
    keys = sorted(env)
    result = run_probe(python, _REACH_PROBE, args=[json.dumps(keys)], env=caller_env,
                       timeout_s=timeout_s, interpreter_flags=flags)
    kept = result.data["kept"]
    expected = {k: kept[k] if kept.get(k) is not None else env[k] for k in keys}
    return ReachReport(python, tuple(flags), expected, dict(result.data["seen"]))


def recorded_profile(site_packages: Path) -> tuple[str | None, dict[str, str]] | None:
    """The env profile the environment's lock records (``.envforge/pylock.toml``
    ``[tool.envforge]`` ``env-profile`` and ``env``), or None when the environment has no lock copy.

    :raises InputError: the lock copy is not a valid lock (names the file, key and reason:
        :func:`envforge.lock.read.read_lock_file`).
    """
    from envforge.lock.read import read_lock_file

    lock = site_packages / ".envforge" / "pylock.toml"
    if not lock.is_file():
        return None
    tool = read_lock_file(lock).envforge
    return tool.get("env-profile"), dict(tool.get("env", {}))
