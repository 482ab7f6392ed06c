"""Lock diff: lockfile changes a reviewer can read in ten seconds.

Data flow: ``sources`` (files, ``REV:PATH``, ``--git REV``, a recipe's variants) -> ``model``
(pylock.toml and uv.lock read into one :class:`Lock`) -> ``classify`` (:class:`LockDiff`: package
changes by kind and family, ``[tool.envforge]`` changes) or ``matrix`` (:class:`VariantMatrix`) ->
``render`` (terminal, markdown, JSON data, git textconv).

Entry points: :func:`diff_sides`, :func:`diff_git`, :func:`diff_variants`, :func:`textconv`.
"""

from __future__ import annotations

from pathlib import Path

from envforge.lockdiff.classify import FieldChange, LockDiff, PackageChange, diff_locks
from envforge.lockdiff.matrix import VariantMatrix, variant_matrix
from envforge.lockdiff.model import Artifact, Lock, LockedPackage, parse_lock
from envforge.lockdiff.render import render_textconv
from envforge.lockdiff.sources import changed_lockfiles, read_lock_file, read_side, variant_locks

__all__ = ["Artifact", "FieldChange", "Lock", "LockDiff", "LockedPackage", "PackageChange",
           "VariantMatrix", "diff_git", "diff_locks", "diff_sides", "diff_variants", "parse_lock",
           "textconv"]


def diff_sides(old: str, new: str, *, base: Path) -> LockDiff:
    """Diff two sides, each a lock path (relative to ``base``) or ``REV:PATH``.

    :raises InputError: a side is missing, not a lock, or has merge-conflict markers.
    """
    return diff_locks(read_side(old, base=base), read_side(new, base=base))


def diff_git(rev: str, *, base: Path) -> tuple[LockDiff, ...]:
    """One diff per lockfile changed between ``rev`` and the working tree of the repo at ``base``."""
    return tuple(diff_locks(old, new) for old, new in changed_lockfiles(base, rev))


def diff_variants(recipe: str, *, lockfiles_dir: Path) -> VariantMatrix:
    """The variant matrix of ``recipe`` from ``lockfiles_dir/pylock.<recipe>-*.toml``."""
    return variant_matrix(recipe, variant_locks(lockfiles_dir, recipe))


def textconv(path: Path) -> str:
    """The stable readable text of one lock for ``git diff`` (see :func:`render.render_textconv`).

    :raises InputError: not a lock (the CLI falls back to the raw text so git still shows a diff).
    """
    return render_textconv(read_lock_file(path))
