"""verify's ``interconnect`` check: GPU links from NVML or ``nvidia-smi topo -m`` against ``[target] interconnect``.

The matrices are recorded outputs under tests/data/topology/ (each file says where its shape comes
from; ``h200-1x.txt`` is a real record of this project's one-GPU H200 machine). The probe's source
order runs for real: the GPU probe in a Python interpreter, with a stand-in ``pynvml`` module on
``PYTHONPATH`` and a stand-in ``nvidia-smi`` on ``PATH`` that prints a recorded matrix.
"""

from __future__ import annotations

import json
import os
import runpy
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from envforge.core.probe import run_probe
from envforge.verify import gpu as G
from envforge.verify.inventory import EnvLock
from envforge.verify.static import probe_script
from envforge.verify.topology import interconnect_check

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"
PROBE = runpy.run_path(str(Path(G.__file__).with_name("gpu_probe.py")))
parse = PROBE["parse_topo_matrix"]
NVSWITCH_PAIRS = (
    "0-1, 0-2, 0-3, 0-4, 0-5, 0-6, 0-7, 1-2, 1-3, 1-4, 1-5, 1-6, 1-7, 2-3, 2-4, 2-5, 2-6, 2-7, "
    "3-4, 3-5, 3-6, 3-7, 4-5, 4-6, 4-7, 5-6, 5-7, 6-7"
)
PCIE_BY_LABEL = (
    "NODE: 0-2, 0-3, 1-2, 1-3, 4-6, 4-7, 5-6, 5-7; PIX: 0-1, 2-3, 4-5, 6-7; SYS: 0-4, 0-5, 0-6, 0-7, "
    "1-4, 1-5, 1-6, 1-7, 2-4, 2-5, 2-6, 2-7, 3-4, 3-5, 3-6, 3-7"
)
#: Four PCIe GPUs joined in pairs by NVLink bridges (shape of the 4x A100 PCIe sample in
#: NVIDIA/nccl-tests issue pastes: NV# inside a pair, SYS across).
MIXED = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV12\tSYS\tSYS\t0-31\t0\nGPU1\tNV12\t X \tSYS\tSYS\t0-31\t0\n"
    "GPU2\tSYS\tSYS\t X \tNV12\t32-63\t1\nGPU3\tSYS\tSYS\tNV12\t X \t32-63\t1\n"
)


def topo(name: str) -> dict[str, Any]:
    return {**parse((DATA / name).read_text()), "source": "nvidia-smi", "tried": []}


# --- parse ---------------------------------------------------------------------------------------


def test_parse_an_nvswitch_box_every_pair_nv18_and_no_nic_columns() -> None:
    t = parse((DATA / "h100-8x-nvswitch.txt").read_text())
    assert t["gpus"] == [0, 1, 2, 3, 4, 5, 6, 7]
    assert ", ".join(t["links"]) == NVSWITCH_PAIRS
    assert set(t["links"].values()) == {"NV18"}


def test_parse_a_pcie_box_keeps_each_pairs_label() -> None:
    t = parse((DATA / "pcie-8x-rtx-pro-6000.txt").read_text())
    assert t["gpus"] == list(range(8))
    assert (
        t["links"]["0-1"],
        t["links"]["2-3"],
        t["links"]["0-2"],
        t["links"]["1-3"],
        t["links"]["3-4"],
        t["links"]["6-7"],
        t["links"]["0-7"],
    ) == ("PIX", "PIX", "NODE", "NODE", "SYS", "PIX", "SYS")
    assert Counter(t["links"].values()) == {"PIX": 4, "NODE": 8, "SYS": 16}


def test_parse_two_and_one_gpu_boxes() -> None:
    assert parse((DATA / "h200-2x-nvlink.txt").read_text()) == {"gpus": [0, 1], "links": {"0-1": "NV18"}}
    # The real record: nvidia-smi underlines the header with terminal codes, even into a file.
    text = (DATA / "h200-1x.txt").read_text()
    assert "\x1b[4mGPU0" in text
    assert parse(text) == {"gpus": [0], "links": {}}


def test_parse_ignores_what_is_not_the_matrix() -> None:
    assert parse("") == {"gpus": [], "links": {}}
    assert parse("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n") == {
        "gpus": [],
        "links": {},
    }
    assert parse("GPU0\t X \tNV4\nGPU1\tNV4\t X \n") == {"gpus": [], "links": {}}  # rows without a header
    assert parse(
        "        GPU0    GPU1    CPU Affinity\nGPU0     X      NV4     0-7\nGPU1    NV4      X      0-7\n"
        "\nLegend:\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n"
    ) == {"gpus": [0, 1], "links": {"0-1": "NV4"}}  # space-separated, as pasted on the web


