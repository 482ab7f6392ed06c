"""Start-up code: what every interpreter start of the environment runs before anyone's code, and who owns it.

At every start (not ``python -S``) CPython's ``site`` module (``Lib/site.py``) reads, for each site
directory (the environment's site-packages; with ``include-system-site-packages`` the base's; the
user site where enabled), every ``*.pth`` file in name order and ``exec``\\ s each line that starts
with ``import `` or ``import<TAB>`` (``addpackage``: ``#`` lines and blank lines are skipped, other
lines are path entries), then imports the first ``sitecustomize`` and ``usercustomize`` module on
``sys.path``. RECORD integrity (:mod:`.records`) judges only files some RECORD lists, so a file
nobody installed, such as the compromised litellm 1.82.8 wheel's ``litellm_init.pth`` or a stray
``sitecustomize.py`` (field case B36), was invisible.

Ownership: a file of site-packages is owned when a distribution's RECORD lists it, it lies in an
installed distribution's ``*.dist-info`` or in envforge's ``.envforge/`` state, envforge's env
profile record or patch manifest names it, it is the venv tool's own hook (``_virtualenv.pth``
holding exactly ``import _virtualenv``, and ``_virtualenv.py``, in a venv whose ``pyvenv.cfg``
names uv or virtualenv), or it is ``__pycache__`` bytecode of an owned ``.py``. Unowned start-up
code is a ``startup-code`` finding; every start-up hook, owned or not, is named in a note; other
unowned files are listed in a note (information: they run only when something imports them).
Outside the environment, the other site directories are judged by their own RECORDs
(``startup-code-outside``); a ``sitecustomize`` of the base interpreter's standard library (Debian
and Ubuntu ship one) is named, never judged.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.plural import counted
from envforge.core.state import STATE_DIR
from envforge.core.textfile import file_kind, read_state
from envforge.env.fingerprint import STARTUP_MODULES, startup_files
from envforge.env.profile.source import SITECUSTOMIZE, strip_block
from envforge.env.provided import read_link
from envforge.installed.distributions import Installed, RecordEntry, installed_distributions, read_record
from envforge.verify.findings import Finding
from envforge.verify.records import PatchedFile

__all__ = [
    "StartupHook",
    "StartupScan",
    "blocking_startup_files",
    "check_outside",
    "hook_notes",
    "pth_import_lines",
    "scan_site_dir",
    "startup_findings",
]

_SHOWN = 100  # characters of an import line a finding quotes
_LISTED = 10  # unowned file names a note lists


@dataclass(frozen=True, slots=True)
class StartupHook:
    """One file ``site`` runs at interpreter start: ``name`` relative to its site directory
    ``site_dir``; ``owner`` (``"six 1.17.0"``, ``"the envforge env profile 'pcie'"``, ``"the venv
    (uv 0.4.30)"``, ``"the interpreter"``) or None; ``lines`` the lines it executes (a ``.pth``
    file's import lines; ``()`` for a module)."""

    site_dir: str
    name: str
    owner: str | None
    lines: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StartupScan:
    """A site directory's start-up ``hooks`` (sorted by name) and its ``unowned`` other files
    (paths relative to it, sorted; empty when the walk was not asked for)."""

    hooks: tuple[StartupHook, ...]
    unowned: tuple[str, ...]


def pth_import_lines(data: bytes) -> tuple[str, ...]:
    """The lines of a ``.pth`` file that ``site.addpackage`` executes: those starting with
    ``import `` or ``import\\t`` exactly (no leading blank). A leading UTF-8 BOM is dropped (3.13
    decodes ``utf-8-sig``) and lines are split by :meth:`str.splitlines`, which splits wherever
    text-mode reading does and more, so no executed line is missed."""
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    return tuple(line for line in text.splitlines() if line.startswith(("import ", "import\t")))


def _venv_tool(sp: Path) -> str | None:
    """``uv 0.4.30`` / ``virtualenv 20.26.6`` from the ``pyvenv.cfg`` three levels above, or None."""
    cfg = sp.parent.parent.parent / "pyvenv.cfg"
    try:
        lines = cfg.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    keys = {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in lines)}
    tool = next((t for t in ("uv", "virtualenv") if t in keys), None)
    return f"{tool} {keys[tool]}" if tool else None


