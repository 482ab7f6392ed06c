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
- Any other string variable (``platform_machine``, ``platform_release``...): each literal and one
  value equal to none of them.
- Set variables (``extras``, ``dependency_groups``; PEP 751's ``"x" in extras``): every subset of the
  literals, up to :data:`MAX_SET_LITERALS` of them (beyond that the pair is undecided). uv's ``extra``
  is a set too: uv encodes a conflict item as ``extra == 'extra-4-proj-cpu'`` and evaluates it as "that
  item is enabled", several at once (uv's ``crates/uv-resolver/src/universal_marker.rs``), so
  ``extra == 'v'`` is read as ``'v' in extras`` and ``extra != 'v'`` as ``'v' not in extras``.

Literals are read from the parsed marker (``packaging``'s parse tree, whichever side the variable
is on), never from the text: a value may hold quotes, ``and`` or ``in``.

A marker without any entry (``None``) is true everywhere. Two markers that are both true on one
combination overlap; the combination is returned as the witness.

Limits: variables outside a group are independent, so ``sys_platform == 'darwin'`` and
``platform_machine == 'AMD64'`` overlap (as they do for uv, which does not model such implications
either); a pair whose combinations exceed :data:`MAX_COMBINATIONS` is not decided and counts as
exclusive (no error); an error is never raised for markers that are in fact exclusive.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple

from envforge.lock.pyversions import representative_versions

if TYPE_CHECKING:
    from packaging.markers import Marker

# packaging.markers (about 18 ms of imports: its tokenizer's patterns, packaging.tags) is imported
# where a marker is first parsed, so a warm `lock diff` that compares no marker does not pay it.

__all__ = [
    "ALWAYS",
    "MAX_COMBINATIONS",
    "MAX_EVALUATIONS",
    "MAX_SET_LITERALS",
    "Activation",
    "Alternative",
    "Overlap",
    "compatible",
    "equivalent",
    "first_overlap",
    "literals",
    "overlap_witness",
    "overlaps",
    "parse",
    "satisfiable",
    "selected_together",
    "valid_selection",
]

MAX_COMBINATIONS = 20_000
#: Comparisons one enumeration may evaluate (environments x the markers' comparisons); more: undecided.
#: About 4 s on this project's 2-core machine; a 3,000-way ``or`` over Python versions took 105 s without it.
MAX_EVALUATIONS = 1_000_000
MAX_SET_LITERALS = 10  # 2**10 subsets of a set variable's literals; more: undecided
Entry = tuple[str, str | None, Sequence[str] | None]
"""``(name, version, markers)``: ``markers`` is ``None`` (always active) or alternatives (OR)."""


class Alternative(NamedTuple):
    """One way an entry can be needed: the conflict items that must be enabled (``on``) and those
    that must not be (``off``: uv's ``extra != 'extra-4-proj-cpu'``)."""

    on: frozenset[str]
    off: frozenset[str] = frozenset()


Activation = frozenset[Alternative]
"""Alternatives (OR) of conflict-item conditions (:class:`Alternative`); :data:`ALWAYS`: needs none."""
ALWAYS: Activation = frozenset({Alternative(frozenset())})
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


def overlaps(
    entries: Sequence[Entry],
    *,
    activations: Sequence[Activation] | None = None,
    conflicts: Sequence[frozenset[str]] = (),
) -> tuple[Overlap, ...]:
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


def first_overlap(
    entries: Sequence[Entry],
    *,
    activations: Sequence[Activation] | None = None,
    conflicts: Sequence[frozenset[str]] = (),
) -> Overlap | None:
    """The first of :func:`overlaps` (the pair whose later entry comes first in the file), or ``None``.

    :raises packaging.markers.InvalidMarker: a marker does not parse (the callers pass validated ones).
    """
    found = overlaps(entries, activations=activations, conflicts=conflicts)
    return found[0] if found else None


def valid_selection(items: frozenset[str], conflicts: Sequence[frozenset[str]]) -> bool:
    """Can the conflict ``items`` be enabled together: no declared set holds two of them."""
    return len(items) < 2 or all(len(items & c) < 2 for c in conflicts)


def combine(x: Alternative, y: Alternative, conflicts: Sequence[frozenset[str]]) -> Alternative | None:
    """Both conditions at once, or ``None`` when no selection meets them (an item both on and off,
    or two items of one declared conflict set on)."""
    on, off = x.on | y.on, x.off | y.off
    if on & off or not valid_selection(on, conflicts):
        return None
    return Alternative(on, off)


def compatible(a: Activation, b: Activation, conflicts: Sequence[frozenset[str]]) -> bool:
    """Can activations ``a`` and ``b`` hold at once: one alternative of each that :func:`combine`.
    An empty activation (an entry nothing installs) counts as :data:`ALWAYS`."""
    return any(combine(x, y, conflicts) is not None for x in (a or ALWAYS) for y in (b or ALWAYS))


def selected_together(entries: Sequence[Entry], environment: Mapping[str, object]) -> tuple[Overlap, ...]:
    """Every name's first pair of entries both selected in ``environment`` (what an installer
    selecting for that environment cannot choose between; packaging's ``Pylock.select`` raises
    there): an entry is selected when it has no marker or one of its markers is true, evaluated
    with context ``lock_file`` on ``environment`` (missing variables: :func:`packaging.markers.default_environment`,
    ``extras`` and ``dependency_groups`` empty). ``witness``: the variables the two markers use,
    with their values in ``environment``.

    :raises packaging.markers.InvalidMarker: a marker does not parse (the callers pass validated ones).
    """
    from packaging.markers import (
        default_environment,
    )  # lazy: imported where used (packaging.markers and its tokenizer: about 18 ms)

    env: dict[str, object] = {
        **default_environment(),
        "extras": frozenset(),
        "dependency_groups": frozenset(),
        **environment,
    }
    by_name: dict[str, list[int]] = {}
    for i, (name, _, markers) in enumerate(entries):
        if markers is None or _any_true([parse(m) for m in markers], env):
            by_name.setdefault(name, []).append(i)
    found = []
    for indexes in by_name.values():
        if len(indexes) > 1:
            i, j = indexes[0], indexes[1]
            used = literals([parse(m) for k in (i, j) for m in entries[k][2] or ()])
            found.append(Overlap(i, j, {k: _shown(env[k]) for k in sorted(used) if k in env}))
    return tuple(sorted(found, key=lambda o: (o.second, o.first)))


def satisfiable(markers: Sequence[str], fixed: Mapping[str, object]) -> bool:
    """Can one of ``markers`` be true with the variables of ``fixed`` at those values (a set for
    ``extras`` / ``dependency_groups``), the others free (searched as :func:`overlap_witness` does)?
    Undecided (more than :data:`MAX_COMBINATIONS` environments or :data:`MAX_EVALUATIONS`
    comparisons) counts as true."""
    parsed = [parse(m) for m in markers]
    lits = {k: v for k, v in literals(parsed).items() if k not in fixed}
    if _undecided(lits, parsed):
        return True
    return any(_any_true(parsed, {**env, **fixed}) for env, _ in _environments(lits))


def overlap_witness(a: Sequence[str] | None, b: Sequence[str] | None) -> dict[str, str] | None:
    """An environment where marker alternatives ``a`` and ``b`` are both true, else ``None``.

    ``None`` for a side means "no marker" (always true): the witness is then ``{}`` unless the other
    side can never be true. Alternatives are tried pair by pair (``a[i]`` with ``b[j]``, each pair
    searched over its own literals only, and remembered: uv.lock repeats its fork markers across
    entries). Undecided (more than :data:`MAX_COMBINATIONS` combinations or
    :data:`MAX_EVALUATIONS` comparisons to evaluate over them, or a set variable with more than
    :data:`MAX_SET_LITERALS` literals) gives ``None``.
    """
    if a is None and b is None:
        return {}
    if a is None or b is None:
        one = a if a is not None else b
        return {} if any(_pair_witness(m, None) is not None for m in one or ()) else None
    for x in a:
        for y in b:
            found = _pair_witness(x, y)
            if found is not None:
                return dict(found)
    return None


@lru_cache(maxsize=65536)
def _pair_witness(a: str, b: str | None) -> tuple[tuple[str, str], ...] | None:
    """The witness of one marker ``a`` with one marker ``b`` (``None``: no marker), as sorted items.

    Both markers are written as alternatives of conjunctions of comparisons (packaging's tree, ``or``
    splitting ``and``-groups, parentheses expanded); two conjunctions hold at once when, for each
    group of variables that move together (:func:`_group`), one representative value of the group
    makes every comparison of that group true. The groups are independent in this model (the
    enumeration over all combinations, which this replaces, finds the same first witness), so the
    cost is a sum over groups instead of a product. Markers whose expansion passes
    :data:`_MAX_TERMS` conjunctions are enumerated as before.
    """
    ma = parse(a)
    mb = parse(b) if b is not None else None
    terms_a, terms_b = _dnf(ma._markers), (_dnf(mb._markers) if mb is not None else [[]])
    if terms_a is None or terms_b is None:
        markers = [ma] if mb is None else [ma, mb]
        lits = literals(markers)
        if _undecided(lits, markers):
            return None
        for env, shown in _environments(lits):
            if all(m.evaluate(env, context="lock_file") for m in markers):  # type: ignore[arg-type]
                return tuple(sorted(shown.items()))
        return None
    for x in terms_a:
        for y in terms_b:
            found = _conjunction_witness(tuple(x) + tuple(y))
            if found is not None:
                return found
    return None


_MAX_TERMS = 256  # conjunctions one marker may expand to before the plain enumeration is used


def _dnf(node: Any) -> list[list[Any]] | None:
    """``node`` (a packaging marker list: items split by ``"or"``, joined by ``"and"``, a nested list
    for parentheses) as alternatives of conjunctions of atoms; ``None`` past :data:`_MAX_TERMS`."""
    alternatives: list[list[Any]] = []
    current: list[list[Any]] = [[]]
    for item in node:
        if item == "or":
            alternatives += current
            current = [[]]
        elif item == "and":
            continue
        else:
            sub = _dnf(item) if isinstance(item, list) else [[item]]
            if sub is None:
                return None
            current = [c + t for c in current for t in sub]
        if len(current) + len(alternatives) > _MAX_TERMS:
            return None
    return alternatives + current


def _group(variable: str) -> str:
    """The variables that move together in the search: Python versions, platforms,
    implementations; any other variable alone."""
    if variable in _PY_VARS:
        return "python"
    if variable in _PLATFORM_VARS:
        return "platform"
    if variable in _IMPL_VARS:
        return "implementation"
    return variable


def _atom_variable(atom: Any) -> str | None:
    from packaging._parser import (
        Variable,
    )  # lazy: imported where used (packaging.markers and its tokenizer: about 18 ms)

    lhs, _, rhs = atom
    var = lhs if isinstance(lhs, Variable) else rhs if isinstance(rhs, Variable) else None
    return var.value if var is not None else None


def _conjunction_witness(atoms: tuple[Any, ...]) -> tuple[tuple[str, str], ...] | None:
    """A witness where every comparison of ``atoms`` is true, group by group, or ``None``."""
    from packaging.markers import Marker  # lazy: imported where used (packaging.markers and its tokenizer: about 18 ms)

    groups: dict[str, list[Any]] = {}
    for atom in atoms:
        groups.setdefault(_group(_atom_variable(atom) or ""), []).append(atom)
    shown: dict[str, str] = {}
    base = _base()
    for name in sorted(groups):
        members = groups[name]
        lits: dict[str, set[str]] = {}
        _collect(members, lits)
        axes = _axes(lits)
        if axes is None or _count(axes) > MAX_COMBINATIONS:
            return None  # undecided: counts as exclusive (documented)
        values = axes[0] if axes else [{}]  # one group, one axis (none: an atom without a variable)
        marker = Marker._from_markers(_joined(members))
        for value in values:
            env = {**base, **value}
            if marker.evaluate(env, context="lock_file"):  # type: ignore[arg-type]
                shown.update({k: _shown(v) for k, v in value.items() if k in lits})
                break
        else:
            return None
    return tuple(sorted(shown.items()))


def _joined(atoms: list[Any]) -> list[Any]:
    out: list[Any] = []
    for atom in atoms:
        if out:
            out.append("and")
        out.append(atom)
    return out


def equivalent(a: str | None, b: str | None) -> bool:
    """True when markers ``a`` and ``b`` (``None``: no marker, true everywhere) have the same truth
    value in every environment the search tries (:func:`overlap_witness`'s combinations over both
    markers' literals): ``"sys_platform == 'linux' or sys_platform != 'linux'"`` is no marker.
    False when they differ in one, and when the search is undecided (over :data:`MAX_COMBINATIONS`
    or :data:`MAX_EVALUATIONS`, or a set variable with more than :data:`MAX_SET_LITERALS` literals): a caller reporting a change
    reports it. Every variable counts: ``extras`` and ``dependency_groups`` (PEP 751), uv's set-valued
    ``extra`` (``extra == 'extra-4-proj-cpu' and extra != 'extra-4-proj-gpu'``: the ``cpu`` extra
    enabled and the ``gpu`` one not; see :func:`parse`).

    :raises packaging.markers.InvalidMarker: a marker that does not parse.
    """
    ma = [parse(a)] if a is not None else None
    mb = [parse(b)] if b is not None else None
    lits = literals([*(ma or []), *(mb or [])])
    if _undecided(lits, [*(ma or []), *(mb or [])]):
        return False
    return all(_any_true(ma, env) == _any_true(mb, env) for env, _ in _environments(lits))


def _any_true(markers: Sequence[Marker] | None, env: dict[str, object]) -> bool:
    return markers is None or any(m.evaluate(env, context="lock_file") for m in markers)  # type: ignore[arg-type]


@lru_cache(maxsize=4096)
def parse(text: str) -> Marker:
    """``text`` parsed by :class:`packaging.markers.Marker`, with uv's set-valued ``extra`` read as
    ``extras`` (``extra == 'v'`` -> ``'v' in extras``, ``extra != 'v'`` -> ``'v' not in extras``;
    other comparisons of ``extra`` are kept). The parse tree is packaging 26's (``Marker._markers``:
    nested lists of ``(Variable | Value, Op, Value | Variable)`` and ``"and"``/``"or"``); packaging is
    pinned below 27 and tests/lock/test_markerspace.py reads the tree of every shape used here; the
    rewritten tree becomes a marker through packaging's own ``Marker._from_markers``).

    :raises packaging.markers.InvalidMarker: ``text`` does not parse.
    """
    from packaging.markers import Marker  # lazy: imported where used (packaging.markers and its tokenizer: about 18 ms)

    marker = Marker(text)
    if "extra" not in text:
        return marker
    return Marker._from_markers(_as_sets(marker._markers))


def _as_sets(node: Any) -> Any:
    from packaging._parser import (
        Variable,
    )  # lazy: imported where used (packaging.markers and its tokenizer: about 18 ms)

    if isinstance(node, list):
        return [_as_sets(n) for n in node]
    if isinstance(node, tuple):
        lhs, op, rhs = node
        if isinstance(lhs, Variable) and lhs.value == "extra" and op.value in ("==", "!="):
            return (rhs, type(op)("in" if op.value == "==" else "not in"), Variable("extras"))
        if isinstance(rhs, Variable) and rhs.value == "extra" and op.value in ("==", "!="):
            return (lhs, type(op)("in" if op.value == "==" else "not in"), Variable("extras"))
    return node


def literals(markers: Sequence[Marker]) -> dict[str, set[str]]:
    """Variable name -> the literals ``markers`` compare it with, read from the parse tree
    (``{'sys_platform': {'linux'}, 'extras': {'hf'}}`` for ``sys_platform == 'linux' and 'hf' in extras``)."""
    out: dict[str, set[str]] = {}
    for marker in markers:
        _collect(marker._markers, out)
    return out


def _collect(node: Any, out: dict[str, set[str]]) -> None:
    from packaging._parser import (
        Value,
        Variable,
    )  # lazy: imported where used (packaging.markers and its tokenizer: about 18 ms)

    if isinstance(node, list):
        for n in node:
            _collect(n, out)
    elif isinstance(node, tuple):
        lhs, _, rhs = node
        var, value = (lhs, rhs) if isinstance(lhs, Variable) else (rhs, lhs)
        if isinstance(var, Variable) and isinstance(value, Value):
            out.setdefault(var.value, set()).add(value.value)


def _subsets(values: set[str]) -> list[frozenset[str]]:
    vals = sorted(values)
    return [frozenset(c) for r in range(len(vals) + 1) for c in itertools.combinations(vals, r)]


def _axes(lits: dict[str, set[str]]) -> list[list[dict[str, object]]] | None:
    """The representative values of each variable group; ``None`` when undecided (a set variable
    with more than :data:`MAX_SET_LITERALS` literals)."""
    if any(len(lits.get(v, ())) > MAX_SET_LITERALS for v in _SET_VARS):
        return None
    axes: list[list[dict[str, object]]] = []
    if any(v in lits for v in _PY_VARS):
        full = representative_versions(set().union(*(lits.get(v, set()) for v in _PY_VARS)))
        axes.append(
            [
                {"python_full_version": f, "python_version": ".".join(f.split(".")[:2]), "implementation_version": f}
                for f in full
            ]
        )
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


def _count(axes: Sequence[Sequence[object]] | None) -> float:
    if axes is None:
        return float("inf")
    total = 1
    for axis in axes:
        total *= len(axis)
    return total


def _comparisons(node: Any) -> int:
    """How many comparisons a packaging marker tree (``Marker._markers``) holds."""
    if isinstance(node, list):
        return sum(_comparisons(n) for n in node)
    return 1 if isinstance(node, tuple) else 0


def _undecided(lits: dict[str, set[str]], markers: Sequence[Marker]) -> bool:
    """The enumeration over ``lits`` is not run: a set variable with too many literals, more than
    :data:`MAX_COMBINATIONS` environments, or more than :data:`MAX_EVALUATIONS` comparisons to
    evaluate over them (every comparison of ``markers`` in every environment)."""
    count = _count(_axes(lits))
    if count > MAX_COMBINATIONS:
        return True
    return count * sum(_comparisons(m._markers) for m in markers) > MAX_EVALUATIONS


def _environments(lits: dict[str, set[str]]) -> Iterator[tuple[dict[str, object], dict[str, str]]]:
    """(full environment, the part the markers use) for every combination over the literals
    ``lits``; none when undecided (:func:`_axes`, :data:`MAX_COMBINATIONS`)."""
    axes = _axes(lits)
    if axes is None or _count(axes) > MAX_COMBINATIONS:
        return
    base = _base()
    for combo in itertools.product(*axes):
        part: dict[str, object] = {}
        for piece in combo:
            part.update(piece)
        shown = {k: _shown(v) for k, v in part.items() if k in lits}
        yield {**base, **part}, shown


@lru_cache(maxsize=1)
def _base() -> dict[str, object]:
    from packaging.markers import (
        default_environment,
    )  # lazy: imported where used (packaging.markers and its tokenizer: about 18 ms)

    return {
        **default_environment(),
        **_BASE,
        "sys_platform": "linux",
        "platform_system": "Linux",
        "os_name": "posix",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "python_full_version": "3.12.0",
        "python_version": "3.12",
        "implementation_version": "3.12.0",
        "extras": frozenset(),
        "dependency_groups": frozenset(),
    }
