"""The fleet: the same stack on N nodes, verified and built through Ray (``envforge[fleet]``).

Fan-out is Ray's, not ours: :func:`fleet_build` starts one Ray task per alive node, pinned to it with
``NodeAffinitySchedulingStrategy(node_id, soft=False)`` (Ray's documented node-affinity scheduling), and
:func:`fleet_verify` calls each node's long-lived envforge agent, pinned the same way
(:mod:`envforge.fleet.agent`; a fresh task per node with ``agent=False``); each runs envforge's own core
(``verify``, ``build``) on that node, against that node's copy of the project. The driver's work is
O(nodes): it compares the fingerprints the nodes return and calls out every node that differs from the
majority.

Where the project lives on a node: the path given to the driver (every node has the checkout at the
same path, as on a cluster with a shared layout), unless that node's Ray processes have
``ENVFORGE_FLEET_ROOT`` in their environment (``ray start ... `` under ``env ENVFORGE_FLEET_ROOT=DIR``;
the tests give each local "node" its own directory this way).

A node that dies, whose task fails, or that does not answer within ``timeout_s`` is a finding of the
report, never a hang. A node's verify or build runs under an :func:`envforge.core.deadline.deadline` that
ends a little before the driver's (:func:`node_budget`): a node stuck in a probe (an interpreter that
never answers) or a uv run kills its process group and answers ``timeout`` itself, so nothing it
started outlives the call; the driver stops an agent, or cancels a task, only when the node gave no
answer at all. Cross-node all-reduce (:func:`fleet_allreduce`) uses torch.distributed's own TCP
rendezvous on the first node; the backend is ``nccl`` on GPUs and ``gloo`` where there are none.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envforge.core.errors import EnvforgeError, ExternalToolError, InputError

__all__ = [
    "COMPARED",
    "FleetNode",
    "FleetReport",
    "fleet_allreduce",
    "fleet_build",
    "fleet_start_agents",
    "fleet_stop_agents",
    "fleet_verify",
    "majority_differences",
]

ROOT_VARIABLE = "ENVFORGE_FLEET_ROOT"

#: What must be identical on every node (keys of a node's ``fingerprint`` dict, in report order).
COMPARED = ("lock_digest", "patch_manifest_digest", "env_profile", "env_profile_digest", "env_profile_values",
            "python", "platform", "driver", "gpu", "gpu_count", "compute_capability")


def node_budget(timeout_s: float, deadline_wall: float, now_wall: float) -> float:
    """Seconds a node may spend in its verify or build so its answer reaches the driver before the driver's
    ``timeout_s`` ends at ``deadline_wall`` (``time.time()`` on the driver): what is left by this
    node's clock (``now_wall``), or ``timeout_s`` where the clocks disagree by more than that (a
    node whose clock is behind or far ahead), less a margin for the answer's way back of 5 % of
    ``timeout_s``, between 2 s and 15 s. Never below 0.
    """
    left = deadline_wall - now_wall
    if not 0 < left <= timeout_s:
        left = timeout_s
    return max(0.0, left - min(15.0, max(2.0, 0.05 * timeout_s)))


@dataclass(frozen=True, slots=True)
class FleetNode:
    """One node's answer. ``status``: ``ok`` (clean), ``findings``, ``failed`` (the task raised or the
    node died), ``timeout`` (no answer within the limit, or the node's own deadline stopped it).
    ``fingerprint`` holds the keys of :data:`COMPARED`; ``findings`` the node's verify findings as
    dicts; ``elapsed_s`` in seconds; ``hint`` the next step the node's error named (an envforge
    error's hint, e.g. the environments that exist there), or None."""

    node_id: str
    host: str
    status: str
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    findings: tuple[Mapping[str, str], ...] = ()
    elapsed_s: float | None = None
    error: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    hint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order."""
        return {"node-id": self.node_id, "host": self.host, "status": self.status,
                "fingerprint": dict(self.fingerprint), "findings": [dict(f) for f in self.findings],
                "elapsed-s": self.elapsed_s, "error": self.error, "hint": self.hint, "detail": dict(self.detail)}


@dataclass(frozen=True, slots=True)
class FleetReport:
    """Every node's answer, the majority value of each compared key, and who differs from it.

    ``differs`` maps a node id to the compared keys where it differs from the majority.
    ``exit_code``: 0 when every node answered, is clean and agrees; 1 otherwise.
    """

    action: str
    nodes: tuple[FleetNode, ...]
    majority: Mapping[str, Any]
    differs: Mapping[str, tuple[str, ...]]
    elapsed_s: float

    @property
    def exit_code(self) -> int:
        bad = any(n.status != "ok" for n in self.nodes) or bool(self.differs)
        return 1 if bad or not self.nodes else 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order (schema ``envforge.fleet/1``, docs/fleet.md)."""
        return {"action": self.action, "nodes": [n.as_dict() for n in self.nodes],
                "majority": dict(self.majority), "differs": {k: list(v) for k, v in self.differs.items()},
                "exit-code": self.exit_code, "elapsed-s": round(self.elapsed_s, 3)}


def majority_differences(nodes: Sequence[FleetNode]) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """The most common value of each :data:`COMPARED` key among nodes that answered, and per node
    the keys where it differs. Ties go to the value seen first (node order)."""
    answered = [n for n in nodes if n.fingerprint]
    majority: dict[str, Any] = {}
    for key in COMPARED:
        values = [_hashable(n.fingerprint.get(key)) for n in answered]
        if values:
            majority[key] = _unhash(Counter(values).most_common(1)[0][0])
    differs = {}
    for n in answered:
        keys = tuple(k for k in COMPARED if _hashable(n.fingerprint.get(k)) != _hashable(majority.get(k)))
        if keys:
            differs[n.node_id] = keys
    return majority, differs


def _hashable(v: Any) -> Any:
    return tuple(sorted(v.items())) if isinstance(v, Mapping) else v


def _unhash(v: Any) -> Any:
    return dict(v) if isinstance(v, tuple) else v


# ---- Ray plumbing ---------------------------------------------------------------------------------

def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise InputError("the fleet commands need Ray, which is not installed",
                         hint="pip install 'envforge[fleet]'") from None
    return ray


def _connect(address: str) -> Any:
    """Ray, initialised as a driver of the cluster at ``address`` (``HOST:PORT`` or ``auto``), unless
    it already is. Ray's own output stays off this process's stdout and stderr: workers' logs are not
    forwarded (``log_to_driver=False``) and the cluster's error messages (a raylet that died, a worker
    killed), which Ray prints to stdout, are not printed (every node's fate is in the report).

    :raises ExternalToolError: nothing at ``address`` answers as a Ray GCS (:func:`_reachable`, within
        seconds), or ``ray.init`` fails.
    """
    ray = _ray()
    if not ray.is_initialized():
        _reachable(address)
        host = address.rpartition(":")[0].strip("[]")
        local: dict[str, Any] = {}
        if host in ("127.0.0.1", "localhost"):
            # A cluster on loopback (``ray start --head --node-ip-address 127.0.0.1``). Ray rewrites a
            # loopback bootstrap address to the address of the machine's outbound interface
            # (ray._private.services.canonicalize_bootstrap_address, Ray 2.x), where such a cluster does
            # not listen; keep this driver on loopback instead.
            import ray._private.services as services

            services.node_ip_address_from_perspective = lambda address=None: "127.0.0.1"  # type: ignore[attr-defined]
            local = {"_node_ip_address": "127.0.0.1"}
        _quiet_ray_errors()
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False, include_dashboard=False, **local)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ExternalToolError(f"cannot connect to the Ray cluster at {address}: {exc}", tool="ray",
                                    argv=["ray.init", address], returncode=None,
                                    hint="start one with `ray start --head` (and `ray start --address HEAD:6379` "
                                         "on each node), then pass --ray HEAD:6379 or --ray auto on a node") from None
    return ray


