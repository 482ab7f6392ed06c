"""Installing an env profile into a site-packages, recording it, reverting it, checking it.

:func:`install` writes the hook (:mod:`envforge.env.profile.source`) in one of two modes and records
what it wrote in ``<site-packages>/.envforge/env-profile.json`` (docs/architecture.md), so
:func:`revert` removes exactly that and leaves the rest byte-identical. Every hook file and the
record are written with :func:`envforge.core.fs.atomic_write` (never a half-written hook), keeping
an existing file's mode, else ``0o666 & ~umask``: a 0600 ``.pth`` on a shared ``envs/`` would be
skipped silently by other users' Pythons.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envforge.core.errors import CheckFailed, InputError
from envforge.core.fs import atomic_write, sha256_hex
from envforge.core.probe import env_python, run_probe
from envforge.core.state import STATE_DIR, StateDir
from envforge.core.textfile import SMALL_LIMIT, read_state
from envforge.env.profile.source import (
    HOOK_HEADER,
    HOOK_MODULE,
    MODES,
    PTH_FILE,
    SITECUSTOMIZE,
    block_source,
    cache_variables,
    hook_source,
    profile_problems,
    pth_source,
    strip_block,
)
from envforge.lock.read import read_lock_file
from envforge.patching.manifest import rebuild_hint

__all__ = [
    "SCHEMA",
    "InstalledProfile",
    "ProfileInstall",
    "ProfileRevert",
    "SitecustomizeShadowed",
    "generation_of",
    "install",
    "installed_problems",
    "read_installed",
    "recorded_profile",
    "revert",
]

#: The schema of ``env-profile.json``.
SCHEMA = 1
# Directories envforge may cause to exist; removed on revert when empty and absent before install.
_TRACKED_DIRS = (STATE_DIR, "__pycache__")
_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


class SitecustomizeShadowed(CheckFailed):
    """Another ``sitecustomize`` earlier on ``sys.path`` would be imported instead of envforge's (exit 1)."""


@dataclass(frozen=True, slots=True)
class InstalledProfile:
    """The record ``.envforge/env-profile.json`` of an installed profile.

    ``files`` are paths relative to site-packages that the hook occupies; ``absent_before`` the
    directories that did not exist before install; ``sitecustomize`` (sitecustomize mode only) has
    ``created`` (bool), ``separator`` (text inserted before the block) and ``original-sha256``.
    ``caches``: the kernel/compile cache variables the hook sets (name -> directory under the
    generation, :func:`envforge.env.profile.source.cache_variables`; field case B49).
    """

    profile: str | None
    mode: str
    env: Mapping[str, str]
    files: tuple[str, ...]
    absent_before: tuple[str, ...] = ()
    sitecustomize: Mapping[str, Any] | None = None
    caches: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The record's JSON shape, keys in a fixed order."""
        return {
            "schema": SCHEMA,
            "profile": self.profile,
            "mode": self.mode,
            "env": dict(self.env),
            "files": list(self.files),
            "absent-before": list(self.absent_before),
            "sitecustomize": dict(self.sitecustomize) if self.sitecustomize is not None else None,
            "caches": dict(self.caches),
        }


@dataclass(frozen=True, slots=True)
class ProfileInstall:
    """What :func:`install` wrote: ``files`` relative to ``site_packages`` (empty: nothing to do),
    ``caches`` the cache variables its hook sets."""

    site_packages: Path
    profile: str | None
    mode: str
    env: Mapping[str, str]
    files: tuple[str, ...]
    caches: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ProfileRevert:
    """What :func:`revert` did: ``removed`` files, ``restored`` files (block taken out), ``notes``."""

    site_packages: Path
    profile: str | None
    removed: tuple[str, ...] = ()
    restored: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _validate(profile: str | None, env: Mapping[str, str], mode: str, reviewed: Collection[str] = ()) -> None:
    if mode not in MODES:
        raise InputError(
            f"env profile mode '{mode}' is not one of: {', '.join(MODES)}",
            hint="use `pth` (the default) or `sitecustomize`",
        )
    if profile is not None and not _PROFILE_NAME.match(profile):
        raise InputError(f"env profile name '{profile}' is not valid; use letters, digits, '-' and '_'")
    for key, value in env.items():
        if not _ENV_VAR.match(key):
            raise InputError(f"env profile '{profile}': '{key}' is not a valid environment variable name")
        if not isinstance(value, str) or "\0" in value:
            raise InputError(f"env profile '{profile}': {key} must be a string without NUL characters")
    found = profile_problems(env, reviewed)
    if found:
        raise InputError(
            f"env profile '{profile}' cannot be installed:\n" + "\n".join("  " + f for f in found),
            hint="fix the recipe's [env.*] table, re-lock, and rebuild (see docs/env-profiles.md)",
        )


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
        raise InputError(
            f"{path} exists and was not written by envforge; refusing to overwrite it",
            hint="move it away, or use the sitecustomize mode",
        )


