"""Lock diff: lockfile changes a reviewer can read in ten seconds.

Data flow: ``sources`` (files, ``REV:PATH``, ``--git REV``, a recipe's variants) -> ``model``
(pylock.toml and uv.lock read into one :class:`Lock`) -> ``classify`` (:class:`LockDiff`: package
changes by kind and family, ``[tool.envforge]`` changes) or ``matrix`` (:class:`VariantMatrix`) ->
``render`` (terminal, markdown, JSON data, git textconv).

Entry points: :func:`diff_sides`, :func:`diff_git`, :func:`diff_variants`, :func:`textconv`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envforge.lockdiff.classify import diff_locks
from envforge.lockdiff.patchsets import with_patchset_changes
from envforge.lockdiff.render import render_textconv
from envforge.lockdiff.sources import changed_lockfiles, read_lock_file, read_side, recipe_index_names, variant_locks

if TYPE_CHECKING:  # submodules are imported by the functions below: each path pays for its own
    from envforge.lockdiff.changes import LockDiff
    from envforge.lockdiff.matrix import VariantMatrix
    from envforge.lockdiff.model import Lock

__all__ = ["diff_git", "diff_sides", "diff_variants", "textconv"]


def diff_sides(old: str, new: str, *, base: Path) -> LockDiff:
    """Diff two sides, each a lock path (relative to ``base``) or ``REV:PATH``; index URLs are
    named by the locks' ``[tool.envforge] indexes`` and their recipe's ``indexes``.

    :raises InputError: a side is missing, not a lock, or has merge-conflict markers.
    """
    a, b = read_side(old, base=base), read_side(new, base=base)
    return _with_patchsets(diff_locks(a, b, names=recipe_index_names((a, b), base)), a, b, base)


def diff_git(rev: str, *, base: Path) -> tuple[LockDiff, ...]:
    """One diff per lockfile changed between ``rev`` and the working tree of the repo at ``base``."""
    return tuple(
        _with_patchsets(diff_locks(old, new, names=recipe_index_names((old, new), base)), old, new, base)
        for old, new in changed_lockfiles(base, rev)
    )


def _with_patchsets(diff: LockDiff, old: Lock | None, new: Lock | None, base: Path) -> LockDiff:
    """``diff`` with the patchsets that stop applying, read from the project at or above ``base``
    only when the old lock records patchsets (two plain locks never load the project's recipes)."""
    if old is None or new is None or not old.envforge.get("patchsets"):
        return diff
    # lazy: it loads the recipe modules
    from envforge.recipe.project import find_project

    return with_patchset_changes(diff, old, new, find_project(base).patchsets_dir)


def diff_variants(recipe: str, *, lockfiles_dir: Path) -> VariantMatrix:
    """The variant matrix of ``recipe`` from ``lockfiles_dir/pylock.<recipe>-*.toml``."""
    # lazy: only --variants pays for it
    from envforge.lockdiff.matrix import variant_matrix

    return variant_matrix(recipe, variant_locks(lockfiles_dir, recipe))


def textconv(path: Path) -> str:
    """The stable readable text of one lock for ``git diff`` (see :func:`render.render_textconv`).

    :raises InputError: not a lock (the CLI falls back to the raw text so git still shows a diff).
    """
    return render_textconv(read_lock_file(path))
