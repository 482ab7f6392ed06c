"""Generic libcst edits a patchset is made of, one class per kind.

Every operation works on one parsed file (a ``libcst.Module``) and ends in one :class:`Outcome`:

* ``changed``: the edit was made (``module`` is the new tree),
* ``holds``: its post-condition already holds (nothing to do),
* ``drifted``: the anchor it needs is missing or ambiguous (zero or several matches).

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
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from envforge.schema import Enum, ListOf, MapOf, OneOf, Problem, Str, Table, line_of

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
]

Status = Literal["changed", "holds", "drifted"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What an operation did to one module: ``status``, a one-line ``detail``, the new module."""

    status: Status
    detail: str
    module: Any = None  # libcst.Module when status == "changed"


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


def _field(key: str) -> str:
    """Dataclass field of a TOML key: ``define-after`` -> ``define_after``, ``import`` -> ``import_``."""
    name = key.replace("-", "_")
    return name + "_" if keyword.iskeyword(name) else name


def _norm(code: str) -> str:
    """Whitespace-insensitive form of a code fragment, for anchor comparison."""
    return ast.unparse(ast.parse(code.strip(), mode="eval"))


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
        spec = Table({"kind": Str(), "file": Str(), **sub.keys}, required=sub.required | {"file"})
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


# --- helpers over libcst trees ------------------------------------------------------------------

def _functions(module: cst.Module, dotted: str) -> list[tuple[Any, cst.FunctionDef]]:
    """``(top-level statement, definition)`` of module-level function ``name`` or method
    ``Class.name``, for every definition found."""
    import libcst as cst

    *outer, name = dotted.split(".")
    scopes: list[tuple[Any, Any]] = [(None, module)]
    if outer:
        scopes = [(c, c.body) for c in _classes(module, outer[0])]
    return [(top or s, s) for top, scope in scopes for s in scope.body
            if isinstance(s, cst.FunctionDef) and s.name.value == name]


def _classes(module: cst.Module, name: str) -> list[cst.ClassDef]:
    import libcst as cst

    return [s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == name]


def _top_level(tree: ast.Module, *, functions: tuple[str, ...] = (), names: tuple[str, ...] = (),
               imports: bool = False) -> set[int]:
    """Top-level statements of ``tree``: definitions of ``functions`` (``f`` or ``Class.f``: then
    the class), assignments to ``names`` (``X`` or ``Class.X``: then the class), and imports."""
    defs = {f.split(".")[0] for f in functions if "." not in f}
    classes = {f.split(".")[0] for f in (*functions, *names) if "." in f}
    plain = {n for n in names if "." not in n}
    out = set()
    for i, node in enumerate(tree.body):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in defs \
                or isinstance(node, ast.ClassDef) and node.name in classes \
                or imports and isinstance(node, (ast.Import, ast.ImportFrom)):
            out.add(i)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in plain for t in node.targets) \
                or isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id in plain:
            out.add(i)
    return out


def _assigned_name(stmt: Any) -> tuple[str | None, Any]:
    """``(name, value)`` when ``stmt`` is ``name = value`` / ``name: T = value``; else ``(None, None)``."""
    import libcst as cst

    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None, None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        return (target.value, small.value) if isinstance(target, cst.Name) else (None, None)
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
        return small.target.value, small.value
    return None, None


def _code(module: cst.Module, node: Any) -> str:
    return _norm(module.code_for_node(node))


def _insert_after(body: Any, index: int, new: Any) -> tuple[Any, ...]:
    return (*body[:index + 1], new, *body[index + 1:])


def _append_element(elements: Any, new: Any, lead: Any) -> list[Any]:
    """``elements`` plus ``new`` at the end, keeping the separator and trailing-comma layout.

    ``lead`` is the whitespace after the opening bracket (used as separator for one element).
    """
    import libcst as cst

    if not elements:
        return [new]
    last = elements[-1]
    if len(elements) >= 2:
        sep = elements[-2].comma
    elif isinstance(lead, cst.ParenthesizedWhitespace):
        sep = cst.Comma(whitespace_after=lead)
    else:
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    trailing = last.comma
    return [*elements[:-1], last.with_changes(comma=sep), new.with_changes(comma=trailing)]



