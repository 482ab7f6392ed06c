"""Drafters on the Hugging Face hub, through huggingface_hub: pin, select, fetch, re-hash, read remotely.

- :func:`resolve_revision` asks ``HfApi.model_info(repo, revision, files_metadata=True)`` for the
  commit sha and each file's size and digest (``lfs.sha256`` for LFS files, the git blob id for
  the rest), refuses a branch or tag (anything but a 40-hex sha) before contacting the hub unless
  ``allow_unpinned``, and selects only ``*.safetensors``
  and ``*.json``; pickle weights (``.bin``, ``.pt``, ...) are refused unless ``allow_pickle``.
- :func:`fetch` downloads the selection with ``hf_hub_download(local_dir=...)`` at the sha, re-hashes
  every file against the metadata, and fails on a leftover ``*.incomplete`` partial (field case B14,
  huggingface_hub issue 3643: a download that "succeeded" with a truncated blob).
- :func:`open_remote` reads configs and safetensors headers by range requests
  (validated like local files), never the weights; :func:`read_remote_range` reads one
  tensor's bytes (``d2t``) the same way.

The token comes from the environment (``HF_TOKEN``) through huggingface_hub itself; envforge never
reads, prints or records it. ``endpoint=None`` means huggingface_hub's ``HF_ENDPOINT``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import CheckFailed, ExternalToolError, InputError
from envforge.core.fs import atomic_write, file_identity
from envforge.core.printable import escape_controls
from envforge.core.textfile import SMALL_LIMIT, parse_json, read_state
from envforge.drafter.hubclient import BodyTooLong, body_limit, endpoint_url, hub_errors, malformed_answer
from envforge.drafter.model import PICKLE_SUFFIXES, Drafter, load_json
from envforge.drafter.weights import TensorInfo, open_regular, read_weight_file

__all__ = [
    "RECORD_NAME",
    "read_record",
    "offline_mode",
    "recheck_offline",
    "FetchResult",
    "FetchedFile",
    "HubRevision",
    "RemoteFile",
    "check_partials",
    "endpoint_url",
    "fetch",
    "file_name_problem",
    "find_partials",
    "hub_errors",
    "open_remote",
    "parse_repo_spec",
    "read_remote_range",
    "resolve_revision",
]

RECORD_NAME = "envforge-drafter.json"
#: Most files one fetch selects, and most bytes of one selected ``*.json`` (issue 41: a repository of
#: 20,000 JSON files was fetched whole).
MAX_FILES = 256
JSON_LIMIT = 64 << 20
_SHA = re.compile(r"[0-9a-f]{40}")
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class RemoteFile:
    """A file of a hub revision: ``size`` in bytes, ``sha256`` (LFS files) or ``blob_id`` (git sha1)."""

    name: str
    size: int
    sha256: str | None
    blob_id: str | None


@dataclass(frozen=True, slots=True)
class HubRevision:
    """A resolved revision and what will be fetched from it.

    ``requested`` is the revision as given, ``sha`` the commit it resolved to, ``pinned`` whether
    the request was that sha; ``files`` the selected files; ``skipped`` the names left out.
    """

    repo: str
    requested: str
    sha: str
    pinned: bool
    files: tuple[RemoteFile, ...]
    skipped: tuple[str, ...]

    @property
    def spec(self) -> str:
        """``repo@sha``."""
        return f"{self.repo}@{self.sha}"


@dataclass(frozen=True, slots=True)
class FetchedFile:
    """A downloaded file, re-hashed: repo-relative ``name``, ``size`` in bytes, ``sha256`` hex."""

    name: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What :func:`fetch` wrote: the files under ``dest`` and the record ``dest/envforge-drafter.json``;
    ``offline``: nothing was downloaded, the recorded copy was re-hashed (:func:`recheck_offline`)."""

    revision: HubRevision
    dest: Path
    files: tuple[FetchedFile, ...]
    record: Path
    offline: bool = False


