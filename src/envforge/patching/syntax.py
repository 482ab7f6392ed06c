"""Helpers over parsed trees for the operations: find definitions and assignments, compare
code fragments, splice elements and statements, read a delegate's signatures with ``ast``.

libcst is imported inside each function (the module is imported when patchsets are loaded).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

__all__ = [
    "append_element",
    "assigned_name",
    "assigns_self_attr",
    "calls",
    "chains",
    "classes",
    "code",
    "delegate_text",
    "find_method",
    "functions",
    "method_definitions",
    "method_kind",
    "insert_after",
    "missing_import",
    "norm",
    "operands",
    "replace",
    "replace_node",
    "top_level",
]


def norm(code: str) -> str:
    """Whitespace-insensitive form of a code fragment, for anchor comparison."""
    return ast.unparse(ast.parse(code.strip(), mode="eval"))


def functions(module: cst.Module, dotted: str) -> list[tuple[Any, cst.FunctionDef]]:
    """``(top-level statement, definition)`` of module-level function ``name`` or method
    ``Class.name``, for every definition found."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    *outer, name = dotted.split(".")
    scopes: list[tuple[Any, Any]] = [(None, module)]
    if outer:
        scopes = [(c, c.body) for c in classes(module, outer[0])]
    return [
        (top or s, s)
        for top, scope in scopes
        for s in scope.body
        if isinstance(s, cst.FunctionDef) and s.name.value == name
    ]


def classes(module: cst.Module, name: str) -> list[cst.ClassDef]:
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    return [s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == name]


def top_level(
    tree: ast.Module, *, functions: tuple[str, ...] = (), names: tuple[str, ...] = (), imports: bool = False
) -> set[int]:
    """Top-level statements of ``tree``: definitions of ``functions`` (``f`` or ``Class.f``: then
    the class), assignments to ``names`` (``X`` or ``Class.X``: then the class), and imports."""
    defs = {f.split(".")[0] for f in functions if "." not in f}
    classes = {f.split(".")[0] for f in (*functions, *names) if "." in f}
    plain = {n for n in names if "." not in n}
    out = set()
    for i, node in enumerate(tree.body):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name in defs
            or isinstance(node, ast.ClassDef)
            and node.name in classes
            or imports
            and isinstance(node, (ast.Import, ast.ImportFrom))
        ):
            out.add(i)
        elif (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in plain for t in node.targets)
            or isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id in plain
        ):
            out.add(i)
    return out


def assigned_name(stmt: Any) -> tuple[str | None, Any]:
    """``(name, value)`` when ``stmt`` is ``name = value`` / ``name: T = value``; else ``(None, None)``."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return None, None
    small = stmt.body[0]
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        return (target.value, small.value) if isinstance(target, cst.Name) else (None, None)
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
        return small.target.value, small.value
    return None, None


def code(module: cst.Module, node: Any) -> str:
    return norm(module.code_for_node(node))


def insert_after(body: Any, index: int, new: Any) -> tuple[Any, ...]:
    return (*body[: index + 1], new, *body[index + 1 :])


def append_element(elements: Any, new: Any, lead: Any) -> list[Any]:
    """``elements`` plus ``new`` at the end, keeping the separator and trailing-comma layout.

    ``lead`` is the whitespace after the opening bracket (used as separator for one element).
    """
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

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


def chains(node: Any, op_type: type) -> list[cst.BooleanOperation]:
    """Maximal ``a or b or c`` chains (``op_type`` is ``libcst.Or`` or ``libcst.And``) under ``node``."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    inner: set[int] = set()
    roots: list[cst.BooleanOperation] = []

    class Visitor(cst.CSTVisitor):
        def visit_BooleanOperation(self, n: cst.BooleanOperation) -> None:  # noqa: N802
            if not isinstance(n.operator, op_type):
                return
            if id(n) not in inner:
                roots.append(n)
            for child in (n.left, n.right):
                if isinstance(child, cst.BooleanOperation) and isinstance(child.operator, op_type) and not child.lpar:
                    inner.add(id(child))

    node.visit(Visitor())
    return roots


def operands(n: Any, op_type: type, root: bool = True) -> list[Any]:
    """The operands of the chain ``n`` (parentheses of the root itself are ignored)."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    if isinstance(n, cst.BooleanOperation) and isinstance(n.operator, op_type) and (root or not n.lpar):
        return [*operands(n.left, op_type, False), *operands(n.right, op_type, False)]
    return [n]


def replace(module: cst.Module, within: Any, target: Any, new: Any) -> cst.Module:
    """``module`` with node ``target`` (by identity, inside the top-level statement ``within``)
    replaced by ``new``; only ``within`` is visited, which keeps large files fast."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    class Swap(cst.CSTTransformer):
        def on_leave(self, original: Any, updated: Any) -> Any:
            return new if original is target else updated

    body = tuple(s.visit(Swap()) if s is within else s for s in module.body)
    return module.with_changes(body=body)


