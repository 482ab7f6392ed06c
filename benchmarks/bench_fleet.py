"""fleet verify on an already-running 4-node local Ray cluster vs one local verify (same machine, same run).

Target (issue 17): ``envforge fleet verify`` ≤ one local ``envforge verify`` + 3 s. Everything is timed as
a user runs it (the CLI in a subprocess, median of ``--runs``); the cluster is four real raylets on
127.0.0.1 sharing one project (``ray.cluster_utils.Cluster``), started before timing. The fleet
figures: the **first call** (no agents on the cluster: ``fleet agent stop`` before each run, untimed, so
the call starts four agents); **``fleet agent start``** on a cluster without agents (the operator's step
after starting the cluster; ``fleet agent stop`` before each run, untimed) and the **verify right after
it**; **later calls** (the agents answer); and ``--no-agent`` (a fresh Ray task per node, every call).

    python benchmarks/bench_fleet.py [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ray
import ray._private.services

ray._private.services.node_ip_address_from_perspective = lambda address=None: "127.0.0.1"
ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], cwd: Path) -> float:
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if res.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{res.stderr[-2000:]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from ray.cluster_utils import Cluster

    with tempfile.TemporaryDirectory() as tmp:
        proj = Path(tmp) / "proj"
        proj.mkdir()
        for d in ("recipes", "patchsets", "lockfiles"):
            shutil.copytree(ROOT / d, proj / d)
        envforge = [sys.executable, "-m", "envforge"]
        subprocess.run([*envforge, "build", "quickstart"], cwd=proj, check=True, capture_output=True)
        # num_gpus: the quickstart recipe's [target] gpus as a (fake) Ray resource, so that fleet verify
        # runs on every node rather than skipping them (docs/fleet.md, "Which nodes").
        node = {"num_cpus": 1, "num_gpus": 8, "node_ip_address": "127.0.0.1", "include_dashboard": False}
        c = Cluster(initialize_head=True, head_node_args=dict(node))
        for _ in range(3):
            c.add_node(**node)
        c.wait_for_nodes()
        load = Path("/proc/loadavg").read_text().split()[:3]
        try:
            local = [
                timed([*envforge, "verify", "quickstart-default", "--level", "static"], proj) for _ in range(args.runs)
            ]
            fleet = [
                *envforge,
                "fleet",
                "verify",
                "quickstart-default",
                "--level",
                "static",
                "--ray",
                c.address,
                "--project",
                str(proj),
            ]
            stop = [*envforge, "fleet", "agent", "stop", "--ray", c.address]
            first, start, after_start = [], [], []
            for _ in range(args.runs):
                subprocess.run(stop, check=True, capture_output=True)
                first.append(timed(fleet, proj))
            for _ in range(args.runs):
                subprocess.run(stop, check=True, capture_output=True)
                start.append(timed([*envforge, "fleet", "agent", "start", "--ray", c.address], proj))
                after_start.append(timed(fleet, proj))
            later = [timed(fleet, proj) for _ in range(args.runs)]
            plain = [timed([*fleet, "--no-agent"], proj) for _ in range(args.runs)]
        finally:
            c.shutdown()
    lm = statistics.median(local)
    print(f"load average before / after: {load} / {Path('/proc/loadavg').read_text().split()[:3]}")
    print(f"{'local verify':30} median {lm:.2f} s  runs {[round(x, 2) for x in local]}")
    for name, runs in (
        ("fleet verify, first call", first),
        ("fleet agent start (no agents)", start),
        ("fleet verify after start", after_start),
        ("fleet verify, later calls", later),
        ("fleet verify --no-agent", plain),
    ):
        m = statistics.median(runs)
        print(
            f"{name:30} median {m:.2f} s  runs {[round(x, 2) for x in runs]} (4 nodes)  "
            f"{m - lm:+.2f} s vs local (target <= +3.00 s)"
        )


if __name__ == "__main__":
    main()