# --- verdict -------------------------------------------------------------------------------------


def test_pcie_declared_on_an_nvswitch_box_is_a_finding_naming_the_pairs() -> None:
    status, found, detail = interconnect_check("pcie", topo("h100-8x-nvswitch.txt"))
    assert status == "findings"
    assert [f.as_dict() for f in found] == [
        {
            "kind": "interconnect",
            "level": "gpu",
            "subject": "[target] interconnect",
            "expected": "pcie: GPU pairs linked over PCIe (PIX, PXB, PHB, NODE or SYS)",
            "actual": f"every pair is linked by NVLink (nvidia-smi topo -m): NV18: {NVSWITCH_PAIRS}",
            "fix": 'declare interconnect = "nvlink" in the recipe\'s [target] (its [env.nvlink] profile is installed), '
            "or run on the PCIe machine the recipe targets",
        }
    ]
    assert detail == f"pcie declared; 8 GPUs, 28 pairs (nvidia-smi topo -m): NV18: {NVSWITCH_PAIRS}"


def test_pcie_declared_on_an_nvlink_pair_is_a_finding() -> None:
    status, found, detail = interconnect_check("pcie", topo("h200-2x-nvlink.txt"))
    assert (status, [f.actual for f in found], detail) == (
        "findings",
        ["every pair is linked by NVLink (nvidia-smi topo -m): NV18: 0-1"],
        "pcie declared; 2 GPUs, 1 pair (nvidia-smi topo -m): NV18: 0-1",
    )


def test_nvlink_declared_on_a_pcie_box_is_a_finding_naming_the_pairs() -> None:
    status, found, _ = interconnect_check("nvlink", topo("pcie-8x-rtx-pro-6000.txt"))
    assert status == "findings"
    assert [(f.kind, f.expected, f.actual, f.fix) for f in found] == [
        (
            "interconnect",
            "nvlink: every GPU pair linked by NVLink (NV#)",
            f"28 of 28 pairs not linked by NVLink (nvidia-smi topo -m): {PCIE_BY_LABEL}",
            (
                'declare interconnect = "pcie" in the recipe\'s [target] (its [env.pcie] profile is installed), '
                "or run on the NVLink machine the recipe targets"
            ),
        )
    ]


def test_the_declared_fabric_matching_the_links_passes() -> None:
    assert interconnect_check("pcie", topo("pcie-8x-rtx-pro-6000.txt")) == (
        "ok",
        [],
        f"pcie declared; 8 GPUs, 28 pairs (nvidia-smi topo -m): {PCIE_BY_LABEL}",
    )
    assert interconnect_check("nvlink", topo("h200-2x-nvlink.txt")) == (
        "ok",
        [],
        "nvlink declared; 2 GPUs, 1 pair (nvidia-smi topo -m): NV18: 0-1",
    )
    assert interconnect_check("nvlink", {**topo("h100-8x-nvswitch.txt"), "source": "nvml"})[0] == "ok"


def test_a_machine_with_some_nvlink_pairs() -> None:
    """pcie holds while some pair goes over PCIe; nvlink names the pairs without NVLink."""
    t = {**parse(MIXED), "source": "nvml", "tried": []}
    assert interconnect_check("pcie", t) == (
        "ok",
        [],
        "pcie declared; 4 GPUs, 6 pairs (NVML): NV12: 0-1, 2-3; SYS: 0-2, 0-3, 1-2, 1-3",
    )
    _, found, _ = interconnect_check("nvlink", t)
    assert [f.actual for f in found] == ["4 of 6 pairs not linked by NVLink (NVML): SYS: 0-2, 0-3, 1-2, 1-3"]


@pytest.mark.parametrize(
    ("declared", "t", "detail"),
    [
        ("pcie", "h200-1x.txt", "no peer GPUs (1 GPU, from nvidia-smi topo -m)"),
        ("nvlink", "h200-1x.txt", "no peer GPUs (1 GPU, from nvidia-smi topo -m)"),
        (
            None,
            "h200-2x-nvlink.txt",
            "the recipe declares no [target] interconnect; 2 GPUs, 1 pair (nvidia-smi topo -m): NV18: 0-1",
        ),
    ],
)
def test_skipped_with_the_reason(declared: str | None, t: str, detail: str) -> None:
    assert interconnect_check(declared, topo(t)) == ("skipped", [], detail)


def test_no_link_information_is_a_skip_saying_what_was_tried() -> None:
    t = {
        "source": None,
        "gpus": [],
        "links": {},
        "tried": ["nvml: ModuleNotFoundError: No module named 'pynvml'", "nvidia-smi: exit status 9: no driver"],
    }
    assert interconnect_check("pcie", t) == (
        "skipped",
        [],
        (
            "no GPU link information: nvml: ModuleNotFoundError: "
            "No module named 'pynvml'; nvidia-smi: exit status 9: no driver"
        ),
    )


