"""CLI for patches: ``apply-patches``, ``patches export``, ``patches list``.

``envforge apply-patches [ENV | --site-packages DIR] [PATCHSET...] [--dry-run] [--revert] [--json]``
takes the first name as an environment unless it names a patchset. Exit 0 when every patchset
ended in a good state, 1 when an operation drifted or a requirement is unmet, 2 on bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envforge.cli.output import Ui
    from envforge.patching import PatchReport
    from envforge.recipe.project import Project

__all__ = ["register"]

DEFAULT_ENV = "quickstart-default"


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register ``apply-patches`` and the ``patches`` group (``export``, ``list``)."""
    from envforge.cli.parser import group

    p = sub.add_parser("apply-patches", help="apply (or revert) patchsets on an environment",
                       description="Apply patchsets to ENV (default: quickstart-default) or to "
                                   "--site-packages DIR. Without PATCHSET names: the patchsets the "
                                   "environment's lock lists, else every patchset whose distribution "
                                   "is installed.")
    p.add_argument("names", nargs="*", metavar="[ENV] PATCHSET", help="environment, then patchset ids")
    p.add_argument("--site-packages", type=Path, metavar="DIR", help="patch this directory instead of ENV")
    p.add_argument("--dry-run", action="store_true", help="print the unified diff, write nothing")
    p.add_argument("--revert", action="store_true",
                   help="restore the original files byte-exact; without PATCHSET names this also "
                        "removes the environment's env profile hook (.pth or sitecustomize block)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--env-mode", choices=("pth", "sitecustomize"), default="pth",
                   help="how the env profile recorded in the environment's lock is installed (default: pth)")
    p.add_argument("--project", type=Path, metavar="DIR", help="project root (default: found from cwd)")
    p.set_defaults(handler=_apply)

    commands = group(sub, "patches", help="patchsets: list, export, check (before an upgrade), diff, new + commit (a hand edit as a patchset)",
                     description="The project's patchsets. Apply or revert them with `envforge apply-patches`.")
    e = commands.add_parser("export", help="write a patchset as a unified diff for upstream")
    e.add_argument("patchset", help="patchset id")
    e.add_argument("--site-packages", type=Path, metavar="DIR", help="site-packages with the released code")
    e.add_argument("--env", metavar="ENV", help="environment instead of --site-packages")
    e.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of stdout")
    e.add_argument("--project", type=Path, metavar="DIR")
    e.set_defaults(handler=_export)

    c = commands.add_parser("check", help="evaluate patchsets on released wheels (before an upgrade)",
                            description="Evaluate PATCHSETs (default: every patchset of the project whose "
                                        "distribution --against names) on the releases --against selects, read "
                                        "from their wheels (downloaded into a cache; nothing is installed), and "
                                        "print a patchset x release state matrix. Exit 1 when a cell is drifted "
                                        "or unavailable.")
    c.add_argument("patchsets", nargs="*", metavar="PATCHSET", help="patchset ids (default: all that apply)")
    c.add_argument("--against", action="append", required=True, metavar="REQ",
                   help="a release (sglang==0.5.23) or a range walking every release on the index "
                        "('sglang>=0.5.8'); repeatable")
    c.add_argument("--index-url", default=None, metavar="URL",
                   help="simple index to list and download from (default: https://pypi.org/simple)")
    c.add_argument("--cache", type=Path, metavar="DIR",
                   help="wheel and result cache (default: $ENVFORGE_CACHE_DIR or ~/.cache/envforge)")
    c.add_argument("--format", choices=("text", "markdown"), default="text", help="table format (default: text)")
    c.add_argument("--json", action="store_true", help="print the matrix as JSON")
    c.add_argument("--project", type=Path, metavar="DIR")
    c.set_defaults(handler=_check)

    d = commands.add_parser("diff", help="the applied diff of an environment against the saved originals",
                            description="Show what envforge changed in ENV (default: quickstart-default) or "
                                        "--site-packages DIR: each patched file against the original bytes "
                                        "saved when it was patched. Exit 1 when a patched file changed since "
                                        "envforge wrote it.")
    d.add_argument("env", nargs="?", metavar="ENV", help="environment name under envs/ or a path")
    d.add_argument("--site-packages", type=Path, metavar="DIR", help="this directory instead of ENV")
    d.add_argument("--json", action="store_true", help="print a versioned JSON report on stdout")
    d.add_argument("--project", type=Path, metavar="DIR", help="project root (default: found from cwd)")
    d.set_defaults(handler=_diff)

    n = commands.add_parser("new", help="copy an installed distribution's Python files into an edit directory",
                            description="Copy the released Python files of DIST (as installed in ENV, before "
                                        "envforge's patches) into an edit directory; edit them, then turn the "
                                        "edit into a patchset with `envforge patches commit DIR`.")
    n.add_argument("distribution", metavar="DIST")
    n.add_argument("--env", metavar="ENV", help="environment (default: quickstart-default)")
    n.add_argument("--site-packages", type=Path, metavar="DIR", help="site-packages instead of --env")
    n.add_argument("-o", "--output", type=Path, metavar="DIR", help="edit directory (default: ./DIST-VERSION-edit)")
    n.add_argument("--project", type=Path, metavar="DIR")
    n.set_defaults(handler=_new)

    cm = commands.add_parser("commit", help="write patchsets/NAME.toml from an edit directory",
                             description="Turn the edits in DIR (made by `envforge patches new`) into "
                                         "patchsets/NAME.toml: each changed function, method or class becomes a "
                                         "replace-definition operation keyed by its qualified name and the digest "
                                         "of the original; a module-level edit becomes a replace-text operation "
                                         "anchored by its neighbours.")
    cm.add_argument("directory", type=Path, metavar="DIR")
    cm.add_argument("--id", required=True, metavar="NAME", help="patchset id (the file name)")
    cm.add_argument("--reason", required=True, help="why the patch is needed (recorded in the patchset)")
    cm.add_argument("--versions", metavar="SPEC", help="version specifier (default: ==the edited release)")
    cm.add_argument("--force", action="store_true", help="overwrite an existing patchset file")
    cm.add_argument("--project", type=Path, metavar="DIR")
    cm.set_defaults(handler=_commit)

    ls = commands.add_parser("list", help="list the project's patchsets")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--project", type=Path, metavar="DIR")
    ls.set_defaults(handler=_list)


