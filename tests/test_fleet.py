"""envforge fleet on a real local multi-node Ray cluster (``ray.cluster_utils.Cluster``: real raylets).

Every "node" has its own copy of a project with a real built quickstart environment, given to its
raylet as ``ENVFORGE_FLEET_ROOT``; one node has a patched file edited by hand, one a different env
profile value, and one is killed while its verify runs. All Ray traffic stays on 127.0.0.1.
The cross-node all-reduce runs with the gloo backend on CPU (torch from the test extras); the NCCL path
needs GPUs on several nodes (docs/fleet.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the fleet tests need Ray (pip install 'envforge[fleet]')")
import ray._private.services  # noqa: E402

# Keep every Ray process of these tests on 127.0.0.1: the raylets get --node-ip-address, and this
# process (which starts the local cluster and is the driver) would otherwise pick the address of the
# machine's outbound interface for its own connections.
ray._private.services.node_ip_address_from_perspective = lambda address=None: "127.0.0.1"

from envforge.cli.fleet import render_text  # noqa: E402
from envforge.fleet import FleetNode, fleet_allreduce, fleet_build, fleet_verify, majority_differences  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENV = "quickstart-default"
pytestmark = pytest.mark.slow


def _project(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for d in ("recipes", "patchsets", "lockfiles"):
        shutil.copytree(ROOT / d, dest / d)
    return dest


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("fleet")
    first = _project(base / "n0")
    res = subprocess.run([sys.executable, "-m", "envforge", "build", "quickstart"], cwd=first,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    out = {"n0": first}
    for name in ("n1", "n2", "n3", "n4"):
        shutil.copytree(first, base / name, symlinks=True)
        out[name] = base / name
    sp = next((out["n2"] / "envs" / ENV).resolve().glob("lib/python3*/site-packages"))
    patched = json.loads((sp / ".envforge" / "patches.json").read_text())["files"][0]["path"]
    with open(sp / patched, "a") as fh:
        fh.write("\n# a hand edit on one node\n")
    sp3 = next((out["n3"] / "envs" / ENV).resolve().glob("lib/python3*/site-packages"))
    prof = json.loads((sp3 / ".envforge" / "env-profile.json").read_text())
    prof["env"]["NCCL_MAX_NCHANNELS"] = "32"
    (sp3 / ".envforge" / "env-profile.json").write_text(json.dumps(prof))
    python4 = (out["n4"] / "envs" / ENV).resolve() / "bin" / "python"
    python4.unlink()
    python4.write_text("#!/bin/sh\nsleep 300\n")  # a node whose interpreter never answers
    python4.chmod(0o755)
    return out


@pytest.fixture(scope="module")
def cluster(roots: dict[str, Path]) -> Iterator[tuple[object, dict[str, str]]]:
    from ray.cluster_utils import Cluster

    args = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}
    c = Cluster(initialize_head=True, head_node_args={**args, "env_vars": {"ENVFORGE_FLEET_ROOT": str(roots["n0"])}})
    nodes = {}
    for name in ("n1", "n2", "n3", "n4"):
        nodes[name] = c.add_node(**args, env_vars={"ENVFORGE_FLEET_ROOT": str(roots[name])})
    c.wait_for_nodes()
    ids = {name: n.node_id for name, n in nodes.items()}
    ids["n0"] = c.head_node.node_id
    try:
        yield c, ids
    finally:
        ray.shutdown()
        c.shutdown()


def test_majority_and_differences_from_literal_fingerprints() -> None:
    fp = {"lock_digest": "sha256:aa", "env_profile_values": {"NCCL_BUFFSIZE": "131072"}, "python": "3.12.1"}
    nodes = [FleetNode("a", "h1", "ok", fingerprint=fp), FleetNode("b", "h2", "ok", fingerprint=fp),
             FleetNode("c", "h3", "ok", fingerprint={**fp, "env_profile_values": {"NCCL_BUFFSIZE": "4M"}}),
             FleetNode("d", "h4", "timeout", error="no answer within 5 s (the task was cancelled)")]
    majority, differs = majority_differences(nodes)
    assert majority["lock_digest"] == "sha256:aa"
    assert majority["env_profile_values"] == {"NCCL_BUFFSIZE": "131072"}
    assert differs == {"c": ("env_profile_values",)}


def test_fleet_verify_names_the_odd_nodes_and_a_killed_one(cluster: tuple[object, dict[str, str]]) -> None:
    c, ids = cluster
    victim = next(n for n in c.worker_nodes if n.node_id == ids["n4"])  # type: ignore[attr-defined]

    def kill_n4() -> None:
        time.sleep(8)  # n4's verify is inside its (never-answering) interpreter probe by now
        c.remove_node(victim, allow_graceful=False)  # type: ignore[attr-defined]

    killer = threading.Thread(target=kill_n4)
    killer.start()
    report = fleet_verify(c.address, ENV, Path("/nonexistent"), levels=("static",), timeout_s=120)  # type: ignore[attr-defined]
    killer.join()
    by = {n.node_id: n for n in report.nodes}
    assert set(by) == set(ids.values())
    assert by[ids["n0"]].status == "ok" and by[ids["n1"]].status == "ok", render_text(report)
    n2 = by[ids["n2"]]
    assert n2.status == "findings" and {f["kind"] for f in n2.findings} == {"tampered", "patch-state"}, n2
    n3 = by[ids["n3"]]
    assert n3.status == "findings"
    assert report.differs[ids["n3"]] == ("env_profile_digest", "env_profile_values")
    assert n3.fingerprint["env_profile_values"]["NCCL_MAX_NCHANNELS"] == "32"
    assert report.majority["env_profile_values"]["NCCL_MAX_NCHANNELS"] == "2"
    n4 = by[ids["n4"]]
    assert n4.status in ("failed", "timeout") and n4.error, n4
    assert report.exit_code == 1
    text = "\n".join(render_text(report))
    assert "differs from the majority: env_profile_digest" in text
    assert "NCCL_MAX_NCHANNELS': '32'" in text


def test_fleet_verify_times_out_a_node_instead_of_hanging(roots: dict[str, Path]) -> None:
    from ray.cluster_utils import Cluster

    ray.shutdown()
    args = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}
    c = Cluster(initialize_head=True, head_node_args={**args, "env_vars": {"ENVFORGE_FLEET_ROOT": str(roots["n1"])}})
    c.add_node(**args, env_vars={"ENVFORGE_FLEET_ROOT": str(roots["n4"])})
    c.wait_for_nodes()
    try:
        start = time.monotonic()
        report = fleet_verify(c.address, ENV, Path("/nonexistent"), levels=("static",), timeout_s=20)
        assert time.monotonic() - start < 60
        assert sorted(n.status for n in report.nodes) == ["ok", "timeout"]
        late = next(n for n in report.nodes if n.status == "timeout")
        assert late.error == "no answer within 20 s (the task was cancelled)"
        assert report.exit_code == 1
    finally:
        ray.shutdown()
        c.shutdown()


def test_fleet_build_reports_which_nodes_flipped_and_allreduce_spans_nodes(roots: dict[str, Path]) -> None:
    from ray.cluster_utils import Cluster

    ray.shutdown()
    broken = roots["n1"].parent / "broken"
    shutil.copytree(roots["n1"], broken, symlinks=True)
    lock = broken / "lockfiles" / "pylock.quickstart-default.toml"
    lock.write_text(lock.read_text().replace("sha256 = \"", "sha256 = \"0", 1))  # a wheel hash that cannot match
    args = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}
    c = Cluster(initialize_head=True, head_node_args={**args, "env_vars": {"ENVFORGE_FLEET_ROOT": str(roots["n1"])}})
    c.add_node(**args, env_vars={"ENVFORGE_FLEET_ROOT": str(broken)})
    c.wait_for_nodes()
    try:
        report = fleet_build(c.address, "quickstart", None, Path("/nonexistent"), timeout_s=600)
        by_status = {n.status: n for n in report.nodes}
        assert set(by_status) == {"ok", "failed"}, render_text(report)
        assert by_status["ok"].detail == {"before": "g0001", "after": "g0002", "flipped": True}
        assert by_status["failed"].detail == {"before": "g0001", "after": "g0001", "flipped": False}
        assert (broken / "envs" / ENV).resolve().name == "g0001"  # the failed node keeps its live generation
        ar = fleet_allreduce(c.address, backend="gloo", sizes=(43008, 1 << 20), repeats=3, port=29533,
                             env={"NCCL_MAX_NCHANNELS": "2"}, timeout_s=120)
        assert [n.status for n in ar.nodes] == ["ok", "ok"], render_text(ar)
        assert [n.detail["rank"] for n in ar.nodes] == [0, 1]
        assert all(s["sum-ok"] and s["median-us"] > 0 for n in ar.nodes for s in n.detail["sizes"])
    finally:
        ray.shutdown()
        c.shutdown()


def test_cli_without_a_cluster_is_a_clear_error(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "envforge", "fleet", "verify", ENV, "--ray", "127.0.0.1:1",
                          "--project", str(ROOT), "--timeout", "5"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "RAY_ADDRESS": ""})
    assert res.returncode == 3, res.stderr
    assert "error: cannot connect to the Ray cluster at 127.0.0.1:1" in res.stderr
    assert "Traceback" not in res.stderr


def test_an_allreduce_on_one_node_is_not_ok() -> None:
    from envforge.fleet import FleetReport, _single_node

    node = _single_node({"NodeID": "abc", "NodeManagerAddress": "127.0.0.1"})
    report = FleetReport("allreduce", (node,), {}, {}, 0.1)
    assert node.status == "failed"
    assert node.error == ("only 1 alive node in the cluster: an all-reduce across nodes needs 2 or more "
                          "(add nodes with `ray start --address HEAD:PORT`)")
    assert report.exit_code == 1
