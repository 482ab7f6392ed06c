"""Rebuild the test locks under tests/data/locks/ from the real uv output in sources/.

Run from the repository root: ``python tests/data/locks/make_locks.py``. Deterministic: same sources,
same bytes. What is real and what is derived is written in tests/data/locks/README.md.

* ``sglang-0.5.9/pylock.kimi-k25-sm120-cu128.toml``: ``sources/pylock.sglang-0-5-9.toml`` (real uv
  output) plus a ``[tool.envforge]`` table following docs/architecture.md.
* ``sglang-0.5.10/pylock.kimi-k25-sm120-cu128.toml``: the same for sglang 0.5.10.
* ``sglang-0.5.9/pylock.kimi-k25-sm120-cu130.toml``: DERIVED from the cu128 lock: the fifteen
  ``nvidia-*-cu12`` runtime wheels replaced by their CUDA 13 counterparts and flashinfer-python /
  flashinfer-cubin moved to 0.6.4 (real PyPI entries from ``sources/pylock.cu13-pieces.toml``), and
  torch, torchvision, torchaudio, sgl-kernel, flashinfer-jit-cache given ``+cu130`` entries whose
  URLs follow their indexes' real file-name patterns but whose hashes are synthetic (those indexes
  are unreachable from the machine that made this data).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

HERE = Path(__file__).parents[1]
SRC = HERE / "sources"
RECIPE = "kimi-k25-sm120"

CU12 = [f"nvidia-{n}-cu12" for n in (
    "cublas", "cuda-cupti", "cuda-nvrtc", "cuda-runtime", "cudnn", "cufft", "cufile", "curand",
    "cusolver", "cusparse", "cusparselt", "nccl", "nvjitlink", "nvshmem", "nvtx")]

PYTORCH_CU130 = "https://download.pytorch.org/whl/cu130"
SGL_CU130 = "https://docs.sglang.ai/whl/cu130"
FLASHINFER_CU130 = "https://flashinfer.ai/whl/cu130"

# name, version, index, wheel URL (the real file-name pattern of that index); hashes synthetic.
CU130_WHEELS = [
    ("torch", "2.9.1+cu130", PYTORCH_CU130,
     f"{PYTORCH_CU130}/torch-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"),
    ("torchvision", "0.24.1+cu130", PYTORCH_CU130,
     f"{PYTORCH_CU130}/torchvision-0.24.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"),
    ("torchaudio", "2.9.1+cu130", PYTORCH_CU130,
     f"{PYTORCH_CU130}/torchaudio-2.9.1%2Bcu130-cp312-cp312-manylinux_2_28_x86_64.whl"),
    ("sgl-kernel", "0.3.21+cu130", SGL_CU130,
     "https://github.com/sgl-project/whl/releases/download/v0.3.21/"
     "sgl_kernel-0.3.21%2Bcu130-cp310-abi3-manylinux2014_x86_64.whl"),
    ("flashinfer-jit-cache", "0.6.4+cu130", FLASHINFER_CU130,
     "https://github.com/flashinfer-ai/flashinfer/releases/download/v0.6.4/"
     "flashinfer_jit_cache-0.6.4%2Bcu130-cp39-abi3-manylinux_2_28_x86_64.whl"),
]


def blocks(text: str) -> tuple[str, dict[str, str]]:
    """Split uv's pylock text into its header and ``{name: '[[packages]] block'}``."""
    head, *rest = text.split("\n[[packages]]\n")
    out = {}
    for block in rest:
        name = block.split('"', 2)[1]
        out[name] = "[[packages]]\n" + block.strip("\n") + "\n"
    return head.rstrip("\n") + "\n", out


def synthetic_block(name: str, version: str, index: str, url: str) -> str:
    digest = hashlib.sha256(f"envforge derived test data: {url}".encode()).hexdigest()
    return (f'[[packages]]\nname = "{name}"\nversion = "{version}"\nindex = "{index}"\n'
            f'wheels = [{{ url = "{url}", hashes = {{ sha256 = "{digest}" }} }}]\n')


