"""CLI for the fleet: ``envforge fleet verify|build|allreduce|agent start|agent stop ... --ray ADDRESS``
(``envforge-stack[fleet]``).

What the driver can check is checked before anything reaches a node, with the local commands'
wording and exit 2: ``--ray``, ``--timeout`` and ``--port`` while parsing (registration:
:mod:`envforge.cli.commands.fleet`), then here verify levels, the environment name
(:func:`env_name`), and a recipe and variant where the driver has the project.

Which alive nodes a command runs on (:func:`selection`): those with the GPU count of the recipe's
``[target] gpus`` (from the lock or recipe in the driver's project), or the ones ``--num-gpus``,
``--label`` and ``--resource`` name, or every one with ``--all-nodes``; the others are skipped, each
with its reason, in the report.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from envforge.cli.output import Ui
from envforge.cli.project import project_of
from envforge.core.errors import InputError
from envforge.core.kinds import check_levels
from envforge.core.plural import counted, noun
from envforge.fleet.driver import fleet_allreduce, fleet_build, fleet_start_agents, fleet_stop_agents, fleet_verify
from envforge.fleet.report import FleetReport
from envforge.fleet.selection import NodeSelection, gpus_of, lock_gpus
from envforge.recipe.load import load_recipe
from envforge.recipe.project import Project
from envforge.recipe.schema import lock_name_problem

__all__ = ["env_name", "render_text", "verify_data", "selection"]

#: The all-reduce after ``fleet verify --level gpu`` gets what is left of ``--timeout``, at least this
#: many seconds.
MIN_ALLREDUCE_S = 1.0


def selection(args: argparse.Namespace, gpus: tuple[int | None, str] | None) -> NodeSelection:
    """The nodes a fleet command runs on, from its options: ``--all-nodes`` (every alive node), else
    ``--num-gpus``, ``--label`` and ``--resource`` (all that are given must hold), else the recipe's
    ``[target] gpus`` (``gpus``: :func:`envforge.fleet.selection.lock_gpus`; ``(None, why)``: the
    recipe names none, so every alive node), else (``gpus`` None: not known on the driver) the nodes
    with GPU resources when any node has some.

    :raises InputError: ``--all-nodes`` with another of these options (exit 2).
    """
    labels, resources = tuple(args.label), tuple(args.resource)
    if args.all_nodes:
        if args.num_gpus is not None or labels or resources:
            raise InputError(
                "--all-nodes takes every alive node: it cannot be combined with --num-gpus, --label or --resource"
            )
        return NodeSelection(every=True, source="--all-nodes")
    if args.num_gpus is not None:
        return NodeSelection(args.num_gpus, f"--num-gpus {args.num_gpus}", labels, resources)
    if labels or resources:
        return NodeSelection(labels=labels, resources=resources)
    if gpus is None:
        return NodeSelection()
    count, source = gpus
    return NodeSelection(count, source) if count is not None else NodeSelection(every=True, source=source)


def env_name(name: str) -> str:
    """``name`` when it can name an environment under ``envs/`` on the nodes: not empty, not a path
    (a ``/`` makes an environment argument a path for the local commands,
    :func:`envforge.env.layout.resolve_environment`; a fleet takes names only) and a valid
    ``<recipe>-<variant>`` lock name (:func:`envforge.recipe.schema.lock_name_problem`, what names
    ``envs/``).

    :raises InputError: the name is empty, a path, or no valid name (exit 2).
    """
    hint = "give the name of the environment under envs/ on every node, e.g. quickstart-default (`envforge envs` lists them)"
    if not name:
        raise InputError("fleet verify needs an environment name, got ''", hint=hint)
    if "/" in name:
        raise InputError(
            f"'{name}' is a path: fleet verify takes the name of an environment under envs/ of each "
            "node's project, not a path",
            hint=hint,
        )
    problem = lock_name_problem(name)
    if problem:
        raise InputError(f"not an environment name: {problem}", hint=hint)
    return name


def _root(args: argparse.Namespace, ui: Ui) -> Path:
    root: Path = project_of(args, ui).root
    return root.resolve()


def _verify(args: argparse.Namespace, ui: Ui) -> int:
    """Verify on every node; with level gpu, the all-reduce after it gets what is left of ``--timeout``
    (at least :data:`MIN_ALLREDUCE_S`). One report: with ``--json`` one envelope (:func:`verify_data`)."""

    levels = tuple(x.strip() for x in (args.level or "").split(",") if x.strip())
    check_levels(levels)
    env_name(args.env)
    root = _root(args, ui)
    select = selection(args, lock_gpus(root, args.env))
    start = time.monotonic()
    report = fleet_verify(
        args.ray, args.env, root, levels=levels, timeout_s=args.timeout, agent=not args.no_agent, select=select
    )
    allreduce = None
    if "gpu" in levels and report.nodes:  # (no node qualified: the report says so once)
        left = round(args.timeout - (time.monotonic() - start), 1)
        allreduce = fleet_allreduce(args.ray, timeout_s=max(MIN_ALLREDUCE_S, left), select=select)
    data = verify_data(report, allreduce)
    if ui.json_mode:
        ui.emit_json("fleet", data)
    else:
        for line in render_text(report) + (render_text(allreduce) if allreduce is not None else []):
            ui.result(line)
    code: int = data["exit-code"]
    return code


def verify_data(report: FleetReport, allreduce: FleetReport | None) -> dict[str, Any]:
    """``fleet verify``'s JSON ``data``: the verify report's (:meth:`FleetReport.as_dict`) with
    ``allreduce``, the all-reduce report's (``--level gpu``) or None, and ``exit-code`` the command's
    exit status: the larger of both reports' (docs/fleet.md)."""
    data = report.as_dict()
    data["allreduce"] = allreduce.as_dict() if allreduce is not None else None
    data["exit-code"] = max(report.exit_code, allreduce.exit_code if allreduce is not None else 0)
    return data