def _quiet_ray_errors() -> None:
    """Keep the cluster's error messages off this driver's stdout. Ray's driver prints every error the
    cluster publishes (``ray._private.worker.listen_error_messages``: a dead raylet's last 20 log lines,
    a killed worker) to ``sys.stdout``, even with ``log_to_driver=False``, which would break ``--json``;
    its ``_worker_logs_enabled`` switch (Ray 2.x; what a breakpoint sets) turns that printing off. The
    fleet report says what happened to every node."""
    import ray._private.worker as worker

    if hasattr(worker, "_worker_logs_enabled"):
        worker._worker_logs_enabled = False


#: An HTTP/2 client's connection preface (RFC 9113, 3.4): the magic, then an empty SETTINGS frame
#: (length 0, type 4, flags 0, stream 0).
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"

_NO_CLUSTER_HINT = ("start one with `ray start --head` (and `ray start --address HEAD:6379` on each node), then "
                    "pass --ray HEAD:6379, or --ray auto on a node")


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail within ``timeout_s`` seconds (all steps together), not after Ray's retries with its C++
    warnings on stderr, when no Ray GCS answers at ``HOST:PORT``: a TCP connection, then an HTTP/2
    preface (gRPC's transport: a GCS answers with a SETTINGS frame; something silent or not speaking
    HTTP/2 does not), then one GCS call (``check_alive``) from a client that gives a random cluster ID,
    which a GCS answers at once with ``WrongClusterID`` and a proxy or another gRPC service with
    another error. ``auto`` is left to Ray. The HTTP/2 step is skipped under ``RAY_USE_TLS``; the GCS
    call where this Ray has no such client (``ray._raylet.GcsClient``, Ray 2.x).

    :raises ExternalToolError: the connection is refused or times out, or what answers is not a GCS.
    """
    import socket

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
                        f"a Ray GCS (it does not speak gRPC's HTTP/2)", tool="ray", argv=["ray.init", address],
                        returncode=None, hint=_NO_CLUSTER_HINT)
    except OSError as exc:
        if isinstance(exc, TimeoutError):
            reason = what or f"no TCP connection within {timeout_s:g} s"
        else:
            reason = exc.strerror or str(exc)
        raise ExternalToolError(f"cannot connect to the Ray cluster at {address}: {reason}",
                                tool="ray", argv=["ray.init", address], returncode=None,
                                hint=_NO_CLUSTER_HINT) from None
    _gcs_answers(address, max(0.5, deadline - time.monotonic()))


def _gcs_answers(address: str, timeout_s: float) -> None:
    """One GCS call (``check_alive``, ``timeout_s`` seconds) from a client giving a random cluster ID:
    a GCS refuses it at once (``AuthenticationError``: ``WrongClusterID``), which proves it is one;
    any other error means what answers is no GCS (a proxy, another gRPC service).

    :raises ExternalToolError: what answers at ``address`` is not a Ray GCS.
    """
    try:
        from importlib import import_module

        client = import_module("ray._raylet").GcsClient(address=address, cluster_id=os.urandom(28).hex())
    except (ImportError, TypeError, AttributeError):  # another Ray: leave it to ray.init
        return
    try:
        client.check_alive([], timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001  (ray.exceptions.RpcError and its kinds)
        text = str(exc)
        if type(exc).__name__ == "AuthenticationError" or "ClusterID" in text:
            return  # a GCS: it checked our (random) cluster ID
        raise ExternalToolError(f"cannot connect to the Ray cluster at {address}: what answers there is not a Ray "
                                f"GCS ({_one_line(exc)})", tool="ray", argv=["ray.init", address],
                                returncode=None, hint=_NO_CLUSTER_HINT) from None
    finally:
        del client


def _alive_nodes(ray: Any) -> list[dict[str, Any]]:
    return sorted((n for n in ray.nodes() if n.get("Alive")), key=lambda n: n.get("NodeManagerAddress", ""))


def _fan_out(ray: Any, fn: Callable[..., Any], args: Sequence[Any], timeout_s: float,
             action: str) -> list[FleetNode]:
    """Run ``fn(*args)`` once on every alive node (pinned); collect answers, failures and timeouts."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    remote = ray.remote(num_cpus=0, max_retries=0)(fn)
    nodes = _alive_nodes(ray)
    refs = {remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
                           name=f"envforge-{action}").remote(*args): n for n in nodes}
    done, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    out = []
    for ref in done:
        node = refs[ref]
        try:
            out.append(_node_answer(node, ray.get(ref)))
        except Exception as exc:  # RayTaskError, NodeDiedError, WorkerCrashedError: a finding, not a crash
            out.append(_failed(node, exc))
    for ref in pending:
        ray.cancel(ref, force=True)
        out.append(_late(refs[ref], timeout_s, "the task was cancelled"))
    return sorted(out, key=lambda n: (n.host, n.node_id))


