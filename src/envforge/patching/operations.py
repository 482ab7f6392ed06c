"""Generic libcst edits a patchset is made of, one class per kind.

Every operation works on one parsed file (a ``libcst.Module``) and ends in one :class:`Outcome`:

* ``changed``: the edit was made (``module`` is the new tree),
* ``holds``: its post-condition already holds (nothing to do),
* ``drifted``: the anchor it needs is missing or ambiguous (zero or several matches), or the
  patchset's value does not fit the code (a ``str`` key for an ``int``-keyed dict); ``fix`` then
  says what to change in the patchset.

An operation never raises on the code it reads (libcst codemod habit: success / skip / failure);
the engine maps ``holds`` to ``already-applied`` or ``upstream-fixed``. libcst is imported inside
the methods so loading patchsets (``patches list``) stays fast.

Kinds: ``add-guard-operand``, ``add-dict-entry``, ``add-delegating-methods``, ``add-list-element``
and the escape hatch ``codemod`` (a ``libcst.codemod.Codemod`` class named by import path).
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from envforge.patching import syntax
from envforge.core.schema import Enum, ListOf, MapOf, OneOf, Problem, Str, Table, line_of

if TYPE_CHECKING:
    import libcst as cst

__all__ = [
    "OPERATIONS",
    "AddDelegatingMethods",
    "AddDictEntry",
    "AddGuardOperand",
    "AddListElement",
    "Codemod",
    "OpContext",
    "Operation",
    "Outcome",
    "ReplaceDefinition",
    "ReplaceText",
    "definition_code",
    "definition_digest",
    "definitions",
]

Status = Literal["changed", "holds", "drifted"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an operation did to one module: ``status``, a one-line ``detail``, the new module;
    ``fix`` (drifted only, optional) is the change to make in the patchset, when the patchset and
    not the installed code is wrong."""

    status: Status
    detail: str
    module: Any = None  # libcst.Module when status == "changed"
    fix: str = ""


@dataclass(frozen=True, slots=True)
class OpContext:
    """What an operation may read besides its own file: other files of the same site-packages
    (``read_text(relative_path) -> str | None``) and the patchset's directory (for codemods)."""

    read_text: Callable[[str], str | None]
    patchset_dir: Path


def _expr_check(value: Any) -> str | None:
    try:
        ast.parse(value.strip(), mode="eval")
    except SyntaxError as exc:
        return f"not a Python expression: {exc.msg}"
    return None


def _stmt_check(value: Any) -> str | None:
    try:
        ast.parse(value, mode="exec")
    except SyntaxError as exc:
        return f"not a Python statement: {exc.msg}"
    return None


def _relpath_check(value: Any) -> str | None:
    """A path a patchset names must stay inside site-packages: relative, POSIX, no ``..``."""
    parts = PurePosixPath(value).parts
    if (not value or value.startswith("/") or "\\" in value or PureWindowsPath(value).drive
            or ".." in parts):
        return (f"'{value}' must be a relative POSIX path inside site-packages "
                f"(no '..' parts, not absolute), e.g. 'sglang/srt/server_args.py'")
    return None


def _field(key: str) -> str:
    """Dataclass field of a TOML key: ``define-after`` -> ``define_after``, ``import`` -> ``import_``."""
    name = key.replace("-", "_")
    return name + "_" if keyword.iskeyword(name) else name


