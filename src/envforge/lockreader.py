"""The one reader of lock files: PEP 751 ``pylock.toml`` through ``packaging.pylock``, and ``uv.lock``.

Every place envforge reads a lock (``lock --check``, build, verify, ``lock diff``, ``lock textconv``,
the env profile and patch defaults of an environment, bench fingerprints) goes through
:func:`read_lock_text` / :func:`read_lock_file`, so a lock is validated once, the same way, everywhere:

1. the text: no merge-conflict markers (names the line), valid TOML (names the line);
2. ``pylock.toml``: :meth:`packaging.pylock.Pylock.from_dict` validates the whole document (PEP 751:
   ``lock-version`` major 1, ``created-by``, names normalised, exactly one source per package, file
   names that parse and agree with the package name and version, non-empty hash tables of strings,
   markers, specifiers, extras...). A lock packaging rejects is an :class:`InvalidLock` (exit 2) with
   packaging's key path and reason; a lock it accepts is read as packaging reads it
   (:attr:`LockDocument.pylock`);
3. ``uv.lock`` (no spec validator exists): the shape uv documents
   (https://docs.astral.sh/uv/concepts/projects/layout/#the-lockfile), checked by
   :mod:`envforge.uvlock` with the key path;
4. both: two entries of one name that can be active together are an error naming both
   (:mod:`envforge.markerspace` decides overlap).

``packaging.pylock`` is imported lazily (about 16 ms) so commands that read no lock do not pay it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envforge.errors import InputError

if TYPE_CHECKING:
    from packaging.pylock import Pylock

__all__ = ["InvalidLock", "LockDocument", "packages_digest", "read_lock_file", "read_lock_text"]

_CONFLICT = re.compile(r"^(<{7}|>{7})( |$)|^={7}$")
_REGENERATE = {"pylock": "regenerate it with `envforge lock` (or the tool named in its created-by)",
               "uv.lock": "regenerate it with `uv lock`"}


class InvalidLock(InputError):
    """A lock file that is not a valid lock (exit 2). ``key`` is the key path (``packages[3].wheels[0]``)
    of the violation, or ``None`` when it concerns the whole file; ``reason`` says what is wrong there."""

    def __init__(self, message: str, *, reason: str, key: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.key = key
        self.reason = reason

    @classmethod
    def at(cls, label: str, what: str, reason: str, *, key: str | None, hint: str) -> InvalidLock:
        """``<label> is not a valid <what> at `<key>`: <reason>``."""
        where = f" at `{key}`" if key else ""
        return cls(f"{label} is not a valid {what}{where}: {reason}", reason=reason, key=key, hint=hint)


@dataclass(frozen=True, slots=True)
class LockDocument:
    """One lock file, validated.

    ``label`` names it in messages (a path or ``REV:PATH``); ``kind`` is ``"pylock"`` or ``"uv.lock"``;
    ``data`` is the TOML document as :mod:`tomllib` read it; ``pylock`` is packaging's validated
    :class:`packaging.pylock.Pylock` (``None`` for uv.lock); ``envforge`` is the ``[tool.envforge]``
    table (``{}`` when absent or for uv.lock); ``comments`` are the file's leading ``#`` lines.
    """

    label: str
    kind: str
    data: Mapping[str, Any]
    pylock: Pylock | None
    envforge: Mapping[str, Any]
    comments: tuple[str, ...]

    @property
    def packages(self) -> Sequence[Mapping[str, Any]]:
        """The raw package tables (``[[packages]]`` or uv's ``[[package]]``), in file order."""
        key = "packages" if self.kind == "pylock" else "package"
        value = self.data.get(key, [])
        return value if isinstance(value, list) else []


def read_lock_file(path: Path, *, label: str | None = None) -> LockDocument:
    """Read and validate the lock at ``path`` (see :func:`read_lock_text`).

    :raises InputError: missing (with the hint to run ``envforge lock``), unreadable, larger than
        :data:`envforge.textfile.LARGE_LIMIT`, not UTF-8 (:mod:`envforge.textfile`).
    :raises InvalidLock: not a valid lock (key path and reason).
    """
    from envforge.textfile import decode_utf8, read_bytes

    shown = label or str(path)
    data = read_bytes(path, what="lock", hint="create it with `envforge lock RECIPE`")
    text = decode_utf8(data, label=shown)
    return read_lock_text(text, label=shown)


def read_lock_text(text: str, *, label: str) -> LockDocument:
    """Validate ``text`` as a ``pylock.toml`` or a ``uv.lock`` and return it read.

    Which format: a document with ``lock-version``, ``created-by`` or a ``[[packages]]`` array is a
    pylock, one with ``version`` and ``[[package]]`` a uv.lock; anything else is refused, saying what it looks like.

    :param label: how messages name the file.
    :raises InvalidLock: conflict markers, invalid TOML, not a lock, rejected by ``packaging.pylock``
        (its key path and reason), a uv.lock of the wrong shape, or two entries of one name that can
        be active together.
    """
    _reject_conflicts(text, label)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidLock(f"{label} is not valid TOML: {exc}", reason=str(exc),
                          hint="fix the file or regenerate it with `envforge lock`") from None
    except RecursionError:
        raise InvalidLock(f"{label} is not a lock: arrays or tables nested too deeply",
                          reason="nested too deeply", hint="fix the file or regenerate it with `envforge lock`") from None
    comments = tuple(_leading_comments(text))
    if "lock-version" in doc or "created-by" in doc or isinstance(doc.get("packages"), list):
        return _pylock(doc, label, comments)
    if "version" in doc and "package" in doc:
        return _uv_lock(doc, label, comments)
    raise _not_a_lock(doc, label)


def _pylock(doc: dict[str, Any], label: str, comments: tuple[str, ...]) -> LockDocument:
    from packaging.pylock import Pylock, PylockUnsupportedVersionError, PylockValidationError

    try:
        lock = Pylock.from_dict(doc)
    except PylockUnsupportedVersionError as exc:
        raise InvalidLock.at(label, "PEP 751 lock", f"{exc.message} (envforge reads lock-version 1.x)",
                          key="lock-version", hint="use a tool that writes lock-version 1.x, e.g. "
                                                   "`envforge lock` or `uv export --format pylock.toml`") from None
    except PylockValidationError as exc:
        raise InvalidLock.at(label, "PEP 751 lock", exc.message, key=exc.context,
                          hint=_REGENERATE["pylock"]) from None
    entries = [(str(p.name), str(p.version) if p.version else None, [raw["marker"]] if p.marker else None)
               for p, raw in zip(lock.packages, doc["packages"], strict=True)]  # markers as written
    _refuse_overlap(entries, label, "PEP 751 lock", "packages", "pylock")
    tool = doc.get("tool", {})
    envforge = tool.get("envforge", {}) if isinstance(tool, Mapping) else {}
    if not isinstance(envforge, Mapping):
        raise InvalidLock.at(label, "envforge lock", "should be a table", key="tool.envforge",
                          hint=_REGENERATE["pylock"])
    return LockDocument(label, "pylock", doc, lock, envforge, comments)


def _uv_lock(doc: dict[str, Any], label: str, comments: tuple[str, ...]) -> LockDocument:
    from envforge.uvlock import UvLockShapeError, check_shape

    try:
        entries = check_shape(doc)
    except UvLockShapeError as exc:
        raise InvalidLock.at(label, "uv.lock", exc.reason, key=exc.key, hint=_REGENERATE["uv.lock"]) from None
    _refuse_overlap(entries, label, "uv.lock", "package", "uv.lock")
    return LockDocument(label, "uv.lock", doc, None, {}, comments)


def _refuse_overlap(entries: Sequence[tuple[str, str | None, Sequence[str] | None]], label: str, what: str,
                    key: str, kind: str) -> None:
    from envforge.markerspace import first_overlap

    found = first_overlap(entries)
    if found is None:
        return
    i, j = found.first, found.second
    where = (" (e.g. " + ", ".join(f"{k} = {v!r}" for k, v in sorted(found.witness.items())) + ")"
             if found.witness else "")
    raise InvalidLock.at(
        label, what, f"{key}[{i}] ({_entry(entries[i])}) and {key}[{j}] ({_entry(entries[j])}) can be active "
                     f"together{where}; several entries of one name must have markers that exclude each other",
        key=f"{key}[{j}]", hint="remove one of the two entries, or give them markers that cannot both be true; "
                                "then " + _REGENERATE[kind])


def _entry(entry: tuple[str, str | None, Sequence[str] | None]) -> str:
    name, version, markers = entry
    marker = "no marker" if markers is None else "marker " + " | ".join(markers)
    return f"{name} {version or '(no version)'}; {marker}"


def _reject_conflicts(text: str, label: str) -> None:
    for number, line in enumerate(text.splitlines(), start=1):
        if _CONFLICT.match(line):
            raise InvalidLock(
                f"{label}:{number}: merge-conflict marker '{line[:7]}': the lockfile was merged "
                "with unresolved conflicts", reason=f"merge-conflict marker on line {number}",
                hint="resolve the conflict in git (take one side, e.g. `git checkout --theirs -- "
                     "FILE`), then re-run `envforge lock` to regenerate the lock")


def _leading_comments(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        out.append(line)
    return out


def _not_a_lock(doc: Mapping[str, Any], label: str) -> InvalidLock:
    looks = ("an envforge recipe" if "recipe" in doc else "a pyproject.toml" if "project" in doc
             else None)
    what = f" (it looks like {looks})" if looks else ""
    return InvalidLock(
        f"{label} is TOML but not a lock{what}: it has neither `lock-version` and `[[packages]]` "
        "(PEP 751 pylock.toml) nor `version` and `[[package]]` (uv.lock)", reason="not a lock",
        hint="pass a lockfile: lockfiles/pylock.<recipe>-<variant>.toml (made by `envforge lock`) "
             "or a uv.lock")


def packages_digest(packages: Sequence[Mapping[str, Any]]) -> str:
    """``sha256:<hex>`` of the ``[[packages]]`` tables in a canonical form, independent of TOML layout.

    Canonical form: the array as :mod:`tomllib` reads it, serialised as JSON with keys sorted, no
    whitespace (``separators=(",", ":")``), non-ASCII kept as UTF-8, TOML date-times as ISO 8601
    text (``datetime.isoformat()``). ``envforge lock`` records it in ``[tool.envforge]
    packages-digest``; any added, removed, truncated or edited entry (a changed wheel hash) changes it.
    """
    import hashlib
    import json

    text = json.dumps(list(packages), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=_iso)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _iso(value: Any) -> str:
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    raise TypeError(f"{type(value).__name__} is not TOML data")