def replace_node(module: cst.Module, target: Any, new: Any) -> cst.Module:
    """``module`` with the node ``target`` (by identity, anywhere) replaced by ``new``."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    class _Swap(cst.CSTTransformer):
        def on_leave(self, original: Any, updated: Any) -> Any:
            return new if original is target else updated

    out: cst.Module = module.visit(_Swap())
    return out


def missing_import(module: cst.Module, statement: str) -> tuple[cst.Module | None, str]:
    """Add ``from M import N`` (merged into the one existing ``from M import (...)`` when there is
    one); returns ``(new module or None when N is already imported, detail)``."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    tree = ast.parse(statement).body[0]
    assert isinstance(tree, ast.ImportFrom) and tree.module is not None
    mod, name = tree.module, tree.names[0].name
    froms = [
        (i, s.body[0])
        for i, s in enumerate(module.body)
        if isinstance(s, cst.SimpleStatementLine)
        and isinstance(s.body[0], cst.ImportFrom)
        and s.body[0].module is not None
        and module.code_for_node(s.body[0].module) == mod
    ]
    for _, imp in froms:
        if not isinstance(imp.names, cst.ImportStar) and any(
            a.evaluated_alias is None and a.evaluated_name == name for a in imp.names
        ):
            return None, ""
    plain = [(i, imp) for i, imp in froms if not isinstance(imp.names, cst.ImportStar)]
    if len(plain) == 1 and not isinstance(plain[0][1].names, cst.ImportStar):
        i, imp = plain[0]
        lead = imp.lpar.whitespace_after if imp.lpar else cst.SimpleWhitespace("")
        names = append_element(list(imp.names), cst.ImportAlias(name=cst.Name(name)), lead)  # type: ignore[arg-type]
        line = module.body[i].with_changes(body=[imp.with_changes(names=names)])
        return module.with_changes(body=(*module.body[:i], line, *module.body[i + 1 :])), f"imported {name} from {mod}"
    last = max(
        (
            i
            for i, s in enumerate(module.body)
            if isinstance(s, cst.SimpleStatementLine) and isinstance(s.body[0], (cst.Import, cst.ImportFrom))
        ),
        default=-1,
    )
    new = cst.parse_statement(statement, config=module.config_for_parsing)
    return module.with_changes(body=insert_after(module.body, last, new)), f"added `{statement}`"


