"""The fleet's driver: the same stack on N nodes, verified and built through Ray (``envforge-stack[fleet]``).

Fan-out is Ray's, not ours, and written once (:func:`_fan_out`): one call per alive node that carries
the stack (:mod:`envforge.fleet.selection`: a GPU-free head is skipped, and the report says so), pinned to
it with ``NodeAffinitySchedulingStrategy(node_id, soft=False)`` (Ray's documented node-affinity
scheduling), either a fresh Ray task of a function of :mod:`envforge.fleet.tasks` (:func:`fleet_build`,
:func:`fleet_allreduce`, ``fleet_verify(agent=False)``) or a method of the node's long-lived envforge
agent (:mod:`envforge.fleet.agent`; :func:`fleet_verify`, :func:`fleet_start_agents`). Each runs
envforge's own core (``verify``, ``build``) on that node, against that node's copy of the project
(where it lives: :data:`envforge.fleet.tasks.ROOT_VARIABLE`). The driver's work is O(nodes): it
compares the fingerprints the nodes return and calls out every node that differs from the majority
(:mod:`envforge.fleet.report`).

Before Ray is asked, :func:`reachable` checks in seconds that a Ray GCS answers at the address
(:func:`connect`). A node that dies, whose task fails, or that does not answer within ``timeout_s`` is
a finding of the report, never a hang. A node's verify or build runs under a deadline that ends a
little before the driver's (:func:`envforge.fleet.tasks.node_budget`): a node stuck in a probe (an
interpreter that never answers) or a uv run kills its process group and answers ``timeout`` itself, so
nothing it started outlives the call; the driver stops an agent, or cancels a task, only when the node
gave no answer at all. Cross-node all-reduce (:func:`fleet_allreduce`) uses torch.distributed's own
TCP rendezvous on the first node; the backend is ``nccl`` on GPUs and ``gloo`` where there are none.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from pathlib import Path
from typing import Any, Protocol

from envforge.core.errors import ExternalToolError, InputError
from envforge.fleet.agent import STALE, agent_for, stop_agents
from envforge.fleet.report import (
    FleetNode,
    FleetReport,
    allreduce_node,
    failed_node,
    late_node,
    majority_differences,
    node_answer,
    one_line,
    single_node,
)
from envforge.fleet.selection import NodeSelection, Selected, choose_backend, select_nodes
from envforge.fleet.tasks import allreduce_task, build_task, verify_task

__all__ = [
    "connect",
    "fleet_allreduce",
    "fleet_build",
    "fleet_start_agents",
    "fleet_stop_agents",
    "fleet_verify",
    "quiet_ray_errors",
    "reachable",
]


# ---- the cluster -----------------------------------------------------------------------------------


def _ray() -> Any:
    try:
        import ray  # lazy: ray is an optional extra (envforge-stack[fleet])
    except ImportError:
        raise InputError(
            "the fleet commands need Ray, which is not installed", hint="pip install 'envforge-stack[fleet]'"
        ) from None
    return ray


def connect(address: str) -> Any:
    """Ray, initialised as a driver of the cluster at ``address`` (``HOST:PORT`` or ``auto``), unless
    it already is. Ray's own output stays off this process's stdout and stderr: workers' logs are not
    forwarded (``log_to_driver=False``) and the cluster's error messages (a raylet that died, a worker
    killed), which Ray prints to stdout, are not printed (every node's fate is in the report).

    :raises ExternalToolError: nothing at ``address`` answers as a Ray GCS (:func:`reachable`, within
        seconds), or ``ray.init`` fails.
    """
    ray = _ray()
    if not ray.is_initialized():
        reachable(address)
        host = address.rpartition(":")[0].strip("[]")
        local: dict[str, Any] = {}
        if host in ("127.0.0.1", "localhost"):
            # A cluster on loopback (``ray start --head --node-ip-address 127.0.0.1``). Ray rewrites a
            # loopback bootstrap address to the address of the machine's outbound interface
            # (ray._private.services.canonicalize_bootstrap_address, Ray 2.x), where such a cluster does
            # not listen; keep this driver on loopback instead.
            import ray._private.services as services  # lazy: ray is an optional extra

            services.node_ip_address_from_perspective = lambda address=None: "127.0.0.1"  # type: ignore[attr-defined]
            local = {"_node_ip_address": "127.0.0.1"}
        quiet_ray_errors()
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False, include_dashboard=False, **local)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ExternalToolError(
                f"cannot connect to the Ray cluster at {address}: {exc}",
                tool="ray",
                argv=["ray.init", address],
                returncode=None,
                hint="start one with `ray start --head` (and `ray start --address HEAD:6379` "
                "on each node), then pass --ray HEAD:6379 or --ray auto on a node",
            ) from None
    return ray


def quiet_ray_errors() -> None:
    """Keep the cluster's error messages off this driver's stdout. Ray's driver prints every error the
    cluster publishes (``ray._private.worker.listen_error_messages``: a dead raylet's last 20 log lines,
    a killed worker) to ``sys.stdout``, even with ``log_to_driver=False``, which would break ``--json``;
    its ``_worker_logs_enabled`` switch (Ray 2.x; what a breakpoint sets) turns that printing off. The
    fleet report says what happened to every node."""
    import ray._private.worker as worker  # lazy: ray is an optional extra

    if hasattr(worker, "_worker_logs_enabled"):
        worker._worker_logs_enabled = False


#: An HTTP/2 client's connection preface (RFC 9113, 3.4): the magic, then an empty SETTINGS frame
#: (length 0, type 4, flags 0, stream 0).
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"

_NO_CLUSTER_HINT = (
    "start one with `ray start --head` (and `ray start --address HEAD:6379` on each node), then "
    "pass --ray HEAD:6379, or --ray auto on a node"
)


def reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail within ``timeout_s`` seconds (all steps together), not after Ray's retries with its C++
    warnings on stderr, when no Ray GCS answers at ``HOST:PORT``: a TCP connection, then an HTTP/2
    preface (gRPC's transport: a GCS answers with a SETTINGS frame; something silent or not speaking
    HTTP/2 does not), then one GCS call (``check_alive``) from a client that gives a random cluster ID,
    which a GCS answers at once with ``WrongClusterID`` and a proxy or another gRPC service with
    another error. ``auto`` is left to Ray. The HTTP/2 step is skipped under ``RAY_USE_TLS``; the GCS
    call where this Ray has no such client (``ray._raylet.GcsClient``, Ray 2.x).

    :raises ExternalToolError: the connection is refused or times out, or what answers is not a GCS.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or address.startswith(("ray://", "auto")):
        return  # ``auto``: Ray finds and reports it itself
    deadline = time.monotonic() + timeout_s
    what = ""
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as conn:
            if os.environ.get("RAY_USE_TLS", "0").lower() not in ("1", "true"):
                what = f"something listens there, but gave no HTTP/2 answer (as a Ray GCS does) within {timeout_s:g} s"
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                conn.sendall(_H2_PREFACE)
                frame = conn.recv(9)
                if len(frame) < 4 or frame[3] != 4:  # the server's preface starts with a SETTINGS frame (type 4)
                    raise ExternalToolError(
                        f"cannot connect to the Ray cluster at {address}: something listens there, but it is not "
                        f"a Ray GCS (it does not speak gRPC's HTTP/2)",
                        tool="ray",
                        argv=["ray.init", address],
                        returncode=None,
                        hint=_NO_CLUSTER_HINT,
                    )
    except OSError as exc:
        if isinstance(exc, TimeoutError):
            reason = what or f"no TCP connection within {timeout_s:g} s"
        else:
            reason = exc.strerror or str(exc)
        raise ExternalToolError(
            f"cannot connect to the Ray cluster at {address}: {reason}",
            tool="ray",
            argv=["ray.init", address],
            returncode=None,
            hint=_NO_CLUSTER_HINT,
        ) from None
    _gcs_answers(address, max(0.5, deadline - time.monotonic()))


def _gcs_answers(address: str, timeout_s: float) -> None:
    """One GCS call (``check_alive``, ``timeout_s`` seconds) from a client giving a random cluster ID:
    a GCS refuses it at once (``AuthenticationError``: ``WrongClusterID``), which proves it is one;
    any other error means what answers is no GCS (a proxy, another gRPC service).

    :raises ExternalToolError: what answers at ``address`` is not a Ray GCS.
    """
    try:
        client = import_module("ray._raylet").GcsClient(address=address, cluster_id=os.urandom(28).hex())
    except (ImportError, TypeError, AttributeError):  # another Ray: leave it to ray.init
        return
    try:
        client.check_alive([], timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001  (ray.exceptions.RpcError and its kinds)
        text = str(exc)
        if type(exc).__name__ == "AuthenticationError" or "ClusterID" in text:
            return  # a GCS: it checked our (random) cluster ID
        raise ExternalToolError(
            f"cannot connect to the Ray cluster at {address}: what answers there is not a Ray GCS ({one_line(exc)})",
            tool="ray",
            argv=["ray.init", address],
            returncode=None,
            hint=_NO_CLUSTER_HINT,
        ) from None
    finally:
        del client


def _alive_nodes(ray: Any) -> list[dict[str, Any]]:
    return sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n.get("NodeManagerAddress", ""))


def _selected(ray: Any, select: NodeSelection) -> Selected:
    """The alive nodes ``select`` names, and the skipped ones (:func:`~envforge.fleet.selection.select_nodes`)."""
    return select_nodes(_alive_nodes(ray), select)


def _report(
    action: str,
    nodes: Sequence[FleetNode],
    chosen: Selected,
    start: float,
    *,
    compare: bool = False,
    backend: tuple[str, str] | None = None,
) -> FleetReport:
    """The command's report: ``nodes`` by host (``compare``: with the majority and who differs), and
    which nodes were selected and skipped."""
    majority, differs = majority_differences(nodes) if compare else ({}, {})
    return FleetReport(
        action,
        tuple(nodes),
        majority,
        differs,
        time.monotonic() - start,
        selection=chosen.rule,
        skipped=chosen.skipped,
        backend=backend,
    )


# ---- the fan-out -----------------------------------------------------------------------------------


class _Way(Protocol):
    """How one fan-out reaches a node (``node``: Ray's record of it, an entry of ``ray.nodes()``)."""

    def send(self, node: Mapping[str, Any]) -> Any:
        """Start the node's call; its Ray object ref."""

    def receive(self, node: Mapping[str, Any], data: Any) -> FleetNode | Any:
        """The node's answer as a :class:`FleetNode`, or the ref of the call sent again."""

    def abandon(self, node: Mapping[str, Any], ref: Any) -> str:
        """Stop a call that did not answer in time; what was done, for the ``timeout`` error."""


def _fan_out(ray: Any, nodes: Sequence[Mapping[str, Any]], way: _Way, timeout_s: float) -> list[FleetNode]:
    """One call per node of ``nodes`` through ``way``, each answer taken as it arrives, for at most
    ``timeout_s`` seconds in all: the answers as :class:`FleetNode` in arrival order; a node whose call
    could not start or raised (its task failed, its worker, agent or node died) is ``failed``
    (:func:`~envforge.fleet.report.failed_node`), one still going at the end ``timeout``, its call
    abandoned (:func:`~envforge.fleet.report.late_node`)."""
    deadline = time.monotonic() + timeout_s
    calls: dict[Any, Mapping[str, Any]] = {}
    out = []
    for node in nodes:
        try:
            calls[way.send(node)] = node
        except Exception as exc:  # Ray refused the task or the agent: a finding, not a crash
            out.append(failed_node(node, exc))
    while calls and (left := deadline - time.monotonic()) > 0:
        done, _ = ray.wait(list(calls), num_returns=1, timeout=left)
        for ref in done:
            node = calls.pop(ref)
            try:
                got = way.receive(node, ray.get(ref))
            except Exception as exc:  # RayTaskError, RayActorError, NodeDiedError, WorkerCrashedError
                out.append(failed_node(node, exc))
                continue
            if isinstance(got, FleetNode):
                out.append(got)
            else:
                calls[got] = node  # sent again (to a new agent)
    for ref, node in calls.items():
        out.append(late_node(node, timeout_s, way.abandon(node, ref)))
    return out


def _pinned(node: Mapping[str, Any]) -> Any:
    """Ray's scheduling strategy that runs a call on ``node`` only."""
    # lazy: ray is an optional extra
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)


class _Tasks:
    """A fresh Ray task of ``fn(*args_of(node))`` per node, its answer taken by ``answer``; a late
    one is cancelled."""

    def __init__(
        self,
        ray: Any,
        fn: Callable[..., Any],
        action: str,
        args_of: Callable[[Mapping[str, Any]], Sequence[Any]],
        answer: Callable[[Mapping[str, Any], Any], FleetNode] = node_answer,
    ) -> None:
        self._ray, self._remote, self._name = ray, ray.remote(num_cpus=0, max_retries=0)(fn), f"envforge-{action}"
        self._args_of, self._answer = args_of, answer

    def send(self, node: Mapping[str, Any]) -> Any:
        return self._remote.options(scheduling_strategy=_pinned(node), name=self._name).remote(*self._args_of(node))

    def receive(self, node: Mapping[str, Any], data: Any) -> FleetNode:
        return self._answer(node, data)

    def abandon(self, node: Mapping[str, Any], ref: Any) -> str:
        self._ray.cancel(ref, force=True)
        return "the task was cancelled"


class _Agents:
    """The agent ``method`` (``verify``: :func:`~envforge.fleet.tasks.verify_task` of ``args``;
    ``start``: the stamp check only) through each node's agent (:mod:`envforge.fleet.agent`): started
    where there is none, replaced once when it is another envforge's (its methods differ) or its
    code changed on disk (it answers :data:`~envforge.fleet.agent.STALE`), stopped when it does not
    answer in time (so the next call starts a new one). Each answer's ``detail.agent`` holds pid,
    calls, age-s, replaced-because and ``state``: ``started`` (by this call), ``running`` (it was) or
    ``replaced``."""

    def __init__(self, ray: Any, method: str, args: Sequence[Any]) -> None:
        self._ray, self._method, self._args = ray, method, args
        self._agents: dict[str, tuple[Any, tuple[str, ...] | None]] = {}  # node id: agent, why it replaced one

    def _call(self, node: Mapping[str, Any], agent: Any, replaced: tuple[str, ...] | None) -> Any:
        self._agents[node["NodeID"]] = (agent, replaced)
        return getattr(agent, self._method).remote(*self._args)

    def _replace(self, node: Mapping[str, Any], agent: Any, because: tuple[str, ...]) -> Any:
        _stop(self._ray, agent)
        return self._call(node, agent_for(self._ray, node["NodeID"], replacing=agent), because)

    def send(self, node: Mapping[str, Any]) -> Any:
        agent = agent_for(self._ray, node["NodeID"])
        try:
            return self._call(node, agent, None)
        except (AttributeError, TypeError) as exc:  # an agent of another envforge: its methods differ
            return self._replace(node, agent, (f"its methods differ from this envforge's ({one_line(exc)})",))

    def receive(self, node: Mapping[str, Any], data: Any) -> FleetNode | Any:
        agent, replaced = self._agents[node["NodeID"]]
        if STALE in data and replaced is None:  # its code changed: a new agent imports the new code
            return self._replace(node, agent, tuple(data[STALE]))
        if STALE in data:
            return failed_node(node, RuntimeError(f"a new agent found its code changed too: {data[STALE][0]}"))
        detail = {**data.pop("agent", {}), "replaced-because": list(replaced or ())}
        detail["state"] = "replaced" if replaced else "started" if detail.get("calls") == 1 else "running"
        return node_answer(node, {**data, "detail": {"agent": detail}})

    def abandon(self, node: Mapping[str, Any], ref: Any) -> str:
        _stop(self._ray, self._agents[node["NodeID"]][0])
        return "its agent was stopped"


def _stop(ray: Any, agent: Any) -> None:
    try:
        ray.kill(agent, no_restart=True)
    except Exception:  # noqa: BLE001  (already dead: nothing to stop)
        pass


def _by_host(nodes: list[FleetNode]) -> tuple[FleetNode, ...]:
    return tuple(sorted(nodes, key=lambda n: (n.host, n.node_id)))


# ---- the commands ----------------------------------------------------------------------------------


def fleet_verify(
    address: str,
    env_name: str,
    root: Path,
    *,
    levels: Sequence[str] = (),
    timeout_s: float = 600.0,
    agent: bool = True,
    select: NodeSelection = NodeSelection(),
) -> FleetReport:
    """Verify ``env_name`` on every alive node ``select`` names (:mod:`envforge.fleet.selection`; the
    others are the report's ``skipped``) of the Ray cluster at ``address`` (``auto`` on a node),
    through each node's long-lived agent (:mod:`envforge.fleet.agent`; the first call on a cluster
    starts them), or with ``agent=False`` in a fresh Ray task per node. Each node's ``detail`` holds
    ``agent`` (pid, calls, age-s, replaced-because, state) when an agent answered.

    :raises InputError: Ray is not installed (``pip install 'envforge-stack[fleet]'``).
    :raises ExternalToolError: the cluster cannot be reached.
    """
    start = time.monotonic()
    ray = connect(address)
    args = (env_name, str(root), tuple(levels), (time.time() + timeout_s, timeout_s))
    way = _Agents(ray, "verify", args) if agent else _Tasks(ray, verify_task, "verify", lambda _: args)
    chosen = _selected(ray, select)
    return _report("verify", _by_host(_fan_out(ray, chosen.nodes, way, timeout_s)), chosen, start, compare=True)


def fleet_start_agents(
    address: str, root: Path | None = None, *, timeout_s: float = 120.0, select: NodeSelection = NodeSelection()
) -> FleetReport:
    """Start the envforge agent (:mod:`envforge.fleet.agent`) on every alive node ``select`` names of
    the Ray cluster at ``address`` where there is none, keep the running ones, replace those whose code changed on
    disk; verify nothing. Each node's ``detail.agent.state`` says which (``started``, ``running``,
    ``replaced``); a node whose agent cannot start or died is ``failed``, one that does not answer
    within ``timeout_s`` seconds is ``timeout`` (its agent stopped). With ``root`` (or
    ``ENVFORGE_FLEET_ROOT`` on the node), a node where that directory holds no ``recipes/`` has a
    ``no-project`` finding. Action ``agent-start``; exit code 1 when any node is not ``ok``.

    :raises InputError: Ray is not installed.
    :raises ExternalToolError: the cluster cannot be reached.
    """
    start = time.monotonic()
    ray = connect(address)
    chosen = _selected(ray, select)
    nodes = _fan_out(ray, chosen.nodes, _Agents(ray, "start", (str(root) if root else "",)), timeout_s)
    return _report("agent-start", _by_host(nodes), chosen, start)


def fleet_stop_agents(address: str) -> list[str]:
    """Stop every envforge agent (:mod:`envforge.fleet.agent`) in the Ray cluster at ``address``; the
    next ``fleet verify`` starts new ones. Returns the actor names stopped, sorted.

    :raises InputError: Ray is not installed.
    :raises ExternalToolError: the cluster cannot be reached.
    """
    return stop_agents(connect(address))


def fleet_build(
    address: str,
    recipe: str,
    variant: str | None,
    root: Path,
    *,
    find_links: Sequence[Path] = (),
    offline: bool = False,
    timeout_s: float = 3600.0,
    select: NodeSelection = NodeSelection(),
) -> FleetReport:
    """Build the committed lock of ``recipe``/``variant`` on every alive node ``select`` names. A node whose build
    fails keeps its previous generation live (``build``'s own guarantee); ``detail.flipped`` says
    which nodes flipped to a new generation. A node's uv runs end before ``timeout_s`` (the node's
    deadline, :func:`~envforge.fleet.tasks.node_budget`): one stopped there is a ``timeout`` node,
    not flipped.

    :raises InputError: Ray is not installed.
    :raises ExternalToolError: the cluster cannot be reached.
    """
    start = time.monotonic()
    ray = connect(address)
    args = (
        recipe,
        variant,
        str(root),
        tuple(str(p) for p in find_links),
        offline,
        (time.time() + timeout_s, timeout_s),
    )
    chosen = _selected(ray, select)
    nodes = _fan_out(ray, chosen.nodes, _Tasks(ray, build_task, "build", lambda _: args), timeout_s)
    return _report("build", _by_host(nodes), chosen, start)


def fleet_allreduce(
    address: str,
    *,
    backend: str | None = None,
    sizes: Sequence[int] = (43008, 1 << 20, 16 << 20),
    env: Mapping[str, str] | None = None,
    port: int = 29517,
    repeats: int = 20,
    timeout_s: float = 300.0,
    select: NodeSelection = NodeSelection(),
) -> FleetReport:
    """One all-reduce group across every alive node ``select`` names (rank 0 on the first node by
    address), with ``backend`` (``nccl``, ``gloo``; None: chosen by the selected nodes' GPU resources,
    :func:`~envforge.fleet.selection.choose_backend`; the report's ``backend`` says which and why), timing
    ``sizes`` (bytes; default the verify-step sizes 43 KB, 1 MiB, 16 MiB) with ``env`` (e.g. an env
    profile's NCCL variables) set in each task. Each node's ``detail`` holds per-size median latency
    (µs), bus bandwidth (GB/s, 2(n-1)/n × bytes / time, NCCL's busBw) and whether the sum was right.
    A rank that fails or hangs past ``timeout_s`` seconds is a node with status ``failed``/``timeout``;
    one whose Ray workers' Python has no torch is ``failed`` with a ``hint``. Nodes in rank order
    (those that gave no answer last).

    :raises InputError: Ray is not installed.
    :raises ExternalToolError: the cluster cannot be reached.
    """
    start = time.monotonic()
    ray = connect(address)
    chosen = _selected(ray, select)
    nodes = chosen.nodes
    name, why = choose_backend(nodes, backend)
    if len(nodes) < 2:  # one rank crosses no node boundary: never report that as "ok"
        return _report(
            "allreduce", [single_node(n, len(chosen.skipped)) for n in nodes], chosen, start, backend=(name, why)
        )
    master = nodes[0]["NodeManagerAddress"]
    rank = {n["NodeID"]: i for i, n in enumerate(nodes)}
    way = _Tasks(
        ray,
        allreduce_task,
        "allreduce",
        answer=allreduce_node,
        args_of=lambda n: (rank[n["NodeID"]], len(nodes), master, port, name, tuple(sizes), dict(env or {}), repeats),
    )
    out = _fan_out(ray, nodes, way, timeout_s)
    return _report(
        "allreduce", sorted(out, key=lambda x: x.detail.get("rank", 1 << 30)), chosen, start, backend=(name, why)
    )
