"""Slim site-packages trees of real released code for the patching tests (no pytest dependency
beyond the wheel cache in conftest).

A slim tree holds the ``*.dist-info`` of each distribution and only the files the project's
patchsets read or write, copied byte for byte from the real wheels unpacked in the test cache:
the code under test is the released code, and a test copies a few hundred kilobytes instead of a
whole wheel.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import unpacked_wheel

REPO = Path(__file__).resolve().parents[2]
PATCHSETS = REPO / "patchsets"

FILES = {
    "sglang": (
        "sglang/srt/layers/communicator.py",
        "sglang/srt/distributed/device_communicators/all_reduce_utils.py",
        "sglang/srt/distributed/device_communicators/torch_symm_mem.py",
        "sglang/srt/models/kimi_k25.py",
        "sglang/srt/models/deepseek_v2.py",
        "sglang/srt/layers/layer_boundary/residual/add_norm.py",
        "sglang/srt/layers/flashinfer_comm_fusion.py",
    ),
    "flashinfer-python": ("flashinfer/jit/comm.py",),
}

SGLANG_PATCHSETS = ("sm120-flashinfer-allreduce-fusion", "sm120-torch-symm-mem", "kimik25-eagle3-delegation")
ALL_PATCHSETS = ("flashinfer-sm120-trtllm-comm", *SGLANG_PATCHSETS)


def slim_tree(target: Path, *dists: tuple[str, str]) -> Path:
    """Copy the dist-info and the patched files of each ``(distribution, version)`` into
    ``target`` (created) and return it. Files a release lacks are simply absent."""
    target.mkdir(parents=True, exist_ok=True)
    for name, version in dists:
        src = unpacked_wheel(name, version)
        for info in src.glob("*.dist-info"):
            shutil.copytree(info, target / info.name, dirs_exist_ok=True)
        for rel in FILES[name]:
            if (src / rel).is_file():
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src / rel, target / rel)
    return target


def project_tree(root: Path, patchsets: Path | None = None) -> Path:
    """An envforge project at ``root`` (created) for the ``patches`` commands: an empty ``recipes/``
    and ``patchsets/``, a copy of the ``patchsets`` directory when one is given; returns ``root``."""
    (root / "recipes").mkdir(parents=True)
    if patchsets is None:
        (root / "patchsets").mkdir()
    else:
        shutil.copytree(patchsets, root / "patchsets")
    return root