def _chains(node: Any, op_type: type) -> list[cst.BooleanOperation]:
    """Maximal ``a or b or c`` chains (``op_type`` is ``libcst.Or`` or ``libcst.And``) under ``node``."""
    import libcst as cst

    inner: set[int] = set()
    roots: list[cst.BooleanOperation] = []

    class Visitor(cst.CSTVisitor):
        def visit_BooleanOperation(self, n: cst.BooleanOperation) -> None:  # noqa: N802
            if not isinstance(n.operator, op_type):
                return
            if id(n) not in inner:
                roots.append(n)
            for child in (n.left, n.right):
                if isinstance(child, cst.BooleanOperation) and isinstance(child.operator, op_type) \
                        and not child.lpar:
                    inner.add(id(child))

    node.visit(Visitor())
    return roots


def _operands(n: Any, op_type: type, root: bool = True) -> list[Any]:
    """The operands of the chain ``n`` (parentheses of the root itself are ignored)."""
    import libcst as cst

    if isinstance(n, cst.BooleanOperation) and isinstance(n.operator, op_type) and (root or not n.lpar):
        return [*_operands(n.left, op_type, False), *_operands(n.right, op_type, False)]
    return [n]


def _replace(module: cst.Module, within: Any, target: Any, new: Any) -> cst.Module:
    """``module`` with node ``target`` (by identity, inside the top-level statement ``within``)
    replaced by ``new``; only ``within`` is visited, which keeps large files fast."""
    import libcst as cst

    class Swap(cst.CSTTransformer):
        def on_leave(self, original: Any, updated: Any) -> Any:
            return new if original is target else updated

    body = tuple(s.visit(Swap()) if s is within else s for s in module.body)
    return module.with_changes(body=body)


def _missing_import(module: cst.Module, statement: str) -> tuple[cst.Module | None, str]:
    """Add ``from M import N`` (merged into the one existing ``from M import (...)`` when there is
    one); returns ``(new module or None when N is already imported, detail)``."""
    import libcst as cst

    tree = ast.parse(statement).body[0]
    assert isinstance(tree, ast.ImportFrom) and tree.module is not None
    mod, name = tree.module, tree.names[0].name
    froms = [(i, s.body[0]) for i, s in enumerate(module.body)
             if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], cst.ImportFrom)
             and s.body[0].module is not None
             and module.code_for_node(s.body[0].module) == mod]
    for _, imp in froms:
        if not isinstance(imp.names, cst.ImportStar) and any(
                a.evaluated_alias is None and a.evaluated_name == name for a in imp.names):
            return None, ""
    plain = [(i, imp) for i, imp in froms if not isinstance(imp.names, cst.ImportStar)]
    if len(plain) == 1 and not isinstance(plain[0][1].names, cst.ImportStar):
        i, imp = plain[0]
        lead = imp.lpar.whitespace_after if imp.lpar else cst.SimpleWhitespace("")
        names = _append_element(list(imp.names), cst.ImportAlias(name=cst.Name(name)), lead)  # type: ignore[arg-type]
        line = module.body[i].with_changes(body=[imp.with_changes(names=names)])
        return module.with_changes(body=(*module.body[:i], line, *module.body[i + 1:])), \
            f"imported {name} from {mod}"
    last = max((i for i, s in enumerate(module.body) if isinstance(s, cst.SimpleStatementLine)
                and isinstance(s.body[0], (cst.Import, cst.ImportFrom))), default=-1)
    new = cst.parse_statement(statement, config=module.config_for_parsing)
    return module.with_changes(body=_insert_after(module.body, last, new)), f"added `{statement}`"


