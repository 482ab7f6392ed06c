"""Plan, apply and revert patchsets on a site-packages directory.

:func:`plan` is pure: it reads the installed files, the installed versions (``*.dist-info``) and the
patch manifest, runs every operation on an in-memory tree and returns a :class:`PatchReport` with
one state per operation (docs/design.md decision 4):

``applied``         the edit is (or, in a plan or dry run, would be) made,
``already-applied`` envforge made it before (manifest) and it still holds: re-running writes nothing,
``upstream-fixed``  the installed release already does it: the patch is obsolete there,
``out-of-range``    the distribution is absent or its version is outside the patchset's specifier,
``drifted``         the anchor is missing or ambiguous: an error, never a silent no-op.

:func:`apply` executes the plan patchset by patchset, all files of a patchset or none: each file is
written to a temp file and ``os.replace``d (field case B09), stale ``__pycache__`` entries of the
patched modules are removed (B10), and the originals and new sha256s go into the manifest
(:mod:`envforge.patching.manifest`). :func:`revert` restores the originals byte-exact.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from packaging.utils import canonicalize_name

from envforge.patching.operations import OpContext, Operation, Outcome
from envforge.patching.manifest import rebuild_hint
from envforge.patching.memo import ResultCache
from envforge.patching.patchset import Patchset, PatchsetRequirement, order_patchsets
from envforge.core.textfile import read_state

__all__ = [
    "ALREADY_APPLIED",
    "APPLIED",
    "DRIFTED",
    "OUT_OF_RANGE",
    "REVERTED",
    "STATES",
    "UPSTREAM_FIXED",
    "FileChange",
    "OperationResult",
    "PatchReport",
    "Unmet",
    "apply",
    "evaluate_file",
    "inside",
    "installed_version",
    "plan",
    "recover",
    "revert",
    "unified_diff",
]

APPLIED = "applied"
ALREADY_APPLIED = "already-applied"
UPSTREAM_FIXED = "upstream-fixed"
OUT_OF_RANGE = "out-of-range"
DRIFTED = "drifted"
REVERTED = "reverted"  # revert only
STATES = (APPLIED, ALREADY_APPLIED, UPSTREAM_FIXED, OUT_OF_RANGE, DRIFTED)


@dataclass(frozen=True, slots=True)
class OperationResult:
    """One operation's state. ``file`` is relative to site-packages; ``message`` says what was
    found or done; for ``drifted`` it names patchset, file, anchor, installed version, range and
    the next step."""

    patchset: str
    file: str
    operation: str
    state: str
    message: str


@dataclass(frozen=True, slots=True)
class FileChange:
    """A file a patchset changes: bytes ``before`` and ``after`` (relative ``path``)."""

    patchset: str
    path: str
    before: bytes
    after: bytes


@dataclass(frozen=True, slots=True)
class Unmet:
    """A patchset refused because none of a requirement's alternatives is met."""

    patchset: str
    requirement: str
    message: str


