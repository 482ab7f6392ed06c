"""Real ELF files built with the system C compiler for the CUDA-link tests (field case B54): a stand-in
``libcudart.so.12`` / ``.so.13`` (right soname) and an extension module linked against it, so the
``DT_NEEDED`` entry is the linker's own."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CC = shutil.which("cc") or shutil.which("gcc")

RUNTIME = "int cudaRuntimeGetVersion(int *v){*v=%d;return 0;}\n"
OPS = "extern int cudaRuntimeGetVersion(int*); int kernel_cuda_version(void){int v=0; cudaRuntimeGetVersion(&v); return v;}\n"


def build(tmp: Path, major: int, sp: Path, rel: str) -> Path:
    """``sp/rel``: an extension linked against a ``libcudart.so.<major>`` built in ``tmp``."""
    rt_dir = tmp / f"cuda{major}"
    rt_dir.mkdir(parents=True, exist_ok=True)
    (rt_dir / "rt.c").write_text(RUNTIME % (major * 1000))
    lib = rt_dir / f"libcudart.so.{major}"
    subprocess.run(
        [CC, "-shared", "-fPIC", f"-Wl,-soname,libcudart.so.{major}", "-o", str(lib), str(rt_dir / "rt.c")], check=True
    )
    (rt_dir / "libcudart.so").symlink_to(lib.name)
    (tmp / "ops.c").write_text(OPS)
    out = sp / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(out), str(tmp / "ops.c"), f"-L{rt_dir}", "-lcudart"], check=True)
    return out
