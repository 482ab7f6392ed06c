"""What every operation shares: the :class:`Operation` base (built from a patchset's
``[[operation]]`` table), the :class:`Outcome` of a run, the :class:`OpContext` it may read, and
the checks of the values a patchset gives.

:data:`OPERATIONS` maps each kind to its class; :mod:`envforge.patching.operations` fills it.
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from envforge.core.schema import Enum, Problem, Str, Table, line_of

if TYPE_CHECKING:
    import libcst as cst

__all__ = ["OPERATIONS", "OpContext", "Operation", "Outcome", "expr_check", "relpath_check", "stmt_check"]

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


def expr_check(value: Any) -> str | None:
    try:
        ast.parse(value.strip(), mode="eval")
    except SyntaxError as exc:
        return f"not a Python expression: {exc.msg}"
    return None


def stmt_check(value: Any) -> str | None:
    try:
        ast.parse(value, mode="exec")
    except SyntaxError as exc:
        return f"not a Python statement: {exc.msg}"
    return None


def relpath_check(value: Any) -> str | None:
    """A path a patchset names must stay inside site-packages: relative, POSIX, no ``..``."""
    parts = PurePosixPath(value).parts
    if not value or value.startswith("/") or "\\" in value or PureWindowsPath(value).drive or ".." in parts:
        return (
            f"'{value}' must be a relative POSIX path inside site-packages "
            f"(no '..' parts, not absolute), e.g. 'sglang/srt/server_args.py'"
        )
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
        spec = Table({"kind": Str(), "file": Str(relpath_check), **sub.keys}, required=sub.required | {"file"})
        problems = [
            Problem(f"{path}.{p.path}", p.message, line_of(text, f"operation.{p.path}")) for p in spec(table, "")
        ]
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


#: Every operation class by its ``kind`` (``add-guard-operand``, ...), in the order the kinds are
#: documented; filled by :mod:`envforge.patching.operations` once every class is defined.
OPERATIONS: dict[str, type[Operation]] = {}
