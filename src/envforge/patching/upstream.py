"""An upstream change as a patchset: ``envforge patches import DIFF`` (issue 31).

A unified diff (the ``.diff`` of an upstream pull request, or ``diff -u`` of two releases) is
parsed with `unidiff <https://pypi.org/project/unidiff/>`_, applied **exactly** to the released
text of the files it names in a site-packages (an installed environment, or a release unpacked by
:mod:`.releases`), and the edited text is turned into envforge's own per-definition operations by
the capture path of ``patches commit`` (:func:`.capture.capture_file`): a diff touching one
function in two places gives one ``replace-definition``. The patchset records the diff's sha256
and where it came from (``diff-sha256``, ``diff-origin``), and applying it to the released text
gives byte for byte what the diff gives (checked before anything is written).

Exact means: every context and removed line of a hunk is in the file as written, at the line the
hunk header gives or, when the code above moved, at exactly one other place (an offset, as ``git
apply`` takes it); never fuzz (a hunk whose context differs is refused). Refused, with the file
and the hunk header named: a hunk that does not match, a binary file, a renamed, added or deleted
file, a file that is not Python source of the distribution, and a hunk the operations cannot
express (a definition added or removed next to a module-level edit, an unanchorable module-level
edit). Nothing is written when anything is refused.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError
from envforge.core.urls import redact
from envforge.core.textfile import SMALL_LIMIT, read_bytes
from envforge.installed.distributions import Installed, installed_distributions, read_record
from envforge.patching.capture import capture_file, check_versions, write_patchset
from envforge.patching.manifest import originals_dir, read_installed, read_manifest
from envforge.patching.operations import OpContext
from envforge.patching.operations.base import relpath_check
from envforge.patching.parserlimits import check_control, check_text
from envforge.patching.patchset import Patchset, load_patchset, patchset_id_problem
from envforge.patching.planning import evaluate_file
from envforge.patching.states import DRIFTED

__all__ = ["ImportedPatchset", "import_diff"]

_DIFF_HINT = (
    "give a unified diff: the .diff of an upstream pull request saved to a file, or "
    "`diff -u a/PATH b/PATH` / `git diff` of the change"
)
_EXACT_HINT = (
    "the diff was made against other code: take the diff of the change against this release (or a "
    "pull request based on it), or point ENV/--site-packages at the release it was made for; "
    "hunks are applied exactly, never with fuzz"
)


@dataclass(frozen=True, slots=True)
class ImportedPatchset:
    """What :func:`import_diff` wrote: the patchset ``path``, the ``distribution`` and ``version``
    it was made on, the diff's ``diff_sha256`` (hex), the hunk count and one line per operation."""

    path: Path
    distribution: str
    version: str
    diff_sha256: str
    hunks: int
    operations: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Hunk:
    """One hunk: ``header`` (``@@ -189,7 +189,7 @@``), 1-based ``source_start``, the lines it
    needs (``source``: context and removed) and the lines it gives (``target``), ends kept."""

    header: str
    source_start: int
    source: tuple[str, ...]
    target: tuple[str, ...]


def _hunk(h: Any) -> _Hunk:
    """A unidiff ``Hunk`` as :class:`_Hunk`; ``\\ No newline at end of file`` strips the line before."""
    source: list[str] = []
    target: list[str] = []
    last: str = " "
    for line in h:
        if line.line_type == "\\":
            if last in " -" and source:
                source[-1] = source[-1].rstrip("\n")
            if last in " +" and target:
                target[-1] = target[-1].rstrip("\n")
            continue
        if line.line_type in " -":
            source.append(line.value)
        if line.line_type in " +":
            target.append(line.value)
        last = line.line_type
    header = str(h).splitlines()[0].rstrip()
    return _Hunk(header, h.source_start, tuple(source), tuple(target))


