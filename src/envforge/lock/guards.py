"""The guards ``envforge lock`` runs on uv's resolution before anything is written.

- B01: every package came from an index the recipe allows for it (:mod:`envforge.lock.routing`);
- B03: nothing is built for another CUDA major than the variant's, except the recipe's reviewed
  ``cuda-exceptions`` (the failing chain of requirements is named);
- B26: a variant that declares CUDA resolves at least one CUDA build;
- B28: a package with no wheel (built from source at install time) only with the recipe's
  ``build-from-source`` opt-in;
- ``exclude-newer`` held for every locked file: none from ``--find-links`` unless exempt (N32).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.core.errors import CheckFailed
from envforge.lock.model import LockError
from envforge.lock.resolve import dependency_chains
from envforge.lock.routing import FIND_LINKS, attribute, effective_indexes, index_violations, override_routes
from envforge.recipe.cuda import cuda_major, cuda_mismatches
from envforge.recipe.model import ResolvedVariant

__all__ = ["guard_resolution", "source_builds"]


def guard_resolution(
    packages: list[dict[str, Any]], variant: ResolvedVariant, find_links: Sequence[Path], offline: bool = False
) -> None:
    """Run every guard on uv's ``packages`` (parsed ``[[packages]]`` tables) for ``variant``.

    :raises CheckFailed: a package from an index not allowed for it, built for another CUDA major,
        no CUDA build in a CUDA variant, or a source build the recipe does not opt into.
    :raises LockError: a ``cuda-exceptions`` or ``build-from-source`` entry that matches nothing; an
        ``exclude-newer`` cutoff that could not be applied to files from ``find_links``.
    """
    problems = [v.describe() for v in index_violations(packages, variant, find_links)]
    if problems:
        raise CheckFailed(
            f"{variant.lock_name}: packages came from indexes not allowed for them:\n"
            + "\n".join("  " + p for p in problems),
            hint="route the package to its index in the recipe, or remove the extra index "
            "from your uv configuration (UV_INDEX_URL, UV_EXTRA_INDEX_URL)",
        )
    _cutoff_guard(packages, variant, find_links, offline)
    _cuda_guard(packages, variant, find_links, offline)
    _no_cuda_guard(packages, variant)
    _source_build_guard(packages, variant)


def _cutoff_guard(
    packages: list[dict[str, Any]], variant: ResolvedVariant, find_links: Sequence[Path], offline: bool = False
) -> None:
    """``exclude-newer`` must hold for every locked file, or the lock records a cutoff it does not obey.

    A ``--find-links`` directory (or flat page) carries no upload times, and uv keeps its files whatever
    their date: tried with uv 0.13.9, ``--exclude-newer 2000-01-01T00:00:00Z --find-links DIR`` locks a
    wheel built in 2026 (fault suite N32). So a file from ``find_links`` of a package the recipe does not
    exempt (``[exclude-newer-exempt]``, recorded in the lock) is refused rather than warned about: the
    committed lock would say the cutoff held, and a re-lock against the index would differ.

    The same holds for an override of a package routed to an index when locking online: uv finds it
    only through that index's page of the package given as ``--find-links`` (B51,
    :func:`envforge.lock.routing.override_routes`), a flat page without upload times (tried: a cutoff of
    2024-01-01 locked a release uploaded 2025-06-01 that way).
    """
    if not variant.exclude_newer:
        return
    _routed_override_cutoff(packages, variant, offline)
    if not find_links:
        return
    indexes = effective_indexes(variant)
    unbounded = [
        f"{p['name']} {p.get('version', '')}"
        for p in packages
        if canonicalize_name(p["name"]) not in variant.exclude_newer_exempt
        and any(
            attribute(f.get("url") or f.get("path"), indexes, find_links) == FIND_LINKS
            for f in [*p.get("wheels", []), *([p["sdist"]] if "sdist" in p else [])]
        )
    ]
    if unbounded:
        first = unbounded[0].split(" ")[0]
        raise LockError(
            f"{variant.lock_name}: [recipe] exclude-newer ({variant.exclude_newer}) cannot be applied to files "
            "from --find-links, which have no upload times (uv keeps them whatever their date), and the lock "
            f"would record the cutoff as if it held: {', '.join(unbounded)}",
            hint=(
                "lock where the index is reachable, without --find-links (uv reads the index's upload times), "
                "or exempt each package with the reason reviewers read: [exclude-newer-exempt] "
                f'{first} = "from a wheelhouse, no upload times" (recorded in the lock\'s inputs)'
            ),
        )


def _routed_override_cutoff(packages: list[dict[str, Any]], variant: ResolvedVariant, offline: bool) -> None:
    """:raises LockError: an overridden routed package (looked up through a find-links page, B51) that
    ``[exclude-newer-exempt]`` does not exempt, when the lock is made online (offline, no route is given)."""
    routed = set() if offline else set(override_routes(variant))
    hit = [
        f"{p['name']} {p.get('version', '')}"
        for p in packages
        if (name := canonicalize_name(p["name"])) in routed and name not in variant.exclude_newer_exempt
    ]
    if hit:
        first = hit[0].split(" ")[0]
        raise LockError(
            f"{variant.lock_name}: [recipe] exclude-newer ({variant.exclude_newer}) cannot be applied to "
            f"{', '.join(hit)}: an override of a package routed to an index is looked up through that index's "
            "page of the package given as --find-links (B51, uv#16933), which has no upload times, so uv keeps "
            "its files whatever their date, and the lock would record the cutoff as if it held",
            hint=(
                "exempt it with the reason reviewers read: [exclude-newer-exempt] "
                f'{first} = "override of a routed package: no upload times" (recorded in the lock\'s inputs), '
                "and pin the override with ==; or drop the override"
            ),
        )


def _cuda_guard(
    packages: list[dict[str, Any]], variant: ResolvedVariant, find_links: Sequence[Path], offline: bool
) -> None:
    """B03: nothing built for another CUDA major, except the recipe's reviewed ``cuda-exceptions``;
    an exception that matches no such package is itself an error (it would hide the next one)."""
    found = cuda_mismatches(((p["name"], str(p["version"])) for p in packages), variant.cuda)
    wrong = [w for w in found if w.name not in variant.cuda_exceptions]
    unused = sorted(set(variant.cuda_exceptions) - {w.name for w in found})
    if unused:
        raise LockError(
            f"{variant.lock_name}: cuda-exceptions name packages that are not built for another "
            f"CUDA major in this lock: {', '.join(unused)}",
            hint="remove them from the recipe's cuda-exceptions (the exception is no longer needed)",
        )
    if not wrong:
        return
    chains = dependency_chains(variant, [w.name for w in wrong], find_links=find_links, offline=offline)
    lines = []
    for w in wrong:
        chain = chains.get(w.name)
        lines.append(w.describe() + (f"\n    pulled in by: {' -> '.join(chain)}" if chain and len(chain) > 1 else ""))
    raise CheckFailed(
        f"{variant.lock_name}: packages built for another CUDA major than the variant's "
        f"CUDA {variant.cuda}:\n" + "\n".join("  " + ln for ln in lines),
        hint="pin the package to a build for this CUDA major, override the upstream pin that "
        "pulls it in (with a reason), or, where upstream requires it unconditionally, accept "
        f'it: [variant.{variant.variant}.cuda-exceptions] {wrong[0].name} = "<reason>"',
    )


def _no_cuda_guard(packages: list[dict[str, Any]], variant: ResolvedVariant) -> None:
    """B26: a variant that declares a CUDA version must resolve at least one CUDA build.

    PyPI's aarch64 torch wheels of some releases are CPU-only (their metadata limits every
    ``nvidia-*`` requirement to x86_64; pytorch issue 160162), so a CUDA variant locked for aarch64
    can silently become a CPU stack. Checked for full resolutions only (``no-deps`` locks list only
    the recipe's own pins).
    """
    if not variant.cuda or variant.resolution != "full":
        return
    if any(cuda_major(p["name"], str(p.get("version"))) is not None for p in packages):
        return
    torch = next((p for p in packages if canonicalize_name(p["name"]) == "torch"), None)
    what = f"torch {torch['version']} has no +cuXXX local label and " if torch else ""
    raise CheckFailed(
        f"{variant.lock_name}: the variant declares CUDA {variant.cuda} but the lock for "
        f"{variant.target.platform} contains no CUDA build: {what}no CUDA runtime wheel (nvidia-*, cuda-*) "
        f"was resolved ({len(packages)} packages)",
        hint=(
            f"route torch to an index that has CUDA builds for {variant.target.platform}, e.g. "
            f"[variant.{variant.variant}.indexes] pytorch-cu{variant.cuda.replace('.', '')[:3]} = "
            f'"https://download.pytorch.org/whl/cu{variant.cuda.replace(".", "")[:3]}" and '
            f'torch = {{ version = "==X+cu{variant.cuda.replace(".", "")[:3]}", index = "pytorch-cu'
            f'{variant.cuda.replace(".", "")[:3]}" }}, or choose a torch release whose PyPI wheels for this '
            "platform are CUDA builds; or drop `cuda` from a variant that is meant to be CPU-only"
        ),
    )


def source_builds(packages: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """``(name, version)`` of every locked package with no wheel: uv builds it from its sdist (or
    directory, VCS checkout) at install time, with whatever build backend it resolves then (B28)."""
    return [(canonicalize_name(p["name"]), str(p.get("version", ""))) for p in packages if not p.get("wheels")]


def _source_build_guard(packages: list[dict[str, Any]], variant: ResolvedVariant) -> None:
    found = source_builds(packages)
    missing = [(n, v) for n, v in found if n not in variant.source_builds]
    unused = sorted(set(variant.source_builds) - {n for n, _ in found})
    if missing:
        listed = ", ".join(f"{n} {v}" for n, v in missing)
        raise CheckFailed(
            f"{variant.lock_name}: {listed} {'has' if len(missing) == 1 else 'have'} no wheel for "
            f"{variant.target.platform} and would be built from source at install time",
            hint=(
                f'opt in with the reason reviewers read: [build-from-source] {missing[0][0]} = "<reason>", and pin '
                'the build backend with [recipe] build-constraints = ["setuptools==X.Y.Z"]; or pin a '
                "version that ships a wheel"
            ),
        )
    if unused:
        raise LockError(
            f"{variant.lock_name}: build-from-source names packages that have wheels in this lock: {', '.join(unused)}",
            hint="remove them from the recipe's build-from-source",
        )
