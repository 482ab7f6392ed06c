"""The one reader of lock files: PEP 751 ``pylock.toml`` through ``packaging.pylock``, and ``uv.lock``.

Every place envforge reads a lock (``lock --check``, build, verify, ``lock diff``, ``lock textconv``,
the env profile and patch defaults of an environment, bench fingerprints) goes through
:func:`read_lock_text` / :func:`read_lock_file`, so a lock is validated once, the same way, everywhere:

1. the text: no merge-conflict markers (names the line), valid TOML (names the line; parsed by
   :func:`parse_toml`: rtoml, with tomllib deciding what rtoml refuses);
2. ``pylock.toml``: :meth:`packaging.pylock.Pylock.from_dict` validates the whole document (PEP 751:
   ``lock-version`` major 1, ``created-by``, names normalised, exactly one source per package, file
   names that parse and agree with the package name and version, non-empty hash tables of strings,
   markers, specifiers, extras...). A lock packaging rejects is an :class:`InvalidLock` (exit 2) with
   packaging's key path and reason; a lock it accepts is read as packaging reads it
   (:attr:`LockDocument.pylock`);
3. ``uv.lock`` (no spec validator exists): the shape uv documents
   (https://docs.astral.sh/uv/concepts/projects/layout/#the-lockfile), checked by
   :mod:`envforge.lock.uvlock` with the key path;
4. two entries of one name that can be active together (:mod:`envforge.lock.markerspace`; uv.lock's
   ``conflicts`` by :mod:`envforge.lock.uvconflicts`, positive and negative conflict markers): never a
   reason to refuse. A lock the tool that wrote it accepts is read (packaging reads such a pylock, uv
   installs such a uv.lock); the pairs are :attr:`LockDocument.ambiguities`, findings ``lock diff`` and
   ``textconv`` show, and only installing refuses them (:func:`refuse_ambiguous`, where both are
   selected, as ``Pylock.select`` does).
Validation runs once per file content: after a text passed every check above, the fact and the
ambiguities found are kept under envforge's cache directory as ``valid-locks/<sha256 of reader
version, packaging version and the text>`` (a small JSON list); reading the same bytes again skips
``Pylock.from_dict`` (about half a ``tomllib`` parse), uv.lock's shape check and the overlap search,
and reads the tables the way packaging does (:class:`LockEntry`; tests compare both ways on every
case). Any change to the bytes, to packaging's version or to the reader's is a new key.
``ENVFORGE_NO_LOCK_CACHE=1`` turns it off. Whoever can write the cache directory can make an
invalid lock pass validation, as they can corrupt uv's cache beside it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from packaging.version import Version

from envforge.core.errors import InputError
from envforge.core.textfile import decode_utf8, long_number_line, read_bytes, read_state
from envforge.lock.ambiguity import Ambiguity, Selectable, ambiguity_of, plain_entries, pylock_ambiguities
from envforge.lock.markerspace import overlaps, selected_together
from envforge.lock.validcache import recalled, remember, validated_marker

if TYPE_CHECKING:
    from packaging.pylock import Pylock

fast_loads: Callable[[str], Any] | None
try:
    from rtoml import loads as fast_loads
except ImportError:  # pragma: no cover - a dependency; kept readable without it
    fast_loads = None

__all__ = [
    "Ambiguity",
    "InvalidLock",
    "LockDocument",
    "LockEntry",
    "LockedFile",
    "parse_toml",
    "read_lock_file",
    "read_lock_text",
    "refuse_ambiguous",
]

_CONFLICT = re.compile(r"^(<{7}|>{7})( |$)|^={7}$")
_REGENERATE = {
    "pylock": "regenerate it with `envforge lock` (or the tool named in its created-by)",
    "uv.lock": "regenerate it with `uv lock`",
}
#: ``hashes = {}``: what ``uv export --format pylock.toml`` writes for a file its index served without a
#: hash (download.pytorch.org, a ``--find-links`` folder); regenerating with the same tool writes it again.
_NO_HASH = "At least one hash must be provided"
_NO_HASH_HINT = (
    "the index served this file without a hash and the exporter wrote `hashes = {}`: re-export "
    "with a uv that hashes such files (`uv export --format pylock.toml`, astral-sh/uv#20146), "
    "or serve hashes from the index (`#sha256=` URL fragments, PEP 691)"
)


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
class LockedFile:
    """One file of a pylock package: ``filename`` as packaging reads it (``name``, else the path's
    last component with ``/`` or ``\\`` separators, else the url's, percent-decoded; an archive:
    the last component of its url or path), ``where`` its url or else path, ``hashes`` (algorithm
    -> hex), ``size`` in bytes, ``upload_time`` a ``datetime`` or ``None``."""

    filename: str
    where: str | None
    hashes: Mapping[str, str]
    size: int | None
    upload_time: Any


@dataclass(frozen=True, slots=True)
class LockEntry:
    """One ``[[packages]]`` entry of a valid pylock, as packaging reads it: normalised ``name``,
    ``version`` as ``str(packaging.version.Version)``, ``marker`` as written, ``index``, files,
    and the direct sources and dependencies as the validated tables."""

    name: str
    version: str | None
    marker: str | None
    index: str | None
    wheels: tuple[LockedFile, ...]
    sdist: LockedFile | None
    archive: LockedFile | None
    vcs: Mapping[str, Any] | None
    directory: Mapping[str, Any] | None
    dependencies: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class LockDocument:
    """One lock file, validated.

    ``label`` names it in messages (a path or ``REV:PATH``); ``kind`` is ``"pylock"`` or ``"uv.lock"``;
    ``data`` is the TOML document as :mod:`tomllib` read it; ``pylock`` is packaging's validated
    :class:`packaging.pylock.Pylock` (``None`` for uv.lock); ``envforge`` is the ``[tool.envforge]``
    table (``{}`` when absent or for uv.lock); ``comments`` are the file's leading ``#`` lines;
    ``entries`` the pylock's packages as packaging reads them (:class:`LockEntry`); ``ambiguities``
    the pairs of same-name entries that can be active together (:class:`Ambiguity`, one per name, in
    file order of the later entry; for a uv.lock, with its declared ``conflicts`` and conflict markers
    taken into account: :mod:`envforge.lock.uvconflicts`). packaging reads such a pylock and uv such a
    uv.lock; only selecting for an environment where both are active fails. ``pylock`` is ``None`` also when this exact text was
    validated before (see :func:`read_lock_text`).
    """

    label: str
    kind: str
    data: Mapping[str, Any]
    pylock: Pylock | None
    envforge: Mapping[str, Any]
    comments: tuple[str, ...]
    entries: tuple[LockEntry, ...] = ()
    ambiguities: tuple[Ambiguity, ...] = ()

    @property
    def packages(self) -> Sequence[Mapping[str, Any]]:
        """The raw package tables (``[[packages]]`` or uv's ``[[package]]``), in file order."""
        key = "packages" if self.kind == "pylock" else "package"
        value = self.data.get(key, [])
        return value if isinstance(value, list) else []


def read_lock_file(path: Path, *, label: str | None = None, state_hint: str | None = None) -> LockDocument:
    """Read and validate the lock at ``path`` (see :func:`read_lock_text`).

    :param state_hint: given when ``path`` is envforge's own copy (``<site-packages>/.envforge/pylock.toml``):
        it is then read as a state file (:func:`envforge.core.textfile.read_state`: a regular file only,
        never a pipe), and this is the hint of its errors.
    :raises FileNotFoundError: with ``state_hint``, the copy does not exist.
    :raises InputError: missing (with the hint to run ``envforge lock``), unreadable, larger than
        :data:`envforge.core.textfile.LARGE_LIMIT`, not UTF-8 (:mod:`envforge.core.textfile`); with
        ``state_hint``, not a regular file (a FIFO, a device, a directory).
    :raises InvalidLock: not a valid lock (key path and reason).
    """
    shown = label or str(path)
    if state_hint is not None:
        data = read_state(path, what="lock", hint=state_hint)
    else:
        data = read_bytes(path, what="lock", hint="create it with `envforge lock RECIPE`")
    text = decode_utf8(data, label=shown)
    return read_lock_text(text, label=shown)


def read_lock_text(text: str, *, label: str) -> LockDocument:
    """Validate ``text`` as a ``pylock.toml`` or a ``uv.lock`` and return it read.

    Which format: a document with ``lock-version``, ``created-by`` or a ``[[packages]]`` array is a
    pylock, one with ``version`` and ``[[package]]`` a uv.lock; anything else is refused, saying what it looks like.

    :param label: how messages name the file.
    :raises InvalidLock: conflict markers, invalid TOML, not a lock, rejected by ``packaging.pylock``
        (its key path and reason), a uv.lock of the wrong shape. A lock with two entries of one name
        that can be active together is read: :attr:`LockDocument.ambiguities`.
    """
    _reject_conflicts(text, label)
    doc = parse_toml(text, label)
    comments = tuple(_leading_comments(text))
    if "lock-version" in doc or "created-by" in doc or isinstance(doc.get("packages"), list):
        return _pylock(doc, label, comments, text)
    if "version" in doc and "package" in doc:
        return _uv_lock(doc, label, comments, text)
    raise _not_a_lock(doc, label)


def parse_toml(text: str, label: str) -> dict[str, Any]:
    """The TOML document ``text``, with the types :mod:`tomllib` gives (dicts, lists, str, int,
    float, bool, ``datetime`` objects; an offset date-time's ``tzinfo`` a :class:`datetime.timezone`).

    Parsed by ``rtoml`` (the Rust ``toml`` crate, the parser uv itself reads locks with; about a
    sixth of ``tomllib``'s time on a 235-entry lock, which pays for packaging's validation:
    docs/lock-diff.md, Speed). It reads TOML 1.1, as uv and ``tomli`` >= 2.3 (tomllib's upstream)
    do; Python 3.11-3.14's ``tomllib`` reads 1.0 only, so an inline table over several lines or
    with a trailing comma, ``\\e``/``\\xHH`` escapes and times without seconds are read here and
    refused by tomllib. Where rtoml refuses the text (invalid TOML, or nesting deeper than its
    limit of about 80 levels), or is not installed, :mod:`tomllib` decides: its message names the
    line and column, and a text it accepts is read by it, so no text tomllib reads is refused.
    Tests compare the documents (types and time zones included) with tomllib's and tomli's on every
    document of the test suite, on generated documents and on damaged locks; where tomli refuses a
    text uv reads (a newline between a key and its ``=`` in an inline table), it is read as uv reads it.

    :raises InvalidLock: not valid TOML (tomllib's message), or nested too deeply for tomllib.
    """
    refused: str | None = None
    if fast_loads is not None:
        try:
            doc = fast_loads(text)
        except ValueError as exc:  # rtoml.TomlParsingError: let tomllib decide, and say why
            refused = str(exc)
        else:
            checked: dict[str, Any] = _with_timezones(doc, label)
            return checked
    import tomllib  # lazy: only where rtoml refused the text, or is not installed (its patterns: about 3 ms)

    try:
        parsed: dict[str, Any] = _with_timezones(tomllib.loads(text), label)  # the same depth check
        return parsed
    except tomllib.TOMLDecodeError as exc:
        message = _first_error(str(exc), refused)
        raise InvalidLock(
            f"{label} is not valid TOML: {message}",
            reason=message,
            hint="fix the file or regenerate it with `envforge lock`",
        ) from None
    except RecursionError:
        raise _too_deep(label) from None
    except ValueError as exc:  # int("9" * 5000): Python's limit on integer digits (sys.get_int_max_str_digits)
        line = long_number_line(text)
        where = f":{line}" if line else ""
        raise InvalidLock(
            f"{label}{where}: a number of more than {sys.get_int_max_str_digits():,} digits: no lock has one",
            reason=str(exc),
            hint="fix the file or regenerate it with `envforge lock`",
        ) from None


#: Most levels of tables and arrays a lock may nest (a real lock uses 4 or 5: packages, a wheel, its
#: hashes). Deeper documents are refused, so nothing that walks a lock can exceed Python's recursion limit.
MAX_DEPTH = 64
_LINE = re.compile(r"at line (\d+),? column (\d+)")


def _first_error(tomllib_message: str, rtoml_message: str | None) -> str:
    """The message that names the first real error: tomllib's (TOML 1.0), unless rtoml (TOML 1.1)
    refused the text further on: tomllib then stopped at TOML 1.1 syntax before it (an inline table
    over several lines), and rtoml's message names the error (``unclosed array ... at line 20``)."""
    ours, theirs = _LINE.search(tomllib_message), _LINE.search(rtoml_message or "")
    if rtoml_message and ours and theirs and int(theirs.group(1)) > int(ours.group(1)):
        return " ".join(rtoml_message.split())
    return tomllib_message


def _too_deep(label: str) -> InvalidLock:
    return InvalidLock(
        f"{label} is not a lock: arrays or tables nested too deeply (more than {MAX_DEPTH} levels)",
        reason="nested too deeply",
        hint="fix the file or regenerate it with `envforge lock`",
    )


def _with_timezones(value: Any, label: str, depth: int = 1) -> Any:
    """``value`` (a parsed document, changed in place) with every offset date-time's ``tzinfo`` a
    :class:`datetime.timezone`, as tomllib gives it (rtoml's own ``TzInfo`` cannot be pickled or
    copied to another process), checked to nest at most :data:`MAX_DEPTH` levels (it stops
    descending there, so a tomllib document nested deeper never exceeds Python's recursion limit). About 1 ms for a
    235-entry lock.

    :raises InvalidLock: nested deeper than :data:`MAX_DEPTH`.
    """
    if isinstance(value, (dict, list)):
        if depth > MAX_DEPTH:
            raise _too_deep(label)
        for key, item in value.items() if isinstance(value, dict) else enumerate(value):
            if type(item) in _WALKED:
                value[key] = _with_timezones(item, label, depth + 1)
        return value
    if value.tzinfo is None:
        return value
    return value.replace(tzinfo=timezone(value.utcoffset()))  # a zero offset gives timezone.utc, as tomllib


_WALKED = (dict, list, datetime)


def _pylock(doc: dict[str, Any], label: str, comments: tuple[str, ...], text: str) -> LockDocument:
    tool = doc.get("tool", {})
    envforge = tool.get("envforge", {}) if isinstance(tool, Mapping) else {}
    marker = validated_marker(text)
    known = recalled(marker)
    if known is not None and isinstance(envforge, Mapping):
        cached = tuple(_entry_of_table(p) for p in doc["packages"])
        return LockDocument(label, "pylock", doc, None, envforge, comments, cached, known)
    from packaging.pylock import (  # lazy: 16 ms, new texts only
        Pylock,
        PylockUnsupportedVersionError,
        PylockValidationError,
    )

    try:
        lock = Pylock.from_dict(doc)
    except PylockUnsupportedVersionError as exc:
        raise InvalidLock.at(
            label,
            "PEP 751 lock",
            f"{exc.message} (envforge reads lock-version 1.x)",
            key="lock-version",
            hint="use a tool that writes lock-version 1.x, e.g. `envforge lock` or `uv export --format pylock.toml`",
        ) from None
    except PylockValidationError as exc:
        raise InvalidLock.at(
            label,
            "PEP 751 lock",
            exc.message,
            key=exc.context,
            hint=_NO_HASH_HINT if _NO_HASH in exc.message else _REGENERATE["pylock"],
        ) from None
    entries = tuple(_entry_of_package(p, raw) for p, raw in zip(lock.packages, doc["packages"], strict=True))
    if not isinstance(envforge, Mapping):
        raise InvalidLock.at(
            label, "envforge lock", "should be a table", key="tool.envforge", hint=_REGENERATE["pylock"]
        )
    try:
        found = pylock_ambiguities(entries)
    except ValueError as exc:
        raise _long_version(label, text, exc, "pylock") from None
    remember(marker, found)
    return LockDocument(label, "pylock", doc, lock, envforge, comments, entries, found)


# A URL whose file name packaging's ``filename`` (``unquote(urlparse(url).path.rsplit("/", 1)[-1])``)
# reads as its text after the last "/": scheme, "//", a host, then a path; printable ASCII with no
# space and none of ``?#;`` (query, fragment, params: what urlparse splits off), ``%`` (what unquote
# decodes), ``[]\\`` (IPv6 hosts, backslashes). Any other URL goes through urlparse as packaging's does.
_PLAIN_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[!-~]*/[!-~]*")
_NOT_PLAIN = frozenset("?#;%[]\\")


def file_name(name: str | None, path: str | None, url: str | None) -> str:
    """The file name packaging 26.4 gives a validated wheel or sdist (``PackageWheel.filename``):
    ``name``, else the last component of ``path`` (``/`` or ``\\`` separated), else of the url's
    path, percent-decoded; ``""`` when none gives one (packaging raises there; a validated file
    always has one).

    ``Pylock.from_dict`` computes it once to check it against the package name but does not keep
    it, and packaging's property parses the URL with ``urlparse`` again (about a sixth of reading a
    lock). For the plain URL every index serves (``https://host/path/name.whl``) the name is the
    text after the last ``/``, which is what ``urlparse`` + ``unquote`` give there (see
    ``_PLAIN_URL``); every other URL goes through them. Tests compare it with packaging's property
    on generated URLs.
    """
    if name:
        return name
    last = path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1] if path else ""
    if last:  # packaging: a path ending in a separator gives no name, so the url's is taken
        return last
    if not url:
        return ""
    if url.isascii() and _NOT_PLAIN.isdisjoint(url) and _PLAIN_URL.fullmatch(url):
        last = url.rsplit("/", 1)[-1]
        if last:
            return last
    return unquote(urlparse(url).path.rsplit("/", 1)[-1])


