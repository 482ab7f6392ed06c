"""Reading input files: bounded size, strict UTF-8, TOML and JSON that cannot crash the parser.

Every recipe, lock, patchset and report envforge reads comes through here, so a hostile or broken
file is one :class:`envforge.core.errors.InputError` (exit 2) naming the file and the reason, never a
traceback and never unbounded memory: ``envforge lock diff /dev/zero x`` is refused before a byte
is read (a device is not a file), and a pipe is read to ``limit + 1`` bytes at most. Limits (docs/cli.md, "Input limits"): :data:`SMALL_LIMIT` for hand-written files
(recipes, patchsets, configs), :data:`LARGE_LIMIT` for generated ones (locks, reports).

envforge's own state files (``<site-packages>/.envforge/patches.json``, ``generation.json``, the lock
copy, caches, ...) are read with :func:`read_state` instead: envforge wrote each of them as a regular
file, so anything else in its place (a FIFO, a device, a socket, a directory) is damage, named and
refused before it is opened, and a missing one stays :class:`FileNotFoundError` for the caller to
decide what absent means.

Decoding is strict UTF-8 (TOML 1.0 requires it); a UTF-8 byte-order mark is dropped, a UTF-16 or
UTF-32 one is named. Nesting deeper than ``tomllib``/``json`` can recurse (a few hundred levels of
TOML arrays on CPython 3.11) is an input error, not a ``RecursionError``; so is a number of more digits
than CPython converts to an ``int`` (:func:`long_number_error`), wherever a reader meets one.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from envforge.core.errors import InputError

__all__ = [
    "LARGE_LIMIT",
    "SMALL_LIMIT",
    "decode_utf8",
    "file_kind",
    "load_json",
    "load_toml",
    "long_number_error",
    "long_number_line",
    "parse_json",
    "parse_toml",
    "read_bytes",
    "read_state",
    "read_text",
]

SMALL_LIMIT = 1 << 20  # 1 MiB: recipes, patchsets, model configs
LARGE_LIMIT = 64 << 20  # 64 MiB: locks (a 170-package lock is ~200 KB), bench reports

_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def read_bytes(
    path: Path, *, what: str, limit: int = LARGE_LIMIT, hint: str | None = None, error: type[InputError] = InputError
) -> bytes:
    """The bytes of ``path``, at most ``limit`` of them.

    The file type is checked first (``stat``, symlinks followed): a character or block device or a
    socket is refused as not a regular file. A pipe (``<(git show ...)``, a FIFO) is read, ``limit +
    1`` bytes at most, so an endless one costs nothing.

    :param what: how messages name the file's role, e.g. ``"recipe"``, ``"lock"``.
    :param error: the :class:`InputError` subclass to raise (``RecipeError``, ``LockError``, ...).
    :raises InputError: missing, a directory, a device or socket, unreadable, or larger than
        ``limit`` bytes.
    """
    try:
        kind = _special_kind(os.stat(path).st_mode)
    except OSError:
        kind = None  # open() below names what is wrong
    if kind is not None:
        raise error(f"{what} {path} is not a regular file ({kind})", hint=f"pass the path of a {what} file")
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist", hint=hint) from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a directory, not a file", hint=hint) from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise error(
            f"{what} {path} is larger than {_size(limit)}: not a {what} envforge reads",
            hint=f"check the path; envforge reads {what} files up to {_size(limit)}",
        )
    return data


def _special_kind(mode: int) -> str | None:
    """What a non-file, non-pipe, non-directory ``st_mode`` is, or None for those envforge reads."""
    for test, name in (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return None


def read_state(
    path: Path,
    *,
    what: str,
    limit: int = LARGE_LIMIT,
    hint: str | Callable[[], str] | None = None,
    error: type[InputError] = InputError,
) -> bytes:
    """The bytes of ``path``, a state file envforge wrote itself and reads back, at most ``limit`` bytes.

    Unlike :func:`read_bytes` (whose paths come from the user and may be pipes), only a regular file
    is read: the type is checked with ``os.stat`` (symlinks followed: the target is judged) before
    anything is opened, since ``open()`` on a FIFO blocks until a writer comes; the file is then
    opened non-blocking and checked again (``fstat``), so one swapped in between is refused too.
    A file larger than ``limit`` is refused by its size before it is read, and the read itself
    stops at ``limit + 1`` bytes (a file that grew meanwhile).

    :param what: how messages name the file, e.g. ``"patch manifest"``.
    :param limit: the most bytes a file of this kind can have.
    :param hint: the next step for every refusal (usually how to rebuild the environment); a
        callable is called only when an error is raised (a hint that itself reads state).
    :param error: the :class:`InputError` subclass to raise.
    :raises FileNotFoundError: ``path`` does not exist (nor does a symlink's target): the caller
        says what an absent file means (no patches, not built by envforge, ...).
    :raises InputError: not a regular file (a FIFO, a character or block device, a socket, a
        directory: the message names which), unreadable (the OS's reason), or larger than ``limit`` bytes.
    """

    def refuse(message: str) -> InputError:
        return error(message, hint=hint() if callable(hint) else hint)

    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise refuse(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if (kind := _state_kind(st.st_mode)) is not None:
        raise refuse(f"{what} {path} is not a regular file ({kind})")
    if st.st_size > limit:
        raise refuse(f"{what} {path} is larger than {_size(limit)}: envforge never writes one that large")
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:  # removed since the stat: absent
        raise
    except OSError as exc:
        raise refuse(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    with open(fd, "rb", closefd=True) as fh:
        if (kind := _state_kind(os.fstat(fd).st_mode)) is not None:  # replaced since the stat
            raise refuse(f"{what} {path} is not a regular file ({kind})")
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise refuse(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise refuse(f"{what} {path} is larger than {_size(limit)}: envforge never writes one that large")
    return data


def _state_kind(mode: int) -> str | None:
    """What a non-regular ``st_mode`` is (``"a FIFO"``, ``"a directory"``, ...), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a directory"
    return _special_kind(mode) or f"file type {stat.S_IFMT(mode):#o}"


def file_kind(mode: int) -> str | None:
    """What a non-regular ``st_mode`` is (``"a FIFO"``, ``"a directory"``, a device, a socket), or
    None for a regular file: the check every reader makes before it opens a file that may block."""
    return _state_kind(mode)


def decode_utf8(data: bytes, *, label: str, error: type[InputError] = InputError) -> str:
    """``data`` as UTF-8 text (a UTF-8 byte-order mark dropped).

    :param label: the file as messages name it.
    :raises InputError: a UTF-16/UTF-32 byte-order mark, or a byte sequence that is not UTF-8
        (the message names the byte offset and line).
    """
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise error(
                f"{label} is {name} (it starts with a {name} byte-order mark), not UTF-8",
                hint="save it as UTF-8, e.g. `iconv -f UTF-16 -t UTF-8`",
            )
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise error(
            f"{label}:{line}: byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8",
            hint="save the file as UTF-8",
        ) from None


def read_text(
    path: Path, *, what: str, limit: int = LARGE_LIMIT, hint: str | None = None, error: type[InputError] = InputError
) -> str:
    """:func:`read_bytes` then :func:`decode_utf8`."""
    return decode_utf8(read_bytes(path, what=what, limit=limit, hint=hint, error=error), label=str(path), error=error)


def long_number_line(text: str | bytes) -> int | None:
    """The line (1-based) of the first run of more digits than CPython converts to an ``int``
    (``sys.get_int_max_str_digits()``, 4,300 by default), or ``None`` when there is none."""
    digits = sys.get_int_max_str_digits() + 1
    if isinstance(text, bytes):
        found_b = re.search(rb"\d{%d,}" % digits, text)
        return text.count(b"\n", 0, found_b.start()) + 1 if found_b else None
    found = re.search(r"\d{%d,}" % digits, text)
    return text.count("\n", 0, found.start()) + 1 if found else None


def long_number_error(
    label: str,
    text: str | bytes,
    exc: ValueError,
    *,
    hint: str | None = None,
    lines: bool = True,
    error: type[InputError] = InputError,
) -> InputError:
    """The error for a ``ValueError`` a parser raised on ``text`` that is not a syntax error: a number of
    more digits than CPython converts (``json``'s and ``tomllib``'s ``int()`` of it; CPython's limit since
    3.11, CVE-2020-10735). Names ``label:LINE`` and the limit; any other ``ValueError`` is named as such.

    :param label: the file, or ``file:line`` for one line of a JSON-lines file (then ``lines=False``:
        the line is not added again).
    """
    line = long_number_line(text)
    if line is None and "integer string conversion" not in str(exc):
        return error(f"{label}: not readable: {exc}", hint=hint)
    where = f":{line}" if line is not None and lines else ""
    return error(
        f"{label}{where}: a number of more than {sys.get_int_max_str_digits():,} digits",
        hint=hint or "no value envforge reads needs one: fix the file",
    )


def parse_toml(text: str, *, label: str, error: type[InputError] = InputError) -> dict[str, Any]:
    """``tomllib.loads(text)`` with every failure an :class:`InputError` naming ``label``.

    :raises InputError: TOML syntax (with line and column), nesting too deep for the parser, or a
        number too long to convert (:func:`long_number_error`: names the line).
    """
    import tomllib  # lazy: its patterns cost about 3 ms at import, and a warm lock diff parses with rtoml

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{label}: not valid TOML: {exc}") from None
    except RecursionError:
        raise error(f"{label}: not valid TOML for envforge: arrays or tables nested too deeply") from None
    except ValueError as exc:
        raise long_number_error(label, text, exc, error=error) from None


def parse_json(data: str | bytes, *, label: str, error: type[InputError] = InputError) -> Any:
    """``json.loads(data)`` with every failure an :class:`InputError` naming ``label``.

    :raises InputError: JSON syntax (with line and column), not UTF-8, nesting too deep, or a number
        too long to convert (:func:`long_number_error`: names the line).
    """
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise error(f"{label}: not valid JSON: {exc}") from None
    except UnicodeDecodeError:
        raise error(f"{label}: not valid JSON: not UTF-8") from None
    except RecursionError:
        raise error(f"{label}: not valid JSON for envforge: arrays or objects nested too deeply") from None
    except ValueError as exc:
        raise long_number_error(label, data, exc, error=error) from None


def load_toml(
    path: Path, *, what: str, limit: int = LARGE_LIMIT, hint: str | None = None, error: type[InputError] = InputError
) -> tuple[dict[str, Any], str]:
    """Read, decode and parse a TOML file; return ``(document, text)`` (the text for line numbers).

    :raises InputError: see :func:`read_bytes`, :func:`decode_utf8`, :func:`parse_toml`.
    """
    text = read_text(path, what=what, limit=limit, hint=hint, error=error)
    return parse_toml(text, label=str(path), error=error), text


def load_json(
    path: Path, *, what: str, limit: int = LARGE_LIMIT, hint: str | None = None, error: type[InputError] = InputError
) -> Any:
    """Read, decode and parse a JSON file.

    :raises InputError: see :func:`read_bytes`, :func:`decode_utf8`, :func:`parse_json`.
    """
    return parse_json(read_text(path, what=what, limit=limit, hint=hint, error=error), label=str(path), error=error)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"
