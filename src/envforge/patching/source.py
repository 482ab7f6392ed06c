"""A source file as the operations see it: a libcst module of the whole file, or of only the
top-level statements they need, and the bytes of the edited file.

libcst parses and generates code in Python and costs far more than the stdlib ``ast`` (C): on
sglang's 1,000-line ``communicator.py`` a full parse is about ten times the ``ast`` parse. So the
file is first read with ``ast``; each operation names the top-level statements it needs
(:meth:`Operation.wanted`, a superset of every candidate match, so "exactly once" is decided the
same way); only those line ranges are parsed with libcst, and the edited statements are spliced
back by line range. Every unchanged byte of the file is copied, never regenerated.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

__all__ = ["Source", "lines_of", "parse_source"]


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
        it was parsed whole)."""
        if edited is self.module:
            return self.before
        if self.ranges is None:
            return bytes(edited.bytes)
        replaced, inserted = _changes(self.module.body, edited.body)
        lines = lines_of(self.before.decode("utf-8"))
        out: list[str] = []
        cursor = 0
        for i, (start, end) in enumerate(self.ranges):
            out += lines[cursor:start - 1]
            if i == 0:
                out += [edited.code_for_node(s) for s in inserted.get(-1, [])]
            if i in replaced:
                new = replaced[i]
                out.append("" if new is None else edited.code_for_node(new))
            else:
                out += lines[start - 1:end]
            out += [edited.code_for_node(s) for s in inserted.get(i, [])]
            cursor = end
        out += lines[cursor:]
        return "".join(out).encode("utf-8")


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

    :raises libcst.ParserSyntaxError: libcst cannot parse it.
    """
    import libcst as cst  # lazy: ~0.5 s to import; only a plan that parses a file needs it

    if tree is not None and wanted:
        ranges = tuple((_first_line(tree.body[i]), tree.body[i].end_lineno or tree.body[i].lineno)
                       for i in sorted(wanted))
        if ranges and all(a[1] < b[0] for a, b in pairwise(ranges)):
            lines = lines_of(before.decode("utf-8"))
            text = "".join("".join(lines[s - 1:e]) for s, e in ranges)
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
        for stmt in new[ja + 1:jb]:
            match = next((i for i in free if _key(old[i]) == _key(stmt)), None)
            if match is None:
                inserted.setdefault(anchor, []).append(stmt)
            else:
                free.remove(match)
                replaced[match] = stmt
                anchor = match
        replaced.update({i: None for i in free})
    return replaced, inserted