def parse_repo_spec(spec: str) -> tuple[str, str] | None:
    """``"owner/name@rev"`` -> ``("owner/name", "rev")``; ``None`` when ``spec`` is not of that form."""
    repo, sep, rev = spec.partition("@")
    return (repo, rev) if sep and rev and _REPO.fullmatch(repo) else None


def _api(endpoint: str | None) -> Any:
    from huggingface_hub import HfApi  # lazy: huggingface_hub is heavy; loaded only when the hub is used

    return HfApi(endpoint=endpoint)


def _select(
    repo: str, sha: str, files: list[RemoteFile], allow_pickle: bool
) -> tuple[tuple[RemoteFile, ...], tuple[str, ...]]:
    weights = [f for f in files if f.name.endswith(".safetensors")]
    pickles = [f for f in files if f.name.endswith(PICKLE_SUFFIXES)]
    if not weights and pickles and not allow_pickle:
        names = ", ".join(f.name for f in pickles)
        raise InputError(
            f"{repo}@{sha} has only pickle weights ({names}); loading pickle can run arbitrary code",
            hint="use a revision with safetensors weights, or pass --allow-pickle "
            "(allow-pickle = true) if you trust this repository",
        )
    if not weights and not pickles:
        raise InputError(
            f"{repo}@{sha} has no weights (no *.safetensors file)", hint="check the repository and revision"
        )
    chosen = [f for f in files if f.name.endswith(".json") or f in weights or (not weights and f in pickles)]
    big = [f for f in chosen if f.name.endswith(".json") and f.size > JSON_LIMIT]
    if len(chosen) > MAX_FILES or big:
        why = (
            f"{len(chosen):,} files to fetch (a drafter has a config, an index and its weights; at most {MAX_FILES})"
            if len(chosen) > MAX_FILES
            else f"{big[0].name} of {big[0].size:,} bytes (a JSON file of a drafter is at most {JSON_LIMIT >> 20} MiB)"
        )
        raise InputError(
            f"{repo}@{sha} is not a drafter repository envforge fetches: {why}; nothing was downloaded",
            hint="check the repository and revision",
        )
    skipped = tuple(f.name for f in files if f not in chosen)
    return tuple(chosen), skipped


def file_name_problem(name: str) -> str | None:
    """Why the hub file ``name`` could land outside the download directory, or None.

    A name is joined to ``--dest`` (``hf_hub_download(local_dir=...)``) and to huggingface_hub's
    cache: an absolute name (``/x``, ``\\x``, ``C:x``), a ``..`` part between ``/`` or ``\\``
    (Windows takes both as separators), an empty name or a NUL would point elsewhere. huggingface_hub
    refuses some of these itself with a ``ValueError``; envforge does not rely on it (fault suite N91).
    """
    if not name or "\0" in name:
        return "an empty name or a NUL byte"
    if name.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", name):
        return "an absolute path"
    if ".." in re.split(r"[/\\]", name):
        return "a '..' part"
    return None


def _refuse_escaping_names(repo: str, sha: str, files: list[RemoteFile]) -> None:
    """:raises InputError: a file of the revision (selected or not) has a :func:`file_name_problem`."""
    bad = [(f.name, why) for f in files if (why := file_name_problem(f.name)) is not None]
    if bad:
        shown = "; ".join(f"{escape_controls(repr(n))} ({why})" for n, why in bad)
        raise InputError(
            f"{repo}@{sha} has file names that point outside the download directory: {shown}; nothing was downloaded",
            hint="a drafter repository never needs such a name: pin a revision without it, and "
            "report it to the repository's owner",
        )