def _build(args: argparse.Namespace, ui: Ui) -> int:

    root = _root(args, ui)
    select = selection(args, _check_recipe(root, args.recipe, args.variant))
    report = fleet_build(
        args.ray,
        args.recipe,
        args.variant,
        root,
        find_links=args.find_links,
        offline=args.offline,
        timeout_s=args.timeout,
        select=select,
    )
    return _render(report, ui)


def _check_recipe(root: Path, recipe: str, variant: str | None) -> tuple[int | None, str] | None:
    """Where the driver has the project (``recipes/`` under ``root``), the recipe and variant must
    exist there, as for ``envforge build``; a recipe given as a path is checked where the driver can
    read it. Without the project here the nodes check them (their errors carry the hint). Returns the
    variant's ``[target] gpus`` as :func:`envforge.fleet.selection.gpus_of` gives it, or None when
    the recipe was not read here.

    :raises InputError: no such recipe or variant (or an invalid recipe), exit 2.
    """

    project = Project(root)
    as_path = recipe.endswith(".toml") or "/" in recipe
    if (as_path and Path(recipe).is_file()) or (not as_path and project.recipes_dir.is_dir()):
        path = project.recipe_path(recipe)
        target = load_recipe(path).resolve(variant).target
        where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        return gpus_of(target.gpus, where)
    return None


def _allreduce(args: argparse.Namespace, ui: Ui) -> int:

    env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"--env {item!r}: expected NAME=VALUE")
        env[name] = value
    report = fleet_allreduce(
        args.ray, backend=args.backend, env=env, port=args.port, timeout_s=args.timeout, select=selection(args, None)
    )
    return _render(report, ui)


def _agent_start(args: argparse.Namespace, ui: Ui) -> int:

    root = args.project.resolve() if args.project else None
    return _render(fleet_start_agents(args.ray, root, timeout_s=args.timeout, select=selection(args, None)), ui)


def _agent_stop(args: argparse.Namespace, ui: Ui) -> int:
    stopped = fleet_stop_agents(args.ray)
    if ui.json_mode:
        ui.emit_json("fleet-agents", {"stopped": stopped})
    else:
        ui.result(f"stopped {counted(len(stopped), 'envforge agent')}")
    return 0


def _render(report: FleetReport, ui: Ui) -> int:
    if ui.json_mode:
        ui.emit_json("fleet", report.as_dict())
        return report.exit_code
    for line in render_text(report):
        ui.result(line)
    return report.exit_code