def _agent_fan_out(ray: Any, method: str, args: Sequence[Any], timeout_s: float) -> list[FleetNode]:
    """The agent ``method`` (``verify``: ``_verify_task(*args)``; ``start``: the stamp check only) on
    every alive node through that node's agent (:mod:`envforge.fleet.agent`): started where there is
    none, replaced once when its code changed on disk, stopped when it does not answer within
    ``timeout_s`` (so the next call starts a new one), a ``failed`` node when it died. Each answer's
    ``detail.agent`` holds pid, calls, age-s, replaced-because and ``state``: ``started`` (by this
    call), ``running`` (it was) or ``replaced`` (code changed)."""
    from envforge.fleet.agent import STALE, agent_for

    deadline = time.monotonic() + timeout_s
    calls: dict[Any, tuple[dict[str, Any], Any, tuple[str, ...] | None]] = {}  # ref: node, agent, replaced
    out = []
    for node in _alive_nodes(ray):
        try:
            agent = agent_for(ray, node["NodeID"])
            try:
                calls[getattr(agent, method).remote(*args)] = (node, agent, None)
            except (AttributeError, TypeError) as exc:  # an agent of another envforge: its methods differ
                _stop(ray, agent)
                fresh = agent_for(ray, node["NodeID"], replacing=agent)
                calls[getattr(fresh, method).remote(*args)] = (
                    node, fresh, (f"its methods differ from this envforge's ({_one_line(exc)})",))
        except Exception as exc:  # Ray refused to create it: a finding, not a crash
            out.append(_failed(node, exc))
    while calls and (left := deadline - time.monotonic()) > 0:
        done, _ = ray.wait(list(calls), num_returns=1, timeout=left)
        for ref in done:
            node, agent, replaced = calls.pop(ref)
            try:
                data = ray.get(ref)
                if STALE in data and replaced is None:  # its code changed: a new agent imports the new code
                    _stop(ray, agent)
                    fresh = agent_for(ray, node["NodeID"], replacing=agent)
                    calls[getattr(fresh, method).remote(*args)] = (node, fresh, tuple(data[STALE]))
                    continue
            except Exception as exc:  # RayActorError (the agent or its node died), RayTaskError
                out.append(_failed(node, exc))
                continue
            if STALE in data:
                out.append(_failed(node, RuntimeError(f"a new agent found its code changed too: {data[STALE][0]}")))
                continue
            agent_detail = {**data.pop("agent", {}), "replaced-because": list(replaced or ())}
            agent_detail["state"] = "replaced" if replaced else "started" if agent_detail.get("calls") == 1 else "running"
            out.append(_node_answer(node, {**data, "detail": {"agent": agent_detail}}))
    for node, agent, _ in calls.values():
        _stop(ray, agent)
        out.append(_late(node, timeout_s, "its agent was stopped"))
    return sorted(out, key=lambda n: (n.host, n.node_id))