def _owners(
    sp: Path,
    records: Mapping[Installed, Sequence[RecordEntry]],
    profile: Mapping[str, Any] | None,
    patched: Iterable[PatchedFile],
) -> dict[str, str]:
    """Path relative to ``sp`` (normalised) -> who owns it, for every file a record names."""
    owners: dict[str, str] = {}
    for dist, entries in records.items():
        for e in entries:
            rel = os.path.normpath(e.path)
            if not rel.startswith(".."):
                owners.setdefault(rel, f"{dist.name} {dist.version}")
    for p in patched:  # a patchset may add a file no RECORD lists
        owners.setdefault(os.path.normpath(p.path), f"envforge patchset {p.patchset}")
    if profile:
        named = profile.get("profile")  # None: a build with no env profile still installs the (empty) hook
        name = f"the envforge env profile {named!r}" if named else "envforge (no env profile)"
        for f in profile.get("files", ()):
            merged = f == SITECUSTOMIZE and f not in owners and not (profile.get("sitecustomize") or {}).get("created")
            if merged and _foreign_text(sp / f):  # merged into a file nobody owns: the rest is not envforge's
                continue
            owners.setdefault(os.path.normpath(f), name)
    link = read_link(sp)
    if link and isinstance(link.get("pth"), str):  # path lines only; its directories are the base's
        owners.setdefault(os.path.normpath(str(link["pth"])), "the envforge [provided] link")
    tool = _venv_tool(sp)
    if tool and "_virtualenv.pth" not in owners and _read(sp / "_virtualenv.pth").strip() == b"import _virtualenv":
        owners["_virtualenv.pth"] = owners.setdefault("_virtualenv.py", f"the venv ({tool})")
    return owners


def _read(path: Path) -> bytes:
    try:
        return read_state(path, what="start-up file")
    except FileNotFoundError:
        return b""


def _foreign_text(path: Path) -> bool:
    """The file holds more than envforge's marked block (text someone else wrote)."""
    rest, _ = strip_block(_read(path).decode("utf-8", errors="replace"))
    return bool(rest.strip())


def _owned(rel: str, owners: Mapping[str, str]) -> bool:
    """Owned by a record, or ``__pycache__`` bytecode of an owned ``.py``."""
    if rel in owners:
        return True
    parent, name = os.path.split(rel)
    if os.path.basename(parent) == "__pycache__" and name.endswith(".pyc"):
        return os.path.join(os.path.dirname(parent), name.split(".", 1)[0] + ".py") in owners
    return False


def _walk(sp: Path, owners: Mapping[str, str], skip: set[str]) -> list[str]:
    """Files under ``sp`` (relative, sorted) that :func:`_owned` does not own; top-level ``skip``
    directories (``.envforge``, installed ``*.dist-info``) are not entered."""
    out = []
    for root, dirs, files in os.walk(sp):
        rel_root = os.path.relpath(root, sp)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d not in skip]
            rel_root = ""
        out += [r for f in files if not _owned(r := os.path.join(rel_root, f), owners)]
    return sorted(out)


def scan_site_dir(
    sp: Path,
    records: Mapping[Installed, Sequence[RecordEntry]] | None = None,
    *,
    profile: Mapping[str, Any] | None = None,
    patched: Iterable[PatchedFile] = (),
    walk: bool = True,
) -> StartupScan:
    """The start-up hooks of the site directory ``sp`` with their owners, and (``walk``) every other
    file of it that nothing owns.

    :param records: RECORD rows by distribution (read from ``sp`` when None).
    :param profile: envforge's installed env profile record (``.envforge/env-profile.json``) as a mapping.
    :param patched: the patch manifest's entries.
    :raises InputError: a start-up file is larger than 64 MiB or unreadable (names it).
    """
    if records is None:
        records = {d: read_record(d) for d in installed_distributions(sp).values()}
    owners = _owners(sp, records, profile, patched)
    hooks = []
    for name in startup_files(sp):
        if name.endswith(".pth"):
            lines = pth_import_lines(_read(sp / name))
            if not lines:
                continue  # path entries only: listed with the other files when nothing owns it
        else:
            lines = ()
        hooks.append(StartupHook(str(sp), name, owners.get(name), lines))
    unowned: list[str] = []
    if walk:
        hooked = {h.name for h in hooks}
        skip = {STATE_DIR, *(d.dist_info.name for d in records)}
        unowned = [f for f in _walk(sp, owners, skip) if f not in hooked]
    return StartupScan(tuple(hooks), tuple(unowned))


def _what_runs(hook: StartupHook) -> str:
    if not hook.lines:
        module = hook.name.split("/", 1)[0].split(".", 1)[0]
        return f"`{module}` imported at every interpreter start (site imports the first one on sys.path)"
    first = hook.lines[0] if len(hook.lines[0]) <= _SHOWN else hook.lines[0][:_SHOWN] + "…"
    more = f" (+{len(hook.lines) - 1} more import lines)" if len(hook.lines) > 1 else ""
    return f"executed at every interpreter start: {first}{more}"


def startup_findings(scan: StartupScan) -> list[Finding]:
    """A ``startup-code`` finding per unowned hook of the environment's own site-packages: a fresh
    generation from the lock holds only what the lock installs, so a rebuild removes it."""
    return [
        Finding(
            "startup-code",
            h.name,
            "start-up code that a distribution's RECORD or envforge installed",
            f"{_what_runs(h)}; no RECORD owns it",
            "find out what wrote it (a package that writes files at install or run time, field case B36) "
            "and treat what the environment's processes could read as exposed; then remove it, or rebuild: "
            "`envforge build` (a fresh generation holds only what the lock installs)",
        )
        for h in scan.hooks
        if h.owner is None
    ]


