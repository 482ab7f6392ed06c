"""A small validator for TOML inputs: key paths, line numbers, did-you-mean.

envforge's inputs (recipes, patchsets) are TOML tables with a fixed set of keys. This module checks
a parsed table against a spec built from :class:`Table`, :class:`MapOf`, :class:`ListOf` and the
scalar specs, and returns every problem at once as :class:`Problem` values carrying the dotted key
path and, where it can be found in the source text, the 1-based line number.

It validates shapes only; meaning (a valid specifier, a known index name) is checked by the module
that owns the input.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Bool",
    "Date",
    "Enum",
    "Int",
    "ListOf",
    "MapOf",
    "Number",
    "OneOf",
    "Problem",
    "Str",
    "Table",
    "format_problems",
    "line_of",
    "validate",
]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with an input: ``path`` is the dotted key path, ``line`` 1-based or None."""

    path: str
    message: str
    line: int | None = None

    def render(self, filename: str) -> str:
        """``file:line: path: message`` (the line part only when known)."""
        where = f"{filename}:{self.line}" if self.line else filename
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a float ({value})"
    if isinstance(value, str):
        return f'a string ("{value}")'
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__


Check = Callable[[Any, str], list[Problem]]


@dataclass(frozen=True)
class Scalar:
    """A scalar of one Python type; ``check`` may add a meaning check returning a message or None."""

    py_type: type | tuple[type, ...]
    noun: str
    check: Callable[[Any], str | None] | None = None

    def __call__(self, value: Any, path: str) -> list[Problem]:
        bad_bool = isinstance(value, bool) and self.py_type is not bool
        if bad_bool or not isinstance(value, self.py_type):
            return [Problem(path, f"expected {self.noun}, got {_kind(value)}")]
        if self.check is not None and (msg := self.check(value)) is not None:
            return [Problem(path, msg)]
        return []


def Str(check: Callable[[Any], str | None] | None = None) -> Scalar:  # noqa: N802
    """A string spec, optionally with a meaning check."""
    return Scalar(str, "a string", check)


def Int(minimum: int | None = None, maximum: int | None = None) -> Scalar:  # noqa: N802
    """An integer spec (booleans refused), optionally with a minimum and a maximum."""

    def check(v: Any) -> str | None:
        if minimum is not None and v < minimum:
            return f"must be >= {minimum}, got {v}"
        if maximum is not None and v > maximum:
            return f"must be <= {maximum}, got {v}"
        return None

    return Scalar(int, "an integer", check)


def Number() -> Scalar:  # noqa: N802
    """An int or float spec."""
    return Scalar((int, float), "a number")


def Bool() -> Scalar:  # noqa: N802
    """A boolean spec."""
    return Scalar(bool, "a boolean")


def Date() -> Scalar:  # noqa: N802
    """A TOML local date (``2027-03-31``, unquoted); a date-time or a string is refused."""

    def check(v: Any) -> str | None:
        return "expected a date like 2027-03-31 (no time part)" if isinstance(v, dt.datetime) else None

    return Scalar(dt.date, "a date like 2027-03-31 (a TOML date, unquoted)", check)


def Enum(*choices: str) -> Scalar:  # noqa: N802
    """A string spec limited to ``choices``."""

    def check(v: Any) -> str | None:
        return None if v in choices else f"must be one of {', '.join(repr(c) for c in choices)}, got {v!r}"

    return Scalar(str, "a string", check)


@dataclass(frozen=True)
class ListOf:
    """An array whose items all match ``item``."""

    item: Check

    def __call__(self, value: Any, path: str) -> list[Problem]:
        if not isinstance(value, list):
            return [Problem(path, f"expected an array, got {_kind(value)}")]
        out: list[Problem] = []
        for i, v in enumerate(value):
            out += self.item(v, f"{path}[{i}]")
        return out


@dataclass(frozen=True)
class MapOf:
    """A table with free keys (names), each value matching ``value``; ``key_check`` checks names."""

    value: Check
    key_check: Callable[[str], str | None] | None = None

    def __call__(self, value: Any, path: str) -> list[Problem]:
        if not isinstance(value, Mapping):
            return [Problem(path, f"expected a table, got {_kind(value)}")]
        out: list[Problem] = []
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if self.key_check is not None and (msg := self.key_check(k)) is not None:
                out.append(Problem(sub, msg))
            out += self.value(v, sub)
        return out


@dataclass(frozen=True)
class OneOf:
    """The first alternative whose top-level type matches decides (e.g. a string or a table)."""

    alternatives: Sequence[tuple[type, Check]]
    noun: str

    def __call__(self, value: Any, path: str) -> list[Problem]:
        for py_type, check in self.alternatives:
            if isinstance(value, py_type) and not isinstance(value, bool):
                return check(value, path)
        return [Problem(path, f"expected {self.noun}, got {_kind(value)}")]


@dataclass(frozen=True)
class Table:
    """A table with a fixed set of keys; unknown keys are problems with a did-you-mean."""

    keys: Mapping[str, Check]
    required: frozenset[str] = field(default_factory=frozenset)

    def __call__(self, value: Any, path: str) -> list[Problem]:
        if not isinstance(value, Mapping):
            return [Problem(path, f"expected a table, got {_kind(value)}")]
        out: list[Problem] = []
        for k, v in value.items():
            sub = f"{path}.{k}" if path else k
            if k not in self.keys:
                out.append(Problem(sub, _unknown(k, self.keys)))
            else:
                out += self.keys[k](v, sub)
        for k in sorted(self.required - set(value)):
            out.append(Problem(f"{path}.{k}" if path else k, "missing required key"))
        return out


def _unknown(key: str, known: Mapping[str, Any]) -> str:
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    if not close:
        close = [k for k in known if k.replace("-", "_") == key.replace("-", "_")]
    hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(sorted(known))}"
    return f"unknown key{hint}"


_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.\-]+)\s*=""")


def _split_dotted(s: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(r"""("[^"]*"|'[^']*'|[^.]+)""", s)]


def line_of(text: str, path: str) -> int | None:
    """Best-effort 1-based line where the key at dotted ``path`` is defined in TOML ``text``.

    Finds ``key = ...`` lines under their table header (dotted keys included) and table headers
    themselves; for keys inside inline tables it returns the line of the enclosing key. Array
    indices in ``path`` (``packages[0]``) are ignored.
    """
    want = _split_dotted(re.sub(r"\[\d+\]", "", path))
    table: list[str] = []
    best: tuple[int, int] | None = None  # (matched parts, line)
    for no, raw in enumerate(text.splitlines(), start=1):
        if m := _HEADER.match(raw):
            table = _split_dotted(m.group(1))
            full = table
        elif m := _KEY.match(raw):
            full = table + _split_dotted(m.group(1))
        else:
            continue
        n = len(full)
        if n <= len(want) and want[:n] == full and (best is None or n > best[0]):
            best = (n, no)
    return best[1] if best else None


def validate(data: Mapping[str, Any], spec: Check, text: str) -> list[Problem]:
    """Check ``data`` against ``spec``; each problem gets its line from the source ``text``."""
    problems = spec(data, "")
    return [Problem(p.path, p.message, line_of(text, p.path)) for p in problems]


def format_problems(what: str, filename: str, problems: Sequence[Problem]) -> str:
    """One message for all problems: a header line, then one ``file:line: path: msg`` per line."""
    head = f"{what} {filename} is invalid ({len(problems)} problem{'s' if len(problems) != 1 else ''}):"
    return "\n".join([head, *("  " + p.render(filename) for p in problems)])
