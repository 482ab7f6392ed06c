"""Shared objects linked against another CUDA major (field case B54): real ELF files built here
with the system C compiler: a stand-in ``libcudart.so.12`` / ``.so.13`` (right soname) and an
extension module linked against it, so the ``DT_NEEDED`` entry is the linker's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.installed.sharedlibs import CudaLink, cuda_links, link_notes, other_major_links
from tests.support.elfbuild import CC, build

pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler to build real ELF files")


def test_the_needed_cuda_runtime_is_read_from_the_elf(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    build(tmp_path / "b12", 12, sp, "kernelkit/_ops.cpython-312-x86_64-linux-gnu.so")
    build(tmp_path / "b13", 13, sp, "other/_C.abi3.so")
    (sp / "kernelkit" / "fake.so").write_text("not an ELF file")  # a text file with the suffix: not judged
    (sp / "kernelkit" / "cut.so").write_bytes(b"\x7fELF\x02\x01\x01" + b"\x00" * 9)  # a truncated ELF header
    (sp / "kernelkit" / "link.so").symlink_to("_ops.cpython-312-x86_64-linux-gnu.so")
    assert cuda_links(sp) == [
        CudaLink("kernelkit/_ops.cpython-312-x86_64-linux-gnu.so", "libcudart.so.12", 12),
        CudaLink("other/_C.abi3.so", "libcudart.so.13", 13),
    ]
    assert other_major_links(sp, "13.0.1") == [
        CudaLink("kernelkit/_ops.cpython-312-x86_64-linux-gnu.so", "libcudart.so.12", 12)
    ]
    assert other_major_links(sp, "12.8") == [CudaLink("other/_C.abi3.so", "libcudart.so.13", 13)]
    assert other_major_links(sp, "cpu") == []
    # what the finding predicts: the loader cannot open it without that runtime on its path
    import ctypes

    with pytest.raises(OSError, match="libcudart.so.12: cannot open shared object file"):
        ctypes.CDLL(str(sp / "kernelkit" / "_ops.cpython-312-x86_64-linux-gnu.so"))


def test_build_notes_name_each_extension_of_another_major(tmp_path: Path) -> None:
    """What `build` prints (B54 at build, not only at verify)."""
    sp = tmp_path / "sp"
    build(tmp_path / "b12", 12, sp, "kernelkit/_ops.abi3.so")
    assert link_notes(sp, "13.0.1") == [
        "cuda-library: kernelkit/_ops.abi3.so needs libcudart.so.12 (CUDA 12), the variant is CUDA 13.0.1: its import "
        "fails unless another CUDA runtime is on the loader's path"
    ]
    assert link_notes(sp, "12.8") == [] and link_notes(sp, None) == []
