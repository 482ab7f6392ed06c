"""The driver's one fan-out (``envforge.fleet.driver._fan_out``) and its two ways of reaching a node (fresh
tasks, agents) without a cluster: a stand-in for Ray's ``wait``/``get``/``cancel``/``kill`` and for the agents.
The real multi-node cluster is tests/fleet/test_driver.py's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from envforge.fleet import driver
from envforge.fleet.agent import STALE
from envforge.fleet.driver import _Agents, _fan_out
from envforge.fleet.report import FleetNode

PENDING = object()  # a call that never answers


class FakeRay:
    """Ray's driver calls the fan-out makes: refs are ints; ``answers`` holds what each one gives
    (a value, an exception to raise, or PENDING)."""

    def __init__(self) -> None:
        self.answers: dict[int, Any] = {}
        self.cancelled: list[int] = []
        self.killed: list[str] = []

    def ref(self, answer: Any) -> int:
        ref = len(self.answers) + 1
        self.answers[ref] = answer
        return ref

    def wait(self, refs: Sequence[int], num_returns: int, timeout: float) -> tuple[list[int], list[int]]:
        ready = [r for r in refs if self.answers[r] is not PENDING][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref: int) -> Any:
        answer = self.answers[ref]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def cancel(self, ref: int, force: bool) -> None:
        self.cancelled.append(ref)

    def kill(self, agent: FakeAgent, no_restart: bool) -> None:
        self.killed.append(agent.name)


def node(name: str) -> dict[str, str]:
    return {"NodeID": name, "NodeManagerAddress": f"10.0.0.{name[-1]}"}


class Way:
    """A way whose every node's call gives ``answers[node]``; ``again`` nodes are sent once more."""

    def __init__(self, ray: FakeRay, answers: Mapping[str, Any], again: Mapping[str, Any] | None = None) -> None:
        self.ray, self.answers, self.again = ray, answers, dict(again or {})

    def send(self, n: Mapping[str, Any]) -> int:
        answer = self.answers[n["NodeID"]]
        if isinstance(answer, ValueError):  # the call cannot start
            raise answer
        return self.ray.ref(answer)

    def receive(self, n: Mapping[str, Any], data: Any) -> FleetNode | int:
        if n["NodeID"] in self.again:
            return self.ray.ref(self.again.pop(n["NodeID"]))
        return FleetNode(n["NodeID"], n["NodeManagerAddress"], "ok", detail=dict(data))

    def abandon(self, n: Mapping[str, Any], ref: int) -> str:
        self.ray.cancel(ref, force=True)
        return f"call {ref} abandoned"


def test_the_fan_out_reports_every_node_answered_failed_resent_or_late() -> None:
    ray = FakeRay()
    way = Way(
        ray,
        {
            "n1": {"x": 1},
            "n2": RuntimeError("remote traceback\n  line\nboom at the end\n"),
            "n3": PENDING,
            "n4": ValueError("no such node"),
            "n5": {"x": 5},
        },
        again={"n5": {"x": 6}},
    )
    out = _fan_out(ray, [node(f"n{i}") for i in range(1, 6)], way, timeout_s=0.05)
    assert [n.as_dict() for n in out] == [
        {
            "node-id": "n4",
            "host": "10.0.0.4",
            "status": "failed",
            "fingerprint": {},
            "findings": [],
            "elapsed-s": None,
            "error": "ValueError: no such node",
            "hint": None,
            "detail": {},
        },
        {
            "node-id": "n1",
            "host": "10.0.0.1",
            "status": "ok",
            "fingerprint": {},
            "findings": [],
            "elapsed-s": None,
            "error": None,
            "hint": None,
            "detail": {"x": 1},
        },
        {
            "node-id": "n2",
            "host": "10.0.0.2",
            "status": "failed",
            "fingerprint": {},
            "findings": [],
            "elapsed-s": None,
            "error": "RuntimeError: boom at the end",
            "hint": None,
            "detail": {},
        },
        {
            "node-id": "n5",
            "host": "10.0.0.5",
            "status": "ok",
            "fingerprint": {},
            "findings": [],
            "elapsed-s": None,
            "error": None,
            "hint": None,
            "detail": {"x": 6},
        },
        {
            "node-id": "n3",
            "host": "10.0.0.3",
            "status": "timeout",
            "fingerprint": {},
            "findings": [],
            "elapsed-s": None,
            "error": "no answer within 0.05 s (call 3 abandoned)",
            "hint": None,
            "detail": {},
        },
    ]
    assert ray.cancelled == [3]


