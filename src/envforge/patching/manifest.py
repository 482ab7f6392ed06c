"""The patch manifest of an environment: ``<site-packages>/.envforge/patches.json``.

It records which patchsets envforge applied (id, digest, distribution, version) and, per patched
file, its path relative to site-packages, the sha256 of the original bytes, the sha256 of the bytes
envforge wrote, and the patchset; the original bytes are kept in
``.envforge/originals/<sha256>`` so revert is byte-exact (docs/architecture.md). verify uses it to
tell "patched by envforge" from "tampered". The JSON is written with a fixed key order and no
timestamps: same state, same bytes.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.core.fs import atomic_write, sha256_hex
from envforge.core.state import StateDir
from envforge.core.textfile import SMALL_LIMIT, read_state

__all__ = [
    "read_installed",
    "INTENT_SCHEMA",
    "MANIFEST_SCHEMA",
    "AppliedPatchset",
    "Intent",
    "IntentFile",
    "Manifest",
    "PatchedFile",
    "clear_intent",
    "intent_path",
    "manifest_path",
    "manifest_sha256",
    "originals_dir",
    "read_intent",
    "read_manifest",
    "rebuild_hint",
    "write_intent",
    "write_manifest",
]

MANIFEST_SCHEMA = 1
INTENT_SCHEMA = 1
_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class AppliedPatchset:
    """A patchset recorded as applied: ``id``, ``digest`` (``sha256:<hex>``), distribution, version."""

    id: str
    digest: str
    distribution: str
    version: str
    activation: str | None = None


@dataclass(frozen=True, slots=True)
class PatchedFile:
    """One file envforge wrote: ``path`` relative to site-packages, hex sha256 before and after."""

    path: str
    patchset: str
    original_sha256: str
    new_sha256: str


@dataclass(frozen=True, slots=True)
class Manifest:
    """Contents of ``patches.json``: patchsets and files, both in application order."""

    patchsets: tuple[AppliedPatchset, ...] = ()
    files: tuple[PatchedFile, ...] = ()

    def patchset(self, pid: str) -> AppliedPatchset | None:
        """The record of patchset ``pid``, or None."""
        return next((p for p in self.patchsets if p.id == pid), None)

    def file(self, pid: str, path: str) -> PatchedFile | None:
        """The record of ``path`` as patched by ``pid``, or None."""
        return next((f for f in self.files if f.patchset == pid and f.path == path), None)

    def canonical(self) -> Manifest:
        """The same state in canonical order, so the same files give the same bytes whatever
        order the patchsets were applied in (issue 18): patchsets by id; files by path, and the
        entries of one path in the order they were stacked (each entry's ``original_sha256`` is
        the previous entry's ``new_sha256``), then by patchset id."""
        patchsets = tuple(sorted(self.patchsets, key=lambda p: p.id))
        files: list[PatchedFile] = []
        for path in sorted({f.path for f in self.files}):
            mine = [f for f in self.files if f.path == path]
            ordered: list[PatchedFile] = []
            while mine:
                newer = {f.new_sha256 for f in mine}
                nxt = sorted(
                    (
                        f
                        for f in mine
                        if (f.original_sha256 == ordered[-1].new_sha256 if ordered else f.original_sha256 not in newer)
                    ),
                    key=lambda f: f.patchset,
                )
                pick = nxt[0] if nxt else min(mine, key=lambda f: (f.patchset, f.new_sha256))
                ordered.append(pick)
                mine.remove(pick)
            files += ordered
        return Manifest(patchsets, tuple(files))

    def to_json(self) -> str:
        """The canonical JSON text (``schema`` first, two-space indent, trailing newline) of
        :meth:`canonical`: equal states give equal bytes, hence one patch-manifest digest."""
        c = self.canonical()
        data = {
            "schema": MANIFEST_SCHEMA,
            "patchsets": [asdict(p) for p in c.patchsets],
            "files": [asdict(f) for f in c.files],
        }
        return json.dumps(data, indent=2) + "\n"


def manifest_path(site_packages: Path) -> Path:
    """``<site-packages>/.envforge/patches.json`` (:attr:`envforge.core.state.StateDir.patch_manifest`)."""
    return StateDir(site_packages).patch_manifest


def originals_dir(site_packages: Path) -> Path:
    """``<site-packages>/.envforge/originals``: original bytes named by their hex sha256
    (:attr:`envforge.core.state.StateDir.originals`)."""
    return StateDir(site_packages).originals


def read_manifest(site_packages: Path) -> Manifest | None:
    """The manifest of ``site_packages``, or None when envforge never patched it.

    :raises InputError: the file exists but is not a manifest of a known schema.
    """
    path = manifest_path(site_packages)
    try:
        raw = read_state(
            path, what="patch manifest", hint=lambda: f"restore it from a backup, or {rebuild_hint(site_packages)}"
        )
        data: Any = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise InputError(
            f"cannot read patch manifest {path}: {exc}",
            hint=f"restore it from a backup, or {rebuild_hint(site_packages)}",
        ) from None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA:
        schema = data.get("schema") if isinstance(data, dict) else None
        raise InputError(
            f"{path}: unknown patch manifest schema {schema!r}",
            hint=f"this envforge reads schema {MANIFEST_SCHEMA}; upgrade envforge",
        )
    try:
        manifest = Manifest(
            tuple(AppliedPatchset(**p) for p in data["patchsets"]), tuple(PatchedFile(**f) for f in data["files"])
        )
    except (KeyError, TypeError) as exc:
        raise InputError(f"{path}: malformed patch manifest: {exc}", hint=rebuild_hint(site_packages)) from None
    for f in manifest.files:  # originals/<sha256> is a path: a hand-edited digest must not escape
        bad = next((d for d in (f.original_sha256, f.new_sha256) if not _HEX64.fullmatch(str(d))), None)
        if bad is not None:
            raise InputError(
                f"{path}: malformed patch manifest: {f.path}: {bad!r} is not a hex sha256",
                hint=rebuild_hint(site_packages),
            ) from None
    return manifest


def write_manifest(site_packages: Path, manifest: Manifest) -> None:
    """Write ``manifest`` atomically; an empty manifest removes the file (and empty originals)."""
    path = manifest_path(site_packages)
    if not manifest.patchsets and not manifest.files:
        path.unlink(missing_ok=True)
        originals = originals_dir(site_packages)
        if originals.is_dir() and not any(originals.iterdir()):
            originals.rmdir()
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, manifest.to_json().encode("utf-8"))


