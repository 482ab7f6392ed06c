"""Turn a hand edit into a patchset (issue 16.3): ``envforge patches new`` copies an installed
distribution's Python files into an edit directory; the user edits them; ``envforge patches
commit`` writes ``patchsets/<id>.toml`` whose operations survive upstream churn.

Per changed file, definitions (functions, classes, methods) are found with libcst and compared by
qualified name: a changed definition becomes a ``replace-definition`` operation carrying the
digest of the original definition (another upstream definition drifts; moving it in the file does
not matter), the innermost changed definitions first (a class only when more than its methods
changed). What changed outside every definition (module-level statements) becomes one
``replace-text`` operation anchored by the neighbouring statements. No line diff is computed.

The edit directory holds ``.envforge-edit.json`` (distribution, version, and per file the sha256
of the original) and the original bytes in ``.envforge-edit/originals/<sha256>``: the released
bytes, also when the environment is patched (taken from the patch manifest's saved originals).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envforge.core.errors import InputError
from envforge.core.fs import atomic_write
from envforge.core.textfile import SMALL_LIMIT, decode_utf8, read_state
from envforge.installed.distributions import find_distribution, read_record
from envforge.patching.manifest import originals_dir, read_manifest
from envforge.patching.operations import definition_code, definition_digest, definitions
from envforge.patching.patchset import load_patchset, patchset_id_problem

__all__ = ["CapturedPatchset", "EditDir", "capture_file", "commit_edit", "new_edit", "write_patchset"]

RECORD_NAME = ".envforge-edit.json"
STORE = ".envforge-edit"
_NEW_EDIT = "make one with `envforge patches new DIST`"


@dataclass(frozen=True, slots=True)
class EditDir:
    """An edit directory made by :func:`new_edit`: ``path``, distribution, version, file count."""

    path: Path
    distribution: str
    version: str
    files: int


@dataclass(frozen=True, slots=True)
class CapturedPatchset:
    """What :func:`commit_edit` wrote: the patchset file and one line per operation."""

    path: Path
    operations: tuple[str, ...]


def new_edit(site_packages: Path, distribution: str, dest: Path) -> EditDir:
    """Copy every ``.py`` file of ``distribution`` (its RECORD, PEP 376) into ``dest``, as released.

    :raises InputError: not installed; ``dest`` exists and is not empty.
    """

    dist = find_distribution(site_packages, distribution)
    if dist is None:
        raise InputError(f"{distribution} is not installed in {site_packages}",
                         hint="name a distribution of the environment (`envforge env show`), or pass --env")
    if dest.exists() and any(dest.iterdir()):
        raise InputError(f"{dest} exists and is not empty", hint="choose another directory with -o DIR")
    manifest = read_manifest(site_packages)
    released = {f.path: f.original_sha256 for f in reversed(manifest.files)} if manifest else {}
    store = dest / STORE / "originals"
    store.mkdir(parents=True)
    files: dict[str, str] = {}
    for entry in read_record(dist):
        if not entry.path.endswith(".py") or entry.path.startswith(("..", "/")):
            continue
        src = site_packages / entry.path
        if entry.path in released:  # patched by envforge: start from the released bytes
            src = originals_dir(site_packages) / released[entry.path]
        try:
            data = src.read_bytes()
        except FileNotFoundError:
            continue
        digest = hashlib.sha256(data).hexdigest()
        (dest / entry.path).parent.mkdir(parents=True, exist_ok=True)
        (dest / entry.path).write_bytes(data)
        (store / digest).write_bytes(data)
        files[entry.path] = digest
    record = {"schema": 1, "distribution": dist.name, "version": dist.version, "files": files}
    (dest / RECORD_NAME).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return EditDir(dest, dist.name, dist.version, len(files))


def _read_edit(directory: Path) -> dict[str, Any]:
    """The record ``patches new`` wrote in ``directory``.

    :raises InputError: missing, not a regular file (a FIFO, a directory: named, never opened),
        larger than 1 MiB, not JSON, or not of schema 1.
    """
    hint = _NEW_EDIT
    try:
        raw = read_state(directory / RECORD_NAME, what="edit record", limit=SMALL_LIMIT, hint=hint)
        data: dict[str, Any] = json.loads(raw.decode("utf-8"))
        if data.get("schema") != 1 or not isinstance(data.get("files"), dict):
            raise ValueError("unknown schema")
        return data
    except (OSError, ValueError) as exc:
        raise InputError(f"{directory}: not an edit directory ({RECORD_NAME}: {exc})", hint=hint) from None


def _top_items(module: Any) -> list[tuple[str, Any]]:
    """Top-level statements as ``(key, node)``: ``def:<name>`` for definitions, else ``stmt``."""
    import libcst as cst  # lazy: ~0.5 s to import; `envforge` starts without it

    return [(f"def:{s.name.value}" if isinstance(s, (cst.FunctionDef, cst.ClassDef)) else "stmt", s)
            for s in module.body]


def _changed_definitions(old: Any, new: Any, path: str) -> list[tuple[str, Any, Any]]:
    """``(qualified name, old node, new node)`` of the innermost changed definitions."""
    import libcst as cst  # lazy: ~0.5 s to import; `envforge` starts without it


    before, after = definitions(old), definitions(new)
    missing = [n for n in before if n not in after]
    if missing:
        raise InputError(f"{path}: definition {missing[0]} was removed or renamed; a patchset replaces "
                         "definitions, it does not delete them", hint="keep the definition (edit its body)")
    ambiguous = [n for n in after if len(after[n]) > 1 or len(before.get(n, [])) > 1]
    changed = sorted((n for n in before if definition_code(before[n][0]) != definition_code(after[n][0])),
                     key=lambda n: n.count("."), reverse=True)
    out: list[tuple[str, Any, Any]] = []
    covered: set[str] = set()
    for name in changed:
        if name in ambiguous:
            raise InputError(f"{path}: {name} is defined more than once; cannot anchor an edit to it")
        inner = [c for c in out if c[0].startswith(name + ".")]
        node = before[name][0]
        if inner and isinstance(node, cst.ClassDef):
            # the class changed only through the methods already captured?
            swapped = node
            for _, old_child, new_child in inner:
                swapped = _swap(swapped, old_child, new_child)
            if definition_code(swapped) == definition_code(after[name][0]):
                covered.add(name)
                continue
            out = [c for c in out if not c[0].startswith(name + ".")]
        out.append((name, node, after[name][0]))
    return [c for c in out if c[0] not in covered]


def _swap(tree: Any, target: Any, new: Any) -> Any:
    import libcst as cst  # lazy: ~0.5 s to import; `envforge` starts without it

    class _T(cst.CSTTransformer):
        def on_leave(self, original: Any, updated: Any) -> Any:
            return new.with_changes(leading_lines=original.leading_lines) if original is target else updated

    return tree.visit(_T())


def _text_edit(old: Any, new: Any, path: str) -> tuple[str, str] | None:
    """``(before, after)`` covering the module-level statements outside definitions that differ,
    with one neighbouring statement of context on each side; None when they are the same."""
    import libcst as cst  # lazy: ~0.5 s to import; `envforge` starts without it

    empty = cst.Module([])
    a, b = _top_items(old), _top_items(new)

    def code(items: list[tuple[str, Any]]) -> list[str]:
        return [k if k != "stmt" else empty.code_for_node(n) for k, n in items]

    ca, cb = code(a), code(b)
    if [c for c in ca if not c.startswith("def:")] == [c for c in cb if not c.startswith("def:")] \
            and [c for c in ca if c.startswith("def:")] == [c for c in cb if c.startswith("def:")]:
        return None
    lo = 0
    while lo < min(len(ca), len(cb)) and ca[lo] == cb[lo]:
        lo += 1
    hi = 0
    while hi < min(len(ca), len(cb)) - lo and ca[len(ca) - 1 - hi] == cb[len(cb) - 1 - hi]:
        hi += 1
    if any(k.startswith("def:") for k, _ in (*a[lo:len(a) - hi], *b[lo:len(b) - hi])):
        raise InputError(f"{path}: definitions were added, removed or reordered next to a module-level edit",
                         hint="keep definitions in place; change module-level statements only")
    start, end = max(lo - 1, 0), min(len(a) - hi + 1, len(a))
    ctx_before = [n for k, n in a[start:lo] if k == "stmt"]
    ctx_after = [n for k, n in a[len(a) - hi:end] if k == "stmt"]
    def text(nodes: list[Any]) -> str:
        return "".join(empty.code_for_node(n) for n in nodes)

    before = text([*ctx_before, *(n for _, n in a[lo:len(a) - hi]), *ctx_after])
    after = text([*ctx_before, *(n for _, n in b[lo:len(b) - hi]), *ctx_after])
    if not before.strip() or old.code.count(before) != 1:
        raise InputError(f"{path}: the module-level edit cannot be anchored (its context occurs "
                         f"{old.code.count(before)} times)", hint="edit next to a unique statement")
    return before, after


def commit_edit(directory: Path, patchsets_dir: Path, pid: str, reason: str, *, versions: str | None = None,
                force: bool = False) -> CapturedPatchset:
    """Write ``<patchsets_dir>/<pid>.toml`` from the edits in ``directory`` (see the module doc).
    ``versions`` defaults to ``==<the edited release>``.

    :raises InputError: not an edit directory; nothing changed; an edit that cannot be expressed
        (a removed definition, an unanchorable module-level edit, a file that does not parse);
        the patchset file exists (unless ``force``).
    """
    if (problem := patchset_id_problem(pid)) is not None:  # before anything is read or written
        raise InputError(f"--id {problem}", hint="e.g. --id fix-allreduce-sm120")
    if not reason.strip():
        raise InputError("--reason is empty: a patchset says why it exists", hint='--reason "why the patch is needed"')
    check_versions(versions)
    edit = _read_edit(directory)
    target = patchsets_dir / f"{pid}.toml"
    if target.exists() and not force:
        raise InputError(f"{target} exists", hint="choose another --id, or pass --force to overwrite it")
    ops: list[dict[str, str]] = []
    lines: list[str] = []
    for path, digest in sorted(edit["files"].items()):
        try:
            original = read_state(directory / STORE / "originals" / digest, what="saved original", hint=_NEW_EDIT)
        except FileNotFoundError:
            raise InputError(f"{directory}: the saved original of {path} is missing "
                             f"({directory / STORE / 'originals' / digest})", hint=_NEW_EDIT) from None
        try:
            edited = (directory / path).read_bytes()
        except FileNotFoundError:
            raise InputError(f"{directory / path}: deleted; a patchset changes files, it does not delete them") from None
        if edited == original:
            continue
        file_ops, file_lines = capture_file(path, original, edited, label=str(directory / path))
        ops += file_ops
        lines += file_lines
    if not ops:
        raise InputError(f"{directory}: no file differs from the released {edit['distribution']} {edit['version']}",
                         hint="edit the files first")
    meta = {"id": pid, "distribution": edit["distribution"], "versions": versions or f"=={edit['version']}",
            "reason": reason}
    write_patchset(target, meta, ops, comment=f"Captured by `envforge patches commit` from an edit of "
                                              f"{edit['distribution']} {edit['version']}.")
    return CapturedPatchset(target, tuple(lines))


def capture_file(path: str, original: bytes, edited: bytes, *, label: str) -> tuple[list[dict[str, str]], list[str]]:
    """The operations that turn ``original`` into ``edited`` (the bytes of site-packages file
    ``path``), as ``patches commit`` writes them, and one line describing each: a
    ``replace-definition`` per innermost changed definition, one ``replace-text`` for the
    module-level statements between them. ``label`` names the file in errors.

    :raises InputError: a file that does not parse or decode, a removed or twice-defined
        definition, definitions added or moved next to a module-level edit, an unanchorable one.
    """
    import libcst as cst  # lazy: ~0.5 s to import; `envforge` starts without it

    try:
        old, new = cst.parse_module(original), cst.parse_module(edited)
    except (SyntaxError, UnicodeDecodeError):  # an undeclared encoding (PEP 263): name the byte
        decode_utf8(edited, label=label)
        raise InputError(f"{label}: cannot be read in its declared encoding (PEP 263)") from None
    except cst.ParserSyntaxError as exc:
        raise InputError(f"{label}: does not parse: {exc.message} (line {exc.raw_line})") from None
    ops: list[dict[str, str]] = []
    lines: list[str] = []
    for name, old_node, new_node in _changed_definitions(old, new, path):
        ops.append({"kind": "replace-definition", "file": path, "definition": name,
                    "original-digest": definition_digest(old_node), "code": definition_code(new_node)})
        lines.append(f"replace-definition {path} {name}")
    text = _text_edit(old, new, path)
    if text is not None:
        ops.append({"kind": "replace-text", "file": path, "before": text[0], "after": text[1]})
        lines.append(f"replace-text {path}")
    return ops, lines


def check_versions(versions: str | None) -> None:
    """Refuse a ``--versions`` that is no PEP 440 specifier before anything is written
    (``packaging.specifiers.SpecifierSet``: ``'>=0.5.8,<0.5.11'``; ``None`` is the default, fine).

    :raises InputError: ``--versions 'garbage' is not a PEP 440 version specifier``.
    """
    if versions is None:
        return
    try:
        SpecifierSet(versions)
    except InvalidSpecifier:
        raise InputError(f"--versions {versions!r} is not a PEP 440 version specifier",
                         hint="e.g. --versions '>=0.5.8,<0.5.11', or leave it out for ==<the release>") from None


def write_patchset(target: Path, meta: dict[str, str], ops: list[dict[str, str]], *, comment: str,
                   check: Callable[[Path], None] | None = None) -> None:
    """Write ``target`` (``patchsets/<id>.toml``): a comment line, ``[patchset]`` with ``meta``
    in its order, then ``ops`` as ``[[operation]]`` tables (multi-line values as TOML literal
    strings); then load it back, so what was written is a valid patchset, and run ``check`` on it.
    When either fails, ``target`` is put back as it was (removed, or its previous bytes for
    ``--force``), so a refusal writes nothing.

    :raises PatchsetError: the written file does not load.
    :raises InputError: whatever ``check`` raises.
    """
    import tomlkit  # lazy: ~0.06 s to import; only `patches commit` and `patches import` write TOML

    doc = tomlkit.document()
    doc.add(tomlkit.comment(comment))
    table = tomlkit.table()
    for key, value in meta.items():
        table.add(key, value)
    doc.add("patchset", table)
    aot = tomlkit.aot()
    for op in ops:
        t = tomlkit.table()
        for k, v in op.items():
            t.add(k, tomlkit.string(v, multiline="\n" in v, literal="\n" in v and "'''" not in v))
        aot.append(t)
    doc.add("operation", aot)
    target.parent.mkdir(parents=True, exist_ok=True)
    previous = target.read_bytes() if target.is_file() else None
    atomic_write(target, tomlkit.dumps(doc).encode("utf-8"))
    try:
        load_patchset(target)  # what we wrote must load (schema, TOML round trip)
        if check is not None:
            check(target)
    except BaseException:
        if previous is None:
            target.unlink(missing_ok=True)
        else:
            atomic_write(target, previous)
        raise


def remove_edit(directory: Path) -> None:
    """Delete an edit directory made by :func:`new_edit` (only one: it must have the record)."""
    _read_edit(directory)
    shutil.rmtree(directory)
