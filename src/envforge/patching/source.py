"""A source file as the operations see it: a libcst module of the whole file, or of only the
top-level statements they need, and the bytes of the edited file.

libcst parses and generates code in Python and costs far more than the stdlib ``ast`` (C): on
sglang's 1,000-line ``communicator.py`` a full parse is about ten times the ``ast`` parse. So the
file is first read with ``ast``; each operation names the top-level statements it needs
(:meth:`Operation.wanted`, a superset of every candidate match, so "exactly once" is decided the
same way); only those line ranges are parsed with libcst, and the edited statements are spliced
back by line range. Every unchanged byte of the file is copied, never regenerated.

A file is read in the encoding it declares (PEP 263: a ``# -*- coding: latin-1 -*-`` cookie on one of
its first two lines, or a UTF-8 BOM; UTF-8 otherwise), found as Python finds it
(:func:`tokenize.detect_encoding`), and the generated statements are written back in that encoding
(field case B30). A character the encoding cannot hold is refused by name (:class:`UnencodableEdit`).
"""

from __future__ import annotations

import ast
import codecs
import io
import re
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

__all__ = [
    "Source",
    "UnencodableEdit",
    "decode_source",
    "lines_of",
    "parse_source",
    "readable_source",
    "source_encoding",
]

_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


class UnencodableEdit(ValueError):
    """A generated statement holds a character the file's declared encoding cannot hold.

    :ivar encoding: the encoding as the file declares it (``latin-1``); :ivar char: the character.
    """

    def __init__(self, encoding: str, char: str) -> None:
        self.encoding, self.char = encoding, char
        super().__init__(
            f"the edit holds {char!r} (U+{ord(char):04X}), which the file's declared encoding "
            f"{encoding} (PEP 263 coding cookie) cannot hold"
        )


def source_encoding(data: bytes) -> str:
    """The encoding Python reads ``data`` (a source file) in: :func:`tokenize.detect_encoding`
    (``utf-8``, ``utf-8-sig`` for a BOM, or the cookie's encoding, normalized: ``iso-8859-1``).

    :raises SyntaxError: an unknown encoding in the cookie, or a cookie that contradicts a BOM.
    """
    return tokenize.detect_encoding(io.BytesIO(data).readline)[0]


def decode_source(data: bytes) -> str:
    """``data`` decoded as Python decodes it (:func:`source_encoding`; a BOM is dropped).

    :raises SyntaxError: see :func:`source_encoding`; :raises UnicodeDecodeError: bytes invalid there.
    """
    return data.decode(source_encoding(data))


def readable_source(data: bytes) -> str:
    """``data`` as :func:`decode_source` reads it, or, when its declared encoding is unknown or does
    not decode it (a damaged file), as UTF-8 with U+FFFD for the bytes that are not: for showing
    a file, never for editing it."""
    try:
        return decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data.decode("utf-8", errors="replace")


def _declared(data: bytes) -> str:
    """The encoding name as the file writes it (the cookie's text), for messages."""
    for line in data.split(b"\n", 2)[:2]:
        m = _COOKIE.match(line)
        if m:
            return m.group(1).decode("ascii")
    return source_encoding(data)


def _encode(text: str, before: bytes) -> bytes:
    """``text`` in the encoding of ``before`` (no BOM added: unchanged lines keep theirs).

    :raises UnencodableEdit: a character of ``text`` is not in that encoding.
    """
    encoding = source_encoding(before)
    encoding = "utf-8" if encoding == "utf-8-sig" else encoding
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise UnencodableEdit(_declared(before), exc.object[exc.start]) from None


def _byte_lines(data: bytes) -> list[bytes]:
    """``data`` split after each ``\\n`` (as :func:`lines_of`; an ASCII-compatible encoding never
    has the byte 0x0A inside a character)."""
    parts = data.split(b"\n")
    out = [p + b"\n" for p in parts[:-1]]
    return out + [parts[-1]] if parts[-1] else out


