"""Which patchsets a recipe can retire: those a release its lock holds, or will move to, already
does (``envforge patches check --recipe NAME``, issue 31).

``patches check`` reports ``upstream-fixed`` for a release where every operation of a patchset
already holds (:mod:`envforge.patching.compat`). For each variant of the recipe that applies the
patchset (listed in ``[recipe] patchsets``, not retired), the variant's lock
(``lockfiles/pylock.<recipe>-<variant>.toml``) says which version of the distribution it holds:

* the locked version is one of the upstream-fixed releases: retire the patchset **now**;
* an upstream-fixed release is newer than the locked one: retire it **once the lock moves** there;
* the locked version is newer than every release checked: it was not checked (the way to check it
  is named), nothing is proposed on a guess.

Each proposal is the recipe's own ``retire-patchsets`` entry (docs/recipes.md, "Retired patchsets")
with the evidence as its reason: the releases checked and what the operations found there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from envforge.lock.model import LockError, read_lock
from envforge.patching.compat import CompatMatrix
from envforge.patching.states import UPSTREAM_FIXED
from envforge.recipe.model import Recipe
from envforge.recipe.project import Project

__all__ = ["Retirement", "propose_retirements"]


def _key(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        return Version("0")


@dataclass(frozen=True, slots=True)
class Retirement:
    """A proposal: ``recipe``'s ``variant`` can retire ``patchset`` (of ``distribution``).

    ``locked``: the distribution's versions in the variant's lock (empty: no lock, or not in it);
    ``fixed``: the checked releases where the patchset is upstream-fixed, oldest first;
    ``first_fixed``: the oldest of them not older than the locked version; ``evidence``: what the
    operations found there; ``lock``: the lock's file name (empty: not locked yet); ``adds``: the
    variant has a ``retire-patchsets`` of its own already (the entry goes into it); ``when``: ``now`` (the lock holds a fixed
    release), ``after-upgrade`` (a newer one is fixed) or ``unchecked`` (the locked version is newer
    than every release checked: nothing proposed).
    """

    recipe: str
    variant: str
    patchset: str
    distribution: str
    locked: tuple[str, ...]
    fixed: tuple[str, ...]
    evidence: tuple[str, ...]
    when: str
    first_fixed: str
    lock: str = ""
    adds: bool = False

    def reason(self) -> str:
        """The reason of the proposed entry: the evidence from ``patches check``."""
        first = self.first_fixed
        found = "; ".join(self.evidence)
        return (
            f"{self.distribution} {first} already does it: `envforge patches check {self.patchset} --against "
            f"{self.distribution}=={first}` reports upstream-fixed ({found}); upstream-fixed on "
            f"{', '.join(self.fixed)}"
        )

    def entry(self) -> str:
        """The entry as TOML: ``retire-patchsets = [{ id, reason }]`` for ``[variant.<variant>]``, or,
        when the variant retires others already (``adds``), the inline table to add to its array."""
        reason = json.dumps(self.reason(), ensure_ascii=False)  # a TOML basic string is a JSON string
        item = f'{{ id = "{self.patchset}", reason = {reason} }}'
        return f"{item} (add to its retire-patchsets)" if self.adds else f"retire-patchsets = [{item}]"

    def describe(self) -> str:
        """One line: which variant, what it locks, and when the patchset can go."""
        locks = (
            f"locks {self.distribution} {', '.join(self.locked)}"
            if self.locked
            else f"{self.lock} holds no {self.distribution}"
            if self.lock
            else "is not locked yet"
        )
        if self.when == "now":
            return f"[variant.{self.variant}] {locks}, where {self.patchset} is upstream-fixed: retire it now"
        if self.when == "after-upgrade":
            return (
                f"[variant.{self.variant}] {locks}: once its lock moves {self.distribution} to "
                f"{self.first_fixed} or later, retire {self.patchset}"
            )
        return (
            f"[variant.{self.variant}] {locks}, newer than every release checked: check it "
            f"(`envforge patches check {self.patchset} --against {self.distribution}=={self.locked[-1]}`)"
        )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (``patches check --json``, key ``retirements``)."""
        return {
            "recipe": self.recipe,
            "variant": self.variant,
            "patchset": self.patchset,
            "distribution": self.distribution,
            "locked": list(self.locked),
            "fixed": list(self.fixed),
            "when": self.when,
            "entry": self.entry() if self.when != "unchecked" else None,
        }


def _locked(project: Project, lock_name: str, distribution: str) -> tuple[str, tuple[str, ...]]:
    """``(lock file name, the distribution's locked versions)``; ``("", ())`` when not locked yet."""
    path = project.lock_path(lock_name)
    try:
        lock = read_lock(path)
    except LockError:  # not locked yet: proposals are conditional on the first lock
        return "", ()
    return path.name, tuple(
        sorted({p.version for p in lock.packages if p.name == distribution and p.version}, key=_key)
    )


def _when(locked: Sequence[str], fixed: Sequence[str], checked: Sequence[str]) -> str | None:
    if any(v in fixed for v in locked):
        return "now"
    floor = max((_key(v) for v in locked), default=None)
    if any(floor is None or _key(v) > floor for v in fixed):
        return "after-upgrade"
    if floor is not None and checked and floor > max(_key(v) for v in checked):
        return "unchecked"
    return None


def propose_retirements(matrix: CompatMatrix, recipe: Recipe, project: Project) -> tuple[Retirement, ...]:
    """The retirements ``recipe`` can make, per variant, from what ``matrix`` found upstream-fixed
    (see the module doc); in variant order, then the recipe's patchset order. A patchset no checked
    release fixes gives none.

    :raises InputError: a lock of the recipe that exists but cannot be read (as ``read_lock``).
    """
    out: list[Retirement] = []
    checked = dict(matrix.releases)
    for name in recipe.variants:
        variant = recipe.resolve(name)
        for ps in matrix.patchsets:
            if ps.id not in variant.patchsets:
                continue
            cells = [c for v in checked.get(ps.distribution, ()) if (c := matrix.cell(ps.id, v)) is not None]
            fixed = tuple(c.version for c in cells if c.state == UPSTREAM_FIXED)
            if not fixed:
                continue
            lock, locked = _locked(project, variant.lock_name, ps.distribution)
            when = _when(locked, fixed, checked.get(ps.distribution, ()))
            if when is None:
                continue
            floor = max((_key(v) for v in locked), default=None)
            first = next(
                (c for c in cells if c.version in fixed and (floor is None or _key(c.version) >= floor)),
                next(c for c in cells if c.version == fixed[0]),
            )
            evidence = tuple(dict.fromkeys(f"{f}: {m}" for f, _, _, m in first.operations))
            adds = bool(recipe.data.get("variant", {}).get(name, {}).get("retire-patchsets"))
            out.append(
                Retirement(
                    recipe.name, name, ps.id, ps.distribution, locked, fixed, evidence, when, first.version, lock, adds
                )
            )
    return tuple(out)