@dataclass(frozen=True, slots=True)
class PatchReport:
    """What plan / apply / revert found and did.

    ``changes`` are the files written (apply), or that would be (plan, dry run); ``written`` says
    which. ``activations`` maps an applied (or already-applied) patchset to the launch flag it
    needs. ``ok`` is false when an operation drifted or a requirement is unmet.
    """

    site_packages: Path
    results: tuple[OperationResult, ...] = ()
    changes: tuple[FileChange, ...] = ()
    unmet: tuple[Unmet, ...] = ()
    activations: tuple[tuple[str, str], ...] = ()
    written: bool = False
    recovered: tuple[str, ...] = ()  # what :func:`recover` did first (an interrupted write)

    @property
    def ok(self) -> bool:
        return not self.unmet and all(r.state != DRIFTED for r in self.results)

    @property
    def errors(self) -> tuple[str, ...]:
        """Every drift message and refusal, one string each."""
        return (*(r.message for r in self.results if r.state == DRIFTED),
                *(u.message for u in self.unmet))

    def diff(self, prefixes: dict[str, str] | None = None) -> str:
        """The unified diff of ``changes`` (``a/``/``b/`` paths; ``prefixes`` per patchset id)."""
        return "".join(unified_diff(c, (prefixes or {}).get(c.patchset, "")) for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (bytes left out; ``diff`` included)."""
        return {
            "site-packages": str(self.site_packages), "written": self.written, "ok": self.ok,
            "results": [{"patchset": r.patchset, "file": r.file, "operation": r.operation,
                         "state": r.state, "message": r.message} for r in self.results],
            "unmet": [{"patchset": u.patchset, "requirement": u.requirement, "message": u.message}
                      for u in self.unmet],
            "activations": [{"patchset": p, "flag": f} for p, f in self.activations],
            "files": [c.path for c in self.changes],
            "recovered": list(self.recovered),
        }


def unified_diff(change: FileChange, prefix: str = "") -> str:
    """``difflib`` unified diff of one change, paths ``a/<prefix><path>`` and ``b/<prefix><path>``."""
    import difflib

    from envforge.patching.source import lines_of

    before = lines_of(change.before.decode("utf-8"))
    after = lines_of(change.after.decode("utf-8"))
    name = f"{prefix}{change.path}"
    return "".join(difflib.unified_diff(before, after, f"a/{name}", f"b/{name}"))


def installed_version(site_packages: Path, distribution: str) -> str | None:
    """Version of ``distribution`` installed in ``site_packages``, or None.

    Read from the ``<name>-<version>.dist-info`` directory name, which the binary distribution
    format spec (packaging.python.org, "Recording installed projects") makes normalized and
    unambiguous (the name has no ``-``); this avoids importing ``importlib.metadata`` (and email)
    on the fast path.
    """
    want = canonicalize_name(distribution)
    for info in site_packages.glob("*.dist-info"):
        name, _, version = info.name[:-len(".dist-info")].partition("-")
        if version and canonicalize_name(name) == want:
            return version
    return None


def evaluate_file(ps: Patchset, path: str, before: bytes, ctx: OpContext,
                  already: bool) -> tuple[list[tuple[Operation, str, Outcome]], bytes]:
    """Run ``ps``'s operations on ``path`` (bytes ``before``): ``([(op, state, outcome)], after)``.

    ``already`` says the manifest records this file as patched by ``ps`` (``holds`` then means
    ``already-applied``, else ``upstream-fixed``). An edited file must compile and introduce no
    undefined name (:mod:`envforge.patching.soundness`); otherwise every operation that changed
    it is ``drifted`` with the finding and ``after`` is ``before``. Only the top-level statements the operations
    name are parsed with libcst (:mod:`envforge.patching.source`). Never raises on the code it reads.
    """
    import ast

    import libcst as cst

    from envforge.patching.source import parse_source

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
    out: list[tuple[Operation, str, Outcome]] = []
    for op in ops:
        outcome = _safe_run(op, module, ctx)
        if outcome.status == "changed":
            module = outcome.module
        state = {"changed": APPLIED, "drifted": DRIFTED}.get(
            outcome.status, ALREADY_APPLIED if already else UPSTREAM_FIXED)
        out.append((op, state, outcome))
    after = source.render(module)
    if after != before:
        from envforge.patching.soundness import introduced_problems

        problems = introduced_problems(path, before, after)
        if problems:  # field case B29: never "applied" when the patched module cannot run
            why = ("the patched file would not run: " + "; ".join(problems) + "; nothing written")
            fix = ("change the operation so the patched module compiles and defines every name it uses "
                   "(or narrow `versions` to exclude this release)")
            out = [(op, DRIFTED, Outcome("drifted", why, fix=fix)) if state == APPLIED else (op, state, o)
                   for op, state, o in out]
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
    manifest: Any
    cache: Any = None  # memo.ResultCache | None
    contents: dict[str, bytes | None] = field(default_factory=dict)
    versions: dict[str, str | None] = field(default_factory=dict)
    holds: set[str] = field(default_factory=set)  # patchset ids whose effect holds after the run
    results: list[OperationResult] = field(default_factory=list)
    changes: list[FileChange] = field(default_factory=list)
    unmet: list[Unmet] = field(default_factory=list)
    activations: list[tuple[str, str]] = field(default_factory=list)

    def version(self, dist: str) -> str | None:
        if dist not in self.versions:
            self.versions[dist] = installed_version(self.site_packages, dist)
        return self.versions[dist]

    def read(self, path: str) -> bytes | None:
        if path not in self.contents:
            try:
                self.contents[path] = inside(self.site_packages, path).read_bytes()
            except (FileNotFoundError, NotADirectoryError):
                self.contents[path] = None
        return self.contents[path]

    def read_text(self, path: str) -> str | None:
        data = self.read(path)
        return None if data is None else data.decode("utf-8")


def inside(site_packages: Path, path: str) -> Path:
    """``site_packages / path``, refused unless it stays under ``site_packages``: ``path`` comes
    from a patchset or from ``patches.json`` (which a person may edit), and apply and revert write
    there. The parent directory is resolved (symlinks followed) and the last part must be a name,
    so a symlinked file itself (uv ``--link-mode=symlink``) is still replaced in place, never
    followed out of the environment.

    :raises InputError: ``path`` is absolute, has ``..`` parts, or resolves outside ``site_packages``.
    """
    from envforge.core.errors import InputError

    target = site_packages / path
    root = site_packages.resolve()
    parent = target.parent.resolve()
    if target.name in ("", ".", "..") or (parent != root and root not in parent.parents):
        raise InputError(f"{path}: outside site-packages {site_packages} (resolves to {parent / target.name}); "
                         "envforge reads and writes only files under site-packages",
                         hint="fix `file` in the patchset, or the path in .envforge/patches.json "
                              "(or rebuild the environment with `envforge build`)")
    return target


def plan(site_packages: Path, patchsets: Iterable[Patchset], *, cache: ResultCache | None = None) -> PatchReport:
    """Compute every operation's state on ``site_packages`` without writing anything. With
    ``cache`` (:class:`envforge.patching.memo.ResultCache`), a file whose bytes, inputs, patchset
    and engine were seen before takes its states and patched bytes from there (no parse).

    :raises InputError: the patch manifest is unreadable; a requirement cycle.
    """
    from envforge.patching.manifest import Manifest, read_manifest

    _refuse_interrupted(site_packages)
    run = _Run(site_packages, read_manifest(site_packages) or Manifest(), cache)
    for ps in order_patchsets(list(patchsets)):
        _plan_patchset(run, ps)
    return PatchReport(site_packages, tuple(run.results), tuple(run.changes), tuple(run.unmet),
                       tuple(run.activations))


def _refuse_interrupted(site_packages: Path) -> None:
    """:raises CheckFailed: an intent record is there (a write was interrupted): the files may be
    half written, so no state read from them would be true."""
    from envforge.core.errors import CheckFailed
    from envforge.patching.manifest import intent_path, read_intent

    intent = read_intent(site_packages)
    if intent is not None:
        files = ", ".join(f.path for f in intent.files)
        raise CheckFailed(f"an `apply-patches{' --revert' if intent.action == 'revert' else ''}` of "
                          f"{', '.join(intent.patchsets)} was interrupted while writing {files} "
                          f"(record {intent_path(site_packages)}): some of these files may be written and "
                          f"others not", hint="run `envforge apply-patches` (or `envforge verify`) on the "
                                              "environment: it rolls the interrupted write back first")


def _plan_patchset(run: _Run, ps: Patchset) -> None:
    version = run.version(ps.distribution)
    if version is None or not ps.specifier.contains(version, prereleases=True):
        found = f"installed {ps.distribution} {version}" if version else f"{ps.distribution} is not installed"
        run.results += [OperationResult(ps.id, op.file, op.describe(), OUT_OF_RANGE,
                                        f"{found}; {ps.id} is written for {ps.distribution}{ps.versions}")
                        for op in ps.operations]
        return
    from envforge.installed.editable import editable_install

    editable = editable_install(run.site_packages, ps.distribution)
    if editable is not None:  # B21: the code is in a checkout, not in site-packages
        run.results += [OperationResult(ps.id, op.file, op.describe(), DRIFTED,
                                        editable_message(ps, op.file, editable, run.site_packages))
                        for op in ps.operations]
        return
    missing = [r for r in ps.requires if not _met(run, r)]
    if missing:
        run.unmet += [_unmet_message(run, ps, r) for r in missing]
        return
    results, changes = _evaluate_patchset(run, ps, version)
    drifted = any(r.state == DRIFTED for r in results)
    if drifted:
        results = [r if r.state != APPLIED else
                   OperationResult(r.patchset, r.file, r.operation, r.state,
                                   r.message + "; not written: another operation of this patchset drifted")
                   for r in results]
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
    from envforge.patching.manifest import sha256_hex

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
            results += [OperationResult(ps.id, path, op.describe(), ALREADY_APPLIED,
                                        "recorded in the patch manifest; file unchanged since") for op in ops]
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
                from envforge.patching.memo import CachedFile

                run.cache.put(key, before, CachedFile(tuple((st, d, f) for _, st, d, f in found), after))
        results += [_drift(ps, op, version, detail, fix) if state == DRIFTED else
                    OperationResult(ps.id, path, op.describe(), state, detail)
                    for op, state, detail, fix in found]
        if after != before:
            changes.append(FileChange(ps.id, path, before, after))
    return results, changes


def _hand_edit(run: _Run, ps: Patchset, path: str, before: bytes) -> str | None:
    """The drift message when ``path`` (as on disk) is neither the bytes envforge last wrote nor the
    pristine original while the distribution's version is the one patched (so not a reinstall)."""
    from envforge.patching.manifest import sha256_hex

    entries = [f for f in run.manifest.files if f.path == path]
    digest = sha256_hex(before)
    if digest in (entries[-1].new_sha256, entries[0].original_sha256):
        return None
    last = run.manifest.patchset(entries[-1].patchset)
    if last is not None and run.version(last.distribution) != last.version:
        return None  # reinstalled at another version: the file is a fresh original
    return (f"{ps.id}: {path}: changed since envforge patched it (manifest sha256 {entries[-1].new_sha256}, "
            f"now {digest}); `envforge apply-patches --revert` refuses it too. Next step: undo the edit, or "
            f"{rebuild_hint(run.site_packages)}; to keep the change, write it as a patchset")


def editable_message(ps: Patchset, file: str, ed: Any, site_packages: Path) -> str:
    """Why ``ps`` cannot act on an editable install ``ed`` (:class:`envforge.installed.editable.EditableInstall`)
    and the two ways forward: its diff applied in the checkout, or the released wheel (B21)."""
    strip = 1 + len([p for p in ps.upstream_prefix.split("/") if p])
    return (f"{ps.id}: {file}: {ed.distribution} {ed.version} is an editable install from {ed.project} "
            f"(PEP 610 direct_url.json: dir_info.editable): its code is in that checkout, not in site-packages, "
            f"so nothing was written. Next step: apply the patchset's diff in the checkout (`envforge patches "
            f"export {ps.id} --site-packages {site_packages} -o {ps.id}.diff`, then `patch -p{strip} -d "
            f"{ed.import_root(file)} < {ps.id}.diff`), or install the released wheel instead (`uv pip install "
            f"--python <env>/bin/python {ed.distribution}=={ed.version}`) and run apply-patches again")


def _drift(ps: Patchset, op: Operation, version: str, detail: str, fix: str = "") -> OperationResult:
    if fix:  # the patchset, not the installed code, is wrong
        msg = f"{ps.id}: {op.file}: {detail}; installed {ps.distribution} {version}. Next step: in {ps.path.name}, {fix}"
        return OperationResult(ps.id, op.file, op.describe(), DRIFTED, msg)
    msg = (f"{ps.id}: {op.file}: {detail}; anchor {op.anchor_text()}; installed {ps.distribution} "
           f"{version}, patchset written for {ps.distribution}{ps.versions}. Next step: read the "
           f"installed file, then update the anchor in {ps.path.name} or narrow its `versions` to "
           f"exclude {version}")
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
    msg = (f"{ps.id} refused: requirement `{req.text}` is unmet ({'; '.join(why)})"
           + (f"; {req.reason}" if req.reason else ""))
    return Unmet(ps.id, req.text, msg)


def apply(site_packages: Path, patchsets: Iterable[Patchset], *, dry_run: bool = False,
          cache: ResultCache | None = None) -> PatchReport:
    """Plan, then write every patchset that neither drifted nor was refused, in one journaled
    write (:func:`_journaled`: all their files or none, across crashes). With ``dry_run`` nothing
    is written (the report's ``changes`` hold the diff).

    :raises InputError: unreadable manifest; :raises OSError: a file could not be written (the
        files of that patchset already replaced are restored first).
    """
    from envforge.patching.manifest import Manifest, read_manifest

    recovered = () if dry_run else recover(site_packages)
    ordered = order_patchsets(list(patchsets))
    report = replace(plan(site_packages, ordered, cache=cache), recovered=recovered)
    if dry_run:
        return report
    manifest = read_manifest(site_packages) or Manifest()
    _refresh_digests(site_packages, ordered, report, manifest)
    if not report.changes:
        return report
    manifest = read_manifest(site_packages) or Manifest()
    versions = {ps.distribution: installed_version(site_packages, ps.distribution) for ps in ordered}
    by_id = {ps.id: ps for ps in ordered}
    ids = list(dict.fromkeys(c.patchset for c in report.changes))
    for pid in ids:
        ps = by_id[pid]
        mine = [x for x in report.changes if x.patchset == pid]
        manifest = _record_patchset(ps, mine, manifest, versions[ps.distribution] or "")
    # one journaled write for every patchset of this run: fewer fsyncs, and all files or none
    _journaled(site_packages, "apply", ids, report.changes, manifest)
    return replace(report, written=True)


def _refresh_digests(sp: Path, ordered: Sequence[Patchset], report: PatchReport, manifest: Any) -> None:
    """Record the current digest of a patchset whose file changed (comments, reason) while every
    edit it makes is still in place, so the manifest names the patchset file in use."""
    from envforge.patching.manifest import Manifest, write_manifest

    changed = {c.patchset for c in report.changes}
    fresh = {ps.id: ps.digest for ps in ordered if ps.id not in changed
             and (rec := manifest.patchset(ps.id)) is not None and rec.digest != ps.digest
             and all(r.state == ALREADY_APPLIED for r in report.results if r.patchset == ps.id)}
    if fresh:
        records = tuple(replace(p, digest=fresh.get(p.id, p.digest)) for p in manifest.patchsets)
        write_manifest(sp, Manifest(records, manifest.files))


def _record_patchset(ps: Patchset, changes: Sequence[FileChange], manifest: Any, version: str) -> Any:
    """``manifest`` with ``ps`` recorded as applied and its ``changes`` as patched files."""
    from envforge.patching.manifest import AppliedPatchset, Manifest, PatchedFile, sha256_hex

    files = list(manifest.files)
    for c in changes:
        rec = manifest.file(ps.id, c.path)
        original = rec.original_sha256 if rec else sha256_hex(c.before)
        entry = PatchedFile(c.path, ps.id, original, sha256_hex(c.after))
        files = [entry if f is rec else f for f in files] if rec else [*files, entry]
    record = AppliedPatchset(ps.id, ps.digest, ps.distribution, version, ps.activation)
    others = [p for p in manifest.patchsets if p.id != ps.id]
    return Manifest((*others, record), tuple(files))


def _journaled(sp: Path, action: str, ids: Sequence[str], changes: Sequence[FileChange], new: Any) -> None:
    """Write ``changes`` and then manifest ``new`` so that, across a crash, all files or none
    (issue 18): the bytes each file had before are saved in ``.envforge/originals/<sha256>``, an
    intent record naming every file and the manifest to come is written and fsynced, the files
    are replaced, the manifest is written, and the intent record is removed. A process killed in
    between leaves the record; :func:`recover` then rolls the files back (or, when the manifest
    was already written, only removes the record).
    """
    from envforge.patching.manifest import (
        Intent,
        IntentFile,
        atomic_write,
        clear_intent,
        originals_dir,
        sha256_hex,
        write_intent,
        write_manifest,
    )

    originals = originals_dir(sp)
    originals.mkdir(parents=True, exist_ok=True)
    saved: list[Path] = []
    for c in changes:  # every intermediate too: a stacked patchset's original is the one below it
        blob = originals / sha256_hex(c.before)
        if not blob.exists():
            atomic_write(blob, c.before)
            saved.append(blob)
    collapsed: dict[str, FileChange] = {}  # one write per path: first before, last after
    for c in changes:
        first = collapsed.get(c.path)
        collapsed[c.path] = c if first is None else FileChange(first.patchset, c.path, first.before, c.after)
    changes = list(collapsed.values())
    after = sha256_hex(new.to_json().encode("utf-8")) if new.patchsets or new.files else "absent"
    write_intent(sp, Intent(action, tuple(ids), after,
                            tuple(IntentFile(c.path, sha256_hex(c.before), sha256_hex(c.after)) for c in changes)))
    try:
        _replace_all(sp, changes)
    except BaseException:
        clear_intent(sp)  # _replace_all restored the files it had replaced
        for p in saved:
            p.unlink(missing_ok=True)
        raise
    write_manifest(sp, new)
    clear_intent(sp)
    _prune_originals(sp, {f.original_sha256 for f in new.files})


def recover(site_packages: Path) -> tuple[str, ...]:
    """Finish what an interrupted apply or revert left (its intent record), one line per action.

    When the manifest on disk is the one the write was to end with, the write completed and the
    record is removed. Otherwise every file it names is put back to its ``before`` bytes (the
    manifest on disk still describes that state) and stale bytecode is removed. The caller holds
    the environment lock (:mod:`envforge.core.mutex`). No record: ``()``.

    :raises CheckFailed: a named file is neither its ``before`` nor its ``after`` bytes (changed
        by hand since the crash), or a saved ``before`` is missing: nothing is written then.
    :raises InputError: the record is malformed or names a path outside ``site_packages``, or a
        state file (the record, the manifest, a saved ``before``) is not a regular file or too large.
    """
    from envforge.core.errors import CheckFailed
    from envforge.patching.manifest import (
        Manifest,
        atomic_write,
        clear_intent,
        intent_path,
        manifest_sha256,
        originals_dir,
        read_intent,
        read_manifest,
        sha256_hex,
    )

    intent = read_intent(site_packages)
    if intent is None:
        return ()
    what = f"an interrupted `apply-patches{' --revert' if intent.action == 'revert' else ''}` of {', '.join(intent.patchsets) or 'patchsets'}"
    if manifest_sha256(site_packages) == intent.manifest_after:
        clear_intent(site_packages)
        manifest = read_manifest(site_packages) or Manifest()
        _prune_originals(site_packages, {f.original_sha256 for f in manifest.files})
        return (f"recovered {what}: it had completed (the patch manifest was written)",)
    todo: list[tuple[Path, bytes]] = []
    for f in intent.files:
        target = inside(site_packages, f.path)
        try:
            current = sha256_hex(target.read_bytes())
        except (FileNotFoundError, NotADirectoryError):
            current = "missing"
        if current == f.before_sha256:
            continue
        blob = originals_dir(site_packages) / f.before_sha256
        saved = None
        if current == f.after_sha256:
            try:  # a FIFO or a directory in its place is refused by name, never opened
                saved = read_state(blob, what="saved original", hint=lambda: rebuild_hint(site_packages))
            except FileNotFoundError:
                pass
        if saved is None:
            why = (f"{f.path} is {current}, neither {f.before_sha256} (before) nor {f.after_sha256} (after)"
                   if current != f.after_sha256 else f"the saved bytes of {f.path} ({blob}) are missing")
            raise CheckFailed(f"cannot roll back {what}: {why}; nothing was changed (record {intent_path(site_packages)})",
                              hint=rebuild_hint(site_packages))
        todo.append((target, saved))
    for target, data in todo:
        atomic_write(target, data, mode=os.stat(target).st_mode & 0o7777)
        remove_bytecode(target)
    clear_intent(site_packages)
    manifest = read_manifest(site_packages) or Manifest()
    _prune_originals(site_packages, {f.original_sha256 for f in manifest.files})
    return (f"rolled back {what}: {len(todo)} file(s) restored to their bytes before it; "
            f"the patch manifest was not written, so none of its files stay changed",)


def _hold_for_tests(done: int) -> None:
    """Fault-injection point for the crash tests (tests/patching/test_faults.py): with
    ``ENVFORGE_TEST_HOLD_AFTER_REPLACE=<marker>`` set, after the first file of a journaled write
    is replaced, create ``<marker>`` and sleep (at most 60 s) so the test can SIGKILL the process
    inside the window between the first ``os.replace`` and the manifest write."""
    marker = os.environ.get("ENVFORGE_TEST_HOLD_AFTER_REPLACE")
    if marker and done == 1:
        import time

        Path(marker).write_text(str(os.getpid()))
        time.sleep(60)


def _replace_all(sp: Path, changes: Sequence[FileChange]) -> None:
    """Write every change (temp file + ``os.replace``); on failure restore those already replaced.

    :raises InputError: a file cannot be written (e.g. a read-only system site-packages).
    """
    from envforge.core.errors import InputError
    from envforge.patching.manifest import atomic_write

    done: list[FileChange] = []
    try:
        for c in changes:
            target = inside(sp, c.path)
            atomic_write(target, c.after, mode=os.stat(target).st_mode & 0o7777)
            done.append(c)
            _hold_for_tests(len(done))
    except BaseException as exc:
        for c in done:
            atomic_write(sp / c.path, c.before)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write {sp / changes[len(done)].path}: {exc.strerror or exc}; "
                             f"{len(done)} file(s) of this patchset restored, nothing changed",
                             hint="run as the owner of the environment, or patch a virtual environment") from None
        raise
    for c in changes:
        remove_bytecode(sp / c.path)