@dataclass(frozen=True, slots=True)
class IntentFile:
    """One file an interrupted write may have replaced: hex sha256 ``before`` and ``after``; both
    byte strings are kept in ``.envforge/originals/<sha256>`` until the write completes."""

    path: str
    before_sha256: str
    after_sha256: str


@dataclass(frozen=True, slots=True)
class Intent:
    """``.envforge/patch-intent.json``: what an apply or revert is about to write.

    Written (fsynced) before the first ``os.replace`` of a patchset's files and removed after the
    manifest is written, so a process killed in between leaves a record of every file it may have
    replaced. ``manifest_after`` is the hex sha256 of the manifest bytes the write ends with
    (``"absent"`` when the manifest is removed): when the manifest on disk has it, the write
    completed; otherwise every file is rolled back to ``before`` (:func:`envforge.patching.journal.recover`).
    """

    action: str  # "apply" or "revert"
    patchsets: tuple[str, ...]
    manifest_after: str
    files: tuple[IntentFile, ...]


def intent_path(site_packages: Path) -> Path:
    """``<site-packages>/.envforge/patch-intent.json`` (:attr:`envforge.core.state.StateDir.patch_intent`)."""
    return StateDir(site_packages).patch_intent


def manifest_sha256(site_packages: Path) -> str:
    """Hex sha256 of the manifest file's bytes, or ``"absent"``.

    :raises InputError: the manifest is not a regular file, unreadable or too large (:func:`read_state`).
    """
    try:
        return sha256_hex(
            read_state(manifest_path(site_packages), what="patch manifest", hint=lambda: rebuild_hint(site_packages))
        )
    except FileNotFoundError:
        return "absent"


def write_intent(site_packages: Path, intent: Intent) -> None:
    """Write ``intent`` atomically and durably (file and directory fsynced)."""
    path = intent_path(site_packages)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "schema": INTENT_SCHEMA,
        "action": intent.action,
        "patchsets": list(intent.patchsets),
        "manifest_after": intent.manifest_after,
        "files": [asdict(f) for f in intent.files],
    }
    atomic_write(path, (json.dumps(data, indent=2) + "\n").encode("utf-8"))
    _fsync_dir(path.parent)