class Operation:
    """Base of every operation: ``file`` (relative to site-packages) plus the kind's settings."""

    __slots__ = ()
    kind: ClassVar[str]
    keys: ClassVar[Mapping[str, Any]]
    required: ClassVar[frozenset[str]]
    file: str

    @classmethod
    def from_table(cls, table: Any, path: str, text: str) -> tuple[Operation | None, list[Problem]]:
        """Build the operation ``table["kind"]`` names; returns ``(op, [])`` or ``(None, problems)``.

        ``path`` prefixes the key paths (``operation[2]``); ``text`` is this operation's own
        ``[[operation]]`` section, so line numbers are relative to its header line (1).
        """
        if not isinstance(table, Mapping):
            return None, [Problem(path, "expected a table")]
        kind = table.get("kind")
        found = Enum(*OPERATIONS)(kind, "kind") if kind is not None else [Problem("kind", "missing required key")]
        if found or not isinstance(kind, str):
            return None, [Problem(f"{path}.kind", found[0].message, line_of(text, "operation.kind"))]
        sub = OPERATIONS[kind]
        spec = Table({"kind": Str(), "file": Str(_relpath_check), **sub.keys}, required=sub.required | {"file"})
        problems = [Problem(f"{path}.{p.path}", p.message, line_of(text, f"operation.{p.path}"))
                    for p in spec(table, "")]
        if problems:
            return None, problems
        args = {_field(k): v for k, v in table.items() if k != "kind"}
        return sub(**args), []

    def describe(self) -> str:
        """One line: the kind and what it adds where."""
        raise NotImplementedError

    def wanted(self, tree: ast.Module) -> set[int] | None:
        """Indices of the top-level statements of ``tree`` (the file read by ``ast``) that
        :meth:`run` may look at: every candidate, so a match count is the same as on the whole
        file. None means the whole file."""
        return None

    def anchor_text(self) -> str:
        """The code this operation must find exactly once (for drift messages)."""
        raise NotImplementedError

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        """Edit ``module``; never raises on the code it reads."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class AddGuardOperand(Operation):
    """Add ``operand`` to the boolean chain ``anchor`` inside ``function`` (``a or b`` -> ``a or b
    or operand``); when ``define`` is given and its name is not yet assigned at module level, add
    that statement after the assignment of ``define_after``; add ``import`` when missing.

    ``function`` may list alternatives (a function renamed upstream, e.g. sglang 0.5.21's
    ``apply_flashinfer_allreduce_fusion`` is ``flashinfer_ar_fusion_applies`` from 0.5.22): exactly
    one of them must be found, once.

    Holds when some chain in the function already has every anchor operand and ``operand``.
    Drifts when the function (one of the alternatives) is not found exactly once, the chain ``anchor`` (exact operands, in
    order) is not found exactly once, or ``define_after`` is not assigned exactly once.
    """

    kind: ClassVar[str] = "add-guard-operand"
    keys: ClassVar[Mapping[str, Any]] = {
        "function": OneOf(((str, lambda v, p: []), (list, ListOf(Str()))),
                          "a function name or a list of alternative names"), "anchor": Str(_expr_check), "operand": Str(_expr_check),
        "define": Str(_stmt_check), "define-after": Str(), "import": Str(_stmt_check)}
    required: ClassVar[frozenset[str]] = frozenset({"function", "anchor", "operand"})

    file: str
    function: str | list[str]
    anchor: str
    operand: str
    define: str | None = None
    define_after: str | None = None
    import_: str | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """``function`` as a tuple of alternatives."""
        return (self.function,) if isinstance(self.function, str) else tuple(self.function)

    def describe(self) -> str:
        return f"{self.kind} {' | '.join(self.names)}: `{self.anchor}` + `{self.operand}`"

    def anchor_text(self) -> str:
        return f"`{self.anchor}` in {' | '.join(n + '()' for n in self.names)}"

    def wanted(self, tree: ast.Module) -> set[int] | None:
        defined = ast.parse(self.define).body[0].targets[0].id if self.define else ""  # type: ignore[attr-defined]
        names = tuple(n for n in (self.define_after, defined) if n)
        return syntax.top_level(tree, functions=self.names, names=names, imports=bool(self.import_))

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        funcs = [(name, f) for name in self.names for f in syntax.functions(module, name)]
        if len(funcs) != 1:
            what = (f"function {self.names[0]}" if len(self.names) == 1 else
                    f"functions {' | '.join(self.names)} (alternatives)")
            return Outcome("drifted", f"{what} found {len(funcs)} times, expected 1")
        where, (top, func) = funcs[0]
        anchor = cst.parse_expression(self.anchor)
        if not isinstance(anchor, cst.BooleanOperation):
            return Outcome("drifted", f"anchor `{self.anchor}` is not an `and`/`or` chain")
        op_type = type(anchor.operator)
        want = [syntax.code(module, o) for o in syntax.operands(anchor, op_type)]
        extra = syntax.norm(self.operand)
        chains = [(c, [syntax.code(module, o) for o in syntax.operands(c, op_type)])
                  for c in syntax.chains(func, op_type)]
        if any(extra in codes and set(want) <= set(codes) for _, codes in chains):
            return Outcome("holds", f"`{self.operand}` already in the guard")
        found = [c for c, codes in chains if codes == want]
        if len(found) != 1:
            return Outcome("drifted", f"anchor matched {len(found)} times in {where}(), expected 1")
        chain = found[0]
        new = cst.BooleanOperation(left=chain.with_changes(lpar=[], rpar=[]), operator=op_type(),
                                   right=cst.parse_expression(self.operand),
                                   lpar=chain.lpar, rpar=chain.rpar)
        out = syntax.replace(module, top, chain, new)
        details = [f"added `{self.operand}` to the guard in {where}()"]
        return self._define_and_import(out, details)

    def _define_and_import(self, module: cst.Module, details: list[str]) -> Outcome:
        import libcst as cst

        if self.define:
            name = ast.parse(self.define).body[0].targets[0].id  # type: ignore[attr-defined]
            if not any(syntax.assigned_name(s)[0] == name for s in module.body):
                spots = [i for i, s in enumerate(module.body) if syntax.assigned_name(s)[0] == self.define_after]
                if len(spots) != 1:
                    return Outcome("drifted", f"module-level assignment of {self.define_after} found "
                                              f"{len(spots)} times, expected 1")
                stmt = cst.parse_statement(self.define, config=module.config_for_parsing)
                module = module.with_changes(body=syntax.insert_after(module.body, spots[0], stmt))
                details.append(f"defined {name}")
        if self.import_:
            imported, detail = syntax.missing_import(module, self.import_)
            if imported is not None:
                module = imported
                details.append(detail)
        return Outcome("changed", "; ".join(details), module)


def _literal(value: Any) -> str:
    return repr(value) if isinstance(value, int) else '"' + str(value).replace('"', '\\"') + '"'


_TOML_TYPE = {"int": "integer", "str": "string"}


def _literal_values(module: cst.Module, nodes: list[Any]) -> list[Any]:
    """``ast.literal_eval`` of each node's code, None where it is not a literal."""
    out = []
    for node in nodes:
        try:
            out.append(None if node is None else ast.literal_eval(module.code_for_node(node).strip()))
        except (ValueError, SyntaxError, TypeError):
            out.append(None)
    return out


