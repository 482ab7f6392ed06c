"""Is a lock intact, and is it up to date? Two questions, two answers, two exit codes.

- **Integrity** (:func:`integrity_problems`, exit 2): the bytes are what ``envforge lock`` wrote.
  The ``[tool.envforge]`` table exists (written last: a file cut short lacks it), its
  ``packages-digest`` is the digest of the file's ``[[packages]]`` (an entry added, removed or
  edited by hand changes it), its ``inputs`` (when present) are a table, and every package those
  inputs record is in ``[[packages]]``. Nothing about the recipe: a recipe edited since is not a broken lock.
- **Freshness** (:func:`check_lock`, exit 1): the recipe and patchsets are the ones the lock was
  made from, and every listed patchset applies to the version locked (:mod:`envforge.lock.patchsets`). Each difference is named by its key (``packages.sglang: locked sglang==0.5.9, recipe
  now sglang==0.5.10``; an added or removed key is ``(absent)`` on its missing side).

:func:`guard_lock` is what build reads a lock through: intact, holding every package the recipe
names (else stale, exit 1), every package from an index the recipe allows for it. ``--check``
never writes and needs no network.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.core.errors import CheckFailed
from envforge.lock.model import Lock, LockIntegrityError, PatchsetRef, read_lock
from envforge.lock.patchsets import unapplied_patchsets
from envforge.lock.read import refuse_ambiguous
from envforge.lock.routing import effective_indexes, index_violations, redact_userinfo
from envforge.lock.wheelhouse import local_path_reasons
from envforge.lock.write import expected_tool_table
from envforge.recipe.model import ResolvedVariant

__all__ = ["LockCheck", "StaleLock", "check_integrity", "check_lock", "guard_lock", "integrity_problems"]

_ABSENT = "(absent)"


@dataclass(frozen=True, slots=True)
class LockCheck:
    """``lock --check``: ``fresh`` or not, and one reason per changed recipe key."""

    path: Path
    fresh: bool
    reasons: tuple[str, ...]


class StaleLock(CheckFailed):
    """The recipe changed since the lock was made (exit 1); ``reasons`` names each changed key."""

    def __init__(self, path: Path, reasons: Sequence[str], *, hint: str) -> None:
        super().__init__(
            f"{path} is stale: the recipe changed since it was locked:\n" + "\n".join("  " + r for r in reasons),
            hint=hint,
        )
        self.reasons = tuple(reasons)


def _relock(variant: ResolvedVariant | None) -> str:
    if variant is None:
        return "envforge lock RECIPE --variant VARIANT"
    return f"envforge lock {variant.recipe} --variant {variant.variant}"


def _requirement_name(item: str) -> str:
    """The key of one input list item: ``sglang==0.5.9`` / ``torch==X @index=cu130`` / ``name=url`` /
    ``nvidia-x: reason`` -> the name before the first specifier, space, ``@``, ``=`` or ``:``."""
    return re.split(r"[=<>!~ @:]", item, maxsplit=1)[0]


def integrity_problems(lock: Lock) -> list[str]:
    """What makes ``lock`` other than what ``envforge lock`` wrote; ``[]`` when it is intact.

    Checks the file alone, never a recipe (see the module docstring): the ``[tool.envforge]``
    table, its ``packages-digest`` against the file's ``[[packages]]``, ``inputs`` (if any) a table
    whose ``packages`` is a list of requirement strings, each of them in ``[[packages]]``.
    """
    if not lock.envforge:
        return ["it has no [tool.envforge] table: not written by `envforge lock`, or cut short before its end"]
    out = []
    recorded = lock.envforge.get("packages-digest")
    if recorded is None:
        out.append(
            "[tool.envforge] records no packages-digest (a lock from before envforge recorded it, "
            "or the key was removed by hand)"
        )
    elif recorded != lock.digest:
        out.append(
            f"its [[packages]] are not the ones `envforge lock` wrote: packages-digest {recorded}, "
            f"the file's packages hash to {lock.digest} (an entry added, removed, cut off or "
            "edited by hand, e.g. a changed wheel hash)"
        )
    inputs = lock.envforge.get("inputs", {})  # absent: nothing recorded to hold the file to (--check: stale)
    if not isinstance(inputs, Mapping):
        out.append("[tool.envforge] inputs is not a table (the recipe keys the lock was made from)")
        return out
    pins = inputs.get("packages", [])
    if not isinstance(pins, list) or not all(isinstance(p, str) for p in pins):
        out.append("[tool.envforge] inputs.packages is not a list of requirement strings")
        return out
    names = {canonicalize_name(p.name) for p in lock.packages}
    out += [
        f"[tool.envforge] inputs.packages records {p}, which is not in its [[packages]]"
        for p in pins
        if canonicalize_name(_requirement_name(p)) not in names
    ]
    out += _no_deps_extras(lock, inputs, pins)
    return out


def _no_deps_extras(lock: Lock, inputs: Mapping[str, Any], pins: list[str]) -> list[str]:
    """A ``no-deps`` lock installs exactly the recipe's packages: any other ``[[packages]]`` entry
    was added by hand, whatever its hash and a recomputed ``packages-digest`` say (field case N01;
    the digest is unkeyed, docs/guarantees.md)."""
    if inputs.get("resolution") != "no-deps":
        return []
    wanted = {canonicalize_name(_requirement_name(p)) for p in pins}
    extra = sorted({p.name for p in lock.packages if canonicalize_name(p.name) not in wanted})
    return [
        f"[[packages]] holds {name}, which the recipe does not name: a `no-deps` lock holds only the "
        "recipe's packages (an entry added by hand)"
        for name in extra
    ]


def check_integrity(lock: Lock, variant: ResolvedVariant | None = None) -> None:
    """Raise unless ``lock`` is what ``envforge lock`` wrote (see :func:`integrity_problems`).

    :param variant: only names the command that regenerates the lock in the hint.
    :raises LockIntegrityError: one line per problem, with the command that regenerates the lock.
    """
    problems = integrity_problems(lock)
    if problems:
        raise LockIntegrityError(
            lock.path,
            problems,
            hint=f"regenerate it with `{_relock(variant)}` and review the diff; never edit a lock by hand",
        )


def guard_lock(path: Path, variant: ResolvedVariant, find_links: Sequence[Path] = ()) -> Lock:
    """Read the lock at ``path`` for a build of ``variant``: intact (:func:`check_integrity`),
    holding every package the recipe names (a build never makes a smaller environment than the
    recipe asks for), and every package from an index the recipe allows for it (the index guard
    ``lock`` runs, again). Other recipe changes do not stop a build: it builds the lock.

    :raises LockIntegrityError: see :func:`check_integrity` (exit 2).
    :raises StaleLock: a recipe package is not in the lock: one ``packages.<name>: locked (absent),
        recipe now <requirement>`` line each, with the command that relocks (exit 1).
    :raises CheckFailed: a package comes from an index not allowed for it.
    :raises InvalidLock: two entries of one name are both selected for the variant's Python on this
        machine (:func:`envforge.lock.read.refuse_ambiguous`): an installer cannot choose (exit 2).
    """
    lock = read_lock(path)
    check_integrity(lock, variant)
    refuse_ambiguous(str(path), lock.packages, python=variant.python)
    names = {canonicalize_name(p.name) for p in lock.packages}
    missing = [
        f"packages.{_requirement_name(req)}: locked {_ABSENT}, recipe now {req}"
        for req in variant.inputs()["packages"]
        if canonicalize_name(_requirement_name(req)) not in names
    ]
    if missing:
        raise StaleLock(
            path, [redact_userinfo(m) for m in missing], hint=f"run `{_relock(variant)}` and review the change"
        )
    problems = [v.describe() for v in index_violations(lock.tables, variant, find_links)]
    if problems:
        raise CheckFailed(
            f"{path}: packages come from indexes not allowed for them:\n"
            + "\n".join("  " + redact_userinfo(p) for p in problems),
            hint=f"regenerate the lock with `{_relock(variant)}`",
        )
    return lock


def _strings(value: Any) -> list[str] | None:
    """``value`` as a list of strings when it is one (or absent: ``[]``), else None."""
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return value
    return None


def _rows(value: Any) -> list[Mapping[str, Any]] | None:
    """``value`` as a list of tables when it is one (or absent: ``[]``), else None."""
    if value is None:
        return []
    if isinstance(value, list) and all(isinstance(x, Mapping) for x in value):
        return value
    return None


def _diff_list(key: str, old: Sequence[str], new: Sequence[str]) -> list[str]:
    o = {_requirement_name(s): s for s in old}
    n = {_requirement_name(s): s for s in new}
    return [
        f"{key}.{name}: locked {o.get(name, _ABSENT)}, recipe now {n.get(name, _ABSENT)}"
        for name in sorted(set(o) | set(n))
        if o.get(name) != n.get(name)
    ]


def _diff_rows(key: str, old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], now: str) -> list[str]:
    ia, ib = _by_id(old), _by_id(new)
    return [
        f"{key}.{k}: locked {_short(ia.get(k))}, {now} {_short(ib.get(k))}"
        for k in sorted(set(ia) | set(ib))
        if ia.get(k) != ib.get(k)
    ]


def _scalar(value: Any) -> str:
    return _ABSENT if value is None else repr(value)


def _diff_tables(prefix: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """One line per key that differs, by key path; a key on one side only is ``(absent)`` on the other.
    Any shape a hand-edited ``[tool.envforge]`` may hold is compared, never an exception."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a == b:
            continue
        if isinstance(a, list) or isinstance(b, list):
            if (sa := _strings(a)) is not None and (sb := _strings(b)) is not None:
                out += _diff_list(f"{prefix}{key}", sa, sb)
                continue
            if (ra := _rows(a)) is not None and (rb := _rows(b)) is not None:
                out += _diff_rows(f"{prefix}{key}", ra, rb, "patchset file now" if key == "patchsets" else "recipe now")
                continue
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += _diff_tables(f"{prefix}{key}.", a, b)
        else:
            out.append(f"{prefix}{key}: locked {_scalar(a)}, recipe now {_scalar(b)}")
    return out


