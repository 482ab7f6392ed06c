"""CLI for the fleet: ``envforge fleet verify|build|allreduce|agent start|agent stop ... --ray ADDRESS``
(``envforge[fleet]``).

What the driver can check is checked here, before anything reaches a node, with the local commands'
wording and exit 2: ``--ray`` (:func:`ray_address`), ``--timeout`` and ``--port`` (the shared
:func:`envforge.cli.parser.seconds` / :data:`~envforge.cli.parser.PORT`), verify levels, the
environment name (:func:`env_name`), and a recipe and variant where the driver has the project.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envforge.cli.parser import PORT, seconds

if TYPE_CHECKING:
    from envforge.cli.output import Ui
    from envforge.fleet.driver import FleetReport

__all__ = ["MIN_TIMEOUT_S", "env_name", "ray_address", "register", "render_text", "verify_data"]

#: The shortest ``--timeout`` of a fleet command, in seconds: each node keeps at least 2 s of it for
#: its answer's way back (:func:`envforge.fleet.driver.node_budget`), so less leaves a node next to nothing.
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


def env_name(name: str) -> str:
    """``name`` when it can name an environment under ``envs/`` on the nodes: not empty, not a path
    (a ``/`` makes an environment argument a path for the local commands,
    :func:`envforge.env.layout.resolve_environment`; a fleet takes names only) and a valid
    ``<recipe>-<variant>`` lock name (:func:`envforge.recipe.schema.lock_name_problem`, what names
    ``envs/``).

    :raises InputError: the name is empty, a path, or no valid name (exit 2).
    """
    from envforge.core.errors import InputError
    from envforge.recipe.schema import lock_name_problem

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
    a.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
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


def _root(args: argparse.Namespace, ui: Ui) -> Path:
    from envforge.cli.lock import project_of

    root: Path = project_of(args, ui).root
    return root.resolve()


def _verify(args: argparse.Namespace, ui: Ui) -> int:
    """Verify on every node; with level gpu, the all-reduce after it gets what is left of ``--timeout``
    (at least :data:`MIN_ALLREDUCE_S`). One report: with ``--json`` one envelope (:func:`verify_data`)."""
    import time

    from envforge.fleet.driver import fleet_allreduce, fleet_verify
    from envforge.verify.findings import check_levels

    levels = tuple(x.strip() for x in (args.level or "").split(",") if x.strip())
    check_levels(levels)
    env_name(args.env)
    root = _root(args, ui)
    start = time.monotonic()
    report = fleet_verify(args.ray, args.env, root, levels=levels, timeout_s=args.timeout, agent=not args.no_agent)
    allreduce = None
    if "gpu" in levels:
        left = round(args.timeout - (time.monotonic() - start), 1)
        allreduce = fleet_allreduce(args.ray, timeout_s=max(MIN_ALLREDUCE_S, left))
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
    _check_recipe(root, args.recipe, args.variant)
    report = fleet_build(args.ray, args.recipe, args.variant, root, find_links=args.find_links,
                         offline=args.offline, timeout_s=args.timeout)
    return _render(report, ui)


def _check_recipe(root: Path, recipe: str, variant: str | None) -> None:
    """Where the driver has the project (``recipes/`` under ``root``), the recipe and variant must
    exist there, as for ``envforge build``; a recipe given as a path is checked where the driver can
    read it. Without the project here the nodes check them (their errors carry the hint).

    :raises InputError: no such recipe or variant (or an invalid recipe), exit 2.
    """
    from envforge.recipe.project import Project
    from envforge.recipe.load import load_recipe

    project = Project(root)
    as_path = recipe.endswith(".toml") or "/" in recipe
    if (as_path and Path(recipe).is_file()) or (not as_path and project.recipes_dir.is_dir()):
        load_recipe(project.recipe_path(recipe)).resolve(variant)


def _allreduce(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.core.errors import InputError
    from envforge.fleet.driver import fleet_allreduce

    env = {}
    for item in args.env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise InputError(f"--env {item!r}: expected NAME=VALUE")
        env[name] = value
    report = fleet_allreduce(args.ray, backend=args.backend, env=env, port=args.port, timeout_s=args.timeout)
    return _render(report, ui)


def _agent_start(args: argparse.Namespace, ui: Ui) -> int:
    from envforge.fleet.driver import fleet_start_agents

    root = args.project.resolve() if args.project else None
    return _render(fleet_start_agents(args.ray, root, timeout_s=args.timeout), ui)


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
    """The node x fingerprint matrix (verify), flips (build) or per-size latencies (allreduce)."""
    lines = []
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
    bad = [n for n in report.nodes if n.status != "ok"]
    lines.append(f"fleet {report.action}: {len(report.nodes)} node(s), {len(bad)} not ok, "
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