def _stop(ray: Any, agent: Any) -> None:
    try:
        ray.kill(agent, no_restart=True)
    except Exception:  # noqa: BLE001  (already dead: nothing to stop)
        pass


def _failed(node: Mapping[str, Any], exc: BaseException) -> FleetNode:
    return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "failed", error=_one_line(exc))


def _late(node: Mapping[str, Any], timeout_s: float, what: str) -> FleetNode:
    return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "timeout",
                     error=f"no answer within {timeout_s:g} s ({what})")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    last = [ln for ln in text if ln.strip()][-1:] or [type(exc).__name__]
    return f"{type(exc).__name__}: {last[0].strip()}"[:500]


def _node_answer(node: Mapping[str, Any], data: Mapping[str, Any]) -> FleetNode:
    if data.get("error"):
        return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"),
                         "timeout" if data.get("timed-out") else "failed",
                         fingerprint=data.get("fingerprint", {}), error=data["error"],
                         elapsed_s=data.get("elapsed-s"), detail=data.get("detail", {}), hint=data.get("hint"))
    findings = tuple(data.get("findings", ()))
    return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "findings" if findings else "ok",
                     fingerprint=data.get("fingerprint", {}), findings=findings,
                     elapsed_s=data.get("elapsed-s"), detail=data.get("detail", {}))


# ---- the tasks (run on the nodes) -----------------------------------------------------------------

def _node_root(default: str) -> Path:
    return Path(os.environ.get(ROOT_VARIABLE) or default)


def _node_deadline(limit: tuple[float, float] | None) -> AbstractContextManager[None]:
    """:func:`envforge.core.deadline.deadline` of the node's :func:`node_budget` of ``limit`` (the driver's
    deadline as ``time.time()``, its timeout in s); no deadline when ``limit`` is None."""
    from contextlib import nullcontext

    from envforge.core.deadline import deadline

    return nullcontext() if limit is None else deadline(node_budget(limit[1], limit[0], time.time()))


