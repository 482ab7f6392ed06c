"""Definitions and statements added, removed or moved in a body, anchored to their neighbours:
what upstream changes most (a helper function added beside the fix, a method dropped, an import
or a constant added before a named definition), written by ``envforge patches commit`` and
``patches import``.

Kinds: ``add-definition``, ``remove-definition``, ``add-statement``, ``remove-statement``, and
``replace-module-comments`` (the comments above the first statement or below the last); the moves
``move-definition`` and ``move-statement`` are :mod:`.moves`. Each
names its place by qualified names and code, never by line numbers:

- the **body**: the module, or the class ``parent`` (``Class``, ``Outer.Inner``);
- the **anchor**: ``after-definition`` / ``before-definition`` (a definition of that body, by name),
  ``after-statement`` / ``before-statement`` (a statement of that body, by its code, which must occur
  there exactly once, or the ``occurrence``-th of its copies, from 0, where it occurs several
  times), or none of them (the start of the body);
- **names**: ``f``, ``Class.method``; a name defined more than once in one body (decorated overloads,
  a property and its setter, ``if TYPE_CHECKING`` twins at module level are statements) is told apart
  by its position among its namesakes, ``run[0]``, ``run[1]`` (:func:`item_names`).

States: an added definition or statement that the body already has (same code) holds
(``upstream-fixed`` / ``already-applied``); a definition of that name with other code drifts; an
anchor not found exactly once drifts, naming it. A removed definition that is gone holds; one with
another digest than the patch was written against drifts (changed upstream). libcst is imported
inside the functions so loading patchsets stays fast.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envforge.core.schema import Str
from envforge.patching.operations.base import OpContext, Operation, Outcome, stmt_check

if TYPE_CHECKING:
    import libcst as cst

__all__ = [
    "PLACE_KEYS",
    "AddDefinition",
    "AddStatement",
    "Placed",
    "RemoveDefinition",
    "RemoveStatement",
    "ReplaceModuleComments",
    "body_items",
    "find_definition",
    "full_code",
    "item_names",
    "module_comments",
    "named",
    "parse_statement",
    "replace_statement",
    "statement_code",
    "statements_of",
    "with_statements",
]

_ANCHORS = ("after-definition", "after-statement", "before-definition", "before-statement")


def item_names(body: Sequence[Any]) -> list[str | None]:
    """The name of each statement of ``body`` (a list of libcst statements): a function or class
    definition's own name (``f``), ``f[k]`` when ``f`` is defined more than once in the body (its
    position among its namesakes, from 0); ``None`` for any other statement."""
    import libcst as cst  # lazy: ~0.5 s to import

    names = [s.name.value if isinstance(s, (cst.FunctionDef, cst.ClassDef)) else None for s in body]
    counts: dict[str, int] = {}
    for n in names:
        if n is not None:
            counts[n] = counts.get(n, 0) + 1
    seen: dict[str, int] = {}
    out: list[str | None] = []
    for n in names:
        if n is None or counts[n] == 1:
            out.append(n)
        else:
            out.append(f"{n}[{seen.get(n, 0)}]")
            seen[n] = seen.get(n, 0) + 1
    return out


def statement_code(node: Any) -> str:
    """A statement's code without the blank lines and comments above it, at column 0. (Not cached
    across calls: a cache keyed by libcst nodes would keep whole trees alive to the end of the
    process; the operations render statements only, never definitions, when they look for one.)"""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets does not need it

    return cst.Module([]).code_for_node(node.with_changes(leading_lines=()))


def full_code(node: Any) -> str:
    """A statement's code with the blank lines and comments above it, at column 0."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets does not need it

    return cst.Module([]).code_for_node(node)


