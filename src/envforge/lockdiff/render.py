"""Render lock diffs: terminal text, markdown for a PR comment, JSON-ready data, git textconv.

Every renderer is a pure function of the report objects: same input, same text (no clock, no
terminal width), so outputs can be pasted into reviews and compared in tests.
"""

from __future__ import annotations

import hashlib
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from envforge.core.plural import counted, noun
from envforge.core.printable import escape_controls
from envforge.lockdiff.changes import (
    FAMILIES,
    FieldChange,
    IndexMove,
    LockDiff,
    PackageChange,
    SharedChange,
    index_names,
)
from envforge.lockdiff.budget import (
    MAX_COMMENT,
    MAX_LINE,
    MAX_VALUE,
    MarkdownBudget,
    fit_line,
    pieces,
    shorten_pair,
    table_rows,
)
from envforge.lockdiff.fields import flatten_envforge
from envforge.lockdiff.model import PYPI, Lock

__all__ = [
    "SCHEMA_VERSION",
    "diff_data",
    "render_markdown",
    "render_terminal",
    "render_textconv",
    "source_text",
    "summary_line",
]

SCHEMA_VERSION = 3  # envforge.lockdiff/3: shared, attributes (2: index_moves; markers, coverage, files, dependencies)
WIDTH = 120  # terminal lines are wrapped to this many characters (unbreakable words excepted)
FAMILY_TITLES = {
    "torch": "torch family",
    "nvidia": "nvidia-* / cuda-*",
    "flashinfer": "flashinfer-*",
    "sglang": "sglang",
    "other": "other",
}
KIND_WORDS = {
    "added": "added",
    "removed": "removed",
    "replaced": "replaced",
    "upgraded": "upgraded",
    "downgraded": "downgraded",
    "local": "local label",
    "rehashed": "REHASHED",
    "hashes-removed": "HASHES REMOVED",
    "hashes-added": "hashes added",
    "rebuilt": "rebuilt",
    "files": "files",
    "source": "source",
    "moved": "moved",
    "marker": "marker",
    "dependencies": "dependencies",
    "fields": "fields",
    "metadata": "metadata",
}
_KIND_ORDER = tuple(KIND_WORDS)
_LISTED_MOVE_NAMES = 10  # the terminal names the packages of a move up to this many
AMBIGUOUS = "; an install is refused where both are selected"  # said after each ambiguity's text


def ambiguity_lines(diff: LockDiff) -> list[str]:
    """One ``! ambiguous in NEW: packages[0] (...) and packages[1] (...) can be active together;
    an install is refused where both are selected`` line per name of the new side whose entries
    can be active together."""
    return [f"! ambiguous in {diff.new_label}: {text}{AMBIGUOUS}" for text in diff.ambiguities]


def summary_line(diff: LockDiff, show_all: bool = False) -> str:
    """``169 -> 170 packages: 1 index move (3 packages), 15 replaced, ...`` plus the hidden
    count. Counts are entries (every ``[[packages]]`` entry, several per name where the lock
    has them)."""
    if diff.status != "changed":
        count = diff.new_count if diff.status == "added" else diff.old_count
        return f"lockfile {diff.status} ({counted(count, 'package')})"
    parts = []
    if diff.index_moves:
        n = len(diff.index_moves)
        moved = sum(len(m.packages) for m in diff.index_moves)
        parts.append(f"{counted(n, 'index move')} ({counted(moved, 'package')})")
    if diff.shared:
        n = len(diff.shared)
        parts.append(
            f"{counted(n, 'shared change')} ({counted(max(len(g.packages) for g in diff.shared), 'package')} at most)"
        )
    counts: dict[str, int] = {}
    for c in diff.visible_packages(show_all):
        counts[c.kind] = counts.get(c.kind, 0) + 1
    parts += [f"{counts[k]} {KIND_WORDS[k]}" for k in _KIND_ORDER if k in counts]
    fields = len(diff.visible_fields(show_all))
    if fields:
        parts.append(counted(fields, "lock setting"))
    packages = noun(2 if diff.old_count != 1 else diff.new_count, "package")  # "1 -> 1 package", "2 -> 1 packages"
    text = f"{diff.old_count} -> {diff.new_count} {packages}: {', '.join(parts) or 'no changes'}"
    hidden = diff.hidden_count()
    if hidden and not show_all:
        text += f" ({hidden} metadata-only hidden; --all shows them)"
    return text


