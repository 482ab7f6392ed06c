"""The fleet report: every node's answer as a :class:`FleetNode`, and the majority they are compared with.

The driver (:mod:`envforge.fleet.driver`) turns what each node's task answered
(:mod:`envforge.fleet.tasks`) into a :class:`FleetNode` (:func:`node_answer`, :func:`allreduce_node`),
or what happened to a node that gave none (:func:`failed_node`, :func:`late_node`), and compares the
nodes' fingerprints (:func:`majority_differences`). JSON schema ``envforge.fleet/1`` (docs/fleet.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from envforge.fleet.tasks import COMPARED

__all__ = [
    "NodeStatus",
    "FleetNode",
    "FleetReport",
    "SkippedNode",
    "allreduce_node",
    "failed_node",
    "late_node",
    "majority_differences",
    "node_answer",
    "one_line",
    "single_node",
]


#: What became of one node's task (:class:`FleetNode`).
NodeStatus = Literal["ok", "findings", "failed", "timeout"]


@dataclass(frozen=True, slots=True)
class FleetNode:
    """One node's answer. ``status``: ``ok`` (clean), ``findings``, ``failed`` (the task raised or the
    node died), ``timeout`` (no answer within the limit, or the node's own deadline stopped it).
    ``fingerprint`` holds the keys of :data:`~envforge.fleet.tasks.COMPARED`; ``findings`` the node's
    verify findings as dicts; ``elapsed_s`` in seconds; ``hint`` the next step the node's error named
    (an envforge error's hint, e.g. the environments that exist there), or None."""

    node_id: str
    host: str
    status: NodeStatus
    fingerprint: Mapping[str, Any] = field(default_factory=dict)
    findings: tuple[Mapping[str, str], ...] = ()
    elapsed_s: float | None = None
    error: str | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    hint: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order."""
        return {
            "node-id": self.node_id,
            "host": self.host,
            "status": self.status,
            "fingerprint": dict(self.fingerprint),
            "findings": [dict(f) for f in self.findings],
            "elapsed-s": self.elapsed_s,
            "error": self.error,
            "hint": self.hint,
            "detail": dict(self.detail),
        }


@dataclass(frozen=True, slots=True)
class SkippedNode:
    """An alive node the command did not run on (:mod:`envforge.fleet.selection`): its Ray node id,
    address and why (``no GPU resources (needs 8)``)."""

    node_id: str
    host: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        """JSON-able, keys in a fixed order."""
        return {"node-id": self.node_id, "host": self.host, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class FleetReport:
    """Every node's answer, the majority value of each compared key, and who differs from it.

    ``action``: ``verify``, ``build``, ``allreduce`` or ``agent-start``. ``differs`` maps a node id to
    the compared keys where it differs from the majority. ``elapsed_s``: the driver's wall time in s.
    ``selection``: which alive nodes the command ran on, in words; ``skipped``: the alive nodes it did
    not run on, with the reason (they do not count for the exit code). ``backend``: the all-reduce's
    ``(name, why)`` (``("gloo", "the selected nodes have no GPU resources ...")``), else None.
    ``exit_code``: 0 when every node answered, is clean and agrees; 1 otherwise (and with no nodes).
    """

    action: str
    nodes: tuple[FleetNode, ...]
    majority: Mapping[str, Any]
    differs: Mapping[str, tuple[str, ...]]
    elapsed_s: float
    selection: str = "every alive node"
    skipped: tuple[SkippedNode, ...] = ()
    backend: tuple[str, str] | None = None

    @property
    def exit_code(self) -> int:
        bad = any(n.status != "ok" for n in self.nodes) or bool(self.differs)
        return 1 if bad or not self.nodes else 0

    def as_dict(self) -> dict[str, Any]:
        """JSON-able, keys in a fixed order (schema ``envforge.fleet/1``, docs/fleet.md)."""
        return {
            "action": self.action,
            "nodes": [n.as_dict() for n in self.nodes],
            "majority": dict(self.majority),
            "differs": {k: list(v) for k, v in self.differs.items()},
            "exit-code": self.exit_code,
            "elapsed-s": round(self.elapsed_s, 3),
            "selection": self.selection,
            "skipped": [n.as_dict() for n in self.skipped],
            "backend": {"name": self.backend[0], "why": self.backend[1]} if self.backend else None,
        }


def majority_differences(nodes: Sequence[FleetNode]) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
    """The most common value of each :data:`~envforge.fleet.tasks.COMPARED` key among nodes that
    answered, and per node the keys where it differs. Ties go to the value seen first (node order)."""
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


# ---- a node's answer as a FleetNode ---------------------------------------------------------------
# ``node`` is Ray's record of the node (an entry of ``ray.nodes()``: ``NodeID``, ``NodeManagerAddress``).


def node_answer(node: Mapping[str, Any], data: Mapping[str, Any]) -> FleetNode:
    """A verify or build task's answer (:mod:`envforge.fleet.tasks`) as a node: ``timeout`` or
    ``failed`` with its error and hint when it has an ``error`` (``timeout`` when ``timed-out``),
    else ``findings`` when it has any, else ``ok``."""
    if data.get("error"):
        return FleetNode(
            node["NodeID"],
            node.get("NodeManagerAddress", "?"),
            "timeout" if data.get("timed-out") else "failed",
            fingerprint=data.get("fingerprint", {}),
            error=data["error"],
            elapsed_s=data.get("elapsed-s"),
            detail=data.get("detail", {}),
            hint=data.get("hint"),
        )
    findings = tuple(data.get("findings", ()))
    return FleetNode(
        node["NodeID"],
        node.get("NodeManagerAddress", "?"),
        "findings" if findings else "ok",
        fingerprint=data.get("fingerprint", {}),
        findings=findings,
        elapsed_s=data.get("elapsed-s"),
        detail=data.get("detail", {}),
    )


def allreduce_node(node: Mapping[str, Any], data: Mapping[str, Any]) -> FleetNode:
    """One rank's answer of :func:`envforge.fleet.tasks.allreduce_task` as a node of the report:
    ``failed`` with the error and hint when it could not take part (no torch), ``findings``
    (``allreduce-failed`` per size) when a sum was wrong, else ``ok``; ``detail`` holds the rank
    (and the sizes)."""
    if data.get("error"):
        return FleetNode(
            node["NodeID"],
            node.get("NodeManagerAddress", "?"),
            "failed",
            error=data["error"],
            hint=data.get("hint"),
            detail={"rank": data.get("rank")},
        )
    bad = [s for s in data["sizes"] if not s["sum-ok"]]
    return FleetNode(
        node["NodeID"],
        node.get("NodeManagerAddress", "?"),
        "findings" if bad else "ok",
        findings=tuple({"kind": "allreduce-failed", "subject": f"{s['bytes']} bytes"} for s in bad),
        detail=dict(data),
    )


def single_node(node: Mapping[str, Any], skipped: int = 0) -> FleetNode:
    """The answer for a cluster of one node (or one selected node, ``skipped`` others skipped): an
    all-reduce across nodes needs two or more."""
    if skipped:
        error = (
            f"only 1 alive node qualifies ({skipped} skipped): an all-reduce across nodes needs 2 or more "
            "(select more with --num-gpus, --label, --resource or --all-nodes)"
        )
    else:
        error = (
            "only 1 alive node in the cluster: an all-reduce across nodes needs 2 or more "
            "(add nodes with `ray start --address HEAD:PORT`)"
        )
    return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "failed", error=error)


def failed_node(node: Mapping[str, Any], exc: BaseException) -> FleetNode:
    """A node whose task or agent raised, or that died: ``failed``, the error as :func:`one_line`."""
    return FleetNode(node["NodeID"], node.get("NodeManagerAddress", "?"), "failed", error=one_line(exc))


def late_node(node: Mapping[str, Any], timeout_s: float, what: str) -> FleetNode:
    """A node that gave no answer within ``timeout_s`` s: ``timeout``; ``what`` says what the driver
    did about it (``the task was cancelled``, ``its agent was stopped``)."""
    return FleetNode(
        node["NodeID"],
        node.get("NodeManagerAddress", "?"),
        "timeout",
        error=f"no answer within {timeout_s:g} s ({what})",
    )


def one_line(exc: BaseException) -> str:
    """``TypeName: last non-empty line of the message`` (Ray's errors carry a remote traceback),
    at most 500 characters."""
    text = str(exc).strip().splitlines()
    last = [ln for ln in text if ln.strip()][-1:] or [type(exc).__name__]
    return f"{type(exc).__name__}: {last[0].strip()}"[:500]
