"""The replacements: a whole definition or an anchored text replaced (written by ``envforge
patches commit``), and the escape hatch ``codemod`` (a ``libcst.codemod.Codemod`` class named by
import path).

Kinds: ``codemod``, ``replace-definition``, ``replace-text``. libcst is imported inside the
functions so loading patchsets (``patches list``) stays fast.
"""

from __future__ import annotations

import hashlib
import importlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from envforge.core.schema import MapOf, Str
from envforge.patching.operations.base import OpContext, Operation, Outcome, stmt_check

if TYPE_CHECKING:
    import libcst as cst

__all__ = ["Codemod", "ReplaceDefinition", "ReplaceText", "definition_code", "definition_digest", "definitions"]


@dataclass(frozen=True, slots=True)
class Codemod(Operation):
    """Escape hatch: run ``codemod = "module:Class"``, a ``libcst.codemod.Codemod`` subclass
    constructed as ``Class(CodemodContext(), **args)``; the module is imported with the
    patchset's directory first on ``sys.path``.

    Unchanged output or ``SkipFile`` holds; any exception from the codemod drifts (with its
    message); changed output is the edit.
    """

    kind: ClassVar[str] = "codemod"
    keys: ClassVar[Mapping[str, Any]] = {"codemod": Str(), "args": MapOf(lambda v, p: [])}
    required: ClassVar[frozenset[str]] = frozenset({"codemod"})

    file: str
    codemod: str
    args: Mapping[str, Any] | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.codemod}"

    def anchor_text(self) -> str:
        return f"what {self.codemod} looks for"

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it
        from libcst.codemod import (  # lazy: as libcst
            CodemodContext,
            TransformFailure,
            TransformSuccess,
            transform_module,
        )

        try:
            cls = _import_class(self.codemod, ctx.patchset_dir)
            instance = cls(CodemodContext(), **dict(self.args or {}))
        except Exception as exc:  # noqa: BLE001 - reported as a drift, never raised
            return Outcome("drifted", f"cannot load codemod {self.codemod}: {exc}")
        result = transform_module(instance, module.code)
        if isinstance(result, TransformFailure):
            return Outcome("drifted", f"codemod {self.codemod} failed: {result.error}")
        if not isinstance(result, TransformSuccess) or result.code == module.code:
            return Outcome("holds", f"codemod {self.codemod} left the file unchanged")
        return Outcome("changed", f"codemod {self.codemod} edited the file", cst.parse_module(result.code))


def _import_class(spec: str, directory: Path) -> Any:
    mod_name, _, cls_name = spec.partition(":")
    sys.path.insert(0, str(directory))
    try:
        return getattr(importlib.import_module(mod_name), cls_name)
    finally:
        sys.path.remove(str(directory))


def definitions(module: Any) -> dict[str, list[Any]]:
    """Every function and class definition of ``module`` (a libcst Module) by qualified name
    (``f``, ``Class``, ``Class.method``, ``Outer.Inner.f``; functions nested in functions are part
    of their function), each with the list of nodes defining it (normally one)."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    out: dict[str, list[Any]] = {}

    def walk(body: Any, prefix: str) -> None:
        for stmt in body:
            if isinstance(stmt, (cst.FunctionDef, cst.ClassDef)):
                name = prefix + stmt.name.value
                out.setdefault(name, []).append(stmt)
                if isinstance(stmt, cst.ClassDef):
                    walk(stmt.body.body, name + ".")

    walk(module.body, "")
    return out


def definition_code(node: Any) -> str:
    """The code of a definition without the blank lines and comments above it, at column 0
    (libcst renders an indented block relative to its header): the same text wherever the
    definition moves in the file."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    return cst.Module([]).code_for_node(node.with_changes(leading_lines=()))


def definition_digest(node: Any) -> str:
    """``sha256:<hex>`` of :func:`definition_code`."""
    return "sha256:" + hashlib.sha256(definition_code(node).encode("utf-8")).hexdigest()


