"""RECORD integrity of installed files, and the state of files envforge patched.

Every installed distribution lists its files with sha256 and size in ``RECORD`` (PEP 376, PEP 627).
A file whose bytes differ from RECORD is either explained by the patch manifest (envforge patched it:
its sha256 must be the manifest's ``new_sha256``) or ``tampered``. The default mode is fast: it stats
every file and hashes only those whose size differs or whose mtime is newer than the RECORD file (an
edit after installation); ``deep`` hashes every file. A file that two distributions' RECORDs both list, holding one of them's bytes, is a ``file-conflict``
(seen for real: flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5 both install a top-level
``build_backend.py``). Patched files must have a link count of 1 (not
shared with uv's cache, field case B09) and no bytecode that can hide the patch (B10, CPython issue
121376): the environment's interpreter is asked which code it would load (``env_probe.py``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.textfile import file_kind
from envforge.installed.distributions import Installed, RecordEntry, read_record
from envforge.verify.findings import Finding

__all__ = [
    "PatchedFile",
    "RecordEntry",
    "cached_bytecode",
    "check_patched_files",
    "check_records",
    "read_record",
    "sha256_file",
    "stale_bytecode",
]

_BUF = 1 << 20


@dataclass(frozen=True, slots=True)
class PatchedFile:
    """A manifest entry: ``path`` relative to site-packages, digests as hex, the ``patchset`` id."""

    path: str
    original_sha256: str
    new_sha256: str
    patchset: str


_LOCAL = threading.local()


def sha256_file(path: Path, cancelled: threading.Event | None = None) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks into one reused buffer per thread
    (hashlib releases the GIL while hashing; a fresh buffer per file would cost a 1 MiB memset).

    A special file (FIFO, device, socket) is never read: ``"(<kind>)"`` is returned. ``cancelled``
    is checked before every block: once set, ``"(cancelled)"`` is returned at the next block, so a
    worker hashing a large file lets the interpreter exit at once (it joins pool threads at exit).
    """
    view: memoryview | None = getattr(_LOCAL, "view", None)
    if view is None:
        view = _LOCAL.view = memoryview(bytearray(_BUF))
    h = hashlib.sha256()
    # Non-blocking open and an fstat check: a FIFO swapped in after the caller's stat never blocks.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb", buffering=0) as f:
        if (kind := file_kind(os.fstat(fd).st_mode)) is not None:
            return f"({kind})"  # never a hex digest: the file is reported, never read
        while n := f.readinto(view):
            if cancelled is not None and cancelled.is_set():
                return "(cancelled)"
            h.update(view[:n])
    return h.hexdigest()


def _suspects(
    sp: Path,
    dist: Installed,
    entries: Iterable[RecordEntry],
    deep: bool,
    missing: list[tuple[Installed, RecordEntry]],
    special: list[tuple[Installed, RecordEntry, str]],
) -> Iterator[tuple[Installed, RecordEntry, Path, int]]:
    """The files of ``entries`` to hash; absent ones go to ``missing``, ones that are not regular
    files (a FIFO would block the read for ever, field case N46) to ``special`` with their kind."""
    record_mtime = (dist.dist_info / "RECORD").stat().st_mtime_ns
    for e in entries:
        if e.sha256 is None:
            continue
        path = sp / e.path
        try:
            st = path.stat()
        except FileNotFoundError:
            missing.append((dist, e))
            continue
        if (kind := file_kind(st.st_mode)) is not None:
            special.append((dist, e, kind))
            continue
        if deep or st.st_mtime_ns > record_mtime or (e.size is not None and st.st_size != e.size):
            yield dist, e, path, st.st_size


