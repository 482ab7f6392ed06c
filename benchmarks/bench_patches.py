"""Benchmark ``envforge apply-patches``: the three sglang patchsets on sglang 0.5.9, whole process.

Per run, in one process each (``python -m envforge apply-patches --site-packages SP ...``):

1. apply (cold): the three sglang patchsets on unpatched files (reverted, untimed, before each run),
   with an empty patch-result cache (``ENVFORGE_CACHE_DIR`` fresh per run): libcst and the pyflakes
   check of every patched module; then apply (warm cache): the same again, results from the cache;
2. re-check (no-op): the same command again, every operation ``already-applied``;
3. reference: ``python -c "import libcst"`` (the floor any libcst tool pays).

Median of N runs (default 7). Targets: apply <= 1.0 s and re-check <= 0.5 s on the dev machine.
The site-packages is real: the whole sglang 0.5.9 and flashinfer-python 0.6.4 wheels from the test
cache (tests/conftest.py), with flashinfer-sm120-trtllm-comm applied once beforehand (patchset 1
requires it).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

from conftest import unpacked_wheel  # noqa: E402 - tests/ and src/ are put on sys.path just above

from envforge.patching import apply, load_patchsets, revert  # noqa: E402

SGLANG = ["sm120-flashinfer-allreduce-fusion", "sm120-torch-symm-mem", "kimik25-eagle3-delegation"]


def _timed(argv: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    return elapsed


def _site_packages(root: Path) -> Path:
    sp = root / "site-packages"
    for dist in (("sglang", "0.5.9"), ("flashinfer-python", "0.6.4")):
        shutil.copytree(unpacked_wheel(*dist), sp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".complete"))
    return sp


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-patches-") as tmp:
        sp = _site_packages(Path(tmp))
        apply(sp, load_patchsets(REPO / "patchsets", ["flashinfer-sm120-trtllm-comm"]))
        cmd = [
            sys.executable,
            "-m",
            "envforge",
            "apply-patches",
            "--project",
            str(REPO),
            "--site-packages",
            str(sp),
            *SGLANG,
        ]
        cold, warm, noop, ref = [], [], [], []
        for i in range(args.runs):
            fresh = {**os.environ, "ENVFORGE_CACHE_DIR": str(Path(tmp) / f"cache-{i}")}  # empty patch cache
            revert(sp, SGLANG)
            cold.append(_timed(cmd, fresh))
            revert(sp, SGLANG)
            warm.append(_timed(cmd, fresh))  # the same files again: results from the patch cache
            noop.append(_timed(cmd, fresh))
            ref.append(_timed([sys.executable, "-c", "import libcst"]))
    c, w, n, r = (statistics.median(x) for x in (cold, warm, noop, ref))
    print(f"apply-patches, 3 sglang patchsets on sglang 0.5.9, whole process, median of {args.runs}:")
    print(f"  apply (cold)       {c:6.3f} s   target <= 1.0 s   {c / r:4.2f}x import libcst  (libcst + pyflakes check)")
    print(f"  apply (warm cache) {w:6.3f} s                     {w / r:4.2f}x import libcst  (patch-result cache)")
    print(f"  re-check (no-op)   {n:6.3f} s   target <= 0.5 s   {n / r:4.2f}x import libcst")
    print(f"  reference: python -c 'import libcst'   {r:6.3f} s")
    return 0 if c <= 1.0 and n <= 0.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
