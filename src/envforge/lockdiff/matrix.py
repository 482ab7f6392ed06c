"""The variant matrix of one recipe: what differs between ``pylock.<recipe>-<variant>.toml`` files.

One row per package (or lock setting) whose version, index or files differ between variants, one
column per variant; packages identical in every variant are counted, not listed.
"""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from envforge.core.plural import counted
from envforge.core.printable import escape_controls
from envforge.lockdiff.changes import CUDA_SUFFIX, FAMILIES, family_of, index_names
from envforge.lockdiff.fields import flatten_envforge
from envforge.lockdiff.model import PYPI, Lock, LockedPackage
from envforge.lockdiff.render import FAMILY_TITLES
from envforge.lockdiff.wheels import coverage_key, wheel_coverage

__all__ = [
    "MatrixRow",
    "VariantMatrix",
    "matrix_data",
    "render_matrix_markdown",
    "render_matrix_terminal",
    "variant_matrix",
]


@dataclass(frozen=True, slots=True)
class MatrixRow:
    """One differing row: ``group`` is a package family or ``settings``; ``cells`` has one text per
    variant (``""`` where the variant lacks it): ``version``, `` [index]`` when not PyPI, and when
    only the files differ `` lacks <platforms, Python tags>`` (what that variant's wheels do not
    cover and another's do) or `` files:<6 hex>`` (same coverage, other files)."""

    group: str
    subject: str
    cells: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class VariantMatrix:
    """``variants`` in column order, ``labels`` their lockfiles, ``identical`` the number of
    packages the same in every variant, ``rows`` the differing packages then settings."""

    recipe: str
    variants: tuple[str, ...]
    labels: tuple[str, ...]
    identical: int
    rows: tuple[MatrixRow, ...]


def variant_matrix(recipe: str, locks: Sequence[tuple[str, Lock]]) -> VariantMatrix:
    """Build the matrix from ``(variant, lock)`` pairs (see :func:`sources.variant_locks`)."""
    names = index_names(*(lock for _, lock in locks))
    rows, identical = [], 0
    for key, pkgs in _row_packages([lock for _, lock in locks]):
        cells = tuple(_cell(p, names, key) for p in pkgs)
        if len(set(cells)) == 1:
            digests = {_files_digest(p) for p in pkgs}
            if len(digests) == 1:
                identical += 1
                continue
            cells = _coverage_cells(cells, pkgs)
        rows.append(MatrixRow(family_of(key.split(" ")[0]), key, cells))
    rows.extend(_setting_rows([lock.envforge for _, lock in locks]))
    return VariantMatrix(
        recipe, tuple(v for v, _ in locks), tuple(lock.label for _, lock in locks), identical, tuple(rows)
    )


def _row_packages(locks: Sequence[Lock]) -> list[tuple[str, list[LockedPackage | None]]]:
    """(row key, package per variant). Names that differ only by a ``-cuNN`` suffix across
    variants (``nvidia-cublas-cu12`` / ``nvidia-cublas``) share one row keyed by the bare name."""
    keys = {k for lock in locks for k in lock.packages}
    stems: dict[str, set[str]] = {}
    for k in keys:
        stems.setdefault(CUDA_SUFFIX.sub("", k), set()).add(k)
    rows: dict[str, list[LockedPackage | None]] = {}
    for stem, members in stems.items():
        per_lock = [[lock.packages[m] for m in members if m in lock.packages] for lock in locks]
        if len(members) > 1 and all(len(found) <= 1 for found in per_lock):
            rows[stem] = [found[0] if found else None for found in per_lock]
        else:
            rows.update((m, [lock.packages.get(m) for lock in locks]) for m in members)
    order = sorted(rows, key=lambda k: (FAMILIES.index(family_of(k.split(" ")[0])), k))
    return [(k, rows[k]) for k in order]


def _cell(p: LockedPackage | None, names: Mapping[str, str], key: str) -> str:
    if p is None:
        return ""
    text = p.version or "?"
    if p.name != key.split(" ")[0]:
        text += f" ({p.name[len(key) :]})"
    return text if p.source == PYPI else f"{text} [{names.get(p.source, p.source)}]"