def read_intent(site_packages: Path) -> Intent | None:
    """The intent record left by an interrupted apply or revert, or None.

    :raises InputError: the file exists but is not an intent record of a known schema.
    """
    path = intent_path(site_packages)
    try:
        raw = read_state(path, what="patch intent record", hint=lambda: rebuild_hint(site_packages))
        data: Any = json.loads(raw.decode("utf-8"))
    except FileNotFoundError:
        return None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise InputError(f"cannot read patch intent record {path}: {exc}", hint=rebuild_hint(site_packages)) from None
    try:
        if data["schema"] != INTENT_SCHEMA:
            raise KeyError("schema")
        files = tuple(IntentFile(**f) for f in data["files"])
        intent = Intent(str(data["action"]), tuple(map(str, data["patchsets"])), str(data["manifest_after"]), files)
    except (KeyError, TypeError) as exc:
        raise InputError(f"{path}: malformed patch intent record: {exc}", hint=rebuild_hint(site_packages)) from None
    for f in files:
        bad = next((d for d in (f.before_sha256, f.after_sha256) if not _HEX64.fullmatch(str(d))), None)
        if bad is not None:
            raise InputError(
                f"{path}: malformed patch intent record: {f.path}: {bad!r} is not a hex sha256",
                hint=rebuild_hint(site_packages),
            )
    return intent


def clear_intent(site_packages: Path) -> None:
    """Remove the intent record (durably: the directory is fsynced)."""
    path = intent_path(site_packages)
    if path.exists():
        path.unlink()
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def rebuild_hint(site_packages: Path) -> str:
    """The next step for a patched file that changed under envforge (drifted, tampered, missing) or
    a state record it cannot read: a command that works for this environment.

    An environment envforge built has ``.envforge/generation.json`` (written by the build) naming
    its recipe and variant: rebuild that (``envforge build RECIPE --variant V``, or ``envforge up
    --rebuild`` for the default ``quickstart``). Any other environment: reinstall the distributions
    with uv, then apply the patchsets again. Never ``apply-patches`` on the drifted file (it refuses).
    A ``generation.json`` that is not a regular file (or too large) is read as damage: rebuild, the
    recipe and variant left to the user. Never raises, never blocks (the record is read only as a
    regular file, 1 MiB at most).
    """
    record = StateDir(site_packages).generation_record
    try:
        data = json.loads(read_state(record, what="generation record", limit=SMALL_LIMIT).decode("utf-8"))
        recipe, variant = str(data["recipe"]), str(data["variant"])
    except InputError:  # a FIFO, a directory, too large: built by envforge, its record damaged
        return (
            "rebuild the environment: `envforge build RECIPE --variant VARIANT` with the recipe and "
            "variant it was built from (its .envforge/generation.json is damaged, so it cannot say which)"
        )
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return (
            "this environment was not built by envforge: reinstall the patched distributions "
            "(`uv pip install --python <env>/bin/python --reinstall DIST==VERSION`), then run "
            "`envforge apply-patches` again"
        )
    up = " (or `envforge up --rebuild`)" if (recipe, variant) == ("quickstart", "default") else ""
    return (
        f"rebuild the environment: `envforge build {recipe} --variant {variant}`{up} "
        f"(a fresh generation, patched from its lock)"
    )


def read_installed(site_packages: Path, path: Path) -> bytes:
    """The bytes of ``path``, an installed file under ``site_packages`` that envforge patches, checks or
    reverts. Only a regular file is opened (:func:`envforge.core.textfile.read_state`): ``open()`` of a
    FIFO in its place blocks until a writer comes, and hung ``verify`` and ``apply-patches`` (issue 41).

    :raises FileNotFoundError, NotADirectoryError: it is not there (the caller says what that means).
    :raises InputError: not a regular file (names which), unreadable, or larger than 64 MiB; the hint
        is :func:`rebuild_hint`.
    """
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        raise
    except OSError:
        pass  # read_state names the reason
    return read_state(path, what="installed file", hint=lambda: rebuild_hint(site_packages))