def _file_of(f: Any, filename: str) -> LockedFile:
    return LockedFile(filename, f.url or f.path, f.hashes, f.size, f.upload_time)


def _entry_of_package(p: Any, raw: Mapping[str, Any]) -> LockEntry:
    """A :class:`LockEntry` from packaging's validated ``Package`` (``raw``: its table)."""
    archive = p.archive
    return LockEntry(
        str(p.name),
        str(p.version) if p.version is not None else None,
        raw.get("marker"),
        p.index,
        tuple(_file_of(w, file_name(w.name, w.path, w.url)) for w in p.wheels or ()),
        _file_of(p.sdist, file_name(p.sdist.name, p.sdist.path, p.sdist.url)) if p.sdist is not None else None,
        _file_of(archive, (archive.url or archive.path).rsplit("/", 1)[-1]) if archive is not None else None,
        raw.get("vcs"),
        raw.get("directory"),
        tuple(p.dependencies or ()),
    )


def _table_file(f: Mapping[str, Any], filename: str) -> LockedFile:
    return LockedFile(filename, f.get("url") or f.get("path"), f["hashes"], f.get("size"), f.get("upload-time"))


def _table_filename(f: Mapping[str, Any]) -> str:
    """``PackageWheel.filename`` / ``PackageSdist.filename`` of packaging 26.4 for a validated table."""
    return file_name(f.get("name"), f.get("path"), f.get("url"))


