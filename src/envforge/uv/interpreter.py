"""Finding the Python a recipe asks for on this machine.

Order: an explicit ``--python PATH``; pyenv installs under ``$PYENV_ROOT/versions`` (default
``~/.pyenv``; the version is the directory name, so no interpreter is started); then uv's own
discovery (``uv python find``, with pyenv's shims left off PATH because a shim for a version that
is not pyenv's global one makes uv's query fail). Python downloads are
never attempted: GPU boxes are often air-gapped, and a lock must not depend on what was fetched.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from envforge.core.errors import InputError
from envforge.uv.run import UvError, run_uv

__all__ = ["Interpreter", "PythonNotFound", "find_python"]


class PythonNotFound(InputError):
    """No interpreter matching the recipe's Python was found (exit 2)."""


@dataclass(frozen=True, slots=True)
class Interpreter:
    """A Python interpreter: ``path`` and its ``version`` (``"3.12.1"``); ``source`` says how found."""

    path: Path
    version: str
    source: str


def _version_of(path: Path) -> str | None:
    try:
        out = subprocess.run(
            [str(path), "-c", "import platform; print(platform.python_version())"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _matches(version: str, wanted: str) -> bool:
    return version == wanted or version.startswith(wanted + ".")


def _via_uv(wanted: str) -> Path | None:
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if not p.rstrip("/").endswith(".pyenv/shims")
    )
    try:
        res = run_uv(["python", "find", "--no-config", wanted], env={"PATH": path}, timeout_s=60)
    except UvError as exc:
        if exc.deadline_s is not None:  # the caller's time is up: not "no interpreter"
            raise
        return None
    found = res.stdout.strip()
    return Path(found) if found else None


def _via_pyenv(wanted: str) -> list[Path]:
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if not root.is_dir():
        return []

    def key(p: Path) -> tuple[int, ...]:
        return tuple(int(x) for x in re.findall(r"\d+", p.name)[:3])

    dirs = [d for d in root.iterdir() if re.fullmatch(r"\d+\.\d+\.\d+", d.name) and _matches(d.name, wanted)]
    return [d / "bin" / "python3" for d in sorted(dirs, key=key, reverse=True)]


def find_python(wanted: str, explicit: Path | None = None) -> Interpreter:
    """Find an interpreter whose version is ``wanted`` (``"3.12"`` or ``"3.12.1"``).

    :raises PythonNotFound: ``explicit`` is not a matching interpreter, or none was found; the
        message names the version needed and how to provide it.
    """
    if explicit is not None:
        version = _version_of(explicit)
        if version is None or not _matches(version, wanted):
            raise PythonNotFound(
                f"--python {explicit} is {'not a Python interpreter' if version is None else 'Python ' + version}; "
                f"the recipe needs Python {wanted}"
            )
        return Interpreter(explicit, version, "--python")
    for candidate in _via_pyenv(wanted):  # a pyenv install's version is its directory name
        if candidate.exists():
            return Interpreter(candidate, candidate.parent.parent.name, "pyenv")
    found = _via_uv(wanted)
    if found is not None and (version := _version_of(found)) and _matches(version, wanted):
        return Interpreter(found, version, "uv python find")
    raise PythonNotFound(
        f"no Python {wanted} found on this machine (searched pyenv installs and uv's discovery; "
        "envforge never downloads Pythons)",
        hint=f"install Python {wanted} (e.g. `pyenv install {wanted}` or `apt-get install python{wanted}`) "
        "or pass --python PATH",
    )