def _project(args: argparse.Namespace, ui: Ui) -> Project:
    """The project (cli.lock.project_of); optional when the environment is given by path."""
    from envforge.cli.lock import project_of

    env = getattr(args, "env", None)
    by_path = getattr(args, "site_packages", None) is not None or (env is not None and "/" in env)
    project: Project = project_of(args, ui, required=not by_path)
    return project


def _site_packages(project: Project, sp: Path | None, env: str | None) -> Path:
    from envforge.env.layout import resolve_environment
    from envforge.core.errors import InputError

    if sp is not None:
        if not sp.is_dir():
            raise InputError(f"--site-packages {sp} is not a directory")
        return sp
    return resolve_environment(project, env, default=DEFAULT_ENV).site_packages


def _apply(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.core.mutex import environment_lock_path, exclusive
    from envforge.env.layout import default_patchset_ids
    from envforge.patching import apply, load_patchsets, revert
    from envforge.patching.memo import default_result_cache

    project = _project(args, ui)
    names = list(args.names)
    known = {p.stem for p in project.patchsets_dir.glob("*.toml")}
    env = None if args.site_packages or not names or names[0] in known else names.pop(0)
    sp = _site_packages(project, args.site_packages, env)
    lock = environment_lock_path(sp)
    with exclusive(lock, on_wait=lambda: ui.info(f"waiting for another envforge process on this environment (lock {lock})")):
        if args.revert:
            report = revert(sp, names or None, dry_run=args.dry_run)
        else:
            ids = names or list(default_patchset_ids(sp, project.patchsets_dir))
            report = apply(sp, load_patchsets(project.patchsets_dir, ids), dry_run=args.dry_run,
                           cache=default_result_cache())
        for line in report.recovered:
            ui.info(line)
        _render(ui, report, dry_run=args.dry_run, prefixes={})
        if report.ok and not args.dry_run and not names:
            _env_profile(ui, sp, revert_it=args.revert, mode=args.env_mode)
    return 0 if report.ok else 1


def _env_profile(ui: Ui, sp: Path, *, revert_it: bool, mode: str) -> None:
    """The env profile travels with the patches: installed from the env's lock, removed by --revert."""
    from envforge.env import profile as envprofile
    if revert_it:
        if envprofile.read_installed(sp) is not None:
            envprofile.revert(sp)
            ui.info("env profile hook removed too (a full --revert undoes everything envforge added; "
                    "`envforge apply-patches` installs both again)")
        return
    recorded = envprofile.recorded_profile(sp)
    if recorded is not None and (recorded[0] or recorded[1]):
        envprofile.install(sp, recorded[0], recorded[1], mode=mode)
        ui.info(f"env profile {recorded[0] or 'default'}: {len(recorded[1])} variables ({mode})")


def _render(ui: Ui, report: PatchReport, *, dry_run: bool, prefixes: dict[str, str]) -> None:
    if ui.json_mode:
        data = report.to_dict()
        data["diff"] = report.diff(prefixes) if dry_run else ""
        ui.emit_json("apply-patches", data)
        return
    for r in report.results:  # results on stdout, with or without --dry-run; then the diff
        ui.result(f"{r.state:<16} {r.patchset}  {r.file}  {r.message if r.state not in ('drifted', 'shadowed') else ''}".rstrip())
    if dry_run and report.changes:
        ui.result(report.diff(prefixes).rstrip("\n"))
    for message in report.errors:
        ui.error_text(message)
    for pid, flag in report.activations:
        ui.info(f"note: {pid} takes effect only when the server is launched with {flag}")
    if not report.results and not report.unmet:
        ui.info("nothing to do")
    elif dry_run:
        ui.info(f"dry run: {len(report.changes)} file(s) would change, nothing written")


def _export(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.patching import export_diff, load_patchsets

    project = _project(args, ui)
    (ps,) = load_patchsets(project.patchsets_dir, [args.patchset])
    diff = export_diff(_site_packages(project, args.site_packages, args.env), ps)
    if args.output:
        args.output.write_text(diff, encoding="utf-8")
        ui.info(f"wrote {args.output} ({len(diff.splitlines())} lines); check with `git apply --check`")
    else:
        ui.result(diff.rstrip("\n"))
    return 0


def _check(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.patching import load_patchsets
    from envforge.patching.compat import check_patchsets, parse_against
    from envforge.patching.releases import DEFAULT_INDEX, default_cache

    against = parse_against(args.against)
    wanted = {r.name.lower().replace("_", "-") for r in against}
    patchsets = load_patchsets(_project(args, ui).patchsets_dir, args.patchsets or None)
    if not args.patchsets:
        patchsets = tuple(p for p in patchsets if p.distribution in wanted)
    matrix = check_patchsets(patchsets, against, cache_dir=args.cache or default_cache() / "releases",
                             index_url=args.index_url or DEFAULT_INDEX, progress=ui.progress)
    if ui.json_mode:
        ui.emit_json("patches-check", matrix.to_dict())
    else:
        ui.result((matrix.markdown() if args.format == "markdown" else matrix.text()).rstrip("\n"))
        for line in ([] if args.format == "markdown" else matrix.problems()):
            ui.error_text(line)
    return 0 if matrix.ok else 1


def _diff(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.patching.applied import applied_diff

    files = applied_diff(_site_packages(_project(args, ui), args.site_packages, args.env))
    changed = [f.path for f in files if not f.as_recorded]
    if ui.json_mode:
        ui.emit_json("patches-diff", {"files": [{"path": f.path, "patchsets": list(f.patchsets), "diff": f.diff,
                                                 "as_recorded": f.as_recorded} for f in files]})
        return 1 if changed else 0
    for f in files:
        ui.result(f.diff.rstrip("\n"))
    if not files:
        ui.info("no patches applied (no .envforge/patches.json)")
    for path in changed:
        ui.warn(f"{path} changed since envforge patched it (verify reports it as tampered); the diff shows it as it is now")
    return 1 if changed else 0


def _new(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.installed.distributions import find_distribution
    from envforge.patching.capture import new_edit

    project = _project(args, ui)
    sp = _site_packages(project, args.site_packages, args.env)
    dist = find_distribution(sp, args.distribution)
    dest = args.output or Path.cwd() / (f"{dist.name}-{dist.version}-edit" if dist else "edit")
    made = new_edit(sp, args.distribution, dest)
    ui.result(str(made.path))
    ui.info(f"{made.files} Python files of {made.distribution} {made.version} copied (as released); edit them, "
            f"then: envforge patches commit {made.path} --id NAME --reason \"...\"")
    return 0


def _commit(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.patching.capture import commit_edit

    project = _project(args, ui)
    captured = commit_edit(args.directory, project.patchsets_dir, args.id, args.reason, versions=args.versions,
                           force=args.force)
    ui.result(str(captured.path))
    for line in captured.operations:
        ui.info(f"  {line}")
    return 0


def _list(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.patching import load_patchsets

    patchsets = load_patchsets(_project(args, ui).patchsets_dir)
    rows: list[dict[str, Any]] = [
        {"id": p.id, "distribution": p.distribution, "versions": p.versions, "reason": p.reason,
         "requires": [r.text for r in p.requires], "activation": p.activation, "digest": p.digest,
         "files": list(p.files)} for p in patchsets]
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
    return 0
