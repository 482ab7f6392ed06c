"""CLI for patches: ``apply-patches``, ``patches export``, ``patches list``, ``patches import``.

``envforge apply-patches [ENV | --site-packages DIR] [PATCHSET...] [--dry-run] [--revert] [--json]``
takes the first name as an environment unless it names a patchset. Exit 0 when every patchset
ended in a good state, 1 when an operation drifted or a requirement is unmet, 2 on bad input.
Registration: :mod:`envforge.cli.commands.patches`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.core.errors import InputError
from envforge.core.mutex import environment_lock_path, exclusive
from envforge.core.plural import counted
from envforge.env import profile as envprofile
from envforge.env.layout import default_patchset_ids, resolve_environment
from envforge.installed.distributions import find_distribution
from envforge.lock.retirements import Retirement, propose_retirements
from envforge.patching import PatchReport, apply, export_diff, load_patchsets, revert
from envforge.patching.applied import applied_diff
from envforge.patching.capture import commit_edit, new_edit
from envforge.patching.compat import check_patchsets, parse_against
from envforge.patching.memo import default_result_cache
from envforge.patching.releases import DEFAULT_INDEX, default_cache
from envforge.patching.upstream import import_diff
from envforge.recipe.load import load_recipe
from envforge.recipe.model import Recipe
from envforge.recipe.project import Project

__all__: list[str] = []


def _project(args: argparse.Namespace, ui: Ui) -> Project:
    """The project (cli.project.project_of); optional when the environment is given by path."""
    env = getattr(args, "env", None)
    by_path = getattr(args, "site_packages", None) is not None or (env is not None and "/" in env)
    project: Project = project_of(args, ui, required=not by_path)
    return project


def _site_packages(project: Project, sp: Path | None, env: str | None) -> Path:
    if sp is not None:
        if not sp.is_dir():
            raise InputError(f"--site-packages {sp} is not a directory")
        return sp
    return resolve_environment(project, env, default=env or project.default_environment()).site_packages


def _apply(args: argparse.Namespace, ui: Ui) -> int:
    project = _project(args, ui)
    names = list(args.names)
    known = {p.stem for p in project.patchsets_dir.glob("*.toml")}
    env = None if args.site_packages or not names or names[0] in known else names.pop(0)
    sp = _site_packages(project, args.site_packages, env)
    lock = environment_lock_path(sp)
    with exclusive(
        lock, on_wait=lambda: ui.info(f"waiting for another envforge process on this environment (lock {lock})")
    ):
        if args.revert:
            report = revert(sp, names or None, dry_run=args.dry_run)
        else:
            ids = names or list(default_patchset_ids(sp, project.patchsets_dir))
            report = apply(
                sp, load_patchsets(project.patchsets_dir, ids), dry_run=args.dry_run, cache=default_result_cache()
            )
        for line in report.recovered:
            ui.info(line)
        _render(ui, report, dry_run=args.dry_run, prefixes={})
        if report.ok and not args.dry_run and not names:
            _env_profile(ui, sp, revert_it=args.revert, mode=args.env_mode)
    return 0 if report.ok else 1


def _env_profile(ui: Ui, sp: Path, *, revert_it: bool, mode: str) -> None:
    """The env profile travels with the patches: installed from the env's lock, removed by --revert."""
    if revert_it:
        if envprofile.read_installed(sp) is not None:
            envprofile.revert(sp)
            ui.info(
                "env profile hook removed too (a full --revert undoes everything envforge added; "
                "`envforge apply-patches` installs both again)"
            )
        return
    recorded = envprofile.recorded_profile(sp)
    if recorded is not None and (recorded[0] or recorded[1]):
        envprofile.install(sp, recorded[0], recorded[1], mode=mode)
        ui.info(f"env profile {recorded[0] or 'default'}: {counted(len(recorded[1]), 'variable')} ({mode})")