# --- the probe's sources, for real ---------------------------------------------------------------

FAKE_PYNVML = """import json, os
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_STATUS_OK = 0
NVML_FEATURE_ENABLED = 1
NVML_NVLINK_MAX_LINKS = 18
class NVMLError(Exception):
    pass
_cfg = json.load(open(os.environ["FAKE_NVML"]))
if _cfg.get("absent"):
    raise ModuleNotFoundError("No module named 'pynvml'")
class _Pci:
    def __init__(self, bus):
        self.busId = bus
def nvmlInit():
    if _cfg.get("init_error"):
        raise NVMLError(_cfg["init_error"])
def nvmlShutdown():
    pass
def nvmlDeviceGetCount():
    return len(_cfg["buses"])
def nvmlDeviceGetHandleByIndex(i):
    return i
def nvmlDeviceGetPciInfo(h):
    return _Pci(_cfg["buses"][h].encode())
def nvmlDeviceGetNvLinkState(h, link):
    if link >= len(_cfg["nvlinks"][h]):
        raise NVMLError("Not Supported")
    return NVML_FEATURE_ENABLED
def nvmlDeviceGetNvLinkRemotePciInfo(h, link):
    return _Pci(_cfg["nvlinks"][h][link])
def nvmlDeviceGetP2PStatus(a, b, index):
    assert index == NVML_P2P_CAPS_INDEX_NVLINK
    return NVML_P2P_STATUS_OK if "%d-%d" % (a, b) in _cfg["p2p_ok"] else 5
def nvmlDeviceGetTopologyCommonAncestor(a, b):
    return _cfg["ancestor"]["%d-%d" % (a, b)]
"""
FAKE_SMI = '#!/bin/sh\n[ "$1 $2" = "topo -m" ] || exit 2\ncat "$FAKE_SMI_TEXT"\nexit "${FAKE_SMI_STATUS:-0}"\n'
BUSES = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0"]


@pytest.fixture
def stand_ins(tmp_path: Path) -> Path:
    (tmp_path / "py").mkdir()
    (tmp_path / "py" / "pynvml.py").write_text(FAKE_PYNVML)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvidia-smi").write_text(FAKE_SMI)
    (tmp_path / "bin" / "nvidia-smi").chmod(0o755)
    (tmp_path / "empty").mkdir()
    for d in ("bin", "empty"):  # `cat` for the probe runner's lifeline watcher; no real nvidia-smi
        (tmp_path / d / "cat").symlink_to(shutil.which("cat") or "/bin/cat")
    return tmp_path


def run_topology(
    stand_ins: Path,
    nvml: dict[str, Any],
    smi: str | None = "pcie-8x-rtx-pro-6000.txt",
    cfg: dict[str, Any] | None = None,
    **env: str,
) -> Any:
    (stand_ins / "nvml.json").write_text(json.dumps(nvml))
    base = {
        "PYTHONPATH": str(stand_ins / "py"),
        "FAKE_NVML": str(stand_ins / "nvml.json"),
        "PATH": str(stand_ins / ("bin" if smi else "empty")),
        "FAKE_SMI_TEXT": str(DATA / (smi or "none")),
        **env,
    }
    return run_probe(
        Path(sys.executable),
        probe_script("gpu_probe.py"),
        args=[json.dumps({"mode": "topology", **(cfg or {})})],
        env=base,
        timeout_s=60,
    ).data


def test_nvml_comes_first_and_counts_direct_links(stand_ins: Path) -> None:
    nvml = {"buses": BUSES[:2], "nvlinks": [[BUSES[1]] * 4, [BUSES[0]] * 4], "p2p_ok": ["0-1"], "ancestor": {}}
    assert run_topology(stand_ins, nvml) == {"source": "nvml", "gpus": [0, 1], "links": {"0-1": "NV4"}, "tried": []}


def test_nvml_through_nvswitches_counts_every_active_link_and_others_get_their_pcie_level(stand_ins: Path) -> None:
    switch = "00000000:C1:00.0"
    nvml = {
        "buses": BUSES,
        "nvlinks": [[switch] * 18, [switch] * 18, []],
        "p2p_ok": ["0-1"],
        "ancestor": {"0-2": 40, "1-2": 50},
    }
    assert run_topology(stand_ins, nvml)["links"] == {"0-1": "NV18", "0-2": "NODE", "1-2": "SYS"}