def _read_hook(path: Path) -> bytes:
    """The bytes of a hook file (``.pth``, hook module, ``sitecustomize.py``), at most 1 MiB.

    :raises FileNotFoundError: it does not exist.
    :raises InputError: not a regular file (a FIFO would block the read for ever), or larger.
    """
    return read_state(
        path,
        what="env profile hook",
        limit=SMALL_LIMIT,
        hint="move it away, then reinstall the profile: `envforge apply-patches`",
    )


def generation_of(site_packages: Path) -> Path | None:
    """The environment directory (a generation, links resolved) of ``<venv>/lib/python3.X/site-packages``,
    or None when ``site_packages`` is not laid out so (a bare directory: no caches to isolate)."""
    if (
        site_packages.name != "site-packages"
        or site_packages.parent.parent.name != "lib"
        or not site_packages.parent.name.startswith("python3")
    ):
        return None
    return Path(os.path.realpath(site_packages.parent.parent.parent))


def install(
    site_packages: Path,
    profile: str | None,
    env: Mapping[str, str],
    *,
    mode: str = "pth",
    python: Path | None = None,
    probe_env: Mapping[str, str] | None = None,
    caches: bool = True,
    reviewed: Collection[str] = (),
) -> ProfileInstall:
    """Install the env profile ``profile`` (variables ``env``) into ``site_packages``.

    A previous install is reverted first, so re-installing replaces cleanly (also across modes).
    With ``caches`` (the default) and a venv's site-packages, the hook also points the kernel and
    compile caches (:data:`envforge.env.profile.source.CACHE_VARIABLES`) under the generation
    (:func:`generation_of`), but those ``env`` sets itself (field case B49): a hook is then written
    even for no profile. ``profile is None`` with an empty ``env`` and no caches installs nothing.
    Bytes written are deterministic.

    :param mode: ``"pth"`` (default) or ``"sitecustomize"``.
    :param python: the interpreter using ``site_packages`` (sitecustomize mode only: asked which
        ``sitecustomize`` it imports); default ``<venv>/bin/python`` three levels above.
    :param probe_env: environment of that interpreter probe (default: this process's).
    :param reviewed: NCCL names the recipe's ``[nccl-unknown]`` lists (not refused as unknown).
    :raises InputError: bad mode, profile name or variable, or a foreign file in the way.
    :raises SitecustomizeShadowed: sitecustomize mode, and another ``sitecustomize`` wins.
    """
    _validate(profile, env, mode, reviewed)
    env = dict(sorted(env.items()))
    gen = generation_of(site_packages) if caches else None
    cache_env = cache_variables(str(gen), env) if gen is not None else {}
    empty = profile is None and not env and not cache_env
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
        files, extra = _install_pth(site_packages, profile, env, cache_env), None
    else:
        files, extra = _install_block(site_packages, profile, env, cache_env)
    record = InstalledProfile(profile, mode, env, files, absent, extra, cache_env)
    state = StateDir(site_packages)
    state.path.mkdir(exist_ok=True)
    atomic_write(state.profile_record, (json.dumps(record.as_dict(), indent=2) + "\n").encode())
    return ProfileInstall(site_packages, profile, mode, env, files, cache_env)


def _venv_python(site_packages: Path) -> Path:
    """``<venv>/bin/python`` for ``<venv>/lib/python3.X/site-packages``."""
    venv = site_packages.parent.parent.parent
    if site_packages.parent.parent.name != "lib" or not env_python(venv).exists():
        raise InputError(
            f"cannot tell which interpreter uses {site_packages}, so cannot check which sitecustomize it imports",
            hint="pass the environment, or use the .pth mode (the default)",
        )
    return env_python(venv)


def _install_pth(
    site_packages: Path, profile: str | None, env: Mapping[str, str], caches: Mapping[str, str]
) -> tuple[str, ...]:
    module = f"{HOOK_MODULE}.py"
    _check_foreign(site_packages / module, HOOK_HEADER.encode())
    _check_foreign(site_packages / PTH_FILE, pth_source().encode())
    atomic_write(site_packages / module, hook_source(profile, env, caches).encode())
    _drop_bytecode(site_packages, HOOK_MODULE)
    atomic_write(site_packages / PTH_FILE, pth_source().encode())
    return (PTH_FILE, module)


def _install_block(
    site_packages: Path, profile: str | None, env: Mapping[str, str], caches: Mapping[str, str]
) -> tuple[tuple[str, ...], dict[str, Any]]:
    path = site_packages / SITECUSTOMIZE
    try:
        original, created = _read_hook(path).decode("utf-8"), False
    except FileNotFoundError:
        original, created = "", True
    except UnicodeDecodeError:
        raise InputError(
            f"{path} is not UTF-8 text; envforge will not merge a block into it", hint="use the .pth mode (the default)"
        ) from None
    original, _ = strip_block(original)  # a stale block from a lost record
    separator = "\n" if original and not original.endswith("\n") else ""
    atomic_write(path, (original + separator + block_source(profile, env, caches)).encode())
    _drop_bytecode(site_packages, "sitecustomize")
    extra = {"created": created, "separator": separator, "original-sha256": sha256_hex(original.encode())}
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
        raise InputError(
            f"{site_packages} is not on sys.path of {python}; its sitecustomize.py would never run",
            hint="pass the environment's own interpreter, or use the .pth mode (the default)",
        )
    origin = data["origin"]
    if origin is None or os.path.realpath(origin) == os.path.realpath(ours):
        return
    other_dir = os.path.realpath(os.path.dirname(origin))  # the file itself may be a link (Debian: to /etc)
    if (dirs.index(other_dir) if other_dir in dirs else -1) < dirs.index(here):
        raise SitecustomizeShadowed(
            f"sitecustomize mode would not run: {python} imports {origin}, which precedes {ours} on "
            "sys.path (only the first `sitecustomize` is imported)",
            hint="use the .pth mode (the default: `--env-mode pth`); a .pth hook runs whichever "
            "sitecustomize the interpreter imports",
        )


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
    StateDir(site_packages).profile_record.unlink()
    for d in record.absent_before:
        if (site_packages / d).is_dir() and not any((site_packages / d).iterdir()):
            (site_packages / d).rmdir()
    return ProfileRevert(site_packages, record.profile, tuple(removed), tuple(restored), tuple(notes))