def body_items(module: Any, parent: str | None) -> Any:
    """The class ``parent`` (a qualified name of :func:`item_names`' form: ``A``, ``A.B``, ``A[1]``)
    of ``module``, or ``module`` itself for ``None``; ``None`` when it is not found exactly once."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets does not need it

    node: Any = module
    for part in parent.split(".") if parent else ():
        body = node.body if node is module else node.body.body
        names = item_names(body)
        found = [s for s, n in zip(body, names, strict=True) if n == part and isinstance(s, cst.ClassDef)]
        if len(found) != 1:
            return None
        node = found[0]
    return node


def find_definition(module: Any, qualified: str) -> list[Any]:
    """The definitions named ``qualified`` (``f``, ``Class.method``, ``run[1]``): for a plain name
    every definition of it in its body (several when it is defined more than once: a caller that
    needs one says so), for an indexed one the one at that position among its namesakes."""
    from envforge.patching.operations.replacements import definitions  # lazy: the two modules import each other

    if "[" not in qualified:
        return list(definitions(module).get(qualified, []))
    parent, _, own = qualified.rpartition(".")
    holder = body_items(module, parent or None)
    if holder is None:
        return []
    statements = statements_of(holder, module)
    return [statements[i] for i in named(statements, own)]


def named(statements: Sequence[Any], name: str) -> list[int]:
    """Indexes of the definitions named ``name`` (``f`` or ``f[k]``) among ``statements``; ``f[0]``
    is also the one ``f`` while its namesakes are not there yet (an anchor taken from the patched
    body, read while the patch is being applied)."""
    names = item_names(statements)
    hits = [i for i, n in enumerate(names) if n == name]
    if not hits and name.endswith("[0]"):
        hits = [i for i, n in enumerate(names) if n == name[:-3]]
    return hits


def statements_of(holder: Any, module: Any) -> Sequence[Any]:
    body: Sequence[Any] = holder.body if holder is module else holder.body.body
    return body


def with_statements(holder: Any, module: Any, statements: Sequence[Any]) -> Any:
    """``module`` with the body of ``holder`` (the module or one of its classes) set to ``statements``.

    The class is found by identity along the bodies from the module down and only its ancestors are
    rebuilt (a visit of the whole tree per operation made sglang's ``server_args.py``, 100 edits of
    one class, take minutes); a class not reached that way (not in a class body chain) is replaced by
    a visit."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets does not need it

    if holder is module:
        return module.with_changes(body=tuple(statements))
    new = holder.with_changes(body=holder.body.with_changes(body=tuple(statements)))
    rebuilt = _replace_in(module, holder, new, depth=0)
    if rebuilt is not None:
        return rebuilt

    class _Swap(cst.CSTTransformer):
        def on_leave(self, original: Any, updated: Any) -> Any:
            return new if original is holder else updated

    return module.visit(_Swap())


def replace_statement(module: Any, old: Any, new: Any) -> Any:
    """``module`` with the statement ``old`` (of the module or of a class body, at any depth of
    classes) replaced by ``new``, rebuilding only its ancestors; a full visit where it is not on
    that chain (:func:`envforge.patching.syntax.replace_node`)."""
    rebuilt = _replace_in(module, old, new, depth=0)
    if rebuilt is not None:
        return rebuilt
    from envforge.patching import syntax  # lazy: the fallback only

    return syntax.replace_node(module, old, new)


def _replace_in(node: Any, old: Any, new: Any, depth: int) -> Any:
    """``node`` (the module or a class) with ``old`` replaced by ``new`` somewhere in its class-body
    chain, rebuilding only the path; ``None`` when ``old`` is not reached."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets does not need it

    if depth > 50:
        return None
    body = node.body if isinstance(node, cst.Module) else getattr(node.body, "body", None)
    if not isinstance(body, (list, tuple)):
        return None
    for i, child in enumerate(body):
        if child is old:
            replaced = (*body[:i], new, *body[i + 1 :])
        elif isinstance(child, cst.ClassDef):
            inner = _replace_in(child, old, new, depth + 1)
            if inner is None:
                continue
            replaced = (*body[:i], inner, *body[i + 1 :])
        else:
            continue
        if isinstance(node, cst.Module):
            return node.with_changes(body=replaced)
        return node.with_changes(body=node.body.with_changes(body=replaced))
    return None


def parse_statement(code: str, *, in_class: bool = False) -> Any:
    """The one statement ``code`` holds, with the blank lines and comments above it as its
    ``leading_lines`` (libcst gives a module's first comments to its header: a ``pass`` in front
    keeps them on the statement). ``None`` when ``code`` is not exactly one statement.

    ``in_class``: the statement goes into a class body, where libcst writes a blank line without
    the block's indentation and a comment with it (``EmptyLine.indent``); at column 0 both read as
    indented, so they are set that way (a blank line with spaces, or a comment at column 0 inside a
    class, then differs: the round trip of ``patches import`` / ``commit`` refuses it)."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets does not need it

    body = cst.parse_module("pass\n" + code).body
    if len(body) != 2:
        return None
    node = body[1]
    if in_class:
        node = node.with_changes(
            leading_lines=[
                line.with_changes(indent=line.comment is not None or bool(line.whitespace.value))
                for line in node.leading_lines
            ]
        )
    return node


