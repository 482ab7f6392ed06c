"""CLI for the fleet: ``envforge fleet verify|build|allreduce|agent start|agent stop ... --ray ADDRESS``
(``envforge[fleet]``).

What the driver can check is checked here, before anything reaches a node, with the local commands'
wording and exit 2: ``--ray`` (:func:`ray_address`), ``--timeout`` and ``--port`` (the shared
:func:`envforge.cli.parser.seconds` / :data:`~envforge.cli.parser.PORT`), verify levels, the
environment name (:func:`env_name`), and a recipe and variant where the driver has the project.

Which alive nodes a command runs on (:func:`selection`): those with the GPU count of the recipe's
``[target] gpus`` (from the lock or recipe in the driver's project), or the ones ``--num-gpus``,
``--label`` and ``--resource`` name, or every one with ``--all-nodes``; the others are skipped, each
with its reason, in the report.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envforge.cli.parser import PORT, integer, seconds
from envforge.core.errors import InputError

if TYPE_CHECKING:
    from envforge.cli.output import Ui
    from envforge.fleet.report import FleetReport
    from envforge.fleet.selection import NodeSelection

__all__ = ["MIN_TIMEOUT_S", "env_name", "node_label", "node_resource", "ray_address", "register", "render_text",
           "selection", "verify_data"]

#: The shortest ``--timeout`` of a fleet command, in seconds: each node keeps at least 2 s of it for
#: its answer's way back (:func:`envforge.fleet.tasks.node_budget`), so less leaves a node next to nothing.
MIN_TIMEOUT_S = 5.0

#: The all-reduce after ``fleet verify --level gpu`` gets what is left of ``--timeout``, at least this
#: many seconds.
MIN_ALLREDUCE_S = 1.0

_HOST = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")

_RAY_FORM = "must be HOST:PORT (the GCS address `ray start --head` prints, e.g. 10.0.0.1:6379) or auto, " \
            "PORT from 1 to 65535"


def ray_address(text: str) -> str:
    """An argparse ``type=`` for ``--ray``: ``auto``, or ``HOST:PORT`` with a host name, an IPv4
    address or a bracketed IPv6 address, and a port from 1 to 65535. Returned unchanged.

    :raises argparse.ArgumentTypeError: anything else (``garbage``, ``''``, a URL such as
        ``http://127.0.0.1:8265``, ``127.0.0.1:99999``): a usage error naming ``--ray`` (exit 2).
    """
    if text == "auto":
        return text
    host, sep, port = text.rpartition(":")
    if sep and _HOST.fullmatch(host) and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535:
        return text
    raise argparse.ArgumentTypeError(f"{_RAY_FORM}, got {text!r}")


_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?")


def node_label(text: str) -> tuple[str, str | None]:
    """An argparse ``type=`` for ``--label``: ``KEY=VALUE`` (a Ray node label, ``ray start --labels
    KEY=VALUE``, with that value) or ``KEY`` (any value) as ``(key, value or None)``.

    :raises argparse.ArgumentTypeError: an empty or malformed key (exit 2).
    """
    key, sep, value = text.partition("=")
    if _LABEL.fullmatch(key) and (not sep or value):
        return key, value if sep else None
    raise argparse.ArgumentTypeError(f"must be KEY=VALUE or KEY (a Ray node label, e.g. pool=gpu), got {text!r}")


def node_resource(text: str) -> tuple[str, float]:
    """An argparse ``type=`` for ``--resource``: ``NAME`` or ``NAME=AMOUNT`` (a Ray resource,
    ``ray start --resources '{"NAME": N}'``, at least AMOUNT of it; default 1) as ``(name, amount)``.

    :raises argparse.ArgumentTypeError: an empty name, or an amount that is no positive finite number.
    """
    name, sep, amount = text.partition("=")
    try:
        value = float(amount) if sep else 1.0
    except ValueError:
        value = 0.0
    if name.strip() and name == name.strip() and 0 < value < float("inf"):
        return name, value
    raise argparse.ArgumentTypeError(f"must be NAME or NAME=AMOUNT (a Ray resource, AMOUNT a positive number, "
                                     f"e.g. stack=1), got {text!r}")


def selection(args: argparse.Namespace, gpus: tuple[int | None, str] | None) -> NodeSelection:
    """The nodes a fleet command runs on, from its options: ``--all-nodes`` (every alive node), else
    ``--num-gpus``, ``--label`` and ``--resource`` (all that are given must hold), else the recipe's
    ``[target] gpus`` (``gpus``: :func:`envforge.fleet.selection.lock_gpus`; ``(None, why)``: the
    recipe names none, so every alive node), else (``gpus`` None: not known on the driver) the nodes
    with GPU resources when any node has some.

    :raises InputError: ``--all-nodes`` with another of these options (exit 2).
    """
    # lazy: envforge.fleet imports verify and build, which no other command's start-up needs
    from envforge.fleet.selection import NodeSelection

    labels, resources = tuple(args.label), tuple(args.resource)
    if args.all_nodes:
        if args.num_gpus is not None or labels or resources:
            raise InputError("--all-nodes takes every alive node: it cannot be combined with --num-gpus, --label "
                             "or --resource")
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
    ``<recipe>-<variant>`` lock name (:func:`envforge.recipe.model.lock_name_problem`, what names
    ``envs/``).

    :raises InputError: the name is empty, a path, or no valid name (exit 2).
    """
    from envforge.recipe.model import lock_name_problem

    hint = "give the name of the environment under envs/ on every node, e.g. quickstart-default (`envforge envs` lists them)"
    if not name:
        raise InputError("fleet verify needs an environment name, got ''", hint=hint)
    if "/" in name:
        raise InputError(f"'{name}' is a path: fleet verify takes the name of an environment under envs/ of each "
                         "node's project, not a path", hint=hint)
    problem = lock_name_problem(name)
    if problem:
        raise InputError(f"not an environment name: {problem}", hint=hint)
    return name


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    """Register the ``envforge fleet`` group: ``verify``, ``build``, ``allreduce``, ``agent start|stop``."""
    from envforge.cli.parser import group

    fleet = group(sub, "fleet", help="verify or build the same stack on every node of a Ray cluster",
                  description="One Ray task per alive node (node affinity); exit 1 when a node differs "
                              "from the majority, has findings, failed or did not answer.")

    v = fleet.add_parser("verify", help="verify ENV on every node and compare the fingerprints")
    v.add_argument("env", metavar="ENV", help="environment name under envs/ on every node, e.g. kimi-k25-sm120-cu128")
    v.add_argument("--level", default=None, metavar="LEVELS",
                   help="comma-separated verify levels on each node: static, gpu, drafter (default: the recipe's); "
                        "with gpu, an all-reduce across all nodes follows within what is left of --timeout")
    v.add_argument("--no-agent", action="store_true",
                   help="verify in a fresh Ray task per node instead of each node's long-lived envforge agent")
    _common(v)
    v.set_defaults(handler=_verify)

    b = fleet.add_parser("build", help="build the committed lock on every node")
    b.add_argument("recipe", metavar="RECIPE")
    b.add_argument("--variant", default=None)
    b.add_argument("--offline", action="store_true", help="install from --find-links only (a path every node reads)")
    b.add_argument("--find-links", action="append", type=Path, default=[], metavar="DIR")
    _common(b, timeout=3600.0)
    b.set_defaults(handler=_build)

    a = fleet.add_parser("allreduce", help="one all-reduce group across all nodes (torch.distributed)")
    a.add_argument("--backend", choices=("nccl", "gloo"), default=None,
                   help="torch.distributed backend (default: nccl when every selected node has GPU resources, "
                        "else gloo)")
    a.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="variables set in every rank, e.g. an env profile's NCCL_* values")
    a.add_argument("--port", type=PORT, default=29517, help="rendezvous port on the first node (1-65535; default: 29517)")
    _common(a, timeout=300.0)
    a.set_defaults(handler=_allreduce)

    agent = group(fleet, "agent", help="the long-lived envforge agent on each node (fleet verify's)",
                  description="fleet verify starts one agent per node (a detached Ray actor) and reuses it.")
    up = agent.add_parser("start", help="start (or keep) the agent on every node, verifying nothing: "
                                        "run it once after the cluster starts")
    up.add_argument("--ray", required=True, type=ray_address, metavar="ADDRESS",
                    help="Ray cluster address (HOST:PORT) or auto")
    up.add_argument("--timeout", type=seconds(MIN_TIMEOUT_S), default=120.0, metavar="S",
                    help=f"seconds to wait for every node ({MIN_TIMEOUT_S:g} or more; default: 120); later nodes "
                         "are findings")
    up.add_argument("--project", type=Path, default=None,
                    help="project directory (the same path on every node): a node where it holds no recipes/ "
                         "is a finding (default: not checked, but where ENVFORGE_FLEET_ROOT is set)")
    up.add_argument("--json", action="store_true", help="print the report as JSON (schema envforge.fleet/1)")
    _nodes(up)
    up.set_defaults(handler=_agent_start)
    st = agent.add_parser("stop", help="stop every envforge agent in the cluster (the next fleet verify starts new ones)")
    st.add_argument("--ray", required=True, type=ray_address, metavar="ADDRESS",
                    help="Ray cluster address (HOST:PORT) or auto")
    st.add_argument("--json", action="store_true", help="print the names stopped as JSON")
    st.set_defaults(handler=_agent_stop)