def resolve_revision(
    repo: str, revision: str, *, allow_unpinned: bool = False, allow_pickle: bool = False, endpoint: str | None = None
) -> HubRevision:
    """Resolve ``repo@revision`` on the hub and select the files to fetch (one API call).

    :raises InputError: bad repo id; revision not a 40-hex commit sha (unless ``allow_unpinned``);
        only pickle weights (unless ``allow_pickle``); no weights; repo or revision not found; a
        file name that points outside the destination (:func:`file_name_problem`).
    :raises ExternalToolError: the hub could not be reached or answered an error.
    """
    if not _REPO.fullmatch(repo):
        raise InputError(f"'{repo}' is not a hub repository id (owner/name)")
    if not allow_unpinned and not _SHA.fullmatch(revision):
        raise InputError(
            f"revision '{revision}' of {repo} is not a commit sha (40 hex digits); the hub was not contacted",
            hint=f"find the sha with `envforge drafter fetch {repo} --revision {revision} "
            "--allow-unpinned --dry-run` (or the repository's commit history on the hub) and "
            f"pass it, or pass --allow-unpinned to take what '{revision}' points at and "
            "record the sha",
        )
    with hub_errors(f"model_info {repo}@{revision}", repo, revision, endpoint):
        try:
            info = _api(endpoint).model_info(repo, revision=revision, files_metadata=True)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a listing without `id`, `sha`, ...
            raise malformed_answer(f"model_info {repo}@{revision}", endpoint, exc) from None
    if not isinstance(info.sha, str) or not _SHA.fullmatch(info.sha):
        raise malformed_answer(f"model_info {repo}@{revision}", endpoint, ValueError(f"sha {info.sha!r}"))
    sha = str(info.sha)
    pinned = bool(_SHA.fullmatch(revision)) and revision == sha
    if not pinned and not allow_unpinned:
        raise InputError(
            f"revision '{revision}' of {repo} is not a commit sha (it resolves to {sha} now)",
            hint=f"pin it with --revision {sha}, or pass --allow-unpinned to take what "
            f"'{revision}' points at and record the sha",
        )
    files = [
        RemoteFile(s.rfilename, int(s.lfs.size if s.lfs else s.size or 0), s.lfs.sha256 if s.lfs else None, s.blob_id)
        for s in info.siblings or []
    ]
    _refuse_escaping_names(repo, sha, files)
    chosen, skipped = _select(repo, sha, files, allow_pickle)
    return HubRevision(repo, revision, sha, pinned, chosen, skipped)


def _digest(path: Path, f: RemoteFile) -> tuple[str, str, str, str, int]:
    """``(kind, actual, expected, sha256, size)`` of ``path`` against the hub metadata of ``f``,
    reading the file once: sha256 always (the record's digest), plus the git blob sha1
    (``sha1(b"blob <size>\\0" + bytes)``, git's object format) when the hub has no LFS sha256."""
    size = path.stat().st_size
    sha256 = hashlib.sha256()
    git = None if f.sha256 else hashlib.sha1(b"blob %d\0" % size)
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            sha256.update(chunk)
            if git is not None:
                git.update(chunk)
    if git is None:
        return "sha256", sha256.hexdigest(), str(f.sha256), sha256.hexdigest(), size
    return "git-sha1", git.hexdigest(), str(f.blob_id), sha256.hexdigest(), size


def _verify(rev: HubRevision, f: RemoteFile, path: Path) -> FetchedFile:
    kind, actual, expected, sha256, size = _digest(path, f)
    if actual != expected or size != f.size:
        path.unlink()
        raise CheckFailed(
            f"{f.name} of {rev.spec} does not match the hub's metadata: {kind} {actual}, "
            f"expected {expected} ({size} of {f.size} bytes); removed {path}",
            hint="the download is corrupt (huggingface_hub issue 3643); fetch again, "
            "and report it to the host if it repeats",
        )
    return FetchedFile(f.name, size, sha256)


def find_partials(directory: Path) -> list[Path]:
    """Leftover partial downloads (``*.incomplete``), sorted: in ``directory`` itself and anywhere
    under ``directory/.cache/huggingface/download`` (where ``hf_hub_download(local_dir=...)`` keeps
    them, huggingface_hub ``_local_folder.py``)."""
    if not directory.is_dir():
        return []
    download = directory / ".cache" / "huggingface" / "download"
    return sorted([*directory.glob("*.incomplete"), *download.rglob("*.incomplete")])


