"""verify names the libnccl a process really loaded (field case B31), on a CPU machine.

The mechanism, for real: two copies of one small shared library (compiled here with the system's
cc, SONAME ``libnccl.so.2``), one where the environment's nvidia-nccl wheel puts it
(``site-packages/nvidia/nccl/lib``), one on ``LD_LIBRARY_PATH``. A process that loads
``libnccl.so.2`` by its SONAME, as libtorch_cuda's DT_NEEDED entry does, gets whichever copy the
dynamic loader finds first; the GPU probe's ``libraries()`` reads ``/proc/self/maps`` and says
which. No GPU or NCCL is needed: the loader does the same with any library.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.verify.nccllibrary import nccl_library_findings
from envforge.verify.static import probe_script

PROBE = Path(__file__).resolve().parents[2] / "src" / "envforge" / "verify" / "gpu_probe.py"


@pytest.fixture
def two_copies(tmp_path: Path) -> tuple[Path, Path, Path]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the stand-in library")
    site = tmp_path / "site"
    wheel = site / "nvidia" / "nccl" / "lib"
    other = tmp_path / "opt" / "nccl" / "lib"
    wheel.mkdir(parents=True)
    other.mkdir(parents=True)
    src = tmp_path / "nccl.c"
    src.write_text("int ncclGetVersion(int *v) { *v = 22705; return 0; }\n")
    subprocess.run(
        [cc, "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "-o", str(wheel / "libnccl.so.2"), str(src)],
        check=True,
        capture_output=True,
    )
    shutil.copy2(wheel / "libnccl.so.2", other / "libnccl.so.2")
    return site, wheel / "libnccl.so.2", other / "libnccl.so.2"


def probe(site: Path, load: list[str], ld_path: Path | None) -> dict[str, list[str]]:
    code = (
        "import ctypes, json, runpy, sys\n"
        f"sys.path.insert(0, {str(site)!r})\n"
        f"libraries = runpy.run_path({str(PROBE)!r})['libraries']\n"
        f"for name in {load!r}:\n"
        "    ctypes.CDLL(name)\n"
        "print(json.dumps(libraries('libnccl.so')))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if ld_path is not None:
        env["LD_LIBRARY_PATH"] = str(ld_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_the_probe_reads_the_copy_the_loader_mapped(two_copies: tuple[Path, Path, Path]) -> None:
    site, wheel_copy, other_copy = two_copies
    # LD_LIBRARY_PATH shadows the wheel's copy for a load by SONAME.
    libs = probe(site, ["libnccl.so.2"], other_copy.parent)
    assert libs["loaded"] == [str(other_copy)]
    assert libs["candidates"][:2] == [str(other_copy), str(wheel_copy)]
    found = nccl_library_findings(libs, site)
    assert [(f.kind, f.subject, f.expected, f.actual) for f in found] == [
        ("nccl-library", "libnccl", f"{wheel_copy} (the lock's nvidia-nccl wheel)", f"loaded {other_copy}")
    ]
    # The wheel's own copy, loaded by path as torch's RPATH does: nothing to say.
    libs = probe(site, [str(wheel_copy)], other_copy.parent)
    assert libs["loaded"] == [str(wheel_copy)]
    assert nccl_library_findings(libs, site) == []


def test_two_copies_in_one_process_is_a_finding(two_copies: tuple[Path, Path, Path]) -> None:
    site, wheel_copy, other_copy = two_copies
    libs = probe(site, [str(wheel_copy), str(other_copy)], None)
    both = sorted([str(wheel_copy), str(other_copy)])
    assert libs["loaded"] == both
    found = nccl_library_findings(libs, site)
    assert [(f.kind, f.expected, f.actual) for f in found] == [
        ("nccl-library", "one libnccl in the process", f"loaded: {both[0]}, {both[1]}")
    ]


def test_one_copy_nothing_loaded_nothing_to_say(tmp_path: Path) -> None:
    assert nccl_library_findings({"loaded": [], "candidates": ["/a/libnccl.so.2"]}, tmp_path) == []
    assert nccl_library_findings({}, None) == []
    assert "def libraries(prefix):" in probe_script("gpu_probe.py")
