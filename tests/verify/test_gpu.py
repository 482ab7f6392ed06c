"""GPU verify: skips on machines without GPUs; a hung or failing collective becomes a finding and
leaves no process behind (field case B12); driver floors, architecture lists, CUDA majors.

The hang tests run the real probe and rank processes in a real venv whose ``torch`` is a stand-in
that hangs (or fails) in ``init_process_group``: the behaviour of NCCL on a PCIe Blackwell pair
(nccl issue 2418) cannot be produced on a CPU machine otherwise.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from envforge.verify import gpu as G
from envforge.verify.inventory import EnvLock
from envforge.verify.versions import cuda_major_of
from tests.support.pythons import python_for

PY312 = str(python_for("3.12"))
MACHINE = {
    "python": "3.12.1",
    "devices_present": True,
    "driver": "580.159.04",
    "torch": "2.11.0+cu130",
    "cuda_available": True,
    "cuda_runtime": "13.0",
    "nccl": "2.28.9",
    "arch_list": ["sm_90", "sm_100", "sm_120"],
    "gpus": [
        {"index": 0, "name": "NVIDIA H200", "capability": "9.0"},
        {"index": 1, "name": "NVIDIA H200", "capability": "9.0"},
    ],
}
PCIE = {"NCCL_BUFFSIZE": "131072", "NCCL_MAX_NCHANNELS": "2"}

STUB_INIT = """import os, time
if os.environ.get("STUB_TORCH_HANG_IMPORT"):
    time.sleep(600)
__version__ = "0.0+stub"
class version:
    cuda = "13.0"
def device(*args):
    return args
class cuda:
    @staticmethod
    def set_device(i):
        pass
"""
STUB_DIST = """import os, time
def init_process_group(*args, **kwargs):
    open(os.path.join(os.environ["STUB_TORCH_PIDS"], str(os.getpid())), "w").close()
    if os.environ.get("STUB_TORCH_MODE") == "fail":
        raise RuntimeError("NCCL error in: ProcessGroupNCCL.cpp: unhandled system error")
    time.sleep(600)