def _entry_of_table(p: Mapping[str, Any]) -> LockEntry:
    """A :class:`LockEntry` from a table packaging validated before (same text, same packaging)."""
    version = p.get("version")
    if version is not None:
        version = str(Version(version))
    archive = p.get("archive")
    return LockEntry(
        p["name"],
        version,
        p.get("marker"),
        p.get("index"),
        tuple(_table_file(w, _table_filename(w)) for w in p.get("wheels") or ()),
        _table_file(p["sdist"], _table_filename(p["sdist"])) if p.get("sdist") else None,
        _table_file(archive, str(archive.get("url") or archive.get("path")).rsplit("/", 1)[-1]) if archive else None,
        p.get("vcs"),
        p.get("directory"),
        tuple(p.get("dependencies") or ()),
    )


def _uv_lock(doc: dict[str, Any], label: str, comments: tuple[str, ...], text: str) -> LockDocument:
    marker = validated_marker(text)
    known = recalled(marker)
    if known is not None:
        return LockDocument(label, "uv.lock", doc, None, {}, comments, (), known)
    from envforge.lock.uvconflicts import activations, conflict_sets  # lazy: packaging.markers, new texts only
    from envforge.lock.uvlock import UvLockShapeError, check_shape  # lazy: packaging.markers, new texts only

    try:
        entries = check_shape(doc)
    except UvLockShapeError as exc:
        raise InvalidLock.at(label, "uv.lock", exc.reason, key=exc.key, hint=_REGENERATE["uv.lock"]) from None
    conflicts = conflict_sets(doc)
    try:
        found = tuple(
            ambiguity_of(o, entries, "package")
            for o in overlaps(entries, activations=activations(doc, conflicts), conflicts=conflicts)
        )
    except ValueError as exc:
        raise _long_version(label, text, exc, "uv.lock") from None
    remember(marker, found)
    return LockDocument(label, "uv.lock", doc, None, {}, comments, (), found)


