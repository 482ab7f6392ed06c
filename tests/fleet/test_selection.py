"""Which alive nodes a fleet command runs on (``envforge.fleet.selection``) and the all-reduce's backend,
from literal ``ray.nodes()`` entries; the driver's wiring with a stand-in for Ray (no node qualifies, one
node left for an all-reduce). The real cluster with a GPU-free head is tests/fleet/test_driver.py's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envforge.cli.fleet import render_text
from envforge.fleet import driver
from envforge.fleet.report import SkippedNode
from envforge.fleet.selection import NodeSelection, choose_backend, gpus_of, lock_gpus, select_nodes

ROOT = Path(__file__).resolve().parents[2]


def _node(name: str, gpus: float = 0, labels: dict[str, str] | None = None, **resources: float) -> dict[str, Any]:
    return {
        "NodeID": f"{name}-0123456789",
        "NodeManagerAddress": f"10.0.0.{name[-1]}",
        "Alive": True,
        "Resources": {"CPU": 4.0, **({"GPU": gpus} if gpus else {}), **resources},
        "Labels": {"ray.io/node-id": name, **(labels or {})},
    }


HEAD = _node("head0")
GPU1 = _node("gpu1", 8, {"pool": "gpu"}, stack=1.0)
GPU2 = _node("gpu2", 4, {"pool": "small"}, stack=0.5)
CPU3 = _node("cpu3", 0, {"pool": "cpu"})


def _ids(nodes: Any) -> list[str]:
    return [n["NodeID"][:4] for n in nodes]


def test_the_recipes_gpu_count_takes_the_nodes_with_that_many_and_skips_the_others() -> None:
    got = select_nodes([HEAD, GPU1, GPU2], NodeSelection(8, "[target] gpus = 8 in lockfiles/pylock.q-default.toml"))
    assert _ids(got.nodes) == ["gpu1"]
    assert got.skipped == (
        SkippedNode("head0-0123456789", "10.0.0.0", "no GPU resources (needs 8)"),
        SkippedNode("gpu2-0123456789", "10.0.0.2", "4 GPUs (needs 8)"),
    )
    assert got.rule == "nodes with at least 8 GPUs ([target] gpus = 8 in lockfiles/pylock.q-default.toml)"
    one = select_nodes([GPU2, _node("gpu5", 0.5)], NodeSelection(1, "--num-gpus 1"))
    assert one.rule == "nodes with at least 1 GPU (--num-gpus 1)"
    assert [s.reason for s in one.skipped] == ["0.5 GPUs (needs 1)"]


def test_without_a_gpu_count_the_gpu_nodes_are_taken_when_there_are_any() -> None:
    got = select_nodes([HEAD, GPU1, GPU2], NodeSelection())
    assert _ids(got.nodes) == ["gpu1", "gpu2"]
    assert [(s.node_id, s.reason) for s in got.skipped] == [("head0-0123456789", "no GPU resources (needs 1)")]
    assert got.rule == (
        "nodes with GPU resources (the GPU count the stack needs is not known here: --num-gpus N sets it)"
    )
    cpu_only = select_nodes([HEAD, CPU3], NodeSelection())
    assert (_ids(cpu_only.nodes), cpu_only.skipped, cpu_only.rule) == (
        ["head", "cpu3"],
        (),
        "every alive node (none has GPU resources)",
    )


def test_every_alive_node_when_asked_or_when_the_recipe_names_no_gpus() -> None:
    got = select_nodes([HEAD, GPU1], NodeSelection(every=True, source="--all-nodes"))
    assert (_ids(got.nodes), got.skipped, got.rule) == (["head", "gpu1"], (), "every alive node (--all-nodes)")
    assert select_nodes([], NodeSelection(every=True)).rule == "every alive node"


def test_labels_and_resources_name_the_nodes_and_every_miss_is_said() -> None:
    sel = NodeSelection(labels=(("pool", "gpu"),), resources=(("stack", 1.0),))
    got = select_nodes([HEAD, GPU1, GPU2, CPU3], sel)
    assert _ids(got.nodes) == ["gpu1"]
    assert [s.reason for s in got.skipped] == [
        "no label pool (needs pool=gpu); no resource stack (needs >= 1)",
        "label pool=small (needs pool=gpu); resource stack 0.5 (needs >= 1)",
        "label pool=cpu (needs pool=gpu); no resource stack (needs >= 1)",
    ]
    assert got.rule == "nodes with label pool=gpu, resource stack >= 1"
    anyvalue = select_nodes([HEAD, GPU2, CPU3], NodeSelection(labels=(("pool", None),), gpus=2, source="--num-gpus 2"))
    assert _ids(anyvalue.nodes) == ["gpu2"]
    assert [s.reason for s in anyvalue.skipped] == [
        "no label pool (needs pool); no GPU resources (needs 2)",
        "no GPU resources (needs 2)",
    ]
    assert anyvalue.rule == "nodes with label pool, at least 2 GPUs (--num-gpus 2)"


def test_the_backend_follows_the_selected_nodes_gpus_unless_asked() -> None:
    assert choose_backend([GPU1, GPU2], None) == ("nccl", "every selected node has GPU resources")
    assert choose_backend([HEAD, CPU3], None) == (
        "gloo",
        "the selected nodes have no GPU resources (nccl needs a GPU on every rank)",
    )
    assert choose_backend([HEAD, GPU1, CPU3], None) == (
        "gloo",
        "2 of 3 selected nodes have no GPU resources (nccl needs a GPU on every rank)",
    )
    assert choose_backend([HEAD, CPU3], "nccl") == ("nccl", "--backend nccl")
    assert choose_backend([GPU1], "gloo") == ("gloo", "--backend gloo")
    assert choose_backend([], None) == ("gloo", "no node selected")


def test_the_gpu_count_is_read_from_the_environments_lock(tmp_path: Path) -> None:
    assert lock_gpus(ROOT, "quickstart-default") == (8, "[target] gpus = 8 in lockfiles/pylock.quickstart-default.toml")
    assert lock_gpus(tmp_path, "quickstart-default") is None  # no lock on the driver: not known here
    (tmp_path / "lockfiles").mkdir()
    (tmp_path / "lockfiles" / "pylock.x-default.toml").write_text('[tool.envforge.target]\ngpu = "H200"\n')
    assert lock_gpus(tmp_path, "x-default") == (None, "lockfiles/pylock.x-default.toml names no [target] gpus")
    (tmp_path / "lockfiles" / "pylock.bad-default.toml").write_text("not toml [")
    assert lock_gpus(tmp_path, "bad-default") is None
    assert gpus_of(2, "recipes/r.toml") == (2, "[target] gpus = 2 in recipes/r.toml")
    assert gpus_of(True, "recipes/r.toml") == (None, "recipes/r.toml names no [target] gpus")


# ---- the driver's wiring, with a stand-in for Ray ----------------------------------------------


class NodesOnly:
    """Ray as far as the driver gets when no call is sent: the nodes."""

    def __init__(self, *nodes: dict[str, Any]) -> None:
        self._nodes = [*nodes, {**_node("gone9", 8), "Alive": False}]

    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes


def test_no_qualifying_node_runs_nothing_and_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "connect", lambda address: NodesOnly(GPU2, HEAD))
    report = driver.fleet_verify("h:1", "q-default", ROOT, select=NodeSelection(8, "--num-gpus 8"))
    assert (report.nodes, report.exit_code) == ((), 1)
    assert report.as_dict()["skipped"] == [
        {"node-id": "head0-0123456789", "host": "10.0.0.0", "reason": "no GPU resources (needs 8)"},
        {"node-id": "gpu2-0123456789", "host": "10.0.0.2", "reason": "4 GPUs (needs 8)"},
    ]
    assert report.as_dict()["selection"] == "nodes with at least 8 GPUs (--num-gpus 8)"
    assert render_text(report) == [
        "selected 0 of 2 alive nodes: nodes with at least 8 GPUs (--num-gpus 8)",
        "skipped 10.0.0.0 head0-01: no GPU resources (needs 8)",
        "skipped 10.0.0.2 gpu2-012: 4 GPUs (needs 8)",
        "fleet verify: no alive node qualifies (2 skipped); pick nodes with --num-gpus, --label, --resource or "
        "--all-nodes",
    ]


def test_an_allreduce_with_one_qualifying_node_says_so_and_which_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(driver, "connect", lambda address: NodesOnly(HEAD, GPU1))
    report = driver.fleet_allreduce("h:1")
    assert report.exit_code == 1 and report.backend == ("nccl", "every selected node has GPU resources")
    assert report.as_dict()["backend"] == {"name": "nccl", "why": "every selected node has GPU resources"}
    lines = render_text(report)
    assert lines[:4] == [
        "selected 1 of 2 alive nodes: nodes with GPU resources (the GPU count the stack needs is not known here: "
        "--num-gpus N sets it)",
        "skipped 10.0.0.0 head0-01: no GPU resources (needs 1)",
        "backend nccl: every selected node has GPU resources",
        "10.0.0.1 gpu1-012 failed: only 1 alive node qualifies (1 skipped): an all-reduce across nodes needs 2 or "
        "more (select more with --num-gpus, --label, --resource or --all-nodes)",
    ]
    assert lines[4].startswith("fleet allreduce: 1 node (1 skipped), 1 not ok, 0 differ from the majority in ")
