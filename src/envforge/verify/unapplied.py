"""A patchset the lock lists that the installed version is outside of (field case B41).

``envforge lock`` and ``build`` refuse a listed patchset that does not apply to the locked version,
unless the recipe retires it with a reason (:mod:`envforge.lock.patchsets`). An environment built
before that rule, or from a lock made before the patchset's ``versions`` was narrowed, runs without
the fix while its patch states say ``out-of-range``: verify names it as a ``patchset-out-of-range``
finding. A rebuild from the same lock does not repair it (the recipe or the patchset must change).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from envforge.installed.distributions import find_distribution
from envforge.patching.patchset import Patchset
from envforge.verify.findings import Finding

__all__ = ["out_of_range_findings"]


def out_of_range_findings(site_packages: Path, patchsets: Sequence[Patchset]) -> list[Finding]:
    """One ``patchset-out-of-range`` finding per patchset of ``patchsets`` (the lock's) whose
    distribution is not installed in ``site_packages`` or is installed at a version its
    ``versions`` excludes (the patch engine's test: pre-releases included)."""
    out = []
    for ps in patchsets:
        dist = find_distribution(site_packages, ps.distribution)
        if dist is not None and ps.specifier.contains(dist.version, prereleases=True):
            continue
        actual = (
            f"{ps.distribution} {dist.version} installed: {ps.id} is not applied (out-of-range)"
            if dist is not None
            else f"{ps.distribution} is not installed: {ps.id} is not applied"
        )
        at = f" on {ps.distribution} {dist.version}" if dist is not None else ""
        out.append(
            Finding(
                "patchset-out-of-range",
                ps.id,
                f"{ps.distribution}{ps.versions} (the patchset's versions)",
                actual,
                f"check the fix{at} and widen `versions` in patchsets/{ps.id}.toml, or retire it in the recipe "
                f'with the reason (retire-patchsets = [{{ id = "{ps.id}", reason = "..." }}]); then relock '
                "(`envforge lock`) and rebuild (`envforge build`)",
            )
        )
    return out