def _digest_check(value: Any) -> str | None:
    return None if re.fullmatch(r"sha256:[0-9a-f]{64}", value) else f"'{value}' is not 'sha256:<64 hex digits>'"


@dataclass(frozen=True, slots=True)
class ReplaceDefinition(Operation):
    """Replace the definition ``definition`` (``f``, ``Class``, ``Class.method``) with ``code``,
    when the installed definition is the one the patchset was written against: its digest
    (:func:`definition_digest`, blank lines and comments above it left out, so moving it in the
    file does not matter) must be ``original_digest``. Written by ``envforge patches commit``.
    ``comments`` (optional): the blank lines and comments above the new definition, exactly, when
    they change too (else the installed ones are kept). A name defined more than once in its body
    is told apart by its position among its namesakes (``run[1]``,
    :func:`envforge.patching.operations.placements.item_names`).

    Holds when the definition already is ``code``. Drifts when the definition is not found
    exactly once, or is neither the original nor ``code`` (changed upstream: read it again).
    """

    kind: ClassVar[str] = "replace-definition"
    keys: ClassVar[Mapping[str, Any]] = {
        "definition": Str(),
        "original-digest": Str(_digest_check),
        "code": Str(stmt_check),
        "comments": Str(),
    }
    required: ClassVar[frozenset[str]] = frozenset({"definition", "original-digest", "code"})

    file: str
    definition: str
    original_digest: str
    code: str
    comments: str | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.definition}"

    def anchor_text(self) -> str:
        return f"definition {self.definition} with digest {self.original_digest}"

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        from envforge.patching.operations.placements import (  # lazy: the two modules import each other
            find_definition,
            full_code,
            parse_statement,
            replace_statement,
        )

        found = find_definition(module, self.definition)
        if len(found) != 1:
            return Outcome("drifted", f"definition {self.definition} found {len(found)} times, expected 1")
        node = found[0]
        parsed = parse_statement((self.comments or "") + self.code, in_class="." in self.definition)
        if parsed is None or type(parsed) is not type(node):
            return Outcome(
                "drifted", f"`code` is not one {type(node).__name__} statement", fix="write one definition in `code`"
            )
        new_node = parsed if self.comments is not None else parsed.with_changes(leading_lines=node.leading_lines)
        if definition_code(node) == definition_code(new_node) and (
            self.comments is None or full_code(node) == full_code(new_node)
        ):
            return Outcome("holds", f"{self.definition} is already the patched definition")
        digest = definition_digest(node)
        if digest != self.original_digest:
            return Outcome(
                "drifted",
                f"{self.definition} changed upstream: digest {digest}, the patch was "
                f"written against {self.original_digest}",
            )
        return Outcome("changed", f"replaced {self.definition}", replace_statement(module, node, new_node))


@dataclass(frozen=True, slots=True)
class ReplaceText(Operation):
    """Replace the text ``before`` (with the context lines it carries: it must occur exactly once)
    with ``after``: an edit outside any definition, written by ``envforge patches commit``.

    Holds when ``after`` occurs exactly once and ``before`` does not. Drifts otherwise.
    """

    kind: ClassVar[str] = "replace-text"
    keys: ClassVar[Mapping[str, Any]] = {"before": Str(), "after": Str()}
    required: ClassVar[frozenset[str]] = frozenset({"before", "after"})

    file: str
    before: str
    after: str

    def describe(self) -> str:
        first = next((line for line in self.before.splitlines() if line.strip()), "")
        return f"{self.kind} at `{first.strip()[:60]}`"

    def anchor_text(self) -> str:
        return f"the text {self.before!r}"

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

        code = module.code
        n_before, n_after = code.count(self.before), code.count(self.after)
        if n_before == 0 and n_after == 1:
            return Outcome("holds", "the text is already the patched text")
        if n_before != 1:
            return Outcome("drifted", f"the anchored text found {n_before} times, expected 1")
        return Outcome(
            "changed", "replaced the anchored text", cst.parse_module(code.replace(self.before, self.after, 1))
        )