def _type_clash(existing: list[Any], new: Any) -> str | None:
    """Name of the one type every literal in ``existing`` has when ``new`` (a literal) has another;
    None when they agree, when there are no literals or when they are of mixed types."""
    types = {type(v) for v in existing if v is not None}
    if new is None or len(types) != 1 or type(new) in types:
        return None
    return next(iter(types)).__name__


@dataclass(frozen=True, slots=True)
class AddDictEntry(Operation):
    """Add ``key: value`` to the dict literal assigned to ``target`` (``NAME`` at module level or
    ``Class.NAME`` in a class body), e.g. a table keyed by compute-capability major.

    Holds when the key is already there (whatever its value). Drifts when ``target`` is not
    assigned exactly once or its value is not a dict literal.
    """

    kind: ClassVar[str] = "add-dict-entry"
    keys: ClassVar[Mapping[str, Any]] = {
        "target": Str(), "key": OneOf(((int, lambda v, p: []), (str, lambda v, p: [])), "an integer or a string"),
        "value": Str(_expr_check)}
    required: ClassVar[frozenset[str]] = frozenset({"target", "key", "value"})

    file: str
    target: str
    key: int | str
    value: str

    def describe(self) -> str:
        return f"{self.kind} {self.target}[{_literal(self.key)}]"

    def anchor_text(self) -> str:
        return f"`{self.target} = {{...}}`"

    def wanted(self, tree: ast.Module) -> set[int] | None:
        return syntax.top_level(tree, names=(self.target,))

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        *cls, name = self.target.split(".")
        scopes = [(None, module)] if not cls else [(c, c.body) for c in syntax.classes(module, cls[0])]
        spots = [(top or s, v) for top, scope in scopes for s in scope.body
                 for n, v in [syntax.assigned_name(s)] if n == name]
        if len(spots) != 1:
            return Outcome("drifted", f"assignment of {self.target} found {len(spots)} times, expected 1")
        if not isinstance(spots[0][1], cst.Dict):
            return Outcome("drifted", f"{self.target} is not assigned a dict literal")
        top, d = spots[0]
        keys = _literal_values(module, [e.key if isinstance(e, cst.DictElement) else None for e in d.elements])
        if self.key in keys:
            return Outcome("holds", f"{self.target} already has key {_literal(self.key)}")
        clash = _type_clash(keys, self.key)
        if clash is not None:
            mine = type(self.key).__name__
            example = f" (key = {self.key})" if clash == "int" and str(self.key).lstrip("-").isdigit() else ""
            return Outcome("drifted", f"{self.target}: existing keys are {clash}, the patchset's key is "
                                      f"{mine} ({_literal(self.key)})",
                           fix=f"write `key` as a TOML {_TOML_TYPE.get(clash, clash)}{example}")
        entry = cst.DictElement(cst.parse_expression(_literal(self.key)), cst.parse_expression(self.value.strip()))
        new_dict = d.with_changes(elements=syntax.append_element(list(d.elements), entry, d.lbrace.whitespace_after))
        return Outcome("changed", f"added key {_literal(self.key)} to {self.target}",
                       syntax.replace(module, top, d, new_dict))