def _parse(data: bytes, label: str) -> Any:
    """The unidiff ``PatchSet`` of ``data``.

    :raises InputError: not UTF-8, CRLF line endings (a file header ending in CR), not a unified
        diff, or no file in it.
    """
    from unidiff.errors import UnidiffParseError  # lazy: only `patches import` parses diffs
    from unidiff.patch import PatchSet  # lazy: as above

    try:
        text = data.decode("utf-8")
        check_control(text, label)
        crlf = next(
            (
                n
                for n, line in enumerate(text.splitlines(keepends=True), start=1)
                if line.startswith(("--- ", "+++ ")) and line.endswith("\r\n")
            ),
            None,
        )
        if crlf is not None:  # a file header never ends in CR: the whole diff was converted (a Windows save)
            raise InputError(
                f"{label}:{crlf}: the file header ends in CRLF (\\r\\n): the diff was saved with "
                "Windows line endings, so no hunk matches the released files",
                hint=f"convert it (dos2unix {label}) and import it again",
            )
        patch = PatchSet(text)
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: not UTF-8 text (byte {exc.start})", hint=_DIFF_HINT) from None
    except UnidiffParseError as exc:
        raise InputError(f"{label}: not a unified diff: {exc}", hint=_DIFF_HINT) from None
    if not len(patch):
        raise InputError(f"{label}: no file header (--- a/PATH, +++ b/PATH) in it", hint=_DIFF_HINT)
    return patch


def _strip(name: str) -> str:
    """A diff path without git's ``a/`` / ``b/`` prefix."""
    return name[2:] if name.startswith(("a/", "b/")) else name


def _site_path(pf: Any, prefix: str, label: str) -> str:
    """The site-packages path of one file of the diff, after every file-level refusal."""
    name = _strip(pf.target_file if pf.source_file == "/dev/null" else pf.source_file)
    where = f"{label}: {name}"
    first = _hunk(pf[0]).header if len(pf) else "(no hunk)"
    if pf.is_binary_file:
        raise InputError(f"{where}: a binary file; a patchset edits Python source", hint="drop this file from the diff")
    if pf.is_added_file or pf.is_removed_file:
        what = "creates" if pf.is_added_file else "deletes"
        raise InputError(
            f"{where} hunk {first}: {what} a file; a patchset edits existing Python files",
            hint="drop this file from the diff",
        )
    if pf.is_rename or _strip(pf.source_file) != _strip(pf.target_file):
        raise InputError(
            f"{where}: renamed to {_strip(pf.target_file)}; a patchset edits files in place",
            hint="drop the rename from the diff",
        )
    if prefix and not name.startswith(prefix):
        raise InputError(f"{where}: outside --upstream-prefix {prefix!r}", hint="check --upstream-prefix")
    path = name[len(prefix) :]
    if (problem := relpath_check(path)) is not None:
        raise InputError(f"{where}: {problem}", hint="a diff names files relative to the repository root")
    if not path.endswith(".py"):
        raise InputError(
            f"{where} hunk {first}: not a Python file; a patchset edits Python source",
            hint="drop this file from the diff",
        )
    return path


def _owner(site_packages: Path, paths: Sequence[str], label: str) -> Installed:
    """The one distribution whose RECORD (PEP 376) lists every path.

    :raises InputError: a path no distribution lists (with the ``--upstream-prefix`` that would
        fit, when a tail of the path is one), or paths of two distributions.
    """
    owners: dict[str, Installed] = {}
    dists = installed_distributions(site_packages)
    records = {d.name: {e.path for e in read_record(d)} for d in dists.values()}
    for path in paths:
        found = [name for name, files in records.items() if path in files]
        if not found:
            parts = path.split("/")
            fits = next(
                (
                    "/".join(parts[:i]) + "/"
                    for i in range(1, len(parts))
                    if any("/".join(parts[i:]) in f for f in records.values())
                ),
                None,
            )
            raise InputError(
                f"{label}: {path} is not a file of any distribution installed in {site_packages}",
                hint=(
                    f"the diff's paths carry the repository's layout: pass --upstream-prefix {fits}"
                    if fits
                    else "point ENV/--site-packages at an environment with the distribution"
                ),
            )
        owners[path] = dists[found[0]]
    names = sorted({d.name for d in owners.values()})
    if len(names) > 1:
        raise InputError(
            f"{label}: the diff changes files of {' and '.join(names)}; a patchset patches one distribution",
            hint="split the diff per distribution and import each",
        )
    return next(iter(owners.values()))


def _released(site_packages: Path, path: str) -> bytes:
    """The released bytes of ``path``: envforge's saved original when it patched the file."""
    manifest = read_manifest(site_packages)
    if manifest is not None:
        for f in manifest.files:  # the first record of a file holds the bytes as released
            if f.path == path:
                return (originals_dir(site_packages) / f.original_sha256).read_bytes()
    return read_installed(site_packages, site_packages / path)