def check_partials(directory: Path, files: tuple[RemoteFile, ...] = ()) -> None:
    """Raise :class:`CheckFailed` naming the first ``*.incomplete`` file under ``directory``."""
    partials = find_partials(directory)
    if partials:
        rel = partials[0].relative_to(directory)
        owner = [f.name for f in files if (f.sha256 or f.blob_id or "\0") in partials[0].name]
        more = f" and {len(partials) - 1} more" if len(partials) > 1 else ""
        raise CheckFailed(
            f"a partial download was left in {directory}: {rel}{f' ({owner[0]})' if owner else ''}{more}",
            hint="a download was interrupted or failed silently (huggingface_hub issue "
            "3643); delete the partial file and fetch again",
        )


def _record(rev: HubRevision, files: tuple[FetchedFile, ...]) -> str:
    data = {
        "schema": 1,
        "repo": rev.repo,
        "requested": rev.requested,
        "revision": rev.sha,
        "pinned": rev.pinned,
        "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in files],
        "skipped": list(rev.skipped),
    }
    return json.dumps(data, indent=2) + "\n"


def _refuse_changed_local_files(rev: HubRevision, dest: Path) -> dict[str, tuple[tuple[int, int, int], FetchedFile]]:
    """A file already in ``dest`` that is not the commit's (B59): huggingface_hub's ``local_dir``
    trusts a file no newer than its ``.metadata`` (PR 2223), so a config copied in with an old mtime
    would be "verified" as the hub's and blamed on the download. Checked before any download; the
    file is kept. Returns the matching files with their :func:`_stat_key`, for :func:`fetch`.

    :raises CheckFailed: naming the local file, its digest and the pinned commit's."""
    matching = {}
    for f in rev.files:
        path = dest / f.name
        if path.is_file() and not path.is_symlink():
            key, (kind, actual, expected, sha256, size) = file_identity(path), _digest(path, f)
            if actual != expected or size != f.size:
                raise CheckFailed(
                    f"{path} is already there and is not {f.name} of {rev.spec} ({kind} {actual}, "
                    f"the commit's {expected}; {size} of {f.size} bytes): it was changed or replaced "
                    "after an earlier fetch",
                    hint="move it away (nothing was downloaded or removed), then fetch again to get the commit's file",
                )
            matching[f.name] = (key, FetchedFile(f.name, size, sha256))
    return matching


def fetch(
    rev: HubRevision, dest: Path, *, endpoint: str | None = None, progress: Progress | None = None
) -> FetchResult:
    """Download ``rev.files`` into ``dest`` at ``rev.sha``, re-hash each one, write the record
    (files already in ``dest`` at that commit are hashed once, not downloaded again).

    :raises CheckFailed: a file does not match the hub's sha256 / git blob id or size (the file is
        removed), or a ``*.incomplete`` partial download is left under ``dest``.
    :raises ExternalToolError: a download failed.
    """
    from huggingface_hub import hf_hub_download  # lazy: huggingface_hub is heavy; loaded only when the hub is used

    present = _refuse_changed_local_files(rev, dest)
    done: list[FetchedFile] = []
    for i, f in enumerate(rev.files, 1):
        if progress:
            progress(f"[{i}/{len(rev.files)}] {f.name} ({f.size:,} bytes)")
        with hub_errors(f"hf_hub_download {rev.spec} {f.name}", rev.repo, rev.sha, endpoint):
            try:
                with body_limit(f.size):  # what the hub lists: an endless body stops there
                    path = hf_hub_download(rev.repo, f.name, revision=rev.sha, local_dir=dest, endpoint=endpoint)
            except BodyTooLong:
                for partial in find_partials(dest):  # nothing of a body longer than listed is kept
                    partial.unlink(missing_ok=True)
                raise
        kept = present.get(f.name)  # hashed just before: not again when huggingface_hub left it as it was
        same = (
            kept is not None
            and Path(path).resolve() == (dest / f.name).resolve()
            and file_identity(Path(path)) == kept[0]
        )
        done.append(kept[1] if kept is not None and same else _verify(rev, f, Path(path)))
    check_partials(dest, rev.files)
    record = dest / RECORD_NAME
    atomic_write(record, _record(rev, tuple(done)).encode("utf-8"))  # a reader never sees half a record
    return FetchResult(rev, dest, tuple(done), record)


