"""Where a drafter comes from: a local directory (fetched or not) or ``REPO@SHA`` on the hub.

:func:`open_drafter` returns a :class:`~envforge.drafter.model.Drafter` read from headers and
configs either way; :func:`byte_reader` gives random access to its weight files (local reads or
ranged GETs), used to read the small ``d2t`` tensor for comparisons.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.drafter.hub import (
    RECORD_NAME,
    check_partials,
    hub_errors,
    open_remote,
    parse_repo_spec,
    read_record,
    read_remote_range,
    resolve_revision,
)
from envforge.drafter.model import PICKLE_SUFFIXES, Drafter, load_json
from envforge.drafter.weights import ByteReader, TensorInfo, WeightFile, local_reader, open_regular, read_weight_file

__all__ = ["byte_reader", "local_weight_file", "open_drafter", "open_local", "read_config"]


def open_local(path: Path) -> Drafter:
    """Read a drafter directory (``config.json`` + ``*.safetensors``) or one ``.safetensors`` file.

    The repo, revision and weight files come from ``envforge-drafter.json`` when
    ``envforge drafter fetch`` wrote it.

    :raises CheckFailed: a ``*.incomplete`` partial download is left in the directory (B14).
    :raises InputError: no ``config.json``, or a file is not a safetensors file.
    """
    directory = path if path.is_dir() else path.parent
    check_partials(directory)
    record = directory / RECORD_NAME
    try:
        meta = read_record(record)
    except FileNotFoundError:
        meta = {}
    modified = _modified(directory, meta)
    if modified:  # B59: not the pinned commit's content, whatever the record says
        meta = {k: v for k, v in meta.items() if k not in ("repo", "revision")}
    weights = [path] if path.is_file() else _weights(directory, meta)
    tensors: list[TensorInfo] = []
    for w in weights:
        tensors.extend(local_weight_file(directory, w.name).tensors)
    pickles = tuple(p.name for p in sorted(directory.iterdir()) if p.name.endswith(PICKLE_SUFFIXES))
    if not weights and not pickles:
        raise InputError(f"{path}: no *.safetensors weights found", hint="point at a drafter directory")
    return Drafter(
        str(path),
        meta.get("repo"),
        meta.get("revision"),
        load_json(directory / "config.json"),
        tuple(sorted(tensors, key=lambda t: t.name)),
        tuple(w.name for w in weights),
        pickles,
        directory,
        modified,
    )


def _modified(directory: Path, meta: Mapping[str, Any]) -> tuple[str, ...]:
    """Files the fetch record lists whose bytes differ from it: the size of every file, and the
    sha256 of the JSON files (small: a weight file is re-hashed by ``drafter fetch`` and verify,
    not by every read)."""
    rows = meta.get("files")
    out = []
    for row in rows if isinstance(rows, list) else []:
        if not (isinstance(row, dict) and isinstance(row.get("name"), str)):
            continue
        name = row["name"]
        target = directory / name
        try:
            size = target.stat().st_size
        except OSError:
            out.append(name)
            continue
        if size != row.get("size") or (name.endswith(".json") and _sha256(target) != row.get("sha256")):
            out.append(name)
    return tuple(out)


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def local_weight_file(directory: Path, name: str) -> WeightFile:
    """Validate the safetensors file ``directory/name`` (a regular file inside ``directory``).

    :raises InputError: see :func:`envforge.drafter.weights.read_weight_file` and
        :func:`~envforge.drafter.weights.open_regular`.
    """
    fd, size = open_regular(directory / name, directory)
    os.close(fd)
    return read_weight_file(local_reader(directory), name, size, where=str(directory / name))


def _weights(directory: Path, meta: dict[str, object]) -> list[Path]:
    """The safetensors files of a drafter directory: those the fetch record lists, when there is one
    (files of an earlier revision left in the directory are not part of this one), else all."""
    files = meta.get("files")
    if isinstance(files, list):
        names = [str(f.get("name")) for f in files if isinstance(f, dict)]
        return [directory / n for n in names if n.endswith(".safetensors")]
    return sorted(directory.glob("*.safetensors"))


def open_drafter(
    spec: str,
    *,
    allow_unpinned: bool = False,
    allow_pickle: bool = False,
    endpoint: str | None = None,
    cache_dir: Path | None = None,
) -> Drafter:
    """Open ``spec``: an existing path, or ``owner/name@<commit sha>`` read remotely (headers only).

    :raises InputError: neither a path nor ``REPO@REV``; the refusals of
        :func:`~envforge.drafter.hub.resolve_revision` (unpinned, pickle-only).
    """
    path = Path(spec)
    if path.exists():
        return open_local(path)
    parsed = parse_repo_spec(spec)
    if parsed is None:
        raise InputError(
            f"'{spec}' is neither an existing path nor REPO@SHA",
            hint="give a directory, or a hub repository pinned to a commit: owner/name@<40-hex sha>",
        )
    rev = resolve_revision(
        parsed[0], parsed[1], allow_unpinned=allow_unpinned, allow_pickle=allow_pickle, endpoint=endpoint
    )
    return open_remote(rev, endpoint=endpoint, cache_dir=cache_dir)


def read_config(spec: str, *, endpoint: str | None = None, cache_dir: Path | None = None) -> dict[str, object]:
    """A model's ``config.json``: a file, a directory holding one, or ``owner/name@<sha>`` on the hub."""
    path = Path(spec)
    if path.is_dir():
        return load_json(path / "config.json")
    if path.exists() or parse_repo_spec(spec) is None:
        return load_json(path)
    from huggingface_hub import hf_hub_download  # lazy: huggingface_hub is heavy; loaded only when the hub is used

    repo, rev = parse_repo_spec(spec) or ("", "")
    pinned = resolve_revision(repo, rev, allow_pickle=True, endpoint=endpoint)
    with hub_errors(f"hf_hub_download {pinned.spec} config.json", repo, rev, endpoint):
        local = hf_hub_download(repo, "config.json", revision=pinned.sha, cache_dir=cache_dir, endpoint=endpoint)
    return load_json(Path(local))


def byte_reader(d: Drafter, *, endpoint: str | None = None) -> ByteReader:
    """Random access to ``d``'s weight files: ``read(file, start, length) -> bytes``."""
    if d.local_dir is not None:
        return local_reader(d.local_dir)
    repo, sha = d.repo or "", d.revision or ""

    def read_remote(file: str, start: int, length: int) -> bytes:
        return read_remote_range(repo, sha, file, start, length, endpoint=endpoint)

    return read_remote
