"""A long-lived envforge agent on each Ray node, so that ``fleet verify`` does not start a fresh Python
worker on every node at every call (Ray starts new workers for every job, and each CLI call is a job).

An agent is a named, detached Ray actor (namespace :data:`NAMESPACE`, name ``agent-<node id>``) pinned
to its node with ``NodeAffinitySchedulingStrategy(node_id, soft=False)``, ``num_cpus=0``,
``max_restarts=0`` and ``max_concurrency`` :data:`CONCURRENCY` (calls from several drivers run side by
side). Its process is started by the node's raylet exactly as a task's worker is (the same
Python, the same environment variables but ``RAY_JOB_ID``), and each call runs the very function a fresh
task runs (:func:`envforge.fleet.tasks.verify_task`), which reads the node's environment, project and
``ENVFORGE_FLEET_ROOT`` anew every time. This module imports :mod:`envforge.fleet.tasks` only, never the
driver (``.importlinter`` keeps it so): an agent process loads the node side of the fleet and nothing else.

**Never stale.** When it starts, the agent records a stamp (:func:`code_stamp`): the modification time
(ns) and size of every module file it has loaded (envforge and its dependencies; Ray's own excepted: a
new Ray means a restarted cluster) and the modification time of every site-packages directory and of
every directory of the envforge package (an install, an uninstall or a new module changes them). The
fleet's own code it runs is :mod:`envforge.fleet.agent` and :mod:`envforge.fleet.tasks` (loaded, so
stamped, from the start); the driver and the report are never loaded in an agent, and a change there
replaces no agent. Before
each call it compares the stamp with the files; on any difference it answers :data:`STALE` without
verifying, and the driver stops it and starts a new agent, which imports the node's current code.
Modules first imported during a call are added to the stamp right after that call.

The driver side (:func:`agent_for`, :func:`stop_agents`) takes the connected Ray module as an argument;
this module imports Ray only for its scheduling strategy there.
"""

from __future__ import annotations

import os
import site
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from importlib import import_module
from typing import Any

import envforge
from envforge.fleet.tasks import ROOT_VARIABLE, verify_task

__all__ = [
    "CONCURRENCY",
    "NAMESPACE",
    "PRELOAD",
    "STALE",
    "NodeAgent",
    "agent_for",
    "agent_name",
    "changed",
    "code_stamp",
    "stop_agents",
]

#: The Ray namespace of every envforge agent.
NAMESPACE = "envforge"
#: The key of an agent's answer when its code changed on disk since it started.
STALE = "stale"

#: Calls an agent runs at once (Ray's ``max_concurrency``; a threaded actor).
CONCURRENCY = 8

Stamp = dict[str, tuple[int, int]]

#: What a static verify of a built environment imports (measured: 0.11 s of the 0.42 s of a first
#: quickstart verify in a fresh interpreter is importing the last six); the agent imports them when it
#: starts (``fleet agent start``), so the first verify call does not. Modules missing here are only slower
#: to import in the first call, and stamped after it.
PRELOAD = (
    "envforge.fleet.tasks",
    "envforge.verify",
    "envforge.env.layout",
    "envforge.recipe.project",
    "envforge.installed.editable",
    "envforge.env.profile",
    "envforge.lock.read",
    "envforge.patching.planning",
    "envforge.patching.journal",
    "packaging.requirements",
)


