"""Is a patched module still a module that can run? Checked before any file is written.

No patch is called ``applied`` unless the patched source compiles (``compile()``: the parser and
the symbol table, so ``await`` outside ``async def`` or a misplaced ``nonlocal`` count) and
introduces no name that is undefined where it is used (field case B29: a delegate written as an
instance method referring to ``self`` inside a classmethod). Undefined names are found by
pyflakes (https://github.com/PyCQA/pyflakes), a static checker that never imports the code; only
findings the released file does not already have count, compared by kind and name (line numbers
move with the edit).
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["introduced_problems"]

# pyflakes message classes that mean "this name does not exist where it is used".
_UNDEFINED = ("UndefinedName", "UndefinedLocal", "UndefinedExport")


def _undefined(tree: ast.Module, filename: str) -> list[Any]:
    from pyflakes.checker import Checker  # lazy: ~0.08 s to import; only a plan that edits a file needs it

    return [m for m in Checker(tree, filename=filename).messages if type(m).__name__ in _UNDEFINED]


def introduced_problems(path: str, before: bytes, after: bytes) -> list[str]:
    """What the edit ``before`` -> ``after`` of file ``path`` breaks, one line each, ``[]`` when
    nothing: ``does not compile: <msg> (line N)``, or ``pyflakes: line N: undefined name 'x'`` for
    each undefined-name finding of ``after`` whose name ``before`` does not already use undefined
    (a name the release itself uses without defining is provided some other way, e.g. injected
    into builtins).
    """
    try:
        compile(after, path, "exec", dont_inherit=True)
        tree = ast.parse(after, path)
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        return [f"does not compile: {getattr(exc, 'msg', exc)}" + (f" (line {line})" if line else "")]
    found = _undefined(tree, path)
    if not found:  # the common case: the released file is not checked at all
        return []
    try:
        old = {(type(m).__name__, m.message_args) for m in _undefined(ast.parse(before, path), path)}
    except (SyntaxError, ValueError):
        old = set()
    return [
        f"pyflakes: line {m.lineno}: {m.message % m.message_args}"
        for m in found
        if (type(m).__name__, m.message_args) not in old
    ]