@dataclass(frozen=True, slots=True)
class AddDelegatingMethods(Operation):
    """Add to ``class_`` each of ``methods`` it lacks, as ``return self.<attribute>.<m>(...)`` with
    the signature (annotations dropped, defaults kept) of the same method on the delegate class
    ``signatures_from = {file, class}`` (bases in that file are followed), keeping the method's
    kind (field case B29): ``async def`` awaits (an async generator re-yields), ``@property``
    (with its setter and deleter) reads, assigns and deletes ``self.<attribute>.<m>``,
    ``@classmethod`` and ``@staticmethod`` call ``<class>.<m>(...)`` (no instance to delegate
    through; the class name must be defined in the patched module, which the engine's check of
    the patched module enforces).

    Holds when the class already defines every method. Drifts when the class is not defined
    exactly once, never assigns ``self.<attribute>``, the delegate lacks a method, or the
    delegate's method has another decorator (its kind is unknown: refused, never guessed).
    """

    kind: ClassVar[str] = "add-delegating-methods"
    keys: ClassVar[Mapping[str, Any]] = {
        "class": Str(), "attribute": Str(), "methods": ListOf(Str()),
        "signatures-from": Table({"file": Str(_relpath_check), "class": Str()}, required=frozenset({"file", "class"}))}
    required: ClassVar[frozenset[str]] = frozenset({"class", "attribute", "methods", "signatures-from"})

    file: str
    class_: str
    attribute: str
    methods: list[str]
    signatures_from: Mapping[str, str]

    def describe(self) -> str:
        return f"{self.kind} {self.class_}: {', '.join(self.methods)} -> self.{self.attribute}"

    def anchor_text(self) -> str:
        return f"class {self.class_} assigning self.{self.attribute}"

    def wanted(self, tree: ast.Module) -> set[int] | None:
        return syntax.top_level(tree, names=(f"{self.class_}.*",))

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        classes = syntax.classes(module, self.class_)
        if len(classes) != 1:
            return Outcome("drifted", f"class {self.class_} found {len(classes)} times, expected 1")
        cls = classes[0]
        if not syntax.assigns_self_attr(cls, self.attribute):
            return Outcome("drifted", f"class {self.class_} never assigns self.{self.attribute}")
        present = {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        missing = [m for m in self.methods if m not in present]
        if not missing:
            return Outcome("holds", f"{self.class_} already defines {', '.join(self.methods)}")
        source = ctx.read_text(self.signatures_from["file"])
        if source is None:
            return Outcome("drifted", f"delegate file {self.signatures_from['file']} is missing")
        tree = ast.parse(source)
        delegate = self.signatures_from["class"]
        added = []
        kinds = []
        for name in missing:
            defs = syntax.method_definitions(tree, delegate, name)
            if not defs:
                return Outcome("drifted", f"delegate {delegate} ({self.signatures_from['file']}) has no method {name}")
            kind, why = syntax.method_kind(defs)
            if kind is None:
                return Outcome("drifted", f"delegate {delegate}.{name} {why}; envforge delegates plain, async, "
                                          f"classmethod, staticmethod and property methods only")
            kinds.append(f"{name} ({kind})" if kind != "method" else name)
            text = syntax.delegate_text(defs[-1] if not kind.startswith("property") else defs[0],
                                        self.attribute, kind, delegate)
            stmts = cst.parse_module(text, config=module.config_for_parsing).body
            added += [st.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) for st in stmts]
        body = cls.body.with_changes(body=(*cls.body.body, *added))
        return Outcome("changed", f"added {', '.join(kinds)} to {self.class_}",
                       syntax.replace(module, cls, cls, cls.with_changes(body=body)))