def _index(url: str | None, names: Mapping[str, str]) -> str:
    return names.get(url or "", url or "?")


def source_text(old: str, new: str, names: Mapping[str, str], arrow: str = "->") -> str:
    """``old -> new`` for two sources: index names where known; two unnamed URLs that share a
    prefix or suffix of path segments are written once with the differing middle in braces
    (``https://host/rhoai/{3.5 -> 3.6}/cuda13.0``)."""
    a, b = _index(old, names), _index(new, names)
    if a != old or b != new or not (_is_url(old) and _is_url(new)):
        return f"{a} {arrow} {b}"
    x, y = old.split("/"), new.split("/")
    head = 0
    while head < min(len(x), len(y)) and x[head] == y[head]:
        head += 1
    tail = 0
    while tail < min(len(x), len(y)) - head and x[-1 - tail] == y[-1 - tail]:
        tail += 1
    if head < 3:  # not even the host in common
        return f"{old} {arrow} {new}"
    mid_x, mid_y = "/".join(x[head : len(x) - tail]), "/".join(y[head : len(y) - tail])
    suffix = "/" + "/".join(x[len(x) - tail :]) if tail else ""
    return f"{'/'.join(x[:head])}/{{{mid_x or '(none)'} {arrow} {mid_y or '(none)'}}}{suffix}"


def _versions(c: PackageChange, arrow: str) -> str:
    if c.kind == "added":
        return c.new_version or "?"
    if c.kind == "removed":
        return c.old_version or "?"
    if c.kind == "replaced":
        return f"{c.old_version} {arrow} {c.new_name} {c.new_version}"
    if c.old_version == c.new_version:
        return c.new_version or "(no version)"
    return f"{c.old_version or '(no version)'} {arrow} {c.new_version or '(no version)'}"


def _marker(text: str | None) -> str:
    return repr(text) if text else "(none)"


def marker_text(old: str | None, new: str | None, limit: int | None = None) -> str:
    """A marker change: ``or``-lists show the clauses added and removed, others in full; with
    ``limit``, two long markers are shortened around where they differ
    (:func:`envforge.lockdiff.budget.shorten_pair`: the arrow and both sides stay)."""
    a, b = (old or "").split(" or "), (new or "").split(" or ")
    if old and new and len(a) > 1 and len(b) > 1:
        parts = [f"+{c}" for c in b if c not in a] + [f"-{c}" for c in a if c not in b]
        return "marker " + ", ".join(parts)
    if limit is not None:
        x, y = shorten_pair(_marker(old), _marker(new), limit)
        return f"marker {x} -> {y}"
    return f"marker {_marker(old)} -> {_marker(new)}"


def notes(c: PackageChange, names: Mapping[str, str], arrow: str = "->", limit: int | None = None) -> list[str]:
    """The facts of one change beside its kind, in a fixed order: level, detail, marker,
    source, wheel coverage, files, dependencies (``->`` replaced by ``arrow``); with ``limit``, a
    long marker change shortened (:func:`marker_text`)."""
    parts = [p for p in (c.level, c.detail) if p]
    if c.kind in ("added", "removed"):
        marker = c.new_marker if c.kind == "added" else c.old_marker
        if marker:
            parts.append(f"where {marker}")
    elif c.marker_changed:
        parts.append(marker_text(c.old_marker, c.new_marker, limit))
    if c.old_source and c.new_source:
        if _is_url(c.old_source) and _is_url(c.new_source):
            parts.append(f"index {source_text(c.old_source, c.new_source, names)}")
        else:  # an index beside a direct source is named as one: ``registry pypi -> editable ../x``
            a, b = (f"registry {_index(s, names)}" if _is_url(s) else s for s in (c.old_source, c.new_source))
            parts.append(f"source {a} -> {b}")
    elif c.kind in ("added", "removed"):
        source = c.new_source or c.old_source
        if source and source != PYPI:
            parts.append(f"index {_index(source, names)}")
    wheels = [w for w in c.coverage if w[1:] != "sdist"]
    if wheels:
        parts.append("wheels " + ", ".join(wheels))
    if "+sdist" in c.coverage or "-sdist" in c.coverage:
        parts.append("sdist added" if "+sdist" in c.coverage else "sdist removed")
    if c.files and not c.coverage:  # files are shown when coverage alone does not say it
        parts.append("files " + ", ".join(c.files))
    if c.dependencies:
        parts.append("dependencies " + ", ".join(c.dependencies))
    parts.extend(c.attributes)
    return [p.replace(" -> ", f" {arrow} ") for p in parts]


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://", "file://"))


