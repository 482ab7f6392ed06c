"""Helpers over parsed trees for the operations: find definitions and assignments, compare
code fragments, splice elements and statements, read a delegate's signatures with ``ast``.

libcst is imported inside each function (the module is imported when patchsets are loaded).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import libcst as cst

__all__ = [
    "append_element", "assigned_name", "assigns_self_attr", "calls", "chains", "classes", "code",
    "delegate_text", "find_method", "functions", "insert_after", "missing_import", "norm", "operands",
    "replace", "top_level",
]

def norm(code: str) -> str:
    """Whitespace-insensitive form of a code fragment, for anchor comparison."""
    return ast.unparse(ast.parse(code.strip(), mode="eval"))


def functions(module: cst.Module, dotted: str) -> list[tuple[Any, cst.FunctionDef]]:
    """``(top-level statement, definition)`` of module-level function ``name`` or method
    ``Class.name``, for every definition found."""
    import libcst as cst

    *outer, name = dotted.split(".")
    scopes: list[tuple[Any, Any]] = [(None, module)]
    if outer:
        scopes = [(c, c.body) for c in classes(module, outer[0])]
    return [(top or s, s) for top, scope in scopes for s in scope.body
            if isinstance(s, cst.FunctionDef) and s.name.value == name]


def classes(module: cst.Module, name: str) -> list[cst.ClassDef]:
    import libcst as cst

    return [s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == name]


def top_level(tree: ast.Module, *, functions: tuple[str, ...] = (), names: tuple[str, ...] = (),
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


def assigned_name(stmt: Any) -> tuple[str | None, Any]:
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


def code(module: cst.Module, node: Any) -> str:
    return norm(module.code_for_node(node))


def insert_after(body: Any, index: int, new: Any) -> tuple[Any, ...]:
    return (*body[:index + 1], new, *body[index + 1:])


def append_element(elements: Any, new: Any, lead: Any) -> list[Any]:
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



def chains(node: Any, op_type: type) -> list[cst.BooleanOperation]:
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


def operands(n: Any, op_type: type, root: bool = True) -> list[Any]:
    """The operands of the chain ``n`` (parentheses of the root itself are ignored)."""
    import libcst as cst

    if isinstance(n, cst.BooleanOperation) and isinstance(n.operator, op_type) and (root or not n.lpar):
        return [*operands(n.left, op_type, False), *operands(n.right, op_type, False)]
    return [n]


def replace(module: cst.Module, within: Any, target: Any, new: Any) -> cst.Module:
    """``module`` with node ``target`` (by identity, inside the top-level statement ``within``)
    replaced by ``new``; only ``within`` is visited, which keeps large files fast."""
    import libcst as cst

    class Swap(cst.CSTTransformer):
        def on_leave(self, original: Any, updated: Any) -> Any:
            return new if original is target else updated

    body = tuple(s.visit(Swap()) if s is within else s for s in module.body)
    return module.with_changes(body=body)


def missing_import(module: cst.Module, statement: str) -> tuple[cst.Module | None, str]:
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
        names = append_element(list(imp.names), cst.ImportAlias(name=cst.Name(name)), lead)  # type: ignore[arg-type]
        line = module.body[i].with_changes(body=[imp.with_changes(names=names)])
        return module.with_changes(body=(*module.body[:i], line, *module.body[i + 1:])), \
            f"imported {name} from {mod}"
    last = max((i for i, s in enumerate(module.body) if isinstance(s, cst.SimpleStatementLine)
                and isinstance(s.body[0], (cst.Import, cst.ImportFrom))), default=-1)
    new = cst.parse_statement(statement, config=module.config_for_parsing)
    return module.with_changes(body=insert_after(module.body, last, new)), f"added `{statement}`"


def assigns_self_attr(cls: cst.ClassDef, attr: str) -> bool:
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


def find_method(tree: ast.Module, cls: str, name: str) -> ast.FunctionDef | None:
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


def delegate_text(fn: ast.FunctionDef, attr: str) -> str:
    """``def m(<params without annotations>): return self.<attr>.m(<the same arguments>)``."""
    a = fn.args
    params: list[str] = []
    call: list[str] = []
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for i, (p, d) in enumerate(zip(positional, defaults, strict=True)):
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
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append(p.arg + (f"={ast.unparse(d)}" if d is not None else ""))
        call.append(f"{p.arg}={p.arg}")
    if a.kwarg:
        params.append(f"**{a.kwarg.arg}")
        call.append(f"**{a.kwarg.arg}")
    return (f"def {fn.name}({', '.join(params)}):\n"
            f"    return self.{attr}.{fn.name}({', '.join(call)})\n")


def calls(node: Any, name: str) -> list[cst.Call]:
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