def remove_bytecode(source: Path) -> None:
    """Delete ``__pycache__/<module>.*.pyc`` of ``source`` (field case B10: stale or
    unchecked-hash bytecode would hide the patched source)."""
    cache = source.parent / "__pycache__"
    for pyc in cache.glob(f"{source.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def revert(site_packages: Path, ids: Sequence[str] | None = None, *, dry_run: bool = False) -> PatchReport:
    """Restore the original bytes of every file the manifest records for ``ids`` (all when None),
    newest first, and drop them from the manifest. A file already back to its original is only
    dropped. Patchsets not in the manifest are ignored (reverting twice is a no-op). With
    ``dry_run`` nothing is written (``changes`` hold the diff back to the originals).

    :raises CheckFailed: a file changed since envforge wrote it (tampered or reinstalled: both
        sha256s named), a later patchset not being reverted patched the same file, or a recorded
        file or its saved original is missing (nothing is written then).
    :raises InputError: the manifest names a path outside ``site_packages`` (:func:`inside`).
    """
    from envforge.core.errors import CheckFailed
    from envforge.patching.manifest import Manifest, read_manifest, sha256_hex, write_manifest

    recovered = () if dry_run else recover(site_packages)
    _refuse_interrupted(site_packages)
    manifest = read_manifest(site_packages) or Manifest()
    chosen = {p.id for p in manifest.patchsets if ids is None or p.id in ids}
    entries = [f for f in manifest.files if f.patchset in chosen]
    disk: dict[str, bytes] = {}
    state: dict[str, bytes] = {}  # each path as it is once the newer entries are undone
    results: list[OperationResult] = []
    for f in reversed(entries):
        later = [g for g in manifest.files[manifest.files.index(f) + 1:]
                 if g.path == f.path and g.patchset not in chosen]
        if later:
            raise CheckFailed(f"cannot revert {f.patchset}: {f.path} was patched after it by {later[0].patchset}",
                              hint=f"revert {later[0].patchset} too (envforge apply-patches --revert)")
        if f.path not in state and f.path not in disk:
            disk[f.path] = _read_for_revert(site_packages, f)
        current = state.get(f.path, disk[f.path])
        digest = sha256_hex(current)
        if digest == f.original_sha256:
            continue
        if digest != f.new_sha256:
            raise CheckFailed(f"{f.path} changed since envforge patched it: sha256 {digest}, expected "
                              f"{f.new_sha256} (patched) or {f.original_sha256} (original)",
                              hint=rebuild_hint(site_packages))
        state[f.path] = _read_for_revert(site_packages, f, original=True)
        results.append(OperationResult(f.patchset, f.path, "revert", REVERTED,
                                       f"restored original (sha256 {f.original_sha256})"))
    restore = [FileChange("", path, disk[path], after) for path, after in sorted(state.items()) if after != disk[path]]
    if dry_run:
        return PatchReport(site_packages, tuple(results), tuple(restore), recovered=recovered)
    kept_files = tuple(f for f in manifest.files if f.patchset not in chosen)
    new = Manifest(tuple(p for p in manifest.patchsets if p.id not in chosen), kept_files)
    if restore:
        _journaled(site_packages, "revert", sorted(chosen), restore, new)
    else:
        write_manifest(site_packages, new)
        _prune_originals(site_packages, {f.original_sha256 for f in kept_files})
    return PatchReport(site_packages, tuple(results), tuple(restore), written=bool(restore), recovered=recovered)


def _read_for_revert(sp: Path, f: Any, *, original: bool = False) -> bytes:
    """The bytes of ``f.path`` (a manifest ``PatchedFile``) on disk, or of its saved original.

    :raises CheckFailed: the file (or ``.envforge/originals/<sha256>``) is gone: revert cannot
        restore it, a rebuild can.
    :raises InputError: the saved original is not a regular file (a FIFO, a directory), unreadable
        or larger than 64 MiB.
    """
    from envforge.core.errors import CheckFailed
    from envforge.patching.manifest import originals_dir

    path = originals_dir(sp) / f.original_sha256 if original else inside(sp, f.path)
    try:
        if original:  # envforge's own copy: a FIFO or a directory in its place is named, never opened
            return read_state(path, what="saved original", hint=lambda: rebuild_hint(sp))
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        what = (f"the saved original of {f.path} is missing ({path})" if original else
                f"{f.path} is missing ({path}): deleted after envforge patched it")
        raise CheckFailed(f"cannot revert {f.patchset}: {what}; nothing was changed",
                          hint=rebuild_hint(sp)) from None


def _prune_originals(sp: Path, keep: set[str]) -> None:
    from envforge.patching.manifest import originals_dir

    d = originals_dir(sp)
    if not d.is_dir():
        return
    for p in d.iterdir():
        if p.name not in keep:
            p.unlink()
    if not any(d.iterdir()):
        d.rmdir()
