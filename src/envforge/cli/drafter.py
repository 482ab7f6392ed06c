"""CLI for EAGLE-3 drafters: ``envforge drafter fetch|inspect|compare|check``.

The hub endpoint is huggingface_hub's (``HF_ENDPOINT``, read here and passed down); the token is
``HF_TOKEN``, which only huggingface_hub reads. Exit codes: 0 clean, 1 findings (or, for
``compare``, draft positions that map to different target tokens), 2 refusals and bad input,
3 the hub failed. Registration: :mod:`envforge.cli.commands.drafter`.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from envforge.cli.output import Ui
from envforge.core.plural import counted
from envforge.drafter import (
    Drafter,
    DrafterComparison,
    DrafterIssue,
    FetchResult,
    HubRevision,
    ModelClass,
    check_target,
    AuxVerdict,
    compare,
    engine_facts,
    fetch_drafter,
    inspect_drafter,
    resolve_revision,
)
from envforge.recipe.project import enclosing_project

__all__ = ["drafters_root", "run_check", "run_compare", "run_fetch", "run_inspect"]

_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_hidden_layers",
    "vocab_size",
    "draft_vocab_size",
    "target_hidden_size",
)


def _endpoint() -> str | None:
    return os.environ.get("HF_ENDPOINT") or None


def drafters_root(cwd: Path) -> Path:
    """Where ``fetch`` puts a drafter without ``--dest``: ``drafters/`` of the enclosing project (the
    directory ``envforge verify --level drafter`` checks offline, whichever sub-directory the fetch ran
    in), else ``drafters/`` of the working directory (relative, as given)."""
    project = enclosing_project(cwd)
    if project is None or project.root == cwd.resolve():
        return Path("drafters")
    return project.root / "drafters"


def run_fetch(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge drafter fetch REPO --revision SHA``: download (or ``--dry-run``: list) a pinned drafter."""
    if args.dry_run:
        rev = resolve_revision(
            args.repo,
            args.revision,
            allow_unpinned=args.allow_unpinned,
            allow_pickle=args.allow_pickle,
            endpoint=_endpoint(),
        )
        if ui.json_mode:
            ui.emit_json("drafter-fetch-plan", _revision_dict(rev))
        else:
            _render_plan(rev, ui)
        return 0
    result = fetch_drafter(
        args.repo,
        args.revision,
        args.dest,
        root=drafters_root(Path.cwd()),
        allow_unpinned=args.allow_unpinned,
        allow_pickle=args.allow_pickle,
        endpoint=_endpoint(),
        progress=ui.progress,
    )
    if ui.json_mode:
        ui.emit_json("drafter-fetch", _fetch_dict(result))
    else:
        _render_fetch(result, ui)
    return 0