def _render(ui: Ui, report: PatchReport, *, dry_run: bool, prefixes: dict[str, str]) -> None:
    if ui.json_mode:
        data = report.to_dict()
        data["diff"] = report.diff(prefixes) if dry_run else ""
        ui.emit_json("apply-patches", data)
        return
    for r in report.results:  # results on stdout, with or without --dry-run; then the diff
        ui.result(
            f"{r.state:<16} {r.patchset}  {r.file}  {r.message if r.state not in ('drifted', 'shadowed') else ''}".rstrip()
        )
    if dry_run and report.changes:
        ui.result(report.diff(prefixes).rstrip("\n"))
    for message in report.errors:
        ui.error_text(message)
    for pid, flag in report.activations:
        ui.info(f"note: {pid} takes effect only when the server is launched with {flag}")
    if not report.results and not report.unmet:
        ui.info("nothing to do")
    elif dry_run:
        ui.info(f"dry run: {counted(len(report.changes), 'file')} would change, nothing written")


def _export(args: argparse.Namespace, ui: Ui) -> int:
    project = _project(args, ui)
    (ps,) = load_patchsets(project.patchsets_dir, [args.patchset])
    diff = export_diff(_site_packages(project, args.site_packages, args.env), ps)
    if args.output:
        args.output.write_text(diff, encoding="utf-8")
        ui.info(f"wrote {args.output} ({counted(len(diff.splitlines()), 'line')}); check with `git apply --check`")
    if ui.json_mode:
        ui.emit_json(
            "patches-export", {"patchset": ps.id, "output": str(args.output) if args.output else None, "diff": diff}
        )
    elif not args.output:
        ui.result(diff.rstrip("\n"))
    return 0


def _check(args: argparse.Namespace, ui: Ui) -> int:
    against = parse_against(args.against)
    wanted = {r.name.lower().replace("_", "-") for r in against}
    project = _project(args, ui)
    patchsets = load_patchsets(project.patchsets_dir, args.patchsets or None)
    if not args.patchsets:
        patchsets = tuple(p for p in patchsets if p.distribution in wanted)
    recipes = [load_recipe(project.recipe_path(name)) for name in getattr(args, "recipe", None) or ()]
    matrix = check_patchsets(
        patchsets,
        against,
        cache_dir=args.cache or default_cache() / "releases",
        index_url=args.index_url or DEFAULT_INDEX,
        progress=ui.progress,
        must_apply=args.patchsets,
    )  # named: an out-of-range cell of an exact release fails
    retirements = [r for recipe in recipes for r in propose_retirements(matrix, recipe, project)]
    if ui.json_mode:
        data = matrix.to_dict()
        if recipes:
            data["retirements"] = [r.to_dict() for r in retirements]
        ui.emit_json("patches-check", data)
    else:
        ui.result((matrix.markdown() if args.format == "markdown" else matrix.text()).rstrip("\n"))
        if recipes:
            _render_retirements(ui, recipes, retirements, markdown=args.format == "markdown")
        for line in [] if args.format == "markdown" else matrix.problems():
            ui.error_text(line)
    return 0 if matrix.ok else 1


def _render_retirements(ui: Ui, recipes: list[Recipe], retirements: list[Retirement], *, markdown: bool) -> None:
    """Per recipe: each variant that can retire a patchset, with the entry to add (stdout)."""
    bullet = "- " if markdown else "  "
    for recipe in recipes:
        mine = [r for r in retirements if r.recipe == recipe.name]
        ui.result("")
        if not mine:
            ui.result(f"{recipe.path.name}: no patchset to retire (none is upstream-fixed on a release checked)")
            continue
        ui.result(f"{recipe.path.name}: patchsets to retire")
        for r in mine:
            ui.result(f"{bullet}{r.describe()}")
            if r.when != "unchecked":
                ui.result(f"    `{r.entry()}`" if markdown else f"    {r.entry()}")