def _long_version(label: str, text: str, exc: ValueError, kind: str) -> InvalidLock:
    """The error for a version in a marker that packaging cannot compare: ``int()`` of more digits
    than CPython converts (``sys.get_int_max_str_digits()``), raised by the overlap search. TOML read
    it as a string, so the TOML parse let it through; found by its line."""
    line = long_number_line(text)
    where = f":{line}" if line else ""
    reason = f"a version of more than {sys.get_int_max_str_digits():,} digits in a marker: no installer can compare it"
    if line is None:  # another ValueError of the search: say what it was
        reason = f"a marker cannot be evaluated: {exc}"
    return InvalidLock(f"{label}{where}: {reason}", reason=reason, hint=_REGENERATE[kind])


def refuse_ambiguous(
    label: str,
    entries: Sequence[Selectable],
    *,
    python: str | None = None,
    environment: Mapping[str, object] | None = None,
) -> None:
    """Refuse to install a pylock of which two entries of one name are both selected for the
    environment installed into (what ``packaging.pylock.Pylock.select`` raises on; an installer
    cannot choose). Only code that installs calls it; readers keep the lock
    (:attr:`LockDocument.ambiguities`).

    :param entries: the lock's ``[[packages]]`` in file order.
    :param python: the target's Python (``3.12`` or ``3.12.4``): sets ``python_version``,
        ``python_full_version`` and ``implementation_version`` (``X.Y.0`` where only ``X.Y`` is
        given, so a pair apart only by a patch release is judged at ``.0``).
    :param environment: marker variables of the target (``python_full_version``, ``sys_platform``...,
        ``extras`` and ``dependency_groups`` as sets); missing ones are this machine's
        (:func:`packaging.markers.default_environment`), no extras, no groups.
    :raises InvalidLock: (exit 2) ``<label>: cannot install idna: packages[0] (idna 3.7; no marker) and
        packages[1] (idna 3.10; no marker) are both selected for this environment; an installer
        cannot choose between them``, key ``packages[<second>]``.
    """
    target: dict[str, object] = {}
    if python is not None:
        full = ".".join((python.split(".") + ["0", "0"])[:3])
        target = {
            "python_version": ".".join(full.split(".")[:2]),
            "python_full_version": full,
            "implementation_version": full,
        }
    plain = plain_entries(entries)
    found = selected_together(plain, {**target, **(environment or {})})
    if not found:
        return
    first = ambiguity_of(found[0], plain, "packages")
    reason = first.describe("are both selected for this environment") + "; an installer cannot choose between them"
    raise InvalidLock(
        f"{label}: cannot install {first.name}: {reason}",
        reason=reason,
        key=f"packages[{first.second}]",
        hint="give the two entries markers that cannot both be true, or remove one; then " + _REGENERATE["pylock"],
    )


def _reject_conflicts(text: str, label: str) -> None:
    for number, line in enumerate(text.splitlines(), start=1):
        if _CONFLICT.match(line):
            raise InvalidLock(
                f"{label}:{number}: merge-conflict marker '{line[:7]}': the lockfile was merged "
                "with unresolved conflicts",
                reason=f"merge-conflict marker on line {number}",
                hint="resolve the conflict in git (take one side, e.g. `git checkout --theirs -- "
                "FILE`), then re-run `envforge lock` to regenerate the lock",
            )


def _leading_comments(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        out.append(line)
    return out


def _not_a_lock(doc: Mapping[str, Any], label: str) -> InvalidLock:
    looks = "an envforge recipe" if "recipe" in doc else "a pyproject.toml" if "project" in doc else None
    what = f" (it looks like {looks})" if looks else ""
    return InvalidLock(
        f"{label} is TOML but not a lock{what}: it has neither `lock-version` and `[[packages]]` "
        "(PEP 751 pylock.toml) nor `version` and `[[package]]` (uv.lock)",
        reason="not a lock",
        hint="pass a lockfile: lockfiles/pylock.<recipe>-<variant>.toml (made by `envforge lock`) or a uv.lock",
    )