def _under(path: str, dirs: Iterable[str]) -> str | None:
    real = os.path.realpath(path)
    return next((d for d in dirs if d and (real + os.sep).startswith(os.path.realpath(d) + os.sep)), None)


def _entry_under(path: str, dirs: Iterable[str]) -> str | None:
    """The directory of ``dirs`` that holds the directory entry ``path`` (its parent resolved, the
    entry itself not): Debian and Ubuntu ship ``/usr/lib/python3.X/sitecustomize.py`` as a symlink to
    ``/etc/python3.X/sitecustomize.py`` (package python3.X-minimal), so the entry is the standard
    library's even though the file it points to is under /etc."""
    entry = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    return next((d for d in dirs if d and (entry + os.sep).startswith(os.path.realpath(d) + os.sep)), None)


def check_outside(sp: Path, site: Mapping[str, Any]) -> tuple[list[StartupHook], list[Finding]]:
    """Start-up code outside the environment's site-packages that its interpreter runs, from the
    environment probe's ``site`` (``dirs``: the site directories site processed; ``stdlib``; the
    files of the ``sitecustomize``/``usercustomize`` modules it imported).

    Another site directory's hooks are judged by that directory's RECORDs; a customize module in the
    base's standard library is the interpreter's (named); one anywhere else (PYTHONPATH, a ``.pth``
    path line) is owned by nothing. Unowned ones are ``startup-code-outside`` findings: a rebuild of
    the environment keeps them.
    """
    here = os.path.realpath(sp)
    dirs = sorted({os.path.realpath(d) for d in site.get("dirs") or ()} - {here})
    hooks: list[StartupHook] = []
    for d in dirs:
        hooks += scan_site_dir(Path(d), walk=False).hooks
    for module in STARTUP_MODULES:
        path = site.get(module)
        if not path or _under(path, [here, *dirs]):
            continue
        stdlib = _under(path, site.get("stdlib") or ()) or _entry_under(path, site.get("stdlib") or ())
        hooks.append(StartupHook(os.path.dirname(path), os.path.basename(path), "the interpreter" if stdlib else None))
    fix = (
        "outside this environment, so a rebuild keeps it: remove it (or its PYTHONPATH entry), or build from an "
        "interpreter without it; accept it with a [[verify.accept]] entry only after reading it"
    )
    found = [
        Finding(
            "startup-code-outside",
            os.path.join(h.site_dir, h.name),
            "start-up code that a distribution's RECORD owns",
            f"{_what_runs(h)}; no RECORD owns it",
            fix,
        )
        for h in hooks
        if h.owner is None
    ]
    return hooks, found


def hook_notes(hooks: Sequence[StartupHook], unowned: Sequence[str], sp: Path) -> list[str]:
    """One note naming every start-up hook and its owner (a reviewer sees a new one appear), and
    one listing the other files of site-packages nothing owns (at most ten names)."""
    notes = []
    if hooks:
        named = ", ".join(
            f"{h.name if h.site_dir == str(sp) else os.path.join(h.site_dir, h.name)} ({h.owner or 'owned by nothing'})"
            for h in hooks
        )
        notes.append(f"start-up code run at every interpreter start: {named}")
    if unowned:
        shown = ", ".join(unowned[:_LISTED]) + (f" (+{len(unowned) - _LISTED} more)" if len(unowned) > _LISTED else "")
        notes.append(
            f"{counted(len(unowned), 'file')} in site-packages that no RECORD and no envforge record owns "
            f"(not run at start-up; they run only when imported): {shown}"
        )
    return notes


def blocking_startup_files(sp: Path, python: Path) -> list[tuple[Path, str]]:
    """Files the interpreter ``python`` opens at every start that are not regular files, with what
    they are (``"a FIFO"``...): ``open()`` of a FIFO blocks until a writer comes, so the interpreter,
    and every probe verify runs in it, would hang there (fault suite N46).

    Checked: ``pyvenv.cfg`` beside ``python``'s directory and one level up (where CPython's
    ``getpath`` looks, from the unresolved executable path), and each top-level ``*.pth`` file and
    ``sitecustomize``/``usercustomize`` module of ``sp`` (what ``site`` reads; :func:`startup_files`
    lists only regular ones). Nothing is opened; a missing file is no problem. Sorted by path.
    """
    candidates = [python.parent / "pyvenv.cfg", python.parent.parent / "pyvenv.cfg"]
    try:
        names = sorted(os.listdir(sp))
    except OSError:
        names = []
    candidates += [sp / n for n in names if n.endswith(".pth") or n in (f"{m}.py" for m in STARTUP_MODULES)]
    candidates += [sp / m / "__init__.py" for m in STARTUP_MODULES]
    out = []
    for path in candidates:
        try:
            kind = file_kind(os.stat(path).st_mode)
        except OSError:
            continue
        if kind is not None and kind != "a directory":  # open() of a directory fails at once, site skips it
            out.append((path, kind))
    return sorted(set(out))