def _common(p: argparse.ArgumentParser, timeout: float = 600.0) -> None:
    p.add_argument("--ray", required=True, type=ray_address, metavar="ADDRESS",
                   help="Ray cluster address (HOST:PORT) or auto")
    p.add_argument("--timeout", type=seconds(MIN_TIMEOUT_S), default=timeout, metavar="S",
                   help=f"seconds to wait for every node ({MIN_TIMEOUT_S:g} or more; default: {timeout:g}); later "
                        "nodes are findings")
    p.add_argument("--project", type=Path, default=None,
                   help="project directory, the same path on every node (default: nearest with recipes/)")
    p.add_argument("--json", action="store_true", help="print the report as JSON (schema envforge.fleet/1)")
    _nodes(p)


def _nodes(p: argparse.ArgumentParser) -> None:
    """The options that pick the nodes (:func:`selection`)."""
    g = p.add_argument_group("nodes", "which alive nodes to run on (default: those with the GPU count of the "
                                      "recipe's [target] gpus; the others are skipped, with the reason)")
    g.add_argument("--num-gpus", type=integer(1, noun="a GPU count"), default=None, metavar="N",
                   help="nodes with at least N GPU resources (Ray's GPU resource, as `ray start --num-gpus`)")
    g.add_argument("--label", action="append", type=node_label, default=[], metavar="KEY[=VALUE]",
                   help="nodes with this Ray node label (`ray start --labels KEY=VALUE`); repeatable")
    g.add_argument("--resource", action="append", type=node_resource, default=[], metavar="NAME[=AMOUNT]",
                   help="nodes with at least AMOUNT (default 1) of this Ray resource "
                        "(`ray start --resources '{\"NAME\": 1}'`); repeatable")
    g.add_argument("--all-nodes", action="store_true", help="every alive node, whatever it has")