def offline_mode() -> bool:
    """huggingface_hub's offline mode (``HF_HUB_OFFLINE=1`` when it was imported): it then refuses
    every HTTP request (``OfflineModeIsEnabled``)."""
    from huggingface_hub import constants  # lazy: huggingface_hub is heavy; loaded only when the hub is used

    return bool(constants.is_offline_mode())


def read_record(record: Path) -> dict[str, Any]:
    """The fetch record ``envforge-drafter.json`` that :func:`fetch` wrote.

    :raises FileNotFoundError: there is none.
    :raises InputError: not a regular file (a FIFO, a directory: named, never opened), larger than
        1 MiB, or not a JSON object.
    """
    hint = "fetch the drafter again: `envforge drafter fetch REPO --revision SHA --dest DIR`"
    data = parse_json(read_state(record, what="drafter fetch record", limit=SMALL_LIMIT, hint=hint), label=str(record))
    if not isinstance(data, dict):
        raise InputError(f"{record}: expected a JSON object, found {type(data).__name__}", hint=hint)
    return data


def _recorded_files(record: Path, repo: str, sha: str) -> tuple[dict[str, Any], list[tuple[str, int, str]]]:
    meta = read_record(record)
    files = meta.get("files")
    rows = (
        [(f.get("name"), f.get("size"), f.get("sha256")) for f in files if isinstance(f, dict)]
        if isinstance(files, list)
        else []
    )
    if not rows or not all(isinstance(n, str) and isinstance(z, int) and isinstance(h, str) for n, z, h in rows):
        raise InputError(
            f"{record}: not a drafter fetch record (files: name, size, sha256)",
            hint="fetch the drafter again with the hub reachable",
        )
    if (meta.get("repo"), meta.get("revision")) != (repo, sha):
        raise InputError(
            f"{record} records {meta.get('repo')}@{meta.get('revision')}, not {repo}@{sha}",
            hint="point --dest at the directory of that revision's fetch",
        )
    return meta, rows  # type: ignore[return-value]


def _sha256_of(directory: Path, name: str) -> tuple[str, int]:
    fd, size = open_regular(directory / name, directory)
    h = hashlib.sha256()
    with open(fd, "rb", closefd=True) as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest(), size


def recheck_offline(repo: str, revision: str, dest: Path) -> FetchResult:
    """Offline (:func:`offline_mode`), re-hash the copy of ``repo@revision`` that an earlier fetch
    recorded in ``dest`` (field case B32: huggingface_hub alone only says "failed talking to host").

    Every file the record lists must be a regular file inside ``dest`` with the recorded size and
    sha256 (the digests the hub's metadata confirmed at fetch time); nothing is downloaded or removed.

    :raises InputError: ``revision`` is not a commit sha, or ``dest`` holds no record of that revision.
    :raises CheckFailed: a file differs from the record, or a partial download is left in ``dest``.
    """
    hint = "fetch it once with the hub reachable (unset HF_HUB_OFFLINE), or pass --dest DIR of an earlier fetch"
    if not _SHA.fullmatch(revision):
        raise InputError(
            f"huggingface_hub is in offline mode (HF_HUB_OFFLINE is set) and revision '{revision}' of "
            f"{repo} is not a commit sha: only a pinned, recorded copy can be checked offline",
            hint=hint,
        )
    record = dest / RECORD_NAME
    if not record.exists():  # a FIFO or a directory in its place is named by read_record
        raise InputError(
            f"huggingface_hub is in offline mode (HF_HUB_OFFLINE is set) and {dest} holds no recorded "
            f"copy of {repo}@{revision} (no {RECORD_NAME})",
            hint=hint,
        )
    meta, rows = _recorded_files(record, repo, revision)
    check_partials(dest)
    done = []
    for name, size, sha256 in rows:
        actual, actual_size = _sha256_of(dest, name)
        if (actual, actual_size) != (sha256, size):
            raise CheckFailed(
                f"{name} of {repo}@{revision} in {dest} differs from its fetch record: sha256 {actual} "
                f"({actual_size:,} bytes), recorded {sha256} ({size:,} bytes)",
                hint="the local copy changed since it was fetched; fetch it again with the hub "
                "reachable (nothing was removed)",
            )
        done.append(FetchedFile(name, size, sha256))
    rev = HubRevision(
        repo,
        str(meta.get("requested", revision)),
        revision,
        True,
        tuple(RemoteFile(f.name, f.size, f.sha256, None) for f in done),
        tuple(str(x) for x in meta.get("skipped", []) if isinstance(x, str)),
    )
    return FetchResult(rev, dest, tuple(done), record, offline=True)


