"""``patches export``: a patchset as a plain unified diff for an upstream pull request.

The diff is taken from the original released file (the copy kept in the manifest when envforge
already patched this site-packages, else the installed file) to what the patchset makes of it;
paths are ``a/<upstream-prefix><path>`` / ``b/...`` so ``git apply`` accepts it at the root of a
checkout of the upstream repository (``python/sglang/...`` for sglang).
"""

from __future__ import annotations

from pathlib import Path

from envforge.core.errors import CheckFailed
from envforge.core.textfile import read_state
from envforge.installed.editable import editable_install
from envforge.patching.manifest import Manifest, originals_dir, read_manifest, rebuild_hint
from envforge.patching.operations import OpContext
from envforge.patching.patchset import Patchset
from envforge.patching.planning import evaluate_file, installed_version, refuse_interrupted
from envforge.patching.source import decode_source
from envforge.patching.states import DRIFTED, FileChange, unified_diff

__all__ = ["export_diff"]


def export_diff(site_packages: Path, patchset: Patchset) -> str:
    """The unified diff of ``patchset`` against the original files in ``site_packages`` (for an
    editable install, the files of its checkout: :mod:`envforge.installed.editable`).

    :raises CheckFailed: the distribution is missing or out of range, an operation drifted, the
        released code already does everything (nothing to export), or an interrupted apply or revert
        left files half written (:func:`envforge.patching.planning.refuse_interrupted`).
    :raises InputError: a saved original (``.envforge/originals/<sha256>``) is not a regular file
        or is larger than 64 MiB.
    """
    refuse_interrupted(site_packages)  # a half-written file is neither the original nor the patched one
    version = installed_version(site_packages, patchset.distribution)
    if version is None or not patchset.specifier.contains(version, prereleases=True):
        raise CheckFailed(
            f"cannot export {patchset.id}: {patchset.distribution} {version or 'is not installed'}"
            f" is outside {patchset.versions}",
            hint=f"point --site-packages at an environment with {patchset.distribution}{patchset.versions}",
        )
    manifest = read_manifest(site_packages) or Manifest()
    editable = editable_install(site_packages, patchset.distribution)  # B21: read the checkout's files

    def original(path: str) -> bytes | None:
        rec = manifest.file(patchset.id, path)
        if rec is not None:  # envforge's own copy: a FIFO or a directory in its place is named, never opened
            try:
                return read_state(
                    originals_dir(site_packages) / rec.original_sha256,
                    what="saved original",
                    hint=lambda: rebuild_hint(site_packages),
                )
            except FileNotFoundError:
                return None
        source = site_packages / path
        if editable is not None and not source.exists():
            source = editable.source_of(path) or source
        return source.read_bytes() if source.is_file() else None

    def read_text(path: str) -> str | None:
        data = original(path)
        return None if data is None else decode_source(data)

    ctx = OpContext(read_text=read_text, patchset_dir=patchset.path.parent)
    out = []
    for path in patchset.files:
        before = original(path)
        if before is None:
            raise CheckFailed(f"cannot export {patchset.id}: {path} is missing in {site_packages}")
        outcomes, after = evaluate_file(patchset, path, before, ctx, already=False)
        drifts = [o.detail for _, state, o in outcomes if state == DRIFTED]
        if drifts:
            raise CheckFailed(
                f"cannot export {patchset.id}: {path}: {drifts[0]}",
                hint="run `envforge apply-patches --dry-run` for the full report",
            )
        if after != before:
            out.append(unified_diff(FileChange(patchset.id, path, before, after), patchset.upstream_prefix))
    if not out:
        raise CheckFailed(
            f"nothing to export: {patchset.distribution} {version} already does what {patchset.id} does",
            hint="the patch is upstream-fixed for this version",
        )
    return "".join(out)
