"""Can two environment markers be true at once? A bounded search with :mod:`packaging.markers`.

PEP 751 allows several ``[[packages]]`` entries of one name only when at most one of them can be
selected in any environment (an installer must raise an error on the ambiguity otherwise); uv's
``[[package]]`` entries of one name are told apart by ``resolution-markers`` and by the conflicts
the project declares (``[tool.uv] conflicts``: a ``cpu`` and a ``gpu`` extra that may not be
enabled together). This module is the one place that decides which same-name entries can be
active together: :func:`overlaps` (every name's first such pair, as data), :func:`first_overlap`
(the first of them) and, for one given environment, :func:`selected_together`.

Conflicts. An entry may come with an *activation*: the alternatives (OR) of conflict items (AND)
that must be enabled for it to be installed (``{frozenset({"extra-4-proj-cpu"})}``: only with the
``cpu`` extra of ``proj``; :mod:`envforge.lock.uvconflicts` computes them from uv.lock's graph). Two
entries whose every pair of alternatives needs two items of one declared conflict set are never
active together, whatever their markers.

Method. A marker is a boolean formula over comparisons of one variable with a literal. Its truth
value can change only where a variable crosses one of the literals both markers mention, so each
variable gets a small set of representative values taken from those literals, and both markers are
evaluated with :meth:`packaging.markers.Marker.evaluate` (context ``lock_file``) on every combination:

- Python versions (``python_version``, ``python_full_version``, ``implementation_version`` move
  together): each literal, its last component one below and one above, ``X.Y.0`` for ``X.Y.*``.
- Platforms (``sys_platform``, ``platform_system``, ``os_name`` move together): Linux, Windows, macOS,
  and one more profile per literal that names no known platform.
- Implementations (``implementation_name``, ``platform_python_implementation`` together): CPython,
  PyPy, GraalPy and an unknown one.
- Any other string variable (``platform_machine``, ``platform_release``, ``extra``...): each literal
  and one value equal to none of them.
- Set variables (``extras``, ``dependency_groups``): every subset of the literals (at most 2**4; for
  more literals the empty set, each single literal and all of them).

A marker without any entry (``None``) is true everywhere. Two markers that are both true on one
combination overlap; the combination is returned as the witness.

Limits: variables outside a group are independent, so ``sys_platform == 'darwin'`` and
``platform_machine == 'AMD64'`` overlap (as they do for uv, which does not model such implications
either); a pair whose combinations exceed :data:`MAX_COMBINATIONS` is not decided and counts as
exclusive (no error); an error is never raised for markers that are in fact exclusive.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from packaging.markers import Marker, default_environment

__all__ = ["MAX_COMBINATIONS", "Activation", "Overlap", "compatible", "equivalent", "first_overlap", "overlap_witness",
           "overlaps", "satisfiable", "selected_together", "valid_selection"]

MAX_COMBINATIONS = 20_000
Entry = tuple[str, str | None, Sequence[str] | None]
"""``(name, version, markers)``: ``markers`` is ``None`` (always active) or alternatives (OR)."""
Activation = frozenset[frozenset[str]]
"""Alternatives (OR) of conflict items that must all be enabled (AND); ``{frozenset()}``: always."""
ALWAYS: Activation = frozenset({frozenset()})

_OPS = r"(===|==|!=|<=|>=|~=|<|>|not in|in)"
_VAR_FIRST = re.compile(r"\b([a-z_]+)\s*" + _OPS + r"""\s*(["'])(.*?)\3""")
_VAL_FIRST = re.compile(r"""(["'])(.*?)\1\s*""" + _OPS + r"\s*([a-z_]+)\b")
_PY_VARS = ("python_version", "python_full_version", "implementation_version")
_PLATFORMS = (("linux", "Linux", "posix"), ("win32", "Windows", "nt"), ("darwin", "Darwin", "posix"))
_PLATFORM_VARS = ("sys_platform", "platform_system", "os_name")
_IMPLS = (("cpython", "CPython"), ("pypy", "PyPy"), ("graalpy", "GraalVM"), ("other-impl", "Other"))
_IMPL_VARS = ("implementation_name", "platform_python_implementation")
_SET_VARS = ("extras", "dependency_groups")
_OTHER = "envforge-none-of-these"
_BASE = {"platform_machine": "x86_64", "platform_release": "", "platform_version": "", "extra": ""}


@dataclass(frozen=True, slots=True)
class Overlap:
    """Entries ``first`` and ``second`` (indexes into the sequence given) can be active together;
    ``witness`` is an environment where both are (only the variables the markers use), ``{}`` when
    one of them has no marker."""

    first: int
    second: int
    witness: Mapping[str, str]


def overlaps(entries: Sequence[Entry], *, activations: Sequence[Activation] | None = None,
             conflicts: Sequence[frozenset[str]] = ()) -> tuple[Overlap, ...]:
    """Every name's first pair of entries that can be active in one environment, ordered by the
    later entry's index (then the earlier one's); ``()`` when no name has such a pair.

    Pairs are tried in file order (``(0, 1), (0, 2), (1, 2)``... within each name). Two entries
    overlap when their markers can both be true (:func:`overlap_witness`) and, with
    ``activations`` (one per entry) and ``conflicts`` (sets of conflict items of which at most one
    may be enabled), their activations are :func:`compatible`.

    :raises packaging.markers.InvalidMarker: a marker does not parse (the callers pass validated ones).
    """
    by_name: dict[str, list[int]] = {}
    for i, (name, _, _) in enumerate(entries):
        by_name.setdefault(name, []).append(i)
    found: list[Overlap] = []
    for indexes in by_name.values():
        for i, j in itertools.combinations(indexes, 2):
            if activations is not None and not compatible(activations[i], activations[j], conflicts):
                continue
            witness = overlap_witness(entries[i][2], entries[j][2])
            if witness is not None:
                found.append(Overlap(i, j, witness))
                break
    return tuple(sorted(found, key=lambda o: (o.second, o.first)))


def first_overlap(entries: Sequence[Entry], *, activations: Sequence[Activation] | None = None,
                  conflicts: Sequence[frozenset[str]] = ()) -> Overlap | None:
    """The first of :func:`overlaps` (the pair whose later entry comes first in the file), or ``None``.

    :raises packaging.markers.InvalidMarker: a marker does not parse (the callers pass validated ones).
    """
    found = overlaps(entries, activations=activations, conflicts=conflicts)
    return found[0] if found else None


def valid_selection(items: frozenset[str], conflicts: Sequence[frozenset[str]]) -> bool:
    """Can the conflict ``items`` be enabled together: no declared set holds two of them."""
    return len(items) < 2 or all(len(items & c) < 2 for c in conflicts)


def compatible(a: Activation, b: Activation, conflicts: Sequence[frozenset[str]]) -> bool:
    """Can activations ``a`` and ``b`` hold at once: one alternative of each that together are a
    :func:`valid_selection`. An empty activation (an entry nothing installs) counts as :data:`ALWAYS`."""
    return any(valid_selection(x | y, conflicts) for x in (a or ALWAYS) for y in (b or ALWAYS))


def selected_together(entries: Sequence[Entry], environment: Mapping[str, object]) -> tuple[Overlap, ...]:
    """Every name's first pair of entries both selected in ``environment`` (what an installer
    selecting for that environment cannot choose between; packaging's ``Pylock.select`` raises
    there): an entry is selected when it has no marker or one of its markers is true, evaluated
    with context ``lock_file`` on ``environment`` (missing variables: :func:`packaging.markers.default_environment`,
    ``extras`` and ``dependency_groups`` empty). ``witness``: the variables the two markers use,
    with their values in ``environment``.

    :raises packaging.markers.InvalidMarker: a marker does not parse (the callers pass validated ones).
    """
    env: dict[str, object] = {**default_environment(), "extras": frozenset(), "dependency_groups": frozenset(),
                              **environment}
    by_name: dict[str, list[int]] = {}
    for i, (name, _, markers) in enumerate(entries):
        if markers is None or _any_true([Marker(m) for m in markers], env):
            by_name.setdefault(name, []).append(i)
    found = []
    for indexes in by_name.values():
        if len(indexes) > 1:
            i, j = indexes[0], indexes[1]
            used = _literals([m for k in (i, j) for m in entries[k][2] or ()])
            found.append(Overlap(i, j, {k: _shown(env[k]) for k in sorted(used) if k in env}))
    return tuple(sorted(found, key=lambda o: (o.second, o.first)))


def satisfiable(markers: Sequence[str], fixed: Mapping[str, object]) -> bool:
    """Can one of ``markers`` be true with the variables of ``fixed`` at those values (a set for
    ``extras`` / ``dependency_groups``), the others free (searched as :func:`overlap_witness` does)?
    Undecided (more than :data:`MAX_COMBINATIONS`) counts as true."""
    parsed = [Marker(m) for m in markers]
    texts = [str(m) for m in parsed]
    lits = {k: v for k, v in _literals(texts).items() if k not in fixed}
    if _count(_axes(lits)) > MAX_COMBINATIONS:
        return True
    return any(_any_true(parsed, {**env, **fixed}) for env, _ in _environments(texts, lits))


def overlap_witness(a: Sequence[str] | None, b: Sequence[str] | None) -> dict[str, str] | None:
    """An environment where marker alternatives ``a`` and ``b`` are both true, else ``None``.

    ``None`` for a side means "no marker" (always true): the witness is then ``{}`` unless the other
    side can never be true.
    """
    ma = [Marker(m) for m in a] if a is not None else None
    mb = [Marker(m) for m in b] if b is not None else None
    texts = [str(m) for m in (ma or []) + (mb or [])]
    if ma is None and mb is None:
        return {}
    for env, shown in _environments(texts):
        if _any_true(ma, env) and _any_true(mb, env):
            return {} if ma is None or mb is None else shown
    return None


def equivalent(a: str | None, b: str | None) -> bool:
    """True when markers ``a`` and ``b`` (``None``: no marker, true everywhere) have the same truth
    value in every environment the search tries (:func:`overlap_witness`'s combinations over both
    markers' literals): ``"sys_platform == 'linux' or sys_platform != 'linux'"`` is no marker.
    False when they differ in one, when the search is over :data:`MAX_COMBINATIONS` (undecided:
    a caller reporting a change reports it), and when either names ``extra``: uv's markers use it
    as a set (``extra == 'extra-4-proj-cpu' and extra != 'extra-4-proj-gpu'``: the ``cpu`` extra
    enabled and the ``gpu`` one not), which packaging's one-valued ``extra`` does not model.

    :raises packaging.markers.InvalidMarker: a marker that does not parse.
    """
    ma = [Marker(a)] if a is not None else None
    mb = [Marker(b)] if b is not None else None
    texts = [str(m) for m in (ma or []) + (mb or [])]
    lits = _literals(texts)
    if "extra" in lits or _count(_axes(lits)) > MAX_COMBINATIONS:
        return False
    return all(_any_true(ma, env) == _any_true(mb, env) for env, _ in _environments(texts, lits))


def _any_true(markers: list[Marker] | None, env: dict[str, object]) -> bool:
    return markers is None or any(m.evaluate(env, context="lock_file") for m in markers)  # type: ignore[arg-type]


def _literals(texts: Sequence[str]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for text in texts:
        for m in _VAR_FIRST.finditer(text):
            out.setdefault(m.group(1), set()).add(m.group(4))
        for m in _VAL_FIRST.finditer(text):
            out.setdefault(m.group(4), set()).add(m.group(2))
    return out


def _versions(literals: set[str]) -> list[str]:
    out = {"3.12.0"} if not literals else set()
    for lit in literals:
        parts = [int(p) for p in re.findall(r"\d+", lit.replace(".*", ""))[:3]] or [3]
        parts = (parts + [0, 0])[:3]
        last = len(re.findall(r"\d+", lit.replace(".*", ""))[:3]) - 1
        for delta in (-1, 0, 1):
            p = list(parts)
            p[max(last, 0)] += delta
            if p[max(last, 0)] >= 0:
                out.add(".".join(map(str, p)))
    return sorted(out)


def _subsets(values: set[str]) -> list[frozenset[str]]:
    vals = sorted(values)
    if len(vals) <= 4:
        return [frozenset(c) for r in range(len(vals) + 1) for c in itertools.combinations(vals, r)]
    return [frozenset(), *(frozenset({v}) for v in vals), frozenset(vals)]


def _axes(lits: dict[str, set[str]]) -> list[list[dict[str, object]]]:
    axes: list[list[dict[str, object]]] = []
    if any(v in lits for v in _PY_VARS):
        full = _versions(set().union(*(lits.get(v, set()) for v in _PY_VARS)))
        axes.append([{"python_full_version": f, "python_version": ".".join(f.split(".")[:2]),
                      "implementation_version": f} for f in full])
    if any(v in lits for v in _PLATFORM_VARS):
        profiles = list(_PLATFORMS)
        known = {x for p in _PLATFORMS for x in p}
        for k, var in enumerate(_PLATFORM_VARS):
            for lit in sorted(lits.get(var, set()) - known):
                profiles.append(tuple(lit if n == k else _OTHER for n in range(3)))  # type: ignore[arg-type]
        axes.append([dict(zip(_PLATFORM_VARS, p, strict=True)) for p in profiles])
    if any(v in lits for v in _IMPL_VARS):
        axes.append([dict(zip(_IMPL_VARS, p, strict=True)) for p in _IMPLS])
    for var in sorted(set(lits) - set(_PY_VARS) - set(_PLATFORM_VARS) - set(_IMPL_VARS)):
        if var in _SET_VARS:
            axes.append([{var: s} for s in _subsets(lits[var])])
        else:
            axes.append([{var: v} for v in sorted(lits[var] | {_OTHER})])
    return axes


def _shown(value: object) -> str:
    return "{" + ", ".join(sorted(value)) + "}" if isinstance(value, frozenset) else str(value)


def _count(axes: Sequence[Sequence[object]]) -> int:
    total = 1
    for axis in axes:
        total *= len(axis)
    return total


def _environments(texts: Sequence[str], lits: dict[str, set[str]] | None = None,
                  ) -> Iterator[tuple[dict[str, object], dict[str, str]]]:
    """(full environment, the part the markers use) for every combination over the literals
    ``lits`` (default: those of ``texts``), up to the cap."""
    base: dict[str, object] = {**default_environment(), **_BASE, "sys_platform": "linux",
                               "platform_system": "Linux", "os_name": "posix", "implementation_name": "cpython",
                               "platform_python_implementation": "CPython", "python_full_version": "3.12.0",
                               "python_version": "3.12", "implementation_version": "3.12.0",
                               "extras": frozenset(), "dependency_groups": frozenset()}
    lits = _literals(texts) if lits is None else lits
    axes = _axes(lits)
    if _count(axes) > MAX_COMBINATIONS:
        return
    for combo in itertools.product(*axes):
        part: dict[str, object] = {}
        for piece in combo:
            part.update(piece)
        shown = {k: _shown(v) for k, v in part.items() if k in lits}
        yield {**base, **part}, shown