def render_text(report: FleetReport) -> list[str]:
    """The node x fingerprint matrix (verify), flips (build) or per-size latencies (allreduce); first
    the nodes skipped, with the rule and each one's reason (when any was), and the all-reduce's backend."""
    lines = []
    alive = len(report.nodes) + len(report.skipped)
    if report.skipped or not report.nodes:
        lines.append(f"selected {len(report.nodes)} of {alive} {noun(alive, 'alive node')}: {report.selection}")
        lines += [f"skipped {s.host} {s.node_id[:8]}: {s.reason}" for s in report.skipped]
    if report.backend:
        lines.append(f"backend {report.backend[0]}: {report.backend[1]}")
    for n in report.nodes:
        head = f"{n.host} {n.node_id[:8]} {n.status}"
        if n.error:
            if report.action == "build" and "before" in n.detail:  # what stayed live, then why
                head += f": {_generations(n.detail)}"
            lines.append(f"{head}: {n.error}")
            if n.hint:
                lines.append(f"    hint: {n.hint}")
            continue
        if report.action == "verify":
            fp = n.fingerprint
            lines.append(
                f"{head}: lock {_short(fp.get('lock_digest'))} patches {_short(fp.get('patch_manifest_digest'))} "
                f"profile {fp.get('env_profile') or 'none'} {_short(fp.get('env_profile_digest'))} "
                f"python {fp.get('python') or 'unknown'} {fp.get('platform') or ''} "
                f"gpu {fp.get('gpu') or 'none'} x{fp.get('gpu_count') or 0} "
                f"driver {fp.get('driver') or 'unknown'}; {counted(len(n.findings), 'finding')}"
            )
            lines += [f"    {f.get('kind')}: {f.get('subject')}" for f in n.findings]
            if n.node_id in report.differs:
                keys = report.differs[n.node_id]
                lines.append(
                    "    differs from the majority: "
                    + ", ".join(
                        f"{k} {_show(n.fingerprint.get(k))} (majority {_show(report.majority.get(k))})" for k in keys
                    )
                )
        elif report.action == "agent-start":
            a = n.detail.get("agent", {})
            what = {
                "started": "agent started",
                "running": f"agent already running (up {a.get('age-s')} s)",
                "replaced": "agent replaced (code changed: " + ", ".join(a.get("replaced-because", [])) + ")",
            }
            lines.append(f"{head}: {what.get(a.get('state'), 'agent ?')}, pid {a.get('pid')}")
            lines += [f"    {f.get('kind')}: {f.get('subject')}" for f in n.findings]
        elif report.action == "build":
            lines.append(f"{head}: {_generations(n.detail)}")
        else:
            sizes = ", ".join(f"{s['bytes']} B {s['median-us']} µs" for s in n.detail.get("sizes", []))
            lines.append(f"{head}: rank {n.detail.get('rank')}: {sizes}")
    if not report.nodes:
        lines.append(
            f"fleet {report.action}: no alive node qualifies ({len(report.skipped)} skipped); pick "
            "nodes with --num-gpus, --label, --resource or --all-nodes"
        )
        return lines
    bad = [n for n in report.nodes if n.status != "ok"]
    skipped = f" ({len(report.skipped)} skipped)" if report.skipped else ""
    lines.append(
        f"fleet {report.action}: {counted(len(report.nodes), 'node')}{skipped}, {len(bad)} not ok, "
        f"{len(report.differs)} differ from the majority in {report.elapsed_s:.1f} s{_agents(report)}"
    )
    return lines


def _generations(d: Any) -> str:
    """``g0001 -> g0002 (flipped)`` or ``g0001 -> g0001 (not flipped)`` from a build node's detail."""
    return (
        f"{d.get('before') or 'none'} -> {d.get('after') or 'none'}"
        f"{' (flipped)' if d.get('flipped') else ' (not flipped)'}"
    )


def _agents(report: FleetReport) -> str:
    """``; agents: 3 reused, 1 started (1 replaced: code changed)`` when agents answered (a replaced
    agent was started by this run too)."""
    states = [n.detail["agent"].get("state") for n in report.nodes if "agent" in n.detail]
    if not states:
        return ""
    reused = states.count("running")
    replaced = states.count("replaced")
    why = f" ({replaced} replaced: code changed)" if replaced else ""
    return f"; agents: {reused} reused, {len(states) - reused} started{why}"


def _short(digest: Any) -> str:
    return str(digest).split(":", 1)[-1][:8] if digest else "none"


def _show(v: Any) -> str:
    return _short(v) if isinstance(v, str) and v.startswith("sha256:") else str(v)