@dataclass(frozen=True, slots=True)
class Placed(Operation):
    """What ``add-definition``, ``add-statement`` and the moves (:mod:`.moves`) share: a body, an
    anchor, the code to put there."""

    def _anchor(self) -> tuple[str, str] | None:
        for key in _ANCHORS:
            value = getattr(self, key.replace("-", "_"), None)
            if value is not None:
                return key, value
        return None

    def anchor_text(self) -> str:
        where = f"class {self.parent}" if getattr(self, "parent", None) else "the module"  # type: ignore[attr-defined]
        anchor = self._anchor()
        return f"{anchor[0].replace('-', ' ')} {anchor[1].strip()!r} in {where}" if anchor else f"the start of {where}"

    def _place(self, module: cst.Module, node: Any, present: Callable[[list[Any]], Outcome | None]) -> Outcome:
        """Insert ``node`` at the anchor, unless ``present(statements)`` says the body has it
        (returns an :class:`Outcome` then)."""
        holder = body_items(module, getattr(self, "parent", None))
        if holder is None:
            return Outcome("drifted", f"class {getattr(self, 'parent', None)} found 0 or several times, expected 1")
        statements = list(statements_of(holder, module))
        there = present(statements)
        if there is not None:
            return there
        anchor = self._anchor()
        if anchor is None:
            index = 0
        else:
            key, value = anchor
            if key.endswith("definition"):
                hits = named(statements, value)
            else:
                names = item_names(statements)
                hits = [i for i, s in enumerate(statements) if names[i] is None and statement_code(s) == value]
                nth = getattr(self, "occurrence", None)
                if nth is not None:  # a statement that occurs more than once: the nth of them, from 0
                    hits = hits[int(nth) : int(nth) + 1]
            if len(hits) != 1:
                return Outcome("drifted", f"{self.anchor_text()} found {len(hits)} times, expected 1")
            index = hits[0] + 1 if key.startswith("after") else hits[0]
        statements.insert(index, node)
        return Outcome("changed", f"added at {self.anchor_text()}", with_statements(holder, module, statements))


PLACE_KEYS: Mapping[str, Any] = {
    "parent": Str(),
    **{k: Str() for k in _ANCHORS},
    "code": Str(stmt_check),
    "occurrence": Str(lambda v: None if v.isdigit() else f"'{v}' is not a count"),
}


@dataclass(frozen=True, slots=True)
class AddDefinition(Placed):
    """Add the function or class ``definition`` (its ``code``, with the comments above it) to the
    module or class ``parent``, at the anchor. Holds when the body has it with that code; drifts
    when the body has a definition of that name with other code, or the anchor is not found once."""

    kind: ClassVar[str] = "add-definition"
    keys: ClassVar[Mapping[str, Any]] = {"definition": Str(), **PLACE_KEYS}
    required: ClassVar[frozenset[str]] = frozenset({"definition", "code"})

    file: str
    definition: str
    code: str
    parent: str | None = None
    after_definition: str | None = None
    after_statement: str | None = None
    before_definition: str | None = None
    before_statement: str | None = None
    occurrence: str | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.definition}"

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        node = parse_statement(self.code, in_class=bool(self.parent))
        if node is None or not hasattr(node, "name"):
            return Outcome("drifted", "`code` is not one definition", fix="write one def or class in `code`")
        own = self.definition.rsplit(".", 1)[-1]
        want = statement_code(node)

        def present(statements: list[Any]) -> Outcome | None:
            same = [
                s
                for s, n in zip(statements, item_names(statements), strict=True)
                if n is not None and n.split("[")[0] == own.split("[")[0]
            ]
            if any(statement_code(s) == want for s in same):
                return Outcome("holds", f"{self.definition} is already there")
            named = [s for s, n in zip(statements, item_names(statements), strict=True) if n == own]
            if named:
                return Outcome("drifted", f"{self.definition} is already defined there with other code")
            return None

        return self._place(module, node, present)


@dataclass(frozen=True, slots=True)
class AddStatement(Placed):
    """Add a statement that is no definition (an import, a constant, ``__all__``, an ``if`` block)
    to the module or class ``parent``, at the anchor. Holds when the body has a statement with
    that code; drifts when the anchor is not found exactly once."""

    kind: ClassVar[str] = "add-statement"
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

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        node = parse_statement(self.code, in_class=bool(self.parent))
        if node is None:
            return Outcome("drifted", "`code` is not one statement", fix="write one statement in `code`")
        want = statement_code(node)

        def present(statements: list[Any]) -> Outcome | None:
            names = item_names(statements)
            if any(names[i] is None and statement_code(s) == want for i, s in enumerate(statements)):
                return Outcome("holds", "the statement is already there")
            return None

        return self._place(module, node, present)


