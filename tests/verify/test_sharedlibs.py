"""Shared objects linked against another CUDA major (field case B54): real ELF files built here
with the system C compiler: a stand-in ``libcudart.so.12`` / ``.so.13`` (right soname) and an
extension module linked against it, so the ``DT_NEEDED`` entry is the linker's own."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from envforge.verify.sharedlibs import CudaLink, cuda_links, other_major_links
from envforge.verify.static import _linked
from envforge.verify.inventory import Installed
from envforge.installed.distributions import RecordEntry

CC = shutil.which("cc") or shutil.which("gcc")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler to build real ELF files")

RUNTIME = "int cudaRuntimeGetVersion(int *v){*v=%d;return 0;}\n"
OPS = "extern int cudaRuntimeGetVersion(int*); int kernel_cuda_version(void){int v=0; cudaRuntimeGetVersion(&v); return v;}\n"


def build(tmp: Path, major: int, sp: Path, rel: str) -> Path:
    """``sp/rel``: an extension linked against a ``libcudart.so.<major>`` built in ``tmp``."""
    rt_dir = tmp / f"cuda{major}"
    rt_dir.mkdir(parents=True, exist_ok=True)
    (rt_dir / "rt.c").write_text(RUNTIME % (major * 1000))
    lib = rt_dir / f"libcudart.so.{major}"
    subprocess.run([CC, "-shared", "-fPIC", f"-Wl,-soname,libcudart.so.{major}", "-o", str(lib), str(rt_dir / "rt.c")],
                   check=True)
    (rt_dir / "libcudart.so").symlink_to(lib.name)
    (tmp / "ops.c").write_text(OPS)
    out = sp / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(out), str(tmp / "ops.c"), f"-L{rt_dir}", "-lcudart"],
                   check=True)
    return out


def test_the_needed_cuda_runtime_is_read_from_the_elf(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    build(tmp_path / "b12", 12, sp, "kernelkit/_ops.cpython-312-x86_64-linux-gnu.so")
    build(tmp_path / "b13", 13, sp, "other/_C.abi3.so")
    (sp / "kernelkit" / "fake.so").write_text("not an ELF file")  # a text file with the suffix: not judged
    (sp / "kernelkit" / "cut.so").write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 9)  # a truncated ELF header
    (sp / "kernelkit" / "link.so").symlink_to("_ops.cpython-312-x86_64-linux-gnu.so")
    assert cuda_links(sp) == [CudaLink("kernelkit/_ops.cpython-312-x86_64-linux-gnu.so", "libcudart.so.12", 12),
                              CudaLink("other/_C.abi3.so", "libcudart.so.13", 13)]
    assert other_major_links(sp, "13.0.1") == [
        CudaLink("kernelkit/_ops.cpython-312-x86_64-linux-gnu.so", "libcudart.so.12", 12)]
    assert other_major_links(sp, "12.8") == [CudaLink("other/_C.abi3.so", "libcudart.so.13", 13)]
    assert other_major_links(sp, "cpu") == []
    # what the finding predicts: the loader cannot open it without that runtime on its path
    import ctypes
    with pytest.raises(OSError, match="libcudart.so.12: cannot open shared object file"):
        ctypes.CDLL(str(sp / "kernelkit" / "_ops.cpython-312-x86_64-linux-gnu.so"))


def test_a_finding_names_the_distribution_file_and_library_and_honours_cuda_exceptions(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    rel = "kernelkit/_ops.cpython-312-x86_64-linux-gnu.so"
    build(tmp_path / "b12", 12, sp, rel)
    dist = Installed("kernelkit", "0.3.21", sp / "kernelkit-0.3.21.dist-info")
    records = {dist: (RecordEntry(rel, None, None),)}
    (finding,) = _linked(sp, "13.0.1", records, set())
    assert (finding.kind, finding.subject, finding.expected, finding.actual, finding.fix) == (
        "cuda-library", f"kernelkit 0.3.21: {rel}", "CUDA 13 libraries (the variant's CUDA 13.0.1)",
        "NEEDED libcudart.so.12, CUDA 12: `import` fails with \"libcudart.so.12: cannot open shared object file\" "
        "unless another CUDA runtime is on the loader's path",
        "install the CUDA 13 build of kernelkit (a +cu13x wheel, or the index that serves it) and re-lock, or list "
        "it in the variant's cuda-exceptions with the reason")
    assert _linked(sp, "13.0.1", records, {"kernelkit"}) == []
    (unowned,) = _linked(sp, "13.0.1", {}, set())
    assert unowned.subject == rel and "of its distribution" in unowned.fix
