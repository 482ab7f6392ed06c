"""Pairing same-name entries across two locks by the assignment that changes least (marker, public
version, source, local label, files): exhaustive up to 7 x 7 candidates, greedy beyond.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

from envforge.lockdiff.model import LockedPackage

__all__ = ["EXHAUSTIVE", "by_name", "pair_entries"]

EXHAUSTIVE = 5040  # most candidate pairings tried one by one (7 entries against 7)


def by_name(entries: Iterable[LockedPackage]) -> dict[str, list[LockedPackage]]:
    out: dict[str, list[LockedPackage]] = {}
    for p in entries:
        out.setdefault(p.name, []).append(p)
    return out


def _public(version: str | None) -> str:
    return (version or "").partition("+")[0]


def _pair_cost(a: LockedPackage, b: LockedPackage) -> int:
    """How much pairing ``a`` with ``b`` changes: marker 16, public version 8, source 4, local
    label 2, files 1 (a marker kept outweighs everything else; see :func:`pair_entries`)."""
    cost = 16 if a.marker != b.marker else 0
    if a.version != b.version:
        cost += 8 if _public(a.version) != _public(b.version) else 2
    if a.source != b.source:
        cost += 4
    if a.artifacts != b.artifacts:
        cost += 1
    return cost


def pair_entries(
    old: Sequence[LockedPackage], new: Sequence[LockedPackage]
) -> tuple[list[tuple[LockedPackage, LockedPackage]], list[LockedPackage], list[LockedPackage]]:
    """Pair the entries of one name across two locks: ``(pairs, old left over, new left over)``.

    ``min(len(old), len(new))`` pairs are made, choosing the assignment with the lowest total
    :func:`_pair_cost` (ties: the first in entry order). Up to 5,040 candidate assignments are
    tried exhaustively; beyond that (a name with more than seven entries a side) pairs are taken
    greedily by cost, an approximation stated here.
    """
    if len(old) == 1 and len(new) == 1:
        return [(old[0], new[0])], [], []
    if not old or not new:
        return [], list(old), list(new)
    swap = len(old) > len(new)
    short, long_ = (new, old) if swap else (old, new)
    cost = [[_pair_cost(*((b, a) if swap else (a, b))) for b in long_] for a in short]
    k, n = len(short), len(long_)
    chosen: tuple[int, ...]
    if _permutations(n, k) <= EXHAUSTIVE:
        chosen = min(itertools.permutations(range(n), k), key=lambda perm: sum(cost[i][j] for i, j in enumerate(perm)))
    else:
        chosen = _greedy(cost)
    pairs = [(short[i], long_[j]) for i, j in enumerate(chosen)]
    if swap:
        pairs = [(b, a) for a, b in pairs]
    used = set(chosen)
    rest = [p for j, p in enumerate(long_) if j not in used]
    return pairs, (rest if swap else []), ([] if swap else rest)


def _permutations(n: int, k: int) -> int:
    out = 1
    for i in range(n - k + 1, n + 1):
        out *= i
    return out


def _greedy(cost: Sequence[Sequence[int]]) -> tuple[int, ...]:
    cells = sorted((c, i, j) for i, row in enumerate(cost) for j, c in enumerate(row))
    chosen: dict[int, int] = {}
    taken: set[int] = set()
    for _, i, j in cells:
        if i not in chosen and j not in taken:
            chosen[i] = j
            taken.add(j)
    return tuple(chosen[i] for i in range(len(cost)))
