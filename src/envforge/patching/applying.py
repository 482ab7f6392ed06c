"""Apply patchsets: plan, then write every patchset that neither drifted nor was refused.

The files go through one journaled write (:mod:`envforge.patching.journal`: all of them or none,
across crashes); the originals and the new sha256s are recorded in the patch manifest
(:mod:`envforge.patching.manifest`). :func:`envforge.patching.reverting.revert` undoes it byte-exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from envforge.core.fs import sha256_hex
from envforge.patching.journal import journaled_write, recover
from envforge.patching.manifest import AppliedPatchset, Manifest, PatchedFile, read_manifest, write_manifest
from envforge.patching.memo import ResultCache
from envforge.patching.patchset import Patchset, order_patchsets
from envforge.patching.planning import installed_version, plan
from envforge.patching.resolution import env_interpreter, not_imported, resolve_modules
from envforge.patching.states import ALREADY_APPLIED, FileChange, PatchReport

__all__ = ["apply"]


def apply(
    site_packages: Path,
    patchsets: Iterable[Patchset],
    *,
    dry_run: bool = False,
    cache: ResultCache | None = None,
    python: Path | None = None,
) -> PatchReport:
    """Plan, then write every patchset that neither drifted, nor is shadowed, nor was refused, in
    one journaled write (:func:`~envforge.patching.journal.journaled_write`: all their files or
    none, across crashes). With ``dry_run`` nothing is written (the report's ``changes`` hold the diff).

    Each file the patchsets edit must be the file the environment's interpreter imports for its
    module name (B43, :mod:`envforge.patching.resolution`): ``python`` (default: the interpreter of
    the virtual environment ``site_packages`` belongs to) is asked with one probe that runs no code
    of the environment; a file it does not import is ``shadowed``. A bare directory with no
    interpreter (an unpacked wheel) is not asked.

    :raises InputError: unreadable manifest; :raises OSError: a file could not be written (the
        files of that patchset already replaced are restored first).
    :raises envforge.core.probe.ProbeError: the interpreter cannot run the probe.
    """
    recovered = () if dry_run else recover(site_packages)
    ordered = order_patchsets(list(patchsets))
    shadowed = _shadowed(site_packages, ordered, python or env_interpreter(site_packages))
    report = replace(plan(site_packages, ordered, cache=cache, shadowed=shadowed), recovered=recovered)
    if dry_run:
        return report
    manifest = read_manifest(site_packages) or Manifest()
    _refresh_digests(site_packages, ordered, report, manifest)
    if not report.changes:
        return report
    manifest = read_manifest(site_packages) or Manifest()
    versions = {ps.distribution: installed_version(site_packages, ps.distribution) for ps in ordered}
    by_id = {ps.id: ps for ps in ordered}
    ids = list(dict.fromkeys(c.patchset for c in report.changes))
    for pid in ids:
        ps = by_id[pid]
        mine = [x for x in report.changes if x.patchset == pid]
        manifest = _record_patchset(ps, mine, manifest, versions[ps.distribution] or "")
    # one journaled write for every patchset of this run: fewer fsyncs, and all files or none
    journaled_write(site_packages, "apply", ids, report.changes, manifest)
    return replace(report, written=True)


def _shadowed(sp: Path, ordered: Sequence[Patchset], python: Path | None) -> dict[str, str]:
    """The files of ``ordered`` present in ``sp`` that ``python`` does not import, with why."""
    if python is None:
        return {}
    paths = [p for ps in ordered for p in ps.files if (sp / p).is_file()]
    found = resolve_modules(python, paths)
    return {p: why for p, res in found.items() if (why := not_imported(sp, res)) is not None}


def _refresh_digests(sp: Path, ordered: Sequence[Patchset], report: PatchReport, manifest: Manifest) -> None:
    """Record the current digest of a patchset whose file changed (comments, reason) while every
    edit it makes is still in place, so the manifest names the patchset file in use."""
    changed = {c.patchset for c in report.changes}
    fresh = {
        ps.id: ps.digest
        for ps in ordered
        if ps.id not in changed
        and (rec := manifest.patchset(ps.id)) is not None
        and rec.digest != ps.digest
        and all(r.state == ALREADY_APPLIED for r in report.results if r.patchset == ps.id)
    }
    if fresh:
        records = tuple(replace(p, digest=fresh.get(p.id, p.digest)) for p in manifest.patchsets)
        write_manifest(sp, Manifest(records, manifest.files))


def _record_patchset(ps: Patchset, changes: Sequence[FileChange], manifest: Manifest, version: str) -> Manifest:
    """``manifest`` with ``ps`` recorded as applied and its ``changes`` as patched files."""
    files = list(manifest.files)
    for c in changes:
        rec = manifest.file(ps.id, c.path)
        original = rec.original_sha256 if rec else sha256_hex(c.before)
        entry = PatchedFile(c.path, ps.id, original, sha256_hex(c.after))
        files = [entry if f is rec else f for f in files] if rec else [*files, entry]
    record = AppliedPatchset(ps.id, ps.digest, ps.distribution, version, ps.activation)
    others = [p for p in manifest.patchsets if p.id != ps.id]
    return Manifest((*others, record), tuple(files))