def _revert_block(
    site_packages: Path, record: InstalledProfile, removed: list[str], restored: list[str], notes: list[str]
) -> None:
    path = site_packages / SITECUSTOMIZE
    extra = record.sitecustomize or {}
    _drop_bytecode(site_packages, "sitecustomize")
    try:
        data = _read_hook(path)
    except FileNotFoundError:
        notes.append(f"{path} no longer exists; nothing to take out")
        return
    text, found = strip_block(data.decode("utf-8", errors="surrogateescape"))
    if not found:
        notes.append(f"{path} has no envforge block any more; left as it is")
        return
    sep = str(extra.get("separator", ""))
    if sep and text.endswith(sep):
        text = text[: -len(sep)]
    if extra.get("created") and not text:
        path.unlink()
        removed.append(SITECUSTOMIZE)
        return
    data = text.encode("utf-8", errors="surrogateescape")
    if sha256_hex(data) != extra.get("original-sha256"):
        notes.append(f"{path} was edited after install; only the envforge block was taken out")
    atomic_write(path, data)
    restored.append(SITECUSTOMIZE)


def read_installed(site_packages: Path) -> InstalledProfile | None:
    """The installed profile's record, or ``None`` when no profile is installed.

    :raises InputError: the record exists but is not a regular file, is larger than 1 MiB, or is not
        a valid schema-1 record (names the file).
    """
    path = StateDir(site_packages).profile_record
    try:
        data = json.loads(
            read_state(path, what="env profile record", limit=SMALL_LIMIT, hint=lambda: rebuild_hint(site_packages))
        )
    except FileNotFoundError:
        return None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise InputError(
            f"{path}: not a readable env profile record: {exc}",
            hint="remove the hook files by hand, then re-install the profile",
        ) from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA or data.get("mode") not in MODES:
        raise InputError(
            f"{path}: not an env profile record of schema {SCHEMA} "
            f"(schema={data.get('schema') if isinstance(data, dict) else None!r})",
            hint="this envforge may be older than the one that wrote it",
        )
    return InstalledProfile(
        profile=data.get("profile"),
        mode=data["mode"],
        env=dict(data.get("env", {})),
        files=tuple(data.get("files", ())),
        absent_before=tuple(data.get("absent-before", ())),
        sitecustomize=data.get("sitecustomize"),
        caches=dict(data.get("caches") or {}),
    )


def installed_problems(site_packages: Path) -> tuple[str, ...]:
    """Differences between the recorded profile and the hook files on disk (for verify); empty: intact.

    Each entry names the file and what is wrong: missing, not a regular file (a FIFO, a directory:
    never opened) or larger than 1 MiB, or not the bytes envforge writes for the recorded profile
    (edited by hand, or written by another envforge), or recorded kernel caches that are not under
    this generation. Line ends are compared as text reads them.

    :raises InputError: the record is unreadable.
    """
    record = read_installed(site_packages)
    if record is None:
        return ()
    if record.mode == "sitecustomize":
        expected = {SITECUSTOMIZE: block_source(record.profile, record.env, record.caches)}
    else:
        expected = {PTH_FILE: pth_source(), f"{HOOK_MODULE}.py": hook_source(record.profile, record.env, record.caches)}
    problems = []
    gen = generation_of(site_packages)
    if gen is not None and record.caches and record.caches != cache_variables(str(gen), record.env):
        problems.append(
            f"{StateDir(site_packages).profile_record}: its kernel caches are not under this "
            f"generation {gen} (copied from another environment?)"
        )
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


def recorded_profile(site_packages: Path) -> tuple[str | None, dict[str, str]] | None:
    """The env profile the environment's lock records (``.envforge/pylock.toml``
    ``[tool.envforge]`` ``env-profile`` and ``env``), or None when the environment has no lock copy.

    :raises InputError: the lock copy is not a valid lock (names the file, key and reason:
        :func:`envforge.lock.read.read_lock_file`).
    """
    lock = StateDir(site_packages).lock_copy
    if not lock.is_file():
        return None
    tool = read_lock_file(lock).envforge
    return tool.get("env-profile"), dict(tool.get("env", {}))