def _field_text(f: FieldChange, arrow: str) -> str:
    if f.kind == "no-longer-applies":  # envforge.lockdiff.patchsets (B41)
        return f"{f.section}: {f.subject} no longer applies to {f.new} ({f.note})"
    label = f.subject if f.section in ("envforge", "header") else f"{f.section} {f.subject}"
    if f.kind == "reason":
        return f"{label}: reason {f.old!r} {arrow} {f.new!r}"
    value = (
        f"{_short(f.old)} {arrow} {_short(f.new)}"
        if f.kind == "changed"
        else f"{f.kind} {_short(f.new if f.kind == 'added' else f.old)}"
    )
    text = f"{label}: {value}"
    return f"{text} ({f.note})" if f.note else text


def _short(value: str | None) -> str:
    """Digests shortened to 12 hex digits; other values as they are."""
    if value and value.startswith("sha256:") and len(value) > 19:
        return value[:19]
    return value or ""


def _grouped(changes: Sequence[PackageChange]) -> list[tuple[str, list[PackageChange]]]:
    groups: dict[str, list[PackageChange]] = {}
    for c in changes:
        groups.setdefault(c.family, []).append(c)
    return [(f, groups[f]) for f in FAMILIES if f in groups]


def shared_fact(g: SharedChange, arrow: str = "->") -> str:
    """What the entries of one :class:`SharedChange` share, as text: ``marker A -> B``,
    ``rebuilt, build tag 8 -> 1``, the field change, ``dependency markers A -> B``, the edge, the
    coverage item (``wheels -cp311``, ``sdist removed``)."""
    if g.what == "marker":
        text = marker_text(g.old, g.new)
    elif g.what == "rebuilt":
        text = f"rebuilt, {g.new}"
    elif g.what == "dependency-marker":
        text = f"dependency edges' marker {_marker(g.old)} -> {_marker(g.new)}"
    elif g.what == "dependency":
        text = f"dependencies {g.new}"
    elif g.what == "coverage" and (g.new or "")[1:] == "sdist":
        text = "sdist added" if g.new == "+sdist" else "sdist removed"
    elif g.what == "coverage":
        text = f"wheels {g.new}"
    else:
        text = g.new or ""
    return text.replace(" -> ", f" {arrow} ")


def _names(packages: Sequence[str], show_all: bool) -> str:
    """The names of a group, all of them with ``show_all``, else the first ten and a count."""
    if show_all or len(packages) <= _LISTED_MOVE_NAMES:
        return ", ".join(packages)
    rest = len(packages) - _LISTED_MOVE_NAMES
    return f"{', '.join(packages[:_LISTED_MOVE_NAMES])} and {rest} more (--all or --json lists them)"


def _move_line(m: IndexMove, names: Mapping[str, str], arrow: str) -> str:
    return f"{counted(len(m.packages), 'package')} moved index {source_text(m.old, m.new, names, arrow)}"


