"""Render lock diffs: terminal text, markdown for a PR comment, JSON-ready data, git textconv.

Every renderer is a pure function of the report objects: same input, same text (no clock, no
terminal width), so outputs can be pasted into reviews and compared in tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from envforge.lockdiff.classify import (
    FAMILIES,
    FieldChange,
    LockDiff,
    PackageChange,
    flatten_envforge,
    index_names,
)
from envforge.lockdiff.model import PYPI, Lock

__all__ = ["diff_data", "render_markdown", "render_terminal", "render_textconv", "summary_line"]

FAMILY_TITLES = {"torch": "torch family", "nvidia": "nvidia-* / cuda-*",
                 "flashinfer": "flashinfer-*", "sglang": "sglang", "other": "other"}
KIND_WORDS = {"added": "added", "removed": "removed", "replaced": "replaced",
              "upgraded": "upgraded", "downgraded": "downgraded", "local": "local label",
              "source": "source", "rehashed": "REHASHED", "files": "files", "marker": "marker",
              "metadata": "metadata"}
_KIND_ORDER = tuple(KIND_WORDS)


def summary_line(diff: LockDiff, show_all: bool = False) -> str:
    """``169 -> 170 packages: 15 replaced, 5 local label, ...`` plus the hidden count."""
    if diff.status != "changed":
        count = diff.new_count if diff.status == "added" else diff.old_count
        return f"lockfile {diff.status} ({count} packages)"
    counts: dict[str, int] = {}
    for c in diff.visible_packages(show_all):
        counts[c.kind] = counts.get(c.kind, 0) + 1
    parts = [f"{counts[k]} {KIND_WORDS[k]}" for k in _KIND_ORDER if k in counts]
    fields = len(diff.visible_fields(show_all))
    if fields:
        parts.append(f"{fields} lock setting{'s' if fields > 1 else ''}")
    text = f"{diff.old_count} -> {diff.new_count} packages: {', '.join(parts) or 'no changes'}"
    hidden = diff.hidden_count()
    if hidden and not show_all:
        text += f" ({hidden} metadata-only hidden; --all shows them)"
    return text


def _index(url: str | None, names: Mapping[str, str]) -> str:
    return names.get(url or "", url or "?")


def _versions(c: PackageChange, arrow: str) -> str:
    if c.kind == "added":
        return c.new_version or "?"
    if c.kind == "removed":
        return c.old_version or "?"
    if c.kind == "replaced":
        return f"{c.old_version} {arrow} {c.new_name} {c.new_version}"
    if c.old_version == c.new_version:
        return c.new_version or "?"
    return f"{c.old_version} {arrow} {c.new_version}"


def _note(c: PackageChange, names: Mapping[str, str], arrow: str) -> str:
    parts = [p for p in (c.level, c.detail) if p]
    if c.old_source and c.new_source:
        what = "index" if _is_url(c.old_source) and _is_url(c.new_source) else "source"
        parts.append(f"{what} {_index(c.old_source, names)} {arrow} {_index(c.new_source, names)}")
    elif c.kind in ("added", "removed"):
        source = c.new_source or c.old_source
        if source and source != PYPI:
            parts.append(f"index {_index(source, names)}")
    return "; ".join(parts).replace(" -> ", f" {arrow} ")


def _is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def _field_text(f: FieldChange, arrow: str) -> str:
    label = f.subject if f.section in ("envforge", "header") else f"{f.section} {f.subject}"
    if f.kind == "reason":
        return f"{label}: reason {f.old!r} {arrow} {f.new!r}"
    value = (f"{_short(f.old)} {arrow} {_short(f.new)}" if f.kind == "changed"
             else f"{f.kind} {_short(f.new if f.kind == 'added' else f.old)}")
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


def render_terminal(diff: LockDiff, *, show_all: bool = False) -> str:
    """Plain text for a terminal: a title, a summary line, changes grouped by family in aligned
    columns (kind, package, versions, note), then ``[tool.envforge]`` and header changes."""
    lines = [f"lock diff: {diff.old_label} -> {diff.new_label}", summary_line(diff, show_all)]
    changes = diff.visible_packages(show_all)
    width_kind = max((len(_kind_word(c)) for c in changes), default=0)
    width_name = max((len(c.old_name or c.name) for c in changes), default=0)
    width_ver = max((len(_versions(c, "->")) for c in changes), default=0)
    for family, group in _grouped(changes):
        lines.append(f"{FAMILY_TITLES[family]} ({_counts(group)})")
        for c in group:
            row = (f"  {_kind_word(c):<{width_kind}}  {c.old_name or c.name:<{width_name}}  "
                   f"{_versions(c, '->'):<{width_ver}}  {_note(c, diff.index_names, '->')}")
            lines.append(row.rstrip())
    fields = diff.visible_fields(show_all)
    if fields:
        lines.append("lock settings ([tool.envforge] and header)")
        lines.extend(f"  {_field_text(f, '->')}" for f in fields)
    return "\n".join(lines)


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
    """Markdown for a PR comment: a heading, the summary, one table of package changes (family
    shown on its first row) and one table of lock settings."""
    arrow = "→"
    lines = [f"### Lock diff: `{diff.old_label}` {arrow} `{diff.new_label}`", "",
             summary_line(diff, show_all).replace(" -> ", f" {arrow} "), ""]
    changes = diff.visible_packages(show_all)
    if changes:
        lines += ["| family | change | package | version | note |", "| --- | --- | --- | --- | --- |"]
        for family, group in _grouped(changes):
            for i, c in enumerate(group):
                fam = f"**{_md(FAMILY_TITLES[family])}**" if i == 0 else ""
                kind = f"⚠️ {KIND_WORDS[c.kind]}" if c.flagged else KIND_WORDS[c.kind]
                lines.append(f"| {fam} | {kind} | `{c.old_name or c.name}` | "
                             f"{_md(_versions(c, arrow))} | {_md(_note(c, diff.index_names, arrow))} |")
        lines.append("")
    fields = diff.visible_fields(show_all)
    if fields:
        lines += ["| lock setting | change |", "| --- | --- |"]
        for f in fields:
            subject, _, rest = _field_text(f, arrow).partition(": ")
            lines.append(f"| `{_md(subject)}` | {_md(rest)} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def diff_data(diff: LockDiff, *, show_all: bool = False) -> dict[str, Any]:
    """JSON-ready dict of one diff: labels, status, package counts, summary counts by kind, the
    shown changes (every dataclass field), shown lock-setting changes and the hidden count."""
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
        "changes": [asdict(c) for c in changes],
        "settings": [asdict(f) for f in diff.visible_fields(show_all)],
        "hidden": 0 if show_all else diff.hidden_count(),
    }


def render_textconv(lock: Lock) -> str:
    """A stable line-per-fact text of one lock for ``git diff`` (textconv).

    Lines: a title with the format and package count, the meaningful header keys, one line per
    ``[tool.envforge]`` entry, then one line per package: ``name version`` plus the index name when
    not PyPI, the marker when there is one, the file count and a 12-hex digest over the files'
    names and hashes. Upload times and sizes are left out, so metadata-only churn shows no diff.
    """
    import hashlib

    names = index_names(lock)
    lines = [f"# envforge lock textconv: {lock.kind}, {len(lock.packages)} packages"]
    for key, value in lock.header.items():
        if key not in ("lock-version", "created-by", "version", "revision"):
            lines.append(f"{key} = {value}")
    if lock.envforge:
        lines.append("[tool.envforge]")
        lines.extend(f"{section}.{subject} = {value}" if section != "envforge"
                     else f"{subject} = {value}"
                     for (section, subject), value in flatten_envforge(lock.envforge).items())
    lines.append("[packages]")
    for p in lock.packages.values():
        parts = [p.name, p.version or "(no version)"]
        if _is_url(p.source) and p.source != PYPI:
            parts.append(f"index={_index(p.source, names)}")
        elif p.source != PYPI:
            parts.append(f"source={p.source}")
        if p.marker:
            parts.append(f"marker={p.marker!r}")
        digest = hashlib.sha256(repr([(a.filename, a.hashes) for a in p.artifacts]).encode())
        parts.append(f"files={len(p.artifacts)}:{digest.hexdigest()[:12]}")
        lines.append("  ".join(parts))
    return "\n".join(lines)
