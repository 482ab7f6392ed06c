"""Plan patchsets on a site-packages directory: what every operation would do, nothing written.

:func:`plan` is pure: it reads the installed files, the installed versions (``*.dist-info``) and the
patch manifest, runs every operation on an in-memory tree and returns a
:class:`~envforge.patching.states.PatchReport` with one state per operation
(:mod:`envforge.patching.states`). The edited bytes are those :func:`envforge.patching.applying.apply`
writes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.core.errors import CheckFailed, InputError
from envforge.core.fs import sha256_hex
from envforge.installed.editable import EditableInstall, editable_install
from envforge.patching.manifest import Manifest, intent_path, read_installed, read_intent, read_manifest, rebuild_hint
from envforge.patching.memo import CachedFile, ResultCache
from envforge.patching.operations import OpContext, Operation, Outcome
from envforge.patching.patchset import Patchset, PatchsetRequirement, order_patchsets
from envforge.patching.resolution import shadow_fix
from envforge.patching.soundness import introduced_problems
from envforge.patching.source import UnencodableEdit, decode_source, parse_source
from envforge.patching.states import (
    ALREADY_APPLIED,
    APPLIED,
    DRIFTED,
    OUT_OF_RANGE,
    SHADOWED,
    UPSTREAM_FIXED,
    FileChange,
    OperationResult,
    PatchReport,
    State,
    Unmet,
)

__all__ = ["editable_message", "evaluate_file", "inside", "installed_version", "plan", "refuse_interrupted"]


def installed_version(site_packages: Path, distribution: str) -> str | None:
    """Version of ``distribution`` installed in ``site_packages``, or None.

    Read from the ``<name>-<version>.dist-info`` directory name, which the binary distribution
    format spec (packaging.python.org, "Recording installed projects") makes normalized and
    unambiguous (the name has no ``-``); this avoids importing ``importlib.metadata`` (and email)
    on the fast path.
    """
    want = canonicalize_name(distribution)
    for info in site_packages.glob("*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].partition("-")
        if version and canonicalize_name(name) == want:
            return version
    return None


def evaluate_file(
    ps: Patchset, path: str, before: bytes, ctx: OpContext, already: bool
) -> tuple[list[tuple[Operation, State, Outcome]], bytes]:
    """Run ``ps``'s operations on ``path`` (bytes ``before``): ``([(op, state, outcome)], after)``.

    ``already`` says the manifest records this file as patched by ``ps`` (``holds`` then means
    ``already-applied``, else ``upstream-fixed``). An edited file must compile and introduce no
    undefined name (:mod:`envforge.patching.soundness`) and be written back in the encoding the file
    declares (PEP 263, B30: a character it cannot hold is named); otherwise every operation that
    changed it is ``drifted`` with the finding and ``after`` is ``before``. Only the top-level statements the operations
    name are parsed with libcst (:mod:`envforge.patching.source`). Never raises on the code it reads.
    """
    import libcst as cst  # lazy: libcst costs ~0.5 s to import; `patches list` and the CLI start without it

    ops = [op for op in ps.operations if op.file == path]
    try:
        tree = ast.parse(before)
        wanted: set[int] | None = set()
        for op in ops:
            w = op.wanted(tree)
            wanted = None if w is None or wanted is None else wanted | w
        source = parse_source(before, tree, wanted)
    except (SyntaxError, ValueError, cst.ParserSyntaxError) as exc:
        return [(op, DRIFTED, Outcome("drifted", f"file does not parse: {exc}")) for op in ops], before
    module = source.module
    out: list[tuple[Operation, State, Outcome]] = []
    for op in ops:
        outcome = _safe_run(op, module, ctx)
        if outcome.status == "changed":
            module = outcome.module
        state: State = (
            APPLIED
            if outcome.status == "changed"
            else DRIFTED
            if outcome.status == "drifted"
            else ALREADY_APPLIED
            if already
            else UPSTREAM_FIXED
        )
        out.append((op, state, outcome))
    try:
        after = source.render(module)
    except UnencodableEdit as exc:  # B30: written back in the declared encoding, or not at all
        why = f"the patched file cannot be written back: {exc}; nothing written"
        fix = (
            f"write {exc.char!r} as the escape {ascii(exc.char)[1:-1]} (in a string literal) in the operation's "
            f"code, so the file stays {exc.encoding}"
        )
        return [
            (op, DRIFTED, Outcome("drifted", why, fix=fix)) if state == APPLIED else (op, state, o)
            for op, state, o in out
        ], before
    if after != before:
        problems = introduced_problems(path, before, after)
        if problems:  # field case B29: never "applied" when the patched module cannot run
            why = "the patched file would not run: " + "; ".join(problems) + "; nothing written"
            fix = (
                "change the operation so the patched module compiles and defines every name it uses "
                "(or narrow `versions` to exclude this release)"
            )
            out = [
                (op, DRIFTED, Outcome("drifted", why, fix=fix)) if state == APPLIED else (op, state, o)
                for op, state, o in out
            ]
            return out, before
    return out, after


def _safe_run(op: Operation, module: Any, ctx: OpContext) -> Outcome:
    try:
        return op.run(module, ctx)
    except Exception as exc:  # noqa: BLE001 - an operation never raises: report it as a drift
        return Outcome("drifted", f"operation failed: {type(exc).__name__}: {exc}")


@dataclass
class _Run:
    """Mutable state while planning several patchsets in order."""

    site_packages: Path
    manifest: Manifest
    cache: ResultCache | None = None
    contents: dict[str, bytes | None] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)
    holds: set[str] = field(default_factory=set)  # patchset ids whose effect holds after the run
    results: list[OperationResult] = field(default_factory=list)
    changes: list[FileChange] = field(default_factory=list)
    unmet: list[Unmet] = field(default_factory=list)
    activations: list[tuple[str, str]] = field(default_factory=list)
    shadowed: Mapping[str, str] = field(default_factory=dict)  # path -> why the interpreter does not import it

    def version(self, dist: str) -> str | None:
        if dist not in self.versions:
            self.versions[dist] = installed_version(self.site_packages, dist)
        return self.versions[dist]

    def read(self, path: str) -> bytes | None:
        if path not in self.contents:
            try:
                self.contents[path] = read_installed(self.site_packages, inside(self.site_packages, path))
            except (FileNotFoundError, NotADirectoryError):
                self.contents[path] = None
        return self.contents[path]

    def read_text(self, path: str) -> str | None:
        data = self.read(path)
        return None if data is None else decode_source(data)


def inside(site_packages: Path, path: str) -> Path:
    """``site_packages / path``, refused unless it stays under ``site_packages``: ``path`` comes
    from a patchset or from ``patches.json`` (which a person may edit), and apply and revert write
    there. The parent directory is resolved (symlinks followed) and the last part must be a name,
    so a symlinked file itself (uv ``--link-mode=symlink``) is still replaced in place, never
    followed out of the environment.

    :raises InputError: ``path`` is absolute, has ``..`` parts, or resolves outside ``site_packages``.
    """
    target = site_packages / path
    root = site_packages.resolve()
    parent = target.parent.resolve()
    if target.name in ("", ".", "..") or (parent != root and root not in parent.parents):
        raise InputError(
            f"{path}: outside site-packages {site_packages} (resolves to {parent / target.name}); "
            "envforge reads and writes only files under site-packages",
            hint="fix `file` in the patchset, or the path in .envforge/patches.json "
            "(or rebuild the environment with `envforge build`)",
        )
    return target


def plan(
    site_packages: Path,
    patchsets: Iterable[Patchset],
    *,
    cache: ResultCache | None = None,
    shadowed: Mapping[str, str] | None = None,
) -> PatchReport:
    """Compute every operation's state on ``site_packages`` without writing anything. With
    ``cache`` (:class:`envforge.patching.memo.ResultCache`), a file whose bytes, inputs, patchset
    and engine were seen before takes its states and patched bytes from there (no parse).
    ``shadowed`` maps a file (relative path) the environment's interpreter does not import to why
    (:func:`envforge.patching.resolution.not_imported`, B43): every operation on it is ``shadowed``
    and its patchset is not written, as for a drift.

    :raises InputError: the patch manifest is unreadable; a requirement cycle.
    """
    refuse_interrupted(site_packages)
    run = _Run(site_packages, read_manifest(site_packages) or Manifest(), cache, shadowed=dict(shadowed or {}))
    for ps in order_patchsets(list(patchsets)):
        _plan_patchset(run, ps)
    return PatchReport(site_packages, tuple(run.results), tuple(run.changes), tuple(run.unmet), tuple(run.activations))


def refuse_interrupted(site_packages: Path) -> None:
    """Refuse to read states from files an interrupted write may have left half written.

    Used by every plan (dry run, verify's patch-states), revert and ``patches diff``.

    :raises CheckFailed: an intent record is there (a write was interrupted): the files may be
        half written, so no state read from them would be true. The message says which of the
        record's files have their bytes from after the write and which from before.
    """
    intent = read_intent(site_packages)
    if intent is not None:
        files = ", ".join(f.path for f in intent.files)
        states: dict[str, list[str]] = {}
        for f in intent.files:
            states.setdefault(_written(site_packages, f.path, f.before_sha256, f.after_sha256), []).append(f.path)
        found = "; ".join(f"{k}: {', '.join(v)}" for k, v in states.items())
        raise CheckFailed(
            f"an `apply-patches{' --revert' if intent.action == 'revert' else ''}` of "
            f"{', '.join(intent.patchsets)} was interrupted while writing {files} "
            f"(record {intent_path(site_packages)}): some of these files may be written and "
            f"others not ({found})",
            hint="run `envforge apply-patches` (or `envforge verify`) on the "
            "environment: it rolls the interrupted write back first",
        )


def _written(site_packages: Path, path: str, before: str, after: str) -> str:
    """Which bytes a file an interrupted write names has now: ``written`` (after), ``not written``
    (before) or ``changed otherwise`` (neither, missing, or not a regular file, which is never opened)."""
    try:
        target = inside(site_packages, path)
        if not target.is_file():  # missing, a directory, a FIFO (never opened)
            return "changed otherwise"
        current = sha256_hex(target.read_bytes())
    except (OSError, InputError):
        return "changed otherwise"
    return {after: "written", before: "not written"}.get(current, "changed otherwise")


def _plan_patchset(run: _Run, ps: Patchset) -> None:
    version = run.version(ps.distribution)
    if version is None or not ps.specifier.contains(version, prereleases=True):
        found = f"installed {ps.distribution} {version}" if version else f"{ps.distribution} is not installed"
        run.results += [
            OperationResult(
                ps.id,
                op.file,
                op.describe(),
                OUT_OF_RANGE,
                f"{found}; {ps.id} is written for {ps.distribution}{ps.versions}",
            )
            for op in ps.operations
        ]
        return
    editable = editable_install(run.site_packages, ps.distribution)
    if editable is not None:  # B21: the code is in a checkout, not in site-packages
        run.results += [
            OperationResult(
                ps.id, op.file, op.describe(), DRIFTED, editable_message(ps, op.file, editable, run.site_packages)
            )
            for op in ps.operations
        ]
        return
    missing = [r for r in ps.requires if not _met(run, r)]
    if missing:
        run.unmet += [_unmet_message(run, ps, r) for r in missing]
        return
    results, changes = _evaluate_patchset(run, ps, version)
    results = [_shadow(run, ps, r) for r in results]
    drifted = any(r.state in (DRIFTED, SHADOWED) for r in results)
    if drifted:
        why = (
            "another file of this patchset is not the one the interpreter imports"
            if any(r.state == SHADOWED for r in results)
            else "another operation of this patchset drifted"
        )
        results = [
            r
            if r.state != APPLIED
            else OperationResult(r.patchset, r.file, r.operation, r.state, f"{r.message}; not written: {why}")
            for r in results
        ]
    run.results += results
    if drifted:
        return
    run.holds.add(ps.id)
    for c in changes:
        run.contents[c.path] = c.after
    run.changes += changes
    if ps.activation and any(r.state in (APPLIED, ALREADY_APPLIED) for r in results):
        run.activations.append((ps.id, ps.activation))


def _evaluate_patchset(run: _Run, ps: Patchset, version: str) -> tuple[list[OperationResult], list[FileChange]]:
    ctx = OpContext(read_text=run.read_text, patchset_dir=ps.path.parent)
    results: list[OperationResult] = []
    changes: list[FileChange] = []
    recorded = run.manifest.patchset(ps.id)
    for path in ps.files:
        before = run.read(path)
        ops = [op for op in ps.operations if op.file == path]
        rec = run.manifest.file(ps.id, path)
        if before is None:
            results += [_drift(ps, op, version, "file is missing") for op in ops]
            continue
        if rec and recorded and recorded.digest == ps.digest and sha256_hex(before) == rec.new_sha256:
            results += [
                OperationResult(
                    ps.id, path, op.describe(), ALREADY_APPLIED, "recorded in the patch manifest; file unchanged since"
                )
                for op in ops
            ]
            continue
        edited = _hand_edit(run, ps, path, before) if rec and not any(c.path == path for c in run.changes) else None
        if edited:
            results += [OperationResult(ps.id, path, op.describe(), DRIFTED, edited) for op in ops]
            continue
        already = rec is not None
        key = run.cache.key(ps, path, before, already, run.read) if run.cache is not None else ""
        hit = run.cache.get(key, before) if run.cache is not None else None
        if hit is not None and len(hit.operations) == len(ops):
            found = [(op, state, detail, fix) for op, (state, detail, fix) in zip(ops, hit.operations, strict=True)]
            after = hit.after
        else:
            outcomes, after = evaluate_file(ps, path, before, ctx, already=already)
            found = [(op, state, o.detail, o.fix) for op, state, o in outcomes]
            if run.cache is not None:
                run.cache.put(key, before, CachedFile(tuple((st, d, f) for _, st, d, f in found), after))
        results += [
            _drift(ps, op, version, detail, fix)
            if state == DRIFTED
            else OperationResult(ps.id, path, op.describe(), state, detail)
            for op, state, detail, fix in found
        ]
        if after != before:
            changes.append(FileChange(ps.id, path, before, after))
    return results, changes


def _shadow(run: _Run, ps: Patchset, r: OperationResult) -> OperationResult:
    """``r`` as ``shadowed`` when the interpreter does not import its file (B43); a drift stays a drift."""
    why = run.shadowed.get(r.file)
    if why is None or r.state == DRIFTED:
        return r
    done = {
        APPLIED: "the edit would apply",
        ALREADY_APPLIED: "the file is patched",
        UPSTREAM_FIXED: "the source already has the fix",
    }.get(r.state, r.state)
    return OperationResult(
        ps.id,
        r.file,
        r.operation,
        SHADOWED,
        f"{ps.id}: {r.file}: {done}, but {why}: the patched source never runs"
        f"{'; nothing written' if r.state == APPLIED else ''}. Next step: "
        f"{shadow_fix(ps.distribution, ps.path.name)}",
    )


def _hand_edit(run: _Run, ps: Patchset, path: str, before: bytes) -> str | None:
    """The drift message when ``path`` (as on disk) is neither the bytes envforge last wrote nor the
    pristine original while the distribution's version is the one patched (so not a reinstall)."""
    entries = [f for f in run.manifest.files if f.path == path]
    digest = sha256_hex(before)
    if digest in (entries[-1].new_sha256, entries[0].original_sha256):
        return None
    last = run.manifest.patchset(entries[-1].patchset)
    if last is not None and run.version(last.distribution) != last.version:
        return None  # reinstalled at another version: the file is a fresh original
    return (
        f"{ps.id}: {path}: changed since envforge patched it (manifest sha256 {entries[-1].new_sha256}, "
        f"now {digest}); `envforge apply-patches --revert` refuses it too. Next step: undo the edit, or "
        f"{rebuild_hint(run.site_packages)}; to keep the change, write it as a patchset"
    )


def editable_message(ps: Patchset, file: str, ed: EditableInstall, site_packages: Path) -> str:
    """Why ``ps`` cannot act on an editable install ``ed`` (:class:`envforge.installed.editable.EditableInstall`)
    and the two ways forward: its diff applied in the checkout, or the released wheel (B21)."""
    strip = 1 + len([p for p in ps.upstream_prefix.split("/") if p])
    return (
        f"{ps.id}: {file}: {ed.distribution} {ed.version} is an editable install from {ed.project} "
        f"(PEP 610 direct_url.json: dir_info.editable): its code is in that checkout, not in site-packages, "
        f"so nothing was written. Next step: apply the patchset's diff in the checkout (`envforge patches "
        f"export {ps.id} --site-packages {site_packages} -o {ps.id}.diff`, then `patch -p{strip} -d "
        f"{ed.import_root(file)} < {ps.id}.diff`), or install the released wheel instead (`uv pip install "
        f"--python <env>/bin/python {ed.distribution}=={ed.version}`) and run apply-patches again"
    )


def _drift(ps: Patchset, op: Operation, version: str, detail: str, fix: str = "") -> OperationResult:
    if fix:  # the patchset, not the installed code, is wrong
        msg = (
            f"{ps.id}: {op.file}: {detail}; installed {ps.distribution} {version}. Next step: in {ps.path.name}, {fix}"
        )
        return OperationResult(ps.id, op.file, op.describe(), DRIFTED, msg)
    msg = (
        f"{ps.id}: {op.file}: {detail}; anchor {op.anchor_text()}; installed {ps.distribution} "
        f"{version}, patchset written for {ps.distribution}{ps.versions}. Next step: read the "
        f"installed file, then update the anchor in {ps.path.name} or narrow its `versions` to "
        f"exclude {version}"
    )
    return OperationResult(ps.id, op.file, op.describe(), DRIFTED, msg)


def _met(run: _Run, req: PatchsetRequirement) -> bool:
    for alt in req.any_of:
        if alt.patchset is not None:
            if alt.patchset in run.holds or run.manifest.patchset(alt.patchset) is not None:
                return True
        elif alt.distribution is not None and alt.specifier is not None:
            v = run.version(alt.distribution)
            if v is not None and alt.specifier.contains(v, prereleases=True):
                return True
    return False


def _unmet_message(run: _Run, ps: Patchset, req: PatchsetRequirement) -> Unmet:
    why = []
    for alt in req.any_of:
        if alt.patchset is not None:
            why.append(f"patchset {alt.patchset} is not applied")
        elif alt.distribution is not None:
            v = run.version(alt.distribution)
            why.append(f"{alt.distribution} is {v}" if v else f"{alt.distribution} is not installed")
    msg = f"{ps.id} refused: requirement `{req.text}` is unmet ({'; '.join(why)})" + (
        f"; {req.reason}" if req.reason else ""
    )
    return Unmet(ps.id, req.text, msg)
