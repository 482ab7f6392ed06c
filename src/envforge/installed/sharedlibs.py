"""The CUDA libraries extension modules link, against the variant's CUDA major (field case B54).

A kernel wheel without a ``+cu12x`` local version label can still be built for one CUDA major:
its extension modules' ``DT_NEEDED`` entries say so (``libcudart.so.12``). Locked into a CUDA 13
variant it passes every check that judges names and labels, and ``import`` fails with
``libcudart.so.12: cannot open shared object file`` (sglang#18203). The ELF dynamic section is read
with pyelftools; nothing is loaded.

The libraries judged are those whose soname major is the CUDA toolkit's major in CUDA 12 and 13:
``libcudart``, ``libcublas``, ``libcublasLt``, ``libnvrtc``, ``libnvJitLink`` (the CUDA Toolkit's
library sonames, ``lib<name>.so.<CUDA major>``). Others (cuFFT ``.so.11`` in CUDA 12, cuDNN, NCCL)
have majors of their own and are not judged here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CudaLink", "cuda_links", "link_notes", "needed", "other_major_links"]

_CUDA_SONAME = re.compile(r"lib(cudart|cublas|cublasLt|nvrtc|nvJitLink)\.so\.(\d+)$")
_ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True, slots=True)
class CudaLink:
    """Extension ``path`` (relative to site-packages) needs ``library``, of CUDA major ``major``."""

    path: str
    library: str
    major: int


def needed(path: Path) -> list[str]:
    """The ``DT_NEEDED`` entries of the ELF file ``path`` (sonames, in file order); [] for anything
    that is not a readable ELF shared object. Read with pyelftools; nothing is loaded."""
    from elftools.common.exceptions import ELFError  # lazy: only verify and build read ELF files
    from elftools.elf.dynamic import DynamicSection  # lazy: as above
    from elftools.elf.elffile import ELFFile  # lazy: as above

    try:
        with path.open("rb") as fh:
            if fh.read(4) != _ELF_MAGIC:
                return []
            fh.seek(0)
            elf = ELFFile(fh)
            return [
                str(getattr(tag, "needed"))
                for section in elf.iter_sections()
                if isinstance(section, DynamicSection)
                for tag in section.iter_tags()
                if tag.entry.d_tag == "DT_NEEDED"
            ]
    except (OSError, ELFError, ValueError, KeyError, AttributeError):
        return []


def _extensions(site_packages: Path) -> Iterator[Path]:
    for path in sorted(site_packages.rglob("*.so*")):
        if path.is_file() and not path.is_symlink() and (path.suffix == ".so" or ".so." in path.name):
            yield path


def cuda_links(site_packages: Path) -> list[CudaLink]:
    """Every judged CUDA library (module docstring) a shared object under ``site_packages`` needs."""
    out = []
    for path in _extensions(site_packages):
        for library in needed(path):
            m = _CUDA_SONAME.match(library)
            if m:
                out.append(CudaLink(path.relative_to(site_packages).as_posix(), library, int(m.group(2))))
    return out


def other_major_links(site_packages: Path, cuda: str) -> list[CudaLink]:
    """The links of :func:`cuda_links` to another CUDA major than ``cuda``'s (the variant's
    ``13.0.1``); [] when ``cuda`` has no major."""
    head = cuda.split(".", 1)[0]
    if not head.isdigit():
        return []
    return [link for link in cuda_links(site_packages) if link.major != int(head)]


def link_notes(site_packages: Path, cuda: str | None) -> list[str]:
    """What ``build`` notes for :func:`other_major_links` (verify's ``cuda-library`` finding says the
    same with its fix): ``"cuda-library: sgl_kernel/common_ops.abi3.so needs libcudart.so.12 (CUDA 12),
    the variant is CUDA 13.0.1: its import fails"``; [] without a CUDA release."""
    if not cuda:
        return []
    return [
        f"cuda-library: {link.path} needs {link.library} (CUDA {link.major}), the variant is CUDA {cuda}: its "
        "import fails unless another CUDA runtime is on the loader's path"
        for link in other_major_links(site_packages, cuda)
    ]