def check_records(
    sp: Path,
    dists: Iterable[Installed],
    patched: Mapping[str, PatchedFile],
    *,
    deep: bool = False,
    workers: int = 4,
    records: Mapping[Installed, tuple[RecordEntry, ...]] | None = None,
) -> tuple[list[Finding], int, int]:
    """RECORD integrity of every file of ``dists``.

    :param patched: manifest entries by path relative to site-packages.
    :param records: the RECORD rows of ``dists`` when the caller read them already (else read here).
    :returns: (findings, files hashed, bytes hashed).
    """
    missing: list[tuple[Installed, RecordEntry]] = []
    special: list[tuple[Installed, RecordEntry, str]] = []
    records = {d: records[d] if records is not None and d in records else read_record(d) for d in dists}
    todo = [s for d, entries in records.items() for s in _suspects(sp, d, entries, deep, missing, special)]
    pool = ThreadPoolExecutor(max_workers=workers)
    cancelled = threading.Event()
    try:
        digests = list(pool.map(lambda t: sha256_file(t[2], cancelled), todo))
    except BaseException:  # SIGTERM or Ctrl-C: the files being hashed stop at their next 1 MiB block
        cancelled.set()  # (the interpreter joins pool threads at exit: a 20 GB file took 105 s)
        raise
    finally:  # drop the queued files, never wait for them
        pool.shutdown(wait=False, cancel_futures=True)
    findings = [
        Finding(
            "missing-file",
            f"{d.name} {d.version}: {e.path}",
            "present (listed in RECORD)",
            "absent",
            "reinstall the distribution: `envforge build`",
        )
        for d, e in missing
    ]
    findings += [
        Finding(
            "tampered",
            f"{d.name} {d.version}: {e.path}",
            "a regular file (listed in RECORD)",
            kind,
            "reinstall the distribution: `envforge build`",
        )
        for d, e, kind in special
    ]
    owners = _owners(records)
    for (dist, entry, path, _), digest in zip(todo, digests, strict=True):
        if digest == entry.sha256:
            continue
        p = patched.get(os.path.normpath(entry.path))
        if p is not None and digest == p.new_sha256:
            continue
        claims = owners.get(os.path.normpath(entry.path), [])
        winner = next((d for d, e in claims if d != dist and e.sha256 == digest), None)
        if winner is not None:
            findings.append(_conflict(entry.path, claims, winner))
        else:
            findings.append(_tampered(dist, entry, digest, p, _links(path)))
    return findings, len(todo), sum(t[3] for t in todo)


def _owners(records: Mapping[Installed, tuple[RecordEntry, ...]]) -> dict[str, list[tuple[Installed, RecordEntry]]]:
    """Paths listed by more than one distribution's RECORD, with each claim."""
    claims: dict[str, list[tuple[Installed, RecordEntry]]] = {}
    for dist, entries in records.items():
        for e in entries:
            claims.setdefault(os.path.normpath(e.path), []).append((dist, e))
    return {k: v for k, v in claims.items() if len(v) > 1}


def _conflict(path: str, claims: list[tuple[Installed, RecordEntry]], winner: Installed) -> Finding:
    """Two wheels install the same file: the last one installed wins, silently (an upstream bug)."""
    names = ", ".join(f"{d.name} {d.version}" for d, _ in sorted(claims, key=lambda c: c[0].name))
    return Finding(
        "file-conflict",
        path,
        "one distribution owns each installed file",
        f"claimed by {names}; the installed bytes are {winner.name}'s",
        "both wheels install this file into site-packages and the last one installed wins: "
        "report it upstream; check that nothing imports it expecting the other copy",
    )


def conflict_claimants(actual: str) -> tuple[str, ...]:
    """The ``"<name> <version>"`` claimants a ``file-conflict`` finding's ``actual`` text names (as
    :func:`_conflict` writes it: ``claimed by a 1, b 2; ...``), sorted; ``()`` for any other text."""
    if not actual.startswith("claimed by ") or ";" not in actual:
        return ()
    return tuple(sorted(actual[len("claimed by ") :].split(";", 1)[0].split(", ")))


def _links(path: Path) -> int:
    try:
        return path.stat().st_nlink
    except OSError:
        return 1