@dataclass(frozen=True, slots=True)
class AddGuardOperand(Operation):
    """Add ``operand`` to the boolean chain ``anchor`` inside ``function`` (``a or b`` -> ``a or b
    or operand``); when ``define`` is given and its name is not yet assigned at module level, add
    that statement after the assignment of ``define_after``; add ``import`` when missing.

    Holds when some chain in the function already has every anchor operand and ``operand``.
    Drifts when the function is not found exactly once, the chain ``anchor`` (exact operands, in
    order) is not found exactly once, or ``define_after`` is not assigned exactly once.
    """

    kind: ClassVar[str] = "add-guard-operand"
    keys: ClassVar[Mapping[str, Any]] = {
        "function": Str(), "anchor": Str(_expr_check), "operand": Str(_expr_check),
        "define": Str(_stmt_check), "define-after": Str(), "import": Str(_stmt_check)}
    required: ClassVar[frozenset[str]] = frozenset({"function", "anchor", "operand"})

    file: str
    function: str
    anchor: str
    operand: str
    define: str | None = None
    define_after: str | None = None
    import_: str | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.function}: `{self.anchor}` + `{self.operand}`"

    def anchor_text(self) -> str:
        return f"`{self.anchor}` in {self.function}()"

    def wanted(self, tree: ast.Module) -> set[int] | None:
        defined = ast.parse(self.define).body[0].targets[0].id if self.define else ""  # type: ignore[attr-defined]
        names = tuple(n for n in (self.define_after, defined) if n)
        return _top_level(tree, functions=(self.function,), names=names, imports=bool(self.import_))

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        funcs = _functions(module, self.function)
        if len(funcs) != 1:
            return Outcome("drifted", f"function {self.function} found {len(funcs)} times, expected 1")
        top, func = funcs[0]
        anchor = cst.parse_expression(self.anchor)
        if not isinstance(anchor, cst.BooleanOperation):
            return Outcome("drifted", f"anchor `{self.anchor}` is not an `and`/`or` chain")
        op_type = type(anchor.operator)
        want = [_code(module, o) for o in _operands(anchor, op_type)]
        extra = _norm(self.operand)
        chains = [(c, [_code(module, o) for o in _operands(c, op_type)])
                  for c in _chains(func, op_type)]
        if any(extra in codes and set(want) <= set(codes) for _, codes in chains):
            return Outcome("holds", f"`{self.operand}` already in the guard")
        found = [c for c, codes in chains if codes == want]
        if len(found) != 1:
            return Outcome("drifted", f"anchor matched {len(found)} times in {self.function}(), expected 1")
        chain = found[0]
        new = cst.BooleanOperation(left=chain.with_changes(lpar=[], rpar=[]), operator=op_type(),
                                   right=cst.parse_expression(self.operand),
                                   lpar=chain.lpar, rpar=chain.rpar)
        out = _replace(module, top, chain, new)
        details = [f"added `{self.operand}` to the guard in {self.function}()"]
        return self._define_and_import(out, details)

    def _define_and_import(self, module: cst.Module, details: list[str]) -> Outcome:
        import libcst as cst

        if self.define:
            name = ast.parse(self.define).body[0].targets[0].id  # type: ignore[attr-defined]
            if not any(_assigned_name(s)[0] == name for s in module.body):
                spots = [i for i, s in enumerate(module.body) if _assigned_name(s)[0] == self.define_after]
                if len(spots) != 1:
                    return Outcome("drifted", f"module-level assignment of {self.define_after} found "
                                              f"{len(spots)} times, expected 1")
                stmt = cst.parse_statement(self.define, config=module.config_for_parsing)
                module = module.with_changes(body=_insert_after(module.body, spots[0], stmt))
                details.append(f"defined {name}")
        if self.import_:
            imported, detail = _missing_import(module, self.import_)
            if imported is not None:
                module = imported
                details.append(detail)
        return Outcome("changed", "; ".join(details), module)