@dataclass(frozen=True, slots=True)
class RemoveDefinition(Operation):
    """Remove the definition ``definition`` (``f``, ``Class.method``, ``run[1]``) when it is the one
    the patch was written against (``original-digest``, as ``replace-definition``'s). Holds when it
    is gone; drifts when it has another digest (changed upstream). One of several namesakes
    (``run[1]``) is the namesake with that digest: positions shift as namesakes go, digests do not;
    none left with it holds; ``keep`` (a count, for identical namesakes) is how many with that
    digest the patched body keeps."""

    kind: ClassVar[str] = "remove-definition"
    keys: ClassVar[Mapping[str, Any]] = {
        "definition": Str(),
        "original-digest": Str(),
        "keep": Str(lambda v: None if v.isdigit() else f"'{v}' is not a count"),
    }
    required: ClassVar[frozenset[str]] = frozenset({"definition", "original-digest"})

    file: str
    definition: str
    original_digest: str
    keep: str | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.definition}"

    def anchor_text(self) -> str:
        return f"definition {self.definition} with digest {self.original_digest}"

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        from envforge.patching.operations.replacements import (
            definition_digest,
        )  # lazy: the two modules import each other

        parent, _, own = self.definition.rpartition(".")
        holder = body_items(module, parent or None)
        if holder is None:
            return Outcome("holds", f"{parent} is gone, and {self.definition} with it")
        statements = list(statements_of(holder, module))
        if "[" in own:  # one of several namesakes: told by its digest (their positions shift as they go)
            base = own.split("[")[0]
            hits = [
                i
                for i, n in enumerate(item_names(statements))
                if n is not None
                and n.split("[")[0] == base
                and definition_digest(statements[i]) == self.original_digest
            ]
            hits = hits[int(self.keep or 0) :]  # identical namesakes: as many as the patched body has stay
        else:
            hits = [i for i, n in enumerate(item_names(statements)) if n == own]
        if not hits:
            return Outcome("holds", f"{self.definition} is already gone")
        digest = definition_digest(statements[hits[0]])
        if digest != self.original_digest:
            return Outcome(
                "drifted",
                f"{self.definition} changed upstream: digest {digest}, the patch was "
                f"written against {self.original_digest}",
            )
        del statements[hits[0]]
        return Outcome("changed", f"removed {self.definition}", with_statements(holder, module, statements))


@dataclass(frozen=True, slots=True)
class RemoveStatement(Operation):
    """Remove the statement whose code (comments above it left out) is ``code`` from the module or
    class ``parent``. Holds when the body has no such statement; drifts when it has several."""

    kind: ClassVar[str] = "remove-statement"
    keys: ClassVar[Mapping[str, Any]] = {"parent": Str(), "code": Str(stmt_check)}
    required: ClassVar[frozenset[str]] = frozenset({"code"})

    file: str
    code: str
    parent: str | None = None

    def describe(self) -> str:
        first = next((line for line in self.code.splitlines() if line.strip()), "")
        return f"{self.kind} `{first.strip()[:60]}`"

    def anchor_text(self) -> str:
        return f"the statement {self.code.strip()!r}"

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        holder = body_items(module, self.parent)
        if holder is None:
            return Outcome("holds", f"class {self.parent} is gone, and the statement with it")
        statements = list(statements_of(holder, module))
        names = item_names(statements)
        hits = [i for i, s in enumerate(statements) if names[i] is None and statement_code(s) == self.code]
        if not hits:
            return Outcome("holds", "the statement is already gone")
        if len(hits) > 1:
            return Outcome("drifted", f"the statement found {len(hits)} times, expected 1")
        del statements[hits[0]]
        return Outcome("changed", "removed the statement", with_statements(holder, module, statements))


@dataclass(frozen=True, slots=True)
class ReplaceModuleComments(Operation):
    """Replace the comments and blank lines above the module's first statement (``part =
    "header"``: a licence header) or below its last (``"footer"``): ``before`` as released,
    ``after`` as wanted. Holds when they already are ``after``; drifts when they are neither."""

    kind: ClassVar[str] = "replace-module-comments"
    keys: ClassVar[Mapping[str, Any]] = {
        "part": Str(lambda v: None if v in ("header", "footer") else f"'{v}' is not 'header' or 'footer'"),
        "before": Str(),
        "after": Str(),
    }
    required: ClassVar[frozenset[str]] = frozenset({"part", "before", "after"})

    file: str
    part: str
    before: str
    after: str

    def describe(self) -> str:
        return f"{self.kind} {self.part}"

    def anchor_text(self) -> str:
        return f"the module's {self.part} comments {self.before!r}"

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst  # lazy: ~0.5 s to import; loading patchsets does not need it

        now = module_comments(module, self.part)
        if now == self.after:
            return Outcome("holds", f"the {self.part} comments are already the patched ones")
        if now != self.before:
            return Outcome("drifted", f"the {self.part} comments changed upstream")
        lines = (
            cst.parse_module(self.after + "pass\n").header
            if self.part == "header"  # a header precedes a statement
            else cst.parse_module("pass\n" + self.after).footer
        )
        return Outcome("changed", f"replaced the {self.part} comments", module.with_changes(**{self.part: lines}))


def module_comments(module: Any, part: str) -> str:
    """The text of a module's ``header`` (comments and blank lines before its first statement) or
    ``footer`` (after its last)."""
    return "".join(module.code_for_node(line) for line in getattr(module, part))
