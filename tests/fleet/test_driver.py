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
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the fleet tests need Ray (pip install 'envforge-stack[fleet]')")
import ray._private.services  # noqa: E402

# Keep every Ray process of these tests on 127.0.0.1: the raylets get --node-ip-address, and this
# process (which starts the local cluster and is the driver) would otherwise pick the address of the
# machine's outbound interface for its own connections.
ray._private.services.node_ip_address_from_perspective = lambda address=None: "127.0.0.1"

from envforge.cli.fleet import render_text  # noqa: E402
from envforge.env.profile import install, read_installed  # noqa: E402
from envforge.fleet.agent import NAMESPACE, agent_name, stop_agents  # noqa: E402
from envforge.fleet.driver import connect, fleet_allreduce, fleet_build, fleet_verify  # noqa: E402
from envforge.fleet.report import FleetNode, FleetReport, majority_differences, single_node  # noqa: E402
from envforge.fleet.tasks import node_budget  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ENV = "quickstart-default"
#: How long n4's interpreter sleeps: 300 s and a number of this run's own, so that another test run
#: on the machine (its own n4) is not taken for a probe this one left behind.
HANG_S = 300 + os.getpid() % 600
pytestmark = pytest.mark.slow


def _project(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for d in ("recipes", "patchsets", "lockfiles"):
        shutil.copytree(ROOT / d, dest / d)
    return dest


def _copy_project(src: Path, dest: Path) -> None:
    """A copy of a built project for another node. The env profile's hook points the kernel caches
    under its own generation (field case B49), so the copy's hook is re-installed for the copy's
    generation, as a build there would write it; a plain copy keeps the original's cache paths and
    verify names that."""
    shutil.copytree(src, dest, symlinks=True)
    for sp in (dest / "envs" / ".generations").glob("*/g*/lib/python3*/site-packages"):
        record = read_installed(sp)
        if record is not None:
            install(sp, record.profile, record.env, mode=record.mode)


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("fleet")
    first = _project(base / "n0")
    res = subprocess.run(
        [sys.executable, "-m", "envforge", "build", "quickstart"],
        cwd=first,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    out = {"n0": first}
    for name in ("n1", "n2", "n3", "n4"):
        _copy_project(first, base / name)
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
    python4.write_text(f"#!/bin/sh\nsleep {HANG_S}\n")  # a node whose interpreter never answers
    python4.chmod(0o755)
    return out


#: What every node of these clusters that carries the stack offers as Ray's GPU resource: the quickstart
#: recipe's ``[target] gpus`` (8 per node), so ``fleet verify`` with the project on the driver runs on it
#: (fake GPUs: a Ray resource only, this machine has none; the static level needs no GPU).
GPUS = {"num_gpus": 8}


@pytest.fixture(scope="module")
def cluster(roots: dict[str, Path]) -> Iterator[tuple[object, dict[str, str]]]:
    from ray.cluster_utils import Cluster

    args = {"num_cpus": 1, **GPUS, "node_ip_address": "127.0.0.1", "include_dashboard": False}
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
    nodes = [
        FleetNode("a", "h1", "ok", fingerprint=fp),
        FleetNode("b", "h2", "ok", fingerprint=fp),
        FleetNode("c", "h3", "ok", fingerprint={**fp, "env_profile_values": {"NCCL_BUFFSIZE": "4M"}}),
        FleetNode("d", "h4", "timeout", error="no answer within 5 s (the task was cancelled)"),
    ]
    majority, differs = majority_differences(nodes)
    assert majority["lock_digest"] == "sha256:aa"
    assert majority["env_profile_values"] == {"NCCL_BUFFSIZE": "131072"}
    assert differs == {"c": ("env_profile_values",)}


def test_node_budget_ends_before_the_driver_gives_up() -> None:
    # (timeout_s, the driver's deadline, this node's clock) -> seconds the node may spend
    assert node_budget(600, 1600, 1000) == 585  # margin 5 % of 600, at most 15 s
    assert node_budget(100, 1100, 1000) == 95
    assert node_budget(20, 1020, 1000) == 18  # margin at least 2 s
    assert node_budget(20, 1010, 1000) == 8  # what is left by this node's clock
    assert node_budget(20, 1020, 900) == 18  # a node clock 100 s behind: the plain limit
    assert node_budget(20, 1020, 1100) == 18  # one 80 s ahead: the plain limit
    assert node_budget(20, 1020, 1020) == 18  # nothing left by its clock: as a skew, the plain limit
    assert node_budget(1, 1001, 1000) == 0  # never below 0


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


def _agents(expected: list[str] | None = None) -> list[str]:
    """The envforge agents in the connected cluster, sorted; with ``expected``, polled for up to 120 s
    until they are those (a stopped agent's name is freed when Ray's GCS has processed its death: a
    moment later, but more than 30 s once in a full CI run on this loaded 2-core machine)."""
    deadline = time.monotonic() + 120
    while True:
        names = sorted(
            a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE
        )
        if expected is None or names == expected or time.monotonic() > deadline:
            return names
        time.sleep(0.2)


def _cli_verify(address: str, *extra: str) -> tuple[int, dict[str, dict[str, object]]]:
    """``envforge fleet verify`` as a user runs it (its own process, its own Ray job): exit status and
    each node's JSON answer by node id."""
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge",
            "fleet",
            "verify",
            ENV,
            "--level",
            "static",
            "--ray",
            address,
            "--project",
            str(ROOT),
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    data = json.loads(res.stdout)["data"]  # the whole report arrived: the fast exit flushed it
    assert data["exit-code"] == res.returncode, res.stderr
    return res.returncode, {n["node-id"]: n for n in data["nodes"]}


def _without_n4(c: object, ids: dict[str, str]) -> None:
    """Connect this process to the cluster (it lists the agents) and make sure n4 (whose interpreter
    hangs) is dead: killed and marked dead by Ray's health check (up to 90 s; at once when the first
    test already killed it)."""
    ray.shutdown()
    connect(c.address)  # type: ignore[attr-defined]
    for victim in [n for n in c.worker_nodes if n.node_id == ids["n4"]]:  # type: ignore[attr-defined]
        c.remove_node(victim, allow_graceful=False)  # type: ignore[attr-defined]
    deadline = time.monotonic() + 90
    while any(n["NodeID"] == ids["n4"] and n["Alive"] for n in ray.nodes()) and time.monotonic() < deadline:
        time.sleep(0.5)


def test_agents_are_reused_replaced_when_envforge_changes_restarted_when_dead_and_stopped(
    cluster: tuple[object, dict[str, str]],
) -> None:
    c, ids = cluster
    _without_n4(c, ids)
    live = [ids[k] for k in ("n0", "n1", "n2", "n3")]
    expected = {ids["n0"]: "ok", ids["n1"]: "ok", ids["n2"]: "findings", ids["n3"]: "findings"}
    code, first = _cli_verify(c.address)  # type: ignore[attr-defined]
    assert code == 1 and {k: v["status"] for k, v in first.items()} == expected
    code, again = _cli_verify(c.address)  # type: ignore[attr-defined]  (a new job: the same agents answer)
    assert code == 1 and {k: v["status"] for k, v in again.items()} == expected
    for node in live:
        was, now = first[node]["detail"]["agent"], again[node]["detail"]["agent"]  # type: ignore[index]
        assert now["pid"] == was["pid"] and now["calls"] == was["calls"] + 1 and now["replaced-because"] == []
    assert _agents() == sorted(f"agent-{n}" for n in live)  # one per live node

    pid = again[ids["n1"]]["detail"]["agent"]["pid"]  # type: ignore[index]
    os.kill(pid, 9)  # an agent that died between two calls: the next call starts a new one
    survivors = sorted(f"agent-{n}" for n in live if n != ids["n1"])
    assert _agents(survivors) == survivors  # Ray freed the dead agent's name
    report = fleet_verify(c.address, ENV, Path("/nonexistent"), levels=("static",), timeout_s=120)  # type: ignore[attr-defined]
    by = {n.node_id: n for n in report.nodes}
    assert {k: n.status for k, n in by.items()} == expected
    assert by[ids["n1"]].detail["agent"]["pid"] != pid and by[ids["n1"]].detail["agent"]["calls"] == 1
    assert "; agents: 3 reused, 1 started" in render_text(report)[-1]

    import envforge.verify.static as changed_module  # every agent loaded it

    path = Path(changed_module.__file__)
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))  # as an upgrade of envforge would
    try:
        code, replaced = _cli_verify(c.address)  # type: ignore[attr-defined]
    finally:  # (back as it was: a change too, for these new agents; they are stopped next)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert code == 1 and {k: v["status"] for k, v in replaced.items()} == expected
    for node in live:
        agent = replaced[node]["detail"]["agent"]  # type: ignore[index]
        assert agent["pid"] != by[node].detail["agent"]["pid"]
        assert agent["calls"] == 1 and agent["replaced-because"] == [str(path)]

    res = subprocess.run(
        [sys.executable, "-m", "envforge", "fleet", "agent", "stop", "--ray", c.address],  # type: ignore[attr-defined]
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (res.returncode, res.stdout) == (0, "stopped 4 envforge agents\n"), res.stderr
    assert _agents([]) == []
    code, plain = _cli_verify(c.address, "--no-agent")  # type: ignore[attr-defined]
    assert code == 1 and {k: v["status"] for k, v in plain.items()} == expected
    assert all(v["detail"] == {} for v in plain.values())
    assert _agents() == []  # --no-agent started none


def test_an_agent_of_another_envforge_is_replaced(cluster: tuple[object, dict[str, str]]) -> None:
    c, ids = cluster
    _without_n4(c, ids)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    class OlderAgent:  # an agent an older envforge started: verify takes three arguments
        def verify(self, env_name: str, root: str, levels: tuple[str, ...]) -> dict[str, object]:
            return {"findings": []}

    stop_agents(ray)
    old = (
        ray.remote(num_cpus=0)(OlderAgent)
        .options(
            name=agent_name(ids["n0"]),
            namespace=NAMESPACE,
            lifetime="detached",
            scheduling_strategy=NodeAffinitySchedulingStrategy(ids["n0"], soft=False),
        )
        .remote()
    )
    ray.get(old.verify.remote(ENV, "", ()))  # it runs
    report = fleet_verify(c.address, ENV, Path("/nonexistent"), levels=("static",), timeout_s=120)  # type: ignore[attr-defined]
    n0 = next(n for n in report.nodes if n.node_id == ids["n0"])
    assert (n0.status, n0.detail["agent"]["state"], n0.detail["agent"]["calls"]) == ("ok", "replaced", 1), n0
    (because,) = n0.detail["agent"]["replaced-because"]
    assert because.startswith("its methods differ from this envforge's (TypeError: "), because
    assert sorted(n.status for n in report.nodes) == ["findings", "findings", "ok", "ok"], render_text(report)
    stop_agents(ray)


def _cli_agent_start(address: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "envforge", "fleet", "agent", "start", "--ray", address, *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_agent_start_brings_agents_up_once_verify_reuses_them_and_a_killed_node_is_reported(
    cluster: tuple[object, dict[str, str]], roots: dict[str, Path]
) -> None:
    c, ids = cluster
    _without_n4(c, ids)
    stop_agents(ray)  # (none when the test before ran: it ends with them stopped)
    _agents([])
    n5 = c.add_node(
        num_cpus=1,
        **GPUS,
        node_ip_address="127.0.0.1",
        include_dashboard=False,  # type: ignore[attr-defined]
        env_vars={"ENVFORGE_FLEET_ROOT": str(roots["n1"])},
    )
    c.wait_for_nodes()  # type: ignore[attr-defined]
    live = sorted([ids[k] for k in ("n0", "n1", "n2", "n3")] + [n5.node_id])

    res = _cli_agent_start(c.address, "--json")  # type: ignore[attr-defined]
    assert res.returncode == 0, res.stderr
    first = {n["node-id"]: n for n in json.loads(res.stdout)["data"]["nodes"]}
    assert sorted(first) == live
    assert {
        k: (v["status"], v["detail"]["agent"]["state"], v["detail"]["agent"]["calls"]) for k, v in first.items()
    } == {k: ("ok", "started", 1) for k in live}
    assert _agents() == [f"agent-{k}" for k in live]

    res = _cli_agent_start(c.address)  # type: ignore[attr-defined]  (twice: nothing new starts)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    for k in live:
        line = next(ln for ln in lines if ln.startswith(f"127.0.0.1 {k[:8]} "))
        assert line.startswith(f"127.0.0.1 {k[:8]} ok: agent already running (up "), line
        assert line.endswith(f" s), pid {first[k]['detail']['agent']['pid']}"), line
    assert lines[-1].startswith("fleet agent-start: 5 nodes, 0 not ok, 0 differ from the majority in ")
    assert lines[-1].endswith(" s; agents: 5 reused, 0 started"), lines[-1]

    code, verified = _cli_verify(c.address)  # type: ignore[attr-defined]  (every agent answers: a later call)
    assert code == 1
    assert {
        k: (v["status"], v["detail"]["agent"]["state"], v["detail"]["agent"]["calls"])  # type: ignore[index]
        for k, v in verified.items()
    } == {
        ids["n0"]: ("ok", "running", 3),
        ids["n1"]: ("ok", "running", 3),
        ids["n2"]: ("findings", "running", 3),
        ids["n3"]: ("findings", "running", 3),
        n5.node_id: ("ok", "running", 3),
    }
    assert all(
        v["detail"]["agent"]["pid"] == first[k]["detail"]["agent"]["pid"]  # type: ignore[index]
        for k, v in verified.items()
    )

    c.remove_node(n5, allow_graceful=False)  # type: ignore[attr-defined]  (a node that dies after its agent started)
    start = time.monotonic()
    res = _cli_agent_start(c.address, "--json", "--timeout", "20")  # type: ignore[attr-defined]
    assert time.monotonic() - start < 120  # hang guard: --timeout 20 is proved by the statuses below
    assert res.returncode == 1, res.stderr
    after = {n["node-id"]: n for n in json.loads(res.stdout)["data"]["nodes"]}
    gone = after.pop(n5.node_id)  # (Ray's health check marks it dead only seconds later)
    assert gone["status"] in ("failed", "timeout") and gone["error"], gone
    assert {k: (v["status"], v["detail"]["agent"]["state"]) for k, v in after.items()} == {
        k: ("ok", "running") for k in live if k != n5.node_id
    }
    stop_agents(ray)


def _sleepers() -> set[int]:
    """Pids of every ``sleep HANG_S`` on this machine (what n4's interpreter runs)."""
    pids = set()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "cmdline").read_bytes() == f"sleep\x00{HANG_S}\x00".encode():
                pids.add(int(proc.name))
        except OSError:
            continue
    return pids


def _holding_the_env_lock(root: Path) -> subprocess.Popen[str]:
    """A process holding ``root``'s environment lock, with an interrupted apply-patches recorded: the
    node's verify waits for the lock to roll it back (a verify stuck outside any probe, as behind an
    apply-patches that never ends)."""
    from envforge.core.mutex import environment_lock_path

    sp = next((root / "envs" / ENV).resolve().glob("lib/python3*/site-packages"))
    (sp / ".envforge" / "patch-intent.json").write_text("{}")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(600)",
            str(environment_lock_path(sp)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_fleet_verify_times_out_a_node_instead_of_hanging_and_leaves_no_probe(roots: dict[str, Path]) -> None:
    from ray.cluster_utils import Cluster

    stuck = roots["n0"].parent / "n5"  # a node whose verify waits on the environment lock
    _copy_project(roots["n0"], stuck)
    holder = _holding_the_env_lock(stuck)
    before = _sleepers()
    ray.shutdown()
    args = {"num_cpus": 1, **GPUS, "node_ip_address": "127.0.0.1", "include_dashboard": False}
    c = Cluster(initialize_head=True, head_node_args={**args, "env_vars": {"ENVFORGE_FLEET_ROOT": str(roots["n1"])}})
    hung = c.add_node(**args, env_vars={"ENVFORGE_FLEET_ROOT": str(roots["n4"])}).node_id
    waits = c.add_node(**args, env_vars={"ENVFORGE_FLEET_ROOT": str(stuck)}).node_id
    c.wait_for_nodes()
    try:
        start = time.monotonic()
        report = fleet_verify(c.address, ENV, Path("/nonexistent"), levels=("static",), timeout_s=20)
        assert time.monotonic() - start < 120  # hang guard: the 20 s limit is proved by the statuses below
        by = {n.node_id: n for n in report.nodes}
        assert sorted(n.status for n in report.nodes) == ["ok", "timeout", "timeout"], render_text(report)
        # n4 answered itself: its probe's process group was killed before the driver's limit.
        assert by[hung].status == "timeout" and re.fullmatch(
            r"verify did not finish within the 20 s limit: probe ran past its caller's [\d.]+ s limit and "
            r"was killed \(process group \d+\)",
            by[hung].error or "",
        ), by[hung]
        assert by[hung].detail["agent"]["state"] == "started"
        assert by[waits].error == "no answer within 20 s (its agent was stopped)"
        assert report.exit_code == 1
        kept = sorted(f"agent-{n}" for n in by if n != waits)
        assert _agents(kept) == kept  # only the agent that gave no answer was stopped
        assert _sleepers() - before == set()  # no probe of n4 outlived the call
        start = time.monotonic()  # the same without agents: the silent node's task is cancelled
        # 20 s, as above: without an agent the healthy node starts a fresh task (imports and all),
        # which took over 10 s on this 2-core machine under load
        report = fleet_verify(c.address, ENV, Path("/nonexistent"), levels=("static",), timeout_s=20, agent=False)
        assert time.monotonic() - start < 120  # hang guard, as above
        by = {n.node_id: n for n in report.nodes}
        assert sorted(n.status for n in report.nodes) == ["ok", "timeout", "timeout"], render_text(report)
        assert re.fullmatch(
            r"verify did not finish within the 20 s limit: probe ran past its caller's "
            r"[\d.]+ s limit and was killed \(process group \d+\)",
            by[hung].error or "",
        ), by[hung]
        assert by[waits].error == "no answer within 20 s (the task was cancelled)"
        assert all("agent" not in n.detail for n in report.nodes)
        assert _sleepers() - before == set()
        assert (
            sorted(a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == NAMESPACE)
            == kept
        )  # --no-agent stopped none

        # Two drivers at once: the second's call runs beside the first's stuck one (a threaded
        # agent), so each node answers each call itself, and neither stops the other's agent.
        holder.kill()  # (the lock is free and no apply-patches interrupted now: every node answers)
        holder.wait()
        for intent in stuck.glob("envs/*/lib/python3*/site-packages/.envforge/patch-intent.json"):
            intent.unlink()
        first = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "envforge",
                "fleet",
                "verify",
                ENV,
                "--level",
                "static",
                "--ray",
                c.address,
                "--project",
                str(ROOT),
                "--json",
                "--timeout",
                "30",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(4)
        code, second = _cli_verify(c.address, "--timeout", "15")
        out, err = first.communicate(timeout=120)
        earlier = {n["node-id"]: n for n in json.loads(out)["data"]["nodes"]}
        for answers, limit in ((second, 15), (earlier, 30)):
            assert answers[hung]["status"] == "timeout", answers[hung]
            assert answers[hung]["error"].startswith(
                f"verify did not finish within the {limit} s limit: probe ran past"
            )
            assert {k: v["status"] for k, v in answers.items() if k != hung} == {
                n: "ok" for n in answers if n != hung
            }, answers
        assert _sleepers() - before == set()

        # An agent stopped while its probe runs (`fleet agent stop`, or Ray killing it): the probe's
        # process group dies with it (the lifeline), and the call reports the node failed.
        stopper = threading.Timer(6.0, stop_agents, (ray,))
        stopper.start()
        report = fleet_verify(c.address, ENV, Path("/nonexistent"), levels=("static",), timeout_s=60)
        stopper.join()
        late = next(n for n in report.nodes if n.node_id == hung)
        assert late.status == "failed" and "ActorDiedError" in (late.error or ""), late
        deadline = time.monotonic() + 15
        while _sleepers() - before and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _sleepers() - before == set()
    finally:
        holder.kill()
        holder.wait()
        ray.shutdown()
        c.shutdown()


def test_fleet_build_reports_which_nodes_flipped_and_allreduce_spans_nodes(roots: dict[str, Path]) -> None:
    from ray.cluster_utils import Cluster

    ray.shutdown()
    broken = roots["n1"].parent / "broken"
    _copy_project(roots["n1"], broken)
    lock = broken / "lockfiles" / "pylock.quickstart-default.toml"
    lock.write_text(lock.read_text().replace('sha256 = "', 'sha256 = "0', 1))  # a wheel hash that cannot match
    stalled = roots["n1"].parent / "stalled"  # a node whose uv never answers
    _copy_project(roots["n1"], stalled)
    stuck_uv = stalled / "stuck-uv"
    stuck_uv.write_text(f"#!/bin/sh\nsleep 302 &\necho $! > {stalled / 'sleep.pid'}\nwait\n")
    stuck_uv.chmod(0o755)
    args = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "include_dashboard": False}
    c = Cluster(initialize_head=True, head_node_args={**args, "env_vars": {"ENVFORGE_FLEET_ROOT": str(roots["n1"])}})
    c.add_node(**args, env_vars={"ENVFORGE_FLEET_ROOT": str(broken)})
    c.add_node(**args, env_vars={"ENVFORGE_FLEET_ROOT": str(stalled), "ENVFORGE_UV": str(stuck_uv)})
    c.wait_for_nodes()
    try:
        report = fleet_build(c.address, "quickstart", None, Path("/nonexistent"), timeout_s=45)
        by_status = {n.status: n for n in report.nodes}
        assert set(by_status) == {"ok", "failed", "timeout"}, render_text(report)
        assert by_status["ok"].detail == {"before": "g0001", "after": "g0002", "flipped": True}
        assert by_status["failed"].detail == {"before": "g0001", "after": "g0001", "flipped": False}
        assert (broken / "envs" / ENV).resolve().name == "g0001"  # the failed node keeps its live generation
        # The stalled node stopped its own uv (process group killed) and answered before the driver's limit.
        late = by_status["timeout"]
        assert late.detail == {"before": "g0001", "after": "g0001", "flipped": False}
        assert re.match(
            r"build did not finish within the 45 s limit: build failed at step '[\w-]+': uv \w+ ran "
            r"past its caller's [\d.]+ s limit and was stopped\n",
            late.error or "",
        ), late
        assert (stalled / "envs" / ENV).resolve().name == "g0001"
        assert (
            not Path(f"/proc/{int((stalled / 'sleep.pid').read_text())}/cmdline").exists()
            or Path(f"/proc/{int((stalled / 'sleep.pid').read_text())}/cmdline").read_bytes() == b""
        )  # gone (or a zombie)
        ar = fleet_allreduce(
            c.address, sizes=(43008, 1 << 20), repeats=3, port=29533, env={"NCCL_MAX_NCHANNELS": "2"}, timeout_s=120
        )  # no GPU resources here: gloo
        assert ar.backend == ("gloo", "the selected nodes have no GPU resources (nccl needs a GPU on every rank)")
        assert (
            render_text(ar)[0] == "backend gloo: the selected nodes have no GPU resources (nccl needs a GPU on "
            "every rank)"
        )
        assert [n.status for n in ar.nodes] == ["ok", "ok", "ok"], render_text(ar)
        assert [n.detail["rank"] for n in ar.nodes] == [0, 1, 2]
        assert all(s["sum-ok"] and s["median-us"] > 0 for n in ar.nodes for s in n.detail["sizes"])
    finally:
        ray.shutdown()
        c.shutdown()


def test_a_gpu_free_head_is_skipped_not_failed(roots: dict[str, Path], tmp_path: Path) -> None:
    """A dedicated head with no GPUs and no project (NVIDIA-NeMo/RL#3388's layout): `fleet verify` runs on
    the nodes with the recipe's 8 GPUs, lists the head and a 1-GPU worker as skipped with the reason, and
    exits 0; `--label` picks the nodes instead; with no node that qualifies it exits 1."""
    from ray.cluster_utils import Cluster

    ray.shutdown()
    args = {"node_ip_address": "127.0.0.1", "include_dashboard": False}
    c = Cluster(
        initialize_head=True,
        head_node_args={
            **args,
            "num_cpus": 0,
            "num_gpus": 0,
            "env_vars": {"ENVFORGE_FLEET_ROOT": str(tmp_path / "head-control-plane")},
        },
    )
    big = c.add_node(
        **args, num_cpus=1, num_gpus=8, labels={"pool": "gpu"}, env_vars={"ENVFORGE_FLEET_ROOT": str(roots["n1"])}
    ).node_id
    small = c.add_node(
        **args, num_cpus=1, num_gpus=1, labels={"pool": "gpu"}, env_vars={"ENVFORGE_FLEET_ROOT": str(roots["n0"])}
    ).node_id
    c.wait_for_nodes()
    head = c.head_node.node_id

    def cli(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "envforge",
                "fleet",
                "verify",
                ENV,
                "--level",
                "static",
                "--ray",
                c.address,
                "--project",
                str(ROOT),
                "--no-agent",
                "--timeout",
                "120",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )

    try:
        res = cli()
        assert res.returncode == 0, res.stdout + res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == (
            "selected 1 of 3 alive nodes: nodes with at least 8 GPUs ([target] gpus = 8 in "
            "lockfiles/pylock.quickstart-default.toml)"
        )
        assert sorted(lines[1:3]) == sorted(
            [
                f"skipped 127.0.0.1 {head[:8]}: no GPU resources (needs 8)",
                f"skipped 127.0.0.1 {small[:8]}: 1 GPU (needs 8)",
            ]
        )
        assert lines[3].startswith(f"127.0.0.1 {big[:8]} ok: lock "), lines[3]
        assert lines[-1].startswith("fleet verify: 1 node (2 skipped), 0 not ok, 0 differ from the majority in ")

        res = cli("--label", "pool=gpu", "--json")
        assert res.returncode == 0, res.stdout + res.stderr
        data = json.loads(res.stdout)["data"]
        assert (data["exit-code"], data["selection"]) == (0, "nodes with label pool=gpu")
        assert data["skipped"] == [{"node-id": head, "host": "127.0.0.1", "reason": "no label pool (needs pool=gpu)"}]
        assert sorted((n["node-id"], n["status"]) for n in data["nodes"]) == sorted([(big, "ok"), (small, "ok")])

        res = cli("--num-gpus", "16")
        assert res.returncode == 1, res.stdout + res.stderr
        assert res.stdout.splitlines()[0] == "selected 0 of 3 alive nodes: nodes with at least 16 GPUs (--num-gpus 16)"
        assert res.stdout.splitlines()[-1] == (
            "fleet verify: no alive node qualifies (3 skipped); pick nodes with "
            "--num-gpus, --label, --resource or --all-nodes"
        )
    finally:
        ray.shutdown()
        c.shutdown()


def test_cli_without_a_cluster_is_a_clear_error(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge",
            "fleet",
            "verify",
            ENV,
            "--ray",
            "127.0.0.1:1",
            "--project",
            str(ROOT),
            "--timeout",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAY_ADDRESS": ""},
    )
    assert res.returncode == 3, res.stderr
    assert "error: cannot connect to the Ray cluster at 127.0.0.1:1" in res.stderr
    assert "Traceback" not in res.stderr


def test_an_allreduce_on_one_node_is_not_ok() -> None:
    node = single_node({"NodeID": "abc", "NodeManagerAddress": "127.0.0.1"})
    report = FleetReport("allreduce", (node,), {}, {}, 0.1)
    assert node.status == "failed"
    assert node.error == (
        "only 1 alive node in the cluster: an all-reduce across nodes needs 2 or more "
        "(add nodes with `ray start --address HEAD:PORT`)"
    )
    assert report.exit_code == 1


def test_cli_output_is_envforges_only_when_a_node_dies_and_node_hints_arrive(
    cluster: tuple[object, dict[str, str]], roots: dict[str, Path]
) -> None:
    """A node that dies during `envforge fleet verify --json` (its interpreter hangs, then its raylet
    is killed): stdout is exactly the one JSON document and stderr is empty, where Ray printed the dead
    raylet's last 20 log lines (about 45 lines) to stdout; then a name no node has: each node's
    `failed` line carries the local command's hint."""
    c, ids = cluster
    _without_n4(c, ids)
    doomed = c.add_node(
        num_cpus=1,
        **GPUS,
        node_ip_address="127.0.0.1",  # type: ignore[attr-defined]
        include_dashboard=False,
        env_vars={"ENVFORGE_FLEET_ROOT": str(roots["n4"])},
    )  # n4's hanging interpreter
    c.wait_for_nodes()  # type: ignore[attr-defined]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envforge",
            "fleet",
            "verify",
            ENV,
            "--level",
            "static",
            "--ray",
            c.address,
            "--project",
            str(ROOT),
            "--json",
            "--timeout",
            "120",
        ],  # type: ignore[attr-defined]
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(10)  # its verify is inside the never-answering interpreter by now
    c.remove_node(doomed, allow_graceful=False)  # type: ignore[attr-defined]
    out, err = proc.communicate(timeout=200)
    assert err == "" and out.startswith("{"), err + out[:2000]
    data = json.loads(out)["data"]
    by = {n["node-id"]: n for n in data["nodes"]}
    assert by[doomed.node_id]["status"] in ("failed", "timeout"), by[doomed.node_id]
    assert proc.returncode == data["exit-code"] == 1 and data["allreduce"] is None

    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "envforge",
            "fleet",
            "verify",
            "nosuch",
            "--ray",
            c.address,  # type: ignore[attr-defined]
            "--project",
            str(ROOT),
            "--no-agent",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    failed = [i for i, ln in enumerate(lines) if " failed: no environment 'nosuch' in " in ln]
    assert len(failed) == 4, res.stdout  # n0..n3 (n4 and the doomed node are dead)
    for i in failed:
        assert lines[i + 1] == f"    hint: build it with `envforge build`; existing: {ENV}", res.stdout