def tool_table(variant: str, cuda: str, sglang: str, indexes: str, overrides: str) -> str:
    recipe_digest = hashlib.sha256(f"{RECIPE} sglang{sglang}".encode()).hexdigest()  # synthetic
    patch = {p: hashlib.sha256(f"{p} v1".encode()).hexdigest() for p in (  # synthetic
        "flashinfer-sm120-trtllm-comm", "sm120-flashinfer-allreduce-fusion", "sm120-torch-symm-mem",
        "kimik25-eagle3-delegation")}
    patchsets = "".join(f'\n[[tool.envforge.patchsets]]\nid = "{k}"\ndigest = "sha256:{v}"\n'
                        for k, v in patch.items())
    return f'''
[tool.envforge]
schema = 1
recipe = "{RECIPE}"
variant = "{variant}"
recipe-digest = "sha256:{recipe_digest}"
cuda = "{cuda}"
env-profile = "pcie"

[tool.envforge.target]
gpu = "RTX PRO 6000 Blackwell"
compute-capability = "12.0"
gpus = 8
interconnect = "pcie"

[tool.envforge.inputs]
python = "3.12"
resolution = "highest"
platform = "x86_64-manylinux_2_28"
packages = {{ sglang = "=={sglang}", torch = "==2.9.1", sgl-kernel = "==0.3.21" }}

[tool.envforge.env]
NCCL_BUFFSIZE = "131072"
NCCL_MAX_NCHANNELS = "2"
{indexes}{overrides}{patchsets}'''


PYPI_INDEX = '\n[[tool.envforge.indexes]]\nname = "pypi"\nurl = "https://pypi.org/simple"\npackages = []\n'
CU130_INDEXES = PYPI_INDEX + f'''
[[tool.envforge.indexes]]
name = "flashinfer-cu130"
url = "{FLASHINFER_CU130}"
packages = ["flashinfer-jit-cache"]

[[tool.envforge.indexes]]
name = "pytorch-cu130"
url = "{PYTORCH_CU130}"
packages = ["torch", "torchaudio", "torchvision"]

[[tool.envforge.indexes]]
name = "sgl-kernel-cu130"
url = "{SGL_CU130}"
packages = ["sgl-kernel"]
'''
CU130_OVERRIDES = '''
[[tool.envforge.overrides]]
name = "flashinfer-cubin"
version = "==0.6.4"
reason = "keep the flashinfer family at one version (field case B05); sglang 0.5.9 pins ==0.6.3"

[[tool.envforge.overrides]]
name = "flashinfer-python"
version = "==0.6.4"
reason = "SM120 allreduce fusion and CUDA 13 fixes; sglang 0.5.9 pins ==0.6.3"
'''


def write(path: Path, head: str, pkgs: dict[str, str], tool: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "\n".join(pkgs[name] for name in sorted(pkgs))
    path.write_text(head + "\n" + body + tool)


def main() -> None:
    head, cu128 = blocks((SRC / "pylock.sglang-0-5-9.toml").read_text())
    write(HERE / "sglang-0.5.9" / f"pylock.{RECIPE}-cu128.toml", head, cu128,
          tool_table("cu128", "12.8", "0.5.9", PYPI_INDEX, ""))
    head10, next_ = blocks((SRC / "pylock.sglang-0-5-10.toml").read_text())
    write(HERE / "sglang-0.5.10" / f"pylock.{RECIPE}-cu128.toml", head10, next_,
          tool_table("cu128", "12.8", "0.5.10", PYPI_INDEX, ""))
    _, pieces = blocks((SRC / "pylock.cu13-pieces.toml").read_text())
    cu130 = {k: v for k, v in cu128.items() if k not in CU12}
    cu130.update(pieces)
    for name, version, index, url in CU130_WHEELS:
        cu130[name] = synthetic_block(name, version, index, url)
    write(HERE / "sglang-0.5.9" / f"pylock.{RECIPE}-cu130.toml", head, cu130,
          tool_table("cu130", "13.0.1", "0.5.9", CU130_INDEXES, CU130_OVERRIDES))


if __name__ == "__main__":
    main()