def _node_error(action: str, exc: EnvforgeError, limit: tuple[float, float] | None) -> dict[str, Any]:
    """A task's ``error`` answer, with the error's ``hint`` when it has one (the fix the local command
    would print, e.g. the environments that exist on the node); ``timed-out`` (status ``timeout``)
    when the node's deadline stopped a probe or uv run (``deadline_s`` on the error, or on the cause
    of a build error)."""
    hint = {"hint": exc.hint} if exc.hint else {}
    stopped = [getattr(e, "deadline_s", None) for e in (exc, getattr(exc, "cause", None))]
    if limit is None or stopped == [None, None]:
        return {"error": exc.message, **hint}
    return {"error": f"{action} did not finish within the {limit[1]:g} s limit: {exc.message}", **hint,
            "timed-out": True}


def _verify_task(env_name: str, root: str, levels: tuple[str, ...],
                 limit: tuple[float, float] | None = None) -> dict[str, Any]:
    """On one node: envforge's verify of ``env_name`` in this node's project; JSON-able answer.
    ``limit``: (the driver's deadline as ``time.time()``, its timeout in s); every probe of the
    verify ends within :func:`node_budget` of it, and one that ran past it makes the answer an
    ``error`` with ``timed-out``."""

    from envforge.env.layout import resolve_environment
    from envforge.env.profile import read_installed
    from envforge.core.errors import EnvforgeError
    from envforge.recipe.project import Project
    from envforge.verify import VerifyOptions, verify

    start = time.monotonic()
    try:
        with _node_deadline(limit):
            project = Project(_node_root(root))
            env = resolve_environment(project, env_name, env_name)
            report = verify(env, project, VerifyOptions(levels=levels or None, base_env=dict(os.environ)))
            installed = read_installed(env.site_packages)  # the record verify read: a regular file only
    except EnvforgeError as exc:
        return {**_node_error("verify", exc, limit), "elapsed-s": round(time.monotonic() - start, 3)}
    fp = report.fingerprint.as_dict()
    fp["env_profile_values"] = dict(installed.env) if installed is not None else {}
    return {"fingerprint": {k: fp.get(k) for k in COMPARED},
            "findings": [f.as_dict() for f in report.findings],
            "elapsed-s": round(time.monotonic() - start, 3)}


def _build_task(recipe: str, variant: str | None, root: str, find_links: tuple[str, ...],
                offline: bool, limit: tuple[float, float] | None = None) -> dict[str, Any]:
    """On one node: envforge's build of the committed lock; the live generation before and after.
    ``limit`` as for :func:`_verify_task`: a uv run still going at the node's deadline is stopped
    (process group killed), the build fails as any failed build does (the live generation kept),
    and the answer is ``timed-out``."""
    from envforge.env.build import execute_build, plan_build
    from envforge.core.errors import EnvforgeError
    from envforge.uv.interpreter import find_python
    from envforge.recipe.project import Project
    from envforge.recipe.load import load_recipe

    start = time.monotonic()
    project = Project(_node_root(root))
    before = after = None
    try:
        with _node_deadline(limit):
            resolved = load_recipe(project.recipe_path(recipe)).resolve(variant)
            link = project.env_path(resolved.lock_name)
            before = _live(link)
            plan = plan_build(project, resolved, find_python(resolved.python),
                              find_links=[Path(p) for p in find_links], offline=offline)
            execute_build(plan)
            after = _live(link)
    except EnvforgeError as exc:
        return {**_node_error("build", exc, limit), "elapsed-s": round(time.monotonic() - start, 3),
                "detail": {"before": before, "after": before, "flipped": False}}
    return {"fingerprint": {}, "findings": [], "elapsed-s": round(time.monotonic() - start, 3),
            "detail": {"before": before, "after": after, "flipped": before != after}}


def _live(link: Path) -> str | None:
    """The generation ``envs/<name>`` points to (``g0003``), or None when there is none yet."""
    return link.resolve().name if link.is_symlink() else None