def _by_id(rows: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(x.get("id") or x.get("name")): x for x in rows}


def _short(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return _ABSENT
    return ", ".join(f"{k}={v}" for k, v in entry.items() if k not in ("id", "name"))


def check_lock(
    variant: ResolvedVariant, patchsets: Sequence[PatchsetRef], path: Path, find_links: Sequence[Path] = ()
) -> LockCheck:
    """Is the lock at ``path`` up to date with the recipe and patchsets? Never writes, no network.

    Each reason names the recipe key that changed, e.g.
    ``packages.sglang: locked sglang==0.5.9, recipe now sglang==0.5.10``, or
    ``packages.certifi: locked (absent), recipe now certifi==2026.1.1`` for an added package.

    A missing lock is stale (reason ``no lock yet: run envforge lock``), not an error. So is a lock
    of a patchset of ``patchsets`` that applies to no locked version of its distribution (B41:
    ``patchsets.<id>: does not apply to the locked <dist> <version> (its versions: ...)``, with the
    way out): relocking fails until its ``versions`` is widened or the recipe retires it. So is a
    lock whose files are local paths (an offline lock made with ``--local-paths``) outside the
    wheelhouses ``find_links``: ``wheelhouse: 1 package locked as local paths, not index URLs ...``.

    :raises LockError: the lock is unreadable.
    :raises LockIntegrityError: the lock is not what ``envforge lock`` wrote (:func:`check_integrity`);
        never for a recipe that changed.
    """
    if not path.is_file():
        return LockCheck(path, False, (f"no lock yet: run `{_relock(variant)}`",))
    lock = read_lock(path)
    check_integrity(lock, variant)
    stored = dict(lock.envforge)
    for key in ("indexes", "packages-digest", "recipe-digest"):
        stored.pop(key, None)
    expected = expected_tool_table(variant, patchsets)
    expected.pop("recipe-digest", None)
    reasons = _diff_tables("", stored.pop("inputs", {}), expected.pop("inputs"))
    reasons += _diff_tables("", stored, expected)
    reasons += [
        f"patchsets.{u.id}: {u.describe().removeprefix(f'patchset {u.id} ')}; {u.way_out()}"
        for u in unapplied_patchsets(patchsets, ((p.name, p.version) for p in lock.packages))
    ]
    reasons += local_path_reasons(
        lock.tables, [i.url for i in effective_indexes(variant)], find_links, _relock(variant)
    )
    return LockCheck(path, not reasons, tuple(redact_userinfo(r) for r in reasons))