def _root(args: argparse.Namespace, ui: Ui) -> Path:
    from envforge.cli.lock import project_of

    root: Path = project_of(args, ui).root
    return root.resolve()


def _verify(args: argparse.Namespace, ui: Ui) -> int:
    """Verify on every node; with level gpu, the all-reduce after it gets what is left of ``--timeout``
    (at least :data:`MIN_ALLREDUCE_S`). One report: with ``--json`` one envelope (:func:`verify_data`)."""
    import time

    from envforge.fleet.driver import fleet_allreduce, fleet_verify
    from envforge.fleet.selection import lock_gpus  # lazy: as the driver (verify, build)
    from envforge.verify.findings import check_levels

    levels = tuple(x.strip() for x in (args.level or "").split(",") if x.strip())
    check_levels(levels)
    env_name(args.env)
    root = _root(args, ui)
    select = selection(args, lock_gpus(root, args.env))
    start = time.monotonic()
    report = fleet_verify(args.ray, args.env, root, levels=levels, timeout_s=args.timeout, agent=not args.no_agent,
                          select=select)
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
    from envforge.fleet.driver import fleet_build

    root = _root(args, ui)
    select = selection(args, _check_recipe(root, args.recipe, args.variant))
    report = fleet_build(args.ray, args.recipe, args.variant, root, find_links=args.find_links,
                         offline=args.offline, timeout_s=args.timeout, select=select)
    return _render(report, ui)