def test_nvidia_smi_when_nvml_fails_or_is_absent(stand_ins: Path) -> None:
    out = run_topology(stand_ins, {"init_error": "Driver Not Loaded"})
    assert (out["source"], out["tried"], out["links"]["0-1"], len(out["links"])) == (
        "nvidia-smi",
        ["nvml: NVMLError: Driver Not Loaded"],
        "PIX",
        28,
    )
    out = run_topology(stand_ins, {"absent": True}, smi="h200-2x-nvlink.txt")
    assert out == {
        "source": "nvidia-smi",
        "gpus": [0, 1],
        "links": {"0-1": "NV18"},
        "tried": ["nvml: ModuleNotFoundError: No module named 'pynvml'"],
    }


def test_neither_source(stand_ins: Path) -> None:
    out = run_topology(stand_ins, {"absent": True}, smi=None)
    assert out == {
        "source": None,
        "gpus": [],
        "links": {},
        "tried": [
            "nvml: ModuleNotFoundError: No module named 'pynvml'",
            "nvidia-smi: FileNotFoundError: [Errno 2] No such file or directory: 'nvidia-smi'",
        ],
    }
    failed = stand_ins / "failed.txt"
    failed.write_text("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    out = run_topology(stand_ins, {"absent": True}, FAKE_SMI_STATUS="9", FAKE_SMI_TEXT=str(failed))
    assert out["tried"][1] == (
        "nvidia-smi: exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    )
    out = run_topology(stand_ins, {"absent": True}, smi="h200-2x-nvlink.txt", FAKE_SMI_TEXT="/dev/null")
    assert out["tried"][1] == "nvidia-smi: nvidia-smi topo -m printed no GPU matrix"


def test_sources_can_be_named_and_visible_devices_limit_the_pairs(stand_ins: Path) -> None:
    nvml = {"buses": BUSES[:2], "nvlinks": [[BUSES[1]], [BUSES[0]]], "p2p_ok": ["0-1"], "ancestor": {}}
    assert run_topology(stand_ins, nvml, cfg={"sources": ["nvidia-smi"]})["source"] == "nvidia-smi"
    out = run_topology(stand_ins, nvml, cfg={"sources": ["nvidia-smi"]}, CUDA_VISIBLE_DEVICES="4,6,5")
    assert (out["gpus"], out["links"]) == ([4, 5, 6], {"4-5": "PIX", "4-6": "NODE", "5-6": "NODE"})
    out = run_topology(stand_ins, nvml, cfg={"sources": ["nvidia-smi"]}, CUDA_VISIBLE_DEVICES="GPU-f6156dae")
    assert len(out["gpus"]) == 8  # UUIDs: every GPU the driver lists


def test_the_gpu_level_records_the_links_and_checks_them(stand_ins: Path) -> None:
    (stand_ins / "nvml.json").write_text(json.dumps({"absent": True}))
    env = {
        "PYTHONPATH": str(stand_ins / "py"),
        "FAKE_NVML": str(stand_ins / "nvml.json"),
        "PATH": str(stand_ins / "bin"),
        "FAKE_SMI_TEXT": str(DATA / "h100-8x-nvswitch.txt"),
    }
    inp = G.GpuInputs(
        python=Path(sys.executable),
        lock=EnvLock(Path("x"), (), {}),
        target={"interconnect": "pcie"},
        profiles={},
        base_env=env,
    )
    out = G._Out()
    G._interconnect(inp, inp.target, out)
    assert [(c.name, c.level, c.status) for c in out.checks] == [("interconnect", "gpu", "findings")]
    assert [f.kind for f in out.findings] == ["interconnect"]
    assert out.measurements["topology"]["links"]["0-7"] == "NV18"
    assert out.measurements["topology"]["source"] == "nvidia-smi"
    out = G._Out()
    G._interconnect(
        G.GpuInputs(python=Path("/nonexistent/python"), lock=inp.lock, target={}, profiles={}),
        {"interconnect": "nvlink"},
        out,
    )
    assert [(c.name, c.status, c.detail.split(":")[0]) for c in out.checks] == [
        ("interconnect", "skipped", "no GPU link information")
    ]


def _gpus_here() -> int:
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.skipif(_gpus_here() < 1, reason="needs torch with a CUDA GPU in this interpreter")
def test_real_topology_of_this_machine() -> None:
    out = run_probe(
        Path(sys.executable),
        probe_script("gpu_probe.py"),
        args=[json.dumps({"mode": "topology"})],
        env=dict(os.environ),
        timeout_s=120,
    ).data
    assert out["source"] in ("nvml", "nvidia-smi"), out["tried"]
    n = len(out["gpus"])
    assert len(out["links"]) == n * (n - 1) // 2
    assert all(label.startswith(("NV", "PIX", "PXB", "PHB", "NODE", "SYS")) for label in out["links"].values())