def _wrap(first: str, facts: Sequence[str], indent: int, width: int | None) -> list[str]:
    """``first`` then the ``facts`` joined by ``"; "`` on one line when that fits in ``width``
    (or ``width`` is None); else one fact a line, wrapped at ``width``. The first fact goes beside
    ``first`` when it fits there or when the note column (``indent``) is at most ``width - 60``;
    the others are indented by ``indent`` (6 when the note column is further right), their
    continuation lines by two more. A long list fact (``dependencies +a, -b``) gets one item a
    line."""
    line = f"{first}{'; '.join(facts)}".rstrip()
    if width is None or len(line) <= width or not facts:
        return [line]
    pad = indent if indent <= width - 60 else 6
    out: list[str] = []
    for i, fact in enumerate(facts):
        lead = " " * pad
        if i == 0 and (pad == indent or len(first) + len(fact) <= width):
            lead = first
        elif i == 0:
            out.append(first.rstrip())
        items = _ITEMS.split(fact) if len(lead) + len(fact) > width else [fact]
        for j, item in enumerate(items):  # a long list (``+a, -b``): one item a line
            start = lead if j == 0 else " " * (pad + 2)
            out += textwrap.wrap(
                item,
                width=width,
                initial_indent=start,
                subsequent_indent=" " * (len(start) - len(start.lstrip()) + 2 if j else pad + 2),
                break_long_words=False,
                break_on_hyphens=False,
            )
    return out


_ITEMS = re.compile(r", (?=[+-]\S)")


