"""The anchored edits: each adds one thing (an operand to a guard, an entry to a dict literal,
delegating methods to a class, an element to a list literal) where it finds its anchor exactly once.

Kinds: ``add-guard-operand``, ``add-dict-entry``, ``add-delegating-methods``, ``add-list-element``.
libcst is imported inside the methods so loading patchsets (``patches list``) stays fast.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import envforge.patching.syntax as syntax
from envforge.core.schema import ListOf, OneOf, Str, Table
from envforge.patching.operations.base import OpContext, Operation, Outcome, expr_check, relpath_check, stmt_check

if TYPE_CHECKING:
    import libcst as cst

__all__ = ["AddDelegatingMethods", "AddDictEntry", "AddGuardOperand", "AddListElement"]


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
        "function": OneOf(
            ((str, lambda v, p: []), (list, ListOf(Str()))), "a function name or a list of alternative names"
        ),
        "anchor": Str(expr_check),
        "operand": Str(expr_check),
        "define": Str(stmt_check),
        "define-after": Str(),
        "import": Str(stmt_check),
    }
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
        import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

        funcs = [(name, f) for name in self.names for f in syntax.functions(module, name)]
        if len(funcs) != 1:
            what = (
                f"function {self.names[0]}"
                if len(self.names) == 1
                else f"functions {' | '.join(self.names)} (alternatives)"
            )
            return Outcome("drifted", f"{what} found {len(funcs)} times, expected 1")
        where, (top, func) = funcs[0]
        anchor = cst.parse_expression(self.anchor)
        if not isinstance(anchor, cst.BooleanOperation):
            return Outcome("drifted", f"anchor `{self.anchor}` is not an `and`/`or` chain")
        op_type = type(anchor.operator)
        want = [syntax.code(module, o) for o in syntax.operands(anchor, op_type)]
        extra = syntax.norm(self.operand)
        chains = [
            (c, [syntax.code(module, o) for o in syntax.operands(c, op_type)]) for c in syntax.chains(func, op_type)
        ]
        if any(extra in codes and set(want) <= set(codes) for _, codes in chains):
            return Outcome("holds", f"`{self.operand}` already in the guard")
        found = [c for c, codes in chains if codes == want]
        if len(found) != 1:
            return Outcome("drifted", f"anchor matched {len(found)} times in {where}(), expected 1")
        chain = found[0]
        new = cst.BooleanOperation(
            left=chain.with_changes(lpar=[], rpar=[]),
            operator=op_type(),
            right=cst.parse_expression(self.operand),
            lpar=chain.lpar,
            rpar=chain.rpar,
        )
        out = syntax.replace(module, top, chain, new)
        details = [f"added `{self.operand}` to the guard in {where}()"]
        return self._define_and_import(out, details)

    def _define_and_import(self, module: cst.Module, details: list[str]) -> Outcome:
        import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

        if self.define:
            name = ast.parse(self.define).body[0].targets[0].id  # type: ignore[attr-defined]
            if not any(syntax.assigned_name(s)[0] == name for s in module.body):
                spots = [i for i, s in enumerate(module.body) if syntax.assigned_name(s)[0] == self.define_after]
                if len(spots) != 1:
                    return Outcome(
                        "drifted",
                        f"module-level assignment of {self.define_after} found {len(spots)} times, expected 1",
                    )
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
        "target": Str(),
        "key": OneOf(((int, lambda v, p: []), (str, lambda v, p: [])), "an integer or a string"),
        "value": Str(expr_check),
    }
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
        import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

        *cls, name = self.target.split(".")
        scopes = [(None, module)] if not cls else [(c, c.body) for c in syntax.classes(module, cls[0])]
        spots = [
            (top or s, v)
            for top, scope in scopes
            for s in scope.body
            for n, v in [syntax.assigned_name(s)]
            if n == name
        ]
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
            return Outcome(
                "drifted",
                f"{self.target}: existing keys are {clash}, the patchset's key is {mine} ({_literal(self.key)})",
                fix=f"write `key` as a TOML {_TOML_TYPE.get(clash, clash)}{example}",
            )
        entry = cst.DictElement(cst.parse_expression(_literal(self.key)), cst.parse_expression(self.value.strip()))
        new_dict = d.with_changes(elements=syntax.append_element(list(d.elements), entry, d.lbrace.whitespace_after))
        return Outcome(
            "changed", f"added key {_literal(self.key)} to {self.target}", syntax.replace(module, top, d, new_dict)
        )


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
        "class": Str(),
        "attribute": Str(),
        "methods": ListOf(Str()),
        "signatures-from": Table({"file": Str(relpath_check), "class": Str()}, required=frozenset({"file", "class"})),
    }
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
        import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

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
                return Outcome(
                    "drifted",
                    f"delegate {delegate}.{name} {why}; envforge delegates plain, async, "
                    f"classmethod, staticmethod and property methods only",
                )
            kinds.append(f"{name} ({kind})" if kind != "method" else name)
            text = syntax.delegate_text(
                defs[-1] if not kind.startswith("property") else defs[0], self.attribute, kind, delegate
            )
            stmts = cst.parse_module(text, config=module.config_for_parsing).body
            added += [st.with_changes(leading_lines=[cst.EmptyLine(indent=False)]) for st in stmts]
        body = cls.body.with_changes(body=(*cls.body.body, *added))
        return Outcome(
            "changed",
            f"added {', '.join(kinds)} to {self.class_}",
            syntax.replace(module, cls, cls, cls.with_changes(body=body)),
        )


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
        "function": Str(),
        "call": Str(),
        "keyword": Str(),
        "element": Str(expr_check),
        "anchor": Str(expr_check),
    }
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
        import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

        funcs = syntax.functions(module, self.function)
        if len(funcs) != 1:
            return Outcome("drifted", f"function {self.function} found {len(funcs)} times, expected 1")
        top, func = funcs[0]
        lists = [
            arg.value
            for call in syntax.calls(func, self.call)
            for arg in call.args
            if arg.keyword is not None and arg.keyword.value == self.keyword and isinstance(arg.value, cst.List)
        ]
        if len(lists) != 1:
            return Outcome(
                "drifted",
                f"{self.call}({self.keyword}=[...]) found {len(lists)} times in {self.function}(), expected 1",
            )
        lst = lists[0]
        codes = [syntax.code(module, e.value) for e in lst.elements]
        if syntax.norm(self.element) in codes:
            return Outcome("holds", f"{self.keyword} already lists {self.element}")
        if self.anchor is not None and syntax.norm(self.anchor) != syntax.code(module, lst):
            return Outcome("drifted", f"{self.keyword} is {module.code_for_node(lst)}, expected {self.anchor}")
        (new_value,) = _literal_values(module, [cst.parse_expression(self.element.strip())])
        clash = _type_clash(_literal_values(module, [e.value for e in lst.elements]), new_value)
        if clash is not None:
            return Outcome(
                "drifted",
                f"{self.keyword}: existing elements are {clash}, the patchset's element "
                f"is {type(new_value).__name__} ({self.element.strip()})",
                fix=f"write `element` as a Python {clash} literal",
            )
        new = cst.Element(cst.parse_expression(self.element))
        elements = syntax.append_element(list(lst.elements), new, lst.lbracket.whitespace_after)
        return Outcome(
            "changed",
            f"added {self.element} to {self.keyword}",
            syntax.replace(module, top, lst, lst.with_changes(elements=elements)),
        )
