"""Distributions the base interpreter provides (``[provided]``): made visible to a generation, never installed.

Teams build on images whose torch is preinstalled (an NGC container, a cloud GPU image whose
``/opt/torch/.venv`` holds ``torch 2.11.0+cu130``). A recipe declares those distributions in
``[provided]``; ``lock`` excludes them from the resolution (uv's ``--excludes``), and a build adds the
base interpreter's site-packages to the generation's ``sys.path`` with one ``.pth`` file of plain
path lines (:data:`PTH_NAME`), written after ``uv pip sync``.

Why a ``.pth`` and not ``include-system-site-packages``: a venv's ``system site packages`` are
those of the interpreter it was made from *after* uv follows it to its base (``sys.base_prefix``).
When the base is itself a venv (the H200 image's ``/opt/torch/.venv``, most container venvs), that
is ``/usr/lib/python3.12``, not the directory that holds torch. The ``.pth`` names the directories
the given interpreter itself reports (:func:`site.getsitepackages`), runs no code (path lines only,
so verify's start-up check has nothing to judge), and comes after the generation's own
site-packages, so a distribution of the lock wins over the base's copy of it. The base's own
``.pth`` files are not processed (a path line adds no site directory): an editable install in the
base is not visible, which verify's ``provided`` check then reports as absent.

The record ``.envforge/provided.json`` (:attr:`envforge.core.state.StateDir.provided_record`) keeps
the base interpreter, its directories and the declared rows; verify's ``provided`` check and the
start-up scan read it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from envforge.core.fs import atomic_write
from envforge.core.probe import run_probe
from envforge.core.state import StateDir
from envforge.recipe.model import Provided

__all__ = ["PTH_NAME", "ProvidedLink", "base_site_dirs", "link_base", "read_link"]

#: The ``.pth`` file a build writes into the generation's site-packages.
PTH_NAME = "_envforge_provided.pth"

_SITE_DIRS = "import json, site, sys\nprint(json.dumps({'dirs': list(site.getsitepackages()), 'prefix': sys.prefix}))\n"


@dataclass(frozen=True, slots=True)
class ProvidedLink:
    """What :func:`link_base` wrote: the base ``python``, its site ``dirs`` (in ``sys.path`` order)
    and the ``.pth`` file's path."""

    python: Path
    dirs: tuple[str, ...]
    pth: Path


def base_site_dirs(python: Path) -> tuple[str, ...]:
    """The site-packages directories of ``python`` (the base interpreter), as it reports them.

    :raises envforge.core.probe.ProbeError: the interpreter cannot run (exit 3).
    """
    data = run_probe(python, _SITE_DIRS, interpreter_flags=["-I"], timeout_s=60.0).data
    return tuple(str(d) for d in data["dirs"] if Path(d).is_dir())


def link_base(sp: Path, python: Path, provided: Sequence[Provided]) -> ProvidedLink:
    """Write :data:`PTH_NAME` (one path line per base site directory) and the record into ``sp``.

    :param sp: the generation's site-packages.
    :param python: the base interpreter the generation was made from (``--python`` or discovery).
    :param provided: the declared distributions (recorded; verify proves them).
    :raises envforge.core.probe.ProbeError: the base interpreter cannot run (exit 3).
    """
    own = sp.resolve()
    dirs = tuple(d for d in base_site_dirs(python) if Path(d).resolve() != own)
    pth = sp / PTH_NAME
    atomic_write(pth, "".join(f"{d}\n" for d in dirs).encode())
    state = StateDir(sp)
    state.path.mkdir(exist_ok=True)
    record = {
        "schema": 1,
        "base-python": str(python),
        "site-packages": list(dirs),
        "pth": PTH_NAME,
        "provided": [p.as_dict() for p in provided],
    }
    atomic_write(state.provided_record, (json.dumps(record, indent=2) + "\n").encode())
    return ProvidedLink(python, dirs, pth)


def read_link(sp: Path) -> dict[str, object] | None:
    """The record :func:`link_base` wrote into ``sp``, or None (no ``[provided]``, or unreadable)."""
    try:
        data = json.loads(StateDir(sp).provided_record.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