@dataclass(frozen=True, slots=True)
class Source:
    """``module`` parsed from ``before``; ``ranges`` are the 1-based inclusive line ranges of its
    top-level statements in the file, or None when ``module`` is the whole file."""

    before: bytes
    module: Any  # libcst.Module
    ranges: tuple[tuple[int, int], ...] | None

    def render(self, edited: Any) -> bytes:
        """The bytes of the file once ``self.module`` became ``edited``: unchanged lines copied,
        replaced and inserted top-level statements generated (the whole module generated when
        it was parsed whole), in the file's declared encoding.

        :raises UnencodableEdit: a generated statement holds a character that encoding cannot hold.
        """
        if edited is self.module:
            return self.before
        if self.ranges is None:
            data = _encode(edited.code, self.before)
            bom = codecs.BOM_UTF8 if self.before.startswith(codecs.BOM_UTF8) else b""
            return data if data.startswith(bom) else bom + data
        replaced, inserted = _changes(self.module.body, edited.body)
        lines = _byte_lines(self.before)

        def gen(node: Any) -> bytes:
            return _encode(edited.code_for_node(node), self.before)

        out: list[bytes] = []
        cursor = 0
        for i, (start, end) in enumerate(self.ranges):
            out += lines[cursor : start - 1]
            if i == 0:
                out += [gen(s) for s in inserted.get(-1, [])]
            if i in replaced:
                new = replaced[i]
                out.append(b"" if new is None else gen(new))
            else:
                out += lines[start - 1 : end]
            out += [gen(s) for s in inserted.get(i, [])]
            cursor = end
        out += lines[cursor:]
        return b"".join(out)


def lines_of(text: str) -> list[str]:
    """``text`` split after each ``\\n`` only, ends kept. ``str.splitlines`` also splits on form
    feeds and other separators that Python source may contain, which would shift line numbers
    away from ``ast``'s."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    return out + [parts[-1]] if parts[-1] else out


def _first_line(node: ast.stmt) -> int:
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def parse_source(before: bytes, tree: ast.Module | None = None, wanted: set[int] | None = None) -> Source:
    """Parse ``before``: only the top-level statements ``wanted`` (indices into ``tree.body``,
    ``tree`` being ``ast.parse(before)``) or, when ``wanted`` is None or empty or the statements
    share lines, the whole file.

    :raises libcst.ParserSyntaxError: libcst cannot parse it; :raises SyntaxError,
        UnicodeDecodeError: its declared encoding is unknown or does not decode it.
    """
    import libcst as cst  # lazy: ~0.5 s to import; only a plan that parses a file needs it

    if tree is not None and wanted:
        ranges = tuple(
            (_first_line(tree.body[i]), tree.body[i].end_lineno or tree.body[i].lineno) for i in sorted(wanted)
        )
        if ranges and all(a[1] < b[0] for a, b in pairwise(ranges)):
            lines = lines_of(decode_source(before))
            text = "".join("".join(lines[s - 1 : e]) for s, e in ranges)
            module = cst.parse_module(text)
            if len(module.body) == len(ranges):
                return Source(before, module, ranges)
    return Source(before, cst.parse_module(before), None)


def _key(node: Any) -> tuple[str, ...]:
    """What a top-level statement defines, to pair an edited statement with its original."""
    import libcst as cst  # lazy: ~0.5 s to import; only a plan that parses a file needs it

    if isinstance(node, (cst.FunctionDef, cst.ClassDef)):
        return (type(node).__name__, node.name.value)
    if isinstance(node, cst.SimpleStatementLine) and node.body:
        small = node.body[0]
        if isinstance(small, cst.Assign):
            return ("assign", *(cst.Module([]).code_for_node(t.target) for t in small.targets))
        if isinstance(small, cst.ImportFrom) and small.module is not None:
            return ("from", cst.Module([]).code_for_node(small.module))
        return ("simple", type(small).__name__)
    return (type(node).__name__,)


def _changes(old: Sequence[Any], new: Sequence[Any]) -> tuple[dict[int, Any], dict[int, list[Any]]]:
    """Compare two statement lists: ``(replaced, inserted)`` where ``replaced[i]`` is the new
    statement for old statement ``i`` (None: deleted) and ``inserted[i]`` the new statements
    placed after old statement ``i`` (``-1``: before the first). Statements kept by identity are
    unchanged; between two kept ones, a new statement replaces the old one it defines the same
    name as (:func:`_key`), and the others are insertions."""
    index = {id(s): i for i, s in enumerate(old)}
    kept = [(index[id(s)], j) for j, s in enumerate(new) if id(s) in index]
    bounds = [(-1, -1), *kept, (len(old), len(new))]
    replaced: dict[int, Any] = {}
    inserted: dict[int, list[Any]] = {}
    for (a, ja), (b, jb) in pairwise(bounds):
        free = list(range(a + 1, b))
        anchor = a
        for stmt in new[ja + 1 : jb]:
            match = next((i for i in free if _key(old[i]) == _key(stmt)), None)
            if match is None:
                inserted.setdefault(anchor, []).append(stmt)
            else:
                free.remove(match)
                replaced[match] = stmt
                anchor = match
        replaced.update({i: None for i in free})
    return replaced, inserted