def _coverage_cells(cells: Sequence[str], pkgs: Sequence[LockedPackage | None]) -> tuple[str, ...]:
    """Cells of a row whose versions and indexes agree but whose files differ: what each
    variant's files lack against the others (``lacks linux aarch64, cp311``, from the wheel tags,
    :func:`classify.wheel_coverage`); the variants that lack nothing show a 6-hex digest of
    their files' names and hashes only where those differ among them (a rebuild)."""
    covers = [wheel_coverage(p) if p is not None else frozenset() for p in pkgs]
    union: frozenset[str] = frozenset().union(*covers)
    complete = {_files_digest(p) for p, have in zip(pkgs, covers) if p is not None and have == union}
    out = []
    for cell, p, have in zip(cells, pkgs, covers):
        missing = sorted(union - have, key=coverage_key)
        if p is None:
            out.append(cell)
        elif missing:
            out.append(f"{cell} lacks {', '.join(missing)}")
        elif len(complete) > 1:
            out.append(f"{cell} files:{_files_digest(p)[:6]}")
        else:
            out.append(cell)
    return tuple(out)


def _files_digest(p: LockedPackage | None) -> str:
    if p is None:
        return ""
    return hashlib.sha256(repr([(a.filename, a.hashes) for a in p.artifacts]).encode()).hexdigest()


def _setting_rows(tables: Sequence[Mapping[str, Any]]) -> list[MatrixRow]:
    flat = [flatten_envforge(t) for t in tables]
    keys = sorted({k for f in flat for k in f} - {("envforge", "variant")})
    rows = []
    for key in keys:
        cells = tuple(f.get(key, "") for f in flat)
        if len(set(cells)) > 1:
            section, subject = key
            rows.append(MatrixRow("settings", subject if section == "envforge" else f"{section} {subject}", cells))
    return rows


def _title(group: str) -> str:
    return "lock settings" if group == "settings" else FAMILY_TITLES[group]


#: Widest variant column of the terminal matrix, in characters: longer cells (a settings value
#: such as ``cuda-exceptions`` or a 71-character digest) wrap onto continuation lines, so one value
#: never sets the width of the whole table. Markdown and JSON keep every value on one line.
CELL_WIDTH = 48


def _wrap(text: str) -> list[str]:
    """``text`` in lines of at most :data:`CELL_WIDTH` (at spaces, else inside a long word)."""
    return textwrap.wrap(text, CELL_WIDTH, break_long_words=True, break_on_hyphens=False) or [text]


def render_matrix_terminal(m: VariantMatrix) -> str:
    """Aligned columns: package, then one column per variant (at most :data:`CELL_WIDTH` wide; a
    longer cell wraps onto continuation lines); groups as headings."""
    head = (
        f"{m.recipe}: {counted(len(m.variants), 'variant')} ({', '.join(m.variants)}); "
        f"{counted(m.identical, 'package')} identical, "
        f"{sum(r.group != 'settings' for r in m.rows)} differ"
    )
    rows = [(r, [_wrap(c or "-") for c in r.cells]) for r in m.rows]
    width = [max([len(r.subject) for r in m.rows] + [len("package")]) + 2]
    width += [max([len(line) for _, cells in rows for line in cells[i]] + [len(v)]) for i, v in enumerate(m.variants)]
    lines = [head, "  ".join(f"{t:<{w}}" for t, w in zip(["package", *m.variants], width)).rstrip()]
    group = None
    for r, cells in rows:
        if r.group != group:
            group = r.group
            lines.append(_title(group))
        for k in range(max(len(c) for c in cells)):
            first = [f"  {r.subject}" if k == 0 else "", *(c[k] if k < len(c) else "" for c in cells)]
            lines.append("  ".join(f"{t:<{w}}" for t, w in zip(first, width)).rstrip())
    return "\n".join(escape_controls(line) for line in lines)  # one line each, whatever a lock holds


def render_matrix_markdown(m: VariantMatrix) -> str:
    """A markdown table: one column per variant, group names in bold rows."""
    lines = [
        f"### Variants of `{m.recipe}`",
        "",
        f"{counted(m.identical, 'package')} identical in every variant; these differ:",
        "",
        "| | " + " | ".join(f"`{v}`" for v in m.variants) + " |",
        "| --- |" + " --- |" * len(m.variants),
    ]
    group = None
    for r in m.rows:
        if r.group != group:
            group = r.group
            title = _title(group).replace("*", "\\*")
            lines.append(f"| **{title}** |" + " |" * len(m.variants))
        cells = [c.replace("|", "\\|") or "—" for c in r.cells]
        lines.append(f"| `{r.subject}` | " + " | ".join(cells) + " |")
    return "\n".join(escape_controls(line) for line in lines)  # one line each, whatever a lock holds


def matrix_data(m: VariantMatrix) -> dict[str, Any]:
    """JSON-ready dict of the matrix (every dataclass field)."""
    return asdict(m)
