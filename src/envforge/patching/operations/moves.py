"""Definitions and statements upstream moved (and maybe changed), and statements whose comments
changed: ``move-definition`` and ``move-statement``. A move is one operation, not a removal and an
addition, so that on a release that already has the change it holds (``upstream-fixed``) instead of
taking the item out and putting it back. Anchors and names as in :mod:`.placements`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envforge.core.schema import Str
from envforge.patching.operations.base import OpContext, Outcome
from envforge.patching.operations.placements import (
    PLACE_KEYS,
    Placed,
    body_items,
    full_code,
    item_names,
    named,
    parse_statement,
    statement_code,
    statements_of,
    with_statements,
)

if TYPE_CHECKING:
    import libcst as cst

__all__ = ["MoveDefinition", "MoveStatement"]


@dataclass(frozen=True, slots=True)
class _Moved(Placed):
    """What ``move-definition`` and ``move-statement`` share: take the item out, put it (as ``code``,
    with the comments above it) at the anchor. Holds when it already sits right after (or before)
    its anchor with that code."""

    if TYPE_CHECKING:  # each move's own dataclass field; not one of this base (its field order stays)
        code: str

    def _find(self, statements: list[Any]) -> list[int]:
        raise NotImplementedError

    def _movable(self, node: Any) -> str | None:
        """``None`` when ``node`` may be moved; else why it drifts."""
        return None

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        node = parse_statement(self.code, in_class=bool(getattr(self, "parent", None)))
        if node is None:
            return Outcome("drifted", "`code` is not one statement", fix="write one statement in `code`")
        holder = body_items(module, getattr(self, "parent", None))
        if holder is None:
            return Outcome("drifted", f"class {getattr(self, 'parent', None)} found 0 or several times, expected 1")
        statements = list(statements_of(holder, module))
        hits = self._find(statements)
        if len(hits) != 1:
            return Outcome("drifted", f"{self.describe().split(' ', 1)[1]} found {len(hits)} times, expected 1")
        here = hits[0]
        if full_code(statements[here]) == full_code(node) and self._at_anchor(statements, here):
            return Outcome("holds", "it is already there")
        why = self._movable(statements[here])
        if why is not None:
            return Outcome("drifted", why)
        rest = statements[:here] + statements[here + 1 :]
        moved = self._place(with_statements(holder, module, rest), node, lambda _: None)
        return (
            moved if moved.status != "changed" else Outcome("changed", f"moved to {self.anchor_text()}", moved.module)
        )

    def _at_anchor(self, statements: list[Any], here: int) -> bool:
        anchor = self._anchor()
        if anchor is None:
            return here == 0
        key, value = anchor
        near = here - 1 if key.startswith("after") else here + 1
        if not 0 <= near < len(statements):
            return False
        if key.endswith("definition"):
            return near in named(statements, value)
        return statement_code(statements[near]) == value


@dataclass(frozen=True, slots=True)
class MoveDefinition(_Moved):
    """Move the definition ``definition`` (the one with ``original-digest``, or already ``code``) to
    the anchor, as ``code`` with its comments: a definition upstream moved (and maybe changed)."""

    kind: ClassVar[str] = "move-definition"
    keys: ClassVar[Mapping[str, Any]] = {"definition": Str(), "original-digest": Str(), **PLACE_KEYS}
    required: ClassVar[frozenset[str]] = frozenset({"definition", "original-digest", "code"})

    file: str
    definition: str
    original_digest: str
    code: str
    parent: str | None = None
    after_definition: str | None = None
    after_statement: str | None = None
    before_definition: str | None = None
    before_statement: str | None = None
    occurrence: str | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.definition}"

    def _find(self, statements: list[Any]) -> list[int]:
        return named(statements, self.definition.rsplit(".", 1)[-1])

    def _movable(self, node: Any) -> str | None:
        from envforge.patching.operations.replacements import (
            definition_digest,
        )  # lazy: the two modules import each other

        digest = definition_digest(node)
        wanted = parse_statement(self.code)
        if digest != self.original_digest and (wanted is None or statement_code(node) != statement_code(wanted)):
            return (
                f"{self.definition} changed upstream: digest {digest}, the patch was written against "
                f"{self.original_digest}"
            )
        return None


@dataclass(frozen=True, slots=True)
class MoveStatement(_Moved):
    """Move the statement whose code is ``code`` (comments above it left out; it must occur once in
    the body) to the anchor, with the comments ``code`` carries: a statement upstream moved, or
    whose comments changed."""

    kind: ClassVar[str] = "move-statement"
    keys: ClassVar[Mapping[str, Any]] = PLACE_KEYS
    required: ClassVar[frozenset[str]] = frozenset({"code"})

    file: str
    code: str
    parent: str | None = None
    after_definition: str | None = None
    after_statement: str | None = None
    before_definition: str | None = None
    before_statement: str | None = None
    occurrence: str | None = None

    def describe(self) -> str:
        first = next(
            (line for line in self.code.splitlines() if line.strip() and not line.lstrip().startswith("#")), ""
        )
        return f"{self.kind} `{first.strip()[:60]}`"

    def _find(self, statements: list[Any]) -> list[int]:
        node = parse_statement(self.code)
        want = statement_code(node) if node is not None else None
        names = item_names(statements)
        return [i for i, s in enumerate(statements) if names[i] is None and statement_code(s) == want]