"""


@pytest.fixture
def stub_python(tmp_path: Path) -> Path:
    if not Path(PY312).exists():
        pytest.skip("needs the pyenv Python 3.12.1")
    import uv

    env = tmp_path / "env"
    subprocess.run(
        [uv.find_uv_bin(), "venv", "-q", "--python", PY312, str(env)],
        check=True,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    torch = next(env.glob("lib/python3*/site-packages")) / "torch"
    torch.mkdir()
    (torch / "__init__.py").write_text(STUB_INIT)
    (torch / "distributed.py").write_text(STUB_DIST)
    return env / "bin" / "python"


def _inputs(python: Path, tmp_path: Path, mode: str = "hang", **kw: object) -> G.GpuInputs:
    pids = tmp_path / "pids"
    pids.mkdir(exist_ok=True)
    base = {**os.environ, "STUB_TORCH_PIDS": str(pids), "STUB_TORCH_MODE": mode, "NCCL_NVLS_ENABLE": "0"}
    lock = EnvLock(tmp_path / "pylock.toml", (), {})
    return G.GpuInputs(
        python=python, lock=lock, target={}, profiles={"pcie": PCIE}, base_env=base, installed_profile="pcie", **kw
    )  # type: ignore[arg-type]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()


def test_hung_allreduce_is_killed_and_reported(stub_python: Path, tmp_path: Path) -> None:
    out = G._Out()
    start = time.monotonic()
    G._allreduce(_inputs(stub_python, tmp_path, step_timeout_s=4.0), MACHINE, out)
    assert time.monotonic() - start < 120  # a hung step waits for ever: it was killed
    assert [(f.kind, f.subject, f.expected) for f in out.findings] == [
        ("allreduce-timeout", "all-reduce, profile nccl-default, world size 2", "finishes within 4 s"),
        ("allreduce-timeout", "all-reduce, profile pcie, world size 2", "finishes within 4 s"),
    ]
    assert out.findings[1].actual == (
        "hung and was killed; NCCL 2.28.9, variables {'NCCL_BUFFSIZE': '131072', "
        "'NCCL_MAX_NCHANNELS': '2', 'NCCL_NVLS_ENABLE': '0'}"
    )
    assert "NCCL_BUFFSIZE" not in out.findings[0].actual  # NCCL's default: the profile removed
    pids = [int(p.name) for p in (tmp_path / "pids").iterdir()]
    assert len(pids) == 4  # two ranks per run, each reached init_process_group
    assert not [p for p in pids if _alive(p)]
    assert [c.status for c in out.checks] == ["findings"]


def test_failing_allreduce_reports_the_ranks_error(stub_python: Path, tmp_path: Path) -> None:
    out = G._Out()
    G._allreduce(_inputs(stub_python, tmp_path, mode="fail", step_timeout_s=30.0), MACHINE, out)
    kinds = [f.kind for f in out.findings]
    assert kinds == ["allreduce-failed", "allreduce-failed"]
    assert "rank exit codes [1, 1]" in out.findings[0].actual
    assert "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp: unhandled system error" in out.findings[0].actual


def test_hung_probe_is_killed_at_its_hard_timeout(stub_python: Path, tmp_path: Path) -> None:
    inp = _inputs(stub_python, tmp_path, step_timeout_s=3.0)
    inp = G.GpuInputs(
        **{
            **{f: getattr(inp, f) for f in inp.__dataclass_fields__},
            "base_env": {**inp.base_env, "STUB_TORCH_HANG_IMPORT": "1"},
        }
    )
    res = G.run_gpu(inp)
    assert [(f.kind, f.actual.split(" (process group")[0]) for f in res.findings] == [
        ("gpu-probe-failed", "probe ran past its 3 s limit and was killed")
    ]


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="this machine has an NVIDIA GPU")
def test_gpu_level_is_skipped_without_a_gpu(tmp_path: Path) -> None:
    if not Path(PY312).exists():
        pytest.skip("needs the pyenv Python 3.12.1")
    import uv

    env = tmp_path / "env"
    subprocess.run(
        [uv.find_uv_bin(), "venv", "-q", "--python", PY312, str(env)],
        check=True,
        env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
    )
    res = G.run_gpu(
        G.GpuInputs(
            python=env / "bin" / "python",
            lock=EnvLock(tmp_path / "x", (), {}),
            target={"compute-capability": "12.0"},
            profiles={},
        )
    )
    assert res.findings == ()
    assert [(c.name, c.status, c.detail) for c in res.checks] == [
        ("gpu", "skipped", "no NVIDIA GPU on this machine (no /dev/nvidiactl, no NVML driver)")
    ]


def test_capability_and_count_against_the_recipe_target() -> None:
    lock = EnvLock(Path("pylock.toml"), (), {"cuda": "13.0.1"})
    target = {"gpu": "RTX PRO 6000 Blackwell", "compute-capability": "12.0", "gpus": 8}
    inp = G.GpuInputs(python=Path("python"), lock=lock, target=target, profiles={})
    out = G._Out()
    assert not G._hardware(inp, MACHINE, target, out)
    G._software(inp, MACHINE, out)
    assert [(f.kind, f.subject, f.expected, f.actual) for f in out.findings] == [
        ("gpu-count", "visible GPUs", "8 (RTX PRO 6000 Blackwell)", "2"),
        ("capability", "GPU 0 NVIDIA H200", "12.0 (RTX PRO 6000 Blackwell)", "9.0"),
        ("capability", "GPU 1 NVIDIA H200", "12.0 (RTX PRO 6000 Blackwell)", "9.0"),
        ("gpu-model", "GPU 0 NVIDIA H200", "RTX PRO 6000 Blackwell (recipe target)", "NVIDIA H200"),
        ("gpu-model", "GPU 1 NVIDIA H200", "RTX PRO 6000 Blackwell (recipe target)", "NVIDIA H200"),
    ]
    mine = G._target(
        G.GpuInputs(python=Path("python"), lock=lock, target=target, profiles={}, target_from_machine=True),
        MACHINE,
        out,
    )
    assert (mine["compute-capability"], mine["gpus"]) == ("9.0", 2)
    assert out.notes[0].startswith("target taken from this machine (--target-from-machine): 2x NVIDIA H200")


def test_an_h100_does_not_pass_an_h200_target() -> None:
    """Same capability 9.0, other memory: the recipe's serving flags are sized for the H200."""
    lock = EnvLock(Path("pylock.toml"), (), {"cuda": "13.0.1"})
    h100 = {**MACHINE, "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "capability": "9.0"}]}
    for target, found in (
        (
            {"gpu": "H200", "compute-capability": "9.0", "gpus": 1},
            [("gpu-model", "GPU 0 NVIDIA H100 80GB HBM3", "H200 (recipe target)", "NVIDIA H100 80GB HBM3")],
        ),
        ({"gpu": "H100", "compute-capability": "9.0", "gpus": 1}, []),
        ({"gpu": "nvidia h100 80gb", "gpus": 1}, []),
        (
            {"gpu": "80GB H100", "gpus": 1},
            [("gpu-model", "GPU 0 NVIDIA H100 80GB HBM3", "80GB H100 (recipe target)", "NVIDIA H100 80GB HBM3")],
        ),
        ({"compute-capability": "9.0", "gpus": 1}, []),
    ):
        out = G._Out()
        G._hardware(G.GpuInputs(python=Path("python"), lock=lock, target=target, profiles={}), h100, target, out)
        assert [(f.kind, f.subject, f.expected, f.actual) for f in out.findings] == found, target
    assert [
        G.gpu_model_matches(t, "NVIDIA RTX PRO 6000 Blackwell Server Edition")
        for t in ("RTX PRO 6000 Blackwell", "RTX 6000", "RTX PRO 6000 Ada", "", "Blackwell RTX")
    ] == [True, True, False, False, False]


def test_the_recipes_driver_floor_is_read_when_higher() -> None:
    machine = {**MACHINE, "driver": "580.65.06", "cuda_runtime": "12.8"}
    lock = EnvLock(Path("pylock.toml"), (), {"cuda": "12.8"})
    for minimum, found in (
        ("580.82", [("driver-floor", ">= 580.82 (the recipe's [target] cuda-driver-min)", "580.65.06")]),
        ("570.0", []),
        ("580.65.06", []),
        (" ", []),
    ):
        out = G._Out()
        G._software(
            G.GpuInputs(python=Path("python"), lock=lock, target={"cuda-driver-min": minimum}, profiles={}),
            machine,
            out,
        )
        assert [(f.kind, f.expected, f.actual) for f in out.findings] == found, minimum
    out = G._Out()  # no floor known for the runtime: the recipe's is the floor
    G._software(
        G.GpuInputs(python=Path("python"), lock=lock, target={"cuda-driver-min": "999.1"}, profiles={}),
        {**machine, "cuda_runtime": ""},
        out,
    )
    assert [(f.kind, f.expected) for f in out.findings] == [
        ("cuda-runtime", "12.8 (variant)"),
        ("driver-floor", ">= 999.1 (the recipe's [target] cuda-driver-min)"),
    ]


def test_driver_floor_and_cuda_runtime_findings() -> None:
    machine = {**MACHINE, "driver": "570.86.15", "cuda_runtime": "12.9"}
    lock = EnvLock(Path("pylock.toml"), (), {"cuda": "13.0.1"})
    out = G._Out()
    G._software(G.GpuInputs(python=Path("python"), lock=lock, target={}, profiles={}), machine, out)
    assert [(f.kind, f.expected, f.actual) for f in out.findings] == [
        ("cuda-runtime", "13.0.1 (variant)", "12.9"),
        ("driver-floor", ">= 575.51.03 (CUDA 12.9, NVIDIA release notes)", "570.86.15"),
    ]


@pytest.mark.parametrize(
    ("cc", "arch", "ok"),
    [
        ("12.0", ["sm_90", "sm_100"], False),
        ("12.0", ["sm_120"], True),
        ("12.1", ["sm_120"], True),
        ("9.0", ["sm_90a"], True),
        ("10.0", ["sm_90a", "compute_90"], True),
        ("8.9", ["sm_86"], True),
        ("12.0", ["sm_100a"], False),
    ],
)
def test_arch_list_compatibility(cc: str, arch: list[str], ok: bool) -> None:
    assert G._arch_ok(cc, arch) is ok


@pytest.mark.parametrize(
    ("cuda", "floor"), [("13.0", "580.65.06"), ("12.8", "570.26"), ("13.9", "580.65.06"), ("12.6.3", "560.28.03")]
)
def test_driver_floors(cuda: str, floor: str) -> None:
    assert G.driver_floor(cuda) == floor


@pytest.mark.parametrize(
    ("name", "version", "major"),
    [
        ("nvidia-nccl-cu12", "2.27.3", 12),
        ("cupy-cuda13x", "14.0", 13),
        ("torch", "2.9.1+cu130", 13),
        ("torch", "2.9.1+cu128", 12),
        ("cuda-python", "12.9.2", 12),
        ("nvidia-cufft", "12.0.0.15", None),
        ("nvidia-cudnn-cu13", "9.13.0.50", 13),
        ("sglang", "0.5.9", None),
    ],
)
def test_cuda_major_of(name: str, version: str, major: int | None) -> None:
    assert cuda_major_of(name, version) == major


def test_profile_slower_than_default_is_a_finding() -> None:
    rows = lambda us: [
        {"bytes": b, "us": u, "ok": True, "us_runs": [u], "iters": 20}  # noqa: E731
        for b, u in zip((43008, 1 << 20, 16 << 20), us, strict=True)
    ]
    runs = {
        "nccl-default": {"rows": rows((24.4, 26.1, 75.1))},
        "pcie": {"rows": rows((27.6, 85.0, 975.3)), "env": PCIE},
    }
    inp = G.GpuInputs(
        python=Path("python"),
        lock=EnvLock(Path("x"), (), {}),
        target={},
        profiles={"pcie": PCIE},
        installed_profile="pcie",
    )
    found = G._slower(runs, inp)
    assert [(f.subject, f.actual.split(" with")[0]) for f in found] == [
        ("profile pcie, all-reduce 1048576 bytes", "85.0 us (3.26x)"),
        ("profile pcie, all-reduce 16777216 bytes", "975.3 us (12.99x)"),
    ]
    table = G._table(runs, 2, MACHINE, (43008, 1 << 20, 16 << 20))
    assert table["per_step_budget"]["by_profile_ms"] == {"nccl-default": 2.977, "pcie": 3.367}


def _gpus_here() -> int:
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return 0
    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.skipif(_gpus_here() < 2, reason="needs torch with 2 or more CUDA GPUs in this interpreter")
def test_real_allreduce_with_and_without_the_profile(tmp_path: Path) -> None:
    import sys

    inp = G.GpuInputs(
        python=Path(sys.executable),
        lock=EnvLock(tmp_path / "x", (), {}),
        target={"compute-capability": "12.0", "gpus": 8},
        profiles={"pcie": PCIE},
        target_from_machine=True,
        base_env=dict(os.environ),
        sizes=(43008, 1 << 20),
        installed_profile="pcie",
    )
    res = G.run_gpu(inp)
    assert not [f for f in res.findings if f.kind in ("allreduce-failed", "allreduce-timeout", "gpu-probe-failed")]
    ar = res.measurements["allreduce"]
    assert ar["world_size"] == _gpus_here()
    for name in ("nccl-default", "pcie"):
        assert all(v > 0 for v in ar["profiles"][name]["us"].values())
    assert "NCCL_MAX_NCHANNELS" not in ar["profiles"]["nccl-default"]["env"]
    assert ar["profiles"]["pcie"]["env"]["NCCL_MAX_NCHANNELS"] == "2"


def test_cuda_unavailable_with_gpus_present() -> None:
    out = G._Out()
    machine = {
        **MACHINE,
        "cuda_available": False,
        "gpus": [],
        "torch_error": "ModuleNotFoundError: No module named 'torch'",
    }
    assert not G._usable(machine, out)
    assert [(f.kind, f.subject, f.actual) for f in out.findings] == [
        ("cuda-unavailable", "torch", "ModuleNotFoundError: No module named 'torch'")
    ]
    assert G._usable(MACHINE, G._Out())


def test_torch_built_without_the_target_architecture() -> None:
    machine = {**MACHINE, "arch_list": ["sm_80", "sm_90"]}
    target = {"gpu": "RTX PRO 6000 Blackwell", "compute-capability": "12.0"}
    out = G._Out()
    inp = G.GpuInputs(python=Path("python"), lock=EnvLock(Path("x"), (), {}), target=target, profiles={})
    G._hardware(inp, machine, target, out)
    assert [(f.kind, f.subject, f.expected, f.actual) for f in out.findings if f.kind == "arch-list"] == [
        (
            "arch-list",
            "recipe target RTX PRO 6000 Blackwell",
            "kernels for sm_120 in torch.cuda.get_arch_list()",
            "sm_80, sm_90",
        )
    ]


def test_failing_native_op_is_a_finding_and_absent_packages_are_not(stub_python: Path, tmp_path: Path) -> None:
    out = G._Out()
    G._ops(_inputs(stub_python, tmp_path, step_timeout_s=30.0), out)
    assert [(f.kind, f.subject, f.actual) for f in out.findings] == [
        ("native-op", "torch", "AttributeError: module 'torch' has no attribute 'randn'")
    ]
    assert [r["package"] for r in out.measurements["native_ops"]] == ["torch"]