def _stat(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (-1, -1)  # gone: differs from any recorded file
    return (st.st_mtime_ns, st.st_size)


def _module_files(exclude: str) -> set[str]:
    files = set()
    for mod in list(sys.modules.values()):
        path = getattr(mod, "__file__", None)
        if isinstance(path, str) and not path.startswith(exclude):
            files.add(path)
    return files


def _watched_dirs() -> set[str]:
    dirs = {d for d in [*site.getsitepackages(), site.getusersitepackages()] if os.path.isdir(d)}
    for top in envforge.__path__:
        for here, sub, _ in os.walk(top):
            sub[:] = [s for s in sub if s != "__pycache__"]
            dirs.add(here)
    return dirs


def code_stamp(files: set[str] | None = None) -> Stamp:
    """``{path: (mtime ns, size)}`` of ``files`` (default: every loaded module file outside Ray's package)
    and of the watched directories (site-packages, every envforge package directory); a path that is
    gone is ``(-1, -1)``. About 4 ms for the ~470 paths of an agent (2 ms to check them again)."""
    ray_dir = os.path.dirname(sys.modules["ray"].__file__ or "") + os.sep if "ray" in sys.modules else "\0"
    paths = _module_files(ray_dir) if files is None else files
    return {p: _stat(p) for p in sorted(paths | _watched_dirs())}


def changed(recorded: Mapping[str, tuple[int, int]]) -> list[str]:
    """The recorded paths whose stamp differs now, sorted."""
    return sorted(p for p, was in recorded.items() if _stat(p) != was)


class NodeAgent:
    """The actor: :meth:`verify` runs :func:`envforge.fleet.tasks.verify_task` in this long-lived process;
    :meth:`start` only answers (``fleet agent start``). ``calls`` counts every call answered (of either
    method), so an agent whose ``calls`` is 1 was started by the call it answered.

    A threaded actor (:data:`CONCURRENCY` calls at once, each in its own thread with its own
    deadline): a call from a second driver runs beside one still going (a verify stuck in a probe
    until its node deadline, or one whose driver was interrupted) instead of queueing behind it and
    timing out."""

    def __init__(self) -> None:
        for name in PRELOAD:  # stamped from the start, and not paid by the first verify call
            import_module(name)
        self._lock = threading.Lock()
        self._stamp = code_stamp()
        self._started = time.time()
        self._calls = 0

    def verify(
        self, env_name: str, root: str, levels: tuple[str, ...], limit: tuple[float, float] | None = None
    ) -> dict[str, Any]:
        """The answer of ``verify_task(env_name, root, levels, limit)`` plus ``agent`` (pid, calls so
        far including this one, seconds since start), or ``{STALE: [changed paths], "agent": ...}``."""
        with self._lock:
            gone = changed(self._stamp)
            if gone:
                return {STALE: gone[:5], "agent": self._info()}
            before = set(sys.modules)
            self._calls += 1
            calls = self._calls
        answer = verify_task(env_name, root, levels, limit)
        with self._lock:
            if set(sys.modules) != before:  # modules first imported by this call: stamp them now
                self._stamp.update({p: s for p, s in code_stamp().items() if p not in self._stamp})
        return {**answer, "agent": self._info(calls)}

    def start(self, root: str) -> dict[str, Any]:
        """Nothing but the stamp check: ``{"findings": [...], "agent": ...}`` or ``{STALE: [changed
        paths], "agent": ...}``. Where the node has a project path (``ENVFORGE_FLEET_ROOT``, else a
        non-empty ``root``) without ``recipes/``, one ``no-project`` finding names it."""
        with self._lock:
            gone = changed(self._stamp)
            if gone:
                return {STALE: gone[:5], "agent": self._info()}
            self._calls += 1
            calls = self._calls
        path = os.environ.get(ROOT_VARIABLE) or root
        missing = bool(path) and not os.path.isdir(os.path.join(path, "recipes"))
        return {"findings": [{"kind": "no-project", "subject": path}] if missing else [], "agent": self._info(calls)}

    def _info(self, calls: int | None = None) -> dict[str, Any]:
        """pid, calls (``calls``: this call's number; default: all so far), seconds since start."""
        return {
            "pid": os.getpid(),
            "calls": self._calls if calls is None else calls,
            "age-s": round(time.time() - self._started, 1),
        }


# ---- the driver side --------------------------------------------------------------------------------


def agent_name(node_id: str) -> str:
    """The actor name of the agent on node ``node_id`` (hex)."""
    return f"agent-{node_id}"


def agent_for(ray: Any, node_id: str, *, replacing: Any = None) -> Any:
    """The handle of the agent on ``node_id``, started when there is none. ``replacing``: the handle of
    an agent just stopped; wait (up to 5 s) until the name no longer names it, then start a new one or
    take the one another driver started meanwhile.

    :raises TimeoutError: the stopped agent still held the name after 5 s.
    """
    # lazy: ray is an optional extra
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cls = ray.remote(num_cpus=0, max_restarts=0, max_task_retries=0, max_concurrency=CONCURRENCY)(NodeAgent)
    opts = {
        "name": agent_name(node_id),
        "namespace": NAMESPACE,
        "lifetime": "detached",
        "get_if_exists": True,
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
    }
    deadline = time.monotonic() + 5.0
    while True:
        handle = cls.options(**opts).remote()
        if replacing is None or handle._actor_id != replacing._actor_id:  # (Ray has no public id of a handle)
            return handle
        if time.monotonic() > deadline:
            raise TimeoutError(f"the stopped agent on node {node_id} still holds its name after 5 s")
        time.sleep(0.05)


def stop_agents(ray: Any, node_ids: Sequence[str] | None = None) -> list[str]:
    """Stop the agents of ``node_ids`` (default: every envforge agent in the cluster); returns the
    names stopped, sorted."""
    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a.get("namespace") == NAMESPACE and a["name"].startswith("agent-")
    ]
    if node_ids is not None:
        names = [n for n in names if n in {agent_name(i) for i in node_ids}]
    stopped = []
    for name in sorted(names):
        try:
            ray.kill(ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
        except ValueError:  # already gone
            continue
        stopped.append(name)
    return stopped