def _literal(value: Any) -> str:
    return repr(value) if isinstance(value, int) else '"' + str(value).replace('"', '\\"') + '"'


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
        return _top_level(tree, names=(self.target,))

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        *cls, name = self.target.split(".")
        scopes = [(None, module)] if not cls else [(c, c.body) for c in _classes(module, cls[0])]
        spots = [(top or s, v) for top, scope in scopes for s in scope.body
                 for n, v in [_assigned_name(s)] if n == name]
        if len(spots) != 1:
            return Outcome("drifted", f"assignment of {self.target} found {len(spots)} times, expected 1")
        if not isinstance(spots[0][1], cst.Dict):
            return Outcome("drifted", f"{self.target} is not assigned a dict literal")
        top, d = spots[0]
        keys = []
        for e in d.elements:
            try:
                keys.append(ast.literal_eval(module.code_for_node(e.key)) if isinstance(e, cst.DictElement) else None)
            except ValueError:
                keys.append(None)
        if self.key in keys:
            return Outcome("holds", f"{self.target} already has key {_literal(self.key)}")
        entry = cst.DictElement(cst.parse_expression(_literal(self.key)), cst.parse_expression(self.value.strip()))
        new_dict = d.with_changes(elements=_append_element(list(d.elements), entry, d.lbrace.whitespace_after))
        return Outcome("changed", f"added key {_literal(self.key)} to {self.target}",
                       _replace(module, top, d, new_dict))


def _assigns_self_attr(cls: cst.ClassDef, attr: str) -> bool:
    """Whether some method of ``cls`` assigns ``self.<attr>`` (plain or annotated assignment)."""
    import libcst as cst

    def is_target(t: Any) -> bool:
        return (isinstance(t, cst.Attribute) and t.attr.value == attr
                and isinstance(t.value, cst.Name) and t.value.value == "self")

    found = False

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:  # noqa: N802
            nonlocal found
            found = found or any(is_target(t.target) for t in node.targets)

        def visit_AnnAssign(self, node: cst.AnnAssign) -> None:  # noqa: N802
            nonlocal found
            found = found or is_target(node.target)

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> bool:  # noqa: N802
            return not found

    cls.visit(Visitor())
    return found