def _remote_json(rev: HubRevision, name: str, endpoint: str | None, cache_dir: Path | None) -> dict[str, Any]:
    from huggingface_hub import hf_hub_download  # lazy: huggingface_hub is heavy; loaded only when the hub is used

    f = next((f for f in rev.files if f.name == name), None)
    if f is None:
        raise InputError(f"{rev.spec} has no {name}", hint="a drafter repository needs its config.json")
    with hub_errors(f"hf_hub_download {rev.spec} {name}", rev.repo, rev.sha, endpoint), body_limit(f.size):
        path = Path(hf_hub_download(rev.repo, name, revision=rev.sha, cache_dir=cache_dir, endpoint=endpoint))
    _verify(rev, f, path)
    return load_json(path)


def open_remote(rev: HubRevision, *, endpoint: str | None = None, cache_dir: Path | None = None) -> Drafter:
    """Read a hub drafter's ``config.json`` and every safetensors header, without the weights.

    Per weight file: one ranged GET of the first 100 kB (two when the header is larger), as
    ``HfApi.parse_safetensors_file_metadata`` does, validated by
    :func:`envforge.drafter.weights.read_weight_file` against the file size the hub announced (so
    a header whose tensors do not tile the file is an :class:`InputError`). ``config.json`` is
    downloaded (it is small) into ``cache_dir`` (huggingface_hub's cache when ``None``) and re-hashed.
    """
    config = _remote_json(rev, "config.json", endpoint, cache_dir)
    tensors: list[TensorInfo] = []
    weights = [f for f in rev.files if f.name.endswith(".safetensors")]

    def read(file: str, start: int, length: int) -> bytes:
        return read_remote_range(rev.repo, rev.sha, file, start, length, endpoint=endpoint)

    for f in weights:
        tensors.extend(read_weight_file(read, f.name, f.size, where=f"{rev.spec} {f.name}").tensors)
    pickles = tuple(f.name for f in rev.files if f.name.endswith(PICKLE_SUFFIXES))
    return Drafter(
        rev.spec,
        rev.repo,
        rev.sha,
        config,
        tuple(sorted(tensors, key=lambda t: t.name)),
        tuple(f.name for f in weights),
        pickles,
    )


def read_remote_range(repo: str, sha: str, name: str, start: int, length: int, *, endpoint: str | None = None) -> bytes:
    """Bytes ``[start, start + length)`` of file ``name`` at ``repo@sha``, by one ranged GET.

    :raises ExternalToolError: the request failed or the server returned a different length.
    """
    from huggingface_hub import (  # lazy: huggingface_hub is heavy; loaded only when the hub is used
        get_session,
        hf_hub_url,
        hf_raise_for_status,
    )
    from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined]  # lazy: huggingface_hub is heavy

    url = hf_hub_url(repo, name, revision=sha, endpoint=endpoint)
    headers = {**build_hf_headers(), "Range": f"bytes={start}-{start + length - 1}"}
    with hub_errors(f"GET {name} bytes {start}-{start + length - 1}", repo, sha, endpoint), body_limit(length):
        response = get_session().get(url, headers=headers, follow_redirects=True)
        hf_raise_for_status(response)
    data = bytes(response.content)
    if len(data) != length:
        raise ExternalToolError(
            f"range request for {name} of {repo}@{sha} returned {len(data)} bytes, expected {length}",
            tool="huggingface_hub",
            argv=(url,),
            returncode=None,
        )
    return data