def _locate(lines: Sequence[str], hunk: _Hunk, start: int) -> int | None:
    """0-based index of the hunk's source lines in ``lines`` at or after ``start``: where the
    header says when they are there, else their one other place; None when absent or ambiguous."""
    n = len(hunk.source)
    if not n:
        return min(max(hunk.source_start, start), len(lines))
    at = hunk.source_start - 1
    if at >= start and tuple(lines[at : at + n]) == hunk.source:
        return at
    found = [i for i in range(start, len(lines) - n + 1) if tuple(lines[i : i + n]) == hunk.source]
    return found[0] if len(found) == 1 else None


def _mismatch(lines: Sequence[str], hunk: _Hunk) -> str:
    """Where and how the hunk's source lines differ from the file at the header's line."""
    at = hunk.source_start - 1
    for k, want in enumerate(hunk.source):
        got = lines[at + k] if at + k < len(lines) else "(end of file)"
        if got != want:
            if got.rstrip("\r\n") == want.rstrip("\r\n"):  # invisible in the text: say which ending is which
                return (
                    f"line {at + k + 1} ends in {_ending(got)}, the hunk's in {_ending(want)} (a diff saved with "
                    "other line endings: convert it, e.g. dos2unix)"
                )
            shown, expected = got.removesuffix("\n"), want.removesuffix("\n")  # trailing blanks stay visible
            return f"line {at + k + 1} is {shown!r}, the hunk expects {expected!r}"
    return "its lines occur more than once after the previous hunk"


def _ending(line: str) -> str:
    """A line's ending in words: ``CRLF (\\r\\n)``, ``LF (\\n)``, ``CR (\\r)`` or ``no newline``."""
    for end, words in (("\r\n", "CRLF (\\r\\n)"), ("\n", "LF (\\n)"), ("\r", "CR (\\r)")):
        if line.endswith(end):
            return words
    return "no newline"


def _apply(text: str, hunks: Sequence[_Hunk], where: str) -> str:
    """``text`` with every hunk applied exactly (see the module doc).

    :raises InputError: a hunk that does not match, naming it and the first differing line.
    """
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    pos = 0
    for hunk in hunks:
        at = _locate(lines, hunk, pos)
        if at is None:
            raise InputError(
                f"{where} hunk {hunk.header} does not apply exactly: {_mismatch(lines, hunk)}; nothing written",
                hint=_EXACT_HINT,
            )
        out += lines[pos:at]
        out += hunk.target
        pos = at + len(hunk.source)
    return "".join(out + lines[pos:])


def _capture(path: str, original: str, hunks: Sequence[_Hunk], where: str) -> tuple[list[dict[str, str]], list[str]]:
    """The operations of one file; a capture refusal is pinned on the first hunk refused alone."""
    edited = _apply(original, hunks, where)
    try:
        return capture_file(path, original.encode(), edited.encode(), label=where)
    except InputError as exc:
        culprit = next((h for h in hunks if _refused(path, original, h, where)), None)
        named = f" hunk {culprit.header}" if culprit else f" ({len(hunks)} hunks together)"
        raise InputError(
            f"{where}{named} cannot be expressed as envforge's operations: "
            f"{exc.message.split(': ', 1)[-1]}; nothing written",
            hint="import the definitions it changes only (drop that hunk, or split the diff), or "
            "write the patchset by hand (docs/patchsets.md, Operations)",
        ) from None


def _refused(path: str, original: str, hunk: _Hunk, where: str) -> bool:
    try:
        capture_file(path, original.encode(), _apply(original, [hunk], where).encode(), label=where)
    except InputError:
        return True
    return False


def _round_trip(target: Path, original: dict[str, str], edited: dict[str, str]) -> None:
    """The written patchset, applied to the released text, gives the diff's result exactly.

    :raises InputError: it does not (:func:`write_patchset` puts the file back as it was).
    """
    ps: Patchset = load_patchset(target)
    ctx = OpContext(read_text=lambda p: original.get(p), patchset_dir=target.parent)
    for path, before in original.items():
        outcomes, after = evaluate_file(ps, path, before.encode(), ctx, already=False)
        drifted = [o.detail for _, state, o in outcomes if state == DRIFTED]
        if drifted or after != edited[path].encode():
            raise InputError(
                f"{path}: the operations do not give the diff's result "
                f"({drifted[0] if drifted else 'other bytes'}); nothing written",
                hint="write the patchset by hand (docs/patchsets.md, Operations)",
            )


