"""Record a machine's GPU links for verify's ``interconnect`` check (issue 25), with the system python3.

Run on a GPU machine from the repository root (no envforge install needed; the probe is a
stdlib-only script, pynvml is used when it imports)::

    python3 benchmarks/gpu_topology_probe.py --out /tmp/topology

It writes into ``--out``:

* ``nvidia-smi-topo-m.txt``: ``nvidia-smi topo -m`` as printed (the shape tests/data/topology/
  records), and ``nvidia-smi-topo-p2p-n.txt``: ``nvidia-smi topo -p2p n`` (NVLink P2P per pair);
* ``nvidia-smi-L.txt``: the GPU names and UUIDs;
* ``topology.json``: the verify probe's ``topology`` answer with its default source order (NVML,
  then nvidia-smi) and with each source alone (``by_source``), the matrix parsed again from the
  saved text, CUDA's own peer-access view from torch (``torch.cuda.can_device_access_peer`` per
  pair, when torch imports), and the verdicts of ``interconnect_check`` against ``pcie`` and
  ``nvlink`` when envforge imports from ``src/``.

Prints a short summary; exit 0 whenever something was recorded. Every command runs under a time
limit, so a wedged driver cannot hang the run.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "src" / "envforge" / "verify" / "gpu_probe.py"
PEERS = """import json, torch
n = torch.cuda.device_count() if torch.cuda.is_available() else 0
print(json.dumps({"torch": torch.__version__, "devices": n,
                  "names": [torch.cuda.get_device_name(i) for i in range(n)],
                  "can_access_peer": {"%d-%d" % (i, j): torch.cuda.can_device_access_peer(i, j)
                                      for i in range(n) for j in range(n) if i < j}}))
"""


def _run(argv: list[str], timeout: float = 120.0, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """Exit status (None: could not run or timed out) and stdout+stderr of ``argv``."""
    try:
        r = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return r.returncode, r.stdout + (("\n" + r.stderr) if r.stderr.strip() else "")


def _probe(sources: list[str] | None) -> Any:
    cfg: dict[str, Any] = {"mode": "topology"}
    if sources is not None:
        cfg["sources"] = sources
    code, out = _run([sys.executable, str(PROBE), json.dumps(cfg)])
    lines = out.strip().splitlines()
    try:
        return json.loads(lines[-1]) if code == 0 and lines else {"error": out[-2000:], "status": code}
    except json.JSONDecodeError:
        return {"error": out[-2000:], "status": code}


def _verdicts(topo: Any) -> Any:
    sys.path.insert(0, str(ROOT / "src"))
    try:
        from envforge.verify.gpu import interconnect_check  # lazy: optional, only when src/ imports here
    except Exception as exc:  # noqa: BLE001 - recorded, the rest still useful
        return {"error": f"envforge did not import: {type(exc).__name__}: {exc}"}
    out = {}
    for declared in ("pcie", "nvlink"):
        status, found, detail = interconnect_check(declared, topo)
        out[declared] = {"status": status, "detail": detail, "findings": [f.as_dict() for f in found]}
    return out


def main(argv: list[str] | None = None) -> int:
    """Record into ``--out``; returns 0 when nvidia-smi or the probe answered, else 1."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("topology-record"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    record: dict[str, Any] = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    for name, cmd in (
        ("nvidia-smi-topo-m.txt", ["nvidia-smi", "topo", "-m"]),
        ("nvidia-smi-topo-p2p-n.txt", ["nvidia-smi", "topo", "-p2p", "n"]),
        ("nvidia-smi-L.txt", ["nvidia-smi", "-L"]),
    ):
        code, text = _run(cmd)
        (args.out / name).write_text(text)
        record.setdefault("commands", {})[" ".join(cmd)] = code
    record["probe"] = _probe(None)
    record["by_source"] = {s: _probe([s]) for s in ("nvml", "nvidia-smi")}
    parse = runpy.run_path(str(PROBE))["parse_topo_matrix"]
    record["parsed_from_text"] = parse((args.out / "nvidia-smi-topo-m.txt").read_text())
    code, peers = _run([sys.executable, "-c", PEERS], timeout=300)
    try:
        record["torch_peers"] = json.loads(peers.strip().splitlines()[-1]) if code == 0 else {"error": peers[-2000:]}
    except (json.JSONDecodeError, IndexError):
        record["torch_peers"] = {"error": peers[-2000:]}
    record["verdicts"] = _verdicts(record["probe"])
    (args.out / "topology.json").write_text(json.dumps(record, indent=2) + "\n")
    probe = record["probe"]
    print(f"source {probe.get('source')}, gpus {probe.get('gpus')}, links {probe.get('links')}")
    print(
        f"tried {probe.get('tried')}; verdicts "
        + json.dumps(
            {k: v.get("status") for k, v in record["verdicts"].items()}
            if "error" not in record["verdicts"]
            else record["verdicts"]
        )
    )
    print(f"written to {args.out}")
    return 0 if probe.get("source") or record["commands"].get("nvidia-smi topo -m") == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