def _tampered(dist: Installed, entry: RecordEntry, digest: str, p: PatchedFile | None, links: int) -> Finding:
    """A file whose bytes are not its RECORD's (or its patch's). With ``links`` > 1 the file is a
    hardlink of uv's cache (uv links what it installs; field case B09): an in-place edit changed
    the cached copy too, so a rebuild installs the edited bytes again and the fix says so."""
    if links > 1:
        return Finding(
            "tampered",
            f"{dist.name} {dist.version}: {entry.path}",
            f"sha256 {entry.sha256} (RECORD of {dist.name} {dist.version})",
            f"sha256 {digest}",
            f"the file is a hardlink shared with uv's cache ({links} links), so the edit changed uv's "
            "cached copy too and a rebuild installs the edited bytes again: run "
            f"`uv cache clean {dist.name}` first, then rebuild: `envforge build` (a fresh generation, "
            "patched from its lock); edit installed files by replacing them, never in place",
        )
    if p is None:
        expected = f"sha256 {entry.sha256} (RECORD of {dist.name} {dist.version})"
    else:
        expected = f"sha256 {p.new_sha256} (patched by envforge, patchset {p.patchset})"
    return Finding(
        "tampered",
        f"{dist.name} {dist.version}: {entry.path}",
        expected,
        f"sha256 {digest}",
        "undo the edit, or rebuild the environment: `envforge build` (a fresh generation, patched "
        "from its lock); to keep the change, write it as a patchset, relock and rebuild",
    )


def check_patched_files(sp: Path, patched: Iterable[PatchedFile]) -> list[Finding]:
    """Link count of each patched file (B09); bytecode is judged by :func:`stale_bytecode`."""
    findings: list[Finding] = []
    for p in patched:
        try:
            st = (sp / p.path).stat()
        except FileNotFoundError:
            findings.append(
                Finding(
                    "missing-file",
                    p.path,
                    f"present (patched by {p.patchset})",
                    "absent",
                    "reinstall it: `envforge build` (a fresh generation, patched from its lock)",
                )
            )
            continue
        if st.st_nlink > 1:
            findings.append(
                Finding(
                    "hardlinked",
                    p.path,
                    "link count 1 (a private copy)",
                    f"link count {st.st_nlink}",
                    "the patched file shares its bytes with uv's cache or another environment; rebuild with "
                    "`envforge build` (patches are written to a temp file and os.replace'd)",
                )
            )
    return findings


def shared_files_note(sp: Path, installed: Iterable[Installed], patched: Iterable[PatchedFile]) -> str | None:
    """One line naming how many other files of the distributions envforge patched are hardlinks
    (link count > 1: shared with uv's cache or another environment), or None when none are.

    Only patched files leave uv's cache (issue 16.4; they are replaced, B09): the others are the
    released bytes, shared. Not a finding: an in-place edit of one of them (``sed -i``) would
    change the cache and every environment sharing it, and RECORD would call it tampered.
    """
    paths = {p.path for p in patched}
    if not paths:
        return None
    counts: dict[str, int] = {}
    for dist in installed:
        entries = read_record(dist)
        if not any(e.path in paths for e in entries):
            continue
        n = 0
        for e in entries:
            if e.path in paths:
                continue
            try:
                st = os.lstat(sp / e.path)
            except OSError:
                continue
            n += st.st_nlink > 1
        if n:
            counts[dist.name] = n
    if not counts:
        return None
    listed = ", ".join(f"{n} of {name}" for name, n in sorted(counts.items()))
    return (
        f"hardlinked (shared with uv's cache): {listed} other files of the patched distributions; "
        "envforge replaced only the files it patched, so edit none of the others in place"
    )


def cached_bytecode(sp: Path, patched: Iterable[PatchedFile]) -> list[Path]:
    """Patched ``.py`` files that have any ``__pycache__/<stem>.*.pyc`` (only those need the probe)."""
    out = []
    for p in patched:
        src = sp / p.path
        if src.suffix == ".py" and any((src.parent / "__pycache__").glob(f"{src.stem}.*.pyc")):
            out.append(src)
    return out


def stale_bytecode(sp: Path, verdicts: Mapping[str, Mapping[str, Any] | None]) -> list[Finding]:
    """Findings for the bytecode probe's verdicts (source path -> ``{pyc, mode, stale}`` or None)."""
    out = []
    for src, v in sorted(verdicts.items()):
        if not v or not v["stale"]:
            continue
        rel = os.path.relpath(v["pyc"], sp)
        out.append(
            Finding(
                "stale-bytecode",
                rel,
                f"bytecode of the patched source {os.path.relpath(src, sp)} (or none)",
                f"the interpreter would load {v['mode']} bytecode of other source (written before the patch)",
                f"delete {rel} (Python then compiles the patched source again)",
            )
        )
    return out