def assigns_self_attr(cls: cst.ClassDef, attr: str) -> bool:
    """Whether some method of ``cls`` assigns ``self.<attr>`` (plain or annotated assignment)."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    def is_target(t: Any) -> bool:
        return (
            isinstance(t, cst.Attribute)
            and t.attr.value == attr
            and isinstance(t.value, cst.Name)
            and t.value.value == "self"
        )

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


Def = ast.FunctionDef | ast.AsyncFunctionDef


def find_method(tree: ast.Module, cls: str, name: str) -> Def | None:
    """``cls.name`` in ``tree`` (the definition Python binds: the last one of the first class in
    the walk that defines it), following base classes defined in the same module."""
    defs = method_definitions(tree, cls, name)
    return defs[-1] if defs else None


def method_definitions(tree: ast.Module, cls: str, name: str) -> list[Def]:
    """Every ``def``/``async def`` named ``name`` in the body of the first class that has one,
    walking ``cls`` then its bases defined in ``tree`` (breadth first), in file order: a property's
    getter, setter and deleter, or ``typing.overload`` stubs and the implementation."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    seen: set[str] = set()
    todo = [cls]
    while todo:
        c = classes.get(todo.pop(0))
        if c is None or c.name in seen:
            continue
        seen.add(c.name)
        found = [n for n in c.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
        if found:
            return found
        todo += [b.id for b in c.bases if isinstance(b, ast.Name)]
    return []


_KINDS = {
    "classmethod": "classmethod",
    "staticmethod": "staticmethod",
    "property": "property",
    "functools.cached_property": "property",
    "cached_property": "property",
}
_NO_KIND = ("abstractmethod", "abc.abstractmethod")  # marks, the function stays a plain method
_OVERLOAD = ("overload", "typing.overload", "typing_extensions.overload")


def _yields(fn: Def) -> bool:
    """Whether ``fn``'s own body (not nested functions or classes) contains ``yield``."""
    todo: list[ast.AST] = list(fn.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            todo += ast.iter_child_nodes(node)
    return False


def method_kind(defs: list[Def]) -> tuple[str | None, str]:
    """The kind of the method ``defs`` (from :func:`method_definitions`) define: ``(kind, "")``
    with kind one of ``method``, ``async``, ``async-generator``, ``classmethod``,
    ``staticmethod``, ``property`` (``property+setter``, ``property+setter+deleter``, ...), or
    ``(None, why)`` when envforge cannot tell it (another decorator: its kind is unknown)."""
    defs = [d for d in defs if not any(ast.unparse(x) in _OVERLOAD for x in d.decorator_list)] or defs[-1:]
    first = defs[0]
    decorators = [ast.unparse(d) for d in first.decorator_list]
    kinds = [_KINDS[d] for d in decorators if d in _KINDS]
    others = [d for d in decorators if d not in _KINDS and d not in _NO_KIND]
    if others or len(kinds) > 1:
        return None, f"is decorated with {', '.join('@' + d for d in decorators)} (a kind envforge cannot delegate)"
    if kinds and kinds[0] == "property":
        parts = ["property"]
        for d in defs[1:]:
            names = [ast.unparse(x) for x in d.decorator_list]
            accessor = names[0].rpartition(".")[2] if len(names) == 1 else ""
            if names != [f"{first.name}.{accessor}"] or accessor not in ("setter", "deleter"):
                return None, f"redefines the property with {', '.join('@' + n for n in names) or 'a plain def'}"
            parts.append(accessor)
        return "+".join(parts), ""
    if len(defs) > 1:
        defs = defs[-1:]
        first = defs[0]
    if kinds:
        if isinstance(first, ast.AsyncFunctionDef):
            return None, f"is an async {kinds[0]} (a kind envforge cannot delegate)"
        return kinds[0], ""
    if isinstance(first, ast.AsyncFunctionDef):
        return ("async-generator" if _yields(first) else "async"), ""
    return "method", ""


def _signature(fn: Def, skip_first: bool) -> tuple[list[str], list[str]]:
    """``(params, call arguments)`` of ``fn``: parameters without annotations, defaults kept; the
    call passes every parameter but the first when ``skip_first`` (``self``/``cls``)."""
    a = fn.args
    params: list[str] = []
    call: list[str] = []
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (p, d) in enumerate(zip(positional, defaults, strict=True)):
        params.append(p.arg + (f"={ast.unparse(d)}" if d is not None else ""))
        if i >= 1 or not skip_first:
            call.append(p.arg)
        if a.posonlyargs and i == len(a.posonlyargs) - 1:
            params.append("/")
    if a.vararg:
        params.append(f"*{a.vararg.arg}")
        call.append(f"*{a.vararg.arg}")
    elif a.kwonlyargs:
        params.append("*")
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append(p.arg + (f"={ast.unparse(d)}" if d is not None else ""))
        call.append(f"{p.arg}={p.arg}")
    if a.kwarg:
        params.append(f"**{a.kwarg.arg}")
        call.append(f"**{a.kwarg.arg}")
    return params, call


def delegate_text(fn: Def, attr: str, kind: str = "method", delegate_class: str = "") -> str:
    """The source of a method delegating ``fn`` of kind ``kind`` (:func:`method_kind`):

    * ``method``: ``def m(self, <params>): return self.<attr>.m(<args>)``,
    * ``async``: ``async def m(...): return await self.<attr>.m(...)``,
    * ``async-generator``: ``async def m(...): async for item in self.<attr>.m(...): yield item``,
    * ``classmethod`` / ``staticmethod``: the decorator kept, calling ``<delegate_class>.m(...)``
      (there is no instance to reach ``self.<attr>`` from),
    * ``property[+setter][+deleter]``: ``@property def m(self): return self.<attr>.m`` and, when
      the delegate has them, a setter assigning and a deleter deleting ``self.<attr>.m``.

    Parameters lose their annotations and keep their defaults.
    """
    name = fn.name
    if kind.startswith("property"):
        out = f"@property\ndef {name}(self):\n    return self.{attr}.{name}\n"
        if "setter" in kind:
            out += f"\n@{name}.setter\ndef {name}(self, value):\n    self.{attr}.{name} = value\n"
        if "deleter" in kind:
            out += f"\n@{name}.deleter\ndef {name}(self):\n    del self.{attr}.{name}\n"
        return out
    params, call = _signature(fn, skip_first=kind != "staticmethod")
    args = ", ".join(call)
    head = f"def {name}({', '.join(params)}):\n"
    if kind in ("classmethod", "staticmethod"):
        return f"@{kind}\n{head}    return {delegate_class}.{name}({args})\n"
    if kind == "async":
        return f"async {head}    return await self.{attr}.{name}({args})\n"
    if kind == "async-generator":
        return f"async {head}    async for item in self.{attr}.{name}({args}):\n        yield item\n"
    return f"{head}    return self.{attr}.{name}({args})\n"


def calls(node: Any, name: str) -> list[cst.Call]:
    """Calls under ``node`` whose callee is ``name`` or ``<anything>.name``."""
    import libcst as cst  # lazy: ~0.5 s to import; loading patchsets (`patches list`) does not need it

    found: list[cst.Call] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:  # noqa: N802
            f = call.func
            if (isinstance(f, cst.Name) and f.value == name) or (isinstance(f, cst.Attribute) and f.attr.value == name):
                found.append(call)

    node.visit(Visitor())
    return found
