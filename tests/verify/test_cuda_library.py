"""verify's ``cuda-library`` finding (field case B54) on real ELF files (tests/support/elfbuild.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from envforge.installed.distributions import RecordEntry
from envforge.verify.inventory import Installed
from envforge.verify.static import _linked
from tests.support.elfbuild import CC, build

pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler to build real ELF files")


def test_a_finding_names_the_distribution_file_and_library_and_honours_cuda_exceptions(tmp_path: Path) -> None:
    sp = tmp_path / "sp"
    rel = "kernelkit/_ops.cpython-312-x86_64-linux-gnu.so"
    build(tmp_path / "b12", 12, sp, rel)
    dist = Installed("kernelkit", "0.3.21", sp / "kernelkit-0.3.21.dist-info")
    records = {dist: (RecordEntry(rel, None, None),)}
    (finding,) = _linked(sp, "13.0.1", records, set())
    assert (finding.kind, finding.subject, finding.expected, finding.actual, finding.fix) == (
        "cuda-library",
        f"kernelkit 0.3.21: {rel}",
        "CUDA 13 libraries (the variant's CUDA 13.0.1)",
        'NEEDED libcudart.so.12, CUDA 12: `import` fails with "libcudart.so.12: cannot open shared object file" '
        "unless another CUDA runtime is on the loader's path",
        "install the CUDA 13 build of kernelkit (a +cu13x wheel, or the index that serves it) and re-lock, or list "
        "it in the variant's cuda-exceptions with the reason",
    )
    assert _linked(sp, "13.0.1", records, {"kernelkit"}) == []
    (unowned,) = _linked(sp, "13.0.1", {}, set())
    assert unowned.subject == rel and "of its distribution" in unowned.fix
