"""Does the interpreter import the file a patch edits? (field case B43)

A patched ``.py`` that the import system never loads is no patch at all: charset-normalizer 3.4.2
ships ``charset_normalizer/md.py`` beside ``md.cpython-3XX-x86_64-linux-gnu.so``, and
``importlib``'s ``FileFinder`` tries ``EXTENSION_SUFFIXES`` before ``SOURCE_SUFFIXES``, so
``import charset_normalizer.md`` loads the compiled module and the edited source never runs.

:func:`resolve_modules` asks the environment's own interpreter (its version's suffixes, its
``sys.path``, its meta path) which file each module name resolves to, with a probe
(``import_probe.py``, run by :func:`envforge.core.probe.run_probe`) that executes no module of the
environment: top-level names through ``importlib.util.find_spec``, submodules through
``importlib.machinery.PathFinder.find_spec`` on the parent's ``__path__`` as computed from the
filesystem (``find_spec`` of a submodule would import its parents and run their ``__init__``).
:func:`not_imported` is pure: the resolution chain in, a message out when the module resolves to
another file (or to none). What it cannot prove: a package ``__init__`` that changes its
``__path__`` when it runs, a custom finder that serves a submodule, a module loaded at run time
from a zip or by ``exec`` of the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from envforge.core.probe import run_probe

__all__ = ["Resolution", "env_interpreter", "module_name", "not_imported", "resolve_modules", "shadow_fix"]

_PROBE = "import_probe.py"


@dataclass(frozen=True, slots=True)
class Resolution:
    """What the interpreter resolves for one patched file.

    :ivar path: the file, relative to site-packages.
    :ivar module: its dotted module name.
    :ivar chain: one mapping per level of the name (``module``, ``origin``, ``loader``,
        ``locations``, or ``error``), top level first, as ``import_probe.py`` printed it.
    :ivar extension_suffixes: the interpreter's ``importlib.machinery.EXTENSION_SUFFIXES``.
    """

    path: str
    module: str
    chain: tuple[Mapping[str, Any], ...]
    extension_suffixes: tuple[str, ...] = ()


def module_name(path: str) -> str | None:
    """The dotted module name of ``path`` (relative to site-packages): ``pkg/mod.py`` ->
    ``pkg.mod``, ``pkg/__init__.py`` -> ``pkg``; None for a file that is not an importable
    ``.py`` module (another suffix, a part that is not an identifier)."""
    parts = path.split("/")
    if not parts[-1].endswith(".py"):
        return None
    parts[-1] = parts[-1][:-3]
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(p.isidentifier() for p in parts):
        return None
    return ".".join(parts)


def env_interpreter(site_packages: Path) -> Path | None:
    """The interpreter of the virtual environment ``site_packages`` belongs to
    (``<env>/lib/pythonX.Y/site-packages`` with ``<env>/pyvenv.cfg`` and ``<env>/bin/python``),
    or None (a bare directory, such as ``apply-patches --site-packages`` on an unpacked wheel)."""
    if len(site_packages.parts) < 4 or site_packages.parent.parent.name != "lib":
        return None
    root = site_packages.parent.parent.parent
    python = root / "bin" / "python"
    return python if (root / "pyvenv.cfg").is_file() and python.exists() else None


def resolve_modules(
    python: Path, paths: Iterable[str], *, env: Mapping[str, str] | None = None, timeout_s: float = 60.0
) -> dict[str, Resolution]:
    """Ask ``python`` which file each of ``paths`` (relative to its site-packages) resolves to.

    Paths that are not importable modules (:func:`module_name`) are left out; no paths, no probe.

    :raises envforge.core.probe.ProbeError: the interpreter cannot run the probe (exit 3).
    """
    names = {p: n for p in dict.fromkeys(paths) if (n := module_name(p)) is not None}
    if not names:
        return {}
    script = (resources.files("envforge.patching") / _PROBE).read_text(encoding="utf-8")
    data = run_probe(
        python,
        script,
        args=[json.dumps({"modules": names})],
        env=dict(env) if env is not None else None,
        timeout_s=timeout_s,
    ).data
    suffixes = tuple(str(s) for s in data.get("extension_suffixes", ()))
    return {p: Resolution(p, n, tuple(data.get("modules", {}).get(p, ())), suffixes) for p, n in names.items()}


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


def _shown(site_packages: Path, origin: str) -> str:
    root = _real(site_packages)
    real = _real(origin)
    return os.path.relpath(real, root) if real.startswith(root + os.sep) else origin


def not_imported(site_packages: Path, res: Resolution) -> str | None:
    """Why ``import <res.module>`` does not load ``site_packages / res.path``, or None when it
    does. Names the file the interpreter loads instead (relative to site-packages when it is
    there), or the package level where the name leaves site-packages or stops resolving."""
    want = _real(site_packages / res.path)
    chain: Sequence[Mapping[str, Any]] = res.chain
    if not chain:
        return f"the interpreter did not resolve {res.module}"
    last = chain[-1]
    if "error" in last:
        return f"the interpreter cannot resolve {last['module']}: {last['error']}"
    if last["module"] == res.module and last.get("origin") and _real(last["origin"]) == want:
        return None
    parts = res.path.split("/")
    for i, entry in enumerate(chain[:-1] if last["module"] == res.module else chain):
        pkg_dir = _real(site_packages.joinpath(*parts[: i + 1]))
        locations = entry.get("locations") or []
        if entry["module"] != res.module and pkg_dir not in {_real(p) for p in locations}:
            where = entry.get("origin") or ", ".join(locations) or "nowhere"
            return (
                f"the interpreter imports package {entry['module']} from {_shown(site_packages, where)}, "
                f"not from this site-packages"
            )
    if last["module"] != res.module or last.get("origin") is None:
        return f"the interpreter finds no module {res.module} (import {res.module} fails or loads no file)"
    origin = str(last["origin"])
    extension = next((s for s in res.extension_suffixes if origin.endswith(s)), None)
    what = (
        (
            f", a compiled extension module (the import system tries the extension suffixes "
            f"{', '.join(res.extension_suffixes)} before .py)"
        )
        if extension
        else ""
    )
    return f"the interpreter imports {res.module} from {_shown(site_packages, origin)}{what}"


def shadow_fix(distribution: str, patchset_file: str) -> str:
    """The next step for a patch whose file the interpreter does not import."""
    return (
        f"patch the code the interpreter runs: install a build of {distribution} without that module (its "
        f"pure-Python py3-none-any wheel, if it publishes one) and re-lock, or remove the patchset from the "
        f"recipe; or narrow `versions` in {patchset_file} to exclude this release"
    )
