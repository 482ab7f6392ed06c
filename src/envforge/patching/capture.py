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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from envforge.core.errors import InputError
from envforge.core.fs import atomic_write
from envforge.core.textfile import SMALL_LIMIT, decode_utf8, read_state
from envforge.installed.distributions import find_distribution, read_record
from envforge.patching.manifest import originals_dir, read_manifest
from envforge.patching.operations import definition_code, definition_digest
from envforge.patching.operations.placements import full_code, item_names, module_comments, statement_code
from envforge.patching.parserlimits import check_text
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
        raise InputError(
            f"{distribution} is not installed in {site_packages}",
            hint="name a distribution of the environment (`envforge env show`), or pass --env",
        )
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
    except (OSError, ValueError, RecursionError) as exc:
        raise InputError(f"{directory}: not an edit directory ({RECORD_NAME}: {exc})", hint=hint) from None


def _qualified(parent: str | None, name: str) -> str:
    return f"{parent}.{name}" if parent else name


def _class_header(node: Any) -> str:
    """A class's code with its statements replaced by ``pass``: decorators, name, bases, the comments
    above it and the comments closing its block."""
    import libcst as cst  # lazy: ~0.5 s to import; `envforge` starts without it

    if not isinstance(node.body, cst.IndentedBlock):
        return cst.Module([]).code_for_node(node)
    return cst.Module([]).code_for_node(
        node.with_changes(  # the block's own comments (its footer) stay
            body=node.body.with_changes(body=[cst.SimpleStatementLine([cst.Pass()])])
        )
    )