def _check_origin(origin: str | None) -> None:
    """Refuse an ``--origin`` with credentials (``https://TOKEN@host``, ``user:password@``) or a query
    string (``?token=...``): it is written into the patchset, which is committed and printed.

    :raises InputError: as above, the URL shown with ``<credentials>`` (:func:`envforge.core.urls.redact`).
    """
    if origin is None:
        return
    check_control(origin, "--origin")
    shown = redact(origin)
    scheme, sep, rest = origin.rpartition("://")
    bare = re.match(r"[^/?#\s]*@", rest)  # user:password@host, with or without a scheme
    if bare is not None:
        shown = f"{scheme}{sep}<credentials>@{rest[bare.end() :]}"
    if shown != origin or re.search(r"\?[^\s]*=", origin):
        raise InputError(
            f"--origin '{shown.partition('?')[0]}' carries credentials or a query string, which "
            "would be written into the patchset (committed with the project) and printed",
            hint="give the public URL of the diff, e.g. https://github.com/OWNER/REPO/pull/N.diff",
        )


def import_diff(
    diff: Path,
    site_packages: Path,
    patchsets_dir: Path,
    pid: str,
    reason: str,
    *,
    versions: str | None = None,
    origin: str | None = None,
    upstream_prefix: str = "",
    force: bool = False,
) -> ImportedPatchset:
    """Write ``<patchsets_dir>/<pid>.toml`` from the unified diff ``diff`` (see the module doc).

    :param site_packages: holds the released files the diff is applied to (an environment, or a
        release unpacked by :func:`envforge.patching.releases.fetch_release`).
    :param versions: PEP 440 specifier (default ``==<the version in site_packages>``).
    :param origin: where the diff comes from (a pull request URL; default the diff's file name).
    :param upstream_prefix: the import root's directory in the upstream repository (``python/``
        for sglang): stripped from the diff's paths, recorded as ``upstream-prefix``.
    :raises InputError: a bad id or empty reason, the patchset file exists (unless ``force``), a
        diff that is not a unified diff (at most 1 MiB), and every refusal of the module doc.
    """
    if (problem := patchset_id_problem(pid)) is not None:
        raise InputError(f"--id {problem}", hint="e.g. --id flashinfer-trtllm-comm-sm120")
    if not reason.strip():
        raise InputError("--reason is empty: a patchset says why it exists", hint='--reason "why the patch is needed"')
    check_versions(versions)
    _check_origin(origin)
    target = patchsets_dir / f"{pid}.toml"
    if target.exists() and not force:
        raise InputError(f"{target} exists", hint="choose another --id, or pass --force to overwrite it")
    data = read_bytes(diff, what="diff", limit=SMALL_LIMIT, hint=_DIFF_HINT)
    patch = _parse(data, str(diff))
    files = [(pf, _site_path(pf, upstream_prefix, str(diff))) for pf in patch]
    dist = _owner(site_packages, [p for _, p in files], str(diff))
    ops: list[dict[str, str]] = []
    lines: list[str] = []
    original: dict[str, str] = {}
    edited: dict[str, str] = {}
    for pf, path in files:
        where = f"{diff}: {_strip(pf.source_file)}"
        raw = _released(site_packages, path)
        try:
            original[path] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(f"{where}: the released file is not UTF-8; cannot apply a text diff to it") from None
        hunks = [_hunk(h) for h in pf]
        edited[path] = _apply(original[path], hunks, where)
        check_text(edited[path], f"{where} (as the diff makes it)")  # before libcst sees it: never a crash
        file_ops, file_lines = _capture(path, original[path], hunks, where)
        ops += file_ops
        lines += file_lines
    if not ops:
        raise InputError(f"{diff}: changes nothing in {dist.name} {dist.version}", hint=_DIFF_HINT)
    sha = hashlib.sha256(data).hexdigest()
    meta = {
        "id": pid,
        "distribution": dist.name,
        "versions": versions or f"=={dist.version}",
        "reason": reason,
        "upstream-prefix": upstream_prefix,
        "diff-sha256": sha,
        "diff-origin": origin or diff.name,
    }
    write_patchset(
        target,
        meta,
        ops,
        comment=f"Imported by `envforge patches import` from {origin or diff.name} on {dist.name} {dist.version}.",
        check=lambda written: _round_trip(written, original, edited),
    )
    return ImportedPatchset(target, dist.name, dist.version, sha, sum(len(pf) for pf, _ in files), tuple(lines))
