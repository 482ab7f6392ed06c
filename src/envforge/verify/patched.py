"""Static verify: the patches in effect are the ones the interpreter runs and the lock lists.

Two findings the file checks cannot give (docs/verify.md, "What the patch checks prove"):

``shadowed-patch``    a patched file that the environment's interpreter does not import for its module
                      name (field case B43: ``charset_normalizer/md.py`` beside the compiled
                      ``md.cpython-3XX-x86_64-linux-gnu.so``, which ``FileFinder`` tries first), asked of
                      the interpreter with :func:`envforge.patching.resolution.resolve_modules` (one probe;
                      no module of the environment runs);
``unlisted-patchset`` a patchset recorded in the patch manifest that the environment's lock copy
                      (``[tool.envforge].patchsets``) does not list: applied by hand
                      (``envforge apply-patches ENV ID``), so the fingerprint's patch digest moved while
                      the lock, ``lock --check`` and a rebuild know nothing of it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envforge import patching
from envforge.patching.manifest import Manifest
from envforge.patching.resolution import module_name, not_imported, resolve_modules, shadow_fix
from envforge.verify.findings import Finding

__all__ = ["patch_effect", "shadowed_findings", "unlisted_findings"]


def patch_effect(
    python: Path, site_packages: Path, envforge: Mapping[str, Any], env: Mapping[str, str] | None = None
) -> list[Finding]:
    """Both checks on the environment at ``site_packages`` (interpreter ``python``; ``envforge`` is
    its lock copy's ``[tool.envforge]`` table; ``env`` the probe's process environment).
    No patch manifest: ``[]`` and no probe.

    :raises envforge.core.probe.ProbeError: the interpreter cannot run the probe (exit 3).
    :raises envforge.core.errors.InputError: the patch manifest is unreadable.
    """
    manifest = patching.read_manifest(site_packages)
    if manifest is None:
        return []
    paths = [f.path for f in manifest.files if module_name(f.path) is not None]
    resolved = resolve_modules(python, paths, env=env) if paths else {}
    why = {p: w for p, res in resolved.items() if (w := not_imported(site_packages, res)) is not None}
    entries = [e for e in ((env or {}).get("PYTHONPATH") or "").split(os.pathsep) if e]
    via = {p: e for p in why if (e := _pythonpath_entry(resolved[p].chain, entries)) is not None}
    return [*shadowed_findings(manifest, why, via), *unlisted_findings(manifest, envforge, site_packages)]


def _pythonpath_entry(chain: Sequence[Mapping[str, Any]], entries: Sequence[str]) -> str | None:
    """The ``PYTHONPATH`` entry the interpreter resolved a level of the module from, or None."""
    for level in chain:
        for where in [level.get("origin"), *(level.get("locations") or [])]:
            if not isinstance(where, str):
                continue
            real = os.path.realpath(where)
            for entry in entries:
                root = os.path.realpath(entry)
                if real == root or real.startswith(root.rstrip(os.sep) + os.sep):
                    return entry
    return None


def shadowed_findings(
    manifest: Manifest, why: Mapping[str, str], via_pythonpath: Mapping[str, str] | None = None
) -> list[Finding]:
    """One ``shadowed-patch`` finding per patched file of ``manifest`` in ``why`` (path -> what the
    interpreter imports instead, :func:`envforge.patching.resolution.not_imported`). A file the
    interpreter finds through a ``PYTHONPATH`` entry (``via_pythonpath``: path -> entry, B53) is the
    caller's doing: the fix names that entry, not the lock or the patchset."""
    out = []
    for f in manifest.files:
        if f.path not in why:
            continue
        rec = manifest.patchset(f.patchset)
        dist = rec.distribution if rec is not None else "the distribution"
        entry = (via_pythonpath or {}).get(f.path)
        fix = (
            f"the caller's PYTHONPATH entry {entry} is ahead of the environment's site-packages: unset PYTHONPATH "
            "or remove that entry (`envforge run` and `envforge bench` drop it unless --keep-pythonpath); the "
            "lock and the patchset are fine"
            if entry is not None
            else shadow_fix(dist, f"patchsets/{f.patchset}.toml")
        )
        out.append(
            Finding(
                "shadowed-patch",
                f"{f.patchset}: {f.path}",
                f"`import {module_name(f.path)}` loads {f.path}, the patched file",
                f"{why[f.path]}: the patch is on disk but never runs",
                fix,
            )
        )
    return out


def unlisted_findings(manifest: Manifest, envforge: Mapping[str, Any], site_packages: Path) -> list[Finding]:
    """One ``unlisted-patchset`` finding per patchset of ``manifest`` that the lock table
    ``envforge`` (``patchsets = [{id, digest}, ...]``) does not list."""
    listed = [str(p.get("id")) for p in envforge.get("patchsets", []) if isinstance(p, Mapping)]
    out = []
    for rec in manifest.patchsets:
        if rec.id in listed:
            continue
        files = sorted({f.path for f in manifest.files if f.patchset == rec.id})
        out.append(
            Finding(
                "unlisted-patchset",
                rec.id,
                f"only the patchsets the lock lists ({', '.join(listed) or 'none'})",
                f"{rec.id} ({rec.distribution} {rec.version}, {rec.digest}) applied by hand: "
                f"{', '.join(files) or 'no file'} patched outside the lock",
                f"revert it (`envforge apply-patches --site-packages {site_packages} --revert {rec.id}`), "
                f"or add it to the recipe's `patchsets`, re-lock (`envforge lock`) and rebuild "
                f"(`envforge build`)",
            )
        )
    return out