def _diff(args: argparse.Namespace, ui: Ui) -> int:
    files = applied_diff(_site_packages(_project(args, ui), args.site_packages, args.env))
    changed = [f.path for f in files if not f.as_recorded]
    if ui.json_mode:
        ui.emit_json(
            "patches-diff",
            {
                "files": [
                    {"path": f.path, "patchsets": list(f.patchsets), "diff": f.diff, "as_recorded": f.as_recorded}
                    for f in files
                ]
            },
        )
        return 1 if changed else 0
    for f in files:
        ui.result(f.diff.rstrip("\n"))
    if not files:
        ui.info("no patches applied (no .envforge/patches.json)")
    for path in changed:
        ui.warn(
            f"{path} changed since envforge patched it (verify reports it as tampered); the diff shows it as it is now"
        )
    return 1 if changed else 0


def _new(args: argparse.Namespace, ui: Ui) -> int:
    project = _project(args, ui)
    sp = _site_packages(project, args.site_packages, args.env)
    dist = find_distribution(sp, args.distribution)
    dest = args.output or Path.cwd() / (f"{dist.name}-{dist.version}-edit" if dist else "edit")
    made = new_edit(sp, args.distribution, dest)
    if ui.json_mode:
        ui.emit_json(
            "patches-new",
            {"path": str(made.path), "distribution": made.distribution, "version": made.version, "files": made.files},
        )
    else:
        ui.result(str(made.path))
    ui.info(
        f"{counted(made.files, 'Python file')} of {made.distribution} {made.version} copied (as released); edit them, "
        f'then: envforge patches commit {made.path} --id NAME --reason "..."'
    )
    return 0


def _commit(args: argparse.Namespace, ui: Ui) -> int:
    project = _project(args, ui)
    captured = commit_edit(
        args.directory, project.patchsets_dir, args.id, args.reason, versions=args.versions, force=args.force
    )
    if ui.json_mode:
        ui.emit_json(
            "patches-commit", {"path": str(captured.path), "id": args.id, "operations": list(captured.operations)}
        )
        return 0
    ui.result(str(captured.path))
    for line in captured.operations:
        ui.info(f"  {line}")
    return 0


def _list(args: argparse.Namespace, ui: Ui) -> int:
    patchsets = load_patchsets(_project(args, ui).patchsets_dir)
    rows: list[dict[str, Any]] = [
        {
            "id": p.id,
            "distribution": p.distribution,
            "versions": p.versions,
            "reason": p.reason,
            "requires": [r.text for r in p.requires],
            "activation": p.activation,
            "digest": p.digest,
            "files": list(p.files),
            "diff-sha256": p.diff_sha256,
            "diff-origin": p.diff_origin,
        }
        for p in patchsets
    ]
    if ui.json_mode:
        ui.emit_json("patches-list", rows)
        return 0
    for p in patchsets:
        ui.result(f"{p.id}  {p.distribution}{p.versions}  {p.digest[:19]}")
        ui.result(f"    {p.reason}")
        for req in p.requires:
            ui.result(f"    requires {req.text}")
        if p.activation:
            ui.result(f"    activated by {p.activation}")
        if p.diff_sha256:
            origin = p.diff_origin or "a unified diff"
            ui.result(f"    imported from {origin} (diff sha256 {p.diff_sha256[:16]}...)")
    return 0


def _import(args: argparse.Namespace, ui: Ui) -> int:
    project = _project(args, ui)
    sp = _site_packages(project, args.site_packages, args.env)
    made = import_diff(
        args.diff,
        sp,
        project.patchsets_dir,
        args.id,
        args.reason,
        versions=args.versions,
        origin=args.origin,
        upstream_prefix=args.upstream_prefix,
        force=args.force,
    )
    if ui.json_mode:
        ui.emit_json(
            "patches-import",
            {
                "path": str(made.path),
                "id": args.id,
                "distribution": made.distribution,
                "version": made.version,
                "hunks": made.hunks,
                "diff-sha256": made.diff_sha256,
                "operations": list(made.operations),
            },
        )
        return 0
    ui.result(str(made.path))
    ui.info(
        f"{counted(made.hunks, 'hunk')} applied exactly to {made.distribution} {made.version} "
        f"(diff sha256 {made.diff_sha256[:16]}...):"
    )
    for line in made.operations:
        ui.info(f"  {line}")
    return 0
