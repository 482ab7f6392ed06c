"""The fleet all-reduce's NCCL path on two GPUs as two "nodes" (one GPU and one process each).

Runs :func:`envforge.fleet.tasks.allreduce_task` — the code each Ray task runs in ``envforge fleet
allreduce`` — directly in two processes with ``CUDA_VISIBLE_DEVICES`` 0 and 1 and a TCP rendezvous on
127.0.0.1, as ranks on two hosts would. Ray itself is not used here: its wheel (about 70 MB) is larger
than what the lent GPU machine can be given. Configurations:

- ``same-host``: NCCL's defaults (it finds both GPUs on one host and uses P2P/NVLink);
- ``as-across-hosts``: ``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1``, so NCCL takes its network transport
  (TCP sockets) as between hosts without InfiniBand;
- each of those again with the kimi recipe's ``[env.pcie]`` profile (NCCL_MAX_NCHANNELS=2, NCCL_BUFFSIZE=131072).

    python benchmarks/fleet_allreduce_pair.py OUT.json
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

CHILD = """
import json, sys
from envforge.fleet.tasks import allreduce_task
rank, port, env = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
print(json.dumps(allreduce_task(rank, 2, "127.0.0.1", port, "nccl", (43008, 1 << 20, 16 << 20), env, 20)))
"""

CONFIGS = {
    "same-host": {},
    "same-host+pcie-profile": {"NCCL_MAX_NCHANNELS": "2", "NCCL_BUFFSIZE": "131072"},
    "as-across-hosts": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"},
    "as-across-hosts+pcie-profile": {
        "NCCL_P2P_DISABLE": "1",
        "NCCL_SHM_DISABLE": "1",
        "NCCL_MAX_NCHANNELS": "2",
        "NCCL_BUFFSIZE": "131072",
    },
}


def run(name: str, env: dict[str, str], port: int) -> dict[str, object]:
    procs = []
    for rank in (0, 1):
        penv = {**os.environ, "CUDA_VISIBLE_DEVICES": str(rank), "NCCL_NVLS_ENABLE": "0"}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", CHILD, str(rank), str(port), json.dumps(env)],
                env=penv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = [p.communicate(timeout=300) for p in procs]
    ranks = []
    for p, (out, err) in zip(procs, outs):
        if p.returncode != 0:
            ranks.append({"error": err[-1500:]})
        else:
            ranks.append(json.loads(out.strip().splitlines()[-1]))
    return {"config": name, "env": env, "ranks": ranks}


def main() -> None:
    results = [run(name, env, 29600 + i) for i, (name, env) in enumerate(CONFIGS.items())]
    import torch

    doc = {
        "torch": torch.__version__,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())),
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
        "results": results,
    }
    with open(sys.argv[1], "w") as fh:
        json.dump(doc, fh, indent=2)
    for r in results:
        rank0 = r["ranks"][0]
        sizes = rank0.get("sizes", []) if isinstance(rank0, dict) else []
        print(r["config"], [(s["bytes"], s["median-us"], s["sum-ok"]) for s in sizes] or rank0)


if __name__ == "__main__":
    main()
