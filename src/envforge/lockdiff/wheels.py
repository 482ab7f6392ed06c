"""What the files of two entries of one version say: rehashed, rebuilt (build tag), files added or
removed, metadata only; and the platforms and Pythons a wheel set covers (from wheel file names).
"""

from __future__ import annotations

import re
from typing import Any

from envforge.lockdiff.changes import ChangeKind
from envforge.lockdiff.model import Artifact, LockedPackage

__all__ = ["coverage_change", "coverage_key", "file_change", "wheel_coverage"]


def _wheel_identity(f: Artifact) -> tuple[str, str]:
    """(identity without the build tag, build tag) of a file: a wheel's sorted tags, or the file
    name of anything else (build tag ``""``)."""
    if not f.filename.endswith(".whl"):
        return f.filename, ""

    from packaging.utils import InvalidWheelFilename, parse_wheel_filename  # lazy: packaging.tags

    try:
        _, _, build, tags = parse_wheel_filename(f.filename)
    except InvalidWheelFilename:
        return f.filename, ""
    text = "".join(str(part) for part in build) if build else "none"
    return "wheel " + ".".join(sorted(str(t) for t in tags)), text


def file_change(old: LockedPackage, new: LockedPackage) -> tuple[ChangeKind | None, str, tuple[str, ...], bool]:
    """(kind, detail, files, flagged) for two entries of the same version: ``rehashed`` (a file of
    the same name with another digest for an algorithm both sides name: other bytes, flagged),
    ``hashes-removed`` (the same files, a side lost every hash or an algorithm: the lock no longer
    verifies them, flagged), ``hashes-added`` (the reverse), ``rebuilt``, ``files``, ``metadata`` or
    ``None`` (same files, maybe at other URLs). Field case U04."""
    if len(old.artifacts) == len(new.artifacts) and all(
        x.filename == y.filename and x.hashes == y.hashes for x, y in zip(old.artifacts, new.artifacts)
    ):  # same files (the common case)
        for x, y in zip(old.artifacts, new.artifacts):
            if (x.size, x.upload_time) != (y.size, y.upload_time):
                return "metadata", _meta_what(x, y), (), False
        return None, "", (), False
    a = {f.filename: f for f in old.artifacts}
    b = {f.filename: f for f in new.artifacts}
    common = sorted(a.keys() & b.keys())
    rehashed = [n for n in common if _other_digest(a[n].hashes, b[n].hashes)]
    if rehashed:
        return "rehashed", f"same version, new hashes: {_some(rehashed)}", (), True
    lost = [n for n in common if dict(a[n].hashes).keys() - dict(b[n].hashes).keys()]
    if lost:
        what = "no hash" if all(not b[n].hashes for n in lost) else "fewer hashes"
        return ("hashes-removed", f"same files, {what}: the lock no longer verifies {_some(lost)}", (), True)
    gained = [n for n in common if dict(b[n].hashes).keys() - dict(a[n].hashes).keys()]
    if gained:
        return "hashes-added", f"same files, now verified by hash: {_some(gained)}", (), False
    gone, came = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    if gone or came:
        ids_a = {_wheel_identity(a[n])[0]: a[n] for n in gone}
        ids_b = {_wheel_identity(b[n])[0]: b[n] for n in came}
        rebuilt = sorted(ids_a.keys() & ids_b.keys())
        files = tuple(
            [f"+{n}" for n in came if _wheel_identity(b[n])[0] not in ids_a]
            + [f"-{n}" for n in gone if _wheel_identity(a[n])[0] not in ids_b]
        )
        if rebuilt:
            builds = sorted({(_wheel_identity(ids_a[i])[1], _wheel_identity(ids_b[i])[1]) for i in rebuilt})
            tags = ", ".join(f"{x} -> {y}" for x, y in builds)
            word = "file" if len(rebuilt) == 1 else "files"
            return "rebuilt", f"{len(rebuilt)} {word} rebuilt, build tag {tags}", files, False
        return "files", "", files, False
    meta = [n for n in a if (a[n].size, a[n].upload_time) != (b[n].size, b[n].upload_time)]
    if meta:
        return "metadata", _meta_what(a[meta[0]], b[meta[0]]), (), False
    return None, "", (), False


def _other_digest(a: tuple[tuple[str, str], ...], b: tuple[tuple[str, str], ...]) -> bool:
    """Some algorithm both sides name has another digest: other bytes (a lost or added algorithm
    alone is not)."""
    x, y = dict(a), dict(b)
    return any(x[k] != y[k] for k in x.keys() & y.keys())


def _some(names: list[str]) -> str:
    """``first`` or ``first (+N more)``."""
    return names[0] + (f" (+{len(names) - 1} more)" if len(names) > 1 else "")


def _meta_what(a: Any, b: Any) -> str:
    fields = [n for n in ("upload_time", "size") if getattr(a, n) != getattr(b, n)]
    return " and ".join(f.replace("_", "-") for f in fields) + " of identical files"


_ARCH = re.compile(r"^(manylinux|musllinux|macosx)_\d+_\d+_(.+)$|^(manylinux\d+|linux)_(.+)$")
_OS = {"manylinux": "linux", "musllinux": "musllinux", "macosx": "macos"}


def _platform(tag: str) -> str:
    """A wheel platform tag as ``os arch``: ``manylinux_2_28_aarch64`` -> ``linux aarch64``,
    ``macosx_11_0_arm64`` -> ``macos arm64``, ``win_amd64`` -> ``win amd64``."""
    match = _ARCH.match(tag)
    if match and match.group(1):
        return f"{_OS[match.group(1)]} {match.group(2)}"
    if match:
        return f"linux {match.group(4)}"
    if tag.startswith("win_"):
        return "win " + tag[4:]
    return tag


def wheel_coverage(p: LockedPackage) -> frozenset[str]:
    """What an entry's files cover: platforms (``linux x86_64``, ``win amd64``, ``any``...),
    Python tags (``cp312``, ``cp39-abi3``, ``py3``) and ``sdist``, from the wheel file names
    (PEP 427 / PEP 425, read by ``packaging.utils.parse_wheel_filename``)."""
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename  # lazy: packaging.tags

    out: set[str] = set()
    for f in p.artifacts:
        if not f.filename.endswith(".whl"):
            out.add("sdist")
            continue
        try:
            tags = parse_wheel_filename(f.filename)[3]
        except InvalidWheelFilename:
            continue
        for t in tags:
            out.add(_platform(t.platform))
            out.add(f"{t.interpreter}-abi3" if t.abi == "abi3" else t.interpreter)
    return frozenset(out)


def coverage_key(item: str) -> tuple[int, str]:
    """Sort key of coverage items: platforms, then Python tags, then ``sdist``."""
    python = bool(re.match(r"^(cp|py|pp|ip|jy|graalpy)\d", item))
    return (2 if item == "sdist" else 1 if python else 0), item


def coverage_change(old: LockedPackage, new: LockedPackage) -> tuple[str, ...]:
    """Coverage gained (``+``) then lost (``-``): platforms, then Python tags, then sdist."""
    if old.artifacts == new.artifacts:
        return ()
    if {f.filename for f in old.artifacts} == {f.filename for f in new.artifacts}:
        return ()  # coverage is read from the file names alone: same names (e.g. moved files), same coverage
    a, b = wheel_coverage(old), wheel_coverage(new)
    return tuple(
        [f"+{x}" for x in sorted(b - a, key=coverage_key)] + [f"-{x}" for x in sorted(a - b, key=coverage_key)]
    )