def run_inspect(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge drafter inspect``: 1 when an EAGLE-3 check finds something."""
    report = inspect_drafter(
        args.drafter,
        allow_unpinned=args.allow_unpinned,
        allow_pickle=args.allow_pickle,
        endpoint=_endpoint(),
        cache_dir=args.cache_dir,
    )
    if ui.json_mode:
        ui.emit_json(
            "drafter-inspect",
            {
                **_drafter_dict(report.drafter),
                "issues": _issues(report.issues),
                "loads": report.loads,
                "classes": _classes(report.classes),
                "aux-layers": _aux(report.aux),
            },
        )
    else:
        _render_drafter(report.drafter, report.classes, ui)
        _render_aux(report.aux, ui)
        _render_issues(report.issues, "EAGLE-3 checks", ui)
        ui.result(
            "loads as trained in: "
            + ", ".join(f"{e} {'yes' if ok else 'no'}" for e, ok in report.loads.items())
            + " (class and tensors; the auxiliary layers need the target: drafter check --target)"
        )
    return 1 if report.issues else 0


def run_compare(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge drafter compare A B``: 1 when draft positions map to different target tokens."""
    c = compare(args.a, args.b, allow_unpinned=args.allow_unpinned, endpoint=_endpoint(), cache_dir=args.cache_dir)
    if ui.json_mode:
        ui.emit_json("drafter-compare", _comparison_dict(c))
    else:
        _render_comparison(c, ui)
    return 1 if c.vocab is not None and c.vocab.different else 0


def run_check(args: argparse.Namespace, ui: Ui) -> int:
    """``envforge drafter check DRAFTER --target CONFIG``: 1 when incompatible."""
    report = check_target(
        args.drafter,
        args.target,
        allow_unpinned=args.allow_unpinned,
        endpoint=_endpoint(),
        cache_dir=args.cache_dir,
        engines=engine_facts(args.engine),
        trained=args.trained_aux_layers,
    )
    if ui.json_mode:
        ui.emit_json(
            "drafter-check",
            {
                "drafter": report.drafter.source,
                "target": report.target,
                "issues": _issues(report.issues),
                "aux-layers": _aux(report.aux),
            },
        )
    else:
        ui.result(f"drafter {report.drafter.source} against target {report.target}")
        _render_aux(report.aux, ui)
        _render_issues(report.issues, "compatibility", ui)
    return 1 if report.issues else 0


# -- JSON shapes -------------------------------------------------------------------------------


def _revision_dict(rev: HubRevision) -> dict[str, Any]:
    return {
        "repo": rev.repo,
        "requested": rev.requested,
        "revision": rev.sha,
        "pinned": rev.pinned,
        "files": [{"name": f.name, "size": f.size, "sha256": f.sha256, "blob-id": f.blob_id} for f in rev.files],
        "skipped": list(rev.skipped),
    }


def _fetch_dict(r: FetchResult) -> dict[str, Any]:
    return {
        **_revision_dict(r.revision),
        "dest": str(r.dest),
        "record": str(r.record),
        "offline": r.offline,
        "files": [{"name": f.name, "size": f.size, "sha256": f.sha256} for f in r.files],
    }


def _drafter_dict(d: Drafter) -> dict[str, Any]:
    return {
        "source": d.source,
        "repo": d.repo,
        "revision": d.revision,
        "architecture": d.architecture,
        "config": {k: d.config[k] for k in _KEYS if k in d.config},
        "tensors": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "file": t.file} for t in d.tensors],
        "files": list(d.files),
        "pickle-files": list(d.pickle_files),
    }


def _issues(issues: tuple[DrafterIssue, ...]) -> list[dict[str, Any]]:
    return [
        {
            "kind": i.kind,
            "subject": i.subject,
            "expected": i.expected,
            "actual": i.actual,
            "fix": i.fix,
            "engines": list(i.engines),
        }
        for i in issues
    ]


def _classes(classes: tuple[ModelClass, ...]) -> dict[str, dict[str, Any]]:
    """Per engine: the architecture name looked up and the class built (``None``: none known)."""
    return {
        c.engine: {"looked-up": c.looked_up, "class": c.name, "module": c.module, "eagle3": c.eagle3} for c in classes
    }


def _aux(aux: AuxVerdict | None) -> dict[str, Any] | None:
    """The auxiliary-layer verdict: per engine version and code path, the key and ids read and the
    layers captured (None: not known, ``reason`` says why)."""
    if aux is None:
        return None
    return {
        "basis": aux.basis or None,
        "captures": [
            {
                "engine": c.engine,
                "path": c.path or None,
                "key": c.key,
                "ids": c.ids,
                "layers": None if c.layers is None else list(c.layers),
                "how": c.how,
                "reason": c.reason or None,
            }
            for c in aux.captures
        ],
    }


def _comparison_dict(c: DrafterComparison) -> dict[str, Any]:
    v = c.vocab
    return {
        "a": c.a,
        "b": c.b,
        "tensors": [{"name": t.name, "a": t.a, "b": t.b} for t in c.tensors],
        "config": [{"key": k.key, "a": k.a, "b": k.b} for k in c.config],
        "vocab": None
        if v is None
        else {
            "positions": v.positions,
            "same": v.same,
            "different": v.different,
            "a-tokens": v.a_tokens,
            "b-tokens": v.b_tokens,
            "overlap": v.overlap,
        },
    }


# -- text --------------------------------------------------------------------------------------


def _render_plan(rev: HubRevision, ui: Ui) -> None:
    pin = "pinned" if rev.pinned else f"unpinned: '{rev.requested}' resolved to it"
    ui.result(f"{rev.spec} ({pin})")
    for f in rev.files:
        ui.result(f"  fetch {f.name}  {f.size:,} bytes")
    for name in rev.skipped:
        ui.result(f"  skip  {name}")