def _allreduce_task(rank: int, world: int, master: str, port: int, backend: str, sizes: tuple[int, ...],
                    env: Mapping[str, str], repeats: int) -> dict[str, Any]:
    """On one node: join the torch.distributed group (TCP rendezvous on ``master:port``) and time
    all-reduces of ``sizes`` bytes (float32), median of ``repeats``; the sum is checked. torch is
    imported in the Python of Ray's workers (not an envforge environment's): where it is missing the
    answer is ``{"rank", "error", "hint"}`` saying so, not a traceback."""
    os.environ.update(env)
    import statistics
    import sys

    try:
        import torch
        import torch.distributed as dist
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != "torch":
            raise
        return {"rank": rank, "error": f"torch is not installed in the Python of this node's Ray workers "
                                       f"({sys.executable}): the all-reduce runs there",
                "hint": "install torch into the Python that runs `ray start` on every node (it is not part of "
                        "envforge[fleet]: pick the build for the node's CUDA), then run it again"}

    dist.init_process_group(backend, init_method=f"tcp://{master}:{port}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=60))
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    out = []
    try:
        for size in sizes:
            t = torch.ones(size // 4, dtype=torch.float32, device=device)
            dist.all_reduce(t)  # warm-up (and the connection set-up)
            times = []
            for _ in range(repeats):
                t.fill_(1.0)
                if backend == "nccl":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                dist.all_reduce(t)
                if backend == "nccl":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            ok = bool(torch.all(t == float(world)).item())
            med = statistics.median(times)
            out.append({"bytes": size, "median-us": round(med * 1e6, 1),
                        "bus-gbps": round(2 * (world - 1) / world * size / med / 1e9, 3), "sum-ok": ok})
    finally:
        dist.destroy_process_group()
    return {"rank": rank, "sizes": out}


def _allreduce_node(node: Mapping[str, Any], data: Mapping[str, Any]) -> FleetNode:
    """One rank's answer of :func:`_allreduce_task` as a node of the report: ``failed`` with the
    error and hint when it could not take part (no torch), ``findings`` (``allreduce-failed`` per
    size) when a sum was wrong, else ``ok``; ``detail`` holds the rank (and the sizes)."""
    if data.get("error"):
        return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "failed", error=data["error"],
                         hint=data.get("hint"), detail={"rank": data.get("rank")})
    bad = [s for s in data["sizes"] if not s["sum-ok"]]
    return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "findings" if bad else "ok",
                     findings=tuple({"kind": "allreduce-failed", "subject": f"{s['bytes']} bytes"} for s in bad),
                     detail=dict(data))


def _single_node(node: Mapping[str, Any]) -> FleetNode:
    """The answer for a cluster of one node: an all-reduce across nodes needs two or more."""
    return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "failed",
                     error="only 1 alive node in the cluster: an all-reduce across nodes needs 2 or more "
                           "(add nodes with `ray start --address HEAD:PORT`)")


# ---- the driver ----------------------------------------------------------------------------------

def fleet_verify(address: str, env_name: str, root: Path, *, levels: Sequence[str] = (),
                 timeout_s: float = 600.0, agent: bool = True) -> FleetReport:
    """Verify ``env_name`` on every alive node of the Ray cluster at ``address`` (``auto`` on a node),
    through each node's long-lived agent (:mod:`envforge.fleet.agent`; the first call on a cluster
    starts them), or with ``agent=False`` in a fresh Ray task per node. Each node's ``detail`` holds
    ``agent`` (pid, calls, age-s, replaced-because, state) when an agent answered.

    :raises InputError: Ray is not installed (``pip install 'envforge[fleet]'``).
    :raises ExternalToolError: the cluster cannot be reached.
    """
    start = time.monotonic()
    ray = _connect(address)
    args = (env_name, str(root), tuple(levels), (time.time() + timeout_s, timeout_s))
    nodes = _agent_fan_out(ray, "verify", args, timeout_s) if agent else _fan_out(ray, _verify_task, args, timeout_s, "verify")
    majority, differs = majority_differences(nodes)
    return FleetReport("verify", tuple(nodes), majority, differs, time.monotonic() - start)


