"""Patchset files (``patchsets/*.toml``): format, loading, requirement ordering.

A patchset names one distribution, the version specifier it was written for, why it exists, what
it requires (another patchset, or a version of another distribution), the launch flag that
activates it, and a list of operations on files of that distribution (see
:mod:`envforge.patching.operations`). The format is documented in docs/patchsets.md.

:func:`load_patchsets` reads a directory and returns the patchsets in dependency order: a patchset
comes after every patchset any of its requirements names.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name

from envforge.core.errors import InputError
from envforge.core.schema import ListOf, Problem, Str, Table, format_problems, validate
from envforge.core.textfile import SMALL_LIMIT, decode_utf8, parse_toml, read_bytes
from envforge.patching.operations import Operation

__all__ = [
    "Alternative",
    "Patchset",
    "PatchsetError",
    "PatchsetRequirement",
    "load_patchset",
    "load_patchsets",
    "order_patchsets",
    "patchset_id_problem",
]

#: A patchset id: the stem of ``patchsets/<id>.toml`` and the name recipes use. Letters, digits,
#: ``-`` and ``_``, starting with a letter or digit, at most 100 characters: no path separator,
#: no ``..``, no dot (``x.y.toml`` reads as another stem), no space, never empty.
PATCHSET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,99}")


def patchset_id_problem(pid: str) -> str | None:
    """Why ``pid`` is not a patchset id (:data:`PATCHSET_ID`), or None. Shared by the loader and
    ``patches commit``, which checks it before it writes anything (field case N89)."""
    if PATCHSET_ID.fullmatch(pid):
        return None
    return (
        f"{pid!r} is not a patchset id: letters, digits, '-' and '_', starting with a letter or digit, "
        "at most 100 characters (no '/', '.', space or empty id)"
    )


PATCHSET_PREFIX = "patchset:"
_OP_HEADER = re.compile(r"^\s*\[\[\s*operation\s*\]\]")


class PatchsetError(InputError):
    """A patchset file cannot be read or is invalid, or a named patchset does not exist (exit 2)."""


@dataclass(frozen=True, slots=True)
class Alternative:
    """One way to meet a requirement: another patchset (``patchset``) or a distribution version
    (``distribution`` + ``specifier``). Exactly one of the two forms is set."""

    text: str
    patchset: str | None = None
    distribution: str | None = None
    specifier: SpecifierSet | None = None


@dataclass(frozen=True, slots=True)
class PatchsetRequirement:
    """A requirement met when any one of ``any_of`` is met; ``reason`` says why it exists."""

    any_of: tuple[Alternative, ...]
    reason: str

    @property
    def text(self) -> str:
        """``"patchset:a | b>=1"``: the alternatives as written."""
        return " | ".join(a.text for a in self.any_of)


@dataclass(frozen=True, slots=True)
class Patchset:
    """One patchset file.

    ``digest`` is ``"sha256:<hex>"`` of the file bytes (recorded in locks and the patch manifest).
    ``upstream_prefix`` is the directory of the distribution's import root in its upstream
    repository (``"python/"`` for sglang), used by ``patches export``. ``diff_sha256`` (hex) and
    ``diff_origin`` (a URL or the file's name) record the unified diff ``patches import`` made the
    patchset from (:mod:`envforge.patching.upstream`); None for a hand-written one.
    """

    id: str
    distribution: str
    specifier: SpecifierSet
    reason: str
    requires: tuple[PatchsetRequirement, ...]
    activation: str | None
    digest: str
    path: Path
    operations: tuple[Operation, ...]
    upstream: str | None = None
    upstream_prefix: str = ""
    _versions: str = ""
    diff_sha256: str | None = None
    diff_origin: str | None = None

    @property
    def versions(self) -> str:
        """The specifier as written in the file (``">=0.5.8,<0.5.11"``), for messages."""
        return self._versions or str(self.specifier)

    @property
    def files(self) -> tuple[str, ...]:
        """The files the operations touch, relative to site-packages, in first-use order."""
        return tuple(dict.fromkeys(op.file for op in self.operations))

    def required_patchsets(self) -> tuple[str, ...]:
        """Ids of the patchsets any requirement names."""
        return tuple(a.patchset for r in self.requires for a in r.any_of if a.patchset)


def _spec_check(value: Any) -> str | None:
    try:
        SpecifierSet(value)
    except InvalidSpecifier:
        return f"'{value}' is not a PEP 440 version specifier (e.g. '>=0.5.8,<0.5.11')"
    return None


def _alt_check(value: Any) -> str | None:
    if value.startswith(PATCHSET_PREFIX):
        return None if value[len(PATCHSET_PREFIX) :] else "empty patchset id after 'patchset:'"
    try:
        Requirement(value)
    except InvalidRequirement:
        return f"'{value}' is neither 'patchset:<id>' nor a PEP 508 requirement"
    return None


def _diff_sha_check(value: Any) -> str | None:
    return None if re.fullmatch(r"[0-9a-f]{64}", value) else f"'{value}' is not a sha256 (64 lowercase hex digits)"


_SPEC = Table(
    {
        "patchset": Table(
            {
                "id": Str(),
                "distribution": Str(),
                "versions": Str(_spec_check),
                "reason": Str(),
                "upstream": Str(),
                "upstream-prefix": Str(),
                "activation": Str(),
                "diff-sha256": Str(_diff_sha_check),
                "diff-origin": Str(),
                "requires": ListOf(
                    Table({"any-of": ListOf(Str(_alt_check)), "reason": Str()}, required=frozenset({"any-of"}))
                ),
            },
            required=frozenset({"id", "distribution", "versions", "reason"}),
        ),
        "operation": ListOf(lambda v, p: []),  # each checked by its operation class
    },
    required=frozenset({"patchset", "operation"}),
)


def _alternative(text: str) -> Alternative:
    if text.startswith(PATCHSET_PREFIX):
        return Alternative(text, patchset=text[len(PATCHSET_PREFIX) :])
    req = Requirement(text)
    return Alternative(text, distribution=canonicalize_name(req.name), specifier=req.specifier)


def load_patchset(path: Path) -> Patchset:
    """Read and validate one patchset file.

    :raises PatchsetError: unreadable, not TOML, schema problems (``file:line: key: message``),
        an unknown operation kind, or an ``id`` different from the file name's stem.
    """
    raw = read_bytes(path, what="patchset", limit=SMALL_LIMIT, error=PatchsetError)
    text = decode_utf8(raw, label=str(path), error=PatchsetError)
    data = parse_toml(text, label=str(path), error=PatchsetError)
    problems = validate(data, _SPEC, text)
    ops: list[Operation] = []
    if not problems:
        lines = text.splitlines()
        headers = [n for n, line in enumerate(lines) if _OP_HEADER.match(line)]
        for i, table in enumerate(data["operation"]):
            start = headers[i] if i < len(headers) else 0
            end = headers[i + 1] if i + 1 < len(headers) else len(lines)
            op, op_problems = Operation.from_table(table, f"operation[{i}]", "\n".join(lines[start:end]))
            problems += [Problem(p.path, p.message, start + (p.line or 1)) for p in op_problems]
            if op is not None:
                ops.append(op)
    if problems:
        raise PatchsetError(
            format_problems("patchset", str(path), problems), hint="see docs/patchsets.md for the patchset format"
        )
    return _build(path, data["patchset"], tuple(ops), raw)


def _build(path: Path, meta: Mapping[str, Any], ops: tuple[Operation, ...], raw: bytes) -> Patchset:
    if (problem := patchset_id_problem(meta["id"])) is not None:
        raise PatchsetError(f"{path}: patchset.id: {problem}", hint="rename the patchset (file and id)")
    if not meta["reason"].strip():
        raise PatchsetError(f"{path}: patchset.reason is empty", hint="say why the patch exists")
    if meta["id"] != path.stem:
        raise PatchsetError(
            f"{path}: patchset.id '{meta['id']}' differs from the file name",
            hint=f'name the file {meta["id"]}.toml or set id = "{path.stem}"',
        )
    requires = tuple(
        PatchsetRequirement(tuple(_alternative(a) for a in r["any-of"]), r.get("reason", ""))
        for r in meta.get("requires", ())
    )
    return Patchset(
        id=meta["id"],
        distribution=canonicalize_name(meta["distribution"]),
        specifier=SpecifierSet(meta["versions"]),
        reason=meta["reason"],
        requires=requires,
        activation=meta.get("activation"),
        digest="sha256:" + hashlib.sha256(raw).hexdigest(),
        path=path,
        operations=ops,
        upstream=meta.get("upstream"),
        upstream_prefix=meta.get("upstream-prefix", ""),
        _versions=meta["versions"],
        diff_sha256=meta.get("diff-sha256"),
        diff_origin=meta.get("diff-origin"),
    )


def order_patchsets(patchsets: Sequence[Patchset]) -> tuple[Patchset, ...]:
    """``patchsets`` in dependency order (a patchset after those it names), stable otherwise.

    Requirements naming a patchset outside ``patchsets`` are ignored here (plan reports them).

    :raises PatchsetError: a requirement cycle, naming the patchsets in it.
    """
    by_id = {p.id: p for p in patchsets}
    done: dict[str, Patchset] = {}
    visiting: list[str] = []

    def visit(p: Patchset) -> None:
        if p.id in done:
            return
        if p.id in visiting:
            cycle = " -> ".join([*visiting[visiting.index(p.id) :], p.id])
            raise PatchsetError(
                f"patchset requirements form a cycle: {cycle}", hint="remove one of the 'patchset:' requirements"
            )
        visiting.append(p.id)
        for dep in p.required_patchsets():
            if dep in by_id:
                visit(by_id[dep])
        visiting.pop()
        done[p.id] = p

    for p in patchsets:
        visit(p)
    return tuple(done.values())


def load_patchsets(directory: Path, ids: Sequence[str] | None = None) -> tuple[Patchset, ...]:
    """Load ``<directory>/*.toml`` (or only ``ids``, plus nothing else) in dependency order.

    :raises PatchsetError: the directory is missing, an id names no file (with the known ids), or
        a file is invalid.
    """
    if not directory.is_dir():
        raise PatchsetError(
            f"no patchsets directory {directory}", hint="run from an envforge project or pass --project DIR"
        )
    known = sorted(p.stem for p in directory.glob("*.toml"))
    wanted = known if ids is None else list(dict.fromkeys(ids))
    missing = [i for i in wanted if i not in known]
    if missing:
        raise PatchsetError(
            f"no patchset named {', '.join(repr(m) for m in missing)} in {directory}",
            hint=f"known patchsets: {', '.join(known) or 'none'}",
        )
    return order_patchsets([load_patchset(directory / f"{i}.toml") for i in wanted])
