"""Do the patchsets a variant lists apply to the versions it locks? (field case B41)

A patchset is written for one distribution and a ``versions`` specifier (``patchsets/<id>.toml``).
After a version bump a listed patchset whose specifier excludes the new version would be skipped by
every build as ``out-of-range``, and its fix would be gone without a word. So a listed patchset that
does not apply to the locked version of its distribution (or whose distribution is not in the lock)
is an error at ``lock`` and ``build`` and a reason at ``lock --check`` (:mod:`envforge.lock.check`),
unless the recipe retires it for the variant with a reason (``retire-patchsets``, docs/recipes.md):
like pnpm's ``ERR_PNPM_UNUSED_PATCH`` and ``allowUnusedPatches``, but per patchset, with the reason
recorded in the lock (``[tool.envforge] retired-patchsets``).

"Applies" is the patch engine's own test (:mod:`envforge.patching.planning`): the specifier contains
the version, pre-releases included. A distribution with several locked entries (per-platform
markers) is applied to when one of its versions is in range.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from envforge.core.errors import CheckFailed
from envforge.lock.model import PatchsetRef

if TYPE_CHECKING:  # annotations only: lock diff imports this module and never loads recipes
    from envforge.recipe.model import ResolvedVariant

__all__ = ["PatchsetsNotApplied", "Unapplied", "require_applicable", "retired_rows", "unapplied_patchsets"]


@dataclass(frozen=True, slots=True)
class Unapplied:
    """A listed patchset ``id`` that does not apply: written for ``distribution`` ``versions``, the
    lock holds ``locked`` (that distribution's versions, sorted; empty: not in the lock)."""

    id: str
    distribution: str
    versions: str
    locked: tuple[str, ...]

    def describe(self) -> str:
        """``patchset X does not apply to the locked guardkit 1.1 (its versions: >=1.0,<1.1)``."""
        where = (
            f"the locked {self.distribution} {', '.join(self.locked)}"
            if self.locked
            else f"this lock: {self.distribution} is not in it"
        )
        return f"patchset {self.id} does not apply to {where} (its versions: {self.versions})"

    def way_out(self) -> str:
        """What to do: check and widen ``versions``, or retire the patchset with a reason."""
        at = f"{self.distribution}=={self.locked[-1]}" if self.locked else self.distribution
        return (
            f"check {self.id} on {at} (`envforge patches check {self.id} --against {at}`) and widen "
            f"`versions` in patchsets/{self.id}.toml, or retire it with the reason: "
            f'retire-patchsets = [{{ id = "{self.id}", reason = "..." }}]'
        )


def _applies(specifier: SpecifierSet, version: str) -> bool:
    try:
        return specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def unapplied_patchsets(refs: Sequence[PatchsetRef], locked: Iterable[tuple[str, str | None]]) -> list[Unapplied]:
    """The patchsets of ``refs`` that apply to no locked version of their distribution.

    :param refs: the variant's patchsets (not the retired ones); a ref without ``distribution`` or
        with a specifier that does not parse is not judged here (loading the patchset refuses it).
    :param locked: ``(name, version)`` of every locked package entry.
    """
    from packaging.utils import canonicalize_name  # lazy: packaging.tags, about 8 ms, only with patchsets

    if not refs:
        return []
    versions: dict[str, list[str]] = {}
    for name, version in locked:
        if version is not None:
            versions.setdefault(canonicalize_name(name), []).append(str(version))
    out = []
    for ref in refs:
        if not ref.distribution:
            continue
        try:
            spec = SpecifierSet(ref.versions)
        except InvalidSpecifier:
            continue
        have = sorted(set(versions.get(canonicalize_name(ref.distribution), [])), key=_sort_key)
        if not any(_applies(spec, v) for v in have):
            out.append(Unapplied(ref.id, canonicalize_name(ref.distribution), ref.versions, tuple(have)))
    return out


def _sort_key(version: str) -> tuple[int, Version | str]:
    try:
        return 0, Version(version)
    except InvalidVersion:
        return 1, version


class PatchsetsNotApplied(CheckFailed):
    """Listed patchsets do not apply to the locked versions (exit 1); ``unapplied`` holds them."""

    def __init__(self, subject: str, unapplied: Sequence[Unapplied], variant: ResolvedVariant) -> None:
        super().__init__(
            f"{subject}: the recipe lists {'a patchset' if len(unapplied) == 1 else 'patchsets'} that "
            f"{'does' if len(unapplied) == 1 else 'do'} not apply to the locked versions; a build would skip "
            f"{'it' if len(unapplied) == 1 else 'them'} and the fix would be gone:\n"
            + "\n".join(f"  {u.describe()}" for u in unapplied),
            hint="; ".join(u.way_out() for u in unapplied)
            + f" under [variant.{variant.variant}] (or [recipe] for every variant) of "
            f"recipes/{variant.recipe}.toml, then `envforge lock {variant.recipe} --variant {variant.variant}`",
        )
        self.unapplied = tuple(unapplied)


def require_applicable(
    subject: str, variant: ResolvedVariant, refs: Sequence[PatchsetRef], locked: Iterable[tuple[str, str | None]]
) -> None:
    """Raise unless every patchset of ``refs`` applies to a locked version of its distribution.

    :param subject: what the message is about (the lock path, or ``recipe gk, variant default``).
    :raises PatchsetsNotApplied: one line per patchset that does not apply, the way out in the hint.
    """
    unapplied = unapplied_patchsets(refs, locked)
    if unapplied:
        raise PatchsetsNotApplied(subject, unapplied, variant)


def retired_rows(variant: ResolvedVariant) -> list[dict[str, str]]:
    """``[tool.envforge] retired-patchsets`` rows of ``variant``: ``{id, reason}`` in recipe order."""
    return [{"id": pid, "reason": reason} for pid, reason in variant.retired_patchsets.items()]