def fleet_start_agents(address: str, root: Path | None = None, *, timeout_s: float = 120.0) -> FleetReport:
    """Start the envforge agent (:mod:`envforge.fleet.agent`) on every alive node of the Ray cluster
    at ``address`` where there is none, keep the running ones, replace those whose code changed on
    disk; verify nothing. Each node's ``detail.agent.state`` says which (``started``, ``running``,
    ``replaced``); a node whose agent cannot start or died is ``failed``, one that does not answer
    within ``timeout_s`` seconds is ``timeout`` (its agent stopped). With ``root`` (or
    ``ENVFORGE_FLEET_ROOT`` on the node), a node where that directory holds no ``recipes/`` has a
    ``no-project`` finding. Action ``agent-start``; exit code 1 when any node is not ``ok``.

    :raises InputError: Ray is not installed.
    :raises ExternalToolError: the cluster cannot be reached.
    """
    start = time.monotonic()
    ray = _connect(address)
    nodes = _agent_fan_out(ray, "start", (str(root) if root else "",), timeout_s)
    return FleetReport("agent-start", tuple(nodes), {}, {}, time.monotonic() - start)


def fleet_stop_agents(address: str) -> list[str]:
    """Stop every envforge agent (:mod:`envforge.fleet.agent`) in the Ray cluster at ``address``; the
    next ``fleet verify`` starts new ones. Returns the actor names stopped, sorted.

    :raises InputError: Ray is not installed.
    :raises ExternalToolError: the cluster cannot be reached.
    """
    from envforge.fleet.agent import stop_agents

    return stop_agents(_connect(address))


def fleet_build(address: str, recipe: str, variant: str | None, root: Path, *, find_links: Sequence[Path] = (),
                offline: bool = False, timeout_s: float = 3600.0) -> FleetReport:
    """Build the committed lock of ``recipe``/``variant`` on every alive node. A node whose build
    fails keeps its previous generation live (``build``'s own guarantee); ``detail.flipped`` says
    which nodes flipped to a new generation. A node's uv runs end before ``timeout_s`` (the node's
    deadline, :func:`node_budget`): one stopped there is a ``timeout`` node, not flipped.

    :raises InputError: Ray is not installed.
    :raises ExternalToolError: the cluster cannot be reached.
    """
    start = time.monotonic()
    ray = _connect(address)
    args = (recipe, variant, str(root), tuple(str(p) for p in find_links), offline, (time.time() + timeout_s, timeout_s))
    nodes = _fan_out(ray, _build_task, args, timeout_s, "build")
    return FleetReport("build", tuple(nodes), {}, {}, time.monotonic() - start)


def fleet_allreduce(address: str, *, backend: str = "nccl", sizes: Sequence[int] = (43008, 1 << 20, 16 << 20),
                    env: Mapping[str, str] | None = None, port: int = 29517, repeats: int = 20,
                    timeout_s: float = 300.0) -> FleetReport:
    """One all-reduce group across every alive node (rank 0 on the first node by address), timing
    ``sizes`` (bytes; default the verify-step sizes 43 KB, 1 MiB, 16 MiB) with ``env`` (e.g. an env
    profile's NCCL variables) set in each task. Each node's ``detail`` holds per-size median latency
    (µs), bus bandwidth (GB/s, 2(n-1)/n × bytes / time, NCCL's busBw) and whether the sum was right.
    A rank that fails or hangs past ``timeout_s`` seconds is a node with status ``failed``/``timeout``;
    one whose Ray workers' Python has no torch is ``failed`` with a ``hint``.

    :raises InputError: Ray is not installed.
    :raises ExternalToolError: the cluster cannot be reached.
    """
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    start = time.monotonic()
    ray = _connect(address)
    nodes = _alive_nodes(ray)
    if len(nodes) < 2:  # one rank crosses no node boundary: never report that as "ok"
        return FleetReport("allreduce", tuple(_single_node(n) for n in nodes), {}, {},
                           time.monotonic() - start)
    master = nodes[0]["NodeManagerAddress"]
    remote = ray.remote(num_cpus=0, max_retries=0)(_allreduce_task)
    refs = {remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(
        i, len(nodes), master, port, backend, tuple(sizes), dict(env or {}), repeats): n for i, n in enumerate(nodes)}
    done, pending = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
    out = []
    for ref in done:
        n = refs[ref]
        try:
            out.append(_allreduce_node(n, ray.get(ref)))
        except Exception as exc:
            out.append(_failed(n, exc))
    for ref in pending:
        ray.cancel(ref, force=True)
        out.append(_late(refs[ref], timeout_s, "the task was cancelled"))
    return FleetReport("allreduce", tuple(sorted(out, key=lambda x: x.detail.get("rank", 1 << 30))), {}, {},
                       time.monotonic() - start)