def _check_recipe(root: Path, recipe: str, variant: str | None) -> tuple[int | None, str] | None:
    """Where the driver has the project (``recipes/`` under ``root``), the recipe and variant must
    exist there, as for ``envforge build``; a recipe given as a path is checked where the driver can
    read it. Without the project here the nodes check them (their errors carry the hint). Returns the
    variant's ``[target] gpus`` as :func:`envforge.fleet.selection.gpus_of` gives it, or None when
    the recipe was not read here.

    :raises InputError: no such recipe or variant (or an invalid recipe), exit 2.
    """
    from envforge.fleet.selection import gpus_of  # lazy: as the driver (verify, build)
    from envforge.recipe.project import Project
    from envforge.recipe.model import load_recipe

    project = Project(root)
    as_path = recipe.endswith(".toml") or "/" in recipe
    if (as_path and Path(recipe).is_file()) or (not as_path and project.recipes_dir.is_dir()):
        path = project.recipe_path(recipe)
        target = load_recipe(path).resolve(variant).target
        where = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        return gpus_of(target.gpus, where)
    return None


def _allreduce(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.fleet.driver import fleet_allreduce

    env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"--env {item!r}: expected NAME=VALUE")
        env[name] = value
    report = fleet_allreduce(args.ray, backend=args.backend, env=env, port=args.port, timeout_s=args.timeout,
                             select=selection(args, None))
    return _render(report, ui)


def _agent_start(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.fleet.driver import fleet_start_agents

    root = args.project.resolve() if args.project else None
    return _render(fleet_start_agents(args.ray, root, timeout_s=args.timeout, select=selection(args, None)), ui)


def _agent_stop(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.fleet.driver import fleet_stop_agents

    stopped = fleet_stop_agents(args.ray)
    if ui.json_mode:
        ui.emit_json("fleet-agents", {"stopped": stopped})
    else:
        ui.result(f"stopped {len(stopped)} envforge agent(s)")
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
        lines.append(f"selected {len(report.nodes)} of {alive} alive node(s): {report.selection}")
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
            lines.append(f"{head}: lock {_short(fp.get('lock_digest'))} patches {_short(fp.get('patch_manifest_digest'))} "
                         f"profile {fp.get('env_profile') or 'none'} {_short(fp.get('env_profile_digest'))} "
                         f"python {fp.get('python') or 'unknown'} {fp.get('platform') or ''} "
                         f"gpu {fp.get('gpu') or 'none'} x{fp.get('gpu_count') or 0} "
                         f"driver {fp.get('driver') or 'unknown'}; {len(n.findings)} finding(s)")
            lines += [f"    {f.get('kind')}: {f.get('subject')}" for f in n.findings]
            if n.node_id in report.differs:
                keys = report.differs[n.node_id]
                lines.append("    differs from the majority: " + ", ".join(
                    f"{k} {_show(n.fingerprint.get(k))} (majority {_show(report.majority.get(k))})" for k in keys))
        elif report.action == "agent-start":
            a = n.detail.get("agent", {})
            what = {"started": "agent started", "running": f"agent already running (up {a.get('age-s')} s)",
                    "replaced": "agent replaced (code changed: " + ", ".join(a.get("replaced-because", [])) + ")"}
            lines.append(f"{head}: {what.get(a.get('state'), 'agent ?')}, pid {a.get('pid')}")
            lines += [f"    {f.get('kind')}: {f.get('subject')}" for f in n.findings]
        elif report.action == "build":
            lines.append(f"{head}: {_generations(n.detail)}")
        else:
            sizes = ", ".join(f"{s['bytes']} B {s['median-us']} µs" for s in n.detail.get("sizes", []))
            lines.append(f"{head}: rank {n.detail.get('rank')}: {sizes}")
    if not report.nodes:
        lines.append(f"fleet {report.action}: no alive node qualifies ({len(report.skipped)} skipped); pick "
                     "nodes with --num-gpus, --label, --resource or --all-nodes")
        return lines
    bad = [n for n in report.nodes if n.status != "ok"]
    skipped = f" ({len(report.skipped)} skipped)" if report.skipped else ""
    lines.append(f"fleet {report.action}: {len(report.nodes)} node(s){skipped}, {len(bad)} not ok, "
                 f"{len(report.differs)} differ from the majority in {report.elapsed_s:.1f} s{_agents(report)}")
    return lines


def _generations(d: Any) -> str:
    """``g0001 -> g0002 (flipped)`` or ``g0001 -> g0001 (not flipped)`` from a build node's detail."""
    return (f"{d.get('before') or 'none'} -> {d.get('after') or 'none'}"
            f"{' (flipped)' if d.get('flipped') else ' (not flipped)'}")


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