def test_no_nodes_is_no_answers() -> None:
    assert _fan_out(FakeRay(), [], Way(FakeRay(), {}), timeout_s=1.0) == []


# ---- through the agents ------------------------------------------------------------------------


class FakeMethod:
    def __init__(self, ray: FakeRay, agent: FakeAgent) -> None:
        self.ray, self.agent = ray, agent

    def remote(self, *args: Any) -> int:
        if self.agent.answer is TypeError:  # an agent of another envforge: other arguments
            raise TypeError("too many positional arguments")
        self.agent.args = args
        return self.ray.ref(self.agent.answer)


class FakeAgent:
    def __init__(self, ray: FakeRay, name: str, answer: Any) -> None:
        self.name, self.answer, self.args = name, answer, None
        self.verify = FakeMethod(ray, self)


def _agents(monkeypatch: pytest.MonkeyPatch, ray: FakeRay, lives: Mapping[str, list[Any]]) -> list[tuple[str, Any]]:
    """``agent_for`` gives node N's agents in turn, answering ``lives[N]``'s answers; returns the
    calls made (node id, the handle replaced)."""
    queue = {k: [FakeAgent(ray, f"{k}#{i}", a) for i, a in enumerate(v)] for k, v in lives.items()}
    calls: list[tuple[str, Any]] = []

    def agent_for(_ray: Any, node_id: str, *, replacing: Any = None) -> FakeAgent:
        calls.append((node_id, replacing.name if replacing else None))
        return queue[node_id].pop(0)

    monkeypatch.setattr(driver, "agent_for", agent_for)
    return calls


def _agent(pid: int, calls: int) -> dict[str, Any]:
    return {"pid": pid, "calls": calls, "age-s": 1.5}


def test_agents_are_reused_started_replaced_once_and_stopped_when_late(monkeypatch: pytest.MonkeyPatch) -> None:
    ray = FakeRay()
    made = _agents(
        monkeypatch,
        ray,
        {
            "n1": [{"findings": [], "agent": _agent(11, 4)}],  # running
            "n2": [{STALE: ["/x/a.py"], "agent": _agent(12, 9)}, {"findings": [], "agent": _agent(13, 1)}],
            "n3": [TypeError, {"findings": [{"kind": "tampered", "subject": "f"}], "agent": _agent(14, 1)}],
            "n4": [{STALE: ["/x/a.py"], "agent": _agent(15, 2)}, {STALE: ["/x/b.py"], "agent": _agent(16, 1)}],
            "n5": [PENDING],
            "n6": [{"error": "no environment 'e'", "hint": "build it", "agent": _agent(17, 1)}],
        },
    )
    way = _Agents(ray, "verify", ("e", "/p", ("static",), None))
    out = {n.node_id: n for n in _fan_out(ray, [node(f"n{i}") for i in range(1, 7)], way, timeout_s=0.05)}
    assert made == [
        ("n1", None),
        ("n2", None),
        ("n3", None),
        ("n3", "n3#0"),
        ("n4", None),
        ("n5", None),
        ("n6", None),
        ("n2", "n2#0"),
        ("n4", "n4#0"),
    ]
    assert {k: (n.status, n.error, dict(n.detail)) for k, n in out.items()} == {
        "n1": ("ok", None, {"agent": {**_agent(11, 4), "replaced-because": [], "state": "running"}}),
        "n2": ("ok", None, {"agent": {**_agent(13, 1), "replaced-because": ["/x/a.py"], "state": "replaced"}}),
        "n3": (
            "findings",
            None,
            {
                "agent": {
                    **_agent(14, 1),
                    "state": "replaced",
                    "replaced-because": [
                        "its methods differ from this envforge's (TypeError: too many positional arguments)"
                    ],
                }
            },
        ),
        "n4": ("failed", "RuntimeError: a new agent found its code changed too: /x/b.py", {}),
        "n5": ("timeout", "no answer within 0.05 s (its agent was stopped)", {}),
        "n6": (
            "failed",
            "no environment 'e'",
            {"agent": {**_agent(17, 1), "replaced-because": [], "state": "started"}},
        ),
    }
    assert out["n6"].hint == "build it"
    assert ray.killed == ["n3#0", "n2#0", "n4#0", "n5#0"]  # replaced (in the order met), then the late one
    assert ray.cancelled == []