@dataclass(frozen=True, slots=True)
class AddListElement(Operation):
    """Add ``element`` to the list literal passed as ``keyword=`` to a call of ``call`` (the last
    name of the callee) inside ``function``; ``anchor`` (optional) is the list it expects,
    e.g. ``supported_major_versions=[9, 10]`` -> ``[9, 10, 12]``.

    Holds when the element is already in the list. Drifts when the call is not found exactly
    once, or the list differs from ``anchor``.
    """

    kind: ClassVar[str] = "add-list-element"
    keys: ClassVar[Mapping[str, Any]] = {
        "function": Str(), "call": Str(), "keyword": Str(), "element": Str(_expr_check),
        "anchor": Str(_expr_check)}
    required: ClassVar[frozenset[str]] = frozenset({"function", "call", "keyword", "element"})

    file: str
    function: str
    call: str
    keyword: str
    element: str
    anchor: str | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.function}: {self.call}({self.keyword}=[..., {self.element}])"

    def anchor_text(self) -> str:
        return f"`{self.call}({self.keyword}={self.anchor or '[...]'})` in {self.function}()"

    def wanted(self, tree: ast.Module) -> set[int] | None:
        return syntax.top_level(tree, functions=(self.function,))

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        funcs = syntax.functions(module, self.function)
        if len(funcs) != 1:
            return Outcome("drifted", f"function {self.function} found {len(funcs)} times, expected 1")
        top, func = funcs[0]
        lists = [arg.value for call in syntax.calls(func, self.call) for arg in call.args
                 if arg.keyword is not None and arg.keyword.value == self.keyword
                 and isinstance(arg.value, cst.List)]
        if len(lists) != 1:
            return Outcome("drifted", f"{self.call}({self.keyword}=[...]) found {len(lists)} times "
                                      f"in {self.function}(), expected 1")
        lst = lists[0]
        codes = [syntax.code(module, e.value) for e in lst.elements]
        if syntax.norm(self.element) in codes:
            return Outcome("holds", f"{self.keyword} already lists {self.element}")
        if self.anchor is not None and syntax.norm(self.anchor) != syntax.code(module, lst):
            return Outcome("drifted", f"{self.keyword} is {module.code_for_node(lst)}, expected {self.anchor}")
        (new_value,) = _literal_values(module, [cst.parse_expression(self.element.strip())])
        clash = _type_clash(_literal_values(module, [e.value for e in lst.elements]), new_value)
        if clash is not None:
            return Outcome("drifted", f"{self.keyword}: existing elements are {clash}, the patchset's element "
                                      f"is {type(new_value).__name__} ({self.element.strip()})",
                           fix=f"write `element` as a Python {clash} literal")
        new = cst.Element(cst.parse_expression(self.element))
        elements = syntax.append_element(list(lst.elements), new, lst.lbracket.whitespace_after)
        return Outcome("changed", f"added {self.element} to {self.keyword}",
                       syntax.replace(module, top, lst, lst.with_changes(elements=elements)))


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
        import libcst as cst
        from libcst.codemod import (
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
        return Outcome("changed", f"codemod {self.codemod} edited the file",
                       cst.parse_module(result.code))


def _import_class(spec: str, directory: Path) -> Any:
    import importlib
    import sys

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
    import libcst as cst

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
    import libcst as cst

    return cst.Module([]).code_for_node(node.with_changes(leading_lines=()))


def definition_digest(node: Any) -> str:
    """``sha256:<hex>`` of :func:`definition_code`."""
    import hashlib

    return "sha256:" + hashlib.sha256(definition_code(node).encode("utf-8")).hexdigest()


def _digest_check(value: Any) -> str | None:
    import re

    return None if re.fullmatch(r"sha256:[0-9a-f]{64}", value) else f"'{value}' is not 'sha256:<64 hex digits>'"


@dataclass(frozen=True, slots=True)
class ReplaceDefinition(Operation):
    """Replace the definition ``definition`` (``f``, ``Class``, ``Class.method``) with ``code``,
    when the installed definition is the one the patchset was written against: its digest
    (:func:`definition_digest`, blank lines and comments above it left out, so moving it in the
    file does not matter) must be ``original_digest``. Written by ``envforge patches commit``.

    Holds when the definition already is ``code``. Drifts when the definition is not found
    exactly once, or is neither the original nor ``code`` (changed upstream: read it again).
    """

    kind: ClassVar[str] = "replace-definition"
    keys: ClassVar[Mapping[str, Any]] = {"definition": Str(), "original-digest": Str(_digest_check),
                                         "code": Str(_stmt_check)}
    required: ClassVar[frozenset[str]] = frozenset({"definition", "original-digest", "code"})

    file: str
    definition: str
    original_digest: str
    code: str

    def describe(self) -> str:
        return f"{self.kind} {self.definition}"

    def anchor_text(self) -> str:
        return f"definition {self.definition} with digest {self.original_digest}"

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        found = definitions(module).get(self.definition, [])
        if len(found) != 1:
            return Outcome("drifted", f"definition {self.definition} found {len(found)} times, expected 1")
        node = found[0]
        new = cst.parse_module(self.code).body
        if len(new) != 1 or type(new[0]) is not type(node):
            return Outcome("drifted", f"`code` is not one {type(node).__name__} statement", fix="write one definition in `code`")
        new_node = new[0].with_changes(leading_lines=node.leading_lines)
        if definition_code(node) == definition_code(new_node):
            return Outcome("holds", f"{self.definition} is already the patched definition")
        digest = definition_digest(node)
        if digest != self.original_digest:
            return Outcome("drifted", f"{self.definition} changed upstream: digest {digest}, the patch was "
                                      f"written against {self.original_digest}")
        return Outcome("changed", f"replaced {self.definition}", syntax.replace_node(module, node, new_node))


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
        import libcst as cst

        code = module.code
        n_before, n_after = code.count(self.before), code.count(self.after)
        if n_before == 0 and n_after == 1:
            return Outcome("holds", "the text is already the patched text")
        if n_before != 1:
            return Outcome("drifted", f"the anchored text found {n_before} times, expected 1")
        return Outcome("changed", "replaced the anchored text",
                       cst.parse_module(code.replace(self.before, self.after, 1)))


OPERATIONS: dict[str, type[Operation]] = {
    c.kind: c for c in (AddGuardOperand, AddDictEntry, AddDelegatingMethods, AddListElement, Codemod,
                        ReplaceDefinition, ReplaceText)
}