def _capture_body(old: Sequence[Any], new: Sequence[Any], parent: str | None, path: str) -> list[dict[str, str]]:
    """The operations that turn the statements ``old`` of one body (the module, or the class
    ``parent``) into ``new``, in the order they apply: the removed statements and definitions, the
    changed definitions (a class whose header is unchanged is looked into, so a changed method is
    replaced on its own), then the added ones, each anchored to the statement before it in ``new``
    (or the start of the body); a definition removed and added again under its name, and a
    statement removed and added again with its code (or only its comments changed), is one move. Statements are matched by their code and definitions
    by name (``run[1]`` among namesakes), in order (:class:`difflib.SequenceMatcher`).

    :raises InputError: a definition that changed between a function and a class.
    """
    import difflib  # lazy: only a capture compares bodies

    import libcst as cst  # lazy: ~0.5 s to import; `envforge` starts without it

    old_names, new_names = item_names(old), item_names(new)
    old_keys = [("def", n) if n is not None else ("stmt", statement_code(s)) for s, n in zip(old, old_names)]
    new_keys = [("def", n) if n is not None else ("stmt", statement_code(s)) for s, n in zip(new, new_names)]
    removals: list[dict[str, str]] = []
    middle: list[dict[str, str]] = []
    added: list[int] = []
    gone_defs: dict[str, list[int]] = {}  # removed definitions by name (a namesake added again is a move)
    moved_stmts: dict[str, list[int]] = {}  # removed statements by code (the same code added again is a move)
    where = {"parent": parent} if parent else {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_keys, new_keys, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                o, n = old[i1 + k], new[j1 + k]
                if full_code(o) == full_code(n):
                    continue
                name = old_names[i1 + k]
                if name is None:  # the same statement, other comments above it: moved in place
                    moved_stmts.setdefault(statement_code(o), []).append(i1 + k)
                    added.append(j1 + k)
                elif type(o) is not type(n):
                    raise InputError(
                        f"{path}: {_qualified(parent, name)} changed between a function and a class",
                        hint="keep its kind, or write the patchset by hand",
                    )
                elif (
                    isinstance(o, cst.ClassDef)
                    and isinstance(o.body, cst.IndentedBlock)
                    and isinstance(n.body, cst.IndentedBlock)
                    and _class_header(o) == _class_header(n)
                ):
                    middle += _capture_body(o.body.body, n.body.body, _qualified(parent, name), path)
                else:
                    op = {
                        "kind": "replace-definition",
                        "file": path,
                        "definition": _qualified(parent, name),
                        "original-digest": definition_digest(o),
                        "code": definition_code(n),
                    }
                    if _leading(o) != _leading(n):
                        op["comments"] = _leading(n)
                    middle.append(op)
            continue
        for k in range(i1, i2):
            if old_names[k] is not None:
                gone_defs.setdefault(str(old_names[k]).split("[")[0], []).append(k)
            else:
                moved_stmts.setdefault(statement_code(old[k]), []).append(k)
        added += range(j1, j2)
    additions = []
    pending = set(added)
    for j in sorted(added):
        pending.discard(j)
        op = _addition(new, new_names, new_keys, j, parent, path, pending)
        name, code = new_names[j], statement_code(new[j])
        base = name.split("[")[0] if name is not None else None
        if base is not None and gone_defs.get(base):  # a namesake removed here: moved (and maybe changed)
            same = [k for k in gone_defs[base] if statement_code(old[k]) == code]
            k = (same or gone_defs[base])[-1]
            gone_defs[base].remove(k)
            op = {
                "kind": "move-definition",
                "file": path,
                "definition": op["definition"],
                "original-digest": definition_digest(old[k]),
                **{key: v for key, v in op.items() if key not in ("kind", "file", "definition")},
            }
        elif name is None and moved_stmts.get(code):  # the same statement removed here: moved
            moved_stmts[code].pop(0)
            op = {**op, "kind": "move-statement"}
        additions.append(op)
    new_digests = [definition_digest(n) for n, name in zip(new, new_names) if name is not None]
    for k in sorted((k for ks in gone_defs.values() for k in ks), reverse=True):
        op = {
            "kind": "remove-definition",
            "file": path,
            "definition": _qualified(parent, str(old_names[k])),
            "original-digest": definition_digest(old[k]),
        }
        if "[" in str(old_names[k]) and op["original-digest"] in new_digests:  # an identical namesake stays
            op["keep"] = str(new_digests.count(op["original-digest"]))
        removals.append(op)
    for code, left in moved_stmts.items():
        removals += [{"kind": "remove-statement", "file": path, **where, "code": code} for _ in left]
    return removals + middle + additions


def _addition(
    new: Sequence[Any],
    names: Sequence[str | None],
    keys: Sequence[tuple[str, str | None]],
    j: int,
    parent: str | None,
    path: str,
    pending: set[int],
) -> dict[str, str]:
    """``add-definition`` or ``add-statement`` for ``new[j]``, anchored after the statement before it
    when that one is a definition or a statement that occurs once in the body, else before the one
    after it (when that one is in place already: not in ``pending``, the additions still to come),
    else after the nth copy of the statement before it (``occurrence``); at the start when it is
    the first."""
    op: dict[str, str] = {"kind": "add-definition" if names[j] is not None else "add-statement", "file": path}
    if names[j] is not None:
        op["definition"] = _qualified(parent, str(names[j]))
    if parent:
        op["parent"] = parent
    if j > 0:
        kind, value = keys[j - 1]
        if kind == "def":
            op["after-definition"] = str(value)
        elif keys.count(keys[j - 1]) == 1:
            op["after-statement"] = str(value)
        elif j + 1 < len(new) and j + 1 not in pending and (keys[j + 1][0] == "def" or keys.count(keys[j + 1]) == 1):
            op["before-definition" if keys[j + 1][0] == "def" else "before-statement"] = str(keys[j + 1][1])
        else:  # the nth of its copies (those before it are in place when this one is added)
            op["after-statement"] = str(value)
            op["occurrence"] = str(keys[: j - 1].count(keys[j - 1]))
    op["code"] = full_code(new[j])
    return op


def _leading(node: Any) -> str:
    """The blank lines and comments above a statement, as text."""
    whole = full_code(node)
    return whole[: len(whole) - len(statement_code(node))]


def _describe(op: dict[str, str]) -> str:
    """One line of ``patches commit`` / ``patches import`` output for an operation."""
    if "definition" in op:
        return f"{op['kind']} {op['file']} {op['definition']}"
    if "part" in op:
        return f"{op['kind']} {op['file']} {op['part']}"
    first = next(
        (ln.strip() for ln in op.get("code", "").splitlines() if ln.strip() and not ln.lstrip().startswith("#")), ""
    )
    return f"{op['kind']} {op['file']} `{first[:60]}`"


def commit_edit(
    directory: Path, patchsets_dir: Path, pid: str, reason: str, *, versions: str | None = None, force: bool = False
) -> CapturedPatchset:
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
            raise InputError(
                f"{directory}: the saved original of {path} is missing ({directory / STORE / 'originals' / digest})",
                hint=_NEW_EDIT,
            ) from None
        try:
            edited = (directory / path).read_bytes()
        except FileNotFoundError:
            raise InputError(
                f"{directory / path}: deleted; a patchset changes files, it does not delete them"
            ) from None
        if edited == original:
            continue
        file_ops, file_lines = capture_file(path, original, edited, label=str(directory / path))
        ops += file_ops
        lines += file_lines
    if not ops:
        raise InputError(
            f"{directory}: no file differs from the released {edit['distribution']} {edit['version']}",
            hint="edit the files first",
        )
    meta = {
        "id": pid,
        "distribution": edit["distribution"],
        "versions": versions or f"=={edit['version']}",
        "reason": reason,
    }
    write_patchset(
        target,
        meta,
        ops,
        comment=f"Captured by `envforge patches commit` from an edit of {edit['distribution']} {edit['version']}.",
    )
    return CapturedPatchset(target, tuple(lines))


def capture_file(path: str, original: bytes, edited: bytes, *, label: str) -> tuple[list[dict[str, str]], list[str]]:
    """The operations that turn ``original`` into ``edited`` (the bytes of site-packages file
    ``path``), as ``patches commit`` and ``patches import`` write them, and one line describing each
    (:func:`_capture_body` on the module: ``replace-definition`` per innermost changed definition,
    ``remove-definition`` / ``remove-statement`` and ``add-definition`` / ``add-statement`` anchored
    to their neighbours for what was removed, added or moved). ``label`` names the file in errors.

    :raises InputError: a file that does not parse or decode; the encoding, the line endings or the
        final newline changed; a definition that changed between function and class.
    """
    import libcst as cst  # lazy: ~0.5 s to import; `envforge` starts without it

    check_text(edited.decode("utf-8", "replace"), label)  # never a parser crash or a quadratic stall
    check_text(original.decode("utf-8", "replace"), f"{label} (as released)")
    try:
        old, new = cst.parse_module(original), cst.parse_module(edited)
    except (SyntaxError, UnicodeDecodeError):  # an undeclared encoding (PEP 263): name the byte
        decode_utf8(edited, label=label)
        raise InputError(f"{label}: cannot be read in its declared encoding (PEP 263)") from None
    except cst.ParserSyntaxError as exc:
        raise InputError(f"{label}: does not parse: {exc.message} (line {exc.raw_line})") from None
    if (old.encoding, old.default_newline, old.has_trailing_newline) != (
        new.encoding,
        new.default_newline,
        new.has_trailing_newline,
    ):
        raise InputError(
            f"{path}: the file's encoding, line endings or final newline changed", hint="keep them as released"
        )
    ops = _capture_body(old.body, new.body, None, path)
    for part in ("header", "footer"):
        before, after = module_comments(old, part), module_comments(new, part)
        if before != after:
            ops.append(
                {"kind": "replace-module-comments", "file": path, "part": part, "before": before, "after": after}
            )
    return ops, [_describe(op) for op in ops]


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
        raise InputError(
            f"--versions {versions!r} is not a PEP 440 version specifier",
            hint="e.g. --versions '>=0.5.8,<0.5.11', or leave it out for ==<the release>",
        ) from None


def write_patchset(
    target: Path,
    meta: dict[str, str],
    ops: list[dict[str, str]],
    *,
    comment: str,
    check: Callable[[Path], None] | None = None,
) -> None:
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