def render_terminal(diff: LockDiff, *, show_all: bool = False, width: int | None = WIDTH) -> str:
    """Plain text for a terminal: a title, a summary line, index moves (each once), changes
    grouped by family in aligned columns (kind, package, versions, facts), then lock settings.
    Lines longer than ``width`` (default :data:`WIDTH`) are wrapped with their continuation
    indented, and a line wrapping cannot bring to 200 characters is elided in the middle
    (:func:`envforge.lockdiff.budget.fit_line`); ``width=None`` keeps every change on one line,
    whole."""
    names = diff.index_names
    lines = [f"lock diff: {diff.old_label} -> {diff.new_label}"]
    summary = summary_line(diff, show_all)
    lines += (
        textwrap.wrap(summary, width=width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
        if width
        else [summary]
    )
    for line in ambiguity_lines(diff):
        lines += (
            textwrap.wrap(line, width=width, subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)
            if width
            else [line]
        )
    for m in diff.index_moves:
        listed = (
            f" ({', '.join(m.packages)})"
            if len(m.packages) <= _LISTED_MOVE_NAMES
            else " (--format markdown or json lists them)"
        )
        lines += _wrap(_move_line(m, names, "->"), [listed], 4, width)
    for g in diff.shared:
        lines += _wrap(
            f"{counted(len(g.packages), 'package')}: ", [f"{shared_fact(g)} ({_names(g.packages, show_all)})"], 4, width
        )
    changes = diff.visible_packages(show_all)
    width_kind = max((len(_kind_word(c)) for c in changes), default=0)
    width_name = max((len(c.old_name or c.name) for c in changes), default=0)
    width_ver = min(max((len(_versions(c, "->")) for c in changes), default=0), 40)
    for family, group in _grouped(changes):
        lines.append(f"{FAMILY_TITLES[family]} ({_counts(group)})")
        for c in group:
            first = (
                f"  {_kind_word(c):<{width_kind}}  {c.old_name or c.name:<{width_name}}  "
                f"{_versions(c, '->'):<{width_ver}}  "
            )
            lines += _wrap(first, notes(c, names), len(first), width)
    fields = diff.visible_fields(show_all)
    if fields:
        lines.append("lock settings ([tool.envforge] and header)")
        for f in fields:
            label, _, value = _field_text(f, "->").partition(": ")
            lines += _wrap(f"  {label}: ", [value], 6, width)
    if width is None:
        return "\n".join(escape_controls(line) for line in lines)
    return "\n".join(fit_line(escape_controls(line)) for line in lines)  # one line each, at most 200


def _counts(group: Sequence[PackageChange]) -> str:
    counts: dict[str, int] = {}
    for c in group:
        counts[c.kind] = counts.get(c.kind, 0) + 1
    return ", ".join(f"{counts[k]} {KIND_WORDS[k]}" for k in _KIND_ORDER if k in counts)


def _kind_word(c: PackageChange) -> str:
    return f"! {KIND_WORDS[c.kind]}" if c.flagged else KIND_WORDS[c.kind]


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*")


def render_markdown(diff: LockDiff, *, show_all: bool = False) -> str:
    """Markdown for a PR comment: a heading, the summary, one bullet per index move and per shared
    change (its packages in a ``<details>`` block), one table of package changes (family shown on
    its first row, facts; a row over 200 characters continues on rows with empty cells) and one
    table of lock settings.

    Budget (:mod:`envforge.lockdiff.budget`): no line over 200 characters, the whole at most
    65,536 (one GitHub comment). What does not fit is left out with a line saying how much and
    that ``--json`` has it all.
    """
    arrow = "→"
    names = diff.index_names
    out = MarkdownBudget()
    out.add(f"### Lock diff: `{diff.old_label}` {arrow} `{diff.new_label}`", "")
    out.add(
        *textwrap.wrap(
            summary_line(diff, show_all).replace(" -> ", f" {arrow} "),
            width=MAX_LINE,
            break_long_words=False,
            break_on_hyphens=False,
        ),
        "",
    )
    out.rows([f"- ⚠️ **ambiguous**: {_md(text)}{AMBIGUOUS}" for text in diff.ambiguities], "ambiguities")
    if diff.ambiguities:
        out.add("")
    groups = [
        (
            f"- **{counted(len(m.packages), 'package')}** moved index `{source_text(m.old, m.new, names, arrow)}`",
            m.packages,
        )
        for m in diff.index_moves
    ]
    groups += [
        (f"- **{counted(len(g.packages), 'package')}**: {_md(shared_fact(g, arrow))}", g.packages) for g in diff.shared
    ]
    for i, (title, packages) in enumerate(groups):
        if out.size > MAX_COMMENT - 2_000:
            out.add(
                f"_{len(groups) - i} more shared changes are not shown: one GitHub comment holds "
                f"{MAX_COMMENT:,} characters; `envforge lock diff --json` has them all._",
                "",
            )
            break
        out.add(title, "  <details><summary>packages</summary>", "")
        out.rows(
            ["  " + ln for ln in textwrap.wrap(", ".join(packages), width=100, break_on_hyphens=False)],
            "package names",
            reserve=200,
        )
        out.add("", "  </details>", "")
    changes = diff.visible_packages(show_all)
    if changes:
        out.add("| family | change | package | version | note |", "| --- | --- | --- | --- | --- |")
        rows: list[list[str]] = []
        whole: list[str] = []
        for family, group in _grouped(changes):
            for i, c in enumerate(group):
                fam = f"**{_md(FAMILY_TITLES[family])}**" if i == 0 else ""
                kind = f"⚠️ {KIND_WORDS[c.kind]}" if c.flagged else KIND_WORDS[c.kind]
                shown = notes(c, names, arrow, limit=MAX_VALUE)
                if shown != notes(c, names, arrow):
                    whole.append(
                        f"- `{c.old_name or c.name}` {_versions(c, arrow)}: "
                        + marker_text(c.old_marker, c.new_marker).replace(" -> ", f" {arrow} ")
                    )
                items = [
                    _md(piece)
                    for n in shown
                    for item in (_ITEMS.split(n) if len(n) > 100 else [n])
                    for piece in pieces(item)
                ]
                rows.append(
                    table_rows(f"| {fam} | {kind} | `{c.old_name or c.name}` | {_md(_versions(c, arrow))} | ", items)
                )
        out.rows(rows, "package changes", reserve=1_000)
        out.add("")
        if whole:
            out.add("<details><summary>whole values of the shortened markers</summary>", "")
            out.rows(
                [
                    [
                        "  " + ln if k else ln
                        for k, ln in enumerate(
                            textwrap.wrap(_md(w), width=MAX_LINE - 20, break_long_words=False, break_on_hyphens=False)
                        )
                    ]
                    for w in whole
                ],
                "whole values",
                reserve=800,
            )
            out.add("", "</details>", "")
    fields = diff.visible_fields(show_all)
    if fields:
        out.add("| lock setting | change |", "| --- | --- |")
        field_rows = []
        for f in fields:
            subject, _, rest = _field_text(f, arrow).partition(": ")
            field_rows.append(f"| `{_md(subject)}` | {_md(rest)} |")
        out.rows(field_rows, "lock settings", reserve=300)
        out.add("")
    return "\n".join(out.lines).rstrip("\n")


def diff_data(diff: LockDiff, *, show_all: bool = False) -> dict[str, Any]:
    """JSON-ready dict of one diff (schema ``envforge.lockdiff/2``, docs/lock-diff.md): labels,
    status, entry counts, summary counts by kind, index moves (old, new, packages), the shown
    changes (every :class:`PackageChange` field), shown lock-setting changes, the hidden
    count and the new side's ambiguities (texts, see :func:`ambiguity_lines`)."""
    changes = diff.visible_packages(show_all)
    summary: dict[str, int] = {}
    for c in changes:
        summary[c.kind] = summary.get(c.kind, 0) + 1
    return {
        "old": diff.old_label,
        "new": diff.new_label,
        "status": diff.status,
        "packages": {"old": diff.old_count, "new": diff.new_count},
        "summary": summary,
        "index_moves": [
            {
                "old": m.old,
                "new": m.new,
                "old_name": diff.index_names.get(m.old),
                "new_name": diff.index_names.get(m.new),
                "packages": list(m.packages),
            }
            for m in diff.index_moves
        ],
        "shared": [
            {"what": g.what, "old": g.old, "new": g.new, "text": shared_fact(g), "packages": list(g.packages)}
            for g in diff.shared
        ],
        "changes": [_change_data(c) for c in changes],
        "settings": [asdict(f) for f in diff.visible_fields(show_all)],
        "hidden": 0 if show_all else diff.hidden_count(),
        "ambiguities": list(diff.ambiguities),
    }


def _change_data(c: PackageChange) -> dict[str, Any]:
    data = asdict(c)
    for key in ("coverage", "files", "dependencies", "attributes"):
        data[key] = list(data[key])
    return data


def render_textconv(lock: Lock) -> str:
    """A stable line-per-fact text of one lock for ``git diff`` (textconv).

    Lines: a title with the format and package count, one ``! ambiguous: ...`` line per name whose
    entries can be active together, the meaningful header keys, top-level
    arrays one item a line, one line per ``[tool.envforge]`` entry, then one line per package: ``name version`` plus the index name when
    not PyPI, the marker when there is one, the file count and a 12-hex digest over the files'
    names and hashes (and one over the dependency edges where there are any). An entry that names
    no index (``pip lock`` writes none) shows none: not the folder its files are in. Upload times and
    sizes are left out, so metadata-only churn shows no diff.
    """
    names = index_names(lock)
    lines = [f"# envforge lock textconv: {lock.kind}, {counted(len(lock.packages), 'package')}"]
    lines += [f"! ambiguous: {text}{AMBIGUOUS}" for text in lock.ambiguities]
    for key, value in lock.header.items():
        if key not in ("lock-version", "created-by", "version", "revision"):
            lines.append(f"{key} = {value}")
    for key, items in lock.lists.items():
        lines.append(f"{key} =")
        lines.extend(f"  {item}" for item in items)
    if lock.envforge:
        lines.append("[tool.envforge]")
        lines.extend(
            f"{section}.{subject} = {value}" if section != "envforge" else f"{subject} = {value}"
            for (section, subject), value in flatten_envforge(lock.envforge).items()
        )
    lines.append("[packages]")
    for p in lock.packages.values():
        parts = [p.name, p.version or "(no version)"]
        if not p.index_named and _is_url(p.source):
            pass  # a pylock entry naming no index (pip lock): none shown, never the folder of its files
        elif _is_url(p.source) and p.source != PYPI:
            parts.append(f"index={_index(p.source, names)}")
        elif p.source != PYPI:
            parts.append(f"source={p.source}")
        if p.marker:
            parts.append(f"marker={p.marker!r}")
        digest = hashlib.sha256(repr([(a.filename, a.hashes) for a in p.artifacts]).encode())
        parts.append(f"files={len(p.artifacts)}:{digest.hexdigest()[:12]}")
        if p.dependencies:
            edges = hashlib.sha256("\n".join(p.dependencies).encode()).hexdigest()[:12]
            parts.append(f"dependencies={len(p.dependencies)}:{edges}")
        lines.append("  ".join(parts))
    return "\n".join(fit_line(escape_controls(line)) for line in lines)  # one line each, at most 200