def _find_method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | None:
    """``cls.name`` in ``tree``, following base classes defined in the same module."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    seen: set[str] = set()
    todo = [cls]
    while todo:
        c = classes.get(todo.pop(0))
        if c is None or c.name in seen:
            continue
        seen.add(c.name)
        for n in c.body:
            if isinstance(n, ast.FunctionDef) and n.name == name:
                return n
        todo += [b.id for b in c.bases if isinstance(b, ast.Name)]
    return None


def _delegate_text(fn: ast.FunctionDef, attr: str) -> str:
    """``def m(<params without annotations>): return self.<attr>.m(<the same arguments>)``."""
    a = fn.args
    params: list[str] = []
    call: list[str] = []
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (p, d) in enumerate(zip(positional, defaults)):
        params.append(p.arg + (f"={ast.unparse(d)}" if d is not None else ""))
        if i >= 1:
            call.append(p.arg)
        if a.posonlyargs and i == len(a.posonlyargs) - 1:
            params.append("/")
    if a.vararg:
        params.append(f"*{a.vararg.arg}")
        call.append(f"*{a.vararg.arg}")
    elif a.kwonlyargs:
        params.append("*")
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        params.append(p.arg + (f"={ast.unparse(d)}" if d is not None else ""))
        call.append(f"{p.arg}={p.arg}")
    if a.kwarg:
        params.append(f"**{a.kwarg.arg}")
        call.append(f"**{a.kwarg.arg}")
    return (f"def {fn.name}({', '.join(params)}):\n"
            f"    return self.{attr}.{fn.name}({', '.join(call)})\n")


@dataclass(frozen=True, slots=True)
class AddDelegatingMethods(Operation):
    """Add to ``class_`` each of ``methods`` it lacks, as ``return self.<attribute>.<m>(...)`` with
    the signature (annotations dropped, defaults kept) of the same method on the delegate class
    ``signatures_from = {file, class}`` (bases in that file are followed).

    Holds when the class already defines every method. Drifts when the class is not defined
    exactly once, never assigns ``self.<attribute>``, or the delegate lacks a method.
    """

    kind: ClassVar[str] = "add-delegating-methods"
    keys: ClassVar[Mapping[str, Any]] = {
        "class": Str(), "attribute": Str(), "methods": ListOf(Str()),
        "signatures-from": Table({"file": Str(), "class": Str()}, required=frozenset({"file", "class"}))}
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
        return _top_level(tree, names=(f"{self.class_}.*",))

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        classes = _classes(module, self.class_)
        if len(classes) != 1:
            return Outcome("drifted", f"class {self.class_} found {len(classes)} times, expected 1")
        cls = classes[0]
        if not _assigns_self_attr(cls, self.attribute):
            return Outcome("drifted", f"class {self.class_} never assigns self.{self.attribute}")
        present = {s.name.value for s in cls.body.body if isinstance(s, cst.FunctionDef)}
        missing = [m for m in self.methods if m not in present]
        if not missing:
            return Outcome("holds", f"{self.class_} already defines {', '.join(self.methods)}")
        source = ctx.read_text(self.signatures_from["file"])
        if source is None:
            return Outcome("drifted", f"delegate file {self.signatures_from['file']} is missing")
        tree = ast.parse(source)
        added = []
        for name in missing:
            fn = _find_method(tree, self.signatures_from["class"], name)
            if fn is None:
                return Outcome("drifted", f"delegate {self.signatures_from['class']} "
                                          f"({self.signatures_from['file']}) has no method {name}")
            stmt = cst.parse_statement(_delegate_text(fn, self.attribute), config=module.config_for_parsing)
            added.append(stmt.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
        body = cls.body.with_changes(body=(*cls.body.body, *added))
        return Outcome("changed", f"added {', '.join(missing)} to {self.class_}",
                       _replace(module, cls, cls, cls.with_changes(body=body)))


def _calls(node: Any, name: str) -> list[cst.Call]:
    """Calls under ``node`` whose callee is ``name`` or ``<anything>.name``."""
    import libcst as cst

    found: list[cst.Call] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:  # noqa: N802
            f = call.func
            if (isinstance(f, cst.Name) and f.value == name) or \
                    (isinstance(f, cst.Attribute) and f.attr.value == name):
                found.append(call)

    node.visit(Visitor())
    return found


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
        return _top_level(tree, functions=(self.function,))

    def run(self, module: cst.Module, ctx: OpContext) -> Outcome:
        import libcst as cst

        funcs = _functions(module, self.function)
        if len(funcs) != 1:
            return Outcome("drifted", f"function {self.function} found {len(funcs)} times, expected 1")
        top, func = funcs[0]
        lists = [arg.value for call in _calls(func, self.call) for arg in call.args
                 if arg.keyword is not None and arg.keyword.value == self.keyword
                 and isinstance(arg.value, cst.List)]
        if len(lists) != 1:
            return Outcome("drifted", f"{self.call}({self.keyword}=[...]) found {len(lists)} times "
                                      f"in {self.function}(), expected 1")
        lst = lists[0]
        codes = [_code(module, e.value) for e in lst.elements]
        if _norm(self.element) in codes:
            return Outcome("holds", f"{self.keyword} already lists {self.element}")
        if self.anchor is not None and _norm(self.anchor) != _code(module, lst):
            return Outcome("drifted", f"{self.keyword} is {module.code_for_node(lst)}, expected {self.anchor}")
        new = cst.Element(cst.parse_expression(self.element))
        elements = _append_element(list(lst.elements), new, lst.lbracket.whitespace_after)
        return Outcome("changed", f"added {self.element} to {self.keyword}",
                       _replace(module, top, lst, lst.with_changes(elements=elements)))


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
        from libcst.codemod import CodemodContext, TransformFailure, TransformSuccess, transform_module

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


OPERATIONS: dict[str, type[Operation]] = {
    c.kind: c for c in (AddGuardOperand, AddDictEntry, AddDelegatingMethods, AddListElement, Codemod)
}