def _render_fetch(r: FetchResult, ui: Ui) -> None:
    if r.offline:
        ui.result(f"offline (HF_HUB_OFFLINE is set): re-checked the recorded copy of {r.revision.spec} in {r.dest}")
        for f in r.files:
            ui.result(f"  {f.name}  {f.size:,} bytes  sha256 {f.sha256}  matches the fetch record")
        ui.info("nothing was downloaded; the hub's metadata was checked when the copy was fetched")
        return
    pin = "" if r.revision.pinned else f" (unpinned '{r.revision.requested}' resolved to this sha)"
    ui.result(f"fetched {r.revision.spec}{pin} into {r.dest}")
    for f in r.files:
        ui.result(f"  {f.name}  {f.size:,} bytes  sha256 {f.sha256}  verified")
    if r.revision.skipped:
        ui.info(f"skipped (not safetensors or JSON): {', '.join(r.revision.skipped)}")
    ui.info(f"record: {r.record}")


def _render_aux(aux: AuxVerdict | None, ui: Ui) -> None:
    if aux is None:
        return
    ui.result("auxiliary layers, per engine version (the inputs of these target layers are fused):")
    for c in aux.captures:
        if c.layers is None and c.reason.startswith("which layers"):
            read = f"reads {c.ids} from {c.key}" if c.key else "reads no ids (its default)"
            who = c.engine + (f" ({c.path})" if c.path else "")
            ui.result(f"  {who} {read}; the layers depend on the target (drafter check --target)")
        else:
            ui.result(f"  {c.describe()}")
    if aux.basis:
        ui.result(f"  judged against: {aux.basis}")


def _render_drafter(d: Drafter, classes: tuple[ModelClass, ...], ui: Ui) -> None:
    ui.result(f"{d.source}  {d.architecture}")
    if d.repo and d.revision and d.local_dir is not None:
        ui.result(f"  fetched from {d.repo}@{d.revision}")
    if d.modified:
        ui.warn(
            f"{', '.join(d.modified)} differ{'s' if len(d.modified) == 1 else ''} from the fetch record "
            f"({d.local_dir}/envforge-drafter.json): changed after the fetch, so this is not the pinned commit's "
            "content; move it away and `envforge drafter fetch` again to restore it"
        )
    values = "  ".join(f"{k} {d.config[k]}" for k in _KEYS if k in d.config)
    ui.result(f"  {values}")
    ui.result("  model class built: " + ", ".join(f"{c.engine} {c.describe()}" for c in classes))
    width = max((len(t.name) for t in d.tensors), default=0)
    ui.result(f"tensors ({len(d.tensors)}):")
    for t in d.tensors:
        ui.result(f"  {t.name.ljust(width)}  {t.describe()}")
    if d.pickle_files:
        ui.result(f"pickle weights, not read: {', '.join(d.pickle_files)}")


def _render_issues(issues: tuple[DrafterIssue, ...], title: str, ui: Ui) -> None:
    if not issues:
        ui.result(f"{title}: ok")
        return
    ui.result(f"{title}: {counted(len(issues), 'finding')}")
    for i in issues:
        where = f" ({', '.join(i.engines)})" if i.engines else ""
        ui.result(f"  [{i.kind}] {i.subject}{where}: expected {i.expected}, found {i.actual}")
        ui.result(f"      fix: {i.fix}")


def _render_comparison(c: DrafterComparison, ui: Ui) -> None:
    ui.result(f"A: {c.a}\nB: {c.b}")
    rows = [(t.name, t.a, t.b) for t in c.tensors]
    _table("tensors differing in presence, shape or dtype", rows, ui)
    _table("config differences", [(k.key, k.a, k.b) for k in c.config], ui)
    v = c.vocab
    if v is None:
        ui.result("vocabulary mapping: not compared (d2t absent in A or B)")
        return
    ui.result("vocabulary mapping (target id = i + d2t[i]):")
    ui.result(f"  draft positions mapping to the same target token: {v.same:,} of {v.positions:,}")
    ui.result(f"  draft positions mapping to different target tokens: {v.different:,} of {v.positions:,}")
    ui.result(f"  draft vocabularies as sets: A {v.a_tokens:,} tokens, B {v.b_tokens:,}, overlap {v.overlap:,}")


def _table(title: str, rows: list[tuple[str, str, str]], ui: Ui) -> None:
    if not rows:
        ui.result(f"{title}: none")
        return
    ui.result(f"{title}:")
    w0 = max(len(r[0]) for r in rows + [("name", "", "")])
    w1 = max(len(r[1]) for r in rows + [("", "A", "")])
    ui.result(f"  {'name'.ljust(w0)}  {'A'.ljust(w1)}  B")
    for name, a, b in rows:
        ui.result(f"  {name.ljust(w0)}  {a.ljust(w1)}  {b}")
