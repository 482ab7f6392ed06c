"""Which CUDA major a distribution is built for, from its name, version and local label.

Used by ``lock`` (a cu12 variant must not pull CUDA 13 runtime wheels, and the reverse: field case
B03) and by ``verify``. Some ``nvidia-*`` wheels carry the CUDA major in their name (``-cu12``,
``-cu13``), some in a local version label (``+cu128``), and some are versioned by library rather than
by CUDA release; only the curated list :data:`VERSION_IS_CUDA_MAJOR` is trusted to have a version
major equal to the CUDA major (NVIDIA's redistributable CUDA toolkit wheels on PyPI, e.g.
``nvidia-cuda-runtime`` 13.0.x ships with CUDA 13.0; ``cuda-python``/``cuda-bindings`` 12.x target
CUDA 12 per their READMEs). Libraries versioned on their own (cuDNN, cuFFT, cuSPARSELt, NCCL,
NVSHMEM) are judged only by a name suffix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

__all__ = ["VERSION_IS_CUDA_MAJOR", "CudaMismatch", "cuda_major", "cuda_mismatches"]

VERSION_IS_CUDA_MAJOR = frozenset(
    {
        "cuda-python",
        "cuda-bindings",
        "nvidia-cuda-runtime",
        "nvidia-cuda-nvrtc",
        "nvidia-cuda-cupti",
        "nvidia-cuda-nvcc",
        "nvidia-cublas",
        "nvidia-nvjitlink",
        "nvidia-nvtx",
        "nvidia-cuda-cccl",
    }
)

_SUFFIX = re.compile(r"-cu(?:da)?(\d{2})x?$")
_LOCAL = re.compile(r"^cu(\d{2})\d*$")


@dataclass(frozen=True, slots=True)
class CudaMismatch:
    """A distribution built for CUDA ``major`` in a variant for CUDA ``wanted`` (majors)."""

    name: str
    version: str
    major: int
    wanted: int
    why: str

    def describe(self) -> str:
        return (
            f"{self.name} {self.version} is built for CUDA {self.major} ({self.why}), the variant is CUDA {self.wanted}"
        )


def cuda_major(name: str, version: str) -> tuple[int, str] | None:
    """``(major, why)`` for a distribution, or None when it says nothing about CUDA.

    >>> cuda_major("nvidia-cublas-cu12", "12.8.4.1")
    (12, 'name suffix -cu12')
    >>> cuda_major("torch", "2.9.1+cu130")
    (13, 'local version label +cu130')
    """
    name = canonicalize_name(name)
    if m := _SUFFIX.search(name):
        return int(m.group(1)), f"name suffix {m.group(0)}"
    try:
        v = Version(version)
    except InvalidVersion:
        return None
    if v.local and (m := _LOCAL.match(v.local)):
        return int(m.group(1)), f"local version label +{v.local}"
    if name in VERSION_IS_CUDA_MAJOR:
        return v.major, f"{name} is versioned by CUDA release"
    return None


def cuda_mismatches(packages: Iterable[tuple[str, str]], cuda: str | None) -> list[CudaMismatch]:
    """Every ``(name, version)`` built for another CUDA major than ``cuda`` (e.g. ``"12.8"``).

    Returns an empty list when ``cuda`` is None (the variant does not say).
    """
    if not cuda:
        return []
    wanted = int(cuda.split(".")[0])
    out = []
    for name, version in packages:
        found = cuda_major(name, version)
        if found is not None and found[0] != wanted:
            out.append(CudaMismatch(canonicalize_name(name), version, found[0], wanted, found[1]))
    return out
